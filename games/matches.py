"""Matches between two players, many games at once: the one game loop for every match (a
net against random, GNU Go, another net or checkpoint).

    report = play_pair(config, net, "random", games=64, simulations=16, opening_moves=0)
    report = play_against_gnugo(config, net, level=5, games=50, simulations=48)
    report = checkpoint_vs_checkpoint(config, net_a, net_b, games=50, simulations=48)
    report.wins, report.losses, report.draws, report.win_rate, report.interval()
    ratings.fit_bradley_terry([report.pair(), ...], anchor="random")   # games/ratings.py

A player is a net searching with `SearchingGames` (`NetPlayer`), the net-free pure Monte Carlo
tree search ("mcts:SIMS": a `NetPlayer` over `games.search.pure_mcts`, SIMS playouts per move),
GNU Go at some level (`GnuGoPlayer`, one GTP process per game) or a uniformly random legal
player (`RandomPlayer`).
`play_match` runs `parallel` games in lockstep; a finished game's slot takes the next game at
once. Player A is black in even-numbered games and white in odd ones.

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
once. The opening moves are part of the record (`GameRecord.moves`, the SGF). A net then
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

import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from games import gnugo
from games.gnugo import GnuGoError, find_gnugo
from games.ratings import PairResult, wilson_interval
from games.search import SearchingGames, pure_mcts
from games.sgf_records import game_to_sgf, result_text
from kernels import GoBatch, coords
from training.config import Config
from training.options import parse_player

DEFAULT_PARALLEL = 32
RANDOM_OPENINGS = 2        # random opening plies of every game by default (see above)
RESIGN = gnugo.RESIGN      # -1: the player resigns
FAILED = -2                # the player could not move (its process died): the game is dropped
MAIN, CLEANUP = 0, 1       # phases of a game


def log_to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# Players. Slots are indices into the match's batch of games in flight.

class Player:
    """A side in a batch of games. The match calls, for slots (int arrays):
    new_games(slots, game_indices, komis) when games start (komis: each game's komi,
    float64); begin_moves then finish_moves for the slots where this player is to move
    (finish returns int64 moves, RESIGN or FAILED);
    observe(slots, moves) with every move played, its own included; restart(slots, stones,
    to_play) when a cleanup phase resumes play from a position; end_games(slots); close()."""
    name = "player"
    is_gnugo = False

    def new_games(self, slots: np.ndarray, game_indices: np.ndarray,
                  komis: np.ndarray) -> None:
        pass

    def begin_moves(self, arbiter: GoBatch, slots: np.ndarray) -> None:
        pass

    def finish_moves(self, arbiter: GoBatch, slots: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def observe(self, slots: np.ndarray, moves: np.ndarray) -> None:
        pass

    def restart(self, slots: np.ndarray, stones: np.ndarray, to_play: np.ndarray) -> None:
        pass

    def end_games(self, slots: np.ndarray) -> None:
        pass

    def close(self) -> None:
        pass


class RandomPlayer(Player):
    """A uniformly random legal move, drawn in the rules back end; it passes only when nothing
    else is legal."""

    def __init__(self, name: str = "random"):
        self.name = name

    def finish_moves(self, arbiter, slots):
        return np.asarray(arbiter.random_moves(slots=slots), dtype=np.int64)


class NetPlayer(Player):
    """A net searching all its games as one batch through SearchingGames: greedy (most visits)
    after its first `opening_moves` moves, which are sampled by visit count."""

    def __init__(self, config: Config, evaluator, batch_size: int, simulations: int, *,
                 seed: int = 0, opening_moves: int = 0, name: str = "net", num_threads: int = 1):
        self.name = name
        self.simulations = int(simulations)
        self.opening_moves = int(opening_moves)
        self.driver = SearchingGames(config, batch_size, evaluator,
                                     simulations=max(self.simulations, 1), seed=seed,
                                     num_threads=num_threads)
        self.own_moves = np.zeros(batch_size, np.int64)
        self.in_cleanup = np.zeros(batch_size, bool)

    def _mask(self, slots) -> np.ndarray:
        mask = np.zeros(self.driver.num_games, bool)
        mask[slots] = True
        return mask

    def new_games(self, slots, game_indices, komis):
        self.driver.new_games(self._mask(slots))
        self.driver.go.set_komi(komis, slots)
        self.own_moves[slots] = 0
        self.in_cleanup[slots] = False

    def finish_moves(self, arbiter, slots):
        mask = self._mask(slots)
        self.driver.think(mask, noise=False, simulations=self.simulations)
        actions = self.driver.best_actions(mask)
        opening = mask & (self.own_moves < self.opening_moves) & ~self.in_cleanup
        if opening.any():
            actions[opening] = self.driver.search.choose_actions(1.0, games=opening)[opening]
        self.own_moves[slots] += 1
        return actions[slots]

    def observe(self, slots, moves):
        actions = np.zeros(self.driver.num_games, np.int64)
        actions[slots] = moves
        self.driver.play(actions, games=self._mask(slots))

    def restart(self, slots, stones, to_play):
        self.driver.go.set_board(stones, to_play, slots=slots)
        self.driver.search.reset(self._mask(slots))
        self.in_cleanup[slots] = True


class GnuGoPlayer(Player):
    """GNU Go at `level`, one process per game (started with the game, closed at its end), the
    moves of one ply requested concurrently. Process `--seed`: seed * 100003 + game + 1."""
    is_gnugo = True

    def __init__(self, config: Config, level: int, batch_size: int, *, seed: int = 0,
                 path=None, timeout: float = 300.0, name: str | None = None,
                 log: Callable[[str], None] = log_to_stderr):
        self.path = find_gnugo(path)
        self.config = config
        self.level = int(level)
        self.name = name or f"gnugo:{self.level}"
        self.seed = int(seed)
        self.timeout = timeout
        self.log = log
        self.processes: list[gnugo.GnuGo | None] = [None] * batch_size
        self.moves: list[list[int]] = [[] for _ in range(batch_size)]
        self.games = np.full(batch_size, -1, np.int64)
        self.in_cleanup = np.zeros(batch_size, bool)
        self.pool = ThreadPoolExecutor(max_workers=batch_size, thread_name_prefix="gnugo")
        self.pending: dict[int, Future] = {}

    def process_seed(self, game_index: int) -> int:
        return (self.seed * 100003 + int(game_index) + 1) % (2 ** 31 - 1) or 1

    def _start(self, slot: int, game_index: int, komi: float):
        config = self.config
        try:
            return gnugo.GnuGo(config.board_size, komi, level=self.level,
                               seed=self.process_seed(game_index), superko=config.superko,
                               path=self.path, timeout=self.timeout)
        except GnuGoError as error:
            self.log(f"{self.name}: game {game_index}: GNU Go did not start ({error}); "
                     f"the game is not counted")
            return None

    def new_games(self, slots, game_indices, komis):
        self.end_games(slots)
        started = self.pool.map(self._start, slots, game_indices, komis)
        for slot, game_index, process in zip(slots, game_indices, started):
            self.processes[slot] = process
            self.moves[slot] = []
            self.games[slot] = game_index
            self.in_cleanup[slot] = False

    def _genmove(self, slot: int, colour: int, moves: list[int], cleanup: bool) -> int:
        process = self.processes[slot]
        if process is None:
            return FAILED
        try:
            process.replay(moves)
            return process.genmove(colour, cleanup=cleanup)
        except GnuGoError as error:
            self.log(f"{self.name}: game {self.games[slot]}: {error}; the game is not counted")
            self.processes[slot] = None
            return FAILED

    def begin_moves(self, arbiter, slots):
        colours = arbiter.to_play(slots)
        for slot, colour in zip(slots.tolist(), colours.tolist()):
            self.pending[slot] = self.pool.submit(self._genmove, slot, colour,
                                                  list(self.moves[slot]),
                                                  bool(self.in_cleanup[slot]))

    def finish_moves(self, arbiter, slots):
        if any(slot not in self.pending for slot in slots.tolist()):
            self.begin_moves(arbiter, slots[[s not in self.pending for s in slots.tolist()]])
        return np.array([self.pending.pop(slot).result() for slot in slots.tolist()], np.int64)

    def observe(self, slots, moves):
        for slot, move in zip(slots.tolist(), moves.tolist()):
            self.moves[slot].append(move)

    def restart(self, slots, stones, to_play):
        # The process keeps its whole game (the two passes included); only its verb changes.
        self.in_cleanup[slots] = True

    def end_games(self, slots):
        for slot in np.asarray(slots).tolist():
            if self.processes[slot] is not None:
                self.processes[slot].close()
                self.processes[slot] = None

    def close(self):
        self.end_games(np.arange(len(self.processes)))
        self.pool.shutdown(wait=True)


# Results.

@dataclass
class GameRecord:
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
    give: float = 0.0          # the komi A gave in every game (see the module docstring)

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


# The match runner.

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
        self.records: list[GameRecord] = []
        self.cross_checks: list[tuple[GameRecord, Future]] = []
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
        record = GameRecord(index=state.game, a_colour=state.a_colour, moves=list(state.moves),
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


def _parallel(games: int, parallel: int | None) -> int:
    if games < 1:
        raise ValueError(f"games must be at least 1, got {games}")
    return max(1, min(games, parallel or DEFAULT_PARALLEL))


def play_against_gnugo(config: Config, evaluator, level: int, games: int, simulations: int,
                       seed: int = 0, parallel: int | None = None, *, opening_moves: int = 0,
                       random_openings: int = RANDOM_OPENINGS,
                       gnugo_path=None, log: Callable[[str], None] = log_to_stderr) -> MatchReport:
    """The net (A) against GNU Go at `level` (B), colours alternating, `parallel` games at once
    (default min(games, 32)). Raises GnuGoNotFound before playing when there is no GNU Go; a
    process that dies costs its game only (`not_played`, a message through `log`)."""
    path = find_gnugo(gnugo_path)
    parallel = _parallel(games, parallel)
    net = NetPlayer(config, evaluator, parallel, simulations, seed=seed,
                    opening_moves=opening_moves, name="net")
    opponent = GnuGoPlayer(config, level, parallel, seed=seed, path=path, log=log)
    try:
        return play_match(config, net, opponent, games, parallel=parallel, seed=seed,
                          gnugo_path=path, random_openings=random_openings, log=log)
    finally:
        opponent.close()


def checkpoint_vs_checkpoint(config: Config, net_a, net_b, games: int, simulations: int,
                             seed: int = 0, parallel: int | None = None, *, opening_moves: int = 0,
                             random_openings: int = RANDOM_OPENINGS,
                             names: tuple[str, str] = ("A", "B")) -> MatchReport:
    """Two nets (evaluators, or NetEntry for a net with its own input planes: a run's net
    before its planes grew) against each other, each searching its own moves through its own
    SearchingGames, all games in one batch per net; wins are net_a's."""
    parallel = _parallel(games, parallel)
    player_a, player_b = (
        NetPlayer(config.with_inputs_of(net.config) if isinstance(net, NetEntry) else config,
                  net.evaluator if isinstance(net, NetEntry) else net, parallel, simulations,
                  seed=seed + offset, opening_moves=opening_moves, name=name)
        for offset, (net, name) in enumerate(zip((net_a, net_b), names)))
    return play_match(config, player_a, player_b, games, parallel=parallel, seed=seed,
                      random_openings=random_openings)


@dataclass(frozen=True)
class NetEntry:
    """A net for `make_player` with the config it was trained under: it plays the match's
    rules and search but sees its own input planes (history, extra features), so nets of
    different runs can meet."""
    evaluator: object
    config: Config


def make_player(config: Config, entry, name: str, parallel: int, simulations: int, *,
                seed: int = 0, opening_moves: int = 0, gnugo_path=None,
                log: Callable[[str], None] = log_to_stderr) -> Player:
    """A player from `entry`: "random", "gnugo:L" (GNU Go at level L), "mcts:S" (pure Monte
    Carlo tree search, S simulations per move whatever `simulations` says), a `NetEntry`, or
    an evaluator (a net searching `simulations` per move under `config`, rollout_lambda
    included, its input planes `config`'s)."""
    if isinstance(entry, NetEntry):
        config, entry = config.with_inputs_of(entry.config), entry.evaluator
    if isinstance(entry, str):
        spec = parse_player(entry)
        if spec.kind == "random":
            return RandomPlayer(name)
        if spec.kind == "mcts":
            mcts_config, uniform = pure_mcts(config)
            return NetPlayer(mcts_config, uniform, parallel, int(spec.value), seed=seed,
                             opening_moves=opening_moves, name=name)
        if spec.kind == "gnugo":
            return GnuGoPlayer(config, int(spec.value), parallel, seed=seed,
                               path=gnugo_path, name=name, log=log)
        raise ValueError(f"{entry}: a net player is passed as its evaluator or a NetEntry")
    return NetPlayer(config, entry, parallel, simulations, seed=seed,
                     opening_moves=opening_moves, name=name)


def play_pair(config: Config, entry_a, entry_b, games: int, simulations: int, *, seed: int = 0,
              parallel: int | None = None, names: tuple[str, str] = ("A", "B"),
              opening_moves: int = 0, random_openings: int = RANDOM_OPENINGS, gnugo_path=None,
              give: float = 0.0, log: Callable[[str], None] = log_to_stderr) -> MatchReport:
    """A match between two entries of `make_player` (A black in even-numbered games, giving
    `give` points of komi)."""
    parallel = _parallel(games, parallel)
    built = []
    try:
        for offset, (entry, name) in enumerate(zip((entry_a, entry_b), names)):
            built.append(make_player(config, entry, name, parallel, simulations,
                                     seed=seed + 7919 * offset, opening_moves=opening_moves,
                                     gnugo_path=gnugo_path, log=log))
        return play_match(config, built[0], built[1], games, parallel=parallel, seed=seed,
                          gnugo_path=gnugo_path, random_openings=random_openings, give=give,
                          log=log)
    finally:
        for player in built:
            player.close()


def round_robin(config: Config, entries: dict, games_per_pair: int, simulations: int, *,
                seed: int = 0, parallel: int | None = None, opening_moves: int = 0,
                random_openings: int = RANDOM_OPENINGS, gnugo_path=None,
                log: Callable[[str], None] = log_to_stderr) -> list[MatchReport]:
    """Every pair of `entries` ({name: "random" | "gnugo:L" | "mcts:S" | evaluator}) plays `games_per_pair`
    games, colours alternating; feed the reports (or their `pair()`s, kept across calls) to
    `fit_bradley_terry`."""
    names = list(entries)
    reports = []
    for i, first in enumerate(names):
        for second in names[i + 1:]:
            reports.append(play_pair(config, entries[first], entries[second], games_per_pair,
                                     simulations, seed=seed + len(reports) * 1009,
                                     parallel=parallel, names=(first, second),
                                     opening_moves=opening_moves, random_openings=random_openings,
                                     gnugo_path=gnugo_path, log=log))
    return reports
