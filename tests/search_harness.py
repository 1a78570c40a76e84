"""The search tests' harness: a deterministic fake evaluator standing in for the engine and the
net (priors, legal mask, value and terminal flag are functions of the game and the action path
from the game's start), a `Driver` that tracks each node's path the way the real loop tracks
each node's position in a slot, the C search's and the reference's trees as comparable dicts,
and the check that both searches are the same. Used by test_search_reference.py,
test_search_invariants.py and test_search_api.py.
"""
from __future__ import annotations

import numpy as np

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


def fresh_search(batch=6, actions=15, simulations=50, seed=5, **options):
    search = BatchedMCTS(batch, actions, simulations, seed=seed, **options)
    driver = Driver(search, PathEvaluator(actions, seed=seed))
    driver.expand_roots()
    return search, driver
