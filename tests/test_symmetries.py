"""symmetries.py: the dihedral group D4 on planes and policies, checked against np.rot90."""
import numpy as np
import pytest

from training import symmetries
from training.symmetries import (compose, inverse, source_points, take_planes, take_policy,
                                 transform_planes, transform_points, transform_policy)


def reference_plane(plane, k):
    """The documented convention, one (N, N, ...) sample at a time."""
    return np.rot90(np.swapaxes(plane, 0, 1) if k >= 4 else plane, k % 4, axes=(0, 1))


def reference_policy(policy, k, board_size):
    board = policy[:-1].reshape(board_size, board_size)
    return np.append(reference_plane(board, k).ravel(), policy[-1])


def asymmetric_planes(batch, board_size, channels, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((batch, board_size, board_size, channels)).astype(np.float32)


def all_images(board_size):
    """The 8 images of one board whose points are all labelled differently."""
    board = np.arange(board_size * board_size, dtype=np.float32)
    board = board.reshape(1, board_size, board_size, 1)
    return [transform_planes(board, k)[0, :, :, 0] for k in range(8)]


@pytest.mark.parametrize("board_size", [2, 5, 9])
def test_eight_distinct_images_of_an_asymmetric_board(board_size):
    images = all_images(board_size)
    assert len({image.tobytes() for image in images}) == 8


@pytest.mark.parametrize("board_size", [3, 7])
def test_composition_closes_and_matches_sequential_application(board_size):
    planes = asymmetric_planes(1, board_size, 2)
    images = {transform_planes(planes, k).tobytes(): k for k in range(8)}
    for a in range(8):
        for b in range(8):
            twice = transform_planes(transform_planes(planes, b), a)
            assert twice.tobytes() in images, (a, b)
            assert images[twice.tobytes()] == compose(a, b)


def test_group_has_identity_and_inverses():
    planes = asymmetric_planes(8, 6, 3)
    every = np.arange(8)
    assert (compose(every, 0) == every).all() and (compose(0, every) == every).all()
    assert (compose(every, inverse(every)) == 0).all()
    assert (compose(inverse(every), every) == 0).all()
    back = transform_planes(transform_planes(planes, every), inverse(every))
    np.testing.assert_array_equal(back, planes)
    # Associativity of the table, and exactly one inverse per element.
    for a in range(8):
        assert np.count_nonzero(compose(a, every) == 0) == 1
        for b in range(8):
            assert (compose(compose(a, b), every) == compose(a, compose(b, every))).all()


def test_index_convention_on_a_corner_stone():
    # Stone at the top-right corner (row 0, col N-1). Counter-clockwise quarter turn moves it
    # to the top-left; the transpose moves it to the bottom-left.
    n = 5
    board = np.zeros((1, n, n, 1), np.float32)
    board[0, 0, n - 1, 0] = 1
    expected = {0: (0, n - 1), 1: (0, 0), 2: (n - 1, 0), 3: (n - 1, n - 1),
                4: (n - 1, 0), 5: (n - 1, n - 1), 6: (0, n - 1), 7: (0, 0)}
    for k, (row, col) in expected.items():
        image = transform_planes(board, k)[0, :, :, 0]
        assert image[row, col] == 1 and image.sum() == 1, k


@pytest.mark.parametrize("board_size", [2, 5, 9])
def test_agrees_with_rot90_per_sample(board_size):
    batch = 40
    rng = np.random.default_rng(board_size)
    planes = asymmetric_planes(batch, board_size, 4, seed=board_size)
    policy = rng.random((batch, board_size * board_size + 1))
    index = rng.integers(0, 8, batch)
    got_planes = transform_planes(planes, index)
    got_policy = transform_policy(policy, index)
    for i in range(batch):
        np.testing.assert_array_equal(got_planes[i], reference_plane(planes[i], index[i]))
        np.testing.assert_array_equal(got_policy[i],
                                      reference_policy(policy[i], index[i], board_size))
    assert got_planes.dtype == planes.dtype and got_policy.dtype == policy.dtype


@pytest.mark.parametrize("board_size", [2, 9])
def test_taking_stored_rows_agrees_with_rot90_for_planes_ownership_and_policy(board_size):
    """A replay buffer's gather: rows drawn with repeats from a larger store, each under its
    own symmetry, in the store's dtype; (M, N, N) ownership boards as well as planes."""
    rng = np.random.default_rng(10 + board_size)
    stored, batch = 30, 50
    planes = rng.integers(0, 256, (stored, board_size, board_size, 3)).astype(np.uint8)
    ownership = rng.integers(-1, 2, (stored, board_size, board_size)).astype(np.int8)
    policy = rng.random((stored, board_size * board_size + 1)).astype(np.float32)
    index = rng.integers(0, stored, batch)
    symmetry = rng.integers(0, 8, batch)
    got_planes = take_planes(planes, index, symmetry)
    got_ownership = take_planes(ownership, index, symmetry)
    got_policy = take_policy(policy, index, symmetry)
    assert (got_planes.dtype, got_ownership.dtype) == (np.uint8, np.int8)
    assert got_ownership.shape == (batch, board_size, board_size)
    for j, (i, k) in enumerate(zip(index, symmetry)):
        np.testing.assert_array_equal(got_planes[j], reference_plane(planes[i], k))
        np.testing.assert_array_equal(got_ownership[j], reference_plane(ownership[i], k))
        np.testing.assert_array_equal(got_policy[j], reference_policy(policy[i], k, board_size))
    assert take_planes(planes, index[:0], symmetry[:0]).shape == (0, board_size, board_size, 3)


def test_planes_and_policy_move_together_and_pass_stays_pass():
    n, batch = 7, 64
    rng = np.random.default_rng(1)
    points = rng.integers(0, n * n, batch)
    index = rng.integers(0, 8, batch)
    planes = np.zeros((batch, n, n, 3), np.float32)
    planes[np.arange(batch), points // n, points % n, 1] = 1
    policy = np.zeros((batch, n * n + 1), np.float32)
    policy[np.arange(batch), points] = 0.75
    policy[:, -1] = 0.25
    new_planes = transform_planes(planes, index)
    new_policy = transform_policy(policy, index)
    stone = new_planes[:, :, :, 1].reshape(batch, n * n).argmax(axis=1)
    assert (new_policy[:, :-1].argmax(axis=1) == stone).all()
    assert (stone == transform_points(points, index, n)).all()
    assert (new_policy[:, -1] == 0.25).all()
    assert (transform_points(np.full(8, n * n), np.arange(8), n) == n * n).all()
    np.testing.assert_array_equal(new_policy.sum(axis=1), policy.sum(axis=1))
    assert np.count_nonzero(new_planes) == batch


def test_single_index_applies_to_the_whole_batch():
    planes = asymmetric_planes(5, 4, 2)
    np.testing.assert_array_equal(transform_planes(planes, 6),
                                  transform_planes(planes, np.full(5, 6)))


def test_tables_are_read_only_and_bad_arguments_raise():
    with pytest.raises(ValueError):
        source_points(5)[0, 0] = 1
    with pytest.raises(ValueError):
        transform_planes(np.zeros((2, 3, 3, 1)), np.array([0, 8]))
    with pytest.raises(ValueError):
        transform_planes(np.zeros((2, 3, 3, 1)), np.array([0, 1, 2]))
    with pytest.raises(ValueError):
        transform_policy(np.zeros((2, 11)), 0)
    with pytest.raises(ValueError):
        transform_planes(np.zeros((2, 3, 3, 1)), 0.5)
    assert symmetries.NUM_SYMMETRIES == 8
