"""The Go side of the GTP engine: every command's meaning, on top of the search driver.

`GoEngine(config, evaluator, options).handlers()` gives the command table for
`gtp.protocol.GtpServer`. One game is searched by a one-game `SearchingGames`; its GoBatch
slot 0 holds the current position, rebuilt from the `GameRecord` by `Replayer` whenever it is
not the position wanted (see games/game_record.py for the rules of that replay). Moves played the
ordinary way (the side to move, game not over) go through `SearchingGames.play`, so the
search tree below the move is kept.

Rules: those of the run (area scoring, suicide illegal, simple ko, positional superko if the
run's config has it), komi from `komi`. The board size is the net's: `boardsize` with another
size answers `unacceptable size`.

Decisions a GTP engine must make and this one's answers:
- genmove for the side not to move: a pass of the other colour is inserted (games/game_record.py).
- genmove right after the opponent passed, when the position as it stands wins for us by
  area (Tromp-Taylor) scoring and is settled (`games.territory.position_settled`: every empty point touches
  one colour only, and with a net that has an ownership head the net gives every point that
  owner with confidence at least SETTLED_OWNERSHIP): pass, ending the game with a win.
  Winning the count alone is not enough: a user who passes early in the opening must not
  lose to komi on an almost empty board. Otherwise moves come from the search over
  "sensible" moves as in self-play (no filling of one's own eyes; pass only when nothing else
  is left), as the GUI's net always plays, so a game is played out until area scoring counts
  what a player would. `kgs-genmove_cleanup` never takes the early pass.
- resign: only with a threshold (`resign_threshold`, a value in [-1, 1] from the mover's view,
  i.e. win rate (1 + v) / 2); off by default.
- final_score is the area score of the board as it stands: every stone counts as alive, so
  final_status_list lists all stones alive and none dead or in seki.
- time_settings / time_left cap the search time per move when a clock is running; the
  simulation count (--sims) caps it always.
"""
from __future__ import annotations

import math
import re
import shlex
import time
from dataclasses import dataclass, field

import numpy as np

from games import analysis, sgf_records
from games.search import SearchingGames
from games.territory import position_settled, stone_groups
from gtp.files import FileRefused, read_regular_file, write_regular_file
from games.game_record import GameRecord, Move, Replayer, Setup
from games.handicap import fixed_handicap_vertices
from gtp.protocol import GtpError, Stream
from gtp.version import program_version
from kernels import coords
from py_util.mcts import move_preferences
from training.config import Config

COLOURS = {"b": 1, "black": 1, "w": -1, "white": -1}
COLOUR_NAMES = {1: "black", -1: "white"}
VERTEX = re.compile(r"[A-HJ-Z][0-9]{1,2}", re.IGNORECASE)
# Numbers as GTP writes them: ASCII digits only (str.isdigit also takes "²" and "٣", which int()
# refuses), and few enough that int() never meets Python's limit on digits.
NATURAL = re.compile(r"[0-9]{1,18}")
INTEGER = re.compile(r"[+-]?[0-9]{1,18}")
DEFAULT_ANALYSIS_INTERVAL = 100   # centiseconds, when lz-analyze is given none


@dataclass(frozen=True)
class EngineOptions:
    simulations: int                     # per genmove
    use_search: bool = True              # False: the net's policy alone picks genmove's move
    resign_threshold: float | None = None
    analysis_simulations: int | None = None  # analysis cap on root visits; None: by board size
    name: str = "Batched Go Zero"
    version: str = field(default_factory=program_version)   # the program's, pyproject.toml's
    net: str = "a net"                   # which net plays (bgz-net): run, iteration, shape
    net_komi: float | None = None        # the komi the net trained with (None: the config's)


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


@dataclass
class _AnalyzeRequest:
    colour: int
    interval: int = DEFAULT_ANALYSIS_INTERVAL   # centiseconds
    min_moves: int = 0
    max_moves: int | None = None
    ownership: bool = False


class GoEngine:
    def __init__(self, config: Config, evaluator, options: EngineOptions, log=None, seed: int = 0):
        self.config = config
        self.evaluator = evaluator
        self.options = options
        self.log = log or (lambda message: None)
        self.board_size = n = config.board_size
        self.pass_move = n * n
        self.tree_simulations = analysis.analysis_cap(n, options.simulations,
                                                     options.analysis_simulations)
        # GTP games may be longer than self-play's max_moves; a game reaching this limit goes
        # on as a new segment (games/game_record.py), so it only bounds the superko hash history.
        self.driver = SearchingGames(config.overridden(max_moves=4 * n * n), 1, evaluator,
                                     simulations=self.tree_simulations, seed=seed, num_threads=1)
        self.go = self.driver.go
        self.record = GameRecord()
        self.replayer = Replayer(self.go)
        self.clock = Clock()
        self.resigned = 0                 # colour that resigned the current game, 0 if none
        self._position_version = -1       # record version the GoBatch slot was built for
        self._inserted = False            # ...with a pass or segment added for genmove's colour

    def handlers(self) -> dict:
        return {
            "name": lambda args: self.options.name,
            "version": lambda args: self.options.version,
            "bgz-net": lambda args: self.options.net,
            "boardsize": self.cmd_boardsize,
            "clear_board": self.cmd_clear_board,
            "komi": self.cmd_komi,
            "play": self.cmd_play,
            "genmove": lambda args: self.cmd_genmove(args, play=True),
            "reg_genmove": lambda args: self.cmd_genmove(args, play=False),
            "kgs-genmove_cleanup": lambda args: self.cmd_genmove(args, play=True, cleanup=True),
            "undo": self.cmd_undo,
            "showboard": self.cmd_showboard,
            "final_score": self.cmd_final_score,
            "final_status_list": self.cmd_final_status_list,
            "time_settings": self.cmd_time_settings,
            "time_left": self.cmd_time_left,
            "set_free_handicap": self.cmd_set_free_handicap,
            "fixed_handicap": self.cmd_fixed_handicap,
            "place_free_handicap": self.cmd_place_free_handicap,
            "loadsgf": self.cmd_loadsgf,
            "printsgf": self.cmd_printsgf,
            "lz-analyze": self.cmd_lz_analyze,
            "kata-analyze": self.cmd_kata_analyze,
            "gogui-analyze_commands": self.cmd_gogui_analyze_commands,
            "bgz-policy_heatmap": self.cmd_policy_heatmap,
            "bgz-visit_heatmap": self.cmd_visit_heatmap,
            "bgz-principal_variation": self.cmd_principal_variation,
            "bgz-value": self.cmd_value,
        }

    # ------------------------------------------------------------------ the position

    def _changed(self) -> None:
        self.resigned = 0

    def prepare(self, colour: int) -> None:
        """Make slot 0 the record's position with `colour` to move in a game not over."""
        stale = self._position_version != self.record.version
        if stale or (self._inserted and self.replayer.to_play() != colour):
            self.replayer.replay(self.record.events)
            self.driver.search.reset()
            self._position_version = self.record.version
            self._inserted = False
        if self.replayer.make_to_move(colour):
            self.driver.search.reset()
            self._inserted = True

    def sync_board(self) -> None:
        """Make slot 0 hold the record's stones (a pass inserted for genmove may remain)."""
        if self._position_version != self.record.version:
            self.prepare(self.record.next_colour())

    def _commit(self, colour: int, move: int, comment: str = "") -> None:
        """Play `move` (legal, slot prepared for `colour`) and keep the subtree below it."""
        self.driver.play(np.array([move], dtype=np.int64))
        self.replayer.note_played()
        self.record.add(Move(colour, int(move), comment))
        self._position_version = self.record.version
        self._inserted = False
        self._changed()

    def _is_legal(self, move: int) -> bool:
        legal = self.go.legal_moves(self.replayer.slots)[0]
        return bool(legal[move]) and not self.replayer.repeats_earlier_segment(move)

    # ------------------------------------------------------------------ setup commands

    def cmd_boardsize(self, args):
        size = _parse_int(args, 1)[0]
        if size != self.board_size:
            raise GtpError("unacceptable size")
        return self.cmd_clear_board([])

    def cmd_clear_board(self, args):
        self.record.clear()
        self._changed()
        return ""

    def cmd_komi(self, args):
        komi = _parse_float(args, 1)[0]
        self.go.komi = komi
        self._position_version = -1    # the tree's values were for the old komi
        return ""

    def cmd_set_free_handicap(self, args):
        self.sync_board()
        if self.replayer.board().any():
            raise GtpError("board not empty")
        try:
            points = [coords.from_gtp(vertex, self.board_size) for vertex in args]
        except ValueError:
            raise GtpError("bad vertex list") from None
        if (len(points) < 2 or len(points) > self.board_size ** 2 - 1
                or len(set(points)) != len(points) or self.pass_move in points):
            raise GtpError("bad vertex list")
        self._place_handicap(points)
        return ""

    def cmd_fixed_handicap(self, args):
        """The GTP specification's fixed placement (section 4.1.1), as GNU Go places it."""
        stones = _parse_int(args, 1)[0]
        self.sync_board()
        if self.replayer.board().any():
            raise GtpError("board not empty")
        vertices = fixed_handicap_vertices(self.board_size, stones)
        if vertices is None:
            raise GtpError("invalid number of stones")
        self._place_handicap([coords.from_gtp(vertex, self.board_size) for vertex in vertices])
        return " ".join(vertices)

    def cmd_place_free_handicap(self, args):
        """The engine's own placement of N stones: the fixed points as far as they go (the
        placement players expect, and GNU Go's), then, for more, one stone at a time where
        the net's policy for Black likes it most."""
        stones = _parse_int(args, 1)[0]
        self.sync_board()
        if self.replayer.board().any():
            raise GtpError("board not empty")
        n = self.board_size
        if not 2 <= stones <= n * n - 1:
            raise GtpError("invalid number of stones")
        fixed = None
        for count in range(min(stones, 9), 1, -1):
            fixed = fixed_handicap_vertices(n, count)
            if fixed is not None:
                break
        points = [coords.from_gtp(vertex, n) for vertex in fixed or []]
        board = np.zeros((n, n), np.int8)
        board.flat[points] = 1
        while len(points) < stones:
            self.replayer.start_segment(board, 1)
            policy, legal, _, _ = self.driver.evaluate_slots(self.replayer.slots)
            scores = np.where(legal[0, :n * n] & (board.ravel() == 0), policy[0, :n * n], -1.0)
            point = int(np.argmax(scores))
            if scores[point] < 0:
                break
            points.append(point)
            board.flat[point] = 1
        self._position_version = -1     # slot 0 was used to ask the net: rebuild it
        self._place_handicap(points)
        return " ".join(self._vertex(p) for p in points)

    def _place_handicap(self, points: list[int]) -> None:
        stones = np.zeros((self.board_size, self.board_size), np.int8)
        stones.flat[points] = 1
        self.record.add(Setup(stones, previous=np.zeros_like(stones), to_play=-1,
                              handicap=len(points)))
        self._changed()

    def cmd_time_settings(self, args):
        if len(args) != 3:
            raise GtpError("syntax error")
        main_time, byo_yomi_time = _parse_seconds(args[:2])
        stones = _parse_int(args[2:], 1)[0]
        if stones < 0:
            raise GtpError("syntax error")
        self.clock = Clock(main_time, byo_yomi_time, stones, active=True)
        return ""

    def cmd_time_left(self, args):
        if len(args) != 3:
            raise GtpError("syntax error")
        colour = _parse_colour(args[0])
        seconds = _parse_seconds(args[1:2])[0]
        stones = _parse_int(args[2:], 1)[0]
        if stones < 0:
            raise GtpError("syntax error")
        self.clock.left[colour] = (seconds, stones)
        return ""

    # ------------------------------------------------------------------ moves

    def cmd_play(self, args):
        if len(args) != 2:
            raise GtpError("syntax error")
        colour = _parse_colour(args[0])
        move = self._parse_move(args[1])
        if move is None:
            raise GtpError("illegal move")    # a vertex, but not on this board
        self.prepare(colour)
        if not self._is_legal(move):
            raise GtpError("illegal move")
        self._commit(colour, move)
        return ""

    def cmd_undo(self, args):
        if not self.record.undo():
            raise GtpError("cannot undo")
        self._changed()
        return ""

    def cmd_genmove(self, args, play: bool, cleanup: bool = False):
        if len(args) != 1:
            raise GtpError("syntax error")
        colour = _parse_colour(args[0])
        started = time.monotonic()
        self.prepare(colour)
        move, value, summary = self._choose_move(colour, cleanup)
        threshold = self.options.resign_threshold
        if value is not None and threshold is not None and value < threshold:
            self.log(f"genmove {COLOUR_NAMES[colour]}: resign ({summary})")
            if play:
                self.resigned = colour
            return "resign"
        self.log(f"genmove {COLOUR_NAMES[colour]}: {self._vertex(move)} ({summary}, "
                 f"{time.monotonic() - started:.2f} s)")
        if play:
            self._commit(colour, move, comment=summary)
        return self._vertex(move)

    def _choose_move(self, colour: int, cleanup: bool) -> tuple[int, float | None, str]:
        """(move, value from the mover's view or None, a one-line account of the choice)."""
        if (not cleanup and self._opponent_passed(colour) and colour * self._score() > 0
                and self._settled(colour)):
            return self.pass_move, None, "the opponent passed; settled, and wins by area"
        if self.options.use_search:
            stats = self._search(colour, self.options.simulations)
            value = float(self.driver.root_values()[0])
            return (self._best_move(stats), value,
                    f"win rate {(1 + value) / 2:.1%}, {int(stats.visits[0].sum())} visits")
        policy, legal, values, _ = self.driver.evaluate_slots(self.replayer.slots)
        value = float(values[0])
        return (self._best_move_by(np.where(legal[0], policy[0], -1.0)), value,
                f"win rate {(1 + value) / 2:.1%}, net alone")

    def _opponent_passed(self, colour: int) -> bool:
        events = self.record.events
        return bool(events) and isinstance(events[-1], Move) and events[-1].colour == -colour \
            and events[-1].move == self.pass_move

    def _score(self) -> float:
        return float(self.go.score(self.replayer.slots)[0])

    def _settled(self, colour: int) -> bool:
        """position_settled for the prepared position, `colour` to move; the net's ownership
        is asked for when it has the head."""
        ownership = None
        if self.has_ownership:
            ownership = analysis.net_heads(self.driver, self.replayer.slots)[0][0] * colour
        return position_settled(self.replayer.board(), ownership)

    def _search(self, colour: int, simulations: int):
        """Search the prepared position up to `simulations` this move (visits kept from
        earlier searches of the same position count), within the clock's budget."""
        games = np.ones(1, bool)
        empty = int((self.replayer.board() == 0).sum())
        budget = self.clock.budget(colour, empty)
        if budget is None:
            return self.driver.think(games, simulations=simulations)
        deadline = time.monotonic() + budget
        while True:
            done = int(self.driver.search.simulations[0])
            target = min(simulations, done + analysis.CHUNK)
            stats = self.driver.think(games, simulations=target)
            progress = int(self.driver.search.simulations[0]) > done
            if target >= simulations or not progress or time.monotonic() >= deadline:
                return stats

    def _best_move(self, stats) -> int:
        """Most visits (then highest prior), or by lower confidence bound with the config's
        `lcb_move_choice`; priors alone when nothing was visited."""
        return self._best_move_by(
            move_preferences(stats, lcb=self.driver.settings.lcb_move_choice)[0])

    def _best_move_by(self, score: np.ndarray) -> int:
        """The highest-scoring move that is legal here (score -1 marks excluded moves)."""
        for move in np.argsort(-score, kind="stable"):
            if score[move] < 0:
                break
            if not self.replayer.repeats_earlier_segment(int(move)):
                return int(move)
        return self.pass_move

    # ------------------------------------------------------------------ scoring and display

    def cmd_final_score(self, args):
        self.sync_board()
        score = self._score()
        if score == 0:
            return "0"
        return f"{'B' if score > 0 else 'W'}+{abs(score):.1f}"

    def cmd_final_status_list(self, args):
        if len(args) != 1 or args[0] not in ("alive", "dead", "seki"):
            raise GtpError("syntax error")
        if args[0] != "alive":
            return ""
        self.sync_board()
        return "\n".join(" ".join(self._vertex(p) for p in group)
                         for group in stone_groups(self.replayer.board()))

    def cmd_showboard(self, args):
        self.sync_board()
        board, n = self.replayer.board(), self.board_size
        letters = "   " + " ".join(coords.GTP_COLUMNS[:n])
        rows = [letters]
        for row in range(n):
            number = n - row
            cells = " ".join(".XO"[board[row, col]] for col in range(n))
            rows.append(f"{number:2d} {cells} {number}")
        rows.append(letters)
        captured = self.replayer.captures()
        rows.append(f"captured by black (X): {captured[0]}, by white (O): {captured[1]}; "
                    f"komi {self.go.komi:g}; {COLOUR_NAMES[self.record.next_colour()]} to move")
        return "\n" + "\n".join(rows)

    # ------------------------------------------------------------------ SGF

    def cmd_loadsgf(self, args):
        path, rest = _split_filename(args)
        if path is None or len(rest) > 1:
            raise GtpError("syntax error")
        move_number = _parse_int(rest, 1)[0] if rest else None
        try:
            record = sgf_records.read_sgf(read_regular_file(path))
            if record.komi is not None and not math.isfinite(record.komi):
                raise ValueError(f"komi {record.komi} is not a finite number")
            if record.board_size != self.board_size:
                raise ValueError(f"board size {record.board_size}, the net plays "
                                 f"{self.board_size}x{self.board_size}")
            events = self._events_from_sgf(record, move_number)
        except (OSError, ValueError, FileRefused) as error:
            self.log(f"loadsgf {path}: {error}")
            self._position_version = -1    # the slot may hold part of the file's game
            raise GtpError("cannot load file") from None
        if record.komi is not None:
            self.go.komi = float(record.komi)
        self.record.replace(events)
        self._position_version = -1
        self._changed()
        return ""

    def _events_from_sgf(self, record, move_number: int | None) -> list:
        """Events of the file's main line up to the position before move `move_number`,
        checked by playing them (ValueError on an illegal move or position)."""
        replayer, events = self.replayer, []
        replayer.reset()
        moves_played = 0
        for index, node in enumerate(record.nodes):
            if node.has_setup:
                previous = replayer.board()
                stones = previous.copy()
                stones.flat[node.add_black] = 1
                stones.flat[node.add_white] = -1
                stones.flat[node.add_empty] = 0
                upcoming = next((n.colour for n in record.nodes[index:] if n.colour), 0)
                to_play = node.to_play or upcoming or (
                    -1 if index == 0 and record.handicap >= 2 else replayer.to_play())
                handicap = record.handicap if index == 0 and not node.add_white else 0
                setup = Setup(stones, previous, to_play, handicap=handicap)
                replayer.apply(setup)
                events.append(setup)
            if node.colour:
                if move_number is not None and moves_played + 1 >= move_number:
                    break
                replayer.make_to_move(node.colour)
                if not self._is_legal(node.move):
                    raise ValueError(f"move {moves_played + 1} "
                                     f"({self._vertex(node.move)}) is illegal")
                event = Move(node.colour, node.move, node.comment)
                replayer.apply(event)
                events.append(event)
                moves_played += 1
        return events

    def cmd_printsgf(self, args):
        path, rest = _split_filename(args)
        if rest:
            raise GtpError("syntax error")
        data = sgf_records.write_sgf(self.sgf_record())
        if path is None:
            return data.decode("utf-8").rstrip("\n")
        try:
            write_regular_file(path, data)
        except FileRefused as error:
            raise GtpError(f"cannot write file: {error}") from None
        except OSError as error:
            raise GtpError(f"cannot write file: {error.strerror}") from None
        return ""

    def sgf_record(self) -> sgf_records.SgfRecord:
        n = self.board_size
        nodes = [sgf_records.SgfNode()]
        handicap = 0
        for index, event in enumerate(self.record.events):
            if isinstance(event, Move):
                nodes.append(sgf_records.SgfNode(colour=event.colour, move=event.move,
                                                 comment=event.comment))
                continue
            node = nodes[0] if index == 0 else sgf_records.SgfNode()
            if index == 0:
                handicap = event.handicap
            changed = np.flatnonzero(event.stones.ravel() != event.previous.ravel())
            values = event.stones.ravel()[changed]
            node.add_black = changed[values == 1].tolist()
            node.add_white = changed[values == -1].tolist()
            node.add_empty = changed[values == 0].tolist()
            node.to_play = event.to_play
            if index:
                nodes.append(node)
        result = ""
        if self.resigned:
            result = f"{'W' if self.resigned == 1 else 'B'}+R"
        elif self.record.last_moves_are_passes(2, self.pass_move):
            self.sync_board()
            score = self._score()
            result = sgf_records.result_text(float(np.sign(score)), score, False)
        return sgf_records.SgfRecord(board_size=n, komi=self.go.komi, nodes=nodes,
                                     handicap=handicap, result=result)

    # ------------------------------------------------------------------ analysis

    def cmd_lz_analyze(self, args):
        request = self._parse_analyze(args)
        return self._analysis_stream(request, lambda heads: self.analysis_line(
            request.min_moves, request.max_moves))

    def cmd_kata_analyze(self, args):
        """KataGo's analysis (docs/GTP_Extensions.md of KataGo): float win rates and priors,
        `utility` (the search's Q), and with a net that has the auxiliary heads `scoreMean`
        and `scoreLead` per move and, with `ownership true`, the net's ownership of the root
        position after the moves. Without those heads the moves come without scores, and
        `ownership true` is refused."""
        request = self._parse_analyze(args, kata=True)
        if request.ownership and not self.has_ownership:
            raise GtpError("this net has no ownership head (it was trained without "
                           "--aux-heads true)")
        return self._analysis_stream(request, lambda heads: self.kata_analysis_line(
            request.min_moves, request.max_moves, request.ownership, heads))

    @property
    def has_ownership(self) -> bool:
        """Whether the evaluator is a net with ownership and score heads."""
        return analysis.has_heads(self.evaluator)

    def _parse_analyze(self, args, kata: bool = False) -> "_AnalyzeRequest":
        """[colour] [interval] [interval N] [minmoves N] [maxmoves N] (kata-analyze also
        [ownership true|false]); interval in centiseconds (0: no periodic output)."""
        words = list(args)
        request = _AnalyzeRequest(colour=self.record.next_colour())
        if words and words[0].lower() in COLOURS:
            request.colour = COLOURS[words.pop(0).lower()]
        if words and NATURAL.fullmatch(words[0]):
            request.interval = int(words.pop(0))
        while words:
            key = words.pop(0)
            if kata and key == "ownership" and words and words[0] in ("true", "false"):
                request.ownership = words.pop(0) == "true"
                continue
            if key not in ("interval", "minmoves", "maxmoves") or not words \
                    or not NATURAL.fullmatch(words[0]):
                raise GtpError("cannot parse analyze tags")
            value = int(words.pop(0))
            if key == "interval":
                request.interval = value
            elif key == "minmoves":
                request.min_moves = value
            else:
                request.max_moves = value
        return request

    def _analysis_stream(self, request: "_AnalyzeRequest", report) -> Stream:
        return Stream(lambda write, interrupted: self._analyze(
            request.colour, request.interval, report, write, interrupted))

    def _analyze(self, colour, interval_cs, report, write, interrupted):
        """Grow the search of `colour`'s position until the next input, writing `report()`
        every interval: the one loop of lz-analyze and kata-analyze. The search stops when the
        root's visits reach the analysis cap (`tree_simulations`, gtp/README.md); a report
        is written only when the search grew since the last one, so once the cap is reached
        nothing more is sent (the lines would repeat) until the next command."""
        self.prepare(colour)
        net_komi = self.config.komi if self.options.net_komi is None else self.options.net_komi
        heads = (analysis.Heads(self.driver, 0, analysis.komi_shift(
            colour, net_komi, self.go.komi, self.config.komi_input))
                 if self.has_ownership else None)
        interval = interval_cs / 100
        next_report = time.monotonic() + interval
        reported = None           # root visits at the last line written
        while not interrupted():
            if not analysis.grow(self.driver, np.ones(1, bool), self.tree_simulations):
                time.sleep(0.01)   # the cap is reached (or the game is over): wait for input
            if interval > 0 and time.monotonic() >= next_report:
                visits = analysis.root_visits(self.driver)
                line = report(heads) if visits != reported else ""
                if line:
                    write(line)
                    reported = visits
                next_report = time.monotonic() + interval

    def analysis_line(self, min_moves: int = 0, max_moves: int | None = None) -> str:
        """One Leela Zero `info` line for the searched root: a block per move, most visited
        first, `info move V visits N winrate W prior P lcb L order K pv V V ...`, win rates
        and priors as integers in 0..10000 from the mover's view."""
        return " ".join(
            f"info move {self._vertex(c.action)} visits {c.visits} "
            f"winrate {_permyriad(c.winrate)} prior {_permyriad(c.prior)} "
            f"lcb {_permyriad(c.lcb)} order {c.order} pv {self._pv(c)}"
            for c in analysis.candidates(self.driver, 0, min_moves, max_moves))

    def kata_analysis_line(self, min_moves: int = 0, max_moves: int | None = None,
                           ownership: bool = False, heads: analysis.Heads | None = None) -> str:
        """One KataGo `kata-analyze` line: per move `info move V visits N utility U winrate W
        [scoreMean S scoreLead S] prior P lcb L order K pv V V ...` (floats, the mover's
        view: utility is the search's Q in [-1, 1], win rate, prior and LCB in [0, 1]), then
        with `ownership` the word `ownership` and N*N floats in [-1, 1], the net's expected
        final owner of every point of the root position from the mover's view (+1: the
        mover's), row by row from the top left (A19 on 19x19) to the bottom right.
        `heads` (a net with ownership and score heads) caches the net's estimates: a move's
        score is the net's score of the position after it (the tree averages no scores), an
        unvisited move's the root's, in points for the mover, komi included."""
        found = analysis.candidates(self.driver, 0, min_moves, max_moves)
        if not found:
            return ""
        blocks = []
        if heads is not None:
            heads.prefetch([c.action for c in found if c.visits])
        for c in found:
            score = ""
            if heads is not None:
                lead = heads.move_score(c.action if c.visits else None)
                score = f"scoreMean {lead:.6g} scoreLead {lead:.6g} "
            blocks.append(f"info move {self._vertex(c.action)} visits {c.visits} "
                          f"utility {c.value:.6g} winrate {c.winrate:.6g} {score}"
                          f"prior {c.prior:.6g} lcb {max(0.0, c.lcb):.6g} order {c.order} "
                          f"pv {self._pv(c)}")
        line = " ".join(blocks)
        if ownership:
            values = heads.root_ownership().ravel()
            line += " ownership " + " ".join(f"{v:.6g}" for v in values)
        return line

    def _pv(self, candidate: analysis.Candidate) -> str:
        return " ".join(self._vertex(a) for a in candidate.pv)

    def cmd_gogui_analyze_commands(self, args):
        return "\n".join([
            "dboard/Policy heatmap/bgz-policy_heatmap",
            "dboard/Visit heatmap/bgz-visit_heatmap",
            "var/Principal variation/bgz-principal_variation",
            "string/Value/bgz-value",
            "string/Net/bgz-net",
        ])

    def _analysis_colour(self, args) -> int:
        if len(args) > 1:
            raise GtpError("syntax error")
        return _parse_colour(args[0]) if args else self.record.next_colour()

    def _searched(self, args):
        colour = self._analysis_colour(args)
        self.prepare(colour)
        return colour, self._search(colour, self.options.simulations)

    def cmd_policy_heatmap(self, args):
        """The net's move probabilities (legal moves), scaled so the largest is 1."""
        self.prepare(self._analysis_colour(args))
        policy, legal, _, _ = self.driver.evaluate_slots(self.replayer.slots)
        return self._dboard(np.where(legal[0], policy[0], 0.0))

    def cmd_visit_heatmap(self, args):
        """Search visits per point, scaled so the most visited is 1."""
        _, stats = self._searched(args)
        return self._dboard(stats.visits[0].astype(np.float64))

    def cmd_principal_variation(self, args):
        self._searched(args)
        return " ".join(self._vertex(a) for a in analysis.principal_variation(self.driver))

    def cmd_value(self, args):
        colour, stats = self._searched(args)
        _, _, values, _ = self.driver.evaluate_slots(self.replayer.slots)
        search_winrate = (1 + float(self.driver.root_values()[0])) / 2
        return (f"{COLOUR_NAMES[colour]} to move: win rate {search_winrate:.1%} after "
                f"{int(stats.visits[0].sum())} visits, net alone {(1 + float(values[0])) / 2:.1%}")

    def _dboard(self, values: np.ndarray) -> str:
        n = self.board_size
        points = values[:n * n].reshape(n, n)
        top = points.max()
        scaled = points / top if top > 0 else points
        return "\n" + "\n".join(" ".join(f"{v:.3f}" for v in row) for row in scaled)

    # ------------------------------------------------------------------ argument parsing

    def _vertex(self, move: int) -> str:
        return coords.to_gtp(move, self.board_size)

    def _parse_move(self, text: str) -> int | None:
        """Flat move of a GTP vertex or pass; None for a vertex off this board."""
        if text.lower() == "pass":
            return self.pass_move
        if not VERTEX.fullmatch(text):
            raise GtpError("syntax error")
        try:
            return coords.from_gtp(text, self.board_size)
        except ValueError:
            return None


def _parse_colour(text: str) -> int:
    try:
        return COLOURS[text.lower()]
    except KeyError:
        raise GtpError("syntax error") from None


def _parse_int(args, count: int) -> list[int]:
    if len(args) != count or not all(INTEGER.fullmatch(a) for a in args):
        raise GtpError("syntax error")
    return [int(a) for a in args]


def _parse_float(args, count: int) -> list[float]:
    try:
        values = [float(a) for a in args]
    except ValueError:
        raise GtpError("syntax error") from None
    if len(values) != count or not all(math.isfinite(v) for v in values):
        raise GtpError("syntax error")
    return values


def _parse_seconds(args) -> list[float]:
    """Times in seconds: integers by the spec, decimals accepted; never negative."""
    values = _parse_float(args, len(args))
    if min(values, default=0) < 0:
        raise GtpError("syntax error")
    return values


def _split_filename(args) -> tuple[str | None, list[str]]:
    """(file name, remaining arguments); a name with spaces may come in double quotes, as
    GoGui sends it."""
    if not args:
        return None, []
    text = " ".join(args)
    if text.startswith('"'):
        try:
            words = shlex.split(text)
        except ValueError:
            raise GtpError("syntax error") from None
        return words[0], words[1:]
    return args[0], list(args[1:])


def _permyriad(fraction: float) -> int:
    return int(round(10000 * min(1.0, max(0.0, fraction))))
