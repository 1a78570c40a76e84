"""Known positions, one rule per test, each expected value worked out by hand.

Every test runs twice: on the engine (a one-board GoBatch) and on the independent reference in
reference_rules.py, so both are held to the same hand-written answers. Boards are ASCII:
'.' empty, 'X' black, 'O' white, row 0 at the top (GTP row N); moves are GTP vertices.
"""
from __future__ import annotations

import numpy as np
import pytest

from reference_rules import (BLACK, WHITE, ReferenceGo, board_from_ascii, board_to_ascii,
                             gtp_to_move)


class EngineGame:
    """A one-board GoBatch behind the same small interface as ReferenceGo."""

    def __init__(self, board_size, komi=7.5, superko=False, max_moves=None):
        from kernels import GoBatch
        self.board_size = board_size
        self.pass_move = board_size * board_size
        self.batch = GoBatch(batch_size=1, board_size=board_size, komi=komi, backend="cpu",
                             superko=superko, max_moves=max_moves, history_length=7)

    def reset(self):
        self.batch.reset()

    def set_board(self, stones, to_play):
        self.batch.set_board(np.asarray(stones, dtype=np.int8)[None],
                             np.array([to_play], dtype=np.int8))

    def play(self, move):
        self.batch.play(np.array([move], dtype=np.int64))

    def legal_moves(self):
        return np.asarray(self.batch.legal_moves())[0]

    def score(self):
        return float(self.batch.score()[0])

    def features(self, history):
        return np.asarray(self.batch.features(history=history))[0]

    @property
    def board(self):
        return np.asarray(self.batch.board())[0]

    @property
    def to_play(self):
        return int(self.batch.to_play()[0])

    @property
    def captures(self):
        return tuple(int(c) for c in self.batch.captures()[0])

    @property
    def is_over(self):
        return bool(self.batch.is_over()[0])

    @property
    def move_count(self):
        return int(self.batch.move_count()[0])


@pytest.fixture(params=["engine", "reference"])
def new_game(request):
    """new_game(size, ascii=None, to_play=BLACK, **rules) -> a game on that position."""
    kind = request.param

    def make(board_size, ascii=None, to_play=BLACK, **rules):
        game = (EngineGame if kind == "engine" else ReferenceGo)(board_size, **rules)
        if ascii is not None:
            stones = board_from_ascii(ascii)
            assert stones.shape == (board_size, board_size)
            game.set_board(stones, to_play)
        return game

    return make


def play(game, *vertices):
    for vertex in vertices:
        game.play(gtp_to_move(vertex, game.board_size))


def legal(game, vertex):
    return bool(game.legal_moves()[gtp_to_move(vertex, game.board_size)])


def assert_board(game, ascii):
    expected = board_from_ascii(ascii)
    got = np.asarray(game.board)
    assert np.array_equal(got, expected), (
        f"\nexpected:\n{board_to_ascii(expected)}\ngot:\n{board_to_ascii(got)}")


def assert_illegal(game, vertex):
    """The move is masked out, playing it raises ValueError and changes nothing."""
    assert not legal(game, vertex)
    before = (np.array(game.board), game.to_play, game.captures, game.move_count)
    with pytest.raises(ValueError):
        play(game, vertex)
    after = (np.array(game.board), game.to_play, game.captures, game.move_count)
    assert np.array_equal(before[0], after[0]) and before[1:] == after[1:]


def mask_from_ascii(text):
    """Legal-move mask from rows of 'L' (legal) and anything else (illegal); pass legal."""
    rows = ["".join(line.split()) for line in text.strip().splitlines()]
    return np.array([ch == "L" for row in rows for ch in row] + [True])


def test_single_capture_in_the_centre(new_game):
    game = new_game(5, """
        . . . . .
        . . X . .
        . X O . .
        . . X . .
        . . . . .""")
    play(game, "D3")
    assert_board(game, """
        . . . . .
        . . X . .
        . X . X .
        . . X . .
        . . . . .""")
    assert game.captures == (1, 0)
    assert game.to_play == WHITE


def test_one_move_captures_two_separate_groups(new_game):
    game = new_game(7, """
        X O . O O X .
        . X . X X . .
        . . . . . . .
        . . . . . . .
        . . . . . . .
        . . . . . . .
        . . . . . . .""")
    play(game, "C7")
    assert_board(game, """
        X . X . . X .
        . X . X X . .
        . . . . . . .
        . . . . . . .
        . . . . . . .
        . . . . . . .
        . . . . . . .""")
    assert game.captures == (3, 0)


def test_capture_on_the_edge(new_game):
    game = new_game(5, """
        . X O X .
        . . . . .
        . . . . .
        . . . . .
        . . . . .""")
    play(game, "C4")
    assert_board(game, """
        . X . X .
        . . X . .
        . . . . .
        . . . . .
        . . . . .""")
    assert game.captures == (1, 0)


def test_capture_of_two_stones_in_the_corner(new_game):
    game = new_game(5, """
        O O X . .
        X . . . .
        . . . . .
        . . . . .
        . . . . .""")
    play(game, "B4")
    assert_board(game, """
        . . X . .
        X X . . .
        . . . . .
        . . . . .
        . . . . .""")
    assert game.captures == (2, 0)


def test_white_captures_are_counted_for_white(new_game):
    game = new_game(5, """
        . . . . .
        . . . . .
        . . . . .
        . . . O .
        . . O X .""", to_play=WHITE)
    play(game, "E1")
    assert_board(game, """
        . . . . .
        . . . . .
        . . . . .
        . . . O .
        . . O . O""")
    assert game.captures == (0, 1)
    assert game.to_play == BLACK


def test_snapback(new_game):
    game = new_game(5, """
        . . . . .
        . . . . .
        . . X X X
        . X O O O
        . X O . .""")
    play(game, "E1")                  # throw-in: the white group is now in atari
    play(game, "D1")                  # white takes the single stone...
    assert_board(game, """
        . . . . .
        . . . . .
        . . X X X
        . X O O O
        . X O O .""")
    assert game.captures == (0, 1)
    assert legal(game, "E1")          # ...not a ko: the capturing stone joined a group
    play(game, "E1")                  # and black takes back five
    assert_board(game, """
        . . . . .
        . . . . .
        . . X X X
        . X . . .
        . X . . X""")
    assert game.captures == (5, 1)


def test_single_stone_suicide_is_illegal(new_game):
    game = new_game(5, """
        . X . . .
        X . X . .
        . X . X .
        . . X . .
        . . . . .""", to_play=WHITE)
    for vertex in ("A5", "B4", "C3"):  # corner, and two points inside black's shape
        assert_illegal(game, vertex)
    assert legal(game, "A3") and legal(game, "E5")


def test_multi_stone_suicide_is_illegal(new_game):
    game = new_game(5, """
        O . X . .
        X X . . .
        . . . . .
        . . . . .
        . . . . .""", to_play=WHITE)
    assert_illegal(game, "B5")        # fills the last liberty of the two white stones


def test_move_that_looks_like_suicide_but_captures_is_legal(new_game):
    game = new_game(5, """
        . . . . .
        . . X . .
        . X . X .
        . O X O .
        . . O . .""", to_play=WHITE)
    assert legal(game, "C3")
    play(game, "C3")
    assert_board(game, """
        . . . . .
        . . X . .
        . X O X .
        . O . O .
        . . O . .""")
    assert game.captures == (0, 1)


def test_full_legal_mask_with_suicide_capture_and_ko(new_game):
    game = new_game(4, """
        . X O .
        X O . O
        . X O .
        . . . .""")
    # A4: connects to the black stone on A3, legal. D4: no liberty, captures nothing.
    # C3: no empty neighbour but captures the white stone on B3.
    assert np.array_equal(game.legal_moves(), mask_from_ascii("""
        L . . -
        . . L .
        L . . L
        L L L L"""))
    play(game, "C3")
    assert_board(game, """
        . X O .
        X . X O
        . X O .
        . . . .""")
    # White: A4 is now suicide (both black neighbours keep a liberty), D4 connects out,
    # B3 is the ko point.
    assert np.array_equal(game.legal_moves(), mask_from_ascii("""
        - . . L
        . - . .
        L . . L
        L L L L"""))


KO_POSITION = """
    . . . . .
    . X O . .
    X O . O .
    . X O . .
    . . . . ."""


def test_ko_recapture_is_illegal_at_once_and_legal_after_an_exchange(new_game):
    game = new_game(5, KO_POSITION)
    play(game, "C3")                   # black takes the ko
    assert game.captures == (1, 0)
    assert_illegal(game, "B3")         # white may not take back at once
    play(game, "E5", "E1")             # white plays elsewhere, black answers
    assert legal(game, "B3")
    play(game, "B3")                   # now white retakes
    assert_board(game, """
        . . . . O
        . X O . .
        X O . O .
        . X O . .
        . . . . X""")
    assert game.captures == (1, 1)
    assert_illegal(game, "C3")         # and the ban now binds black


def test_a_pass_clears_the_ko_ban(new_game):
    game = new_game(5, KO_POSITION)
    play(game, "C3")
    assert not legal(game, "B3")
    play(game, "pass")                 # white passes instead of retaking
    assert legal(game, "B3")           # black may fill the ko: no stale ban on the point
    play(game, "E1")                   # black plays elsewhere
    assert legal(game, "B3")
    play(game, "B3")                   # the retake is legal
    assert game.captures == (1, 1)


def test_capturing_two_stones_sets_no_ko(new_game):
    game = new_game(5, """
        X O O . O
        . X X O .
        . . . . .
        . . . . .
        . . . . .""")
    play(game, "D5")                   # takes two; the capturing stone has one liberty
    assert game.captures == (2, 0)
    assert legal(game, "B5")           # neither captured point is banned
    assert legal(game, "C5")           # white may capture at once: not a ko
    play(game, "C5")
    assert_board(game, """
        X . O . O
        . X X O .
        . . . . .
        . . . . .
        . . . . .""")
    assert game.captures == (2, 1)


# Three kos on one board: K1 (B9/C9) and K2 (G9/H9) are black's, K3 (B1/C1) is white's, and a
# loose white stone on E5 is in atari. After black takes E5, the six ko captures below each take
# one stone, none an immediate retake, and after the sixth the stones are exactly as after the
# first move: legal under simple ko, forbidden under positional superko.
TRIPLE_KO = """
    X . X O . X . X O
    . X O . . . X O .
    . . . . . . . . .
    . . . . X . . . .
    . . . X O . . . .
    . . . . X . . . .
    . . . . . . . . .
    . X O . . . . . .
    X O . O . . . . ."""
TRIPLE_KO_CYCLE = ["G9", "C1", "B9", "H9", "B1"]  # then black C9 recreates the start


@pytest.mark.parametrize("superko", [False, True], ids=["simple-ko", "superko"])
def test_triple_ko_cycle(new_game, superko):
    game = new_game(9, TRIPLE_KO, superko=superko)
    play(game, "F5")
    start = np.array(game.board)
    for vertex in TRIPLE_KO_CYCLE:
        assert legal(game, vertex), vertex
        play(game, vertex)
    assert game.captures == (3, 3)
    assert not legal(game, "B1")       # simple ko: black may not retake K3 at once
    if superko:
        assert_illegal(game, "C9")
        assert legal(game, "pass")
    else:
        play(game, "C9")
        assert np.array_equal(game.board, start)
        assert game.captures == (4, 3)


def test_superko_counts_the_loaded_position(new_game):
    # The same three kos, K1 turned white's and no loose stone, loaded as the game's start:
    # after B C9, W G9, B C1, W B9, B H9 white's B1 would recreate the loaded position.
    game = new_game(9, """
        X O . O . X . X O
        . X O . . . X O .
        . . . . . . . . .
        . . . . . . . . .
        . . . . . . . . .
        . . . . . . . . .
        . . . . . . . . .
        . X O . . . . . .
        X O . O . . . . .""", superko=True)
    play(game, "C9", "G9", "C1", "B9", "H9")
    assert_illegal(game, "B1")


def test_two_passes_end_the_game_and_a_move_in_between_resets_the_count(new_game):
    game = new_game(5)
    play(game, "pass", "C3", "pass")   # not consecutive: black pass, white move, black pass
    assert not game.is_over
    play(game, "pass")
    assert game.is_over
    assert game.move_count == 4


def test_a_finished_game_allows_only_pass_and_pass_changes_nothing(new_game):
    game = new_game(5)
    play(game, "C3", "pass", "pass")
    assert game.is_over
    expected_mask = np.zeros(26, dtype=bool)
    expected_mask[25] = True
    assert np.array_equal(game.legal_moves(), expected_mask)
    before = (np.array(game.board), game.to_play, game.captures, game.move_count, game.score())
    assert_illegal(game, "D4")
    play(game, "pass")
    after = (np.array(game.board), game.to_play, game.captures, game.move_count, game.score())
    assert np.array_equal(before[0], after[0]) and before[1:] == after[1:]
    assert game.move_count == 3 and game.to_play == WHITE


def test_max_moves_ends_the_game(new_game):
    game = new_game(5, max_moves=3)
    play(game, "A1", "B1")
    assert not game.is_over
    play(game, "C1")
    assert game.is_over and game.move_count == 3
    assert_illegal(game, "D1")


def test_passes_count_towards_max_moves(new_game):
    game = new_game(5, max_moves=2)
    play(game, "pass", "A1")
    assert game.is_over


def test_default_max_moves_is_twice_the_board_area(new_game):
    game = new_game(2)                 # 2x2: the game ends at move 8
    play(game, "A2", "B1", "pass", "A1", "B2", "A1", "B1")
    # B2 took A1+B1 (two stones, no ko), so white may play A1 again; B1 took it back.
    assert not game.is_over and game.move_count == 7
    assert game.captures == (3, 0)
    play(game, "A1")                   # takes the three black stones
    assert game.is_over and game.move_count == 8
    assert game.captures == (3, 3)
    assert_board(game, """
        . .
        O .""")


def test_score_of_the_empty_board_is_minus_komi(new_game):
    assert new_game(5).score() == -7.5
    assert new_game(5, komi=0.5).score() == -0.5


def test_one_stone_owns_the_whole_board(new_game):
    game = new_game(5)
    play(game, "C3")
    assert game.score() == 25 - 7.5
    play(game, "D4")                   # now the empty region reaches both colours
    assert game.score() == 1 - 1 - 7.5


def test_area_score_with_eyes(new_game):
    game = new_game(5, """
        . X O . .
        X X O . O
        . X O O .
        X X X O O
        . . X O .""", komi=7.5)
    # black: 8 stones + A5 + A3 + A1,B1 = 12; white: 8 stones + D5,E5,D4 + E3 + E1 = 13
    assert game.score() == 12 - 13 - 7.5


def test_seki_shared_liberty_counts_for_nobody(new_game):
    seki = """
        . X . O .
        X X X O O
        X X X O O
        X X X O O
        X X X O O"""
    # Each group has one eye and shares C5; neither can fill C5 without being captured.
    # black: 13 stones + eye A5 = 14; white: 9 stones + eye E5 = 10; C5 is neutral.
    assert new_game(5, seki, komi=7.5).score() == 14 - 10 - 7.5
    assert new_game(5, seki, komi=0).score() == 4.0
    game = new_game(5, seki, komi=0)
    play(game, "C5")                   # black fills the shared liberty (self-atari):
    assert game.score() == 15 - 10     # 14 stones + A5 against 9 stones + E5
    play(game, "A5")                   # white takes all fourteen black stones
    assert game.captures == (0, 14)
    assert game.score() == 0 - 25


def test_to_play_alternates_and_pass_is_a_turn(new_game):
    game = new_game(5)
    assert game.to_play == BLACK
    play(game, "C3")
    assert game.to_play == WHITE
    play(game, "pass")
    assert game.to_play == BLACK
    play(game, "D4")
    assert game.to_play == WHITE
    assert game.board[1, 3] == BLACK   # D4 is row 1, column 3
    assert game.move_count == 3


def test_set_board_with_white_to_move(new_game):
    game = new_game(5, """
        . . . . .
        . . . . .
        . . X . .
        . . . . .
        . . . . .""", to_play=WHITE)
    assert game.to_play == WHITE and game.move_count == 0 and game.captures == (0, 0)
    play(game, "A1")
    assert game.board[4, 0] == WHITE
    assert game.to_play == BLACK


def planes_from_ascii(text):
    """float32 (N, N) plane: 1 where the character is '1'."""
    rows = ["".join(line.split()) for line in text.strip().splitlines()]
    return np.array([[ch == "1" for ch in row] for row in rows], dtype=np.float32)


EMPTY_PLANE = np.zeros((5, 5), dtype=np.float32)
C3_PLANE = planes_from_ascii("""
    . . . . .
    . . . . .
    . . 1 . .
    . . . . .
    . . . . .""")
D4_PLANE = planes_from_ascii("""
    . . . . .
    . . . 1 .
    . . . . .
    . . . . .
    . . . . .""")


def assert_planes(features, expected):
    assert features.dtype == np.float32
    assert features.shape == (5, 5, len(expected))
    for channel, plane in enumerate(expected):
        if np.isscalar(plane):
            plane = np.full((5, 5), plane, dtype=np.float32)
        assert np.array_equal(features[:, :, channel], plane), f"channel {channel}"


def test_features_swap_own_and_opponent_with_the_side_to_move(new_game):
    game = new_game(5)
    assert_planes(game.features(1), [EMPTY_PLANE] * 4 + [1.0, 1.0])
    play(game, "C3", "D4")            # t=2, black to move
    assert_planes(game.features(2), [
        C3_PLANE, D4_PLANE,           # t:   own (black), opponent (white)
        C3_PLANE, EMPTY_PLANE,        # t-1: black had C3, white nothing
        EMPTY_PLANE, EMPTY_PLANE,     # t-2: the empty start
        1.0, 1.0])                    # black to move; ones
    play(game, "pass")                # t=3, white to move; a pass is a position step
    assert_planes(game.features(3), [
        D4_PLANE, C3_PLANE,           # t:   own (white), opponent (black)
        D4_PLANE, C3_PLANE,           # t-1: same stones before the pass
        EMPTY_PLANE, C3_PLANE,        # t-2: white had nothing yet
        EMPTY_PLANE, EMPTY_PLANE,     # t-3: the empty start
        0.0, 1.0])                    # white to move; ones
    assert_planes(game.features(0), [D4_PLANE, C3_PLANE, 0.0, 1.0])


def test_features_after_set_board_and_a_capture(new_game):
    game = new_game(5, """
        . . . . .
        . . X . .
        . X O . .
        . . X . .
        . . . . .""")
    black = planes_from_ascii("""
        . . . . .
        . . 1 . .
        . 1 . . .
        . . 1 . .
        . . . . .""")
    # set_board clears the history: earlier positions are empty
    assert_planes(game.features(1), [black, C3_PLANE, EMPTY_PLANE, EMPTY_PLANE, 1.0, 1.0])
    play(game, "D3")                  # captures C3; white to move
    black_after = black + planes_from_ascii("""
        . . . . .
        . . . . .
        . . . 1 .
        . . . . .
        . . . . .""")
    assert_planes(game.features(1), [
        EMPTY_PLANE, black_after,     # t: white (own) has nothing left
        C3_PLANE, black,              # t-1: the captured stone is still there
        0.0, 1.0])
