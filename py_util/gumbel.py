"""Gumbel root selection with sequential halving and completed-Q policy targets (Danihelka et
al., "Policy improvement by planning with Gumbel", ICLR 2022), for BatchedMCTS roots.

Like the tree it knows nothing about Go: actions, priors, visits and Q of each game's root.
The tree below the root is searched by PUCT as usual; only the root's action of each
simulation is chosen here, and the tree takes it (`BatchedMCTS.select(root_actions=...)`).

Per move and game, with n simulations and m considered actions (m = min(`considered`, legal)):
* g(a) ~ Gumbel(0, 1) for each action (zeros without noise); logits(a) = log prior(a).
* Simulation i goes through the action, among those whose visits this move equal
  `halving_schedule(m, n)[i]`, that maximises g(a) + logits(a) + sigma(q(a)). The first m
  simulations so visit the top m actions by g + logits once each (the Gumbel-top-k trick:
  sampling m actions without replacement from the prior); each later phase gives the better
  half of the survivors (by the same score, now with their Q) equal shares of the budget.
* The move played: among the most visited actions this move, the one maximising
  g + logits + sigma(q). With noise this samples from an improved policy; no temperature.
* The policy target: softmax(logits + sigma(completed q)) over the legal actions.

completed q(a) is the root's Q of a where a has visits, else the mixed value
v_mix = (v + N * sum_b p(b) q(b) / sum_b p(b)) / (1 + N), sums over visited b, N their visits
and v the root's value at the move's start (the net's value for a fresh root); q is then
rescaled to [0, 1] by its min and max over the legal actions, and
sigma(q) = (C_VISIT + max_b N(b)) * C_SCALE * q. All values are from the view of the player
to move at the root (RootStatistics.q).
"""
from __future__ import annotations

import math

import numpy as np

# The paper's constants (its Go experiments); not tuned here.
C_VISIT = 50.0
C_SCALE = 0.1
# Priors below this count as this small: log(0) would make an action unreachable by -inf.
MIN_PRIOR = 1e-12


def halving_schedule(considered: int, simulations: int) -> np.ndarray:
    """int64 (simulations,): the visits this move that the action taken by simulation i must
    already have. ceil(log2 m) phases; a phase with k actions left gives each of them
    max(1, n // (phases * k)) more visits, then k halves (to 2 at least) until the budget is
    spent. With one action everything goes to it."""
    if considered <= 1:
        return np.arange(simulations, dtype=np.int64)
    phases = math.ceil(math.log2(considered))
    schedule: list[int] = []
    count, left = 0, considered
    while len(schedule) < simulations:
        for _ in range(max(1, simulations // (phases * left))):
            schedule.extend([count] * left)
            count += 1
        left = max(2, left // 2)
    return np.asarray(schedule[:simulations], dtype=np.int64)


def completed_q(visits: np.ndarray, q: np.ndarray, priors: np.ndarray, legal: np.ndarray,
                root_values: np.ndarray) -> np.ndarray:
    """float64 (B, A): Q where an action has visits, the mixed value v_mix elsewhere (see the
    module docstring); visits, q, priors, legal (B, A), root_values (B,)."""
    visited = visits > 0
    total = visits.sum(axis=1)
    p = np.where(visited, np.maximum(priors, MIN_PRIOR), 0.0)
    mass = p.sum(axis=1)
    weighted = np.where(mass > 0, (p * q).sum(axis=1) / np.maximum(mass, MIN_PRIOR), 0.0)
    mixed = (root_values + total * weighted) / (1.0 + total)
    return np.where(visited, q, mixed[:, None]) * legal


def sigma(completed: np.ndarray, visits: np.ndarray, legal: np.ndarray) -> np.ndarray:
    """sigma(completed q), float64 (B, A): q rescaled to [0, 1] over each root's legal
    actions, times (C_VISIT + the most visits of any action) * C_SCALE; 0 where illegal."""
    low = np.where(legal, completed, np.inf).min(axis=1, keepdims=True)
    high = np.where(legal, completed, -np.inf).max(axis=1, keepdims=True)
    scale = np.where(high > low, high - low, 1.0)
    rescaled = np.where(legal, (completed - np.where(np.isfinite(low), low, 0.0)) / scale, 0.0)
    return (C_VISIT + visits.max(axis=1, keepdims=True)) * C_SCALE * rescaled


def logits_of(priors: np.ndarray) -> np.ndarray:
    return np.log(np.maximum(priors.astype(np.float64), MIN_PRIOR))


class GumbelRoots:
    """The Gumbel state of every root of a batch for one move: `start` it after the roots are
    expanded, pass `root_actions` to each `BatchedMCTS.select` (run(root_actions=...)), then
    read `actions` and `policy_targets`. `considered`: m, the actions sampled at the root."""

    def __init__(self, batch_size: int, num_actions: int, considered: int, seed: int = 0):
        if considered < 1:
            raise ValueError(f"considered must be >= 1, got {considered!r}")
        self.batch_size, self.num_actions, self.considered = batch_size, num_actions, considered
        self._rng = np.random.default_rng(seed)
        self._table = np.zeros((considered + 1, 1), np.int64)
        self.gumbel = np.zeros((batch_size, num_actions))
        self.base_visits = np.zeros((batch_size, num_actions), np.int64)
        self.root_values = np.zeros(batch_size)
        self.simulations = 0
        self._games = np.zeros(batch_size, bool)

    def start(self, search, games: np.ndarray, noise, root_values: np.ndarray,
              simulations: int) -> None:
        """A new move for the chosen games (bool (B,)): Gumbel draws where `noise` (bool, or
        (B,) bool), the visits the roots already have (subtree reuse) as this move's zero, and
        their values (see the module docstring). `simulations`: this move's budget n."""
        stats = search.root_statistics()
        games = np.asarray(games, dtype=bool)
        noisy = games & np.broadcast_to(np.asarray(noise, dtype=bool), games.shape)
        self.gumbel[games] = 0.0
        self.gumbel[noisy] = self._rng.gumbel(size=(int(noisy.sum()), self.num_actions))
        self.base_visits[games] = stats.visits[games]
        self.root_values[games] = root_values[games]
        if simulations != self.simulations:
            # Row k: the schedule for k considered actions (row 0 is never used).
            self._table = np.stack([halving_schedule(max(k, 1), simulations)
                                    for k in range(self.considered + 1)])
            self.simulations = simulations
        self._games = games.copy()

    def _improved_logits(self, stats) -> np.ndarray:
        """logits + sigma(completed q), (B, A)."""
        visits = stats.visits.astype(np.int64)
        q = completed_q(visits, stats.q.astype(np.float64), stats.priors, stats.legal,
                        self.root_values)
        return logits_of(stats.priors) + sigma(q, visits, stats.legal)

    def _scores(self, stats) -> tuple[np.ndarray, np.ndarray]:
        """(g + logits + sigma(completed q), this move's visits), both (B, A)."""
        return (self.gumbel + self._improved_logits(stats),
                stats.visits.astype(np.int64) - self.base_visits)

    def root_actions(self, search) -> np.ndarray:
        """int64 (B,): each started game's root action for its next simulation; -1 for other
        games, for games whose budget is spent, and where no legal action has the visits the
        schedule asks for (PUCT then chooses; it does not happen while every simulation
        follows the schedule)."""
        # Once per search step over every root: in C, over games on the tree's threads (in
        # NumPy it was the largest host cost of a step with thousands of games on a GPU).
        # tests/test_gumbel.py holds the same choice in NumPy terms as its reference.
        if self.simulations < 1:
            return np.full(self.batch_size, -1, np.int64)
        return search.gumbel_root_actions(self._games, self.gumbel, self.base_visits,
                                          self.root_values, self._table, self.considered,
                                          self.simulations, (C_VISIT, C_SCALE, MIN_PRIOR))

    def actions(self, search) -> np.ndarray:
        """int64 (B,): the move of each started game, among its most visited actions this
        move the best by g + logits + sigma(q); -1 for other games. A root without visits
        this move (no budget) takes the best legal action by g + logits."""
        stats = search.root_statistics()
        score, visits = self._scores(stats)
        most = np.where(stats.legal, visits, -1)
        best = stats.legal & (most == most.max(axis=1, keepdims=True))
        chosen = np.argmax(np.where(best, score, -np.inf), axis=1)
        return np.where(self._games, chosen, -1).astype(np.int64)

    def policy_targets(self, search) -> np.ndarray:
        """float32 (B, A): softmax(logits + sigma(completed q)) over each started game's legal
        actions; zero rows for the other games."""
        stats = search.root_statistics()
        z = np.where(stats.legal, self._improved_logits(stats), -np.inf)
        z -= np.where(stats.legal.any(axis=1, keepdims=True), z.max(axis=1, keepdims=True), 0.0)
        weights = np.where(stats.legal, np.exp(z), 0.0)
        total = weights.sum(axis=1, keepdims=True)
        targets = np.where(total > 0, weights / np.maximum(total, MIN_PRIOR), 0.0)
        targets[~self._games] = 0.0
        return targets.astype(np.float32)
