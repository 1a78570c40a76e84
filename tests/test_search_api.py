"""The batched C search's methods one at a time (py_util), against answers worked out by hand.

Move choice (greedy, by temperature, ties), policy targets, first-play urgency, selection ties,
terminal leaves, prior masking; then bad arguments: each raises a ValueError (or a
RuntimeError for an uninitialised tree) and changes nothing.
"""
from __future__ import annotations

import numpy as np
import pytest

from py_util import BatchedMCTS
from search_harness import fresh_search


# -------------------------------------------------------------- choices and ties by hand

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
