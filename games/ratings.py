"""Ratings from match results: the Wilson interval of a win rate, Bradley-Terry ratings on
the Elo scale over any set of pairings, and the chained Elo step of the training loop.

    low, high = wilson_interval(wins + 0.5 * draws, games)
    ratings = fit_bradley_terry([report.pair(), ...], anchor="random")   # {name: Rating}
    print(rating_table(ratings))
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, NamedTuple

import numpy as np

def wilson_interval(successes: float, trials: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (95% for z = 1.96); (0, 1) without
    trials. Unlike p +- z * sqrt(p(1-p)/n) it stays inside [0, 1] and is not empty at 0 or n."""
    if trials <= 0:
        return 0.0, 1.0
    p = successes / trials
    z2 = z * z
    centre = (p + z2 / (2 * trials)) / (1 + z2 / trials)
    half = z * math.sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials)) / (1 + z2 / trials)
    return max(0.0, centre - half), min(1.0, centre + half)



class PairResult(NamedTuple):
    """Games between two named players, counted for `a`."""
    a: str
    b: str
    wins: float
    losses: float
    draws: float = 0.0


@dataclass(frozen=True)
class Rating:
    elo: float
    stderr: float      # from the likelihood's curvature at the fit; relative to the anchor
                       # (whose own is 0), or to the mean without one
    games: float       # real games, without the prior's


ELO_PER_NAT = 400.0 / math.log(10.0)


def fit_bradley_terry(results: Iterable, anchor: str | None = "random",
                      prior_draws: float = 2.0, iterations: int = 100) -> dict[str, Rating]:
    """Bradley-Terry ratings on the Elo scale, P(i beats j) = 1 / (1 + 10 ** ((R_j - R_i) / 400)),
    fit by Newton's method on the log-likelihood. Draws count half a win each way. The weak
    prior (as in BayesElo) adds `prior_draws` virtual draws to every pair that played, so a
    player who won every game gets a finite rating. `anchor` is fixed at 0 (without one, the
    mean is 0); every player must be connected to it through games."""
    pairs = [r.pair() if hasattr(r, "pair") else PairResult(*r) for r in results]
    names = sorted({p.a for p in pairs} | {p.b for p in pairs})
    if not names:
        return {}
    index = {name: i for i, name in enumerate(names)}
    k = len(names)
    wins = np.zeros((k, k))            # wins[i, j]: i's score against j (draws half)
    played = np.zeros((k, k))
    for p in pairs:
        i, j = index[p.a], index[p.b]
        wins[i, j] += p.wins + 0.5 * p.draws
        wins[j, i] += p.losses + 0.5 * p.draws
        played[i, j] += p.wins + p.losses + p.draws
        played[j, i] += p.wins + p.losses + p.draws
    linked = played > 0
    wins_prior = wins + 0.5 * prior_draws * linked
    games_prior = played + prior_draws * linked
    fixed = index[anchor] if anchor in index else 0
    _check_connected(linked, fixed, names)
    free = np.array([i for i in range(k) if i != fixed], np.int64)
    theta = np.zeros(k)                # natural-log strengths

    def log_likelihood(values):
        difference = values[:, None] - values[None, :]
        return float((wins_prior * -np.logaddexp(0.0, -difference)).sum())

    def gradient_hessian(values):
        p = 1.0 / (1.0 + np.exp(-(values[:, None] - values[None, :])))
        gradient = (wins_prior - games_prior * p).sum(axis=1)
        curvature = games_prior * p * (1 - p)
        hessian = curvature - np.diag(curvature.sum(axis=1))
        return gradient, hessian

    for _ in range(iterations):
        gradient, hessian = gradient_hessian(theta)
        step = np.linalg.solve(-hessian[np.ix_(free, free)], gradient[free])
        current, scale = log_likelihood(theta), 1.0
        while scale > 1e-6:
            trial = theta.copy()
            trial[free] += scale * step
            if log_likelihood(trial) >= current - 1e-12:
                break
            scale /= 2
        theta = trial
        if np.abs(scale * step).max() < 1e-10:
            break
    _, hessian = gradient_hessian(theta)
    covariance = np.zeros((k, k))
    covariance[np.ix_(free, free)] = np.linalg.inv(-hessian[np.ix_(free, free)])
    if anchor not in index:
        centre = np.eye(k) - 1.0 / k
        theta, covariance = centre @ theta, centre @ covariance @ centre
    stderr = np.sqrt(np.maximum(np.diag(covariance), 0.0))
    return {name: Rating(elo=float(theta[i] * ELO_PER_NAT), stderr=float(stderr[i] * ELO_PER_NAT),
                         games=float(played[i].sum()))
            for name, i in index.items()}


def _check_connected(linked: np.ndarray, start: int, names: list[str]) -> None:
    reached = {start}
    frontier = [start]
    while frontier:
        i = frontier.pop()
        for j in np.flatnonzero(linked[i]).tolist():
            if j not in reached:
                reached.add(j)
                frontier.append(j)
    missing = [names[i] for i in range(len(names)) if i not in reached]
    if missing:
        raise ValueError(f"no games connect {missing} to {names[start]}: their ratings are "
                         f"undetermined")


def rating_table(ratings: dict[str, Rating]) -> str:
    width = max([len(name) for name in ratings] + [6])
    lines = [f"{'player':<{width}}  {'elo':>7}  {'+-':>5}  {'games':>6}"]
    for name, rating in sorted(ratings.items(), key=lambda item: -item[1].elo):
        lines.append(f"{name:<{width}}  {rating.elo:7.0f}  {rating.stderr:5.0f}  "
                     f"{rating.games:6.0f}")
    return "\n".join(lines)


def elo_step(win_rate: float, games: int) -> float:
    """The Elo difference that a win rate over `games` games implies, a clean sweep clamped to
    half a game either way so the step stays finite."""
    games = max(games, 1)
    rate = min(max(win_rate, 0.5 / games), 1 - 0.5 / games)
    return 400 * math.log10(rate / (1 - rate))
