"""A GTP client for GNU Go 3.8, the evaluation opponent and referee.

    with GnuGo(board_size=7, komi=7.5, level=5, seed=3) as gnugo:
        gnugo.play(+1, move)                  # flat moves, pass = N*N (kernels/coords.py)
        reply = gnugo.genmove(-1)             # a flat move, or RESIGN
        dead = gnugo.dead_stones()            # final_status_list dead, flat points
    score = referee_score(7, 7.5, moves)      # a FRESH process's final_score, black - white
    dead = judge_dead_stones(7, 7.5, moves)   # a FRESH process's final_status_list dead

Every process runs with our rules: area scoring (`--chinese-rules`), our komi, suicide
forbidden and simple ko (its defaults), positional superko when ours has it. Debian installs
the binary as /usr/games/gnugo, off PATH, so `find_gnugo` looks there too.

Facts measured about GNU Go 3.8 that the matches (matches.py) rest on:
- It passes with dead stones still on the board; Tromp-Taylor scoring of such a position counts
  them alive and can reverse the result (seen: 2-8 instead of 8-2 over ten 9x9 games). After
  two passes, `final_status_list dead` names them, and `kgs-genmove_cleanup` plays them out.
- `final_score` is cached per position inside one process, even across `komi` changes and
  `clear_cache`: a referee must be a fresh process.
- Its levels are close on 9x9 (level 1 against 10: 6-14 over 20 games) while level 10 is about
  25 times slower per move (about 0.26 s against 0.01 s). On 7x7 two GNU Go instances repeat
  one game from the empty board: vary the opening (or `--seed`) for independent games.

Failures are exceptions a caller can catch without losing anything else: `GnuGoNotFound` when
there is no binary to run, `GnuGoError` (its base class) when a process dies, times out,
rejects a command or answers something that is not a GTP response (the process is then
killed). Reads have a deadline, so a hung process cannot hang a match. `probe_gnugo` asks a
binary who it is before a match relies on it.
"""
from __future__ import annotations

import os
import selectors
import shutil
import subprocess
import time
from pathlib import Path

from kernels import coords

DEFAULT_PATH = "/usr/games/gnugo"
LEVELS = range(0, 11)  # GNU Go's --level: 10 is its default and strongest (and slowest)
RESIGN = -1            # what genmove returns when GNU Go resigns (flat moves are >= 0)
COLOUR_NAMES = {1: "black", -1: "white"}


class GnuGoError(RuntimeError):
    """A GNU Go process died, timed out, or answered a command with an error."""


class GnuGoNotFound(GnuGoError):
    """No GNU Go binary to run (not installed, not executable)."""


def find_gnugo(path: str | os.PathLike | None = None) -> str:
    """The GNU Go binary to run: `path` if given, else `gnugo` on PATH, else /usr/games/gnugo."""
    candidates = [os.fspath(path)] if path is not None else [shutil.which("gnugo"), DEFAULT_PATH]
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    where = os.fspath(path) if path is not None else f"PATH or {DEFAULT_PATH}"
    raise GnuGoNotFound(f"GNU Go not found in {where} (Debian: apt-get install gnugo; "
                        f"./build.sh installs it when it can)")


def parse_score(text: str) -> float:
    """A GTP score ("B+3.5", "W+12", "0") as black minus white."""
    text = text.strip().upper()
    if text in ("0", "DRAW", "JIGO"):
        return 0.0
    if len(text) > 2 and text[0] in "BW" and text[1] == "+":
        margin = float(text[2:])
        return margin if text[0] == "B" else -margin
    raise GnuGoError(f"unreadable score {text!r}")


class GnuGo:
    """One GNU Go process speaking GTP over pipes, set up for a game on an empty board."""

    def __init__(self, board_size: int, komi: float, *, level: int = 10, seed: int = 1,
                 superko: bool = False, path: str | os.PathLike | None = None,
                 timeout: float = 120.0):
        self.board_size = coords.check_board_size(board_size)
        if level not in LEVELS:
            raise ValueError(f"GNU Go level must be in {LEVELS.start}..{LEVELS.stop - 1}, "
                             f"got {level!r}")
        self.level = int(level)
        self.timeout = float(timeout)
        binary = find_gnugo(path)
        # --seed: GNU Go breaks ties between equal moves with it, so distinct seeds give
        # distinct games where a fixed seed repeats one.
        argv = [binary, "--mode", "gtp", "--chinese-rules", "--komi", repr(float(komi)),
                "--level", str(self.level), "--seed", str(int(seed))]
        if superko:
            argv.append("--positional-superko")
        try:
            self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            stderr=subprocess.DEVNULL, bufsize=0)
        except OSError as error:
            raise GnuGoNotFound(f"cannot start {binary}: {error}") from None
        self._buffer = b""
        self._selector = selectors.DefaultSelector()
        self._selector.register(self.process.stdout, selectors.EVENT_READ)
        self.moves_played = 0    # moves this process has on its board (played or generated)
        self.command(f"boardsize {self.board_size}")
        self.command("clear_board")
        self.command(f"komi {float(komi)!r}")

    @property
    def pid(self) -> int:
        return self.process.pid

    def command(self, text: str) -> str:
        """Send one GTP command; the response's text, or GnuGoError (the process is killed)."""
        try:
            self.process.stdin.write(text.encode() + b"\n")
        except (BrokenPipeError, OSError, ValueError):
            self._fail(f"{text!r}: GNU Go (pid {self.pid}) is gone{self._exit_note()}")
        response = self._read_response(text)
        if response.startswith("?"):
            self._fail(f"{text!r}: GNU Go (pid {self.pid}) answered {response!r}")
        return response[1:].strip()

    def _read_response(self, text: str) -> str:
        deadline = time.monotonic() + self.timeout
        while b"\n\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self._selector.select(remaining):
                self._fail(f"{text!r}: GNU Go (pid {self.pid}) gave no answer in "
                           f"{self.timeout:g} s")
            chunk = os.read(self.process.stdout.fileno(), 65536)
            if not chunk:
                self._fail(f"{text!r}: GNU Go (pid {self.pid}) died{self._exit_note()}")
            self._buffer += chunk.replace(b"\r", b"")
            head = self._buffer.lstrip()
            if head and head[:1] not in (b"=", b"?"):   # an echo, a shell, a usage message
                self._fail(f"{text!r}: the process (pid {self.pid}) answered "
                           f"{head[:60].decode(errors='replace')!r}, not a GTP response")
        response, self._buffer = self._buffer.split(b"\n\n", 1)
        return response.decode(errors="replace").strip()

    def _exit_note(self) -> str:
        try:
            code = self.process.wait(timeout=1)
        except subprocess.TimeoutExpired:
            return ""
        return f" (exit code {code})"

    def _fail(self, message: str):
        self.close()
        raise GnuGoError(message)

    def play(self, colour: int, move: int) -> None:
        self.command(f"play {COLOUR_NAMES[colour]} {coords.to_gtp(move, self.board_size)}")
        self.moves_played += 1

    def replay(self, moves, first_colour: int = 1) -> None:
        """Play the moves not yet on this process's board: `moves` is the whole game so far,
        alternating from `first_colour`."""
        colour = first_colour if self.moves_played % 2 == 0 else -first_colour
        for move in list(moves)[self.moves_played:]:
            self.play(colour, int(move))
            colour = -colour

    def genmove(self, colour: int, cleanup: bool = False) -> int:
        """GNU Go's move for `colour`, played on its board: a flat move, pass N*N, or RESIGN.
        cleanup: `kgs-genmove_cleanup`, which keeps playing while it sees dead opponent stones."""
        verb = "kgs-genmove_cleanup" if cleanup else "genmove"
        reply = self.command(f"{verb} {COLOUR_NAMES[colour]}")
        if reply.lower() == "resign":
            return RESIGN
        try:
            move = coords.from_gtp(reply, self.board_size)
        except ValueError:
            self._fail(f"{verb}: GNU Go answered {reply!r}, not a move")
        self.moves_played += 1
        return move

    def dead_stones(self) -> list[int]:
        """Points of the stones GNU Go considers dead (`final_status_list dead`)."""
        reply = self.command("final_status_list dead")
        return sorted(coords.from_gtp(vertex, self.board_size) for vertex in reply.split())

    def final_score(self) -> float:
        """GNU Go's score of its board, black minus white. GNU Go caches it per position within
        a process, even across komi changes: ask a fresh process (`referee_score`)."""
        return parse_score(self.command("final_score"))

    def kill(self) -> None:
        """End the process at once, its streams left open: a thread waiting for its answer
        reads the end of the stream and fails (close() then closes them). Closing a stream
        under a thread that waits on it would never wake the thread."""
        if self.process.poll() is None:
            self.process.kill()

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                self.process.stdin.write(b"quit\n")
                self.process.wait(timeout=0.5)
            except (OSError, ValueError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            try:
                stream.close()
            except OSError:
                pass
        try:
            self._selector.close()
        except (OSError, ValueError):
            pass

    def __enter__(self) -> "GnuGo":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def referee_score(board_size: int, komi: float, moves, *, superko: bool = False,
                  path: str | os.PathLike | None = None, timeout: float = 120.0) -> float:
    """final_score (black - white) of a fresh GNU Go process after replaying `moves` (flat, black
    first, passes included) into it: an independent judge of a finished game. The referee runs
    at GNU Go's default level 10: at levels 0-1 its final_score misjudges even trivial 5x5
    positions (one black stone, two passes: B+0.5 instead of B+24.5 with komi 0.5)."""
    with GnuGo(board_size, komi, level=10, superko=superko, path=path, timeout=timeout) as referee:
        referee.replay(moves)
        return referee.final_score()


def judge_dead_stones(board_size: int, komi: float, moves, *, superko: bool = False,
                      path: str | os.PathLike | None = None, timeout: float = 120.0) -> list[int]:
    """`final_status_list dead` of a fresh level-10 GNU Go after replaying `moves`: asked of a
    judge rather than of a low-level player, which misjudges status (at level 0 a lone stone
    on an empty 5x5 board is neither alive nor dead)."""
    with GnuGo(board_size, komi, level=10, superko=superko, path=path, timeout=timeout) as judge:
        judge.replay(moves)
        return judge.dead_stones()


def probe_gnugo(path: str | os.PathLike | None = None, timeout: float = 10.0) -> str:
    """GNU Go's `name` and `version` (e.g. "GNU Go 3.8"), asked of a process started as every
    game's is: GnuGoNotFound without a binary, GnuGoError when it does not start, does not
    speak GTP or is not GNU Go (matches rely on its cleanup and dead-stone commands)."""
    binary = find_gnugo(path)
    with GnuGo(5, 7.5, level=0, path=binary, timeout=timeout) as process:
        name, version = process.command("name"), process.command("version")
    if "gnu go" not in name.lower():
        raise GnuGoError(f"{binary} is not GNU Go: its GTP name is {name!r}")
    return f"{name} {version}"
