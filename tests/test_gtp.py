"""The GTP engine (gtp_engine.py, gtp/) and SGF records (sgf_records.py).

A tiny net is trained once for the module (`bp_tree`, preset tiny: 5x5, one block of 8
filters, one iteration). Transcripts run in this process through `GtpServer` (fast, same code
path as the subprocess), and through `gtp_engine.py` as a subprocess where the process
matters: stdout carrying nothing but the protocol, a working directory elsewhere, lz-analyze
ended by the next command, exit codes, a game against GNU Go refereed by our rules and by a
fresh GNU Go process. Expected answers are written out by hand; generated moves, which depend
on the net, are checked for legality and for being the same in two runs (fixed seed).
"""
from __future__ import annotations

import contextlib
import io
import math
import os
import queue
import re
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from float_tolerance import (accumulation_depths, assert_head_close, model_shape,  # noqa: E402
                             trunk_depth)
from games import analysis, sgf_records  # noqa: E402
from gtp.protocol import GtpServer, format_response, parse, preprocess  # noqa: E402
from kernels import GoBatch, coords  # noqa: E402
from reference_rules import ReferenceGo, gtp_to_move, move_to_gtp  # noqa: E402

PROJECT_ROOT = Path(__file__).resolve().parent.parent
# The program's version, read here independently of gtp/version.py.
PROGRAM_VERSION = re.search(r'^version = "([^"]+)"', (PROJECT_ROOT / "pyproject.toml").read_text(),
                            re.M).group(1)
GNUGO = "/usr/games/gnugo"
N = 5                      # the tiny preset's board
PASS = N * N
REQUIRED = ["protocol_version", "name", "version", "known_command", "list_commands", "quit",
            "boardsize", "clear_board", "komi", "play", "genmove"]
EXTRA = ["undo", "showboard", "final_score", "final_status_list", "time_settings", "time_left",
         "set_free_handicap", "place_free_handicap", "loadsgf", "printsgf", "reg_genmove", "lz-analyze",
         "gogui-analyze_commands", "bgz-net", "kata-analyze"]
INFO_BLOCK = re.compile(r"info move (?P<move>\S+) visits (?P<visits>\d+) winrate (?P<winrate>\d+) "
                        r"prior (?P<prior>\d+) lcb (?P<lcb>\d+) order (?P<order>\d+) "
                        r"pv (?P<pv>(?:\S+)(?: (?!info )\S+)*)")


# ---------------------------------------------------------------- fixtures and helpers

@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    import bp_tree
    run = tmp_path_factory.mktemp("gtp") / "tiny run"   # a space in the path, as users have
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert bp_tree.main(["--run", str(run), "--preset", "tiny", "--iterations", "1"]) == 0
    return run


@pytest.fixture(scope="module")
def aux_run(tmp_path_factory) -> Path:
    """A tiny run whose net has the ownership and score heads."""
    import bp_tree
    run = tmp_path_factory.mktemp("gtp") / "aux"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert bp_tree.main(["--run", str(run), "--preset", "tiny", "--aux_heads", "true",
                             "--iterations", "1"]) == 0
    return run


@pytest.fixture(scope="module")
def loaded(tiny_run):
    """(config, net) of the tiny run, loaded the way gtp_engine.py loads it."""
    import gtp_engine
    with contextlib.redirect_stderr(io.StringIO()):
        engine = gtp_engine.load_engine(gtp_engine.parse_args(["--run", str(tiny_run)]))
    return engine.config, engine.evaluator


class Transcript:
    """An engine in this process behind a GtpServer writing to a string."""

    def __init__(self, loaded, **options):
        from gtp import EngineOptions, GoEngine
        config, net = loaded
        settings = dict(simulations=8, analysis_simulations=64)
        settings.update(options)
        self.engine = GoEngine(config, net, EngineOptions(**settings))
        self.output = io.StringIO()
        self.server = GtpServer(self.engine.handlers(), self.output, log=lambda message: None)

    def run(self, *lines: str) -> str:
        """Raw output of executing the lines (each a whole input line)."""
        start = self.output.tell()
        self.server.run_lines(lines)
        return self.output.getvalue()[start:]

    def responses(self, *lines: str) -> list[tuple[str, str]]:
        """(head, body) per response: head like "=", "?7"; body the text after it."""
        return parse_responses(self.run(*lines))

    def ok(self, line: str) -> str:
        [(head, body)] = self.responses(line)
        assert head.startswith("="), f"{line!r} failed: {body}"
        return body

    def error(self, line: str) -> str:
        [(head, body)] = self.responses(line)
        assert head.startswith("?"), f"{line!r} should fail, answered {body!r}"
        return body

    def board(self, size: int = N) -> np.ndarray:
        """The board from showboard: +1 black (X), -1 white (O)."""
        rows = self.ok("showboard").split("\n")[2:2 + size]
        return np.array([[{"X": 1, "O": -1, ".": 0}[cell] for cell in row.split()[1:1 + size]]
                         for row in rows], dtype=np.int8)


def parse_responses(text: str) -> list[tuple[str, str]]:
    """Split protocol output into responses; fails on anything that is not a response."""
    assert text == "" or text.endswith("\n\n"), f"unterminated output {text[-80:]!r}"
    responses = []
    for chunk in text[:-2].split("\n\n") if text else []:
        match = re.fullmatch(r"([=?]\d*)(?: (.*))?", chunk, re.DOTALL)
        assert match, f"not a GTP response: {chunk!r}"
        responses.append((match.group(1), match.group(2) or ""))
    return responses


def vertex(move: int) -> str:
    return coords.to_gtp(move, N)


class GtpProcess:
    """A GTP subprocess; a reader thread lets every read have a timeout."""

    def __init__(self, argv, cwd=None, stderr_path=None):
        self.stderr = open(stderr_path, "wb") if stderr_path else subprocess.DEVNULL
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self.stderr, cwd=cwd, bufsize=0)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for raw in self.process.stdout:
            self.lines.put(raw.decode())
        self.lines.put(None)

    def send(self, text: str) -> None:
        self.process.stdin.write(text.encode())
        self.process.stdin.flush()

    def read_line(self, timeout: float = 60) -> str | None:
        return self.lines.get(timeout=timeout)

    def response(self, timeout: float = 60) -> tuple[str, str]:
        first = self.read_line(timeout)
        assert first is not None, "the engine closed its output"
        match = re.fullmatch(r"([=?]\d*)(?: (.*))?\n", first)
        assert match, f"not the start of a GTP response: {first!r}"
        body = [match.group(2) or ""]
        while (line := self.read_line(timeout)) != "\n":
            assert line is not None, "the engine closed its output mid-response"
            body.append(line.rstrip("\n"))
        return match.group(1), "\n".join(body)

    def command(self, text: str, timeout: float = 60) -> str:
        self.send(text + "\n")
        head, body = self.response(timeout)
        assert head.startswith("="), f"{text!r} failed: {body}"
        return body.strip()

    def close(self) -> int:
        if self.process.poll() is None:
            try:
                self.send("quit\n")
            except BrokenPipeError:
                pass
        code = self.process.wait(timeout=30)
        if self.stderr is not subprocess.DEVNULL:
            self.stderr.close()
        return code


def engine_process(run: Path, *extra: str, cwd=None, stderr_path=None) -> GtpProcess:
    return GtpProcess([sys.executable, str(PROJECT_ROOT / "gtp_engine.py"), "--run", str(run),
                       *extra], cwd=cwd, stderr_path=stderr_path)


# ---------------------------------------------------------------- the protocol layer

def test_preprocessing_removes_control_characters_and_comments_and_skips_blank_lines():
    assert preprocess("1 na\x01me\r\n") == "1 name"
    assert preprocess("play\tb\tC3 # a comment") == "play b C3 "
    assert preprocess("   # only a comment\n") is None
    assert preprocess(" \t \r\n") is None
    assert preprocess("\x7f\x00") is None
    command = parse("12 play b C3")
    assert (command.id, command.name, command.args) == ("12", "play", ["b", "C3"])
    assert parse("007 name").id == "7" and parse("000 name").id == "0"
    assert parse("play b C3").id is None
    assert parse("-3 name").name == "-3"           # not an id: a (unknown) command name
    assert parse("7").name == ""
    assert format_response(5, "") == "=5\n\n"
    assert format_response(None, "unknown command", success=False) == "? unknown command\n\n"
    assert format_response(1, "a\n\nb\n \nc") == "=1 a\nb\nc\n\n"  # no empty line inside


def serve_through_a_pipe(chunks, handlers=None):
    """(responses, seconds) of GtpServer.serve reading `chunks` (bytes) from an OS pipe, as
    gtp_engine.py reads its stdin."""
    output = io.StringIO()
    server = GtpServer(handlers or {"name": lambda args: "engine"}, output,
                       log=lambda message: None)
    read_end, write_end = os.pipe()

    def write():
        with os.fdopen(write_end, "wb") as pipe:
            for chunk in chunks:
                pipe.write(chunk)

    writer = threading.Thread(target=write, daemon=True)
    started = time.monotonic()
    writer.start()
    with os.fdopen(read_end, "rb", buffering=0) as pipe:
        server.serve(pipe)
    elapsed = time.monotonic() - started
    writer.join(10)
    return parse_responses(output.getvalue()), elapsed


def test_an_overlong_line_is_answered_and_read_in_linear_time():
    from gtp.protocol import MAX_LINE_BYTES
    too_long = ("?2", f"line too long (more than {MAX_LINE_BYTES} bytes)")
    megabyte = b"x" * (1 << 20)
    # 32 MB in 1 MB writes took 7.9 s when every read re-split the whole pending line.
    responses, elapsed = serve_through_a_pipe(
        [b"1 name\n", b"2 play b "] + [megabyte] * 32 + [b"\n3 name\n"])
    assert responses == [("=1", "engine"), too_long, ("=3", "engine")]
    assert elapsed < 3.0, f"32 MB line took {elapsed:.1f} s"
    # The limit itself: a line of exactly MAX_LINE_BYTES runs, one byte more does not; a line
    # cut off by the end of input is still answered.
    name = b"2 name "
    exact = name + b"a" * (MAX_LINE_BYTES - len(name))
    responses, _ = serve_through_a_pipe([exact + b"\n", exact + b"a\n", b"4 name"])
    assert responses == [("=2", "engine"), too_long, ("=4", "engine")]
    # run_lines (text) keeps the same limit; no id at the front, no id in the answer.
    gtp = GtpServer({"name": lambda args: "engine"}, io.StringIO(), log=lambda message: None)
    gtp.run_lines(["x" * (MAX_LINE_BYTES + 1), "name"])
    assert parse_responses(gtp.output.getvalue()) == [("?", too_long[1]), ("=", "engine")]


def test_ids_of_any_length_are_echoed_and_never_stop_the_engine():
    digits = "9" * 10_000              # beyond Python's int-string limit (4300 digits)
    gtp = GtpServer({"name": lambda args: "engine"}, io.StringIO(), log=lambda message: None)
    gtp.run_lines([f"{digits} name", "0009 name", f"{'1' * 65_537} name", "name"])
    from gtp.protocol import MAX_LINE_BYTES
    assert parse_responses(gtp.output.getvalue()) == [
        (f"={digits}", "engine"), ("=9", "engine"),
        ("?", f"line too long (more than {MAX_LINE_BYTES} bytes)"), ("=", "engine")]


def test_comment_and_blank_lines_of_any_length_get_no_answer():
    """GTP 3.1: a line left blank once its comment is removed gets no response, however long
    (100,000-character comments were answered `line too long`); a comment after a command is
    dropped and the command runs; only a command text over the limit is refused."""
    from gtp.protocol import MAX_LINE_BYTES
    too_long = ("?6", f"line too long (more than {MAX_LINE_BYTES} bytes)")
    comment = b"# " + b"c" * 100_000 + b"\n"
    responses, _ = serve_through_a_pipe([
        b"1 name\n", comment, b"2 name # " + b"c" * 100_000 + b"\n",
        b" \t" * 40_000 + b"# a blank line, then a comment\n", b"\t" * 70_000 + b"\n",
        b"3 name #", b"#" * 70_000, b"\n#\x00" + "\u2603".encode() * 40_000 + b"\n",
        b"4 name\n", b"#" + b"c" * MAX_LINE_BYTES + b"\n5 name\n",
        b"6 name " + b"x" * MAX_LINE_BYTES + b" # and a comment\n", b"7 name\n"])
    assert responses == [("=1", "engine"), ("=2", "engine"), ("=3", "engine"),
                         ("=4", "engine"), ("=5", "engine"), too_long, ("=7", "engine")]
    # A 32 MB comment is read and dropped in linear time, as an over-long command is.
    megabyte = b"c" * (1 << 20)
    responses, elapsed = serve_through_a_pipe([b"1 name\n#"] + [megabyte] * 32 + [b"\n2 name\n"])
    assert responses == [("=1", "engine"), ("=2", "engine")]
    assert elapsed < 3.0, f"a 32 MB comment took {elapsed:.1f} s"
    # run_lines (text) follows the same rules.
    gtp = GtpServer({"name": lambda args: "engine"}, io.StringIO(), log=lambda message: None)
    gtp.run_lines(["# " + "c" * 100_000, "1 name #" + "c" * 100_000, " " * 70_000, "2 name"])
    assert parse_responses(gtp.output.getvalue()) == [("=1", "engine"), ("=2", "engine")]


def test_only_space_and_tab_are_gtp_whitespace():
    gtp = GtpServer({"name": lambda args: "engine", "echo": lambda args: "|".join(args)},
                    io.StringIO(), log=lambda message: None)
    # U+2028 line separator, U+3000 ideographic space, U+2003 em space, U+00A0 no-break space
    gtp.run_lines(["\u2028", "\u3000\n", "\u2003", "5 \u00a0", " \t \n", "6 echo a\u3000b  c\td",
                   "7\u3000name", "8 name\u2003"])
    assert parse_responses(gtp.output.getvalue()) == [
        ("?", "unknown command"), ("?", "unknown command"), ("?", "unknown command"),
        ("?5", "unknown command"), ("=6", "a\u3000b|c|d"), ("?", "unknown command"),
        ("?8", "unknown command")]


def test_required_commands_ids_and_canonical_errors(loaded):
    gtp = Transcript(loaded)
    assert gtp.responses("1 protocol_version", "2 name", "version") == [
        ("=1", "2"), ("=2", "Batched Go Zero"), ("=", PROGRAM_VERSION)]
    listed = gtp.ok("list_commands").split("\n")
    assert set(REQUIRED + EXTRA) <= set(listed)
    for name in listed:
        assert gtp.ok(f"known_command {name}") == "true"
    assert gtp.responses("8 known_command frobnicate", "9 known_command") == [
        ("=8", "false"), ("=9", "false")]
    assert gtp.responses("10 boardsize 9", "11 boardsize 5", "12 boardsize five") == [
        ("?10", "unacceptable size"), ("=11", ""), ("?12", "syntax error")]
    assert gtp.responses("13 komi 6.5", "14 komi lots", "15 clear_board") == [
        ("=13", ""), ("?14", "syntax error"), ("=15", "")]
    assert gtp.responses("16 undo", "17 play b C3", "18 play w C3", "19 undo", "20 undo") == [
        ("?16", "cannot undo"), ("=17", ""), ("?18", "illegal move"), ("=19", ""),
        ("?20", "cannot undo")]
    # quit answers and stops: the line after it is never executed.
    assert gtp.responses("21 quit", "22 name") == [("=21", "")]


def test_malformed_input_unknown_commands_and_comments(loaded):
    gtp = Transcript(loaded)
    output = gtp.run("# a comment line\n", "\n", "   \t  \n", "1 na\x02me\r\n",
                     "2\tname\t# trailing comment\n", "3 frobnicate\n", "frobnicate\n",
                     "4\n", "5 PLAY b C3\n", "6 play b\n", "7 play purple C3\n",
                     "8 play b C33x\n", "9 play b Z9\n", "10 play b I3\n", "11 genmove\n",
                     "12 final_status_list zombie\n", "13 time_settings 1 2\n")
    assert parse_responses(output) == [
        ("=1", "Batched Go Zero"), ("=2", "Batched Go Zero"), ("?3", "unknown command"),
        ("?", "unknown command"), ("?4", "syntax error"), ("?5", "unknown command"),
        ("?6", "syntax error"), ("?7", "syntax error"), ("?8", "syntax error"),
        ("?9", "illegal move"),      # a vertex, but off this 5x5 board
        ("?10", "syntax error"),     # GTP has no column I
        ("?11", "syntax error"), ("?12", "syntax error"), ("?13", "syntax error")]
    assert not gtp.board().any(), "no malformed command may change the game"


KO_SETUP = ["play b B4", "play w C4", "play b A3", "play w B3", "play b B2", "play w D3",
            "play b E1", "play w C2", "play b C3"]     # black C3 takes the ko stone at B3


def test_rules_capture_suicide_and_ko(loaded):
    gtp = Transcript(loaded)
    # Black walls off A1 and white's stone there is captured; then the ko shape
    #   4 . X O . .
    #   3 X O . O .      black C3 takes B3; white may not retake at once
    #   2 . X O . .
    for line in ["play b B1", "play w A1", "play b A2"]:
        gtp.ok(line)
    assert gtp.board()[4, 0] == 0, "white A1 is captured by A2"
    gtp.ok("play w E5")
    for line in KO_SETUP[:-1]:
        gtp.ok(line)
    assert gtp.error("play w A1") == "illegal move"      # suicide
    gtp.ok(KO_SETUP[-1])
    board = gtp.board()
    assert board[2, 1] == 0 and board[2, 2] == 1, "black C3 captures B3"
    assert gtp.error("play w B3") == "illegal move"      # ko
    assert gtp.error("play w C3") == "illegal move"      # occupied
    gtp.ok("play w E2")
    gtp.ok("play b D5")
    gtp.ok("play w B3")                                   # the ko may be retaken now
    assert "captured by black (X): 2, by white (O): 1" in gtp.ok("showboard")


@pytest.mark.parametrize("superko", [False, True])
def test_ko_retaken_after_two_passes_is_legal_except_under_superko(loaded, superko):
    config, net = loaded
    gtp = Transcript((config.overridden(superko=superko), net))
    for line in KO_SETUP:
        gtp.ok(line)
    assert gtp.board()[2, 1] == 0 and gtp.board()[2, 2] == 1
    gtp.ok("play w pass")
    gtp.ok("play b pass")      # the game is over for the rules: play goes on in a new segment
    # White retaking recreates the position before black's C3, a position of the game
    # before the passes: legal under simple ko (the passes lifted the ban), not under superko.
    if superko:
        assert gtp.error("play w B3") == "illegal move"
        assert gtp.ok("genmove w") != "B3"
    else:
        gtp.ok("play w B3")
        assert gtp.board()[2, 1] == -1 and gtp.board()[2, 2] == 0


def test_two_passes_do_not_end_play_and_either_colour_may_move_twice(loaded):
    gtp = Transcript(loaded)
    gtp.ok("play b C3")
    gtp.ok("play w pass")
    gtp.ok("play b pass")
    gtp.ok("play w D4")                  # after two passes, as GUIs and referees do
    gtp.ok("play w D2")                  # white twice
    saved = gtp.board()
    assert saved.ravel()[coords.from_gtp("D4", N)] == saved.ravel()[coords.from_gtp("D2", N)] == -1
    for colour, value in (("w", -1), ("b", 1)):   # white a third time, then black
        move = gtp.ok(f"genmove {colour}")
        assert move == "pass" or gtp.board().ravel()[coords.from_gtp(move, N)] == value
    gtp.ok("play b pass")
    gtp.ok("play w pass")
    move = gtp.ok("genmove b")           # asked after the game ended again: it plays on
    assert move != "resign"
    for _ in range(5):
        gtp.ok("undo")
    np.testing.assert_array_equal(gtp.board(), saved)
    assert "black to move" in gtp.ok("showboard")


def test_genmove_and_reg_genmove_are_deterministic_and_legal(loaded):
    script = ["1 komi 7.5", "2 play b C3", "3 reg_genmove w", "4 genmove w", "5 genmove b",
              "6 genmove w", "7 showboard", "8 final_score"]
    first, second = Transcript(loaded), Transcript(loaded)
    out_first, out_second = first.run(*script), second.run(*script)
    assert out_first == out_second, "same net, same seed: the same transcript"
    responses = dict(parse_responses(out_first))
    assert responses["=3"] == responses["=4"], "reg_genmove names the move genmove plays"
    board = first.board()
    assert board.ravel()[coords.from_gtp("C3", N)] == 1
    for head, colour in (("=4", -1), ("=5", 1), ("=6", -1)):
        if responses[head] != "pass":
            assert board.ravel()[coords.from_gtp(responses[head], N)] in (colour, 0)
    assert re.fullmatch(r"[BW]\+\d+\.\d|0", responses["=8"])


def test_final_score_and_status_lists_count_area_with_komi(loaded):
    gtp = Transcript(loaded)
    for row in range(1, N + 1):           # black wall on column C, white on D
        gtp.ok(f"play b C{row}")
        gtp.ok(f"play w D{row}")
    assert gtp.ok("final_score") == "W+2.5"        # 15 - 10 - 7.5
    gtp.ok("komi 0")
    assert gtp.ok("final_score") == "B+5.0"
    gtp.ok("komi 5")
    assert gtp.ok("final_score") == "0"
    alive = [set(line.split()) for line in gtp.ok("final_status_list alive").split("\n")]
    assert sorted(alive, key=sorted) == [{f"C{row}" for row in range(1, N + 1)},
                                         {f"D{row}" for row in range(1, N + 1)}]
    assert gtp.ok("final_status_list dead") == "" and gtp.ok("final_status_list seki") == ""


def test_set_free_handicap_and_time_controls(loaded):
    gtp = Transcript(loaded)
    assert gtp.error("set_free_handicap C3") == "bad vertex list"
    assert gtp.error("set_free_handicap C3 C3") == "bad vertex list"
    assert gtp.error("set_free_handicap C3 pass") == "bad vertex list"
    assert gtp.error("set_free_handicap C3 Q16") == "bad vertex list"
    gtp.ok("set_free_handicap B2 D4")
    assert gtp.board().sum() == 2
    assert "white to move" in gtp.ok("showboard")
    assert gtp.error("set_free_handicap C3 D2") == "board not empty"
    assert gtp.error("undo") == "cannot undo"       # handicap stones are not moves
    gtp.ok("time_settings 30 5 1")
    gtp.ok("time_left white 20 0")
    gtp.ok("time_left b 4.5 1")
    assert gtp.error("time_left w -3 0") == "syntax error"
    assert gtp.error("time_settings 30 five 1") == "syntax error"
    started = time.monotonic()
    move = gtp.ok("genmove w")
    assert move == "pass" or gtp.board().ravel()[coords.from_gtp(move, N)] == -1
    assert time.monotonic() - started < 5
    gtp.ok("time_settings 0 1 0")                   # byo-yomi time without stones: no limit
    assert gtp.ok("genmove b") != ""


def test_resign_threshold_and_no_search(loaded):
    # A threshold of 1 is above every value: the engine resigns at once; the default never.
    gtp = Transcript(loaded, resign_threshold=1.0)
    assert gtp.ok("genmove b") == "resign"
    assert not gtp.board().any(), "resigning plays nothing"
    policy_only = Transcript(loaded, use_search=False)
    move = policy_only.ok("genmove b")
    assert move != "resign" and policy_only.board().ravel()[coords.from_gtp(move, N)] == 1


# An opening (moves 1-10) after which Black passes at move 11: White leads the count only by
# komi (5 stones each, every empty point touches both colours: W+7.5), with all to play for.
EARLY_PASS = ["play b E5", "play w C4", "play b G4", "play w G6", "play b C6", "play w D7",
              "play b F3", "play w E7", "play b D3", "play w C3", "play b pass"]
# A finished 9x9 game: Black's wall on column C splits A-B into two eyes (A5-B5), White's walls
# on D and G and across row 5 make four 2x4 eyes. Black's area 27, White's 54: W+34.5.
SETTLED = ([f"play b C{row}" for row in range(1, 10)] + ["play b A5", "play b B5"]
           + [f"play w {column}{row}" for column in "DG" for row in range(1, 10)]
           + [f"play w {vertex}" for vertex in ("E5", "F5", "H5", "J5")])


def shipped_model_transcript(**options) -> Transcript:
    """A Transcript of the shipped 9x9 model (ownership and score heads), as gtp_engine.py
    loads it."""
    import gtp_engine
    with contextlib.redirect_stderr(io.StringIO()):
        engine = gtp_engine.load_engine(gtp_engine.parse_args(
            ["--model", str(PROJECT_ROOT / "models" / "9x9.npz")]))
    assert engine.has_ownership
    return Transcript((engine.config, engine.evaluator), **options)


def test_the_engine_passes_back_only_on_a_settled_board():
    """A user who passes at move 11 must not lose to komi on an almost empty board: the engine
    plays on. On a finished position it still passes back when it is ahead."""
    gtp = shipped_model_transcript(simulations=16)
    for line in EARLY_PASS:
        gtp.ok(line)
    before = gtp.board(9)
    assert gtp.ok("final_score") == "W+7.5"
    move = gtp.ok("genmove w")
    assert move != "pass", "passing back would end the game at move 12 on komi"
    point = coords.from_gtp(move, 9)
    assert before.flat[point] == 0 and gtp.board(9).flat[point] == -1
    gtp.ok("clear_board")
    for line in SETTLED + ["play b pass"]:
        gtp.ok(line)
    assert gtp.ok("final_score") == "W+34.5"
    assert gtp.ok("genmove w") == "pass"
    assert "RE[W+34.5]" in gtp.ok("printsgf")


def test_without_an_ownership_head_passing_back_needs_every_point_owned():
    """A net without the heads (here the uniform stand-in): passing back needs every empty
    point to touch one colour only; a stone left inside the other's area, or an open board,
    means the game is not settled, even when the count wins."""
    import dataclasses

    from training.config import PRESETS
    nine = dataclasses.replace(PRESETS["tiny"], board_size=9, komi=7.5)
    gtp = Transcript((nine, uniform_net), simulations=16, analysis_simulations=16)
    for line in SETTLED + ["play b pass"]:
        gtp.ok(line)
    assert gtp.ok("genmove w") == "pass"
    gtp.ok("clear_board")
    for line in SETTLED + ["play b H2", "play w E1", "play b pass"]:
        gtp.ok(line)   # a black stone in White's H1-J4: 28 - (54 - 8) - 7.5, H1-J4 no one's
    assert gtp.ok("final_score") == "W+25.5"
    assert gtp.ok("genmove w") != "pass"
    gtp.ok("clear_board")
    for line in EARLY_PASS:
        gtp.ok(line)
    assert gtp.ok("final_score") == "W+7.5" and gtp.ok("genmove w") != "pass"
    # kgs-genmove_cleanup never takes the early pass, settled or not.
    gtp.ok("clear_board")
    for line in SETTLED + ["play b pass"]:
        gtp.ok(line)
    assert gtp.ok("kgs-genmove_cleanup w") != "pass"


# ---------------------------------------------------------------- SGF

def test_sgf_round_trip_with_passes_captures_setup_and_escaped_comments():
    nodes = [sgf_records.SgfNode(add_black=[0, 6], add_white=[24], to_play=-1,
                                 comment="root: a ] bracket and a \\ backslash")]
    # White B5 (1) between black A5 (0) and B4 (6) is captured by black C5 (2).
    moves = [(-1, 1), (1, 2), (-1, PASS), (1, 12), (-1, PASS), (1, PASS)]
    for index, (colour, move) in enumerate(moves):
        nodes.append(sgf_records.SgfNode(colour=colour, move=move,
                                         comment=f"move {index + 1}: ]\\[" if index % 2 else ""))
    record = sgf_records.SgfRecord(board_size=N, komi=6.5, nodes=nodes, handicap=2,
                                   result="B+R", black="us", white="them")
    data = sgf_records.write_sgf(record)
    text = data.decode()
    assert "W[]" in text and "B[]" in text and "tt" not in text, "FF[4] passes are empty values"
    assert "\\]" in text and "\\\\" in text
    back = sgf_records.read_sgf(data)
    assert back == record
    # The training loop's writer uses the same pass encoding, and readers take both.
    data = sgf_records.game_to_sgf(N, 7.5, [12, PASS, 13, PASS, PASS], "B+1", comment="x]\\y")
    assert b"tt" not in data and b"W[]" in data
    assert sgf_records.sgf_to_moves(data) == (N, 7.5, [(1, 12), (-1, PASS), (1, 13),
                                                       (-1, PASS), (1, PASS)])
    assert sgf_records.read_sgf(data).nodes[0].comment == "x]\\y"
    # Replaying the record through the rules: the capture happens, both passes are passes.
    back = sgf_records.read_sgf(sgf_records.write_sgf(record))
    game = GoBatch(1, N, komi=6.5)
    root = back.nodes[0]
    stones = np.zeros(N * N, np.int8)
    stones[root.add_black], stones[root.add_white] = 1, -1
    game.set_board(stones.reshape(1, N, N), np.array([root.to_play], np.int8))
    for colour, move in back.moves:
        assert int(game.to_play()[0]) == colour
        game.play(np.array([move]))
    assert game.board()[0].ravel()[1] == 0 and game.captures()[0, 0] == 1
    assert game.is_over()[0]
    old_style = b"(;FF[3]GM[1]SZ[5]KM[0.5];B[cc];W[tt];B[])"
    assert sgf_records.sgf_to_moves(old_style) == (N, 0.5, [(1, 12), (-1, PASS), (1, PASS)])


def test_printsgf_and_loadsgf_round_trip_a_game_with_captures_and_passes(loaded, tmp_path):
    gtp = Transcript(loaded)
    gtp.ok("komi 3.5")
    for line in ["play b B1", "play w A1", "play b A2", "play w pass", "play b C3",
                 "play w C2", "genmove b", "play w pass", "play b pass"]:
        gtp.ok(line)
    board = gtp.board()
    text = gtp.ok("printsgf")
    assert text.startswith("(;FF[4]") and "W[]" in text and "tt" not in text
    assert "KM[3.5]" in text and "RE[" in text, "two passes end the game: a result is written"
    path = tmp_path / "game with spaces.sgf"
    assert gtp.ok(f'printsgf "{path}"') == ""
    record = sgf_records.read_sgf(path.read_bytes())
    assert [m for _, m in record.moves][:3] == [coords.from_gtp(v, N) for v in ("B1", "A1", "A2")]
    assert len(record.moves) == 9

    fresh = Transcript(loaded)
    assert fresh.ok(f'loadsgf "{path}"') == ""
    np.testing.assert_array_equal(fresh.board(), board)
    assert fresh.ok("final_score") == gtp.ok("final_score")
    assert fresh.ok(f'loadsgf "{path}" 3') == ""     # the position before move 3
    expected = np.zeros((N, N), np.int8)
    expected.flat[coords.from_gtp("B1", N)], expected.flat[coords.from_gtp("A1", N)] = 1, -1
    np.testing.assert_array_equal(fresh.board(), expected)
    assert "black to move" in fresh.ok("showboard")

    handicap = tmp_path / "handicap.sgf"
    handicap.write_bytes(b"(;FF[4]GM[1]SZ[5]KM[0.5]HA[2]AB[bb][dd];W[cc];B[tt];W[])")
    assert fresh.ok(f"loadsgf {handicap}") == ""
    assert fresh.board().sum() == 1 and "black to move" in fresh.ok("showboard")
    assert "HA[2]" in fresh.ok("printsgf") and "AB[" in fresh.ok("printsgf")

    (tmp_path / "nine.sgf").write_bytes(b"(;FF[4]GM[1]SZ[9];B[cc])")
    (tmp_path / "illegal.sgf").write_bytes(b"(;FF[4]GM[1]SZ[5];B[cc];W[cc])")
    (tmp_path / "garbage.sgf").write_bytes(b"this is not sgf")
    for name in ("nine.sgf", "illegal.sgf", "garbage.sgf", "missing.sgf"):
        assert fresh.error(f"loadsgf {tmp_path / name}") == "cannot load file"
    assert fresh.board().sum() == 1, "a failed loadsgf leaves the game as it was"


def run_with_deadline(function, seconds: float):
    """function()'s result, or a test failure if it has not returned within `seconds` (it is
    left running in a daemon thread)."""
    results = queue.Queue()
    threading.Thread(target=lambda: results.put(function()), daemon=True).start()
    try:
        return results.get(timeout=seconds)
    except queue.Empty:
        pytest.fail(f"still running after {seconds} s")


def test_loadsgf_reads_only_regular_files_of_bounded_size(loaded, tmp_path):
    from gtp.files import MAX_SGF_BYTES
    gtp = Transcript(loaded)
    gtp.ok("play b C3")
    fifo = tmp_path / "fifo.sgf"
    os.mkfifo(fifo)                      # nobody writes it: reading it would block for ever
    big = tmp_path / "big.sgf"
    with open(big, "wb") as handle:      # a valid game padded past the cap with a comment
        handle.write(b"(;FF[4]GM[1]SZ[5]C[" + b"x" * MAX_SGF_BYTES + b"];B[aa])")
    link = tmp_path / "link.sgf"
    (tmp_path / "game.sgf").write_bytes(b"(;FF[4]GM[1]SZ[5];B[aa])")
    link.symlink_to(tmp_path / "game.sgf")
    for path in (fifo, big, tmp_path, "/dev/zero", "/proc/self/status"):
        assert run_with_deadline(lambda: gtp.error(f"loadsgf {path}"), 10) == "cannot load file"
    assert gtp.board().sum() == 1, "a refused loadsgf leaves the game as it was"
    assert gtp.ok(f"loadsgf {link}") == "", "a symlink to a regular file is read"
    assert gtp.board()[0, 0] == 1 and gtp.board().sum() == 1


def test_printsgf_writes_regular_files_atomically_and_nothing_else(loaded, tmp_path):
    gtp = Transcript(loaded)
    gtp.ok("play b C3")
    existing = tmp_path / "old.sgf"
    existing.write_bytes(b"an old file")
    inode = existing.stat().st_ino
    assert gtp.ok(f"printsgf {existing}") == ""
    assert sgf_records.read_sgf(existing.read_bytes()).moves == [(1, coords.from_gtp("C3", N))]
    assert existing.stat().st_ino != inode, "replaced by a rename, not rewritten in place"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.sgf"], "no temporary file left"

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)                      # opening it to write would block for ever
    target = tmp_path / "target.txt"
    target.write_bytes(b"keep me")
    link = tmp_path / "link.sgf"
    link.symlink_to(target)
    for path in (fifo, link, tmp_path, "/dev/null"):
        assert run_with_deadline(lambda: gtp.error(f"printsgf {path}"), 10) == \
            "cannot write file: not a regular file"
    assert gtp.error(f'printsgf "{tmp_path / "no such directory" / "game.sgf"}"') == \
        "cannot write file: no such directory"
    assert target.read_bytes() == b"keep me" and link.is_symlink()


def random_long_game(moves: int, seed: int = 0) -> list[int]:
    """`moves` legal moves on the 5x5 board, alternating from black: random legal moves,
    the game going on as a new segment on the same stones whenever the rules end it (as the
    GTP engine continues a game, games/game_record.py)."""
    go = GoBatch(1, N, max_moves=4 * N * N, seed=seed)
    played = []
    while len(played) < moves:
        if go.is_over()[0]:
            go.set_board(go.board(), go.to_play())
        move = go.random_moves()
        go.play(move)
        played.append(int(move[0]))
    return played


def test_printsgf_of_a_20000_move_game_takes_linear_time(loaded, tmp_path):
    moves = random_long_game(20_000)
    path = tmp_path / "long.sgf"
    path.write_bytes(sgf_records.game_to_sgf(N, 7.5, moves, ""))
    gtp = Transcript(loaded)
    assert gtp.ok(f"loadsgf {path}") == ""
    started = time.monotonic()
    text = gtp.ok("printsgf")
    elapsed = time.monotonic() - started
    assert [move for _, move in sgf_records.read_sgf(text.encode()).moves] == moves
    # It took about 30 s when every node was appended by walking the whole main line.
    assert elapsed < 5, f"printsgf of 20,000 moves took {elapsed:.1f} s"


# ---------------------------------------------------------------- analysis

def analysis_blocks(line: str) -> list[dict]:
    blocks = [match.groupdict() for match in INFO_BLOCK.finditer(line)]
    assert " ".join(f"info move {b['move']} visits {b['visits']} winrate {b['winrate']} "
                    f"prior {b['prior']} lcb {b['lcb']} order {b['order']} pv {b['pv']}"
                    for b in blocks) == line, f"not Leela Zero info blocks: {line!r}"
    return blocks


def check_analysis(line: str, board: np.ndarray) -> list[dict]:
    blocks = analysis_blocks(line)
    assert blocks
    assert [int(b["order"]) for b in blocks] == list(range(len(blocks)))
    visits = [int(b["visits"]) for b in blocks]
    assert visits == sorted(visits, reverse=True) and visits[0] > 0
    for block in blocks:
        assert 0 <= int(block["winrate"]) <= 10000 and 0 <= int(block["prior"]) <= 10000
        assert int(block["lcb"]) <= int(block["winrate"])
        pv = block["pv"].split()
        assert pv[0] == block["move"]
        move = coords.from_gtp(block["move"], N)
        assert move == PASS or board.ravel()[move] == 0
    return blocks


def test_lcb_flag_makes_the_engine_play_the_best_lower_confidence_bound(tiny_run, loaded):
    import gtp_engine
    with contextlib.redirect_stderr(io.StringIO()):
        engine = gtp_engine.load_engine(gtp_engine.parse_args(["--run", str(tiny_run),
                                                              "--lcb-move-choice", "true"]))
    assert engine.config.lcb_move_choice and not loaded[0].lcb_move_choice
    config, net = loaded
    differed = 0
    for opening in ("c3", "b2", "d4", "a1", "e5", "b4"):
        for lcb in (False, True):
            gtp = Transcript((config.overridden(lcb_move_choice=lcb), net), simulations=200)
            gtp.ok(f"play b {opening}")
            move = gtp.ok("reg_genmove w")
            stats = gtp.engine.driver.search.root_statistics()
            visits, q, variance = stats.visits[0], stats.q[0], stats.variance[0]
            # By hand: among moves with 2 visits and a tenth of the most, the highest mean
            # less 1.96 standard errors (sample variance, at least 0.01).
            bounds = {a: q[a] - 1.96 * math.sqrt(
                          max(variance[a] * visits[a] / (visits[a] - 1), 0.01) / visits[a])
                      for a in range(len(visits))
                      if visits[a] >= 2 and visits[a] >= 0.1 * visits.max()}
            most_visited = int(np.argmax(visits))
            best = max(bounds, key=bounds.get) if lcb else most_visited
            assert move.upper() == move_to_gtp(best, config.board_size)
            differed += best != most_visited
            # Analysis lists the moves in the order play prefers them.
            assert analysis.candidates(gtp.engine.driver)[0].action == best
    assert differed, "no position where the bound chose another move: the test shows nothing"


def test_lz_analyze_format_min_and_max_moves_and_errors(loaded):
    # A cap far above what three lines reach: once there, no more lines would come.
    gtp = Transcript(loaded, analysis_simulations=5000)
    gtp.ok("play b C3")
    gtp.output.seek(0), gtp.output.truncate()
    started = time.monotonic()

    def stop():   # the "next command" arrives after three info lines
        return gtp.output.getvalue().count("\ninfo move ") >= 3 or time.monotonic() - started > 30

    gtp.server.execute("7 lz-analyze w 1 minmoves 30", interrupted=stop)
    output = gtp.output.getvalue()
    head, *lines, closing = output.split("\n")[:-1]
    assert head == "=7" and closing == "" and output.endswith("\n\n")
    assert len(lines) >= 3
    board = gtp.board()
    blocks = check_analysis(lines[-1], board)
    stats = gtp.engine.driver.search.root_statistics()
    assert len(blocks) == int(stats.legal[0].sum()) == N * N - 1, \
        "minmoves 30 lists every move the search considers (pass is not, with 24 points free)"
    assert sum(int(b["visits"]) for b in blocks) == int(stats.visits[0].sum())

    gtp.output.seek(0), gtp.output.truncate()
    started = time.monotonic()
    gtp.server.execute("lz-analyze 1 maxmoves 2", interrupted=stop)
    body = gtp.output.getvalue().split("\n")[1:-2]
    assert body and all(len(analysis_blocks(line)) <= 2 for line in body)
    assert gtp.error("lz-analyze 1 avoid b C4 1") == "cannot parse analyze tags"
    assert gtp.error("lz-analyze w x") == "cannot parse analyze tags"
    # Analysis does not change the game.
    assert gtp.board().sum() == 1 and "white to move" in gtp.ok("showboard")


def test_gogui_analyze_commands_all_run(loaded):
    gtp = Transcript(loaded)
    gtp.ok("play b C3")
    commands = gtp.ok("gogui-analyze_commands").split("\n")
    kinds = {line.split("/")[0] for line in commands}
    assert {"dboard"} <= kinds and len(commands) >= 2
    labels = " ".join(line.split("/")[1].lower() for line in commands)
    assert "policy" in labels and "visit" in labels
    boards = {}
    for line in commands:
        kind, _, command = line.split("/")
        body = gtp.ok(command)
        if kind == "dboard":
            values = np.array([[float(v) for v in row.split()]
                               for row in body.strip().split("\n")])
            assert values.shape == (N, N) and values.min() >= 0 and values.max() == 1.0
            assert values[2, 2] == 0, "C3 is occupied: no policy or visits there"
            boards[command] = values
        elif kind == "var":
            # A principal variation: moves legal one after the other from the position (by
            # the independent reference rules), white first, starting with the most visited
            # move of the search the visit heatmap showed (the same tree: both searched it
            # to the same simulation count).
            variation = body.split()
            assert variation, "the search made visits: the variation has a move"
            game = ReferenceGo(N)
            game.play(gtp_to_move("C3", N))
            for vertex_text in variation:
                move = gtp_to_move(vertex_text, N)
                assert game.legal_moves()[move], f"{vertex_text} in {body!r} is illegal"
                game.play(move)
            first = gtp_to_move(variation[0], N)
            assert first < PASS and boards["bgz-visit_heatmap"].flat[first] == 1.0
        elif command == "bgz-value":
            assert re.fullmatch(r"white to move: win rate \d+\.\d% after \d+ visits, "
                                r"net alone \d+\.\d%", body), body
        else:
            assert command == "bgz-net" and body == gtp.ok("bgz-net") == "a net"
    assert set(boards) == {"bgz-policy_heatmap", "bgz-visit_heatmap"}
    assert gtp.board().sum() == 1


# KataGo's kata-analyze fields (its docs/GTP_Extensions.md): floats, the mover's view.
KATA_BLOCK = re.compile(
    r"info move (?P<move>\S+) visits (?P<visits>\d+) utility (?P<utility>\S+) "
    r"winrate (?P<winrate>\S+) (?:scoreMean (?P<mean>\S+) scoreLead (?P<lead>\S+) )?"
    r"prior (?P<prior>\S+) lcb (?P<lcb>\S+) order (?P<order>\d+) "
    r"pv (?P<pv>(?:\S+)(?: (?!info |ownership )\S+)*)")


def streamed_lines(gtp, command: str, count: int = 2) -> list[str]:
    """The lines a streaming analysis command wrote before a "next command" arrived after
    `count` lines, or after a line and a second without another (the search reached its
    analysis cap: lines would repeat, so none is sent); checks the response's framing."""
    gtp.output.seek(0), gtp.output.truncate()
    started = time.monotonic()
    seen = {"lines": 0, "at": started}

    def stop():
        lines = gtp.output.getvalue().count("\ninfo move ")
        if lines != seen["lines"]:
            seen.update(lines=lines, at=time.monotonic())
        return lines >= count or (lines and time.monotonic() - seen["at"] > 1) \
            or time.monotonic() - started > 30

    gtp.server.execute(command, interrupted=stop)
    output = gtp.output.getvalue()
    head, *lines, closing = output.split("\n")[:-1]
    assert head == "=" and closing == "" and lines, output[-200:]
    return lines


def kata_line(line: str, board_size: int) -> tuple[list[dict], np.ndarray | None]:
    """(info blocks, ownership or None) of one kata-analyze line; fails on anything else."""
    info, _, ownership = line.partition(" ownership ")
    blocks = [match.groupdict() for match in KATA_BLOCK.finditer(info)]
    assert blocks and " ".join(match.group(0) for match in KATA_BLOCK.finditer(info)) == info, \
        f"not KataGo info blocks: {info!r}"
    for block in blocks:
        winrate, utility = float(block["winrate"]), float(block["utility"])
        assert 0 <= winrate <= 1 and 0 <= float(block["prior"]) <= 1
        assert abs(winrate - (1 + utility) / 2) < 1e-5
        assert 0 <= float(block["lcb"]) <= winrate + 1e-6
        assert block["pv"].split()[0] == block["move"]
    values = None
    if ownership:
        values = np.array([float(v) for v in ownership.split(" ")])
        assert values.shape == (board_size * board_size,) and np.abs(values).max() <= 1
    return blocks, values


def reference_planes(config, moves: list[str]) -> np.ndarray:
    """Input planes of the position after `moves` (alternating from black), built by a fresh
    rules engine."""
    go = GoBatch(1, N, komi=config.komi, history_length=config.history)
    for move in moves:
        go.play(np.array([coords.from_gtp(move, N)]))
    return go.features(config.history)


def test_kata_analyze_ownership_and_scores_are_the_nets_in_katagos_order(aux_run):
    import gtp_engine
    with contextlib.redirect_stderr(io.StringIO()):
        engine = gtp_engine.load_engine(gtp_engine.parse_args(["--run", str(aux_run)]))
    net = engine.evaluator
    assert net.has_aux_heads
    # 16 simulations at most: fewer than the 22 legal moves, so minmoves lists unvisited ones.
    gtp = Transcript((engine.config, net), analysis_simulations=16)
    moves = ["A5", "D2", "B5"]     # top left corner, lower right: no symmetry maps it to itself
    for colour, move in zip("bwb", moves):
        gtp.ok(f"play {colour} {move}")
    lines = streamed_lines(gtp, "kata-analyze 1 ownership true minmoves 30")
    blocks, ownership = kata_line(lines[-1], N)
    assert len(blocks) == 22 and ownership is not None
    assert [int(b["order"]) for b in blocks] == list(range(len(blocks)))

    # The reference: the Keras model's own heads on planes of the same position (white to
    # move), from a fresh rules engine. KataGo's order starts at A5 (the top left) and goes
    # row by row; the planes put row 0 at the top, as their stones show.
    planes = reference_planes(engine.config, moves)
    white, black = planes[0, ..., 0], planes[0, ..., 1]       # own (white) and opponent
    assert black[0, 0] == black[0, 1] == 1 and white[3, 3] == 1 and planes[0, ..., :2].sum() == 3
    from training.nets import read_weights
    model = read_weights(aux_run).trainer.model     # the Keras model: the reference
    outputs = model(planes, training=False)
    expected = np.tanh(np.asarray(outputs[2])[0])
    for symmetric in (np.flipud(expected), np.fliplr(expected), expected.T):
        assert np.abs(symmetric - expected).max() > 1e-3, "the position must tell orders apart"
    # The engine's ONNX graph against Keras: round-off of the trunk and the 1x1 convolution.
    shape = model_shape(model)
    ownership_depth = trunk_depth(shape) + shape.filters
    assert_head_close(ownership, expected.ravel(), ownership_depth, tanh=True)
    letters = "ABCDE"
    by_vertex = np.zeros((N, N))
    for index, value in enumerate(ownership):
        vertex = f"{letters[index % N]}{N - index // N}"     # KataGo: A5 B5 ... E5 A4 ... E1
        by_vertex[N - int(vertex[1:]), letters.index(vertex[0])] = value
    assert_head_close(by_vertex, expected, ownership_depth, tanh=True)

    # Scores: a searched move's is the negated score of the position after it (the opponent's
    # view there), in points; an unvisited move's the root's.
    root_lead = float(np.asarray(outputs[3])[0, 0]) * N * N
    score_depth = accumulation_depths(shape)[1]
    for block in blocks:
        lead = float(block["lead"])
        assert block["mean"] == block["lead"]
        if int(block["visits"]) == 0:
            assert_head_close(lead, root_lead, score_depth)
            continue
        after = reference_planes(engine.config, moves + [block["move"]])
        score = np.asarray(model(after, training=False)[3])[0, 0] * N * N
        assert_head_close(lead, -score, score_depth)
    assert any(int(b["visits"]) == 0 for b in blocks), "minmoves lists unvisited moves"

    # Without `ownership true` there is no ownership; analysis changes nothing in the game.
    assert all(kata_line(line, N)[1] is None
               for line in streamed_lines(gtp, "kata-analyze b interval 1 maxmoves 2"))
    assert gtp.board()[0, :2].tolist() == [1, 1] and "white to move" in gtp.ok("showboard")


def test_kata_analyze_of_a_net_without_aux_heads(loaded):
    gtp = Transcript(loaded)
    gtp.ok("play b C3")
    for line in streamed_lines(gtp, "kata-analyze w 1"):
        blocks, ownership = kata_line(line, N)
        assert ownership is None and all(b["lead"] is None for b in blocks)
    assert gtp.error("kata-analyze 1 ownership true") == \
        "this net has no ownership head (it was trained without --aux-heads true)"
    assert gtp.error("kata-analyze 1 ownership yes") == "cannot parse analyze tags"
    assert gtp.error("lz-analyze 1 ownership true") == "cannot parse analyze tags"
    assert "kata-analyze" in gtp.ok("list_commands").split("\n")


def analysis_until_quiet(gtp, command: str, cap: int, quiet: float = 0.5,
                         limit: float = 120) -> list[int]:
    """The total visits of every info line `command` streams, the "next command" arriving
    `quiet` seconds after a line reports `cap` visits (or when a line repeats the one before,
    or after `limit` seconds)."""
    gtp.output.seek(0), gtp.output.truncate()
    started = time.monotonic()
    seen = {"lines": [], "capped_at": None, "read": None}

    def stop():
        text = gtp.output.getvalue()
        if seen["read"] is None and "\n" in text:
            seen["read"] = text.index("\n") + 1          # past the "=" line
        end = text.rfind("\n") + 1
        if seen["read"] is not None and end > seen["read"]:
            # Only the lines completed since the last look: the output grows to megabytes.
            for line in text[seen["read"]:end - 1].split("\n"):
                seen["lines"].append(line)
                total = sum(int(v) for v in re.findall(r" visits (\d+)", line))
                if total >= cap and seen["capped_at"] is None:
                    seen["capped_at"] = time.monotonic()
            seen["read"] = end
        lines = seen["lines"]
        repeated = len(lines) >= 2 and lines[-1] == lines[-2]
        capped = seen["capped_at"] is not None and time.monotonic() - seen["capped_at"] > quiet
        return repeated or capped or time.monotonic() - started > limit

    gtp.server.execute(command, interrupted=stop)
    head, *lines, closing = gtp.output.getvalue().split("\n")[:-1]
    assert head == "=" and closing == ""
    assert all(line.startswith("info move ") for line in lines)
    return [sum(int(v) for v in re.findall(r" visits (\d+)", line)) for line in lines]


@pytest.mark.long
def test_analysis_searches_up_to_the_documented_cap_then_sends_nothing_more():
    """Lizzie's analysis stopped at 2,439 visits on 9x9 (the tree's old size) while the same
    info line came 10 times a second. gtp/README.md: analysis grows a position's search to
    min(10,000, 800,000 // (N*N + 1)) visits (9,756 on 9x9) unless --analysis-sims says
    otherwise; once there, no more lines until the next command."""
    import dataclasses

    from training.config import PRESETS
    nine = dataclasses.replace(PRESETS["tiny"], board_size=9)
    gtp = Transcript((nine, uniform_net), simulations=8, analysis_simulations=None)
    totals = analysis_until_quiet(gtp, "lz-analyze b 5", cap=9_756)
    assert totals[-1] == 9_756 > 2_439
    assert all(a < b for a, b in zip(totals, totals[1:])), \
        f"lines must grow, none may repeat: {totals[-5:]}"


def test_kata_analysis_stops_at_analysis_sims_and_sends_no_repeated_lines(loaded):
    gtp = Transcript(loaded, analysis_simulations=40)
    gtp.ok("play b C3")
    totals = analysis_until_quiet(gtp, "kata-analyze w 2 minmoves 30", cap=40)
    assert totals[-1] == 40
    assert all(a < b for a, b in zip(totals, totals[1:])), totals
    # A new request on the same position sends its (unchanged) state once, then nothing.
    assert analysis_until_quiet(gtp, "lz-analyze w 2", cap=40) == [40]


# ---------------------------------------------------------------- the process

def test_subprocess_speaks_only_gtp_from_another_directory_and_analysis_stops_at_input(
        tiny_run, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    engine = engine_process(tiny_run, "--sims", "4", "--analysis-sims", "5000", cwd=elsewhere,
                            stderr_path=tmp_path / "stderr.txt")
    try:
        engine.send("1 name\n2 play b C3\n# comment\n\n3 genmove w\n")
        assert engine.response(120) == ("=1", "Batched Go Zero")
        assert engine.response() == ("=2", "")
        head, move = engine.response()
        assert head == "=3" and (move == "pass" or re.fullmatch(r"[A-E][1-5]", move))
        engine.send("4 lz-analyze b 2\n")
        assert engine.read_line() == "=4\n"
        info = [engine.read_line(), engine.read_line()]
        assert all(line.startswith("info move ") for line in info)
        engine.send("5 version\n")
        # Lines already on their way may arrive; then the closing empty line, then =5.
        while (line := engine.read_line()) != "\n":
            assert line.startswith("info move ")
        assert engine.response() == ("=5", PROGRAM_VERSION)
        engine.send("bgz-net\n")
        head, net = engine.response()
        assert head == "=" and net.startswith(f"{tiny_run} iteration 1, 5x5, net 1x8, 4 sim")
        engine.send("6 frobnicate\n")
        assert engine.response() == ("?6", "unknown command")
        engine.send("7 quit\n8 name\n")
        assert engine.response() == ("=7", "")
        assert engine.read_line(30) is None, "nothing after quit's response"
        assert engine.process.wait(30) == 0
    finally:
        if engine.process.poll() is None:
            engine.process.kill()
    assert "gtp_engine:" in (tmp_path / "stderr.txt").read_text(), "logs go to stderr"


def test_missing_run_exits_with_a_message_and_no_output(tmp_path):
    # A bare name means runs/NAME of the project whatever the working directory (GUIs start
    # engines elsewhere); a missing run is refused before anything reaches stdout.
    result = subprocess.run([sys.executable, str(PROJECT_ROOT / "gtp_engine.py"), "--run",
                             "no_such_run_for_gtp_tests"], capture_output=True, text=True,
                            timeout=60, input="name\n", cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    assert f"there is no run directory {PROJECT_ROOT / 'runs' / 'no_such_run_for_gtp_tests'}" \
        in result.stderr


def fresh_gnugo_verdict(moves: list[tuple[int, str]], komi: float) -> tuple[str, str]:
    """(final_score, dead stones) of the position after `moves` by a new GNU Go process:
    GNU Go caches final_score per position within a process (see games/gnugo.py)."""
    referee = GtpProcess([GNUGO, "--mode", "gtp", "--chinese-rules", "--komi", str(komi)])
    try:
        referee.command(f"boardsize {N}")
        referee.command("clear_board")
        for colour, move in moves:
            referee.command(f"play {'b' if colour == 1 else 'w'} {move}")
        return referee.command("final_score"), referee.command("final_status_list dead")
    finally:
        referee.close()


def parse_score(text: str) -> float:
    if text == "0":
        return 0.0
    winner, margin = text.split("+")
    return float(margin) * (1 if winner == "B" else -1)


@pytest.mark.skipif(not Path(GNUGO).exists(), reason="GNU Go is not installed (/usr/games/gnugo)")
def test_a_game_against_gnugo_to_the_end_scored_by_our_rules_and_by_gnugo(tiny_run, tmp_path):
    komi = 0.5
    ours = engine_process(tiny_run, "--sims", "8", stderr_path=tmp_path / "ours.txt")
    gnugo = GtpProcess([GNUGO, "--mode", "gtp", "--level", "0", "--chinese-rules",
                        "--never-resign", "--komi", str(komi)])
    referee = GoBatch(1, N, komi=komi)
    moves: list[tuple[int, str]] = []

    def referee_play(colour: int, text: str) -> None:
        if referee.is_over()[0]:   # play goes on after two passes: a new game on the stones
            referee.set_board(referee.board(), np.array([colour], np.int8))
        elif int(referee.to_play()[0]) != colour:
            referee.play(np.array([PASS]))
        referee.play(np.array([coords.from_gtp(text, N)]))   # raises if illegal for us
        moves.append((colour, text))

    def play_until_two_passes(cleanup: bool) -> None:
        colour, passes = (1, 0) if not moves else (-moves[-1][0], 0)
        while passes < 2:
            assert len(moves) < 150, "the game does not end"
            player, other = (ours, gnugo) if colour == 1 else (gnugo, ours)
            name = "b" if colour == 1 else "w"
            move = player.command(f"{'kgs-genmove_cleanup' if cleanup else 'genmove'} {name}")
            assert move.lower() != "resign"
            move = move.upper() if move.lower() != "pass" else "pass"
            other.command(f"play {name} {move}")
            referee_play(colour, move)
            passes = passes + 1 if move == "pass" else 0
            colour = -colour

    try:
        for engine in (ours, gnugo):
            engine.command(f"boardsize {N}", timeout=120)
            engine.command("clear_board")
            engine.command(f"komi {komi}")
        gnugo.command("set_random_seed 1")
        play_until_two_passes(cleanup=False)
        score_text, dead = fresh_gnugo_verdict(moves, komi)
        rounds = 0
        while dead and rounds < 3:   # games/match_runner.py: resume with cleanup until nothing is dead
            play_until_two_passes(cleanup=True)
            score_text, dead = fresh_gnugo_verdict(moves, komi)
            rounds += 1
        ours_score = ours.command("final_score")
    finally:
        assert ours.close() == 0
        gnugo.close()
    assert dead == "", f"GNU Go still sees dead stones after cleanup: {dead}"
    assert parse_score(score_text) == referee.score()[0], \
        f"GNU Go says {score_text}, our rules {referee.score()[0]:+}: {moves}"
    assert parse_score(ours_score) == referee.score()[0]


# ---------------------------------------------------------------- what GUIs send (Lizzie)

def uniform_net(planes):
    """A stand-in evaluator: every move equally likely, an even game."""
    actions = planes.shape[1] * planes.shape[2] + 1
    return (np.full((len(planes), actions), 1 / actions, np.float32),
            np.zeros(len(planes), np.float32))


def test_fixed_handicap_places_the_gtp_points_and_answers_them():
    import dataclasses

    from training.config import PRESETS
    nine = dataclasses.replace(PRESETS["tiny"], board_size=9)
    gtp = Transcript((nine, uniform_net), simulations=4, analysis_simulations=16)
    assert gtp.responses("1 fixed_handicap 2", "2 fixed_handicap 2") == [
        ("=1", "C3 G7"), ("?2", "board not empty")]
    assert gtp.ok("genmove w") not in ("C3", "G7")     # White moves next, the stones are there
    assert gtp.ok("clear_board") == ""
    assert gtp.responses("fixed_handicap 10", "fixed_handicap 1", "fixed_handicap x") == [
        ("?", "invalid number of stones"), ("?", "invalid number of stones"),
        ("?", "syntax error")]
    assert gtp.ok("fixed_handicap 9").split() == [
        "C3", "G7", "C7", "G3", "C5", "G5", "E3", "E7", "E5"]


def test_place_free_handicap_takes_the_fixed_points_then_the_nets_choice():
    import dataclasses

    from training.config import PRESETS
    nine = dataclasses.replace(PRESETS["tiny"], board_size=9)

    def corner_loving_net(planes):
        """Prefers A9, then B9, ...: a policy falling along the flat index (row 0 on top)."""
        actions = planes.shape[1] * planes.shape[2] + 1
        weights = np.arange(actions, 0, -1, dtype=np.float32)
        return (np.tile(weights / weights.sum(), (len(planes), 1)),
                np.zeros(len(planes), np.float32))

    gtp = Transcript((nine, corner_loving_net), simulations=4, analysis_simulations=16)
    assert gtp.ok("place_free_handicap 3").split() == ["C3", "G7", "C7"]  # fixed_handicap 3's
    assert gtp.error("place_free_handicap 2") == "board not empty"
    assert gtp.ok("genmove w") not in ("C3", "G7", "C7")
    gtp.ok("clear_board")
    placed = gtp.ok("place_free_handicap 11").split()
    assert placed[:9] == ["C3", "G7", "C7", "G3", "C5", "G5", "E3", "E7", "E5"]
    # Then the two points the stand-in net likes most: the first flat indices, A9 and B9.
    assert placed[9:] == ["A9", "B9"]
    board = gtp.ok("showboard")
    assert board.count("X") == 11 + 1        # the stones, and the legend's "(X)"
    assert [gtp.error(f"place_free_handicap {n}") for n in (1, 81)] == ["board not empty"] * 2
    gtp.ok("clear_board")
    assert [gtp.error(f"place_free_handicap {n}") for n in (1, 81)] == [
        "invalid number of stones"] * 2


def test_fixed_handicap_is_refused_on_boards_without_a_placement(loaded):
    assert Transcript(loaded).error("fixed_handicap 2") == "invalid number of stones"   # 5x5


@pytest.mark.skipif(not Path(GNUGO).exists(), reason="GNU Go is not installed (/usr/games/gnugo)")
def test_fixed_handicap_vertices_are_gnugos():
    from games.handicap import fixed_handicap_vertices
    lines = []
    for size in (5, 7, 8, 9, 12, 13, 19):
        lines.append(f"boardsize {size}")
        for stones in range(1, 11):
            lines += ["clear_board", f"fixed_handicap {stones}"]
    result = subprocess.run([GNUGO, "--mode", "gtp"], input="\n".join(lines) + "\nquit\n",
                            capture_output=True, text=True, timeout=60)
    answers = iter(parse_responses(result.stdout)[:-1])
    for size in (5, 7, 8, 9, 12, 13, 19):
        next(answers)                                   # boardsize
        for stones in range(1, 11):
            next(answers)                               # clear_board
            head, body = next(answers)
            ours = fixed_handicap_vertices(size, stones)
            if head == "=":
                assert ours is not None and sorted(ours) == sorted(body.split()), (size, stones)
            else:
                assert ours is None, (size, stones)


@pytest.mark.parametrize("while_analysing", [False, True])
def test_a_controller_closing_the_engines_output_stops_it_quietly(tmp_path, while_analysing):
    """A controller that closes the engine's stdout: the engine stops at its next answer (or
    info line) with status 0 and one line on stderr, no BrokenPipeError traceback."""
    stderr_path = tmp_path / "stderr.txt"
    with open(stderr_path, "wb") as stderr:
        process = subprocess.Popen([sys.executable, str(PROJECT_ROOT / "gtp_engine.py"),
                                    "--player", "mcts:8"], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=stderr, bufsize=0)

    def read_line() -> bytes:
        assert select.select([process.stdout], [], [], 120)[0], "no answer"
        return process.stdout.readline()

    try:
        process.stdin.write(b"1 name\n")
        assert read_line() == b"=1 Batched Go Zero\n" and read_line() == b"\n"
        if while_analysing:
            process.stdin.write(b"2 lz-analyze b 1\n")
            assert read_line() == b"=2\n" and read_line().startswith(b"info move ")
        process.stdout.close()
        with contextlib.suppress(BrokenPipeError):
            process.stdin.write(b"3 name\n4 genmove b\n")
        status = process.wait(timeout=60)   # stdin stays open: it stops by itself
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdin.close()
    log = stderr_path.read_text()
    assert status == 0, log
    assert "Traceback" not in log and "Exception ignored" not in log and "Error" not in log, log
    assert "closed the engine's output" in log


def test_version_answers_the_program_version_or_the_one_given(loaded):
    assert Transcript(loaded).ok("version") == PROGRAM_VERSION
    assert Transcript(loaded, version="0.17").ok("version") == "0.17"   # --version-answer
    assert "string/Net/bgz-net" in Transcript(loaded).ok("gogui-analyze_commands")


def test_a_model_file_plays_through_model_and_a_run_through_model_is_refused(tiny_run, tmp_path):
    import export_model
    model = tmp_path / "tiny.npz"
    assert export_model.main(["--run", str(tiny_run), "--output", str(model),
                              "--play_simulations", "7"]) == 0
    engine = GtpProcess([sys.executable, str(PROJECT_ROOT / "gtp_engine.py"), "--model",
                         str(model)])
    try:
        # The model's play_simulations is the engine's default budget (the run's is 4).
        assert engine.command("bgz-net") == f"{model}, 5x5, net 1x8, 7 simulations per move"
        engine.command("boardsize 5")
        engine.command("clear_board")
        move = engine.command("genmove b")
        assert move == "pass" or re.fullmatch(r"[A-E][1-5]", move), move
    finally:
        assert engine.close() == 0
    refused = subprocess.run([sys.executable, str(PROJECT_ROOT / "gtp_engine.py"), "--model",
                              str(tiny_run)], capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and refused.stdout == ""
    assert "a model file ends in .npz" in refused.stderr


def test_a_net_failing_mid_search_costs_one_answer_only():
    import dataclasses

    from training.config import PRESETS
    calls = {"count": 0}

    def flaky_net(planes):
        """Fails on its third call: the root is evaluated, the search has begun."""
        calls["count"] += 1
        if calls["count"] == 3:
            raise MemoryError("the net ran out of memory")
        return uniform_net(planes)

    nine = dataclasses.replace(PRESETS["tiny"], board_size=9)
    gtp = Transcript((nine, flaky_net), simulations=16, analysis_simulations=64)
    head, message = gtp.responses("1 genmove b")[0]
    assert (head, message) == ("?1", "internal error: the net ran out of memory")
    # The search's pending leaves were undone: the next searches run on the same tree.
    for number, colour in ((2, "b"), (3, "w")):
        [(head, move)] = gtp.responses(f"{number} genmove {colour}")
        assert head == f"={number}" and move != "pass"
        gtp_to_move(move, 9)
    assert gtp.ok("bgz-value").startswith("black to move")
    assert calls["count"] > 3
