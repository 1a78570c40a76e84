"""GoBatch's contract at its edges: bad arguments raise a clear ValueError (never a crash or
silent garbage), an illegal move names the board and the GTP move, and the returned arrays have
the documented dtypes and shapes (kernels/README.md)."""
from __future__ import annotations

import numpy as np
import pytest

from kernels import GoBatch
from reference_rules import board_from_ascii, gtp_to_move


def moves(*values):
    return np.array(values, dtype=np.int64)


def snapshot(g, slots=None):
    return [np.array(a) for a in (g.board(slots), g.to_play(slots), g.captures(slots),
                                  g.move_count(slots), g.legal_moves(slots), g.is_over(slots))]


def assert_unchanged(before, after):
    for a, b in zip(before, after):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("board_size", [1, 20, 0, -5, 9.0, "9", None, True])
def test_bad_board_size(board_size):
    with pytest.raises(ValueError, match="board_size"):
        GoBatch(batch_size=2, board_size=board_size)


@pytest.mark.parametrize("board_size", [2, 19])
def test_board_size_limits_are_accepted(board_size):
    g = GoBatch(batch_size=1, board_size=board_size)
    assert g.legal_moves().shape == (1, board_size * board_size + 1)


@pytest.mark.parametrize("batch_size", [0, -1, 2.0])
def test_bad_batch_size(batch_size):
    with pytest.raises(ValueError, match="batch_size"):
        GoBatch(batch_size=batch_size, board_size=5)


def test_backend_bogus():
    with pytest.raises(ValueError, match="bogus"):
        GoBatch(batch_size=1, board_size=5, backend="bogus")


def _cuda_usable():
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


@pytest.mark.skipif(_cuda_usable(), reason="this machine has a usable CUDA device")
def test_backend_cuda_without_gpu_is_a_clear_error():
    with pytest.raises((RuntimeError, ValueError), match="(?i)cuda"):
        GoBatch(batch_size=1, board_size=5, backend="cuda")


@pytest.mark.skipif(_cuda_usable(), reason="this machine has a usable CUDA device")
def test_backend_auto_without_gpu_falls_back_to_cpu():
    g = GoBatch(batch_size=2, board_size=5, backend="auto")
    g.play(moves(12, 0))
    assert isinstance(g.board(), np.ndarray)
    assert g.board()[0, 2, 2] == 1


def test_move_dtype_must_be_integer():
    g = GoBatch(batch_size=2, board_size=5)
    with pytest.raises(ValueError):
        g.play(np.array([12.0, 3.0]))
    assert not g.board().any()


def test_int32_moves_are_accepted():
    g = GoBatch(batch_size=2, board_size=5)
    g.play(np.array([12, 3], dtype=np.int32))
    assert g.board()[0, 2, 2] == 1 and g.board()[1, 0, 3] == 1


@pytest.mark.parametrize("shape", [(3,), (1,), (2, 1), (1, 2), ()])
def test_moves_of_the_wrong_shape(shape):
    g = GoBatch(batch_size=2, board_size=5)
    with pytest.raises(ValueError):
        g.play(np.zeros(shape, dtype=np.int64))
    assert not g.board().any() and (g.move_count() == 0).all()


@pytest.mark.parametrize("bad", [-1, 26, 1000])
def test_move_out_of_range(bad):
    g = GoBatch(batch_size=3, board_size=5)
    before = snapshot(g)
    with pytest.raises(ValueError) as caught:
        g.play(moves(0, bad, 1))
    assert "board 1" in str(caught.value)
    assert_unchanged(before, snapshot(g))


def test_illegal_move_names_board_and_gtp_move():
    g = GoBatch(batch_size=5, board_size=5)
    d4 = gtp_to_move("D4", 5)
    g.play(moves(d4, d4, d4, d4, d4))          # black D4 everywhere
    before = snapshot(g)
    with pytest.raises(ValueError) as caught:
        g.play(moves(0, 1, 2, d4, 4))          # white D4 on board 3: occupied
    message = str(caught.value)
    assert "board 3" in message and "D4" in message, message
    assert_unchanged(before, snapshot(g))      # all or nothing: boards 0-2 and 4 unplayed


def test_illegal_move_in_a_slot_subset_names_the_slot():
    g = GoBatch(batch_size=4, board_size=5, num_slots=8)
    e5 = gtp_to_move("E5", 5)
    g.play(moves(e5, e5), slots=np.array([6, 2]))
    with pytest.raises(ValueError) as caught:
        g.play(moves(0, e5), slots=np.array([2, 6]))
    assert "board 6" in str(caught.value) and "E5" in str(caught.value)
    assert g.board(np.array([2]))[0, 0, 0] == 0


def test_non_pass_on_a_finished_game_is_illegal():
    g = GoBatch(batch_size=2, board_size=5)
    g.play(moves(25, 25))
    g.play(moves(25, 25))
    assert g.is_over().all()
    before = snapshot(g)
    with pytest.raises(ValueError) as caught:
        g.play(moves(25, gtp_to_move("C3", 5)))
    assert "board 1" in str(caught.value) and "C3" in str(caught.value)
    assert_unchanged(before, snapshot(g))
    g.play(moves(25, 25))                      # pass is still accepted and changes nothing
    assert_unchanged(before, snapshot(g))


def test_illegal_copy_play_raises_and_leaves_destinations_alone():
    g = GoBatch(batch_size=2, board_size=5, num_slots=4)
    g.play(moves(12, 12))
    before = snapshot(g, np.arange(4))
    with pytest.raises(ValueError) as caught:
        g.copy_play(np.array([0, 1]), np.array([2, 3]), moves(0, 12))
    assert "C3" in str(caught.value)
    assert_unchanged(before, snapshot(g, np.arange(4)))


@pytest.mark.parametrize("slots", [[4], [-1], [0, 7]])
def test_slots_out_of_range(slots):
    g = GoBatch(batch_size=2, board_size=5, num_slots=4)
    slots = np.array(slots)
    for call in (lambda: g.legal_moves(slots), lambda: g.board(slots),
                 lambda: g.play(np.zeros(len(slots), dtype=np.int64), slots),
                 lambda: g.reset(slots), lambda: g.features(slots=slots)):
        with pytest.raises(ValueError):
            call()


def test_bool_slot_mask_of_the_wrong_length():
    g = GoBatch(batch_size=3, board_size=5)
    with pytest.raises(ValueError):
        g.legal_moves(np.array([True, False]))


def test_slot_masks_and_indices_select_boards():
    g = GoBatch(batch_size=3, board_size=5, num_slots=5)
    g.play(moves(0, 1), slots=np.array([True, False, True]))
    g.play(moves(2), slots=np.array([4]))
    assert g.board()[:, 0, :3].tolist() == [[1, 0, 0], [0, 0, 0], [0, 1, 0]]
    assert g.board(np.array([4, 0]))[:, 0, :3].tolist() == [[0, 0, 1], [1, 0, 0]]
    assert g.to_play().tolist() == [-1, 1, -1]
    g.reset(np.array([True, False, False]))
    assert not g.board()[0].any() and g.to_play()[0] == 1 and g.board()[2, 0, 1] == 1


def test_history_length_zero_keeps_only_the_current_position():
    g = GoBatch(batch_size=1, board_size=3, history_length=0)
    g.play(moves(4))
    features = g.features()
    assert features.shape == (1, 3, 3, 4)
    # white to move: the black centre stone is on the opponent plane
    assert features[0, 1, 1].tolist() == [0.0, 1.0, 0.0, 1.0]
    with pytest.raises(ValueError):
        g.features(history=1)


def test_features_history_bounds():
    g = GoBatch(batch_size=2, board_size=5, history_length=2)
    assert g.features().shape == (2, 5, 5, 8)          # None -> history_length
    assert g.features(history=0).shape == (2, 5, 5, 4)
    for bad in (3, -1, 1.5):
        with pytest.raises(ValueError):
            g.features(history=bad)


def test_set_board_rejects_values_other_than_stones():
    g = GoBatch(batch_size=1, board_size=3)
    stones = np.zeros((1, 3, 3), dtype=np.int8)
    stones[0, 1, 1] = 2
    with pytest.raises(ValueError):
        g.set_board(stones, np.array([1], dtype=np.int8))
    with pytest.raises(ValueError):
        g.set_board(np.zeros((1, 3, 3), dtype=np.float32) + 0.5, np.array([1], dtype=np.int8))
    assert not g.board().any()


def test_set_board_rejects_a_group_without_liberties():
    g = GoBatch(batch_size=2, board_size=5)
    fine = board_from_ascii("""
        . . . . .
        . . . . .
        . . . . .
        . . . . .
        . . . . .""")
    dead = board_from_ascii("""
        O X . . .
        X . . . .
        . . . . .
        . . . . .
        . . . . .""")
    with pytest.raises(ValueError) as caught:
        g.set_board(np.stack([fine, dead]), np.array([1, 1], dtype=np.int8))
    assert "board 1" in str(caught.value)


def test_set_board_rejects_bad_to_play_and_shape():
    g = GoBatch(batch_size=1, board_size=3)
    with pytest.raises(ValueError):
        g.set_board(np.zeros((1, 3, 3), dtype=np.int8), np.array([0], dtype=np.int8))
    with pytest.raises(ValueError):
        g.set_board(np.zeros((1, 4, 4), dtype=np.int8), np.array([1], dtype=np.int8))


def test_restore_rejects_a_state_of_another_board_size():
    small = GoBatch(batch_size=1, board_size=5)
    large = GoBatch(batch_size=1, board_size=7)
    with pytest.raises(ValueError):
        large.restore(small.save())


def test_thread_count_komi_and_to_play_are_range_checked():
    for threads in (100_000, 1025, -1):
        with pytest.raises(ValueError, match="num_threads"):
            GoBatch(batch_size=1, board_size=5, num_threads=threads)
    for komi in (float("nan"), float("inf"), "7.5", None):
        with pytest.raises(ValueError, match="komi"):
            GoBatch(batch_size=1, board_size=5, komi=komi)
    g = GoBatch(batch_size=2, board_size=5, komi=0.5)
    with pytest.raises(ValueError, match="komi"):
        g.komi = float("nan")
    assert g.komi == 0.5 and np.isfinite(g.score()).all()
    stones = np.zeros((2, 5, 5), np.int8)
    for to_play in (257, -255, 2, 0, np.array([1, 257]), np.array([True, True]), 1.5):
        with pytest.raises(ValueError, match="to_play"):
            g.set_board(stones, to_play)     # 257 and -255 were stored as int8: +1 and -1
    g.set_board(stones, np.array([1, -1]))
    assert g.to_play().tolist() == [1, -1]


# Runs in a child process, so that a corrupted state sending the rules into an endless loop
# fails the test by its time limit instead of hanging it. One byte of a saved 9x9 position
# (random play with captures) is changed at a time; restore must refuse the state or accept
# one every operation runs to its end on. Prints one JSON line: the outcomes.
CORRUPTION_TRIALS = r"""
import json
import numpy as np
from kernels import GoBatch
from kernels.go_batch import GoState

go = GoBatch(1, 9, seed=5)
for _ in range(120):
    go.play(go.random_moves())
assert go.captures()[0].sum() > 0, "the position should hold the traces of captures"
state = go.save()
layout = go._backend.layout
walked = np.zeros(layout["slot_bytes"], bool)   # bytes the rules follow: refused if changed
stone = np.frombuffer(state.data[0, layout["off_stone"]:layout["off_stone"] + layout["padded"]],
                      np.uint8)
points = np.flatnonzero(stone != 3)
walked[layout["off_stone"] + points] = True
group = state.data[0, layout["off_group"]:layout["off_group"] + 2 * layout["padded"]].view(np.int16)
for q in np.flatnonzero((stone == 1) | (stone == 2)):
    for name in ("off_group", "off_next"):
        walked[layout[name] + 2 * q:layout[name] + 2 * q + 2] = True
    if group[q] == q:
        for name, width in (("off_size", 2), ("off_libs", 2), ("off_lib_sum", 4),
                            ("off_lib_sum_sq", 4)):
            walked[layout[name] + width * q:layout[name] + width * (q + 1)] = True
rng = np.random.default_rng(0)
outcomes = {"refused": 0, "accepted": 0, "walked_accepted": [], "reasons": set()}
offsets = np.concatenate([rng.integers(0, layout["slot_bytes"], 400),
                          rng.choice(np.flatnonzero(walked), 400)])
for offset in offsets:
    data = state.data.copy()
    data[0, offset] ^= rng.integers(1, 256)
    try:
        go.restore(GoState(state.slots, data, state.layout_key))
    except ValueError as error:
        assert str(error).startswith("restore: saved position 0 is damaged: "), error
        outcomes["refused"] += 1
        outcomes["reasons"].add(str(error).split(": ", 2)[2])
        continue
    outcomes["accepted"] += 1
    if walked[offset]:
        outcomes["walked_accepted"].append(int(offset))
    go.legal_moves(), go.sensible_moves(), go.features(), go.score(), go.playouts()
    for _ in range(40):
        go.play(go.random_moves())
outcomes["reasons"] = sorted(outcomes["reasons"])
print(json.dumps(outcomes))
"""


def test_restore_refuses_damaged_states_instead_of_hanging():
    import json
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    try:
        result = subprocess.run([sys.executable, "-c", CORRUPTION_TRIALS], cwd=root,
                                capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("the rules hung on a restored corrupted state")
    assert result.returncode == 0, result.stderr[-3000:]
    outcomes = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcomes["refused"] + outcomes["accepted"] == 800
    assert outcomes["walked_accepted"] == [], "a change to what the rules walk was accepted"
    assert outcomes["refused"] >= 400 and len(outcomes["reasons"]) >= 5, outcomes


def test_documented_dtypes_and_shapes():
    g = GoBatch(batch_size=3, board_size=5, num_slots=6, history_length=4)
    slots = np.array([5, 1])
    expected = {
        "legal_moves": (np.bool_, (2, 26)),
        "board": (np.int8, (2, 5, 5)),
        "to_play": (np.int8, (2,)),
        "captures": (np.int64, (2, 2)),
        "score": (np.float64, (2,)),
        "is_over": (np.bool_, (2,)),
        "move_count": (np.int64, (2,)),
        "random_moves": (np.int64, (2,)),
    }
    for name, (dtype, shape) in expected.items():
        out = getattr(g, name)(slots=slots)
        assert isinstance(out, np.ndarray), name
        assert out.dtype == dtype and out.shape == shape, (name, out.dtype, out.shape)
    features = g.features(slots=slots)
    assert features.dtype == np.float32 and features.shape == (2, 5, 5, 12)
    assert g.legal_moves().shape == (3, 26)     # slots=None is the batch, not the pool
    assert g.score().tolist() == [-7.5] * 3


def test_thread_count_changes_nothing_but_speed():
    results = []
    for threads in (1, 2):
        games = GoBatch(96, 7, num_threads=threads, seed=3)
        for _ in range(60):
            games.play(games.random_moves(include_pass=True))
        results.append((games.board(), games.captures(), games.score(), games.legal_moves()))
    for one, two in zip(*results):
        np.testing.assert_array_equal(one, two)
    with pytest.raises(ValueError, match="num_threads"):
        GoBatch(2, 7, num_threads=-1)


def test_copy_destinations_must_be_distinct_and_not_sources():
    games = GoBatch(2, 5, num_slots=8)
    with pytest.raises(ValueError, match="distinct"):
        games.copy_play([0, 1], [4, 4], np.array([0, 1]))
    with pytest.raises(ValueError, match="source and a destination"):
        games.copy_play([0, 1], [1, 5], np.array([0, 1]))
    with pytest.raises(ValueError, match="source and a destination"):
        games.copy([0, 1], [5, 0])
    with pytest.raises(ValueError, match="out of range"):
        games.copy([0], [8])
    assert (games.board([4, 5]) == 0).all()  # nothing was written by the refused calls


def test_upload_checks_slot_ranges_on_the_host_and_hands_back_usable_slots():
    g = GoBatch(batch_size=2, board_size=5, num_slots=6)
    (src, dst), moves = g.upload([np.array([0, 1]), np.array([4, 5])], np.array([12, 0]))
    assert len(src) == len(dst) == 2 and moves.tolist() == [12, 0]
    g.copy_play(src, dst, moves, trusted=True)
    # The centre stone (point 12 = row 2, col 2) in slot 4, the corner stone in slot 5.
    assert g.board([4])[0, 2, 2] == 1 and g.board([5])[0, 0, 0] == 1
    assert (g.board(dst).sum(axis=(1, 2)) == 1).all() and not g.board(src).any()
    with pytest.raises(ValueError, match=r"slots must be in 0\.\.5, got 0\.\.6"):
        g.upload([np.array([0, 6])])
    with pytest.raises(ValueError, match="one length"):
        g.upload([np.array([0, 1]), np.array([2])])
    with pytest.raises(ValueError, match="integer"):
        g.upload([np.array([0])], np.array([1.5]))


def test_trusted_copy_play_on_the_cpu_still_refuses_an_illegal_move():
    g = GoBatch(batch_size=1, board_size=5, num_slots=3)
    g.play(np.array([12]))
    (src, dst), moves = g.upload([np.array([0]), np.array([2])], np.array([12]))
    with pytest.raises(ValueError, match="occupied"):
        g.copy_play(src, dst, moves, trusted=True)


def test_finished_values_score_finished_games_for_the_side_to_move_and_zero_the_rest():
    g = GoBatch(batch_size=3, board_size=5, komi=7.5)
    g.play(moves(25, 12, 0))                      # board 0: black passes; 1, 2: a stone each
    g.play(moves(25), slots=[0])                  # board 0 over: empty board, white by komi
    stones = np.zeros((1, 5, 5), np.int8)
    stones[0, :, :4] = 1                          # black fills four columns, the fifth is its own
    g.set_board(stones, 1, slots=[2])
    g.play(moves(25), slots=[2])
    g.play(moves(25), slots=[2])                  # board 2 over: black owns 25 points to 0
    assert g.is_over().tolist() == [True, False, True]
    # Both games end with black to move: black lost board 0 and won board 2.
    assert g.to_play([0, 2]).tolist() == [1, 1]
    assert g.finished_values().tolist() == [-1.0, 0.0, 1.0]
    assert g.finished_values().dtype == np.float32
