"""Known positions, one rule per test, each expected value worked out by hand: the end of the
game (two passes, the move limit), the area score (eyes, seki), whose turn it is, and the
net's input planes after moves, passes, set_board and a capture.

Every test runs twice (`new_game`, conftest.py): on the engine (a one-board GoBatch,
rules_games.py) and on the independent reference in reference_rules.py, so both are held to
the same hand-written answers. Boards are ASCII: '.' empty, 'X' black, 'O' white, row 0 at the
top (GTP row N); moves are GTP vertices.
"""
from __future__ import annotations

import numpy as np

from reference_rules import BLACK, WHITE
from rules_games import assert_board, assert_illegal, play


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
