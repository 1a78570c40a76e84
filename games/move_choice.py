"""How a player picks its move: the one rule behind GTP's genmove and the GUI's net.

The position is one game's slot of a one-game `SearchingGames`; the moves considered are
those its search considers (`sensible_moves_only`, the default: no filling of one's own
eyes, pass only when nothing else is left).

- From the search: the root's most preferred move (`py_util.mcts.move_preferences`: most
  visits, then the higher prior; by lower confidence bound with the config's
  `lcb_move_choice`), the priors alone when nothing was visited.
- From the net alone: the move of highest prior.
- A move the caller excludes (GTP's positional superko across the segments of
  games/game_record.py) gives way to the next one; pass when none is left.
- Passing back (`MoveChooser.choose`): right after the opponent's pass, pass when the board
  as it stands wins for the mover by area scoring and is settled
  (`games.territory.position_settled`, with the net's ownership when it has the head).
  Winning the count alone is not enough: a user who passes early in the opening must not
  lose to komi on an almost empty board. A cleanup move never takes this pass.
- The clock: GTP's time settings as seconds for one move; a search against the clock grows
  in chunks and stops at the first chunk that ends past the deadline.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np

from games.analysis import CHUNK, has_heads, net_heads
from games.territory import position_settled
from py_util.mcts import move_preferences

ONE_GAME = np.ones(1, bool)       # the think() mask of a one-game driver

Excluded = Callable[[int], bool]   # move -> whether the player may not play it here


def _nothing_excluded(move: int) -> bool:
    return False


@dataclass
class Clock:
    """GTP time settings (seconds) and the controller's latest time_left per colour."""
    main_time: float = 0.0
    byo_yomi_time: float = 0.0
    byo_yomi_stones: int = 0
    active: bool = False
    left: dict = field(default_factory=dict)   # colour -> (seconds, stones)

    def budget(self, colour: int, empty_points: int) -> float | None:
        """Seconds to spend on this move, None when there is no time limit."""
        if not self.active or (self.byo_yomi_time > 0 and self.byo_yomi_stones == 0):
            return None   # GTP: byo-yomi time without stones means no time limit
        seconds, stones = self.left.get(colour, (self.main_time, 0))
        if seconds <= 0 and stones == 0 and self.byo_yomi_stones > 0:
            seconds, stones = self.byo_yomi_time, self.byo_yomi_stones
        if stones > 0:
            per_move = seconds / stones
        else:
            per_move = seconds / max(8, empty_points // 3)
        return max(0.0, 0.8 * per_move - 0.05)   # margin for the controller's round trip


@dataclass(frozen=True)
class Choice:
    move: int                 # flat index, pass = N*N
    value: float | None       # the mover's view in [-1, 1]; None when passing back
    comment: str              # one line: what the choice rests on


def preferred_move(preferences: np.ndarray, excluded: Excluded = _nothing_excluded) -> int:
    """The highest-preferred move (A,) not excluded; -1 marks moves not considered, and pass
    (the last action) stands in when nothing is left."""
    for move in np.argsort(-preferences, kind="stable"):
        if preferences[move] < 0:
            break
        if not excluded(int(move)):
            return int(move)
    return len(preferences) - 1


def search_move(driver, stats, excluded: Excluded = _nothing_excluded) -> int:
    """The move play makes from game 0's searched root (`stats`: its root statistics)."""
    return preferred_move(move_preferences(stats, lcb=driver.settings.lcb_move_choice)[0],
                          excluded)


def policy_move(priors: np.ndarray, considered: np.ndarray,
                excluded: Excluded = _nothing_excluded) -> int:
    """The net alone: the considered move (bool (A,)) of highest prior (A,)."""
    return preferred_move(np.where(considered, priors, -1.0), excluded)


def search_in_chunks(driver, simulations: int, chunk: int) -> Iterator:
    """Grow game 0's search toward `simulations` this move (those run already count), `chunk`
    at a time, yielding the root statistics after each chunk; it ends at `simulations` or
    after a chunk that added nothing (a full tree, a finished game)."""
    while True:
        done = int(driver.search.simulations[0])
        target = min(simulations, done + chunk)
        stats = driver.think(ONE_GAME, simulations=target)
        yield stats
        if target >= simulations or int(driver.search.simulations[0]) <= done:
            return


class MoveChooser:
    """The move of the position in `slots` (one slot of the one-game `driver`'s engine, the
    game's current position) for the side to move there: by the search of `simulations`
    (within the clock's budget), or with `use_search` False by the net alone."""

    def __init__(self, driver, slots: np.ndarray, simulations: int, use_search: bool = True,
                 excluded: Excluded = _nothing_excluded):
        self.driver = driver
        self.slots = slots
        self.simulations = simulations
        self.use_search = use_search
        self.excluded = excluded
        self.clock = Clock()

    def choose(self, colour: int, opponent_passed: bool, cleanup: bool = False) -> Choice:
        """`colour` is the side to move in `slots`; `opponent_passed`: the game's last move
        was the other colour's pass."""
        if (not cleanup and opponent_passed and colour * self.score() > 0
                and self.settled(colour)):
            return Choice(self.driver.go.pass_move, None,
                          "the opponent passed; settled, and wins by area")
        if self.use_search:
            stats = self.search(colour, self.simulations)
            value = float(self.driver.root_values()[0])
            return Choice(search_move(self.driver, stats, self.excluded), value,
                          f"win rate {(1 + value) / 2:.1%}, {int(stats.visits[0].sum())} visits")
        policy, considered, values, _ = self.driver.evaluate_slots(self.slots)
        value = float(values[0])
        return Choice(policy_move(policy[0], considered[0], self.excluded), value,
                      f"win rate {(1 + value) / 2:.1%}, net alone")

    def search(self, colour: int, simulations: int):
        """Search the position up to `simulations` this move within the clock's budget for
        `colour`; returns the root statistics."""
        seconds = self.clock.budget(colour, int((self.board() == 0).sum()))
        if seconds is None:
            return self.driver.think(ONE_GAME, simulations=simulations)
        deadline = time.monotonic() + seconds
        for stats in search_in_chunks(self.driver, simulations, CHUNK):
            if time.monotonic() >= deadline:
                break
        return stats

    def score(self) -> float:
        """Area score, Black's view, komi included, of the board as it stands."""
        return float(self.driver.go.score(self.slots)[0])

    def settled(self, colour: int) -> bool:
        """position_settled for the position, `colour` to move; the net's ownership is asked
        for when it has the head."""
        ownership = None
        if has_heads(self.driver.evaluator):
            ownership = net_heads(self.driver, self.slots)[0][0] * colour
        return position_settled(self.board(), ownership)

    def board(self) -> np.ndarray:
        return self.driver.go.board(self.slots)[0]
