"""Gumbel root selection (py_util/gumbel.py) on one-move bandits: every root action leads to a
finished position of known value, so each action's Q is exact after one visit and the paper's
rules can be checked by hand and by a plain per-action recomputation written here."""
from __future__ import annotations

import math

import numpy as np
import pytest

from float_tolerance import gamma
from py_util import BatchedMCTS
from py_util.gumbel import (C_SCALE, C_VISIT, GumbelRoots, completed_q, halving_schedule,
                            logits_of, sigma)


@pytest.mark.parametrize("considered, simulations, expected", [
    (4, 8, [0, 0, 0, 0, 1, 1, 2, 2]),
    # 4 phases: 16 actions once, 8 once more, 4 twice (2 phases' worth is spent by then).
    (16, 32, [0] * 16 + [1] * 8 + [2] * 4 + [3] * 4),
    (2, 5, [0, 0, 1, 1, 2]),
    (1, 4, [0, 1, 2, 3]),
    (3, 3, [0, 0, 0]),
    (8, 4, [0, 0, 0, 0]),                       # fewer simulations than actions
])
def test_halving_schedule_by_hand(considered, simulations, expected):
    assert halving_schedule(considered, simulations).tolist() == expected


def bandit(priors, values, considered, simulations, noise=True, seed=0, legal=None):
    """A searched root whose action a ends the game with value values[a] for the player at
    the root; returns (search, gumbel roots, first-visit order of the actions)."""
    priors = np.asarray(priors, np.float32)[None]
    actions = priors.shape[1]
    legal = np.ones((1, actions), bool) if legal is None else np.asarray(legal)[None]
    search = BatchedMCTS(1, actions, simulations)
    search.expand_roots(priors, legal, np.zeros(1, np.float32))
    roots = GumbelRoots(1, actions, considered, seed=seed)
    roots.start(search, np.ones(1, bool), noise, np.zeros(1), simulations)
    order = []

    def evaluate(leaves):
        k = len(leaves.game)
        order.extend(int(a) for a in leaves.action)
        # The leaf's value is from the view of its player to move: the root's opponent.
        values_at_leaf = -np.asarray(values, np.float32)[leaves.action]
        return (np.full((k, actions), 1 / actions, np.float32), np.ones((k, actions), bool),
                values_at_leaf, np.ones(k, bool))
    search.run(evaluate, root_actions=lambda: roots.root_actions(search))
    return search, roots, order


def plain_sigma_scores(priors, values, visits, legal, root_value=0.0):
    """logits + sigma(completed q) per action, recomputed action by action from the paper's
    formulas (the test's own second implementation)."""
    total = sum(visits)
    visited = [a for a in range(len(priors)) if visits[a] > 0 and legal[a]]
    mass = sum(priors[a] for a in visited)
    weighted = sum(priors[a] * values[a] for a in visited) / mass if mass else 0.0
    mixed = (root_value + total * weighted) / (1 + total)
    completed = [values[a] if visits[a] > 0 else mixed for a in range(len(priors))]
    low = min(completed[a] for a in range(len(priors)) if legal[a])
    high = max(completed[a] for a in range(len(priors)) if legal[a])
    scale = (C_VISIT + max(visits)) * C_SCALE
    return [math.log(priors[a]) + scale * ((completed[a] - low) / (high - low) if high > low else 0.0)
            for a in range(len(priors))]


PRIORS = [0.30, 0.05, 0.20, 0.10, 0.15, 0.02, 0.08, 0.10]
VALUES = [-0.6, 0.9, 0.1, -0.2, 0.4, -0.9, 0.7, 0.0]


def test_the_first_simulations_visit_the_top_m_actions_by_gumbel_plus_logits():
    for seed in range(10):
        search, roots, order = bandit(PRIORS, VALUES, considered=4, simulations=8, seed=seed)
        keys = roots.gumbel[0] + np.log(PRIORS)
        top = sorted(range(8), key=lambda a: -keys[a])[:4]
        assert order[:4] == top                 # in order of g + logits: all unvisited
        assert set(order) == set(top)           # nothing outside the sample is ever tried


def test_sequential_halving_keeps_the_better_half_and_plays_the_best_survivor():
    for seed in range(10):
        search, roots, order = bandit(PRIORS, VALUES, considered=4, simulations=8, seed=seed)
        visits = search.root_visits()[0]
        sample = order[:4]
        assert sorted(visits[sample].tolist()) == [1, 1, 3, 3]
        assert visits.sum() == 8
        # The survivors: the top 2 of the sample by g + logits + sigma(q) once all 4 have
        # their single visit (the values are far enough apart for no later visit to reorder).
        after_phase = [1 if a in sample else 0 for a in range(8)]
        scores = np.asarray(plain_sigma_scores(PRIORS, VALUES, after_phase, [True] * 8))
        survivors = sorted(sample, key=lambda a: -(roots.gumbel[0, a] + scores[a]))[:2]
        assert set(np.flatnonzero(visits == 3)) == set(survivors)
        final = np.asarray(plain_sigma_scores(PRIORS, VALUES, visits.tolist(), [True] * 8))
        best = max(survivors, key=lambda a: roots.gumbel[0, a] + final[a])
        assert roots.actions(search).tolist() == [best]


def test_policy_target_is_the_softmax_of_logits_plus_sigma_of_completed_q():
    legal = [True, True, True, False, True, True, True, True]
    priors = np.array(PRIORS) * legal
    priors /= priors.sum()
    search, roots, _ = bandit(priors, VALUES, considered=4, simulations=6, seed=3, legal=legal)
    visits = search.root_visits()[0].tolist()
    # The tree stores priors as float32: recompute from what it holds.
    stored = search.root_priors()[0].astype(np.float64)
    scores = plain_sigma_scores(np.where(legal, stored, 1.0), VALUES, visits, legal)
    weights = [math.exp(scores[a]) if legal[a] else 0.0 for a in range(8)]
    expected = np.array(weights) / sum(weights)
    target = roots.policy_targets(search)[0]
    np.testing.assert_allclose(target, expected, rtol=1e-5, atol=1e-7)
    assert target[3] == 0


def test_a_strong_move_with_a_low_prior_is_found_and_promoted():
    # Action 5 wins outright but the prior gives it 2%: without noise, 16 simulations over 8
    # considered actions find it, play it, and its target rises far above its prior.
    values = [-0.5] * 8
    values[5] = 1.0
    search, roots, _ = bandit(PRIORS, values, considered=8, simulations=16, noise=False)
    assert roots.actions(search).tolist() == [5]
    assert roots.policy_targets(search)[0, 5] > 10 * PRIORS[5]


def test_games_not_started_or_out_of_budget_are_left_to_puct():
    search = BatchedMCTS(2, 4, 3)
    search.expand_roots(np.full((2, 4), 0.25, np.float32), np.ones((2, 4), bool),
                        np.zeros(2, np.float32))
    roots = GumbelRoots(2, 4, 2)
    roots.start(search, np.array([True, False]), True, np.zeros(2), 3)
    assert roots.root_actions(search)[1] == -1
    assert roots.actions(search)[1] == -1
    assert not roots.policy_targets(search)[1].any()


def test_selfplay_with_gumbel_plays_legal_moves_and_trains_on_distributions():
    from games.selfplay import SelfPlay
    from training.config import PRESETS

    config = PRESETS["tiny"].overridden(gumbel_considered=4, simulations=8, num_games=4)
    rng = np.random.default_rng(0)

    def evaluator(planes):
        k = len(planes)
        policy = rng.dirichlet(np.ones(config.num_actions), size=k).astype(np.float32)
        return policy, rng.uniform(-1, 1, k).astype(np.float32)
    batch = SelfPlay(config, evaluator, seed=1).play(60)
    assert batch.positions >= 60
    np.testing.assert_allclose(batch.policy.sum(axis=1), 1, atol=gamma(2 * batch.policy.shape[1]))
    for game in batch.games:
        assert len(game.moves) > 0


def test_gumbel_refuses_settings_it_does_not_combine_with():
    from training.config import Config

    for other in (dict(forced_playouts=2.0), dict(full_search_share=0.5),
                  dict(leaves_per_game=2)):
        with pytest.raises(ValueError, match="gumbel_considered"):
            Config(gumbel_considered=4, **other).validate()


def numpy_root_actions(roots, search):
    """The root choice in the module's batched NumPy formulas (completed_q, sigma, the halving
    table): the reference for the C that `GumbelRoots.root_actions` calls."""
    stats = search.root_statistics()
    visits = stats.visits.astype(np.int64)
    q = completed_q(visits, stats.q.astype(np.float64), stats.priors, stats.legal,
                    roots.root_values)
    score = roots.gumbel + logits_of(stats.priors) + sigma(q, visits, stats.legal)
    this_move = visits - roots.base_visits
    done = search.simulations
    considered = np.minimum(roots.considered, stats.legal.sum(axis=1))
    running = roots._games & (done < roots.simulations) & (considered > 0)
    target = roots._table[considered, np.minimum(done, roots.simulations - 1)]
    candidates = stats.legal & (this_move == target[:, None]) & running[:, None]
    chosen = np.argmax(np.where(candidates, score, -np.inf), axis=1)
    return np.where(candidates.any(axis=1), chosen, -1), score


@pytest.mark.parametrize("num_threads", [1, 0])
def test_root_actions_match_the_numpy_formulas_over_many_games_and_moves(num_threads):
    """Random trees (random priors, legal masks, values, finished leaves), subtree reuse across
    three moves, some games left out: at every step of every search the C choice is the NumPy
    formulas' choice (or, at a near tie, one scoring within rounding of it)."""
    games, actions, simulations = 96, 30, 24
    rng = np.random.default_rng(11)
    search = BatchedMCTS(games, actions, simulations, num_threads=num_threads, seed=3)
    roots = GumbelRoots(games, actions, 8, seed=4)

    def random_evaluation(k):
        legal = rng.random((k, actions)) < 0.6
        legal[:, -1] = True
        priors = rng.dirichlet(np.full(actions, 0.3), size=k).astype(np.float32)
        return (priors, legal, rng.uniform(-1, 1, k).astype(np.float32), rng.random(k) < 0.05)

    compared = 0

    def checked_root_actions():
        nonlocal compared
        chosen = roots.root_actions(search)
        expected, score = numpy_root_actions(roots, search)
        differ = np.flatnonzero(chosen != expected)
        for g in differ:
            assert chosen[g] >= 0 and expected[g] >= 0, (g, chosen[g], expected[g])
            assert abs(score[g, chosen[g]] - score[g, expected[g]]) < 1e-9
        compared += int((expected >= 0).sum())
        return chosen

    search.expand_roots(*random_evaluation(games))
    for move in range(3):
        playing = (rng.random(games) < 0.8) & ~search.terminal_roots
        values = np.array([search.node_info(g, int(r)).value
                           for g, r in enumerate(search.root_nodes)])
        roots.start(search, playing, move != 1, values, simulations)
        search.run(lambda leaves: random_evaluation(len(leaves.game)), games=playing,
                   root_actions=checked_root_actions)
        moves = roots.actions(search)
        search.advance(np.where(playing, moves, 0), games=playing)
        fresh = search.needs_root_expansion
        if fresh.any():
            search.expand_roots(*random_evaluation(games), games=fresh)
    assert compared > games * simulations
