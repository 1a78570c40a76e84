"""The players of a match, each one side in a batch of games: a net searching with
`SearchingGames` (`NetPlayer`), the net-free pure Monte Carlo tree search ("mcts:SIMS": a
`NetPlayer` over `games.search.pure_mcts`, SIMS playouts per move), GNU Go at some level
(`GnuGoPlayer`, one GTP process per game) or a uniformly random legal player (`RandomPlayer`);
`make_player` builds one from a name or a net (`NetEntry`: a net with its own input planes).

A player sees slots: int arrays of indices into the match's batch of games in flight (the
protocol is `Player`'s docstring). A move is a flat index, pass = N*N; `RESIGN` and `FAILED`
are the two non-moves a player may answer. games/match_runner.py drives them.
"""
from __future__ import annotations

import sys
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

import numpy as np

from games import gnugo
from games.gnugo import GnuGoError, find_gnugo
from games.search import SearchingGames, pure_mcts
from kernels import GoBatch
from training.config import Config
from training.options import parse_player

RESIGN = gnugo.RESIGN      # -1: the player resigns
FAILED = -2                # the player could not move (its process died): the game is dropped


def log_to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


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
        self.driver.reset_search(self._mask(slots))
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
        self.closing = False

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
            if not self.closing:     # a process close() killed is no game lost
                self.log(f"{self.name}: game {self.games[slot]}: {error}; the game is not "
                         f"counted")
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
        """End every game. Moves still in flight (a stop mid-match) are not waited for: their
        processes are killed first, their threads read the end of the stream and return, and
        only then are the streams closed."""
        self.closing = True
        for slot, future in self.pending.items():
            process = self.processes[slot]     # a failing move's thread may clear it meanwhile
            if not future.done() and process is not None:
                process.kill()
        self.pool.shutdown(wait=True)
        self.end_games(np.arange(len(self.processes)))


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
