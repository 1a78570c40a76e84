"""The one game loop for every match, and its referee: `play_match` runs `parallel` games
between two players (games/match_players.py) in lockstep; a finished game's slot takes the
next game at once. Player A is black in even-numbered games and white in odd ones.

Each ply, every game whose side to move is a GNU Go gets its `genmove` sent at once (a thread
per process, blocked on its pipe) and then each net searches all its games as one batch, so
the processes think while the net does. The moves go to an arbiter `GoBatch` with the run's
rules (area scoring, komi, simple ko or positional superko, suicide forbidden), which rejects
an illegal move; the players are told the moves that were played.

Rules of a game that involves GNU Go (the facts about GNU Go 3.8 they rest on are in gnugo.py):
- GNU Go runs with the same rules (gnugo.py) and resigns when it sees fit; we never resign.
- A game ends with two passes (or at the move cap, `max_moves`, and is then scored as it
  stands: a restart from its stones would drop a live ko ban). GNU Go passes with dead stones
  on the board, which Tromp-Taylor scoring would count as alive. So then a fresh level-10 GNU
  Go judges `final_status_list dead`; if it names any, play resumes from the current stones with
  the side to move (a fresh arbiter position, `set_board`, as our engine's board is over),
  GNU Go playing `kgs-genmove_cleanup`, until two more passes. One cleanup phase per game.
- The result is our rules engine's area score of the final position. Each game that ended by
  passes is replayed into a fresh GNU Go whose `final_score` is the cross-check; disagreements
  are counted and reported, never used.
- A GNU Go process that dies or hangs costs that game only: it is counted as not played and a
  message goes to stderr.

Varied openings: two deterministic players repeat one game (on 7x7 a 3x32 net against GNU Go
level 10 gave 14 distinct games in 50 with one sampled opening move). So by default every
match starts from random openings: game g plays opening g // 2, `random_openings` (default 2)
uniformly random legal non-pass moves drawn from numpy's default_rng([seed, g // 2]), played
by the arbiter and shown to both players as moves played; games 2k and 2k + 1 play the same
opening with the colours swapped, so an opening that favours one colour favours each player
once. The opening moves are part of the record (`PlayedGame.moves`, the SGF). A net then
plays greedily (most visits) unless given `opening_moves`, its own first moves sampled by
visit count; each GNU Go process gets its own `--seed` (seed * 100003 + game + 1).
`MatchReport.distinct_games` counts distinct move sequences: read the Wilson interval with it
in mind.

Giving points: with `give` P, player A gives P points of komi in every game: the game's komi
is `komi` + P when A is black and `komi` - P when A is white (on 9x9, P = 9 around komi 7.5
is komi 16.5 and -1.5, about a two-stone handicap). Every player, the arbiter, the SGF and
the GNU Go judges and referees get the game's own komi; a net that reads the komi sees it.

The cleanup phase starts from a position without history: a ko or superko ban does not carry
over the two passes (two passes clear a simple-ko ban anyway; GNU Go keeps its superko history).
"""
from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from games import gnugo
from games.gnugo import GnuGoError, find_gnugo
from games.match_players import FAILED, RESIGN, Player, log_to_stderr
from games.match_report import MatchReport, PlayedGame
from games.sgf_records import game_to_sgf, result_text
from kernels import GoBatch, coords
from training.config import Config
from training.stopping import check_stop

RANDOM_OPENINGS = 2        # random opening plies of every game by default (see above)
MAIN, CLEANUP = 0, 1       # phases of a game


@dataclass
class _Slot:
    game: int = -1
    a_colour: int = 1
    komi: float = 0.0
    phase: int = MAIN
    moves: list = field(default_factory=list)
    cleanup_start: int | None = None


def play_match(config: Config, player_a: Player, player_b: Player, games: int, *,
               parallel: int, seed: int = 0, referee: bool | None = None, gnugo_path=None,
               random_openings: int = RANDOM_OPENINGS, give: float = 0.0,
               log: Callable[[str], None] = log_to_stderr) -> MatchReport:
    """`games` games between two players built for a batch of `parallel` games; A is black in
    even-numbered games, games 2k and 2k + 1 start from the same `random_openings` random
    moves; A gives `give` points of komi in each (the module docstring). referee:
    cross-check finished games with a fresh GNU Go's final_score (default: when a player is
    GNU Go). The dead-stone rule applies when a player is GNU Go."""
    if random_openings < 0:
        raise ValueError(f"random_openings must be >= 0, got {random_openings}")
    check_give(give, config.board_size)
    return _Match(config, player_a, player_b, games, parallel=parallel, seed=seed,
                  referee=referee, gnugo_path=gnugo_path, random_openings=random_openings,
                  give=give, log=log).play()


def check_give(give: float, board_size: int) -> float:
    """`give` as a float if it is a sensible number of points to give (a finite multiple of
    0.5, at most the board's area); ValueError naming it otherwise."""
    give = float(give)
    if not np.isfinite(give) or give * 2 != round(give * 2) or abs(give) > board_size ** 2:
        raise ValueError(f"give must be a multiple of 0.5 within +-{board_size ** 2} (the "
                         f"board's area), got {give:g}")
    return give


class _Match:
    """The state of one match in flight: `parallel` slots of an arbiter GoBatch, each holding
    one game (or none once every game has started), the records of finished games and the
    GNU Go cross-checks still running."""

    def __init__(self, config: Config, player_a: Player, player_b: Player, games: int, *,
                 parallel: int, seed: int, referee: bool | None, gnugo_path, random_openings: int,
                 give: float, log):
        self.config, self.games, self.parallel, self.log = config, games, parallel, log
        self.give = float(give)
        self.seed, self.random_openings = int(seed), int(random_openings)
        self.players = (player_a, player_b)
        self.uses_gnugo = player_a.is_gnugo or player_b.is_gnugo
        self.referee = self.uses_gnugo if referee is None else referee
        self.judge_path = find_gnugo(gnugo_path) if (self.referee or self.uses_gnugo) else None
        self.arbiter = GoBatch(parallel, config.board_size, komi=config.komi,
                               superko=config.superko, max_moves=config.resolved_max_moves,
                               history_length=0, seed=seed, num_threads=1)
        self.slots = [_Slot() for _ in range(parallel)]
        self.records: list[PlayedGame] = []
        self.cross_checks: list[tuple[PlayedGame, Future]] = []
        self.not_played = 0
        self.next_game = 0

    def play(self) -> MatchReport:
        started = time.perf_counter()
        # Dead-stone judges block the loop; referees run behind it: separate pools, so a
        # judge never waits behind queued referees.
        self.judges = ThreadPoolExecutor(max_workers=min(self.parallel, 8),
                                         thread_name_prefix="gnugo-judge")
        self.referees = ThreadPoolExecutor(max_workers=min(self.parallel, 4),
                                           thread_name_prefix="gnugo-referee")
        try:
            self.start(list(range(self.parallel)))
            while any(state.game >= 0 for state in self.slots):
                check_stop()
                self.ply()
            for record, verdict in self.cross_checks:
                try:
                    record.gnugo_score = verdict.result()
                except GnuGoError as error:
                    self.log(f"game {record.index}: the GNU Go referee failed ({error}); "
                             f"not cross-checked")
        finally:
            self.judges.shutdown(wait=True, cancel_futures=True)
            self.referees.shutdown(wait=True, cancel_futures=True)
        records = sorted(self.records, key=lambda record: record.index)
        for record in records:
            if record.agrees is False:
                self.log(f"game {record.index}: our score {record.score:+g}, GNU Go's "
                         f"final_score {record.gnugo_score:+g} (ours counts)")
        player_a, player_b = self.players
        return MatchReport(wins=sum(r.result > 0 for r in records),
                           losses=sum(r.result < 0 for r in records),
                           draws=sum(r.result == 0 for r in records),
                           player_a=player_a.name, player_b=player_b.name,
                           records=tuple(records), not_played=self.not_played,
                           seconds=time.perf_counter() - started, give=self.give)

    def ply(self) -> None:
        """One move in every game in flight: ask both players (GNU Go's moves are requested
        first, so its processes think while a net searches), check and play the moves, and
        end, judge or clean up the games they finished."""
        slots, arbiter = self.slots, self.arbiter
        active = np.array([state.game >= 0 for state in slots])
        a_colours = np.array([state.a_colour for state in slots], np.int8)
        to_play = arbiter.to_play()
        a_turn = active & (to_play == a_colours)
        turns = [(player, np.flatnonzero(turn))
                 for player, turn in zip(self.players, (a_turn, active & ~a_turn))]
        for player, chosen in turns:
            if len(chosen):
                player.begin_moves(arbiter, chosen)
        actions = np.full(self.parallel, FAILED, np.int64)
        for player, chosen in turns:
            if len(chosen):
                actions[chosen] = player.finish_moves(arbiter, chosen)

        def mover(slot: int) -> str:
            return self.players[0 if a_turn[slot] else 1].name

        moving = np.flatnonzero(active & (actions >= 0))
        if len(moving):
            legal = arbiter.legal_moves(moving)[np.arange(len(moving)), actions[moving]]
            for slot in moving[~legal].tolist():
                self.drop(slot, f"{mover(slot)} played "
                                f"{coords.to_gtp(actions[slot], self.config.board_size)}, "
                                f"illegal in our rules")
            moving = moving[legal]
        for slot in np.flatnonzero(active & (actions < 0)).tolist():
            if actions[slot] == RESIGN:
                self.finish(slot, resigned=int(to_play[slot]))
            else:
                self.drop(slot, f"{mover(slot)} could not move")
        if not len(moving):
            return
        arbiter.play(actions[moving], slots=moving)
        for slot in moving.tolist():
            slots[slot].moves.append(int(actions[slot]))
        for player in self.players:
            player.observe(moving, actions[moving])
        self.end_or_clean_up(moving[arbiter.is_over(moving)].tolist())

    def end_or_clean_up(self, ended: list[int]) -> None:
        """Finish the games that just ended, except those where GNU Go is playing, still in
        the main phase, and the judge sees dead stones: those resume in a cleanup phase."""
        n, superko = self.config.board_size, self.config.superko
        # Only games ended by two passes: a capped game's position may carry a simple-ko ban
        # that a restart from its stones would drop while GNU Go keeps it.
        judging = [slot for slot in ended if self.uses_gnugo and self.slots[slot].phase == MAIN
                   and int(self.arbiter.passes([slot])[0]) >= 2]
        verdicts = {slot: self.judges.submit(gnugo.judge_dead_stones, n, self.slots[slot].komi,
                                             list(self.slots[slot].moves), superko=superko,
                                             path=self.judge_path) for slot in judging}
        cleanup = []
        for slot in ended:
            if slot in verdicts:
                try:
                    dead = verdicts[slot].result()
                except GnuGoError as error:
                    self.drop(slot, f"the dead-stone judge failed ({error})")
                    continue
                if dead:
                    cleanup.append(slot)
                    continue
            self.finish(slot)
        if cleanup:
            cleanup = np.array(cleanup, np.int64)
            stones, side = self.arbiter.board(cleanup), self.arbiter.to_play(cleanup)
            self.arbiter.set_board(stones, side, slots=cleanup)
            for slot in cleanup.tolist():
                self.slots[slot].phase = CLEANUP
                self.slots[slot].cleanup_start = len(self.slots[slot].moves)
            for player in self.players:
                player.restart(cleanup, stones, side)

    def start(self, chosen: list[int]) -> None:
        """Give each chosen slot the next game of the match, or leave it empty."""
        starting = []
        for slot in chosen:
            if self.next_game < self.games:
                a_colour = 1 if self.next_game % 2 == 0 else -1
                self.slots[slot] = _Slot(game=self.next_game, a_colour=a_colour,
                                         komi=self.config.komi + self.give * a_colour)
                starting.append(slot)
                self.next_game += 1
            else:
                self.slots[slot] = _Slot()
        if starting:
            starting = np.array(starting, np.int64)
            self.arbiter.reset(starting)
            indices = np.array([self.slots[s].game for s in starting], np.int64)
            komis = np.array([self.slots[s].komi for s in starting], np.float64)
            self.arbiter.set_komi(komis, starting)
            for player in self.players:
                player.new_games(starting, indices, komis)
            self.play_openings(starting)

    def play_openings(self, starting: np.ndarray) -> None:
        """The random opening moves of the games just started (see the module docstring)."""
        if not self.random_openings:
            return
        generators = [np.random.default_rng([abs(self.seed), self.slots[s].game // 2])
                      for s in starting.tolist()]
        pass_move = self.config.board_size ** 2
        for _ in range(self.random_openings):
            legal = self.arbiter.legal_moves(starting)
            moves = np.full(len(starting), pass_move, np.int64)
            for row, generator in enumerate(generators):
                choices = np.flatnonzero(legal[row, :pass_move])
                if len(choices):
                    moves[row] = choices[generator.integers(len(choices))]
            self.arbiter.play(moves, slots=starting)
            for slot, move in zip(starting.tolist(), moves.tolist()):
                self.slots[slot].moves.append(int(move))
            for player in self.players:
                player.observe(starting, moves)

    def stop(self, slot: int) -> None:
        for player in self.players:
            player.end_games(np.array([slot]))
        self.start([slot])

    def drop(self, slot: int, why: str) -> None:
        self.log(f"game {self.slots[slot].game}: {why}; the game is not counted")
        self.not_played += 1
        self.stop(slot)

    def finish(self, slot: int, resigned: int = 0) -> None:
        state, arbiter, config = self.slots[slot], self.arbiter, self.config
        if resigned:
            score, winner = float("nan"), -resigned
        else:
            score = float(arbiter.score([slot])[0])
            winner = int(np.sign(score))
        capped = not resigned and int(arbiter.passes([slot])[0]) < 2
        record = PlayedGame(index=state.game, a_colour=state.a_colour, moves=list(state.moves),
                            cleanup_start=state.cleanup_start,
                            result=float(winner * state.a_colour), score=score, komi=state.komi,
                            resigned=resigned, capped=capped)
        player_a, player_b = self.players
        names = {state.a_colour: player_a.name, -state.a_colour: player_b.name}
        comment = f"game {state.game} of {player_a.name} vs {player_b.name}"
        if state.cleanup_start is not None:
            comment += (f"; moves from {state.cleanup_start + 1} on: cleanup phase "
                        f"(GNU Go saw dead stones after two passes)")
        record.sgf = game_to_sgf(config.board_size, state.komi, record.moves,
                                 result_text(winner, score, bool(resigned)),
                                 black=names[1], white=names[-1], comment=comment)
        self.records.append(record)
        if self.referee and not resigned and not capped:
            self.cross_checks.append((record, self.referees.submit(
                gnugo.referee_score, config.board_size, state.komi, record.moves,
                superko=config.superko, path=self.judge_path)))
        self.stop(slot)


