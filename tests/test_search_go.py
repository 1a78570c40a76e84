"""The batched search driven by the real rules engine: whole games to the end on 5x5 and 9x9.

The evaluator is a stand-in net (uniform priors, random values). Node i of game g keeps its
position in engine slot B + g * max_nodes + i, so expanding a batch of leaves is one
`copy_play` from their parents' slots.
"""
from __future__ import annotations

import numpy as np
import pytest

from kernels import GoBatch
from py_util import BatchedMCTS
from reference_mcts import ReferenceMCTS


class GoSelfPlay:
    def __init__(self, search, board_size: int, seed: int = 0):
        self.search = search
        self.batch = search.batch_size
        self.num_actions = board_size * board_size + 1
        self.go = GoBatch(self.batch, board_size, num_slots=self.batch * (1 + search.max_nodes),
                          seed=seed)
        self.rng = np.random.default_rng(seed)
        self.uniform = np.full((self.batch * search.max_nodes, self.num_actions),
                               1.0 / self.num_actions, np.float32)
        self.games = np.arange(self.batch)

    def slots(self, game, node):
        return self.batch + np.asarray(game) * self.search.max_nodes + np.asarray(node)

    def evaluate_slots(self, slots):
        legal = self.go.legal_moves(slots)
        terminal = self.go.is_over(slots)
        values = self.rng.uniform(-1, 1, len(slots)).astype(np.float32)
        if terminal.any():
            # The result from the view of the player to move at the finished position.
            over = slots[terminal]
            values[terminal] = np.sign(self.go.score(over)) * self.go.to_play(over)
        return self.uniform[:len(slots)], legal, values, terminal

    def evaluate(self, leaves):
        destination = self.slots(leaves.game, leaves.node)
        self.go.copy_play(self.slots(leaves.game, leaves.parent), destination, leaves.action)
        return self.evaluate_slots(destination)

    def expand_roots(self, active):
        needs = np.asarray(self.search.needs_root_expansion) & active
        if not needs.any():
            return
        games = np.flatnonzero(needs)
        roots = self.slots(games, self.search.root_nodes[games])
        self.go.copy(games, roots)
        priors = np.zeros((self.batch, self.num_actions), np.float32)
        legal = np.zeros((self.batch, self.num_actions), bool)
        values = np.zeros(self.batch, np.float32)
        terminal = np.zeros(self.batch, bool)
        priors[games], legal[games], values[games], terminal[games] = self.evaluate_slots(roots)
        self.search.expand_roots(priors, legal, values, terminal, games=needs)

    def play(self, leaves_per_game=1, greedy_after=4, check=None) -> int:
        """Play every game to its end; returns the number of moves of the longest game."""
        active = ~self.go.is_over()
        moves = 0
        while active.any():
            self.expand_roots(active)
            self.search.run(self.evaluate, num_leaves_per_game=leaves_per_game, games=active)
            if check is not None:
                check(active)
            temperature = 1.0 if moves < greedy_after else 0.0
            actions = self.search.choose_actions(temperature, games=active)
            playing = np.flatnonzero(active)
            assert self.go.legal_moves(playing)[np.arange(len(playing)), actions[playing]].all()
            self.go.play(actions[playing], slots=playing)
            self.search.advance(actions, games=active)
            active = ~self.go.is_over()
            moves += 1
            assert moves <= self.go.max_moves
        return moves


@pytest.mark.parametrize("board_size, batch, simulations, leaves", [
    (5, 8, 24, 1),
    (5, 8, 24, 4),
    (9, 6, 16, 1),
    (9, 6, 16, 2),
])
def test_batched_search_plays_whole_games(board_size, batch, simulations, leaves):
    search = BatchedMCTS(batch, board_size * board_size + 1, simulations, seed=1)
    driver = GoSelfPlay(search, board_size, seed=board_size)

    def check(active):
        playing = np.flatnonzero(active)
        visits = search.root_visits()[playing]
        reused = visits.sum(axis=1) - search.simulations[playing]
        np.testing.assert_array_equal(search.simulations[playing], simulations)
        assert (reused >= 0).all()
        # The root's slot holds exactly the game's position: reuse kept node ids and slots right.
        roots = driver.slots(playing, search.root_nodes[playing])
        np.testing.assert_array_equal(driver.go.board(roots), driver.go.board(playing))
        np.testing.assert_array_equal(driver.go.to_play(roots), driver.go.to_play(playing))
        np.testing.assert_array_equal(driver.go.move_count(roots), driver.go.move_count(playing))
        legal = driver.go.legal_moves(playing)
        assert (visits[~legal] == 0).all()

    moves = driver.play(leaves_per_game=leaves, check=check)
    assert driver.go.is_over().all()
    assert moves >= 2
    assert search.overflow_count == 0


def test_c_and_reference_play_the_same_games_on_the_engine():
    games = []
    for make in (BatchedMCTS, ReferenceMCTS):
        search = make(4, 26, 12, c_puct=1.5)
        driver = GoSelfPlay(search, 5, seed=3)
        history = []
        driver.play(greedy_after=0,
                    check=lambda active: history.append(search.root_visits().copy()))
        games.append((history, driver.go.board(), driver.go.move_count()))
    (c_history, c_board, c_moves), (r_history, r_board, r_moves) = games
    assert len(c_history) == len(r_history)
    for c_visits, r_visits in zip(c_history, r_history):
        np.testing.assert_array_equal(c_visits, r_visits)
    np.testing.assert_array_equal(c_board, r_board)
    np.testing.assert_array_equal(c_moves, r_moves)
