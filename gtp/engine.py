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
- genmove's move: games/move_choice.py, as the GUI's net chooses it: the search over
  "sensible" moves as in self-play (no filling of one's own eyes; pass only when nothing else
  is left), so a game is played out until area scoring counts what a player would; right
  after the opponent's pass, a pass when the board as it stands is settled and wins for us
  by area, never with `kgs-genmove_cleanup`.
- resign: only with a threshold (`resign_threshold`, a value in [-1, 1] from the mover's view,
  i.e. win rate (1 + v) / 2); off by default.
- final_score is the area score of the board as it stands: every stone counts as alive, so
  final_status_list lists all stones alive and none dead or in seki.
- time_settings / time_left cap the search time per move when a clock is running
  (`games.move_choice.Clock`); the simulation count (--sims) caps it always.

The analysis commands (lz-analyze, kata-analyze, GoGui's) are gtp/analysis_commands.py's.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from games import analysis, sgf_records
from games.game_record import GameRecord, Move, Replayer, Setup
from games.handicap import fixed_handicap_vertices
from games.move_choice import Clock, MoveChooser
from games.search import SearchingGames
from games.territory import stone_groups
from gtp.analysis_commands import AnalysisCommands
from gtp.arguments import (COLOUR_NAMES, VERTEX, parse_colour, parse_float, parse_int,
                           parse_seconds, split_filename)
from gtp.files import FileRefused, read_regular_file, write_regular_file
from gtp.protocol import GtpError
from gtp.version import program_version
from kernels import coords
from training.config import Config


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
        self.chooser = MoveChooser(self.driver, self.replayer.slots, options.simulations,
                                   options.use_search,
                                   excluded=self.replayer.repeats_earlier_segment)
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
            **AnalysisCommands(self).handlers(),
        }

    @property
    def has_ownership(self) -> bool:
        """Whether the evaluator is a net with ownership and score heads."""
        return analysis.has_heads(self.evaluator)

    # ------------------------------------------------------------------ the position

    def _changed(self) -> None:
        self.resigned = 0

    def prepare(self, colour: int) -> None:
        """Make slot 0 the record's position with `colour` to move in a game not over."""
        stale = self._position_version != self.record.version
        if stale or (self._inserted and self.replayer.to_play() != colour):
            self.replayer.replay(self.record.events)
            self.driver.reset_search()
            self._position_version = self.record.version
            self._inserted = False
        if self.replayer.make_to_move(colour):
            self.driver.reset_search()
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
        size = parse_int(args, 1)[0]
        if size != self.board_size:
            raise GtpError("unacceptable size")
        return self.cmd_clear_board([])

    def cmd_clear_board(self, args):
        self.record.clear()
        self._changed()
        return ""

    def cmd_komi(self, args):
        komi = parse_float(args, 1)[0]
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
        stones = parse_int(args, 1)[0]
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
        stones = parse_int(args, 1)[0]
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
        return " ".join(self.vertex(p) for p in points)

    def _place_handicap(self, points: list[int]) -> None:
        stones = np.zeros((self.board_size, self.board_size), np.int8)
        stones.flat[points] = 1
        self.record.add(Setup(stones, previous=np.zeros_like(stones), to_play=-1,
                              handicap=len(points)))
        self._changed()

    def cmd_time_settings(self, args):
        if len(args) != 3:
            raise GtpError("syntax error")
        main_time, byo_yomi_time = parse_seconds(args[:2])
        stones = parse_int(args[2:], 1)[0]
        if stones < 0:
            raise GtpError("syntax error")
        self.chooser.clock = Clock(main_time, byo_yomi_time, stones, active=True)
        return ""

    def cmd_time_left(self, args):
        if len(args) != 3:
            raise GtpError("syntax error")
        colour = parse_colour(args[0])
        seconds = parse_seconds(args[1:2])[0]
        stones = parse_int(args[2:], 1)[0]
        if stones < 0:
            raise GtpError("syntax error")
        self.chooser.clock.left[colour] = (seconds, stones)
        return ""

    # ------------------------------------------------------------------ moves

    def cmd_play(self, args):
        if len(args) != 2:
            raise GtpError("syntax error")
        colour = parse_colour(args[0])
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
        colour = parse_colour(args[0])
        started = time.monotonic()
        self.prepare(colour)
        opponent_passed = (self.record.last_moves_are_passes(1, self.pass_move)
                           and self.record.next_colour() == colour)
        choice = self.chooser.choose(colour, opponent_passed, cleanup)
        threshold = self.options.resign_threshold
        if choice.value is not None and threshold is not None and choice.value < threshold:
            self.log(f"genmove {COLOUR_NAMES[colour]}: resign ({choice.comment})")
            if play:
                self.resigned = colour
            return "resign"
        self.log(f"genmove {COLOUR_NAMES[colour]}: {self.vertex(choice.move)} "
                 f"({choice.comment}, {time.monotonic() - started:.2f} s)")
        if play:
            self._commit(colour, choice.move, comment=choice.comment)
        return self.vertex(choice.move)

    # ------------------------------------------------------------------ scoring and display

    def cmd_final_score(self, args):
        self.sync_board()
        score = self.chooser.score()
        if score == 0:
            return "0"
        return f"{'B' if score > 0 else 'W'}+{abs(score):.1f}"

    def cmd_final_status_list(self, args):
        if len(args) != 1 or args[0] not in ("alive", "dead", "seki"):
            raise GtpError("syntax error")
        if args[0] != "alive":
            return ""
        self.sync_board()
        return "\n".join(" ".join(self.vertex(p) for p in group)
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
        path, rest = split_filename(args)
        if path is None or len(rest) > 1:
            raise GtpError("syntax error")
        move_number = parse_int(rest, 1)[0] if rest else None
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
                                     f"({self.vertex(node.move)}) is illegal")
                event = Move(node.colour, node.move, node.comment)
                replayer.apply(event)
                events.append(event)
                moves_played += 1
        return events

    def cmd_printsgf(self, args):
        path, rest = split_filename(args)
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
            score = self.chooser.score()
            result = sgf_records.result_text(float(np.sign(score)), score, False)
        return sgf_records.SgfRecord(board_size=n, komi=self.go.komi, nodes=nodes,
                                     handicap=handicap, result=result)

    # ------------------------------------------------------------------ argument parsing

    def vertex(self, move: int) -> str:
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

