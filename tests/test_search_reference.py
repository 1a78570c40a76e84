"""The batched C search (py_util) against the pure-Python reference (reference_mcts.py).

Both searches run on the same fake evaluator (search_harness.py) and must agree exactly, whole
trees and node ids included, under every option: c_puct and first-play urgency, forced
playouts, root actions chosen by the caller, virtual loss, trimmed reuse and full buffers,
terminal leaves, and failed evaluations undone. The LCB move choice and the policy target's
pruning are checked against hand computations.
"""
from __future__ import annotations

import numpy as np
import pytest

from py_util import BatchedMCTS
from search_harness import (Driver, PathEvaluator, assert_same_search, fresh_search, make_pair,
                            play_both)


# ---------------------------------------------------------------- agreement with the reference

@pytest.mark.parametrize("options", [
    dict(c_puct=1.25, fpu_reduction=0.25),
    dict(c_puct=0.5, fpu_reduction=0.0),
    dict(c_puct=3.0, fpu_reduction=1.5),      # unvisited children clamp to Q = -1
    dict(c_puct=1.0, fpu_reduction=-0.3),     # optimistic first-play urgency
    dict(c_puct=1.0, fpu_reduction=-1.2),     # so optimistic that it clamps to Q = +1
])
def test_same_visits_and_q_as_reference(options):
    searches = make_pair(5, 12, 40, reuse_budget=40, **options)
    play_both(searches, PathEvaluator(12, seed=1), moves=8, noise_seed=7,
              check=lambda drivers: assert_same_search(*searches))


@pytest.mark.parametrize("leaves", [1, 4])
def test_forced_playouts_same_as_reference_and_they_force(leaves):
    # Noise promotes moves PUCT would leave alone: forced playouts visit them sqrt(k P N)
    # times. The C tree and the reference must agree exactly, with and without virtual loss.
    searches = make_pair(4, 12, 48, reuse_budget=48, forced_playouts=2.0)
    play_both(searches, PathEvaluator(12, seed=3), moves=6, noise_seed=5, leaves=leaves,
              check=lambda drivers: assert_same_search(*searches))
    # What forcing is for: a visited root child keeps n^2 >= k P N (N: the children's visits),
    # unless it was first tried in the last simulations; without it low-visit children fall
    # far below. Count the games whose every visited child is so served.
    def served(k):
        pair = make_pair(4, 12, 48, reuse_budget=48, forced_playouts=k)
        before_move = []
        play_both(pair, PathEvaluator(12, seed=3), moves=1, noise_seed=5, leaves=leaves,
                  check=lambda drivers: before_move.append(drivers[0].search.root_statistics()))
        stats = before_move[0]
        children = stats.visits.sum(axis=1, keepdims=True)
        short = (stats.visits > 0) & (stats.visits ** 2 < 2.0 * stats.priors * children)
        return int((~short.any(axis=1)).sum())
    assert served(2.0) >= 3 > served(0.0)


@pytest.mark.parametrize("leaves", [1, 3])
def test_root_actions_chosen_by_the_caller_same_as_reference(leaves):
    # A caller (Gumbel root selection) names the root action of some games' selections,
    # often one PUCT would not try yet: the C tree must swap it into its tried edges and
    # still agree exactly with the reference, and then with PUCT again on later moves.
    searches = make_pair(4, 12, 40, reuse_budget=40)
    drivers = [Driver(search, PathEvaluator(12, seed=9)) for search in searches]
    for move in range(5):
        for driver in drivers:
            driver.expand_roots()
        legal = searches[0].root_statistics().legal
        picked = [set() for _ in range(4)]

        def root_actions(chooser, search):
            picks = np.full(4, -1, np.int64)
            for g in range(4):
                if legal[g].any() and chooser.random() < 0.7:
                    picks[g] = chooser.choice(np.flatnonzero(legal[g]))
                    if search.simulations[g] < 40:   # else this select takes nothing
                        picked[g].add(int(picks[g]))
            return picks
        for driver in drivers:
            # The same draws for both searches.
            chooser = np.random.default_rng([4, move])
            driver.search.run(driver.evaluate, num_leaves_per_game=leaves,
                              root_actions=lambda: root_actions(chooser, driver.search))
        assert_same_search(*searches)
        visits = searches[0].root_visits()
        for g in range(4):
            assert all(visits[g, a] > 0 for a in picked[g])
        actions = searches[0].choose_actions(0)
        for driver in drivers:
            driver.play(actions)


def test_a_root_action_that_is_not_legal_is_refused():
    search = BatchedMCTS(2, 6, 8)
    priors = np.full((2, 6), 1 / 6, np.float32)
    legal = np.array([[True, False, True, True, False, True]] * 2)
    search.expand_roots(priors, legal, np.zeros(2, np.float32))
    for bad in ([1, -1], [6, -1], [-2, -1]):
        with pytest.raises(ValueError, match="root action"):
            search.select(root_actions=np.array(bad))
    leaves = search.select(root_actions=np.array([5, -1]))
    assert leaves.action.tolist() == [5, 0]


def test_abandoned_root_action_keeps_puct_choosing_the_best_untried_edge():
    # A chosen root action jumps the queue of untried edges; abandoning its selection must
    # leave PUCT's next untried candidate the highest prior again.
    search = BatchedMCTS(1, 5, 8)
    priors = np.array([[0.1, 0.4, 0.2, 0.2, 0.1]], np.float32)
    search.expand_roots(priors, np.ones((1, 5), bool), np.zeros(1, np.float32))
    leaves = search.select(root_actions=np.array([4]))
    assert leaves.action.tolist() == [4]
    search.abandon(leaves.game, leaves.node)
    assert search.select().action.tolist() == [1]


def test_lcb_move_choice_matches_a_hand_computation():
    from py_util.mcts import RootStatistics, lower_confidence_bounds, move_preferences
    # Two roots. Root 0: the most visited move (0: 100 visits, Q 0.10, variance 0.04) against
    # one searched later and found better (1: 30 visits, Q 0.30, variance 0.01), one with a
    # high Q on too few visits to count (2: 9 < 10% of 100) and an unvisited one (3).
    # Root 1: the most visited move is also the surest.
    visits = np.array([[100, 30, 9, 0], [50, 20, 10, 0]], np.int32)
    q = np.array([[0.10, 0.30, 0.90, 0.0], [0.40, 0.35, 0.60, 0.0]], np.float32)
    variance = np.array([[0.04, 0.01, 0.0, 0.0], [0.005, 0.2, 0.3, 0.0]], np.float32)
    priors = np.array([[0.5, 0.2, 0.2, 0.1], [0.4, 0.3, 0.2, 0.1]], np.float32)
    stats = RootStatistics(visits, q, priors, np.ones((2, 4), bool), variance)
    by_hand = np.array([
        [0.10 - 1.96 * np.sqrt(0.04 * 100 / 99 / 100), 0.30 - 1.96 * np.sqrt(0.01 * 30 / 29 / 30),
         0.90 - 1.96 * np.sqrt(0.01 / 9), -np.inf],         # move 2: the variance floor
        [0.40 - 1.96 * np.sqrt(0.01 / 50), 0.35 - 1.96 * np.sqrt(0.2 * 20 / 19 / 20),
         0.60 - 1.96 * np.sqrt(0.3 * 10 / 9 / 10), -np.inf]])
    np.testing.assert_allclose(lower_confidence_bounds(stats), by_hand, rtol=1e-6)
    # Root 0: 0.264 beats 0.061, move 2 is no candidate; root 1: 0.372 beats 0.149 and 0.247.
    assert np.argmax(move_preferences(stats, lcb=True), axis=1).tolist() == [1, 0]
    assert np.argmax(move_preferences(stats), axis=1).tolist() == [0, 0]
    order = np.argsort(-move_preferences(stats, lcb=True)[0], kind="stable").tolist()
    assert order == [1, 0, 2, 3]               # candidates by bound, then the rest by visits


def test_policy_target_pruning_matches_a_hand_computation():
    from py_util.mcts import RootStatistics, pruned_visits
    # One root: N = 100 children's visits, c_puct 1, k 2. Child 0 is the most visited.
    visits = np.array([[60, 20, 12, 2, 6, 0]], np.int32)
    q = np.array([[0.5, 0.1, 0.45, 0.0, 0.6, 0.0]], np.float32)
    priors = np.array([[0.4, 0.2, 0.1, 0.05, 0.05, 0.2]], np.float32)
    stats = RootStatistics(visits, q, priors, np.ones((1, 6), bool))
    got = pruned_visits(stats, c_puct=1.0, k=2.0)[0]
    sqrt_n = 10.0
    best_score = 0.5 + 0.4 * sqrt_n / 61
    want = []
    for n, qc, p in zip(visits[0, 1:], q[0, 1:], priors[0, 1:]):
        forced = np.sqrt(2.0 * p * 100)
        keep = n - forced                       # give back the forced visits...
        if best_score > qc:                     # ...but stay below the best child's score
            keep = max(keep, p * sqrt_n / (best_score - qc) - 1)
        else:
            keep = n                            # its Q alone beats the best: nothing forced
        keep = min(max(keep, 0.0), n)
        want.append(0.0 if keep <= 1 else keep)
    np.testing.assert_allclose(got, [60.0, *want], rtol=1e-6)
    assert got[5] == 0 and got[4] == 6         # unvisited stays 0; Q 0.6 > best score keeps all


def test_same_as_reference_with_virtual_loss():
    searches = make_pair(4, 10, 48, virtual_loss=1.0)
    drivers = play_both(searches, PathEvaluator(10, seed=2), moves=6, leaves=6,
                        check=lambda drivers: assert_same_search(*searches))
    assert searches[0].collision_counts.sum() > 0, "the test should exercise collisions"
    assert drivers[0].evaluations == drivers[1].evaluations


def test_same_as_reference_when_reuse_is_trimmed_and_buffers_fill():
    # A small reuse budget trims kept subtrees, few edges per node fill the edge arena, and a
    # simulation limit above the node capacity fills the node buffer: all three paths at once.
    searches = make_pair(4, 9, 30, reuse_budget=6, edges_per_node=5)
    play_both(searches, PathEvaluator(9, seed=3), moves=8, simulation_limit=60,
              check=lambda drivers: assert_same_search(*searches))
    assert searches[0].overflow_count > 0


def test_reference_handles_terminal_leaves_like_c():
    evaluator = PathEvaluator(6, seed=4, terminal_rate=0.6)
    searches = make_pair(3, 6, 60)
    drivers = play_both(searches, evaluator, moves=5, check=lambda d: assert_same_search(*searches))
    # A terminal leaf is evaluated once and then backs up its stored result.
    terminal_keys = [key for key in drivers[0].evaluations if evaluator(key)[3]]
    assert terminal_keys
    assert all(drivers[0].evaluations[key] == 1 for key in terminal_keys)


class FailingDriver(Driver):
    """A Driver whose evaluator raises on the calls numbered in `failures` (counting from 0),
    before it has looked at the leaves: a net that runs out of memory, an interrupt."""

    def __init__(self, search, evaluator, failures):
        super().__init__(search, evaluator)
        self.failures, self.calls, self.failed = set(failures), 0, 0

    def evaluate(self, leaves):
        self.calls += 1
        if self.calls - 1 in self.failures:
            self.failed += 1
            raise MemoryError("the evaluator failed")
        return super().evaluate(leaves)


@pytest.mark.parametrize("leaves", [1, 6])
def test_a_failed_evaluation_leaves_the_tree_as_it_was(leaves):
    # The reference never fails; the C search's evaluator fails now and then (twice in a row
    # too) and the failed run is simply called again. Whole trees, node ids included, must
    # stay the reference's: the failed selections were undone exactly. (Collisions counted by
    # a failed selection stay counted; no terminal positions here, whose selections would be
    # backed up at once and stay.)
    evaluator = PathEvaluator(10, seed=6, terminal_rate=0.0)
    c_search, reference = make_pair(4, 10, 40, virtual_loss=1.0, reuse_budget=20)
    failing = FailingDriver(c_search, evaluator, failures={1, 4, 5, 9, 17, 18, 30})
    steady = Driver(reference, evaluator)
    for _ in range(6):
        for driver in (failing, steady):
            driver.expand_roots()
        steady.search.run(steady.evaluate, num_leaves_per_game=leaves)
        for attempt in range(20):
            try:
                c_search.run(failing.evaluate, num_leaves_per_game=leaves)
                break
            except MemoryError:
                assert c_search.status()["pending_leaves"].sum() == 0
        assert_same_search(c_search, reference, collisions=False)
        chosen = c_search.choose_actions(0)
        failing.play(chosen), steady.play(chosen)
    assert failing.failed == 7


class InterruptedAfterExpansion:
    """The C tree, but a stop signal's exception surfaces just after chosen expand_and_backup
    calls (counting from 0) returned, the leaves already backed up, as a handler's exception
    surfaces at the next bytecode after the C call."""

    def __init__(self, tree, interrupts):
        self.tree, self.interrupts, self.calls = tree, set(interrupts), 0

    def __getattr__(self, name):
        return getattr(self.tree, name)

    def expand_and_backup(self, *args):
        self.tree.expand_and_backup(*args)
        self.calls += 1
        if self.calls - 1 in self.interrupts:
            raise KeyboardInterrupt


def test_a_stop_just_after_an_expansion_surfaces_and_keeps_it():
    # The interrupted run raises the interrupt itself (abandoning leaves already backed up
    # raised a ValueError in its place), and the expansion stands: the run called again
    # finishes the reference's search, node for node.
    evaluator = PathEvaluator(10, seed=7, terminal_rate=0.0)
    c_search, reference = make_pair(4, 10, 40)
    tree = c_search._tree = InterruptedAfterExpansion(c_search._tree, {0, 3, 4, 11})
    interrupted, steady = Driver(c_search, evaluator), Driver(reference, evaluator)
    stops = 0
    for _ in range(4):
        for driver in (interrupted, steady):
            driver.expand_roots()
        steady.search.run(steady.evaluate)
        while True:
            try:
                c_search.run(interrupted.evaluate)
                break
            except KeyboardInterrupt:
                stops += 1
                assert c_search.status()["pending_leaves"].sum() == 0
        assert_same_search(c_search, reference)
        chosen = c_search.choose_actions(0)
        interrupted.play(chosen), steady.play(chosen)
    assert stops == 4 and tree.calls > 11


def test_abandon_takes_only_pending_leaves():
    search, driver = fresh_search(batch=2, actions=4, simulations=10)
    leaves = search.select()
    with pytest.raises(ValueError, match="not a leaf awaiting evaluation"):
        search.abandon(np.append(leaves.game, leaves.game[:1]),
                       np.append(leaves.node, leaves.node[:1]))     # one leaf twice
    with pytest.raises(ValueError, match="out of range"):
        search.abandon([0], [10_000])
    search.abandon(leaves.game, leaves.node)
    with pytest.raises(ValueError, match="not a leaf awaiting evaluation"):
        search.abandon(leaves.game, leaves.node)                   # already undone
    search.run(driver.evaluate)
    np.testing.assert_array_equal(search.root_visits().sum(axis=1), 10)
