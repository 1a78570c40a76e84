"""kernels/adaptive_threads.h: the rules engine and the tree give the same results whether a
region ran on the team or, backing off, on one thread; the counts of each are reported."""
import numpy as np
import pytest

from kernels import GoBatch
from py_util import BatchedMCTS


def play_random_games(**options):
    games = GoBatch(96, 7, seed=3, **options)
    for _ in range(60):
        legal = games.legal_moves()
        games.play(games.random_moves(include_pass=True, legal=legal))
        over = games.is_over()
        if over.any():
            games.reset(over)
    return games, (games.board(), games.captures(), games.score(), games.legal_moves(),
                   games.features())


def test_rules_results_do_not_depend_on_the_thread_policy():
    _, expected = play_random_games(num_threads=1)
    for options in ({"num_threads": 2, "adaptive_threads": True},
                    {"num_threads": 2, "adaptive_threads": False}):
        games, got = play_random_games(**options)
        for a, b in zip(expected, got):
            np.testing.assert_array_equal(a, b)
        stats = games.thread_stats()
        # Every region with enough boards ran once, on the team or on one thread.
        assert stats["parallel_runs"] + stats["serial_runs"] >= 60 * 3
        assert 0 <= stats["failed_runs"] <= stats["parallel_runs"]
        if not options["adaptive_threads"]:
            assert stats["serial_runs"] == 0 and stats["failed_runs"] == 0
    one, _ = play_random_games(num_threads=1)
    assert one.thread_stats() == {"parallel_runs": 0, "serial_runs": 0, "failed_runs": 0}


def search_visits(**options):
    batch, actions = 24, 10
    search = BatchedMCTS(batch, actions, 40, seed=5, **options)
    rng = np.random.default_rng(0)
    legal = np.ones((batch, actions), bool)
    search.expand_roots(rng.dirichlet(np.ones(actions), batch).astype(np.float32), legal,
                        np.zeros(batch, np.float32), np.zeros(batch, bool))

    def evaluate(leaves):
        k = len(leaves.game)
        # Deterministic in the leaf's identity, so any thread order gives the same tree.
        values = np.sin(leaves.game * 7.0 + leaves.action * 3.0 + leaves.node).astype(np.float32)
        priors = np.full((k, actions), 1 / actions, np.float32)
        return priors, np.ones((k, actions), bool), values, np.zeros(k, bool)

    search.run(evaluate)
    statistics = search.root_statistics()
    return search, statistics.visits, statistics.q


@pytest.mark.parametrize("adaptive", [True, False])
def test_tree_results_do_not_depend_on_the_thread_policy(adaptive):
    _, visits, q = search_visits(num_threads=1)
    search, got_visits, got_q = search_visits(num_threads=2, adaptive_threads=adaptive)
    np.testing.assert_array_equal(visits, got_visits)
    np.testing.assert_array_equal(q, got_q)
    stats = search.thread_stats()
    assert stats["parallel_runs"] + stats["serial_runs"] > 0
    assert 0 <= stats["failed_runs"] <= stats["parallel_runs"]
