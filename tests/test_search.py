"""The batched C search (py_util) against the pure-Python reference, plus its invariants.

A deterministic fake evaluator stands in for the engine and the net: priors, legal mask, value
and terminal flag are functions of the game and the action path from the game's start. A
`Driver` tracks each node's path the way the real loop tracks each node's position in a slot.
"""
from __future__ import annotations

import threading

import numpy as np
import pytest

from py_util import NO_NODE, BatchedMCTS
from reference_mcts import ReferenceMCTS


class PathEvaluator:
    """Fake net + rules: everything about a position is drawn from a generator seeded by the
    position's path, so every search and every revisit sees the same numbers."""

    def __init__(self, num_actions: int, seed: int = 0, legal_rate: float = 0.7,
                 terminal_rate: float = 0.12):
        self.num_actions = num_actions
        self.seed = seed
        self.legal_rate = legal_rate
        self.terminal_rate = terminal_rate

    def __call__(self, key: tuple):
        rng = np.random.default_rng([self.seed, len(key), *key])
        legal = rng.random(self.num_actions) < self.legal_rate
        legal[-1] = True  # like pass
        # Illegal actions get prior mass too: the search must mask it away.
        priors = rng.dirichlet(np.full(self.num_actions, 0.5)).astype(np.float32)
        value = np.float32(rng.uniform(-1, 1))
        terminal = len(key) >= 4 and rng.random() < self.terminal_rate
        if terminal:
            value = np.float32(rng.choice([-1.0, 1.0]))
        return priors, legal, value, terminal


class Driver:
    """Runs one search (C or reference) on a PathEvaluator. Each game has an epoch (bumped when
    it restarts) and a history of played actions; node (g, i) is known by its path."""

    def __init__(self, search, evaluator: PathEvaluator):
        self.search = search
        self.evaluator = evaluator
        batch = search.batch_size
        self.history = [(g, 0) for g in range(batch)]  # (game, epoch, actions...)
        self.paths: dict[tuple[int, int], tuple] = {}
        self.evaluations: dict[tuple, int] = {}

    def evaluate_key(self, key):
        self.evaluations[key] = self.evaluations.get(key, 0) + 1
        return self.evaluator(key)

    def expand_roots(self):
        needs = np.asarray(self.search.needs_root_expansion)
        if not needs.any():
            return
        batch, actions = self.search.batch_size, self.search.num_actions
        priors = np.zeros((batch, actions), np.float32)
        legal = np.zeros((batch, actions), bool)
        values = np.zeros(batch, np.float32)
        terminal = np.zeros(batch, bool)
        roots = self.search.root_nodes
        for g in np.flatnonzero(needs):
            self.paths[(g, int(roots[g]))] = self.history[g]
            priors[g], legal[g], values[g], terminal[g] = self.evaluate_key(self.history[g])
        self.search.expand_roots(priors, legal, values, terminal, games=needs)

    def evaluate(self, leaves):
        count, actions = len(leaves.game), self.search.num_actions
        priors = np.zeros((count, actions), np.float32)
        legal = np.zeros((count, actions), bool)
        values = np.zeros(count, np.float32)
        terminal = np.zeros(count, bool)
        for i, (g, parent, action, node) in enumerate(zip(*leaves)):
            parent_key = self.paths[(g, parent)]
            assert self.evaluator(parent_key)[1][action], "selected an illegal action"
            key = parent_key + (int(action),)
            self.paths[(g, node)] = key
            priors[i], legal[i], values[i], terminal[i] = self.evaluate_key(key)
        return priors, legal, values, terminal

    def play(self, actions):
        """Advance every game by actions[g]; restart (new epoch) games whose root is terminal."""
        self.search.advance(actions)
        for g, action in enumerate(actions):
            self.history[g] = self.history[g] + (int(action),)
        finished = self.search.terminal_roots
        for g in np.flatnonzero(finished):
            self.history[g] = (g, self.history[g][1] + 1)
        if finished.any():
            self.search.reset(games=finished)


def c_subtree(search: BatchedMCTS, game: int, node: int) -> dict:
    """A node and everything below it, keyed by action, from the C search's accessors."""
    info = search.node_info(game, node)
    edges = search.node_edges(game, node)
    children = {}
    for action, prior, visits, q, child in zip(*edges):
        children[int(action)] = (float(prior), int(visits), float(q),
                                 None if child == NO_NODE else c_subtree(search, game, int(child)))
    return {"id": node, "state": info.state, "visits": info.visits, "value": info.value,
            "edges": children}


def reference_subtree(node) -> dict:
    children = {}
    for action, edge in node.edges.items():
        q = edge.value_sum / edge.visits if edge.visits else 0.0
        children[action] = (edge.prior, edge.visits, q,
                            None if edge.child is None else reference_subtree(edge.child))
    return {"id": node.id, "state": node.state, "visits": node.visits,
            "value": node.value_sum / node.visits if node.visits else 0.0, "edges": children}


def walk(tree: dict):
    yield tree
    for *_, child in tree["edges"].values():
        if child is not None:
            yield from walk(child)


def make_pair(batch, actions, simulations, **options):
    return (BatchedMCTS(batch, actions, simulations, **options),
            ReferenceMCTS(batch, actions, simulations, **options))


def play_both(searches, evaluator, moves, *, leaves=1, noise_seed=None, simulation_limit=None,
              check=None):
    """Play `moves` moves with every search on the same evaluator; `check(drivers)` after each
    search. Returns the drivers."""
    drivers = [Driver(search, evaluator) for search in searches]
    rng = np.random.default_rng(noise_seed)
    batch, actions = searches[0].batch_size, searches[0].num_actions
    for _ in range(moves):
        for driver in drivers:
            driver.expand_roots()
        if noise_seed is not None:
            noise = rng.dirichlet(np.full(actions, 0.3), size=batch)
            for search in searches:
                search.mix_root_noise(noise, 0.25)
        for driver in drivers:
            driver.search.run(driver.evaluate, num_leaves_per_game=leaves,
                              simulation_limit=simulation_limit)
        if check is not None:
            check(drivers)
        chosen = [driver.search.choose_actions(0) for driver in drivers]
        for driver in drivers:
            driver.play(chosen[0])
    return drivers


def assert_same_search(c_search: BatchedMCTS, reference: ReferenceMCTS, collisions: bool = True):
    np.testing.assert_array_equal(c_search.root_visits(), reference.root_visits())
    np.testing.assert_array_equal(c_search.root_q(), reference.root_q().astype(np.float32))
    np.testing.assert_array_equal(c_search.root_priors(),
                                  reference.root_priors().astype(np.float32))
    np.testing.assert_array_equal(c_search.root_nodes, reference.root_nodes)
    np.testing.assert_array_equal(c_search.simulations, reference.simulations)
    np.testing.assert_array_equal(c_search.overflow_counts, reference.overflow_counts)
    if collisions:
        np.testing.assert_array_equal(c_search.collision_counts, reference.collision_counts)
    np.testing.assert_array_equal(c_search.choose_actions(0), reference.choose_actions(0))
    np.testing.assert_allclose(c_search.root_statistics().variance,
                               reference.root_statistics().variance, atol=2e-6)
    np.testing.assert_array_equal(c_search.choose_actions(0, lcb=True),
                                  reference.choose_actions(0, lcb=True))
    for g in range(c_search.batch_size):
        # Whole trees, node ids included; values are summed in the same order, so exactly.
        assert c_subtree(c_search, g, int(c_search.root_nodes[g])) == \
            reference_subtree(reference.trees[g].root)


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


# ---------------------------------------------------------------------------- invariants

def fresh_search(batch=6, actions=15, simulations=50, seed=5, **options):
    search = BatchedMCTS(batch, actions, simulations, seed=seed, **options)
    driver = Driver(search, PathEvaluator(actions, seed=seed))
    driver.expand_roots()
    return search, driver


def walked_by_hand(tree: dict, first=None, max_length=None) -> list[tuple[int, int]]:
    """The principal variation by hand from c_subtree's dict: the most visited edge, ties to
    the higher prior, then to the edge listed first; `first` taken at the root."""
    found, node = [], tree
    while node is not None and (max_length is None or len(found) < max_length):
        edges = list(node["edges"].items())          # block order
        if first is not None and not found:
            if first not in node["edges"]:
                return [(first, 0)]
            action = first
        else:
            visited = [(visits, prior, -order, action)
                       for order, (action, (prior, visits, _, _)) in enumerate(edges) if visits]
            if not visited:
                break
            action = max(visited)[3]
        found.append((action, node["edges"][action][1]))
        node = node["edges"][action][3]
    return found


def test_principal_edges_are_the_walk_down_the_most_visited_edges():
    search, driver = fresh_search(batch=3, actions=9, simulations=300, seed=11)
    search.run(driver.evaluate)
    for game in range(3):
        root = int(search.root_nodes[game])
        tree = c_subtree(search, game, root)
        assert len(walked_by_hand(tree)) >= 4          # deep enough to say something
        for first in (None, *range(9)):
            for max_length in (None, 1, 3):
                assert (search.principal_edges(game, root, first, max_length)
                        == walked_by_hand(tree, first, max_length)), (game, first, max_length)


def test_root_visits_equal_simulations_plus_reused_visits():
    search, driver = fresh_search()
    assert (search.root_visits().sum(axis=1) == 0).all()
    search.run(driver.evaluate)
    np.testing.assert_array_equal(search.root_visits().sum(axis=1), 50)
    np.testing.assert_array_equal(search.simulations, 50)
    for _ in range(5):
        actions = search.choose_actions(1.0)
        child_visits = search.root_visits()[np.arange(6), actions]
        driver.play(actions)
        driver.expand_roots()
        reused = search.root_visits().sum(axis=1)
        fresh = search.status()["nodes_in_use"] == 1
        # A kept child was evaluated once and visited child_visits - 1 times below.
        np.testing.assert_array_equal(reused[~fresh], child_visits[~fresh] - 1)
        search.run(driver.evaluate)
        np.testing.assert_array_equal(search.root_visits().sum(axis=1), reused + 50)
        roots = search.root_nodes
        for g in range(6):
            assert search.node_info(g, roots[g]).visits == reused[g] + 50 + 1


def test_no_illegal_action_is_selected_or_visited():
    search, driver = fresh_search()
    evaluator = driver.evaluator
    for _ in range(4):
        search.run(driver.evaluate, num_leaves_per_game=3)  # Driver.evaluate asserts legality
        stats = search.root_statistics()
        for g in range(6):
            legal = evaluator(driver.history[g])[1]
            np.testing.assert_array_equal(stats.legal[g], legal)
            assert (stats.visits[g][~legal] == 0).all() and (stats.priors[g][~legal] == 0).all()
            for node in walk(c_subtree(search, g, int(search.root_nodes[g]))):
                key = driver.paths[(g, node["id"])]
                if node["state"] == "expanded":
                    assert set(node["edges"]) == set(np.flatnonzero(evaluator(key)[1]))
        driver.play(search.choose_actions(0.5))
        driver.expand_roots()


def test_noise_touches_only_legal_moves():
    search, driver = fresh_search(batch=16, actions=20)
    before = search.root_statistics()
    search.add_root_noise(alpha=0.3, fraction=0.25)
    after = search.root_statistics()
    assert (after.priors[~before.legal] == 0).all()
    np.testing.assert_allclose(after.priors.sum(axis=1), 1.0, atol=1e-5)
    assert (after.priors[before.legal] != before.priors[before.legal]).mean() > 0.9
    # Only the chosen games are touched.
    search.add_root_noise(alpha=0.3, fraction=0.5, games=[3])
    again = search.root_statistics()
    changed = (again.priors != after.priors).any(axis=1)
    assert changed.tolist() == [g == 3 for g in range(16)]


def test_values_stay_in_range():
    search, driver = fresh_search(simulations=80)
    for _ in range(4):
        search.run(driver.evaluate, num_leaves_per_game=4)
        q = search.root_q()
        assert (np.abs(q) <= 1).all()
        for g in range(6):
            for node in walk(c_subtree(search, g, int(search.root_nodes[g]))):
                assert -1 <= node["value"] <= 1
                assert all(-1 <= edge[2] <= 1 for edge in node["edges"].values())
        driver.play(search.choose_actions(1.0))
        driver.expand_roots()


def test_subtree_reuse_keeps_exactly_the_chosen_childs_statistics():
    search, driver = fresh_search(simulations=60)
    search.run(driver.evaluate)
    actions = search.choose_actions(0)
    expected = []
    for g in range(6):
        root = c_subtree(search, g, int(search.root_nodes[g]))
        expected.append(root["edges"][int(actions[g])][3])
    used_before = search.status()["nodes_in_use"]
    search.advance(actions)
    status = search.status()
    for g in range(6):
        assert c_subtree(search, g, int(search.root_nodes[g])) == expected[g]
        kept = sum(1 for _ in walk(expected[g]))
        assert status["nodes_in_use"][g] == kept < used_before[g]
        assert status["edges_in_use"][g] == sum(len(n["edges"]) for n in walk(expected[g]))
    assert not search.needs_root_expansion.any()


def test_reuse_budget_trims_nodes_but_keeps_edge_statistics():
    search, driver = fresh_search(simulations=60, reuse_budget=4)
    search.run(driver.evaluate)
    actions = search.choose_actions(0)
    expected = [c_subtree(search, g, int(search.root_nodes[g]))["edges"][int(actions[g])][3]
                for g in range(6)]
    search.advance(actions)
    for g in range(6):
        kept = c_subtree(search, g, int(search.root_nodes[g]))
        assert sum(1 for _ in walk(kept)) <= 1 + 4
        assert kept["visits"] == expected[g]["visits"]
        # Every edge below the new root keeps its prior, visits and Q, child or not.
        strip = {a: edge[:3] for a, edge in kept["edges"].items()}
        assert strip == {a: edge[:3] for a, edge in expected[g]["edges"].items()}
    # Trimmed children are re-created (and re-evaluated) when the search goes there again.
    search.run(driver.evaluate)
    np.testing.assert_array_equal(search.simulations, 60)


def test_fresh_root_when_the_played_child_was_never_visited():
    search, driver = fresh_search(simulations=5)
    search.run(driver.evaluate)
    stats = search.root_statistics()
    unvisited = np.argmax(stats.legal & (stats.visits == 0), axis=1)
    assert (stats.visits[np.arange(6), unvisited] == 0).all()
    search.advance(unvisited)
    assert search.needs_root_expansion.all()
    np.testing.assert_array_equal(search.root_nodes, 0)
    np.testing.assert_array_equal(search.status()["nodes_in_use"], 1)


def test_node_buffer_overflow_is_graceful_and_counted():
    search, driver = fresh_search(simulations=20, reuse_budget=5)  # 26 nodes per game
    search.run(driver.evaluate, simulation_limit=500)
    status = search.status()
    assert (status["full"] == 1).all()
    np.testing.assert_array_equal(status["nodes_in_use"], search.max_nodes)
    np.testing.assert_array_equal(search.overflow_counts, 1)  # once per move, not per step
    assert (search.simulations < 500).all()
    np.testing.assert_array_equal(search.root_visits().sum(axis=1), search.simulations)
    assert search.done(simulation_limit=500)
    assert len(search.select(simulation_limit=500).game) == 0
    actions = search.choose_actions(0)          # the move comes from the visits it has
    assert (search.root_statistics().legal[np.arange(6), actions]).all()
    driver.play(actions)
    driver.expand_roots()
    assert (search.status()["full"] == 0).all()
    search.run(driver.evaluate)                  # the next move searches normally again
    np.testing.assert_array_equal(search.simulations, 20)
    search.run(driver.evaluate, simulation_limit=500)
    np.testing.assert_array_equal(search.overflow_counts, 2)


def test_edge_arena_overflow_is_graceful_and_counted():
    search, driver = fresh_search(simulations=30, edges_per_node=3)
    search.run(driver.evaluate)
    status = search.status()
    assert (search.overflow_counts == 1).all()
    assert (status["edges_in_use"] <= search.max_edges).all()
    states = {node["state"] for g in range(6)
              for node in walk(c_subtree(search, g, int(search.root_nodes[g])))}
    assert "no_room" in states
    for _ in range(3):
        driver.play(search.choose_actions(0))
        driver.expand_roots()
        assert not search.needs_root_expansion.any()
        search.run(driver.evaluate)


def test_virtual_loss_spreads_leaves_over_the_tree():
    search, driver = fresh_search(simulations=64)
    leaves = search.select(num_leaves_per_game=8)
    for g in range(6):
        mine = leaves.node[leaves.game == g]
        assert 1 <= len(mine) <= 8 and len(set(mine)) == len(mine)
    # Leaves are pending until backed up: no second select, no advance.
    with pytest.raises(RuntimeError, match="previous select"):
        search.select()
    with pytest.raises(RuntimeError, match="awaiting"):
        search.advance(np.full(6, 14))
    search.expand_and_backup(leaves.game, leaves.node, *driver.evaluate(leaves))
    search.run(driver.evaluate, num_leaves_per_game=8)
    np.testing.assert_array_equal(search.root_visits().sum(axis=1), 64)
    assert all(search.node_info(g, search.root_nodes[g]).pending == 0 for g in range(6))


def test_choose_actions():
    search, driver = fresh_search(batch=4, actions=6, simulations=200)
    stats = search.root_statistics()
    # No visits yet: greedy falls back to the highest prior.
    np.testing.assert_array_equal(search.choose_actions(0), stats.priors.argmax(axis=1))
    search.run(driver.evaluate)
    visits = search.root_visits()
    greedy = search.choose_actions(0)
    np.testing.assert_array_equal(visits[np.arange(4), greedy], visits.max(axis=1))
    assert (search.choose_actions(0, games=[1]) == [-1, greedy[1], -1, -1]).all()
    # Temperature 1: frequencies follow the visits; never an unvisited action.
    draws = np.stack([search.choose_actions(1.0) for _ in range(3000)])
    for g in range(4):
        frequency = np.bincount(draws[:, g], minlength=6) / 3000
        np.testing.assert_allclose(frequency, visits[g] / visits[g].sum(), atol=0.04)
    # A low temperature sharpens towards the most visited action.
    sharp = np.stack([search.choose_actions(0.1) for _ in range(200)])
    assert (sharp == greedy).mean() > 0.9


def test_greedy_ties_go_to_the_higher_prior_then_the_lower_action():
    search = BatchedMCTS(2, 4, 2)
    priors = np.array([[0.1, 0.4, 0.4, 0.1], [0.25, 0.25, 0.25, 0.25]], np.float32)
    search.expand_roots(priors, np.ones((2, 4), bool), np.zeros(2, np.float32))
    np.testing.assert_array_equal(search.choose_actions(0), [1, 0])


def test_policy_targets_are_visit_distributions():
    search, driver = fresh_search()
    search.run(driver.evaluate)
    targets = search.policy_targets()
    visits = search.root_visits()
    np.testing.assert_allclose(targets, visits / visits.sum(axis=1, keepdims=True), rtol=1e-6)
    assert targets.dtype == np.float32
    assert (search.policy_targets(games=[0])[1:] == 0).all()


def test_first_play_urgency_by_hand():
    # Root value 0.6, priors (0.5, 0.3, 0.2), c_puct 1: the first simulation takes action 0
    # (equal FPU, highest prior) whose leaf is worth +0.9 to its player, -0.9 to the root's.
    # Root Q is then (0.6 - 0.9) / 2 = -0.15. Second simulation, N_parent = 2:
    #   action 0: -0.9 + 1 * 0.5 * sqrt(2) / 2           = -0.546
    #   action 1: FPU = -0.15 - r, + 1 * 0.3 * sqrt(2)    = 0.274 - r
    # so action 1 with r = 0.25; with r = 1.0 its Q clamps to -1 and action 0 (-0.546 vs
    # -0.576) wins instead.
    for reduction, expected in ((0.25, 1), (1.0, 0)):
        search = BatchedMCTS(1, 3, 10, c_puct=1.0, fpu_reduction=reduction)
        search.expand_roots(np.array([[0.5, 0.3, 0.2]], np.float32), np.ones((1, 3), bool),
                            np.array([0.6], np.float32))
        leaves = search.select()
        assert leaves.action.tolist() == [0]
        search.expand_and_backup(leaves.game, leaves.node, np.ones((1, 3), np.float32),
                                 np.ones((1, 3), bool), np.array([0.9], np.float32))
        assert search.root_q()[0, 0] == pytest.approx(-0.9)
        assert search.select().action.tolist() == [expected]


@pytest.mark.parametrize("priors", [
    [0.1, 0.5, 0.3, 0.1],   # equal scores: the higher prior wins
    [0.1, 0.4, 0.4, 0.1],   # equal scores and priors: the lower action wins
])
def test_selection_ties_go_to_the_higher_prior_then_the_lower_action(priors):
    # c_puct 0 and values 0: every score is Q = 0 = FPU, so only the tie rule decides, each time
    # between the tried action 1 and the best untried one: action 1 takes every simulation.
    search = BatchedMCTS(1, 4, 10, c_puct=0.0, fpu_reduction=0.0)
    search.expand_roots(np.array([priors], np.float32), np.ones((1, 4), bool),
                        np.zeros(1, np.float32))
    uniform = np.full((4, 4), 0.25, np.float32)
    search.run(lambda leaves: (uniform[:len(leaves.game)], np.ones((len(leaves.game), 4), bool),
                               np.zeros(len(leaves.game), np.float32), None))
    np.testing.assert_array_equal(search.root_visits(), [[0, 10, 0, 0]])


def test_terminal_leaf_backs_up_the_result_without_children():
    search = BatchedMCTS(1, 2, 10, c_puct=0.0, fpu_reduction=0.0)
    search.expand_roots(np.array([[0.5, 0.5]], np.float32), np.ones((1, 2), bool),
                        np.zeros(1, np.float32))
    leaves = search.select()
    # The player to move at the leaf lost: +1 for the root's player on every revisit.
    search.expand_and_backup(leaves.game, leaves.node, np.ones((1, 2), np.float32),
                             np.ones((1, 2), bool), np.array([-1.0], np.float32),
                             np.array([True]))
    assert search.run(lambda leaves: pytest.fail("terminal leaves are not re-evaluated")) == 0
    np.testing.assert_array_equal(search.root_visits(), [[10, 0]])
    np.testing.assert_array_equal(search.root_q(), [[1.0, 0.0]])
    info = search.node_info(0, int(leaves.node[0]))
    assert (info.state, info.num_edges, info.visits, info.value) == ("terminal", 0, 10, -1.0)


def test_priors_are_masked_and_renormalised():
    search = BatchedMCTS(2, 4, 1)
    priors = np.array([[0.4, 0.4, 0.1, 0.1], [0.0, 0.0, 0.0, 0.0]], np.float32)
    legal = np.array([[True, False, True, False], [False, True, True, False]])
    search.expand_roots(priors, legal, np.zeros(2, np.float32))
    np.testing.assert_allclose(search.root_priors(), [[0.8, 0, 0.2, 0], [0, 0.5, 0.5, 0]])


def test_reset_one_game_leaves_the_others_alone():
    search, driver = fresh_search()
    search.run(driver.evaluate)
    before = search.root_visits()
    search.reset(games=[2])
    after = search.root_visits()
    assert search.needs_root_expansion.tolist() == [g == 2 for g in range(6)]
    assert (after[2] == 0).all()
    np.testing.assert_array_equal(np.delete(after, 2, axis=0), np.delete(before, 2, axis=0))
    with pytest.raises(ValueError, match="not expanded"):
        search.select()
    driver.history[2] = (2, 1)
    driver.expand_roots()
    search.run(driver.evaluate)
    assert search.simulations[2] == 50


def test_searches_are_independent_objects():
    # Two searches interleaved step by step give what each gives alone: no shared C state.
    evaluator = PathEvaluator(10, seed=9)
    alone = []
    for seed in (1, 2):
        search = BatchedMCTS(3, 10, 30, c_puct=1.0 + seed)
        driver = Driver(search, evaluator)
        driver.expand_roots()
        search.run(driver.evaluate)
        alone.append(search.root_visits())
    pair = [BatchedMCTS(3, 10, 30, c_puct=1.0 + seed, num_threads=seed) for seed in (1, 2)]
    drivers = [Driver(search, evaluator) for search in pair]
    for driver in drivers:
        driver.expand_roots()
    while not all(search.done() for search in pair):
        for search, driver in zip(pair, drivers):
            leaves = search.select()
            if len(leaves.game):
                search.expand_and_backup(leaves.game, leaves.node, *driver.evaluate(leaves))
    for search, expected in zip(pair, alone):
        np.testing.assert_array_equal(search.root_visits(), expected)


def test_openmp_over_games_gives_the_serial_result():
    results = []
    for threads in (1, 2):
        search = BatchedMCTS(32, 12, 40, num_threads=threads, seed=3)
        assert search.num_threads == threads
        driver = Driver(search, PathEvaluator(12, seed=11))
        for _ in range(4):
            driver.expand_roots()
            search.run(driver.evaluate, num_leaves_per_game=4)
            driver.play(search.choose_actions(1.0))
        driver.expand_roots()
        search.run(driver.evaluate, num_leaves_per_game=4)
        results.append([c_subtree(search, g, int(search.root_nodes[g])) for g in range(32)])
    assert results[0] == results[1]


def test_concurrent_calls_from_threads_do_not_corrupt_the_tree():
    # A reader thread calls into the tree for as long as the search runs. Calls that meet a
    # method running without the GIL in the other thread are refused; the test insists that
    # some were (so the two threads did overlap inside the C code) and that the search still
    # ends with exactly its visits and the reference search's trees.
    search, driver = fresh_search(batch=32, simulations=100)
    reference = ReferenceMCTS(32, 15, 100)
    reference_driver = Driver(reference, PathEvaluator(15, seed=5))
    reference_driver.expand_roots()
    reference.run(reference_driver.evaluate)
    refused, answered, running = [], [0], threading.Event()

    def read_statistics():
        running.wait()
        while running.is_set():
            try:
                search.root_statistics()
                answered[0] += 1
            except RuntimeError as error:   # refused while the other thread runs a method
                refused.append(error)

    reader = threading.Thread(target=read_statistics)
    reader.start()
    running.set()
    try:
        search.run(driver.evaluate)
    finally:
        running.clear()
        reader.join()
    assert refused, "no call overlapped a running method: nothing was tested"
    assert all("another thread" in str(error) for error in refused)
    assert answered[0] > 0, "calls between the methods are answered"
    np.testing.assert_array_equal(search.root_visits().sum(axis=1), 100)
    assert_same_search(search, reference)


# ----------------------------------------------------------------------- bad arguments raise

def test_constructor_rejects_bad_sizes():
    for args, kwargs, message in [
        ((0, 5, 10), {}, "batch_size"),
        ((2, 0, 10), {}, "num_actions"),
        ((2, 40000, 10), {}, "num_actions"),
        ((2, 5, -1), {}, "num_simulations"),
        ((2, 5, 10), {"reuse_budget": -1}, "reuse_budget"),
        ((2, 5, 10), {"c_puct": -1.0}, "c_puct"),
        ((2, 5, 10), {"fpu_reduction": float("nan")}, "fpu_reduction"),
        ((2, 5, 10), {"virtual_loss": float("inf")}, "virtual_loss"),
        ((2, 5, 10), {"edges_per_node": 0}, "edges_per_node"),
        ((2.5, 5, 10), {}, "batch_size"),
        ((2, 5, 10), {"num_threads": -1}, "num_threads"),
    ]:
        with pytest.raises(ValueError, match=message):
            BatchedMCTS(*args, **kwargs)


def test_an_uninitialised_tree_raises_instead_of_crashing():
    from py_util import _mcts
    tree = _mcts.Tree.__new__(_mcts.Tree)
    with pytest.raises(RuntimeError, match="__init__"):
        tree.reset(np.ones(1, bool))


def test_bad_arguments_raise_value_errors():
    search, driver = fresh_search(batch=2, actions=4, simulations=10)
    leaves = search.select()
    good = driver.evaluate(leaves)
    priors, legal, values, terminal = good
    k = len(leaves.game)
    bad_calls = [
        (lambda: search.expand_and_backup(leaves.game, leaves.node, priors[:, :3], legal, values),
         "priors"),
        (lambda: search.expand_and_backup(leaves.game, leaves.node, priors, legal.astype(int),
                                          values),
         "legal"),
        (lambda: search.expand_and_backup(leaves.game, leaves.node, priors, legal, np.full(k, 1.5)),
         "not in"),
        (lambda: search.expand_and_backup(leaves.game, leaves.node, np.full((k, 4), np.nan), legal,
                                          values), "not finite"),
        (lambda: search.expand_and_backup(leaves.game, leaves.node, -priors, legal, values),
         "negative"),
        (lambda: search.expand_and_backup(leaves.game, leaves.node, priors, np.zeros((k, 4), bool),
                                          values), "no legal action"),
        (lambda: search.expand_and_backup(leaves.game, leaves.node + 1, priors, legal, values),
         "not a leaf"),
        (lambda: search.expand_and_backup(leaves.game, np.full(k, 99), priors, legal, values),
         "out of range"),
        (lambda: search.expand_and_backup(np.concatenate([leaves.game, leaves.game]),
                                          np.concatenate([leaves.node, leaves.node]),
                                          np.concatenate([priors, priors]),
                                          np.concatenate([legal, legal]),
                                          np.concatenate([values, values])), "once"),
        (lambda: search.expand_and_backup(leaves.game.astype(float), leaves.node, priors, legal,
                                          values), "integer"),
        (lambda: search.select(num_leaves_per_game=0), "num_leaves_per_game"),
        (lambda: search.reset(games=[5]), "games"),
        (lambda: search.reset(games=np.ones(3, bool)), "games"),
        (lambda: search.add_root_noise(alpha=0.0, fraction=0.25), "alpha"),
        (lambda: search.choose_actions(-1.0), "temperature"),
    ]
    for call, message in bad_calls:
        with pytest.raises(ValueError, match=message):
            call()
    # Nothing was changed by the failed calls: the real evaluation still goes through.
    search.expand_and_backup(leaves.game, leaves.node, priors, legal, values, terminal)
    search.run(driver.evaluate)
    np.testing.assert_array_equal(search.root_visits().sum(axis=1), 10)
    small = BatchedMCTS(1, 3, 4)
    small.expand_roots(np.ones((1, 3), np.float32), np.array([[True, False, True]]),
                       np.zeros(1, np.float32))
    with pytest.raises(ValueError, match="not legal at the root"):
        small.advance(np.array([1]))
    with pytest.raises(ValueError, match="out of range"):
        search.advance(np.array([4, 0]))
    with pytest.raises(ValueError, match="already expanded"):
        driver_priors = np.ones((2, 4), np.float32)
        search.expand_roots(driver_priors, np.ones((2, 4), bool), np.zeros(2, np.float32))
    with pytest.raises(ValueError, match="fraction"):
        search.mix_root_noise(np.full((2, 4), 0.25), 1.5)
    with pytest.raises(ValueError, match="node"):
        search.node_info(0, 10**6)
