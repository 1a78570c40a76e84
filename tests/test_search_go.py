"""The batched search driven by the real rules engine through `games.search.SearchingGames`
(the production glue): whole games to the end on 5x5 and 9x9, and the C search against the
reference search on the same engine.

The evaluator is a stand-in net (uniform priors, random values from its own generator).
"""
from __future__ import annotations

import numpy as np
import pytest

from games.search import SearchingGames
from py_util import BatchedMCTS
from reference_mcts import ReferenceMCTS
from training.config import Config


def stand_in_net(num_actions: int, seed: int):
    rng = np.random.default_rng(seed)

    def evaluate(planes):
        k = len(planes)
        return (np.full((k, num_actions), 1.0 / num_actions, np.float32),
                rng.uniform(-1, 1, k).astype(np.float32))
    return evaluate


def play_to_the_end(driver: SearchingGames, greedy_after: int = 4, check=None) -> int:
    """Search and play every game to its end; returns the number of moves of the longest."""
    go, search = driver.go, driver.search
    active = ~go.is_over()
    moves = 0
    while active.any():
        driver.think(active)
        if check is not None:
            check(active)
        temperature = 1.0 if moves < greedy_after else 0.0
        actions = search.choose_actions(temperature, games=active)
        playing = np.flatnonzero(active)
        assert go.legal_moves(playing)[np.arange(len(playing)), actions[playing]].all()
        driver.play(actions, games=active)
        active = ~go.is_over()
        moves += 1
        assert moves <= go.max_moves
    return moves


@pytest.mark.parametrize("board_size, batch, simulations, leaves", [
    (5, 8, 24, 1),
    (5, 8, 24, 4),
    (9, 6, 16, 1),
    (9, 6, 16, 2),
])
def test_batched_search_plays_whole_games(board_size, batch, simulations, leaves):
    config = Config(board_size=board_size, simulations=simulations, leaves_per_game=leaves)
    driver = SearchingGames(config, batch, stand_in_net(board_size ** 2 + 1, board_size),
                            seed=1)
    search, go = driver.search, driver.go

    def check(active):
        playing = np.flatnonzero(active)
        visits = search.root_visits()[playing]
        reused = visits.sum(axis=1) - search.simulations[playing]
        np.testing.assert_array_equal(search.simulations[playing], simulations)
        assert (reused >= 0).all()
        # The root's slot holds exactly the game's position: reuse kept node ids and slots right.
        roots = driver.node_slots(playing, search.root_nodes[playing])
        np.testing.assert_array_equal(go.board(roots), go.board(playing))
        np.testing.assert_array_equal(go.to_play(roots), go.to_play(playing))
        np.testing.assert_array_equal(go.move_count(roots), go.move_count(playing))
        legal = go.legal_moves(playing)
        assert (visits[~legal] == 0).all()

    moves = play_to_the_end(driver, check=check)
    assert go.is_over().all()
    assert moves >= 2
    assert search.overflow_count == 0


def test_c_and_reference_play_the_same_games_on_the_engine():
    config = Config(board_size=5, simulations=12, c_puct=1.5)
    games = []
    for make in (BatchedMCTS, ReferenceMCTS):
        search = make(4, 26, 12, c_puct=config.c_puct, fpu_reduction=config.fpu_reduction)
        driver = SearchingGames(config, 4, stand_in_net(26, 3), seed=3, search=search)
        history = []
        play_to_the_end(driver, greedy_after=0,
                        check=lambda active: history.append(search.root_visits().copy()))
        games.append((history, driver.go.board(), driver.go.move_count()))
    (c_history, c_board, c_moves), (r_history, r_board, r_moves) = games
    assert len(c_history) == len(r_history)
    for c_visits, r_visits in zip(c_history, r_history):
        np.testing.assert_array_equal(c_visits, r_visits)
    np.testing.assert_array_equal(c_board, r_board)
    np.testing.assert_array_equal(c_moves, r_moves)
