"""Go games searched in a batch: the rules engine, the tree search and an evaluator wired
together. Self-play, evaluation matches, the GTP engine and the GUI all play through this.

Slots of the engine's pool: slot g (g < B) is game g's current position; node i of game g's
tree keeps its position in slot B + g * max_nodes + i, so expanding a batch of leaves is one
`copy_play` from their parents' slots and no simulation replays moves from the root.

An evaluator maps input planes (k, N, N, C) float32 to (policy (k, N*N+1) probabilities,
value (k,) in [-1, 1] from the view of the side to move), e.g. architectures.CompiledNet.
With `rollout_lambda` > 0 (the Config) a leaf's value is (1 - λ) · v + λ · z, z the result of
one random sensible playout from the leaf's slot, all leaves of a search step in one
`GoBatch.playouts` call; λ = 0 leaves the search exactly as without playouts (no playout is
played). A uniform evaluator with λ = 1 is pure Monte Carlo tree search (`pure_mcts`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from kernels import GoBatch
from py_util import BatchedMCTS
from training.config import Config

Evaluator = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class SearchSettings:
    """The search's share of a Config, with the simulations per move a caller asks for."""
    simulations: int
    c_puct: float = 1.5
    fpu_reduction: float = 0.25
    dirichlet_alpha: float = 0.3
    noise_fraction: float = 0.25
    # Search only GoBatch.sensible_moves (no filling of one's own eyes, pass only when
    # nothing else is left) instead of every legal move.
    sensible_moves_only: bool = True
    leaves_per_game: int = 1
    rollout_lambda: float = 0.0

    @classmethod
    def from_config(cls, config: Config, simulations: int | None = None) -> "SearchSettings":
        return cls(simulations=simulations or config.simulations, c_puct=config.c_puct,
                   fpu_reduction=config.fpu_reduction, dirichlet_alpha=config.dirichlet_alpha,
                   noise_fraction=config.noise_fraction,
                   sensible_moves_only=config.sensible_moves_only,
                   leaves_per_game=config.leaves_per_game,
                   rollout_lambda=config.rollout_lambda)


def game_results(go: GoBatch, slots) -> np.ndarray:
    """+1 / -1 / 0 from black's view for finished positions (area score minus komi)."""
    return np.sign(go.score(slots)).astype(np.float32)


def uniform_evaluator(num_actions: int) -> Evaluator:
    """Equal priors for every action (the search keeps the legal or sensible ones) and value
    0: no knowledge at all, for pure Monte Carlo tree search."""
    def evaluate(planes: np.ndarray):
        k = len(planes)
        return np.full((k, num_actions), 1.0 / num_actions, np.float32), np.zeros(k, np.float32)
    return evaluate


def pure_mcts(config: Config) -> tuple[Config, Evaluator]:
    """(config, evaluator) of the net-free player: uniform priors over the sensible moves and
    every leaf valued by one playout (rollout_lambda 1); its rules are `config`'s.

    With equal priors, AlphaZero's first-play urgency (an unvisited move is worth the parent's
    value minus fpu_reduction) keeps revisiting the first move tried, the lowest action: the
    player then favours the top-left corner. An unvisited move here is worth 2 more than the
    parent's value, above any Q, so every move gets one playout before any gets a second (as
    in UCT), and c_puct 5 (the Gomoku AlphaZero project's pure MCTS) spreads the rest."""
    return (config.overridden(rollout_lambda=1.0, fpu_reduction=-2.0, c_puct=5.0),
            uniform_evaluator(config.num_actions))


class SearchingGames:
    """`num_games` games under `config`'s rules and search settings. `simulations` is the
    tree's budget per move (default config.simulations); `think` may stop a search earlier.
    `search` replaces the BatchedMCTS built from the settings by another object with its
    interface and batch size (the tests' reference search)."""

    def __init__(self, config: Config, num_games: int, evaluator: Evaluator, *,
                 simulations: int | None = None, seed: int = 0, num_threads: int = 0,
                 search=None):
        self.num_games = num_games
        self.board_size = n = config.board_size
        self.history = config.history
        self.settings = settings = SearchSettings.from_config(config, simulations)
        self.evaluator = evaluator
        self.search = search if search is not None else BatchedMCTS(
            num_games, n * n + 1, settings.simulations, c_puct=settings.c_puct,
            fpu_reduction=settings.fpu_reduction, num_threads=num_threads, seed=seed)
        self.go = GoBatch(num_games, n, komi=config.komi, superko=config.superko,
                          max_moves=config.resolved_max_moves, history_length=config.history,
                          seed=seed, num_threads=num_threads,
                          num_slots=num_games * (1 + self.search.max_nodes))
        self.evaluations = 0

    def node_slots(self, game, node) -> np.ndarray:
        return self.num_games + np.asarray(game) * self.search.max_nodes + np.asarray(node)

    def evaluate_slots(self, slots: np.ndarray):
        """(priors, legal, values, terminal) of the positions in `slots`; a finished position's
        value is its game result from the view of the side to move there."""
        legal = (self.go.sensible_moves(slots) if self.settings.sensible_moves_only
                 else self.go.legal_moves(slots))
        terminal = self.go.is_over(slots)
        policy, values = self.evaluator(self.go.features(self.history, slots))
        self.evaluations += len(slots)
        values = np.asarray(values, dtype=np.float32).copy()
        mix = self.settings.rollout_lambda
        if mix > 0 and not terminal.all():
            live = slots[~terminal]
            # The playout's result from the view of the side to move at the leaf.
            z = np.sign(self.go.playouts(live)) * self.go.to_play(live)
            values[~terminal] = ((1.0 - mix) * values[~terminal] + mix * z).astype(np.float32)
        if terminal.any():
            finished = slots[terminal]
            values[terminal] = game_results(self.go, finished) * self.go.to_play(finished)
        return np.asarray(policy, dtype=np.float32), legal, values, terminal

    def _evaluate_leaves(self, leaves):
        destination = self.node_slots(leaves.game, leaves.node)
        self.go.copy_play(self.node_slots(leaves.game, leaves.parent), destination, leaves.action)
        return self.evaluate_slots(destination)

    def _expand_roots(self, games: np.ndarray) -> None:
        needs = self.search.needs_root_expansion & games
        if not needs.any():
            return
        chosen = np.flatnonzero(needs)
        roots = self.node_slots(chosen, self.search.root_nodes[chosen])
        self.go.copy(chosen, roots)
        count, actions = self.num_games, self.board_size ** 2 + 1
        priors = np.zeros((count, actions), np.float32)
        legal = np.zeros((count, actions), bool)
        values = np.zeros(count, np.float32)
        terminal = np.zeros(count, bool)
        priors[chosen], legal[chosen], values[chosen], terminal[chosen] = self.evaluate_slots(roots)
        self.search.expand_roots(priors, legal, values, terminal, games=needs)

    def think(self, games=None, noise=False, simulations: int | None = None):
        """Search the current positions of the chosen games (bool mask, default all that are
        not over); returns the search's root statistics. `noise`: True mixes Dirichlet noise
        into every chosen root, a bool mask into the chosen roots it marks."""
        games = ~self.go.is_over() if games is None else np.asarray(games, dtype=bool)
        if games.any():
            self._expand_roots(games)
            noisy = games & np.asarray(noise, dtype=bool)
            if noisy.any() and self.settings.noise_fraction > 0:
                self.search.add_root_noise(self.settings.dirichlet_alpha,
                                           self.settings.noise_fraction, games=noisy)
            self.search.run(self._evaluate_leaves, games=games, simulation_limit=simulations,
                            num_leaves_per_game=self.settings.leaves_per_game)
        return self.search.root_statistics()

    def play(self, actions: np.ndarray, games=None) -> None:
        """Play actions[g] in each chosen game and move its tree root along (subtree reuse)."""
        games = np.ones(self.num_games, bool) if games is None else np.asarray(games, dtype=bool)
        chosen = np.flatnonzero(games)
        if len(chosen) == 0:
            return
        actions = np.asarray(actions)
        self.go.play(actions[chosen], slots=chosen)
        # A move the tree has no edge for (an opponent's eye-filling move, an unsearched
        # root) cannot reuse a subtree: that game's search starts afresh.
        in_tree = np.zeros(self.num_games, bool)
        in_tree[chosen] = self.search.root_statistics().legal[chosen, actions[chosen]]
        fresh = games & ~in_tree
        if fresh.any():
            self.search.reset(fresh)
        reuse = games & in_tree
        if reuse.any():
            self.search.advance(np.where(reuse, actions, 0), games=reuse)

    def new_games(self, games=None) -> None:
        games = np.ones(self.num_games, bool) if games is None else np.asarray(games, dtype=bool)
        if games.any():
            self.go.reset(games)
            self.search.reset(games)

    def root_values(self) -> np.ndarray:
        """Visit-weighted mean Q at each root, from the view of the side to move (0 unvisited)."""
        stats = self.search.root_statistics()
        visits = stats.visits.astype(np.float64)
        total = visits.sum(axis=1)
        return np.where(total > 0, (stats.q * visits).sum(axis=1) / np.maximum(total, 1), 0.0)
