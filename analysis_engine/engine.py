"""The JSON analysis engine: queries in (analysis_engine/queries.py), answers out, every
position being analysed searched in one batch.

Threads: `submit` runs on the input reader's thread. It parses a line, answers at once what
needs no search (errors, warnings, query_version, clear_cache, the acknowledgement of a
terminate and the `noResults` answers of positions not yet started) and queues the query's
positions. `run` (the main thread) owns the net and the search: `SearchingGames` with
`batch_size` games, one per position being analysed. Each round it fills free games with the
waiting positions of highest priority (ties in arrival order), grows every active search by
up to CHUNK simulations in one batched search, and answers the positions that are done: at
their visits (maxVisits, capped at the tree's size), at their `maxTime`, when terminated, or
with a partial answer (`isDuringSearch`) every `reportDuringSearchEvery` seconds. So a
review that sends a game's 60 positions at once, in one query or in 60, searches them
together and the net sees batches of up to `batch_size` leaves.

Each position carries its query's komi (GoBatch keeps a komi per slot), so queries of
different komis search in one batch; a net that reads the komi (Config.komi_input) sees it.

Answers follow KataGo's analysis engine (field by field in `answer`): values from the
perspective the query asks for (`reportAnalysisWinratesAs`: BLACK, WHITE or SIDETOMOVE),
win rates in [0, 1], score leads in points, `utility` the search's Q in [-1, 1], ownership
row by row from the top left, policy with -1 on illegal points and pass last.
"""
from __future__ import annotations

import heapq
import itertools
import json
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from analysis_engine.queries import Action, Query, QueryError, parse_line
from games import analysis
from games.game_record import Move, Replayer, Setup
from games.search import SearchingGames
from kernels import GoBatch, coords
from training.config import Config

CHUNK = 16            # simulations per round between checks of time, terminations and input
COLOUR_LETTERS = {1: "B", -1: "W"}


@dataclass
class Position:
    """One turn of one query, waiting or being analysed in game `game` of the search."""
    query: Query
    turn: int
    priority: int
    order: int                     # arrival order, the tie-break
    game: int | None = None
    started: float = 0.0
    last_report: float = 0.0
    to_play: int = 1
    terminated: bool = False
    heads: object = field(default=None, repr=False)

    @property
    def key(self) -> tuple:
        return (-self.priority, self.order)

    def __lt__(self, other: "Position") -> bool:
        return self.key < other.key


class AnalysisEngine:
    """`write(dict)` sends one answer line; `log(str)` goes to stderr."""

    def __init__(self, config: Config, net, *, batch_size: int, tree_visits: int,
                 default_visits: int, perspective: str = "SIDETOMOVE", write, log=print,
                 seed: int = 0, version: str = "", net_komi: float | None = None):
        n = config.board_size
        self.net_komi = config.komi if net_komi is None else net_komi
        self.config = config
        self.board_size = n
        self.tree_visits = tree_visits
        self.default_visits = default_visits
        self.perspective = perspective
        self.version = version
        self.log = log
        self._write = write
        self._write_lock = threading.Lock()
        # Long reviewed games: a game reaching max_moves goes on as a new segment
        # (games/game_record.py), so this only bounds the superko hash history.
        rules = config.overridden(max_moves=4 * n * n, backend="cpu")
        self.driver = SearchingGames(rules, batch_size, net, simulations=tree_visits, seed=seed)
        self.has_heads = analysis.has_heads(net)
        self._checker = GoBatch(1, n, komi=config.komi, superko=config.superko,
                                max_moves=4 * n * n, history_length=1)
        self._condition = threading.Condition()
        self._waiting: list[Position] = []     # a heap
        self._active: dict[int, Position] = {}
        self._counter = itertools.count()
        self._closed = False
        self._quit_now = False

    # ------------------------------------------------------------ input (reader thread)

    def submit(self, line: str) -> None:
        """Take one input line: answer what needs no search, queue the rest."""
        if not line.strip():
            return
        try:
            request = parse_line(line, board_size=self.board_size, default_komi=self.config.komi,
                                 default_visits=self.default_visits, perspective=self.perspective)
            if isinstance(request, Action):
                self._act(request)
            else:
                self._check_moves(request)
                self._queue(request)
        except QueryError as error:
            self.write(error.answer())
        except Exception as error:    # noqa: BLE001 - a line must never stop the engine
            self.write({"error": f"could not handle the query: {type(error).__name__}: {error}"})

    def close(self, quit_now: bool = False) -> None:
        """The input has ended: finish what is queued (or, with `quit_now`, nothing more)."""
        with self._condition:
            self._closed = True
            self._quit_now = quit_now
            self._condition.notify_all()

    def _act(self, action: Action) -> None:
        if action.action == "query_version":
            self.write({**action.echo, "version": self.version, "git_hash": "<omitted>"})
        elif action.action == "clear_cache":
            self.write(action.echo)         # there is no cache between positions to clear
        else:
            self.write(action.echo)         # the acknowledgement comes first, as KataGo's
            self._terminate(action.terminate_id, action.turn_numbers)

    def _terminate(self, query_id: str | None, turns) -> None:
        """Stop positions of `query_id` (None: every query), only `turns` if given: waiting
        ones are answered `noResults` at once, active ones at the end of the round."""
        def chosen(position):
            return ((query_id is None or position.query.query_id == query_id)
                    and (turns is None or position.turn in turns))
        with self._condition:
            dropped = [p for p in self._waiting if chosen(p)]
            self._waiting = [p for p in self._waiting if not chosen(p)]
            heapq.heapify(self._waiting)
            for position in self._active.values():
                if chosen(position):
                    position.terminated = True
        for position in sorted(dropped):
            self.write({"id": position.query.query_id, "isDuringSearch": False,
                        "noResults": True, "turnNumber": position.turn})

    def _check_moves(self, query: Query) -> None:
        """Refuse a query whose moves cannot be played from its initial stones."""
        replayer = Replayer(self._checker)
        replayer.reset()
        events = self._events(query, len(query.moves))
        offset = len(events) - len(query.moves)
        for index, event in enumerate(events):
            try:
                replayer.apply(event)
            except ValueError as error:
                if index < offset:
                    raise QueryError(f"initialStones: {error}", "initialStones",
                                     query.query_id) from None
                colour, move = query.moves[index - offset]
                raise QueryError(f"Illegal move {index - offset}: {COLOUR_LETTERS[colour]} "
                                 f"{coords.to_gtp(move, self.board_size)}", "moves",
                                 query.query_id) from None

    def _queue(self, query: Query) -> None:
        for name, message in query.warnings:
            self.write({"id": query.query_id, "warning": message, "field": name})
        with self._condition:
            for turn, priority in zip(query.turns, query.priorities):
                heapq.heappush(self._waiting,
                               Position(query, turn, priority, next(self._counter)))
            self._condition.notify_all()

    @staticmethod
    def _events(query: Query, turn: int) -> list:
        events = []
        if query.initial_stones.any():
            events.append(Setup(query.initial_stones.copy(),
                                np.zeros_like(query.initial_stones), query.initial_player))
        return events + [Move(colour, move) for colour, move in query.moves[:turn]]

    # ------------------------------------------------------------ the search (main thread)

    def run(self) -> None:
        """Analyse until the input has ended and every queued position is answered."""
        while True:
            if not self._fill():
                return
            self._search_round()
            now = time.monotonic()
            with self._condition:     # a terminate flags positions from the reader thread
                active = list(self._active.values())
                done = [p for p in active if self._done(p, now)]
                reporting = [p for p in active if p not in done and p.query.report_every > 0
                             and now - p.last_report >= p.query.report_every]
            answers = self.answers(done, final=True) + self.answers(reporting, final=False)
            for answer in answers:
                self.write(answer)
            with self._condition:
                for position in done:
                    del self._active[position.game]
            for position in reporting:
                position.last_report = now

    def _fill(self) -> bool:
        """Move waiting positions into free games; False when there is nothing left to do."""
        with self._condition:
            while not self._active and not self._waiting:
                if self._closed:
                    return False
                self._condition.wait(0.5)
            if self._quit_now:
                return False
            free = [g for g in range(self.driver.num_games) if g not in self._active]
            # Waiting positions fill the free games in priority order, each at its own komi.
            taken = []
            while self._waiting and len(taken) < len(free):
                taken.append(heapq.heappop(self._waiting))
            if taken:
                now = time.monotonic()
                # Started under the lock: a terminate finds every position waiting or active.
                for game, position in zip(free, taken):
                    self._start(game, position, now)
        return True

    def _start(self, game: int, position: Position, now: float) -> None:
        query = position.query
        replayer = Replayer(self.driver.go, slot=game)
        self.driver.go.set_komi(query.komi, [game])   # kept through the replay's resets
        position.to_play = query.to_play(position.turn)
        replayer.replay(self._events(query, position.turn), position.to_play)
        mask = np.zeros(self.driver.num_games, bool)
        mask[game] = True
        self.driver.reset_search(mask)
        position.game, position.started, position.last_report = game, now, now
        position.heads = (analysis.Heads(self.driver, game, analysis.komi_shift(
            position.to_play, self.net_komi, query.komi, self.config.komi_input))
            if self.has_heads else None)
        self._active[game] = position

    def _target(self, position: Position) -> int:
        return min(position.query.max_visits, self.tree_visits)

    def _search_round(self) -> None:
        """Every active search up to CHUNK simulations further, one batched search per target
        (usually one: a review asks the same visits of every turn)."""
        over = self.driver.go.to_numpy(self.driver.go.is_over())
        simulations = self.driver.search.simulations
        targets: dict[int, list[int]] = {}
        for game, position in self._active.items():
            if position.terminated or over[game]:
                continue
            done = int(simulations[game])
            target = min(self._target(position), done + CHUNK)
            if target > done:
                targets.setdefault(target, []).append(game)
        for target, games in sorted(targets.items()):
            mask = np.zeros(self.driver.num_games, bool)
            mask[games] = True
            self.driver.think(mask, simulations=target)

    def _done(self, position: Position, now: float) -> bool:
        game = position.game
        query = position.query
        return (position.terminated
                or bool(self.driver.go.to_numpy(self.driver.go.is_over(np.array([game])))[0])
                or int(self.driver.search.simulations[game]) >= self._target(position)
                or (query.max_time > 0 and now - position.started >= query.max_time))

    # ------------------------------------------------------------ answers

    def write(self, answer: dict) -> None:
        line = json.dumps(answer, separators=(",", ":"))
        with self._write_lock:
            self._write(line)

    def answers(self, positions: list[Position], final: bool) -> list[dict]:
        """The answers of `positions` as their searches stand, the net asked once for all
        their heads and once for all their policies."""
        found = [analysis.candidates(self.driver, p.game) for p in positions]
        if self.has_heads:
            analysis.prefetch_heads([(p.heads, [c.action for c in candidates])
                                     for p, candidates in zip(positions, found)])
        policies = self._policies([p.game for p in positions if p.query.include_policy])
        return [self.answer(p, candidates, policies.get(p.game), during_search=not final)
                for p, candidates in zip(positions, found)]

    def answer(self, position: Position, found: list, policy: list | None,
               during_search: bool) -> dict:
        """KataGo's answer for the position in its game, from its candidates."""
        query, game, driver = position.query, position.game, self.driver
        mover = position.to_play
        flip = {"BLACK": mover, "WHITE": -mover, "SIDETOMOVE": 1}[query.perspective]
        n = self.board_size
        heads = position.heads
        infos = []
        for c in found:
            lead = heads.move_score(c.action) if heads is not None else 0.0
            lcb = max(0.0, c.lcb)
            info = {"move": coords.to_gtp(c.action, n), "visits": c.visits,
                    "winrate": _view(c.winrate, flip), "scoreLead": flip * lead,
                    "scoreMean": flip * lead, "scoreSelfplay": flip * lead,
                    "prior": c.prior, "utility": flip * c.value, "lcb": _view(lcb, flip),
                    "utilityLcb": flip * (2 * lcb - 1), "order": c.order}
            edges = analysis.principal_edges(driver, game, c.action, query.pv_length)
            info["pv"] = [coords.to_gtp(a, n) for a, _ in edges]
            if query.include_pv_visits:
                info["pvVisits"] = [v for _, v in edges]
            if query.include_moves_ownership and heads is not None:
                info["ownership"] = _floats(heads.move_ownership(c.action) * flip)
            infos.append(info)
        visits = analysis.root_visits(driver, game)
        over = bool(driver.go.to_numpy(driver.go.is_over(np.array([game])))[0])
        if over:    # two passes ended the game: its value is its result
            value = float(driver.go.to_numpy(driver.go.finished_values(np.array([game])))[0])
        else:
            value = float(driver.root_values()[game]) if visits else self._net_value(game)
        root_lead = 0.0
        if heads is not None:
            # Like the win rate, the root's lead is the search's: the net's lead of the root
            # and of each searched move, weighted by visits (the root's own evaluation once).
            weights = [1] + [c.visits for c in found if c.visits]
            leads = [heads.root_score()] + [heads.move_score(c.action) for c in found
                                            if c.visits]
            root_lead = float(np.average(leads, weights=weights))
        answer = {"id": query.query_id, "isDuringSearch": during_search,
                  "turnNumber": position.turn, "moveInfos": infos,
                  "rootInfo": {"winrate": _view((1 + value) / 2, flip),
                               "scoreLead": flip * root_lead, "scoreSelfplay": flip * root_lead,
                               "utility": flip * value, "visits": visits,
                               "currentPlayer": COLOUR_LETTERS[mover]}}
        if query.include_ownership and heads is not None:
            answer["ownership"] = _floats(heads.root_ownership() * flip)
        if policy is not None:
            answer["policy"] = policy
        return answer

    def _net_value(self, game: int) -> float:
        _, _, values, _ = self.driver.evaluate_slots(np.array([game], np.int64))
        return float(values[0])

    def _policies(self, games: list[int]) -> dict[int, list]:
        """{game: the net's policy over the legal moves (-1 elsewhere), pass last}."""
        if not games:
            return {}
        slots = np.array(games, np.int64)
        go = self.driver.go
        policy, _ = self.driver.evaluator(go.features(self.driver.history, slots))
        legal = go.to_numpy(go.legal_moves(slots))
        found = {}
        for game, row, ok in zip(games, np.asarray(policy, np.float64), legal):
            total = row[ok].sum()
            found[game] = [float(p / total) if allowed and total > 0 else -1.0
                           for p, allowed in zip(row, ok)]
        return found


def _view(fraction: float, flip: int) -> float:
    """A win rate (or its LCB) of the mover as the perspective `flip` reports it."""
    return float(fraction if flip > 0 else 1 - fraction)


def _floats(values: np.ndarray) -> list:
    return [float(v) for v in np.asarray(values, np.float64).ravel()]
