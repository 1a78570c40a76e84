"""Batched AlphaZero tree search: one tree per game for B games, in buffers preallocated by the
C extension `py_util._mcts` (py_util/mcts.c documents every buffer's layout).

The search knows nothing about Go. It sees actions ``0..A-1`` (for Go ``A = N*N + 1``, the last
one pass), priors, legal masks and values. One simulation step, batched over the games::

    leaves = search.select()                 # one leaf per game by PUCT (more with virtual loss)
    ...                                      # caller: make the leaf positions, evaluate them
    search.expand_and_backup(leaves.game, leaves.node, priors, legal, values, terminal)

``search.run(evaluate)`` loops this until every game has run ``num_simulations`` simulations.

Conventions
-----------
* Values are in [-1, 1] from the view of the player to move at the evaluated position. A node's
  value is from the view of the player to move at it; an edge's Q (``root_q``) is from the view
  of the player choosing it, i.e. the player to move at the parent. Backup flips the sign each
  ply. A terminal leaf backs up the game result instead of the net's value, and is never
  evaluated again: later selections reaching it back up the stored result.
* Selection: argmax of ``Q + c_puct * P * sqrt(N_parent) / (1 + N)``, ties to the higher prior,
  then the lower action. ``N_parent`` counts the parent's own evaluation, so priors steer the
  first selection below a fresh node. First-play urgency: an unvisited action has
  ``Q = clamp(Q_parent - fpu_reduction, -1, 1)``, ``Q_parent`` being the parent's mean value
  from the chooser's view (its own evaluation included): unexplored moves look a little worse
  than the position itself.
* Priors are masked to the legal actions and renormalised (uniform if they sum to zero), and
  stored as float32.
* Node ids are stable for a node's lifetime, so the caller can keep node ``i`` of game ``g``'s
  position in a slot of its own (games/node_slots.py). A root is node 0 after
  ``reset``; ``advance`` makes the chosen child the root and reclaims the rest.
* Per move the search runs ``num_simulations`` new simulations, on top of the visits kept by
  ``advance``. Capacity is ``max_nodes = 1 + num_simulations + reuse_budget`` nodes per game, so
  a configured search never runs out; if a buffer fills anyway (a larger ``simulation_limit``,
  a small ``edges_per_node``) that game stops growing for this move, keeps the visits it has,
  and the event is counted in ``overflow_counts``. Nothing crashes.
* Games are chosen by ``games``: None (all), a bool mask (B,), or an array of game indices.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

from . import _mcts
from .arguments import (bool_array, float_array, index_array, int64_array,
                        positive_int)

NO_NODE = _mcts.NO_NODE
STATUS_FIELDS = _mcts.STATUS_FIELDS
NODE_STATES = {_mcts.NODE_FREE: "free", _mcts.NODE_NEW: "new", _mcts.NODE_EXPANDED: "expanded",
               _mcts.NODE_TERMINAL: "terminal", _mcts.NODE_NO_ROOM: "no_room"}


class Leaves(NamedTuple):
    """Leaves chosen by one `select`, game-major; all int64 (k,). The leaf's position is the
    parent's position after `action`; `node` is the leaf's (new) node id in game `game`."""
    game: np.ndarray
    parent: np.ndarray
    action: np.ndarray
    node: np.ndarray


class Evaluation(NamedTuple):
    """What an evaluator returns for k leaves: priors float32 (k, A) (probabilities, not
    logits), legal bool (k, A), values float32 (k,) in [-1, 1] from the view of the player to
    move at the leaf, terminal bool (k,) (then `values` holds the game result)."""
    priors: np.ndarray
    legal: np.ndarray
    values: np.ndarray
    terminal: np.ndarray


class RootStatistics(NamedTuple):
    """Per-action statistics of every root, all (B, A); zero for actions without an edge
    (illegal) and for games whose root is not expanded. `q` is from the view of the player to
    move at the root and is meaningful only where `visits > 0`."""
    visits: np.ndarray  # int32
    q: np.ndarray       # float32
    priors: np.ndarray  # float32, after noise
    legal: np.ndarray   # bool
    # float32: the population variance of the values backed up through the action (0 where
    # unvisited); None where a caller built the statistics without it.
    variance: np.ndarray | None = None


# Lower-confidence-bound move choice (Leela Zero's, KataGo's): among the root actions with at
# least LCB_MIN_VISIT_SHARE of the most visited one's visits (and 2), play the one whose mean
# value is highest less LCB_Z standard errors, not simply the most visited: a move that the
# search reached late and found better gets played if the evidence holds. The standard error
# is sqrt(s^2 / n), s^2 the variance of the n backed-up values (Bessel-corrected) but at least
# LCB_VARIANCE_FLOOR, so that two equal values do not claim certainty.
LCB_Z = 1.96
LCB_MIN_VISIT_SHARE = 0.1
LCB_VARIANCE_FLOOR = 0.01       # value units ([-1, 1]): a standard deviation of 0.1


def lower_confidence_bounds(stats: RootStatistics) -> np.ndarray:
    """float64 (B, A): each root action's Q less LCB_Z standard errors (value units, the
    mover's view); -inf below 2 visits."""
    if stats.variance is None:
        raise ValueError("lower confidence bounds need the statistics' variance")
    visits = stats.visits.astype(np.float64)
    counted = visits >= 2
    n = np.where(counted, visits, 2.0)
    spread = np.maximum(stats.variance.astype(np.float64) * n / (n - 1), LCB_VARIANCE_FLOOR)
    bounds = stats.q.astype(np.float64) - LCB_Z * np.sqrt(spread / n)
    return np.where(counted, bounds, -np.inf)


def move_preferences(stats: RootStatistics, lcb: bool = False) -> np.ndarray:
    """float64 (B, A): the order in which play prefers each root's actions, highest first; -1
    for actions without an edge. By default most visits first, ties to the higher prior (then,
    under argmax, the lower action). With `lcb`, the LCB candidates (see LCB_MIN_VISIT_SHARE)
    come first, by their lower confidence bound, then the rest as by default."""
    visits = stats.visits.astype(np.float64)
    preference = np.where(stats.legal, visits + 0.5 * stats.priors.astype(np.float64), -1.0)
    if not lcb:
        return preference
    most = visits.max(axis=1, keepdims=True)
    candidates = stats.legal & (visits >= np.maximum(2.0, LCB_MIN_VISIT_SHARE * most))
    # Bounds lie in [-1 - 2 LCB_Z, 1]: shifted by 3 + 2 LCB_Z they stay positive and above
    # every visit count plus one.
    above = most + 1 + (3 + 2 * LCB_Z)
    with np.errstate(invalid="ignore"):
        ranked = above + lower_confidence_bounds(stats)
    return np.where(candidates, ranked, preference)


class NodeInfo(NamedTuple):
    state: str            # "new", "expanded", "terminal" or "no_room"
    parent: int           # NO_NODE for a root
    visits: int
    value: float          # mean value, view of the player to move at the node (0 if unvisited)
    pending: int          # selections in flight through it
    num_edges: int
    terminal_value: float


class NodeEdges(NamedTuple):
    """A node's edges in action order, all (num_edges,)."""
    actions: np.ndarray   # int64
    priors: np.ndarray    # float32
    visits: np.ndarray    # int32
    q: np.ndarray         # float64, chooser's view; 0 where unvisited
    children: np.ndarray  # int64 node ids, NO_NODE where the child does not exist


class BatchedMCTS:
    """Search trees for `batch_size` games over `num_actions` actions.

    Buffers (C, allocated here once; M = max_nodes, E = max_edges per game; py_util/mcts.c
    documents every field)::

        nodes  [B, M]  parent, edge offset, first edge, number of edges, tried edges, visits,
                       pending selections, value sum, terminal value, state
        edges  [B, E]  per expanded node a block of its legal actions: action, prior, visits,
                       value sum, child node id (or NO_NODE)
        root, simulations, pending leaves, overflows, collisions, free list  [B] / [B, M]

    Args:
        num_simulations: simulations per move (the default `simulation_limit`).
        reuse_budget: nodes kept below the new root by `advance` (default: num_simulations).
        c_puct: exploration constant of PUCT.
        fpu_reduction: first-play urgency, see the module docstring.
        virtual_loss: value each in-flight selection counts as losing, when more than one leaf
            per game is selected per step (`num_leaves_per_game > 1`).
        edges_per_node: edge arena size per game is `max_nodes * edges_per_node` (default
            num_actions, which never fills up; less saves memory on big boards).
        num_threads: OpenMP threads over games at most; 0 = OpenMP's default (all cores, or
            OMP_NUM_THREADS). 1 avoids parallel regions, whose barriers stall for a whole
            scheduler slice when another process holds a core.
        adaptive_threads: a kind of parallel call whose team stalls (another busy program
            holds a core) runs on one thread for a while, then tries the team again
            (kernels/adaptive_threads.h); False keeps the team always.
        seed: seeds the NumPy generator used for root noise and temperature sampling.
    """

    def __init__(self, batch_size: int, num_actions: int, num_simulations: int, *,
                 reuse_budget: int | None = None, c_puct: float = 1.25,
                 fpu_reduction: float = 0.25, virtual_loss: float = 1.0,
                 edges_per_node: int | None = None, num_threads: int = 0, seed: int = 0,
                 adaptive_threads: bool = True, forced_playouts: float = 0.0):
        batch_size = positive_int(batch_size, "batch_size")
        num_actions = positive_int(num_actions, "num_actions")
        if num_actions > _mcts.MAX_ACTIONS:
            raise ValueError(f"num_actions must be <= {_mcts.MAX_ACTIONS}, got {num_actions}")
        num_simulations = positive_int(num_simulations, "num_simulations", minimum=0)
        reuse_budget = num_simulations if reuse_budget is None else reuse_budget
        reuse_budget = positive_int(reuse_budget, "reuse_budget", minimum=0)
        edges_per_node = num_actions if edges_per_node is None else edges_per_node
        edges_per_node = positive_int(edges_per_node, "edges_per_node")
        for name, value in (("c_puct", c_puct), ("virtual_loss", virtual_loss)):
            if not (np.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be finite and >= 0, got {value!r}")
        if not np.isfinite(fpu_reduction):
            raise ValueError(f"fpu_reduction must be finite, got {fpu_reduction!r}")
        if not (np.isfinite(forced_playouts) and forced_playouts >= 0):
            raise ValueError(f"forced_playouts must be finite and >= 0, got {forced_playouts!r}")
        num_threads = positive_int(num_threads, "num_threads", minimum=0, maximum=1024)
        self.batch_size = batch_size
        self.num_actions = num_actions
        self.num_simulations = num_simulations
        self.reuse_budget = reuse_budget
        self.max_nodes = max(2, 1 + num_simulations + reuse_budget)
        self.max_edges = max(num_actions, self.max_nodes * edges_per_node)
        if self.max_nodes >= 2**31 or self.max_edges >= 2**31:
            raise ValueError("num_simulations, reuse_budget or edges_per_node is too large")
        self.c_puct = float(c_puct)
        self.fpu_reduction = float(fpu_reduction)
        self.virtual_loss = float(virtual_loss)
        # KataGo's forced playouts at the roots (the C tree's forced_edge): k, 0 = off.
        self.forced_playouts = float(forced_playouts)
        self._tree = _mcts.Tree(batch_size, num_actions, self.max_nodes, self.max_edges,
                                reuse_budget, self.c_puct, self.fpu_reduction, self.virtual_loss,
                                num_threads, bool(adaptive_threads), self.forced_playouts)
        self.num_threads = self._tree.num_threads
        self._rng = np.random.default_rng(seed)
        self._all_games = np.ones(batch_size, dtype=np.bool_)
        self._no_terminal = np.zeros(batch_size, dtype=np.bool_)
        self._select_out: dict[int, tuple[np.ndarray, ...]] = {}
        self._status = np.empty((batch_size, len(STATUS_FIELDS)), dtype=np.int64)

    @property
    def memory_bytes(self) -> int:
        return self._tree.memory_bytes

    # ------------------------------------------------------------------ the simulation step

    def select(self, num_leaves_per_game: int = 1, games=None,
               simulation_limit: int | None = None, root_actions=None) -> Leaves:
        """Select up to `num_leaves_per_game` leaves in each chosen game that has simulations
        left this move (`simulation_limit`, default num_simulations) and room to grow.
        `root_actions` (int (B,), or None): game g's selections leave its root by action
        root_actions[g] instead of PUCT's choice (Gumbel root selection decides them outside
        the tree, py_util/gumbel.py); -1 leaves that game to PUCT. Each other value must be a
        legal action of the game's expanded root.

        Every returned leaf must be passed to `expand_and_backup` (or, when it cannot be
        evaluated, to `abandon`) before the next `select` or `advance`. Selections reaching a terminal node are backed up at once and not returned;
        with several leaves per game, a selection reaching a leaf already returned in this call
        is dropped (counted in `collision_counts`). Every root must be expanded.
        """
        return self._select(num_leaves_per_game, games, simulation_limit, root_actions)[0]

    def _select(self, num_leaves_per_game, games, simulation_limit, root_actions=None):
        leaves_per_game = positive_int(num_leaves_per_game, "num_leaves_per_game")
        out = self._select_out.get(leaves_per_game)
        if out is None:
            out = tuple(np.empty(self.batch_size * leaves_per_game, dtype=np.int64)
                        for _ in range(4))
            self._select_out[leaves_per_game] = out
        if root_actions is not None:
            root_actions = index_array(root_actions, "root_actions", self.batch_size)
        count, active = self._tree.select(leaves_per_game, self._limit(simulation_limit),
                                          self._mask(games), *out, root_actions)
        return Leaves(*(array[:count].copy() for array in out)), active

    def expand_and_backup(self, game, node, priors, legal, values, terminal=None) -> None:
        """Expand the leaves (game[i], node[i]) from `select` with their evaluations and back
        the values up. Shapes: game, node (k,); priors (k, A); legal (k, A) bool; values (k,)
        in [-1, 1] from the view of the player to move at the leaf; terminal (k,) bool or None
        (then `values` of terminal leaves are the game result and they get no children)."""
        game = index_array(game, "game")
        count = len(game)
        node = index_array(node, "node", count)
        priors = float_array(priors, "priors", (count, self.num_actions))
        legal = bool_array(legal, "legal", (count, self.num_actions))
        values = float_array(values, "values", (count,))
        terminal = (np.zeros(count, dtype=np.bool_) if terminal is None
                    else bool_array(terminal, "terminal", (count,)))
        if count:
            self._tree.expand_and_backup(game, node, priors, legal, values, terminal)

    def abandon(self, game, node) -> None:
        """Undo the `select` that returned the leaves (game[i], node[i]) (all of them, in any
        order), when they will not be evaluated: the tree is as it was before that select,
        but for what the select finished itself (terminal leaves backed up, collisions and a
        full buffer counted). `run` does this when its evaluator raises."""
        game = index_array(game, "game")
        node = index_array(node, "node", len(game))
        if len(game):
            # Select's order: game-major, and within a game by node id, since new nodes come
            # off the free list lowest first; C undoes them in the reverse order.
            order = np.lexsort((node, game))
            self._tree.abandon(game[order], node[order])

    def expand_roots(self, priors, legal, values, terminal=None, games=None) -> None:
        """Evaluate the roots of the chosen games (each must need it, see
        `needs_root_expansion`). Arrays cover the whole batch: priors (B, A), legal (B, A) bool,
        values (B,), terminal (B,) bool or None; rows of other games are ignored."""
        shape = (self.batch_size, self.num_actions)
        priors = float_array(priors, "priors", shape)
        legal = bool_array(legal, "legal", shape)
        values = float_array(values, "values", (self.batch_size,))
        terminal = (self._no_terminal if terminal is None
                    else bool_array(terminal, "terminal", (self.batch_size,)))
        self._tree.expand_roots(self._mask(games), priors, legal, values, terminal)

    def run(self, evaluate: Callable[[Leaves], Evaluation | tuple], num_leaves_per_game: int = 1,
            games=None, simulation_limit: int | None = None,
            root_actions: Callable[[], np.ndarray] | None = None) -> int:
        """Run simulation steps until the chosen games are done for this move.
        `evaluate(leaves)` returns (priors, legal, values, terminal) for the leaves (see
        `Evaluation`). `root_actions()`, if given, is asked before each step for the root
        actions of that step's selections (see `select`). Returns the number of leaves
        evaluated."""
        evaluated = 0
        while True:
            leaves, active = self._select(num_leaves_per_game, games, simulation_limit,
                                          None if root_actions is None else root_actions())
            if len(leaves.game):
                try:
                    priors, legal, values, terminal = evaluate(leaves)
                    self.expand_and_backup(leaves.game, leaves.node, priors, legal, values,
                                           terminal)
                except BaseException:
                    # Undo the selection of leaves still pending, or every later select of
                    # these games would refuse to run. expand_and_backup expands all of them or
                    # none, but a signal handler's exception (a stop) can surface just after
                    # it returned, with the leaves already backed up: abandoning those would
                    # raise a ValueError in place of the stop.
                    if self.node_info(leaves.game[0], leaves.node[0]).pending == 1:
                        self.abandon(leaves.game, leaves.node)
                    raise
                evaluated += len(leaves.game)
            if not active:
                return evaluated

    def gumbel_root_actions(self, games, gumbel, base_visits, root_values, table,
                            considered: int, simulations: int,
                            constants: tuple[float, float, float]) -> np.ndarray:
        """int64 (B,): Gumbel sequential halving's root action for each chosen game's next
        simulation, -1 where none (py_util/gumbel.py `GumbelRoots.root_actions` defines the
        choice and passes its state here: noise float (B, A), visits at the move's start
        (B, A), root values (B,), the halving schedule table (considered + 1, simulations),
        and its constants (C_VISIT, C_SCALE, MIN_PRIOR))."""
        shape = (self.batch_size, self.num_actions)
        out = np.empty(self.batch_size, np.int64)
        self._tree.gumbel_root_actions(
            self._mask(games), float_array(gumbel, "gumbel", shape, np.float64),
            int64_array(base_visits, "base_visits", shape),
            float_array(root_values, "root_values", (self.batch_size,), np.float64),
            int64_array(table, "table", (considered + 1, simulations)),
            positive_int(considered, "considered"), positive_int(simulations, "simulations"),
            *(float(value) for value in constants), out)
        return out

    def thread_stats(self) -> dict:
        """{"parallel_runs", "serial_runs", "failed_runs"} of the parallel regions so far (team
        runs, one-thread runs while backing off, team runs judged too slow)."""
        parallel, serial, failed = self._tree.thread_stats()
        return {"parallel_runs": parallel, "serial_runs": serial, "failed_runs": failed}

    def done(self, games=None, simulation_limit: int | None = None) -> bool:
        """True when no chosen game can run another simulation this move (budget reached,
        buffer full, or terminal root). A game whose root awaits expansion is not done."""
        return self._tree.done(self._mask(games), self._limit(simulation_limit))

    # ---------------------------------------------------------------- moves and games

    def add_root_noise(self, alpha: float, fraction: float, games=None) -> None:
        """Mix Dirichlet(alpha) noise over each chosen root's legal actions into its priors:
        ``P = (1 - fraction) * P + fraction * noise``. Apply once per move (it compounds)."""
        if not (np.isfinite(alpha) and alpha > 0):
            raise ValueError(f"alpha must be finite and > 0, got {alpha!r}")
        legal = self.root_statistics().legal
        gamma = self._rng.standard_gamma(alpha, size=legal.shape) * legal
        total = gamma.sum(axis=1, keepdims=True)
        # With a tiny alpha every draw of a row can underflow to zero: use uniform noise there.
        underflow = total[:, 0] <= 0
        gamma[underflow] = legal[underflow]
        total[underflow] = np.maximum(legal[underflow].sum(axis=1, keepdims=True), 1)
        self.mix_root_noise(gamma / total, fraction, games)

    def mix_root_noise(self, noise, fraction: float, games=None) -> None:
        """Mix a given noise distribution (B, A) into the chosen roots' priors (legal actions
        only): ``P = (1 - fraction) * P + fraction * noise``."""
        noise = np.asarray(noise)
        if noise.dtype.kind != "f" or noise.shape != (self.batch_size, self.num_actions):
            raise ValueError(f"noise must be a float array of shape "
                             f"{(self.batch_size, self.num_actions)}, got dtype {noise.dtype} "
                             f"shape {noise.shape}")
        noise = np.ascontiguousarray(noise, dtype=np.float64)
        if not (np.isfinite(fraction) and 0 <= fraction <= 1):
            raise ValueError(f"fraction must be in [0, 1], got {fraction!r}")
        self._tree.mix_root_noise(self._mask(games), noise, float(fraction))

    def choose_actions(self, temperature: float, games=None, lcb: bool = False) -> np.ndarray:
        """One action per game, int64 (B,); -1 for games not chosen. Temperature 0: most
        visits, ties to the higher prior, then the lower action; with `lcb`, by lower
        confidence bound (`move_preferences`). Temperature T > 0: sampled
        with probability proportional to visits ** (1 / T). A root without visits (no
        simulations) falls back to its priors in both cases."""
        if not (np.isfinite(temperature) and temperature >= 0):
            raise ValueError(f"temperature must be finite and >= 0, got {temperature!r}")
        mask = self._mask(games)
        stats = self.root_statistics()
        self._require_expanded(mask, "choose_actions")
        visits = stats.visits.astype(np.float64)
        actions = np.full(self.batch_size, -1, dtype=np.int64)
        chosen = np.flatnonzero(mask)
        if temperature == 0:
            actions[chosen] = np.argmax(move_preferences(stats, lcb=lcb)[chosen], axis=1)
            return actions
        weights = np.where(visits.sum(axis=1, keepdims=True) > 0, visits, stats.priors)[chosen]
        with np.errstate(divide="ignore"):
            logs = np.log(weights)
        logs -= logs.max(axis=1, keepdims=True)
        weights = np.exp(logs / temperature)
        cumulative = np.cumsum(weights, axis=1)
        total = cumulative[:, -1]
        draw = np.minimum(self._rng.random(len(chosen)) * total, np.nextafter(total, 0))
        actions[chosen] = np.argmax(cumulative > draw[:, None], axis=1)
        return actions

    def policy_targets(self, games=None) -> np.ndarray:
        """Visit distributions of the roots, float32 (B, A); the priors where a root has no
        visits; zero rows for games not chosen or with unexpanded roots. With forced
        playouts, the visits they forced are taken out first (`pruned_visits`)."""
        stats = self.root_statistics()
        visits = stats.visits.astype(np.float32)
        if self.forced_playouts > 0:
            visits = pruned_visits(stats, self.c_puct, self.forced_playouts)
        total = visits.sum(axis=1, keepdims=True)
        targets = np.where(total > 0, visits / np.maximum(total, 1), stats.priors)
        targets[~self._mask(games)] = 0
        return targets.astype(np.float32, copy=False)

    def advance(self, actions, games=None) -> None:
        """Subtree reuse after the move actions[g] in each chosen game: the child becomes the
        root with its statistics, everything else is reclaimed. If that child has no node (it
        was never visited, or the root was never expanded) the game gets a fresh root, which
        needs `expand_roots` (see `needs_root_expansion`)."""
        actions = index_array(actions, "actions", self.batch_size)
        self._tree.advance(self._mask(games), actions)

    def reset(self, games=None) -> None:
        """Empty the chosen games' trees (a new game starts): root node 0, unexpanded."""
        self._tree.reset(self._mask(games))

    # ----------------------------------------------------------------------- read access

    def root_statistics(self) -> RootStatistics:
        shape = (self.batch_size, self.num_actions)
        stats = RootStatistics(np.empty(shape, np.int32), np.empty(shape, np.float32),
                               np.empty(shape, np.float32), np.empty(shape, np.bool_),
                               np.empty(shape, np.float32))
        self._tree.root_arrays(*stats)
        return stats

    def root_visits(self) -> np.ndarray:
        """Visits per root action, int32 (B, A)."""
        return self.root_statistics().visits

    def root_q(self) -> np.ndarray:
        """Mean value per root action from the view of the player to move at the root, float32
        (B, A); 0 where unvisited."""
        return self.root_statistics().q

    def root_priors(self) -> np.ndarray:
        """Priors per root action (after noise), float32 (B, A); 0 for illegal actions."""
        return self.root_statistics().priors

    def status(self) -> dict[str, np.ndarray]:
        """Per-game counters, each int64 (B,): the names in STATUS_FIELDS."""
        self._tree.game_status(self._status)
        return {name: self._status[:, i].copy() for i, name in enumerate(STATUS_FIELDS)}

    def _status_column(self, name: str) -> np.ndarray:
        self._tree.game_status(self._status)
        return self._status[:, STATUS_FIELDS.index(name)].copy()

    @property
    def root_nodes(self) -> np.ndarray:
        """Root node id per game, int64 (B,)."""
        return self._status_column("root")

    @property
    def simulations(self) -> np.ndarray:
        """Simulations run this move per game (since the last advance or reset)."""
        return self._status_column("simulations")

    @property
    def needs_root_expansion(self) -> np.ndarray:
        """bool (B,): roots that must be evaluated with `expand_roots` before searching."""
        return self._status_column("needs_expansion").astype(np.bool_)

    @property
    def terminal_roots(self) -> np.ndarray:
        """bool (B,): games whose root was evaluated as terminal (the game is over)."""
        return self._status_column("terminal_root").astype(np.bool_)

    @property
    def overflow_counts(self) -> np.ndarray:
        """Moves on which a game's buffer filled up, per game (cumulative)."""
        return self._status_column("overflows")

    @property
    def overflow_count(self) -> int:
        return int(self.overflow_counts.sum())

    @property
    def collision_counts(self) -> np.ndarray:
        """Selections dropped because they reached a leaf already selected in the same call."""
        return self._status_column("collisions")

    def node_info(self, game: int, node: int) -> NodeInfo:
        state, parent, visits, value_sum, pending, num_edges, terminal = self._tree.node_info(
            int(game), int(node))
        return NodeInfo(NODE_STATES[state], parent, visits, value_sum / visits if visits else 0.0,
                        pending, num_edges, terminal)

    def node_edges(self, game: int, node: int) -> NodeEdges:
        a = self.num_actions
        actions, priors = np.empty(a, np.int64), np.empty(a, np.float32)
        visits = np.empty(a, np.int32)
        value_sums, children = np.empty(a, np.float64), np.empty(a, np.int64)
        count = self._tree.node_edges(int(game), int(node), actions, priors, visits, value_sums,
                                      children)
        visits = visits[:count]
        q = np.where(visits > 0, value_sums[:count] / np.maximum(visits, 1), 0.0)
        return NodeEdges(actions[:count], priors[:count], visits, q, children[:count])

    def principal_edges(self, game: int, node: int, first: int | None = None,
                        max_length: int | None = None) -> list[tuple[int, int]]:
        """(action, visits) of each edge from `node` down the most visited edges (ties: the
        higher prior, then the earlier edge) while one has visits; the first step along
        `first`'s edge if given, and [(first, 0)] when `node` has no edge for it; at most
        `max_length` steps."""
        return self._tree.principal_edges(int(game), int(node), -1 if first is None else int(first),
                                          0 if max_length is None else max(1, int(max_length)))

    # -------------------------------------------------------------------------- helpers

    def _mask(self, games) -> np.ndarray:
        if games is None:
            return self._all_games
        games = np.asarray(games)
        if games.dtype == np.bool_:
            if games.shape != (self.batch_size,):
                raise ValueError(f"games: a bool mask must have shape ({self.batch_size},), "
                                 f"got {games.shape}")
            return np.ascontiguousarray(games)
        if games.ndim != 1 or (games.size and games.dtype.kind not in "iu"):
            raise ValueError("games must be None, a bool mask (B,) or a 1-D array of game indices")
        if games.size and (games.min() < 0 or games.max() >= self.batch_size):
            raise ValueError(f"games: indices must be in 0..{self.batch_size - 1}")
        mask = np.zeros(self.batch_size, dtype=np.bool_)
        mask[games] = True
        return mask

    def _limit(self, simulation_limit) -> int:
        if simulation_limit is None:
            return self.num_simulations
        return positive_int(simulation_limit, "simulation_limit", minimum=0,
                             maximum=2**31 - 1)

    def _require_expanded(self, mask: np.ndarray, what: str) -> None:
        status = self.status()
        unusable = status["needs_expansion"].astype(bool) | status["terminal_root"].astype(bool)
        games = np.flatnonzero(mask & unusable)
        if games.size:
            raise ValueError(f"{what}: the roots of games {games[:10].tolist()} are not "
                             "expanded (or are terminal)")


def pruned_visits(stats: RootStatistics, c_puct: float, k: float) -> np.ndarray:
    """Policy target pruning (KataGo, Wu 2019): float32 (B, A) root visits without the ones
    forced playouts (factor k) added. The most visited child c* keeps its visits; any other
    child c gives back up to sqrt(k * P(c) * N) visits (N: all children's), but no more than
    keeps its PUCT score below c*'s, Q + c_puct * P * sqrt(N) / (1 + n); a child left with
    at most one visit is dropped."""
    visits = stats.visits.astype(np.float64)
    total = visits.sum(axis=1, keepdims=True)
    rows = np.arange(len(visits))
    # The most visited child, ties to the higher prior, then the lower action (choose_actions).
    order = np.lexsort((-np.arange(visits.shape[1])[None, :].repeat(len(visits), 0),
                        stats.priors, visits), axis=1)
    best = order[:, -1]
    exploration = c_puct * stats.priors * np.sqrt(total)
    best_score = (stats.q[rows, best] + exploration[rows, best] / (1 + visits[rows, best]))[:, None]
    gap = best_score - stats.q
    with np.errstate(divide="ignore", invalid="ignore"):
        # Fewest visits at which c's score stays below c*'s; where Q(c) >= c*'s score none do.
        floor_visits = np.where(gap > 0, exploration / gap - 1, visits)
    pruned = np.maximum(visits - np.sqrt(k * stats.priors * total), floor_visits)
    pruned = np.clip(pruned, 0, visits)
    pruned[pruned <= 1] = 0
    pruned[rows, best] = visits[rows, best]
    return np.where(visits > 0, pruned, 0).astype(np.float32)

