"""Known positions, one rule per test, each expected value worked out by hand: captures,
suicide, the legal-move mask, ko and positional superko.

Every test runs twice (`new_game`, conftest.py): on the engine (a one-board GoBatch,
rules_games.py) and on the independent reference in reference_rules.py, so both are held to
the same hand-written answers. Boards are ASCII: '.' empty, 'X' black, 'O' white, row 0 at the
top (GTP row N); moves are GTP vertices.
"""
from __future__ import annotations

import numpy as np
import pytest

from reference_rules import BLACK, WHITE
from rules_games import assert_board, assert_illegal, legal, play


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
