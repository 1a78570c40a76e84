"""The batched C search's invariants (py_util) as it searches and moves on, on the fake
evaluator of search_harness.py.

The principal variation against a walk by hand; root visits against simulations plus reused
visits; no illegal action selected, noised or visited; values in range; subtree reuse keeping
exactly the chosen child's statistics; buffer overflows handled and counted; virtual loss
spreading the leaves; and independence: one game reset leaves the others alone, two searches
share no state, OpenMP over games gives the serial result, and calls from another thread
neither corrupt the tree nor change it from the reference's (reference_mcts.py).
"""
from __future__ import annotations

import threading

import numpy as np
import pytest

from py_util import BatchedMCTS
from reference_mcts import ReferenceMCTS
from search_harness import (Driver, PathEvaluator, assert_same_search, c_subtree, fresh_search,
                            walk)


# ---------------------------------------------------------------------------- invariants

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


# ---------------------------------------------------- independence: games, searches, threads

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
