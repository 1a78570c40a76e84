"""Ratings (games/ratings.py) against published or constructed answers: Wilson intervals
from Newcombe (1998), Bradley-Terry ratings recovered from games simulated with known
strengths, and the chained Elo step of the training loop against the logistic formula."""
from __future__ import annotations

import numpy as np
import pytest

from games import match_report, ratings


@pytest.mark.parametrize("successes, trials, low, high", [
    # Newcombe, Statistics in Medicine 17 (1998) 857-872, table I, method 3 (Wilson score).
    (81, 263, 0.2553, 0.3662),
    (15, 148, 0.0624, 0.1605),
    (0, 20, 0.0, 0.1611),
    (1, 29, 0.0061, 0.1718),
])
def test_wilson_interval_matches_published_values(successes, trials, low, high):
    got = ratings.wilson_interval(successes, trials)
    assert got == pytest.approx((low, high), abs=6e-5)


def test_wilson_interval_of_a_report_counts_draws_half():
    report = match_report.MatchReport(wins=7, losses=2, draws=2)
    assert report.win_rate == pytest.approx(8 / 11)
    assert report.interval() == pytest.approx(ratings.wilson_interval(8, 11))
    assert ratings.wilson_interval(0, 0) == (0.0, 1.0)


def simulated_games(strengths: dict[str, float], games: int, seed: int = 1):
    rng = np.random.default_rng(seed)
    names = list(strengths)
    results = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            p = 1.0 / (1.0 + 10 ** ((strengths[b] - strengths[a]) / 400))
            wins = int(rng.binomial(games, p))
            results.append(ratings.PairResult(a, b, wins, games - wins))
    return results


def test_bradley_terry_recovers_known_strengths():
    truth = {"random": 0.0, "ckpt:1": 150.0, "ckpt:2": 400.0, "ckpt:3": 500.0, "gnugo:5": 800.0}
    fitted = ratings.fit_bradley_terry(simulated_games(truth, games=600), anchor="random")
    assert fitted["random"].elo == 0.0
    for name, elo in truth.items():
        assert abs(fitted[name].elo - elo) < max(40.0, 3 * fitted[name].stderr), name
        assert fitted[name].games == 600 * (len(truth) - 1)
    order = sorted(truth, key=lambda name: fitted[name].elo)
    assert order == sorted(truth, key=truth.get)
    assert 5 < fitted["ckpt:2"].stderr < 40


def test_bradley_terry_prior_keeps_a_perfect_record_finite_and_needs_connected_players():
    fitted = ratings.fit_bradley_terry([("random", "ckpt:1", 0, 50)], prior_draws=2.0)
    # 50 wins plus one virtual: exp(gap / 400 * ln 10) = 51 / 1.
    assert fitted["ckpt:1"].elo == pytest.approx(400 * np.log10(51), abs=0.5)
    unanchored = ratings.fit_bradley_terry([("a", "b", 30, 10)], anchor=None)
    # 31 to 11 with the virtual draw, centred on the mean.
    assert unanchored["a"].elo == pytest.approx(200 * np.log10(31 / 11), abs=0.1)
    assert unanchored["b"].elo == pytest.approx(-unanchored["a"].elo)
    assert unanchored["a"].stderr == pytest.approx(unanchored["b"].stderr)
    assert unanchored["a"].stderr > 0
    with pytest.raises(ValueError, match="connect"):
        ratings.fit_bradley_terry([("random", "a", 3, 2), ("b", "c", 4, 1)])


def test_elo_step_inverts_the_logistic_win_probability_and_stays_finite_on_a_sweep():
    for gap in (-300.0, 0.0, 120.0):
        expected = 1.0 / (1.0 + 10 ** (-gap / 400))
        assert ratings.elo_step(expected, 1000) == pytest.approx(gap, abs=1e-6)
    # 20-0 counts as 19.5-0.5: 400 * log10(39).
    assert ratings.elo_step(1.0, 20) == pytest.approx(400 * np.log10(39))
    assert ratings.elo_step(0.0, 20) == pytest.approx(-400 * np.log10(39))
