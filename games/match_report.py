"""What a match leaves: a `PlayedGame` for each counted game and the `MatchReport` over them,
player A's wins, losses and draws with a Wilson interval, per-colour counts, the cross-check
with GNU Go, and the summary evaluate.py prints.

A played game's moves are flat indices from the empty board, black first, pass = N*N, its
random opening moves and any cleanup phase included (games/match_runner.py); its result and
the report's counts are player A's.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from games.ratings import PairResult, wilson_interval


@dataclass
class PlayedGame:
    """One counted game of a match: its moves, result, score and SGF record."""
    index: int                 # game number in the match, from 0
    a_colour: int              # +1: player A was black, -1: white
    moves: list[int]           # flat moves from the empty board, black first, pass = N*N
    cleanup_start: int | None  # index in `moves` where the cleanup phase began, None if none
    result: float              # for player A: +1 win, -1 loss, 0 draw
    score: float               # our area score, black - white - komi (nan if resigned)
    komi: float = 0.0          # the game's komi (the match's, +- what A gives)
    resigned: int = 0          # the colour that resigned, 0 if nobody did
    capped: bool = False       # ended at the move cap, not by passes
    gnugo_score: float | None = None   # a fresh GNU Go's final_score, black - white (None:
                                       # not cross-checked: resigned, capped, or no referee)
    sgf: bytes = b""

    @property
    def winner(self) -> int:
        """+1 black, -1 white, 0 draw."""
        return int(self.result * self.a_colour)

    @property
    def agrees(self) -> bool | None:
        """Whether GNU Go's final_score equals ours (None when not cross-checked)."""
        if self.gnugo_score is None:
            return None
        return abs(self.gnugo_score - self.score) < 1e-6


@dataclass(frozen=True)
class MatchReport:
    """wins/losses/draws are player A's. Games not played (a process died, an illegal move)
    are in `not_played` and nowhere else."""
    wins: int
    losses: int
    draws: int
    player_a: str = "A"
    player_b: str = "B"
    records: tuple = ()
    not_played: int = 0
    seconds: float = 0.0
    give: float = 0.0          # the komi A gave in every game (games/match_runner.py)

    @property
    def games(self) -> int:
        return self.wins + self.losses + self.draws

    @property
    def win_rate(self) -> float:
        return (self.wins + 0.5 * self.draws) / max(self.games, 1)

    @property
    def checked(self) -> int:
        return sum(record.agrees is not None for record in self.records)

    @property
    def disagreements(self) -> int:
        """Cross-checked games where GNU Go's final_score differs from ours."""
        return sum(record.agrees is False for record in self.records)

    @property
    def winner_disagreements(self) -> int:
        """Cross-checked games where GNU Go's final_score names another winner."""
        return sum(record.agrees is False and np.sign(record.gnugo_score) != np.sign(record.score)
                   for record in self.records)

    @property
    def cleanups(self) -> int:
        return sum(record.cleanup_start is not None for record in self.records)

    @property
    def distinct_games(self) -> int:
        return len({tuple(record.moves) for record in self.records})

    def interval(self, z: float = 1.959964) -> tuple[float, float]:
        """Wilson score interval of A's win rate (draws count half), 95% by default."""
        return wilson_interval(self.wins + 0.5 * self.draws, self.games, z)

    def by_colour(self) -> dict[str, tuple[int, int]]:
        """{"black": (A's wins, games), "white": (...)} for A's colour."""
        counts = {}
        for colour, name in ((1, "black"), (-1, "white")):
            games = [r for r in self.records if r.a_colour == colour]
            counts[name] = (sum(r.result > 0 for r in games), len(games))
        return counts

    def pair(self) -> PairResult:
        return PairResult(self.player_a, self.player_b, self.wins, self.losses, self.draws)

    def summary(self) -> str:
        low, high = self.interval()
        colours = self.by_colour()
        lines = [
            f"A = {self.player_a}, B = {self.player_b}: {self.games} games "
            f"(A black in {colours['black'][1]}, white in {colours['white'][1]})"
            + (f"; A gives {self.give:g} points of komi" if self.give else ""),
            f"A wins {self.wins}, loses {self.losses}, draws {self.draws}: "
            f"win rate {self.win_rate:.1%}, 95% Wilson interval {low:.1%} - {high:.1%}",
            f"A as black {colours['black'][0]}/{colours['black'][1]}, "
            f"as white {colours['white'][0]}/{colours['white'][1]}; "
            f"{self.distinct_games} distinct games; "
            f"{sum(r.resigned != 0 for r in self.records)} resigned, {self.cleanups} with a "
            f"cleanup phase, {sum(r.capped for r in self.records)} at the move cap",
        ]
        if self.checked:
            lines.append(f"cross-check with GNU Go's final_score: {self.checked} games checked, "
                         f"{self.disagreements} scores differ, {self.winner_disagreements} winners "
                         f"differ")
        if self.not_played:
            lines.append(f"{self.not_played} games not played (see the messages above)")
        lines.append(f"{self.seconds:.1f} s")
        return "\n".join(lines)


