"""The rules tests' games: `EngineGame`, a one-board GoBatch behind the same small interface as
the reference's ReferenceGo (reference_rules.py), and the checks both are held to. Used by
test_rules_captures.py and test_rules_game_state.py, whose `new_game` fixture (conftest.py)
makes each test run on both.
"""
from __future__ import annotations

import numpy as np
import pytest

from reference_rules import board_from_ascii, board_to_ascii, gtp_to_move


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
