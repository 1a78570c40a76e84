"""The GTP engine's protocol layer and commands (gtp/protocol.py, gtp/, gtp_engine.py).

The protocol layer alone: preprocessing, ids, comments, GTP's whitespace and over-long lines,
read from an OS pipe as gtp_engine.py reads its stdin, in linear time. Then the commands,
through a `Transcript` (gtp_sessions.py) of the tiny run's net (`loaded`, conftest.py): the
required commands and the canonical errors, the rules (capture, suicide, ko, superko after two
passes), genmove, the area count with komi, handicap stones and time controls, resigning, and
when the engine passes back (the shipped 9x9 model, and a net without the ownership head).
Expected answers are written out by hand; generated moves, which depend on the net, are
checked for legality and for being the same in two runs (fixed seed).
"""
from __future__ import annotations

import contextlib
import io
import os
import re
import threading
import time

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from gtp.protocol import GtpServer, format_response, parse, preprocess  # noqa: E402
from gtp_sessions import (N, PROGRAM_VERSION, PROJECT_ROOT, Transcript,  # noqa: E402
                          parse_responses, uniform_net)
from kernels import coords  # noqa: E402

REQUIRED = ["protocol_version", "name", "version", "known_command", "list_commands", "quit",
            "boardsize", "clear_board", "komi", "play", "genmove"]
EXTRA = ["undo", "showboard", "final_score", "final_status_list", "time_settings", "time_left",
         "set_free_handicap", "place_free_handicap", "loadsgf", "printsgf", "reg_genmove", "lz-analyze",
         "gogui-analyze_commands", "bgz-net", "kata-analyze"]


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
