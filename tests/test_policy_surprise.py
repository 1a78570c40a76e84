"""Policy surprise (games/selfplay.py) and the replay buffer's weighting by it
(Config.policy_surprise_weight, training/replay_buffer.py).

- The KL divergence against hand-computed values.
- Self-play records each position's surprise against the priors the net gave, not the root
  noise self-play mixes in: checked on the empty board, where a stand-in net's prior is known.
- Drawn positions follow (1 - w) + w * s / mean(s) (an unknown surprise counting as the
  mean): frequencies over many draws against the hand-computed probabilities.
"""
from __future__ import annotations

import math

import numpy as np

from games.selfplay import SelfPlay, policy_surprise
from training.config import Config
from training.replay_buffer import ReplayBuffer

N = 5


def test_policy_surprise_is_the_kl_divergence_of_the_target_from_the_priors():
    targets = np.array([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5], [1.0, 0.0, 0.0]], np.float32)
    priors = np.array([[0.25, 0.25, 0.5], [0.2, 0.3, 0.5], [0.0, 0.5, 0.5]], np.float32)
    got = policy_surprise(targets, priors)
    assert got[0] == np.float32(math.log(2))                 # 0.5 ln 2 + 0.5 ln 2
    assert abs(got[1]) < 1e-6                                # the same distribution
    assert got[2] == np.float32(-math.log(1e-12))            # a prior of 0: the floor


def fixed_prior_net(prior: np.ndarray):
    """Every position gets `prior` as its policy and value 0."""
    def evaluate(planes):
        k = len(planes)
        return np.repeat(prior[None], k, axis=0), np.zeros(k, np.float32)
    return evaluate


def test_self_play_measures_surprise_against_the_nets_priors_not_the_root_noise():
    rng = np.random.default_rng(4)
    prior = rng.dirichlet(np.ones(N * N + 1)).astype(np.float32)
    config = Config(board_size=N, num_games=6, simulations=24, noise_fraction=0.5,
                    dirichlet_alpha=0.3, temperature_moves=2)
    batch = SelfPlay(config, fixed_prior_net(prior), seed=3).play(200)
    assert batch.surprise.shape == (batch.positions,) and (batch.surprise >= 0).all()
    # On the empty board the search considers the 25 points (pass only when nothing else
    # is sensible): the net's prior there is `prior` without pass, renormalised.
    empty = np.flatnonzero(batch.planes[..., :2].reshape(batch.positions, -1).sum(axis=1) == 0)
    assert len(empty) >= 4
    on_points = prior[:N * N] / prior[:N * N].sum()
    for row in empty:
        target = batch.policy[row].astype(np.float64)
        assert target[N * N] == 0
        support = target[:N * N] > 0
        expected = (target[:N * N][support] * np.log(target[:N * N][support]
                                                     / on_points[support])).sum()
        assert abs(batch.surprise[row] - expected) < 1e-4


def test_surprise_weighting_draws_positions_in_proportion():
    buffer = ReplayBuffer(8, N, 3)
    count = 4
    value = np.array([-1.0, -0.5, 0.5, 1.0], np.float32)   # tells the positions apart
    buffer.add(np.zeros((count, N, N, 3), np.uint8),
               np.full((count, N * N + 1), 1 / (N * N + 1), np.float32), value,
               surprise=np.array([0.0, 1.0, 3.0, np.nan], np.float32))
    # Mean of the known surprises 4/3: relative 0, 0.75, 2.25 and (unknown) 1; with w = 0.5
    # the weights are 0.5, 0.875, 1.625 and 1.0 out of 4.
    expected = np.array([0.125, 0.21875, 0.40625, 0.25])
    np.testing.assert_allclose(buffer.sampling_weights(0.5), expected)
    rng = np.random.default_rng(0)
    probabilities = buffer.sampling_weights(0.5)
    drawn = np.concatenate([buffer.sample(1000, rng, probabilities).value for _ in range(40)])
    frequencies = np.array([(drawn == v).mean() for v in value])
    np.testing.assert_allclose(frequencies, expected, atol=0.01)
    # Weight 0 draws uniformly, and a buffer without known surprises does so at any weight.
    np.testing.assert_allclose(buffer.sampling_weights(0.0), 0.25)
    blind = ReplayBuffer(8, N, 3)
    blind.add(np.zeros((count, N, N, 3), np.uint8),
              np.full((count, N * N + 1), 1 / (N * N + 1), np.float32), value)
    np.testing.assert_allclose(blind.sampling_weights(1.0), 0.25)


def test_bad_surprises_are_refused():
    buffer = ReplayBuffer(8, N, 3)
    planes = np.zeros((2, N, N, 3), np.uint8)
    policy = np.full((2, N * N + 1), 1 / (N * N + 1), np.float32)
    for bad in (np.array([0.1, -0.2]), np.array([0.1])):
        try:
            buffer.add(planes, policy, np.zeros(2, np.float32), surprise=bad)
        except ValueError as error:
            assert "surprise must be 2 numbers >= 0" in str(error)
        else:
            raise AssertionError(f"surprise {bad} was accepted")
