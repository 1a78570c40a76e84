"""sensible_moves: legal moves minus filling one's own eye, pass only when nothing else is
left; known positions plus random positions against a plain Python eye test."""
import numpy as np
import pytest

from kernels import GoBatch
from reference_rules import board_from_ascii, gtp_to_move


def sensible(ascii_board: str, to_play: int):
    stones = board_from_ascii(ascii_board)
    games = GoBatch(1, len(stones))
    games.set_board(stones[None], np.array([to_play]))
    return games.sensible_moves()[0], games.legal_moves()[0]


def test_corner_edge_and_centre_eyes_are_not_filled():
    board = """
        . X . X .
        X X X X X
        . . X . X
        . . X X X
        . . . . .
    """
    mask, legal = sensible(board, 1)
    for eye in ("A5", "C5", "E5", "D3"):
        assert legal[gtp_to_move(eye, 5)] and not mask[gtp_to_move(eye, 5)], eye
    assert mask[gtp_to_move("A1", 5)] and not mask[25]
    # White may play inside black's eyes where legal (it is not White's eye); these are suicide.
    mask, legal = sensible(board, -1)
    assert not legal[gtp_to_move("A5", 5)] and not mask[gtp_to_move("A5", 5)]


def test_false_eyes_are_filled_but_one_bad_diagonal_in_the_centre_is_still_an_eye():
    board = """
        . . . . .
        . O X O .
        . X . X .
        . . X . .
        . . . . .
    """
    mask, _ = sensible(board, 1)
    assert mask[gtp_to_move("C3", 5)]  # B2-ish diagonals: two white stones make it false
    board = """
        . . . . .
        . O X . .
        . X . X .
        . . X . .
        . . . . .
    """
    mask, _ = sensible(board, 1)
    assert not mask[gtp_to_move("C3", 5)]
    edge = """
        . . . . .
        . . . . .
        . . . . .
        O X . . .
        . . X . .
    """
    mask, _ = sensible(edge.replace(". . X . .", "X . X . ."), 1)
    assert mask[gtp_to_move("B1", 5)]  # an opponent diagonal on the edge: a false eye


def test_pass_only_when_nothing_sensible_is_left_and_on_finished_boards():
    board = """
        . X . X
        X X X X
        X . X X
        X X . X
    """
    mask, legal = sensible(board, 1)
    assert not mask[:16].any() and mask[16]
    assert legal[:16].any()
    games = GoBatch(1, 4)
    games.play(np.array([16]))
    games.play(np.array([16]))
    mask = games.sensible_moves()[0]
    assert not mask[:16].any() and mask[16]


def reference_eye(board: np.ndarray, row: int, col: int, colour: int) -> bool:
    n = len(board)
    if board[row, col] != 0:
        return False
    for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
        r, c = row + dr, col + dc
        if 0 <= r < n and 0 <= c < n and board[r, c] != colour:
            return False
    on_edge = row in (0, n - 1) or col in (0, n - 1)
    bad = sum(1 for dr in (-1, 1) for dc in (-1, 1)
              if 0 <= row + dr < n and 0 <= col + dc < n and board[row + dr, col + dc] == -colour)
    return bad == 0 if on_edge else bad <= 1


@pytest.mark.parametrize("board_size", [2, 3, 5, 7, 9])
def test_random_positions_agree_with_a_plain_eye_test(board_size):
    rng = np.random.default_rng(board_size)
    batch = 32
    games = GoBatch(batch, board_size, seed=board_size)
    for ply in range(3 * board_size * board_size):
        mask = games.sensible_moves()
        legal = games.legal_moves()
        boards, sides, over = games.board(), games.to_play(), games.is_over()
        for index in range(batch):
            expected = legal[index].copy()
            for point in np.flatnonzero(expected[:-1]):
                if reference_eye(boards[index], *divmod(point, board_size), sides[index]):
                    expected[point] = False
            expected[-1] = not expected[:-1].any()
            np.testing.assert_array_equal(mask[index], expected, err_msg=f"board {index} ply {ply}")
        moves = games.random_moves(include_pass=rng.random() < 0.1)
        games.play(moves)
        if over.any():
            games.reset(over)
