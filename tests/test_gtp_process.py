"""gtp_engine.py as a process, and what GUIs send it (Lizzie's handicap commands).

Through `gtp_engine.py` as a subprocess where the process matters: stdout carrying nothing but
the protocol, a working directory elsewhere, lz-analyze ended by the next command, exit codes,
a controller closing the engine's output, a model file, a game against GNU Go refereed by our
rules and by a fresh GNU Go process. Fixed and free handicap placement against GNU Go's points
and by hand, through `Transcript`s (gtp_sessions.py) of stand-in nets and of the tiny run's
net (`tiny_run`, `loaded`: conftest.py); a net failing mid-search costs one answer.
"""
from __future__ import annotations

import contextlib
import os
import queue
import re
import select
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from gtp_sessions import (N, PASS, PROGRAM_VERSION, PROJECT_ROOT, Transcript,  # noqa: E402
                          parse_responses, uniform_net)
from kernels import GoBatch, coords  # noqa: E402
from reference_rules import gtp_to_move  # noqa: E402

GNUGO = "/usr/games/gnugo"


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
