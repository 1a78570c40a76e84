"""The game a GTP controller builds, kept as a list of events, and its replay onto one slot of
a GoBatch.

GTP lets a controller do things the batched rules (kernels/) have no notion of: play on after
two passes (GUIs allow it; a referee resumes play to remove dead stones), play two moves of
one colour in a row, undo, place handicap or setup stones. The engine therefore keeps every
event and rebuilds the GoBatch position by replaying them (a few microseconds per move)
whenever the position the GoBatch holds is not the one wanted. Replaying follows two rules:

- A move by the side not to move: a pass of the other colour is inserted first. To the rules
  and to the net's history planes it is an ordinary pass; like the opponent's move it stands
  for, it lifts a simple-ko ban.
- A move when the GoBatch game has ended (two passes, or `max_moves`): the game goes on as a
  new *segment*, `set_board(current stones, colour)`, a fresh GoBatch game on the same stones.
  A simple-ko ban cannot survive the passes anyway; captures are carried over; the net's
  history planes restart; positional superko across segments is checked here against the
  hashes of the earlier segments (`Replayer.repeats_earlier_segment`), while the rules check
  it inside the current one. Setup events (handicap, SGF AB/AW/AE) start a segment the same way.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kernels import GoBatch


@dataclass(frozen=True)
class Move:
    colour: int          # +1 black, -1 white
    move: int            # flat index, pass = N*N
    comment: str = ""    # written to the SGF record (the engine's own moves: its evaluation)


@dataclass(frozen=True, eq=False)
class Setup:
    """Stones placed or removed by hand. `stones` is the whole board afterwards and `previous`
    the board before (int8 (N, N), +1/-1/0), so an SGF record can write the difference."""
    stones: np.ndarray
    previous: np.ndarray
    to_play: int
    handicap: int = 0    # stones placed by set_free_handicap (SGF HA)


class GameRecord:
    """Events in order; `version` changes with every change, so a position built from the
    record can tell whether it is still current."""

    def __init__(self):
        self.events: list[Move | Setup] = []
        self.version = 0

    def add(self, event: Move | Setup) -> None:
        self.events.append(event)
        self.version += 1

    def replace(self, events: list[Move | Setup]) -> None:
        self.events = list(events)
        self.version += 1

    def clear(self) -> None:
        self.replace([])

    def undo(self) -> bool:
        """Take back the last move; False when there is none (handicap and setup stones are
        not moves and are never taken back)."""
        if not self.events or not isinstance(self.events[-1], Move):
            return False
        self.events.pop()
        self.version += 1
        return True

    @property
    def moves(self) -> list[Move]:
        return [event for event in self.events if isinstance(event, Move)]

    def next_colour(self) -> int:
        """Whose turn it is by the record: after a move the other colour, after setup its
        player to move, black on an empty record."""
        if not self.events:
            return 1
        last = self.events[-1]
        return -last.colour if isinstance(last, Move) else last.to_play

    def last_moves_are_passes(self, count: int, pass_move: int) -> bool:
        tail = self.events[-count:]
        return len(tail) == count and all(isinstance(e, Move) and e.move == pass_move
                                          for e in tail)


@dataclass
class Continuity:
    """What a new segment inherits from the earlier ones of the same game."""
    earlier_positions: set = field(default_factory=set)    # Zobrist hashes (superko only)
    segment_positions: list = field(default_factory=list)  # hashes of the current segment
    captures: np.ndarray = field(default_factory=lambda: np.zeros(2, np.int64))


class Replayer:
    """Builds the positions of a GameRecord in one slot of a GoBatch (slot 0: the game slot
    of a one-game SearchingGames)."""

    def __init__(self, go: GoBatch, slot: int = 0):
        self.go = go
        self.slots = np.array([slot], dtype=np.int64)
        self.continuity = Continuity()

    def reset(self) -> None:
        self.go.reset(self.slots)
        self.continuity = Continuity()
        self._note_position()

    def replay(self, events, colour: int | None = None) -> None:
        """The position after `events`, then ready for `colour` to move (if given)."""
        self.reset()
        for event in events:
            self.apply(event)
        if colour is not None:
            self.make_to_move(colour)

    def apply(self, event: Move | Setup) -> None:
        """Play one event; ValueError (from the rules) if a move is illegal."""
        if isinstance(event, Setup):
            self.start_segment(event.stones, event.to_play)
            return
        self.make_to_move(event.colour)
        self.go.play(np.array([event.move], dtype=np.int64), slots=self.slots)
        self.note_played()

    def make_to_move(self, colour: int) -> bool:
        """Make it `colour`'s turn in a game that is not over; True if anything changed."""
        if not self.is_over() and self.to_play() == colour:
            return False
        if not self.is_over():
            self.go.play(np.array([self.go.pass_move], dtype=np.int64), slots=self.slots)
        if self.is_over() or self.to_play() != colour:
            self.start_segment(self.board(), colour)
        return True

    def start_segment(self, stones: np.ndarray, to_play: int) -> None:
        continuity = self.continuity
        continuity.captures = continuity.captures + self.go.captures(self.slots)[0]
        continuity.earlier_positions.update(continuity.segment_positions)
        continuity.segment_positions = []
        self.go.set_board(np.asarray(stones, dtype=np.int8).reshape(1, *stones.shape),
                          np.array([to_play], dtype=np.int8), slots=self.slots)
        self._note_position()

    def note_played(self) -> None:
        """Call after a move was played in the slot from outside (the search driver)."""
        self._note_position()

    def _note_position(self) -> None:
        if self.go.superko:
            self.continuity.segment_positions.append(int(self.go.position_hash(self.slots)[0]))

    def repeats_earlier_segment(self, move: int) -> bool:
        """Would `move` (legal in the current segment) recreate a position of an earlier
        segment? Only asked under positional superko."""
        earlier = self.continuity.earlier_positions
        if not self.go.superko or not earlier or move == self.go.pass_move:
            return False
        saved = self.go.save(self.slots)
        try:
            self.go.play(np.array([move], dtype=np.int64), slots=self.slots)
            return int(self.go.position_hash(self.slots)[0]) in earlier
        finally:
            self.go.restore(saved)

    def board(self) -> np.ndarray:
        return self.go.board(self.slots)[0].copy()

    def to_play(self) -> int:
        return int(self.go.to_play(self.slots)[0])

    def is_over(self) -> bool:
        return bool(self.go.is_over(self.slots)[0])

    def captures(self) -> np.ndarray:
        """Stones captured by black, by white, over the whole game."""
        return self.continuity.captures + self.go.captures(self.slots)[0]
