"""Go games searched in a batch: the rules engine, the tree search and an evaluator wired
together. Self-play, evaluation matches, the GTP engine and the GUI all play through this.

Slots of the engine's pool: slot g (g < B) is game g's current position; every tree node keeps
its position in a slot of its own (`node_slots`, games/node_slots.py: pages of slots taken as
the trees grow), so expanding a batch of leaves is one `copy_play` from their parents' slots
and no simulation replays moves from the root.

An evaluator maps input planes (k, N, N, C) float32 to (policy (k, N*N+1) probabilities,
value (k,) in [-1, 1] from the view of the side to move), e.g. architectures.CompiledNet.
With `rollout_lambda` > 0 (the Config) a leaf's value is (1 - λ) · v + λ · z, z the result of
one random sensible playout from the leaf's slot, all leaves of a search step in one
`GoBatch.playouts` call; λ = 0 leaves the search exactly as without playouts (no playout is
played). A uniform evaluator with λ = 1 is pure Monte Carlo tree search (`pure_mcts`).
The planes are an array of the engine's namespace (`GoBatch.xp`: NumPy, or CuPy on the CUDA
back end); the outputs may be host arrays or DLPack producers on the engine's device.

One code path serves both back ends: the engine's outputs stay in its namespace, and per
search step exactly one block goes each way between host and engine. Host to engine: the
leaves' parent slots, their slots and their actions, int64 (3, k), in `GoBatch.upload`.
Engine to host: what the C tree needs, in `_download`, one flat byte block of
k * (5 * A + 5) bytes: priors float32 (k, A), values float32 (k,), legal bool (k, A),
terminal bool (k,). On the CPU back end both are plain host copies. On the CUDA back end
(without playouts or score utility) the search's own steps go through games/device_step.py
instead: the same two copies, from and into pinned memory, with the rules' per-leaf work
fused into one kernel and no other wait.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from games.device_step import COPY, COPY_PLAY, DeviceEvaluation, block_views, in_namespace
from games.node_slots import NodeSlots
from kernels import GoBatch
from py_util import BatchedMCTS
from py_util.gumbel import GumbelRoots
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
    # How play picks the move from the search (not self-play): by lower confidence bound.
    lcb_move_choice: bool = False
    # Score utility (KataGo's static one): a leaf's value is (1 - w) v + w (2/pi) atan(s / N),
    # s the net's expected score margin for the side to move (a finished leaf's: its area
    # score) and N the board size; w = 0 is the plain value. The search's Q, its win rates,
    # what it backs up and what a resign threshold compares are then this utility. It runs
    # the search's steps through `evaluate_slots` on the CUDA back end too (not fused).
    score_utility: float = 0.0

    @classmethod
    def from_config(cls, config: Config, simulations: int | None = None) -> "SearchSettings":
        return cls(simulations=simulations or config.simulations, c_puct=config.c_puct,
                   fpu_reduction=config.fpu_reduction, dirichlet_alpha=config.dirichlet_alpha,
                   noise_fraction=config.noise_fraction,
                   sensible_moves_only=config.sensible_moves_only,
                   leaves_per_game=config.leaves_per_game,
                   rollout_lambda=config.rollout_lambda,
                   lcb_move_choice=config.lcb_move_choice,
                   score_utility=config.score_utility)


def score_utility(margin, board_size: int):
    """(2/pi) atan(margin / board_size) in (-1, 1): a score margin in points as a utility, near
    linear within a few points and flat for big leads (9 points on 9x9: 0.5)."""
    return (2 / np.pi) * np.arctan(margin / board_size)


def game_results(go: GoBatch, slots):
    """+1 / -1 / 0 from black's view for finished positions (area score minus komi), float32
    in the engine's namespace."""
    return go.xp.sign(go.score(slots)).astype(np.float32)


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
    interface and batch size (the tests' reference search). `forced_playouts`: KataGo's k at
    the roots; `gumbel_considered` > 0: `think` chooses root actions by Gumbel sequential
    halving (py_util/gumbel.py) and `gumbel` holds the move and policy target it found
    (self-play passes config's values; play and matches search plainly)."""

    def __init__(self, config: Config, num_games: int, evaluator: Evaluator, *,
                 simulations: int | None = None, seed: int = 0, num_threads: int = 0,
                 search=None, forced_playouts: float = 0.0, gumbel_considered: int = 0):
        self.num_games = num_games
        self.board_size = n = config.board_size
        self.history = config.history
        self.settings = settings = SearchSettings.from_config(config, simulations)
        self.evaluator = evaluator
        self._with_score = None
        if settings.score_utility > 0:
            if not (getattr(evaluator, "has_aux_heads", False)
                    and hasattr(evaluator, "with_score")):
                raise ValueError("score utility needs a net that gives its score with its "
                                 "policy and value (a CompiledNet or the GUI's net process of "
                                 "a net trained with --aux-heads true)")
            self._with_score = evaluator.with_score
        self.search = search if search is not None else BatchedMCTS(
            num_games, n * n + 1, settings.simulations, c_puct=settings.c_puct,
            fpu_reduction=settings.fpu_reduction, num_threads=num_threads, seed=seed,
            forced_playouts=forced_playouts)
        self.go = GoBatch(num_games, n, komi=config.komi, superko=config.superko,
                          backend=config.backend,
                          max_moves=config.resolved_max_moves, history_length=config.history,
                          extra_features=config.extra_features, komi_input=config.komi_input,
                          seed=seed, num_threads=num_threads)
        self._node_slots = NodeSlots(self.go, num_games, self.search.max_nodes)
        self.gumbel = (GumbelRoots(num_games, n * n + 1, gumbel_considered, seed=seed + 2)
                       if gumbel_considered > 0 else None)
        self.evaluations = 0
        # Each game's root priors as the net gave them (masked and renormalised), before any
        # root noise: what the search's policy target is measured against (policy surprise).
        self.net_priors = np.zeros((num_games, n * n + 1), np.float32)
        # The search's own steps on CUDA: one round trip each, the rules' work in one kernel.
        self._device = (DeviceEvaluation(self.go, evaluator, config.history,
                                         settings.sensible_moves_only)
                        if self.go.backend_name == "cuda" and settings.rollout_lambda == 0
                        and settings.score_utility == 0 else None)

    def node_slots(self, game, node) -> np.ndarray:
        """int64 slots of the positions of nodes `node` of games `game` (broadcast)."""
        return self._node_slots.slots(game, node)

    def reset_search(self, games=None) -> None:
        """Empty the chosen games' trees (bool mask (B,), default all): the next `think`
        searches their positions afresh. Their node slots go back to the pool."""
        games = np.ones(self.num_games, bool) if games is None else np.asarray(games, dtype=bool)
        self.search.reset(games)
        self._node_slots.release(games)

    def evaluate_slots(self, slots):
        """(priors, legal, values, terminal), host NumPy, of the positions in `slots` (host
        indices or `CheckedSlots`); a finished position's value is its game result from the
        view of the side to move there (with score utility, mixed with its area score)."""
        go, xp = self.go, self.go.xp
        legal = (go.sensible_moves(slots) if self.settings.sensible_moves_only
                 else go.legal_moves(slots))
        terminal = go.is_over(slots)
        weight = self.settings.score_utility
        if weight > 0:
            policy, values, margins = self._with_score(go.features(self.history, slots))
            values = ((1 - weight) * values
                      + weight * score_utility(margins, self.board_size)).astype(np.float32)
        else:
            policy, values = self.evaluator(go.features(self.history, slots))
        self.evaluations += len(terminal)
        policy = xp.ascontiguousarray(in_namespace(xp, policy), dtype=np.float32)
        values = in_namespace(xp, values).astype(np.float32)
        mix = self.settings.rollout_lambda
        if mix > 0:
            # The playout's result from the view of the side to move at the leaf (finished
            # leaves are overwritten below; playing out from them costs nothing).
            z = xp.sign(in_namespace(xp, go.playouts(slots))) * go.to_play(slots)
            values = ((1.0 - mix) * values + mix * z).astype(np.float32)
        finished = go.finished_values(slots)
        if weight > 0:
            margins = go.score(slots) * go.to_play(slots)
            finished = (1 - weight) * finished + weight * score_utility(margins, self.board_size)
        values = xp.where(terminal, finished, values).astype(np.float32)
        return self._download(policy, legal, values, terminal)

    def _download(self, policy, legal, values, terminal):
        """One engine-to-host copy of the four arrays the tree takes, as one flat byte block
        (layout in games/device_step.py); returns host views (priors, legal, values, terminal)."""
        xp = self.go.xp
        k, actions = legal.shape
        block = self.go.to_numpy(xp.concatenate([
            policy.reshape(-1).view(np.uint8), xp.ascontiguousarray(values).view(np.uint8),
            legal.reshape(-1).view(np.uint8), terminal.view(np.uint8)]))
        return block_views(block, k, actions)

    def _evaluate_leaves(self, leaves):
        if self._device is not None:
            self.evaluations += len(leaves.node)
            return self._device.evaluate(
                COPY_PLAY, self.node_slots(leaves.game, leaves.parent),
                self.node_slots(leaves.game, leaves.node), leaves.action)
        (parents, destination), actions = self.go.upload(
            [self.node_slots(leaves.game, leaves.parent), self.node_slots(leaves.game, leaves.node)],
            leaves.action)
        # The tree picks actions from the legal masks it was given, and a leaf's node is new.
        self.go.copy_play(parents, destination, actions, trusted=True)
        return self.evaluate_slots(destination)

    def _expand_roots(self, games: np.ndarray) -> None:
        needs = self.search.needs_root_expansion & games
        if not needs.any():
            return
        chosen = np.flatnonzero(needs)
        roots = self.node_slots(chosen, self.search.root_nodes[chosen])
        count, actions = self.num_games, self.board_size ** 2 + 1
        priors = np.zeros((count, actions), np.float32)
        legal = np.zeros((count, actions), bool)
        values = np.zeros(count, np.float32)
        terminal = np.zeros(count, bool)
        if self._device is not None:
            self.evaluations += len(chosen)
            evaluation = self._device.evaluate(COPY, chosen, roots)
        else:
            (games_slots, roots), _ = self.go.upload([chosen, roots])
            self.go.copy(games_slots, roots)
            evaluation = self.evaluate_slots(roots)
        priors[chosen], legal[chosen], values[chosen], terminal[chosen] = evaluation
        self.search.expand_roots(priors, legal, values, terminal, games=needs)

    def think(self, games=None, noise=False, simulations: int | None = None):
        """Search the current positions of the chosen games (bool mask, default all that are
        not over); returns the search's root statistics."""
        games = (~self.go.to_numpy(self.go.is_over()) if games is None
                 else np.asarray(games, dtype=bool))
        if games.any():
            self._expand_roots(games)
            # A move's first search: later ones (playout caps' full search) see its noise.
            first = games & (self.search.simulations == 0)
            if first.any():   # analysis grows a search in many calls: only its first reads
                self.net_priors[first] = self.search.root_statistics().priors[first]
            noisy = games & np.asarray(noise, dtype=bool)
            root_actions = None
            if self.gumbel is not None:
                # Gumbel noise is the exploration: no Dirichlet noise on top.
                search = self.search
                values = np.zeros(self.num_games)
                roots = search.root_nodes   # one status read: it covers every game
                for g in np.flatnonzero(games & ~search.terminal_roots):
                    values[g] = search.node_info(int(g), int(roots[g])).value
                self.gumbel.start(search, games, noisy, values,
                                  simulations or self.settings.simulations)
                root_actions = lambda: self.gumbel.root_actions(search)  # noqa: E731
            elif noisy.any() and self.settings.noise_fraction > 0:
                self.search.add_root_noise(self.settings.dirichlet_alpha,
                                           self.settings.noise_fraction, games=noisy)
            self.search.run(self._evaluate_leaves, games=games, simulation_limit=simulations,
                            num_leaves_per_game=self.settings.leaves_per_game,
                            root_actions=root_actions)
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
            self.reset_search(fresh)
        reuse = games & in_tree
        if reuse.any():
            self.search.advance(np.where(reuse, actions, 0), games=reuse)

    def new_games(self, games=None) -> None:
        games = np.ones(self.num_games, bool) if games is None else np.asarray(games, dtype=bool)
        if games.any():
            self.go.reset(games)
            self.reset_search(games)

    def best_actions(self, games=None) -> np.ndarray:
        """The move play makes in each chosen game, int64 (B,), -1 elsewhere: most visits, or
        by lower confidence bound with the settings' `lcb_move_choice`."""
        return self.search.choose_actions(0.0, games=games, lcb=self.settings.lcb_move_choice)

    def root_values(self) -> np.ndarray:
        """Visit-weighted mean Q at each root, from the view of the side to move (0 unvisited)."""
        stats = self.search.root_statistics()
        visits = stats.visits.astype(np.float64)
        total = visits.sum(axis=1)
        return np.where(total > 0, (stats.q * visits).sum(axis=1) / np.maximum(total, 1), 0.0)
