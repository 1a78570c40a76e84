"""Score utility in the search (Config.score_utility, games/search.py).

A leaf's value is (1 - w) v + w (2/pi) atan(s / N): checked by hand on a settled position, for
a net's leaf (s the net's score for the side to move) and for a finished game (s its area
score from the mover's view), for both sides to move. With w = 0 the search never asks for
the score. A net without the score head or the komi plane is refused, in the config and in
the search; self-play searches without it (a play-time setting).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from games.search import SearchingGames
from reference_rules import board_from_ascii
from test_rollouts import SETTLED   # black owns the board with two eyes; nobody can move
from training.config import Config

NET_VALUE = 0.3


class ScoringNet:
    """A stand-in net with a score head: value 0.3 for every position, and `scores[i]` for the
    i-th position of a call; it counts the calls that ask for no score."""
    has_aux_heads = True

    def __init__(self, scores):
        self.scores = np.asarray(scores, np.float32)
        self.plain_calls = 0

    def __call__(self, planes):
        self.plain_calls += 1
        k = len(planes)
        return np.full((k, 26), 1 / 26, np.float32), np.full(k, NET_VALUE, np.float32)

    def with_score(self, planes):
        k = len(planes)
        return (np.full((k, 26), 1 / 26, np.float32), np.full(k, NET_VALUE, np.float32),
                self.scores[:k].copy())


def utility(value: float, margin: float, weight: float, board_size: int = 5) -> float:
    return (1 - weight) * value + weight * 2 / math.pi * math.atan(margin / board_size)


def settled_driver(weight: float, net) -> SearchingGames:
    config = Config(board_size=5, komi=0.5, aux_heads=True, komi_input=True,
                    score_utility=weight)
    driver = SearchingGames(config, 2, net)
    stones = board_from_ascii(SETTLED)
    driver.go.set_board(np.stack([stones, stones]), np.array([1, -1]), slots=np.array([0, 1]))
    return driver


@pytest.mark.parametrize("weight", [0.0, 0.1, 0.5])
def test_a_leaf_values_its_net_value_mixed_with_its_score(weight):
    net = ScoringNet([4.0, -6.0])
    driver = settled_driver(weight, net)
    _, _, values, terminal = driver.evaluate_slots(np.array([0, 1]))
    assert not terminal.any()
    expected = [utility(NET_VALUE, 4.0, weight), utility(NET_VALUE, -6.0, weight)]
    np.testing.assert_allclose(values, expected, rtol=0, atol=1e-6)
    assert net.plain_calls == (1 if weight == 0 else 0)


@pytest.mark.parametrize("weight", [0.0, 0.25])
def test_a_finished_game_values_its_result_mixed_with_its_area_score(weight):
    driver = settled_driver(weight, ScoringNet([4.0, -6.0]))
    pass_move = np.array([25, 25])
    driver.go.play(pass_move, slots=np.array([0, 1]))
    driver.go.play(pass_move, slots=np.array([0, 1]))
    _, _, values, terminal = driver.evaluate_slots(np.array([0, 1]))
    assert terminal.all()
    # Black owns all 25 points; komi 0.5: black wins by 24.5. Slot 0 has black to move again
    # after the two passes, slot 1 white.
    expected = [utility(1.0, 24.5, weight), utility(-1.0, -24.5, weight)]
    np.testing.assert_allclose(values, expected, rtol=0, atol=1e-6)


def test_score_utility_needs_the_score_head():
    for fields in (dict(), dict(aux_heads=True), dict(komi_input=True)):
        with pytest.raises(ValueError, match="score_utility needs a net with the score head"):
            Config(board_size=5, score_utility=0.1, **fields).validate()
    with pytest.raises(ValueError, match="score_utility must be in"):
        Config(board_size=5, aux_heads=True, komi_input=True, score_utility=1.5).validate()

    def plain(planes):
        return np.full((len(planes), 26), 1 / 26, np.float32), np.zeros(len(planes), np.float32)
    with pytest.raises(ValueError, match="needs a net that gives its score"):
        SearchingGames(Config(board_size=5, aux_heads=True, komi_input=True, score_utility=0.1),
                       1, plain)


def test_self_play_searches_without_score_utility():
    from games.selfplay import SelfPlay
    net = ScoringNet(np.full(64, 4.0))
    config = Config(board_size=5, num_games=2, simulations=4, aux_heads=True, komi_input=True,
                    score_utility=0.5)
    selfplay = SelfPlay(config, net)
    assert selfplay.driver.settings.score_utility == 0
    selfplay.play(4, max_moves=2)
    assert net.plain_calls > 0
