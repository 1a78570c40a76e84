"""Hostile input to the real GTP engine process (gtp_engine.py --player mcts:2, no net
needed: the search only has to run, and 8 simulations took twice the CPU),
on 9x9 and on 19x19: random bytes, control and Unicode characters, huge lines and ids, CR/LF
mixes, comments, bad arguments, unknown commands, board-size changes, undo storms, malformed
SGF files and unreadable paths, bursts of commands in one write, analysis streams (lz-analyze,
kata-analyze) cut short, random sessions of game commands.

After every case a synchronising command with an id of its own is sent; everything the engine
wrote before its answer must be well-formed GTP responses (`=` or `?`, an optional id, text
without empty lines, an empty line at the end), as many as the case has command lines by the
GTP specification's preprocessing (reimplemented here from the specification: ASCII control
characters but HT and LF removed, `#` starts a comment, only space and tab are whitespace; a
line left blank gets no answer however long it is, comment lines included; a line whose text
before its `#` is longer than the engine's documented 64 kB limit and not blank is answered
`line too long`). Commands with an id
must be answered with that id. No answer may be an internal error, the engine must answer
every case within a deadline, never die, and exit cleanly on `quit`. The cases are drawn from
a seeded generator, so a failure names a case that can be replayed.
"""
from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_LINE_BYTES = 1 << 16           # gtp/protocol.py's documented limit, restated
DEADLINE = 30.0                    # seconds for any one case's answers
RESPONSE = re.compile(r"([=?])([0-9]*)(?: ([^\n]*))?((?:\n[^\n]+)*)")
SPEC_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
COLUMNS = "ABCDEFGHJKLMNOPQRST"


class Engine:
    """gtp_engine.py over pipes; a reader thread gathers stdout so every read has a deadline."""

    def __init__(self, board_size: int, directory: Path):
        # Run in `directory`: random printsgf arguments name files relative to it.
        self.stderr = open(directory / "stderr.txt", "wb")
        self.process = subprocess.Popen(
            [sys.executable, str(ROOT / "gtp_engine.py"), "--player", "mcts:2",
             "--board-size", str(board_size)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, bufsize=0,
            cwd=directory)
        self.buffer = b""
        self.closed = False
        self.arrived = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        while True:
            chunk = os.read(self.process.stdout.fileno(), 1 << 16)
            with self.arrived:
                if not chunk:
                    self.closed = True
                else:
                    self.buffer += chunk
                self.arrived.notify_all()
            if not chunk:
                return

    def send(self, data: bytes) -> None:
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def responses_until(self, sync_id: int, case: str) -> list[tuple[str, str, str]]:
        """(status, id, text) of every response up to the one with `sync_id`, which is not
        included; fails on anything that is not a well-formed response."""
        marker = f"={sync_id} 2\n\n".encode()
        deadline = time.monotonic() + DEADLINE
        with self.arrived:
            while marker not in self.buffer:
                if self.closed:
                    pytest.fail(f"{case}: the engine exited (status "
                                f"{self.process.wait()}); output {self.buffer[-300:]!r}")
                if not self.arrived.wait(timeout=max(0.0, deadline - time.monotonic())):
                    pytest.fail(f"{case}: no answer within {DEADLINE} s; output so far "
                                f"{self.buffer[-300:]!r}")
            before, self.buffer = self.buffer.split(marker, 1)
        return parse_responses(before, case)


def parse_responses(data: bytes, case: str) -> list[tuple[str, str, str]]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        pytest.fail(f"{case}: output that is not UTF-8: {data[:300]!r}")
    assert text == "" or text.endswith("\n\n"), f"{case}: unterminated output {text[-300:]!r}"
    responses = []
    for chunk in text[:-2].split("\n\n") if text else []:
        match = RESPONSE.fullmatch(chunk)
        assert match, f"{case}: not a GTP response: {chunk[:300]!r}"
        status, command_id, first, rest = match.groups()
        responses.append((status, command_id, (first or "") + rest))
    return responses


def spec_commands(data: bytes) -> list[str | None]:
    """The lines of `data` that are commands by the GTP specification (3.1): the id each
    starts with ("" when none, None for an over-long line, answered without a known id).
    Comments and blank lines get no answer whatever their length; the limit applies to the
    text before the comment."""
    commands = []
    for raw in data.split(b"\n"):
        text = raw.split(b"#", 1)[0]
        line = SPEC_CONTROL.sub("", text.decode("utf-8", "replace")).replace("\t", " ")
        words = [word for word in line.split(" ") if word]
        if not words:
            continue
        if len(text) > MAX_LINE_BYTES:
            commands.append(None)
            continue
        first = words[0]
        commands.append(first.lstrip("0") or "0" if first.isascii() and first.isdigit() else "")
    return commands


# ---------------------------------------------------------------- the cases

def vertices(n: int) -> list[str]:
    return [f"{COLUMNS[col]}{row}" for col in range(n) for row in range(1, n + 1)]


def sgf_files(directory: Path, n: int, rng: random.Random) -> list[Path]:
    """Malformed and awkward SGF files (and a few paths that are not files at all)."""
    letters = "abcdefghijklmnopqrs"
    point = lambda: letters[rng.randrange(n)] + letters[rng.randrange(n)]  # noqa: E731
    moves = "".join(f";{'BW'[i % 2]}[{point()}]" for i in range(60))
    passes = "".join(f";{'BW'[i % 2]}[]" for i in range(300))
    contents = {
        "random.sgf": bytes(rng.randrange(256) for _ in range(500)),
        "truncated.sgf": f"(;FF[4]GM[1]SZ[{n}]KM[7.5];B[cc];W[dd".encode(),
        "size25.sgf": b"(;FF[4]GM[1]SZ[25];B[aa])",
        "size0.sgf": b"(;FF[4]GM[1]SZ[0])",
        "other_size.sgf": f"(;FF[4]GM[1]SZ[{21 - n}];B[aa])".encode(),
        "komi_nan.sgf": f"(;FF[4]GM[1]SZ[{n}]KM[nan];B[cc])".encode(),
        "komi_huge.sgf": f"(;FF[4]GM[1]SZ[{n}]KM[1e400];B[cc])".encode(),
        "komi_text.sgf": f"(;FF[4]GM[1]SZ[{n}]KM[lots];B[cc])".encode(),
        "handicap.sgf": f"(;FF[4]GM[1]SZ[{n}]HA[-3]AB[aa][zz]AW[aa];W[bb])".encode(),
        "off_board.sgf": f"(;FF[4]GM[1]SZ[{n}];B[zz];W[{letters[n - 1] * 2}])".encode(),
        "occupied.sgf": f"(;FF[4]GM[1]SZ[{n}];B[cc];W[cc])".encode(),
        "same_colour.sgf": f"(;FF[4]GM[1]SZ[{n}];B[cc];B[dd];B[ee];W[])".encode(),
        "variations.sgf": f"(;FF[4]GM[1]SZ[{n}](;B[cc](;W[dd])(;W[ee]))(;B[ff]))".encode(),
        "random_game.sgf": f"(;FF[4]GM[1]SZ[{n}]{moves})".encode(),
        "passes.sgf": f"(;FF[4]GM[1]SZ[{n}]{passes};B[cc])".encode(),
        "comment.sgf": f"(;FF[4]GM[1]SZ[{n}]C[{'x' * 100_000}\\]];B[cc]C[\n\n])".encode(),
        "empty.sgf": b"",
        "not_sgf.sgf": b"this is not sgf",
        "two_games.sgf": f"(;FF[4]GM[1]SZ[{n}];B[cc])(;FF[4]GM[1]SZ[5])".encode(),
        "charset.sgf": f"(;FF[4]CA[klingon]GM[1]SZ[{n}];B[cc])".encode(),
    }
    paths = []
    for name, data in contents.items():
        (directory / name).write_bytes(data)
        paths.append(directory / name)
    fifo = directory / "fifo.sgf"
    os.mkfifo(fifo)
    paths += [fifo, directory, directory / "missing.sgf", Path("/dev/zero"),
              Path("/proc/self/status")]
    return paths


def structured_cases(n: int, rng: random.Random, files: list[Path], directory: Path):
    """(name, bytes) cases of well-aimed bad input."""
    points = vertices(n)
    cases = []
    add = lambda name, text: cases.append((name, text if isinstance(text, bytes)  # noqa: E731
                                           else text.encode()))
    for text in ["play", "play b", "play b D4 extra", "play purple D4", "play b Z99", "play b A0",
                 "play b I3", "play b pass pass", "play b", "play 1 D4", "play b D-4",
                 "play b D4.0", "play b D04", "play B d4", "play WHITE pass", "genmove",
                 "genmove purple", "genmove b w", "reg_genmove", "kgs-genmove_cleanup x",
                 "komi", "komi nan", "komi inf", "komi -inf", "komi 1e999", "komi -0", "komi 1_0",
                 "komi 7.5 8", "komi ٣", "boardsize", "boardsize 0", "boardsize 1", "boardsize 2",
                 f"boardsize {n}", "boardsize 20", "boardsize -5", "boardsize abc", "boardsize 9.5",
                 "boardsize 99999999999999999999999999", f"boardsize {21 - n}", "boardsize ²",
                 "time_settings", "time_settings -1 0 0", "time_settings 1e999 1 1",
                 "time_settings 10 5 -1", "time_settings nan 1 1", "time_left b -5 0",
                 "time_left b 1e400 1", "time_left x 10 1", "time_settings 0 0 0",
                 "fixed_handicap", "fixed_handicap 0", "fixed_handicap 1", "fixed_handicap 10",
                 "fixed_handicap 100", "fixed_handicap 99999999999999999999",
                 "set_free_handicap", "set_free_handicap A1", "set_free_handicap A1 A1",
                 "set_free_handicap A1 pass", "set_free_handicap " + " ".join(points),
                 "set_free_handicap Z1 A1", "final_status_list", "final_status_list zombie",
                 "final_status_list alive dead", "final_score extra", "known_command",
                 "known_command a b", "list_commands please", "undo now", "showboard x",
                 "lz-analyze", "lz-analyze b 1", "lz-analyze x", "lz-analyze b ²",
                 "lz-analyze b 1 minmoves 99999999999999999999", "lz-analyze w interval",
                 "lz-analyze 0", "lz-analyze b 1 maxmoves 0", "kata-analyze", "kata-analyze b 1",
                 "kata-analyze w 1 ownership true", "kata-analyze b 1 ownership maybe",
                 "kata-analyze b ² ownership false", "kata-analyze 1 minmoves 3 ownership",
                 "bgz-policy_heatmap b w",
                 "bgz-visit_heatmap x", "bgz-principal_variation w", "bgz-value b",
                 "gogui-analyze_commands", "loadsgf", "printsgf a b", 'loadsgf "unclosed',
                 'printsgf "unclosed', "clear_board"]:
        add(f"bad arguments: {text!r}", text + "\n")
    for path in files:
        add(f"loadsgf {path.name}", f'loadsgf "{path}"\n')
        add(f"loadsgf {path.name} 3", f'loadsgf "{path}" 3\n')
    fifo = directory / "out_fifo"
    os.mkfifo(fifo)
    link = directory / "out_link"
    link.symlink_to(directory / "random.sgf")
    for target in (directory, fifo, link, directory / "nowhere" / "x.sgf", Path("/dev/null"),
                   directory / "written.sgf"):
        add(f"printsgf {target.name}", f'printsgf "{target}"\n')
    for name in ["PLAY b D4", "Play", "genmove_black", "quit_now", "protocol-version", "é",
                 "\u0430ame", "na\u200bme", "\u202ename", "name\ufeff", "\U0001f600", "\u3000",
                 "\u2028", "\u2003", "\u00a0name", "🀄 play b D4"]:
        add(f"unknown command {name!r}", name + "\n")
    add("board-size changes", f"boardsize {n}\nplay b {points[0]}\nboardsize {21 - n}\n"
                              f"showboard\nboardsize {n}\nshowboard\n")
    undo_storm = "".join(f"play {'bw'[i % 2]} {rng.choice(points)}\n" for i in range(20))
    add("undo storm", undo_storm + "undo\n" * 40 + "genmove b\nundo\nundo\nshowboard\n")
    add("undo after genmoves", "genmove b\ngenmove w\ngenmove b\nundo\nundo\nundo\nundo\n")
    add("huge ids", f"{'7' * 5000} name\n{'0' * 3000}12 version\n{'9' * 70_000} name\n")
    add("lines around the limit",
        b"name " + b"x" * (MAX_LINE_BYTES - 5) + b"\n" + b"name " + b"x" * (MAX_LINE_BYTES - 4)
        + b"\n" + b"# " + b"c" * (2 * MAX_LINE_BYTES) + b"\n")
    for megabytes in (1, 8):
        add(f"a line of {megabytes} MB", b"12 play b " + b"A1 " * ((megabytes << 20) // 3) + b"\n")
    add("a blank line of 1 MB", b" \t" * (1 << 19) + b"\n")
    # GTP answers no comment line, however long: these used to get `line too long`.
    add("a comment line of 100,000 characters", b"# " + b"c" * 100_000 + b"\n")
    add("comment lines over 64 kB", b"\t  #" + b"# x" * 40_000 + b"\n#" + b"\x00\x7f" * 50_000
        + b"\n" + "# ★".encode() * 30_000 + b"\n" + b" " * 70_000 + b"# blank, then a comment\n")
    add("a comment line of 8 MB", b"#" + b"c" * (8 << 20) + b"\n")
    add("commands with comments over 64 kB", b"13 name # " + b"c" * 100_000 + b"\n"
        + b"14 play b pass#" + b"#" * 70_000 + b"\nundo #" + b"\r" * 65_537 + b"\n")
    add("CR/LF mixes", "1 name\r\n\r\n2 version\r\r\n\r3 protocol_version\n\rname\r\r\r\n"
                       "play b \rD4\r\nundo\n\n\n\n")
    add("comments", "# a comment\n  # indented\nname # trailing\n4 name#glued\n#\x00\x01\n"
                    "5 # only an id\n# play b D4\n#\n")
    add("control characters", "\x00\x01\x02name\x7f\n\x1b[31mname\x1b[0m\n\x00\n\x07\x08\x0b\x0c\n"
                              "pl\x00ay b D4\n6\x00 name\n")
    add("tabs", "\tname\t\n7\tversion\n\t\t\n8 play\tb\tpass\n")
    burst = "".join(f"{i} {rng.choice(['name', 'version', 'showboard', 'final_score', 'undo'])}\n"
                    for i in range(200))
    add("a burst of 200 commands", burst)
    add("a burst with genmoves", "".join(f"{i} genmove {'bw'[i % 2]}\n" for i in range(12)))
    add("analysis cut short by a burst", "lz-analyze b 1\n" + "name\n" * 20)
    add("KataGo analysis cut short by a burst", "kata-analyze w 1\n" + "version\n" * 20)
    add("a game played out", "clear_board\n" + "".join(
        f"genmove {'bw'[i % 2]}\n" for i in range(10)) + "final_score\nfinal_status_list alive\n"
        "printsgf\nclear_board\n")
    return cases


def random_cases(count: int, rng: random.Random, n: int):
    """(name, bytes) cases of random bytes, characters and commands."""
    names = ["play", "genmove", "undo", "komi", "boardsize", "showboard", "name", "final_score",
             "time_left", "lz-analyze", "kata-analyze", "set_free_handicap", "known_command",
             "bgz-value",
             "fixed_handicap", "reg_genmove", "printsgf", "clear_board"]
    alphabet = ("abcdefghijklmnopqrstuvwxyzABCDEFGHJKLMNOPQRST0123456789 \t#-+.\"'\\"
                "\r\x00\x01\x1b\x7f\u00e9\u2028\u3000\u2003\u00a0\ufeff\u200b\U0001f600")
    points = vertices(n)
    session_commands = [
        lambda: f"play {rng.choice('bw')} {rng.choice(points + ['pass'])}",
        lambda: f"genmove {rng.choice('bw')}", lambda: "undo", lambda: "undo",
        lambda: f"kgs-genmove_cleanup {rng.choice('bw')}", lambda: "final_score",
        lambda: "final_status_list alive", lambda: "showboard", lambda: "clear_board",
        lambda: f"fixed_handicap {rng.randrange(2, 10)}",
        lambda: "set_free_handicap " + " ".join(rng.sample(points, rng.randrange(2, 6))),
        lambda: f"time_settings {rng.randrange(0, 3)} {rng.randrange(0, 3)} {rng.randrange(0, 3)}",
        lambda: f"time_left {rng.choice('bw')} {rng.uniform(0, 2):.2f} {rng.randrange(0, 3)}",
        lambda: f"komi {rng.choice([0, 0.5, 6.5, 7.5, -3, 100])}",
        lambda: f"lz-analyze {rng.choice('bw')} {rng.randrange(0, 3)}",
        lambda: f"kata-analyze {rng.choice('bw')} {rng.randrange(0, 3)} "
                f"ownership {rng.choice(['true', 'false'])}",
        lambda: "bgz-value", lambda: "bgz-principal_variation", lambda: "reg_genmove b",
    ]
    cases = []
    for index in range(count):
        kind = index % 5
        if kind == 4:      # a session: commands that build, search and take back a game
            data = "\n".join(rng.choice(session_commands)()
                              for _ in range(rng.randrange(5, 30))).encode()
            cases.append((f"session {index}: {data[:80]!r}", data + b"\n"))
            continue
        if kind == 0:      # raw bytes, newlines included
            data = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300)))
        elif kind == 1:    # random characters
            data = "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 80))).encode()
        elif kind == 2:    # a known command with random arguments, maybe with an id
            words = [rng.choice(names)] + ["".join(rng.choice(alphabet.replace("\r", ""))
                                                   for _ in range(rng.randrange(1, 8)))
                                           for _ in range(rng.randrange(0, 4))]
            if rng.random() < 0.5:
                words.insert(0, str(rng.randrange(10 ** rng.randrange(1, 30))))
            data = " ".join(words).encode()
        else:              # a plausible command line
            vertex = f"{rng.choice(COLUMNS[:n + 1])}{rng.randrange(0, n + 2)}"
            data = rng.choice([f"play {rng.choice('bwx')} {vertex}", f"genmove {rng.choice('bw')}",
                               "undo", f"komi {rng.uniform(-1e3, 1e3)}", f"boardsize {n}",
                               f"time_left b {rng.randrange(-5, 100)} {rng.randrange(-2, 5)}",
                               "final_score", "showboard"]).encode()
        cases.append((f"random case {index}: {data[:80]!r}", data + b"\n"))
    return cases


@pytest.mark.long
@pytest.mark.parametrize("board_size", [9, 19])
def test_every_hostile_input_gets_well_formed_answers_and_the_engine_lives(board_size, tmp_path):
    rng = random.Random(board_size)
    files = sgf_files(tmp_path, board_size, rng)
    cases = structured_cases(board_size, rng, files, tmp_path)
    cases += random_cases(1500 if board_size == 9 else 800, rng, board_size)
    rng.shuffle(cases)
    engine = Engine(board_size, tmp_path)
    answered = 0
    try:
        for number, (name, data) in enumerate(cases):
            case = f"case {number} ({name})"
            sync_id = 10 ** 12 + number
            engine.send(data + f"{sync_id} protocol_version\n".encode())
            responses = engine.responses_until(sync_id, case)
            expected = spec_commands(data)
            assert len(responses) == len(expected), \
                f"{case}: {len(expected)} commands, {len(responses)} answers: {responses[:5]}"
            for (status, command_id, text), wanted in zip(responses, expected):
                assert "internal error" not in text, f"{case}: {text[:300]}"
                if wanted:
                    assert command_id == wanted, f"{case}: id {command_id!r} for {wanted!r}"
                if wanted is None:
                    assert (status, text) == ("?", f"line too long (more than "
                                                   f"{MAX_LINE_BYTES} bytes)"), case
            answered += len(responses)
        assert engine.process.poll() is None
        engine.send(b"quit\n")
        assert engine.process.wait(timeout=30) == 0
        assert engine.buffer == b"=\n\n"
    finally:
        if engine.process.poll() is None:
            engine.process.kill()
            engine.process.wait()
        engine.stderr.close()
    written = tmp_path / "written.sgf"
    assert written.read_bytes().startswith(b"(;FF[4]"), "printsgf to a plain path still works"
    assert len(cases) >= 900 and answered > 2 * len(cases)
    log = (tmp_path / "stderr.txt").read_bytes()
    assert b"Traceback" not in log, log[-3000:].decode(errors="replace")
