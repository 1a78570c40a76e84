"""What the search and the net think of a position: the analysis every front end shows (the GTP
engine's lz-analyze and kata-analyze, the GUI's panel, the KataGo JSON analysis engine).

All of it reads one game `g` of a `SearchingGames` whose slot g holds the position and whose
tree has searched it:
- `candidates`: the root's moves, most visited first (then unvisited legal moves by prior, up
  to a minimum count), each with visits, Q, win rate, prior, LCB and principal variation;
- `principal_variation`: the moves down the most visited edges;
- `grow`: more search, in chunks, up to a cap on the root's visits (`analysis_cap`);
- `Heads`: the net's ownership and score-lead estimates of the root and of the positions after
  the searched moves (a net with the auxiliary heads), each asked for once. A net that reads
  the komi answers for the game's; for an older net the lead is corrected for a komi other
  than the one it trained with (`komi_shift`), the win rate cannot be.

Values are from the view of the side to move at the root: Q in [-1, 1], win rate (1 + Q) / 2,
score lead in points with komi included. The LCB is the one play chooses by when asked to
(`py_util.mcts.lower_confidence_bounds`, from the spread of the values backed up through the
move), in win-rate terms; below 2 visits there is none (-inf, which protocols clip to 0).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from py_util import NO_NODE
from py_util.mcts import lower_confidence_bounds, move_preferences

CHUNK = 8     # simulations between checks of a clock or of the input


@dataclass(frozen=True)
class Candidate:
    """One move of an analysis."""
    action: int
    visits: int
    value: float          # the search's Q in [-1, 1] for the mover (the root's if unvisited)
    winrate: float        # (1 + value) / 2
    prior: float
    lcb: float            # may be below 0 (-inf below 2 visits); protocols clip it
    order: int
    pv: list              # actions, starting with this move


def analysis_cap(board_size: int, simulations: int = 0, requested: int | None = None) -> int:
    """The visits analysis grows a position's search to, and so the simulations one tree holds:
    `requested` if given, else enough for long analysis on small boards while the tree and
    its position slots stay under about 100 MB (nodes x actions is what costs memory: 99 MB
    measured at 9,756 on 9x9, 86 before each edge kept its squared values for the LCB);
    never below the `simulations` a move searches."""
    if requested is not None:
        return max(simulations, requested)
    return max(simulations, min(10_000, 800_000 // (board_size * board_size + 1)))


def root_visits(driver, game: int = 0) -> int:
    return int(driver.search.root_statistics().visits[game].sum())


def grow(driver, games: np.ndarray, cap: int, chunk: int = CHUNK) -> bool:
    """Search the chosen games (bool mask) up to `chunk` more simulations each, without passing
    `cap` visits at a root (visits kept from earlier searches count); whether any grew."""
    stats = driver.search.root_statistics()
    visits = stats.visits.sum(axis=1)
    wanted = np.asarray(games, bool) & (visits < cap) & ~driver.go.to_numpy(driver.go.is_over())
    if not wanted.any():
        return False
    done = int(driver.search.simulations[np.flatnonzero(wanted)].max())
    step = int(min(chunk, cap - visits[wanted].min()))
    driver.think(wanted, simulations=min(done + step, driver.settings.simulations))
    return bool((driver.search.root_statistics().visits.sum(axis=1)[wanted]
                 > visits[wanted]).any())


def candidates(driver, game: int = 0, min_moves: int = 0,
               max_moves: int | None = None) -> list[Candidate]:
    """The searched root's moves to report, in the order play prefers them (most visited
    first, or by lower confidence bound: `SearchSettings.lcb_move_choice`), then (up to `min_moves`)
    unvisited legal moves by prior, at most `max_moves`; none before the first visit."""
    stats = driver.search.root_statistics()
    visits, q = stats.visits[game], stats.q[game]
    priors, legal = stats.priors[game], stats.legal[game]
    preferences = move_preferences(stats, lcb=driver.settings.lcb_move_choice)[game]
    visited = [int(a) for a in np.argsort(-preferences, kind="stable") if visits[a] > 0]
    if not visited:
        return []
    unvisited = [int(a) for a in np.argsort(-priors, kind="stable")
                 if legal[a] and visits[a] == 0]
    chosen = visited + unvisited[:max(0, min_moves - len(visited))]
    if max_moves is not None:
        chosen = chosen[:max_moves]
    root_value = float(driver.root_values()[game])
    bounds = (1 + lower_confidence_bounds(stats)[game]) / 2
    found = []
    for order, action in enumerate(chosen):
        count = int(visits[action])
        value = float(q[action]) if count else root_value
        winrate = (1 + value) / 2
        found.append(Candidate(action, count, value, winrate, float(priors[action]),
                               float(bounds[action]),
                               order, principal_variation(driver, game, action)))
    return found


def principal_variation(driver, game: int = 0, first: int | None = None) -> list[int]:
    """Moves down the most visited edges from the root (starting with `first` if given)."""
    return [action for action, _ in principal_edges(driver, game, first)]


def principal_edges(driver, game: int = 0, first: int | None = None,
                    max_length: int | None = None) -> list[tuple[int, int]]:
    """(action, visits) of each edge of the principal variation (at most `max_length`); `first`,
    when the tree has no edge for it, alone with 0 visits."""
    search = driver.search
    return search.principal_edges(game, int(search.root_nodes[game]), first, max_length)


def has_heads(evaluator) -> bool:
    """Whether the evaluator is a net with ownership and score heads."""
    return bool(getattr(evaluator, "has_aux_heads", False))


def net_heads(driver, slots) -> tuple[np.ndarray, np.ndarray]:
    """The net's (ownership (k, N, N) in [-1, 1], score lead (k,) in points) of the positions in
    `slots`, each from the view of the side to move there."""
    return driver.evaluator.ownership(driver.go.features(driver.history, slots))


class Heads:
    """The net's ownership and score estimates during one analysis of game `game`, each asked
    for once: the root's on first use, a searched move's the first time it is reported (its
    node's slot holds the position after it). Make a new one when the position changes."""

    def __init__(self, driver, game: int = 0, lead_shift: float = 0.0):
        self.driver = driver
        self.game = game
        # Added to every lead: the net's score head counts the komi it trained with, so a
        # game at another komi shifts the lead by the difference (`komi_shift`).
        self.lead_shift = lead_shift
        self._root = None
        self._moves: dict[int, tuple] = {}    # action -> (ownership, score), mover's view

    def root_ownership(self) -> np.ndarray:
        """float (N, N) in [-1, 1], +1: the side to move will own the point."""
        return self._root_heads()[0]

    def root_score(self) -> float:
        return self._root_heads()[1] + self.lead_shift

    def move_score(self, action: int | None) -> float:
        """The mover's expected lead after `action` (None, or a move not searched: the
        root's), in points."""
        self.prefetch([] if action is None else [action])
        if action in self._moves:
            return self._moves[action][1] + self.lead_shift
        return self.root_score()

    def move_ownership(self, action: int) -> np.ndarray:
        """The expected owners after `action`, +1 the mover's (the root's if not searched)."""
        self.prefetch([action])
        return self._moves[action][0] if action in self._moves else self.root_ownership()

    def prefetch(self, actions) -> None:
        """Ask the net once for the root and every searched move of `actions` not yet known."""
        prefetch_heads([(self, actions)])

    def _wanted(self, actions) -> tuple[list, np.ndarray]:
        """(keys not yet known: "root" or an action, their slots)."""
        wanted, slots = [], []
        if self._root is None:
            wanted.append("root")
            slots.append(self.game)
        search = self.driver.search
        edges = search.node_edges(self.game, int(search.root_nodes[self.game]))
        for action in set(actions) - set(self._moves):
            where = np.flatnonzero(edges.actions == action)
            child = int(edges.children[where[0]]) if len(where) else NO_NODE
            if child != NO_NODE:
                wanted.append(action)
                slots.append(int(self.driver.node_slots(self.game, child)))
        return wanted, np.array(slots, np.int64)

    def _store(self, wanted: list, ownership: np.ndarray, score: np.ndarray) -> None:
        for key, owned, lead in zip(wanted, ownership, score):
            if key == "root":
                self._root = (owned, float(lead))
            else:   # the child's heads speak for the opponent, who moves there
                self._moves[key] = (-owned, -float(lead))

    def _root_heads(self) -> tuple[np.ndarray, float]:
        if self._root is None:
            self.prefetch([])
        return self._root


def komi_shift(mover: int, net_komi: float, komi: float, reads_komi: bool = False) -> float:
    """What to add to the net's score lead for `mover` (+1 Black, -1 White) when the game's
    komi is not the one the net's score head learnt: komi counts against Black. Nothing for a
    net that reads the game's komi (Config.komi_input): its lead counts it already."""
    return 0.0 if reads_komi else mover * (net_komi - komi)


def prefetch_heads(requests) -> None:
    """For [(Heads, actions)] of analyses of one driver: the roots and searched moves not yet
    known, all in one net call (a review answers many positions at once)."""
    wanted = [(heads, *heads._wanted(actions)) for heads, actions in requests]
    wanted = [item for item in wanted if item[1]]
    if not wanted:
        return
    driver = wanted[0][0].driver
    ownership, score = net_heads(driver, np.concatenate([slots for _, _, slots in wanted]))
    start = 0
    for heads, keys, slots in wanted:
        heads._store(keys, ownership[start:start + len(slots)], score[start:start + len(slots)])
        start += len(slots)
