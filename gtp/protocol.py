"""GTP version 2 framing: input preprocessing, command parsing, responses, and the serving
loop with streaming (analysis) responses. Knows nothing of Go.

By the GTP version 2 specification (draft 2):
- Input (3.1): control characters other than HT and LF are removed, everything from `#` on is
  a comment, HT becomes a space, lines then empty or blank are skipped without a response.
  GTP's whitespace is space and tab only: a line of other (Unicode) spaces is a command, and
  gets an answer like any other.
- A command is `[id] name [arguments]`; id is an unsigned integer and is echoed in the
  response: `=id result` or `?id message`, each ended by an empty line. A response never
  contains an empty line itself, so multi-line results have theirs removed. The id is kept
  as its digits (leading zeros dropped), never converted to an int: Python refuses to convert
  more than a few thousand digits, and an id of any length is still echoed.
- Unknown names answer `? unknown command`; a line holding only an id answers
  `?id syntax error`.
- A comment is dropped as it is read, whatever its length: a line that is only a comment (or
  blank) gets no answer however long it is, and costs no memory. A line whose text before its
  `#` (the whole line when it has none) is longer than MAX_LINE_BYTES and not blank answers
  `?id line too long` (the id when the line starts with one) and the engine reads on; it is
  read in time linear in its length and only its first MAX_LINE_BYTES are kept.
- A controller that closes the engine's output (stdout) ends the serving loop: `serve`
  returns with `output_closed` set, as at the end of input, instead of raising.
- Streaming responses (lz-analyze): `=id` and a newline at once, then lines as the handler
  writes them until the next input line arrives (that line is then executed as usual), then
  the closing empty line. Everything written is flushed at once.
"""
from __future__ import annotations

import os
import queue
import re
import sys
import threading
import traceback
from dataclasses import dataclass
from typing import Callable, Iterable, TextIO

_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")   # all control characters but HT (LF ends lines)
_ID = re.compile(r"[0-9]+")
# What preprocessing leaves nothing of: space, tab and the other control characters.
_BLANK_TEXT = re.compile(r"[\x00-\x20\x7f]*")
_BLANK_BYTES = re.compile(rb"[\x00-\x20\x7f]*")
# The longest input line executed. The longest sensible command is set_free_handicap with 360
# vertices (about 1.5 kB) or a file name: 64 kB leaves room and bounds what one line costs.
MAX_LINE_BYTES = 1 << 16

PROTOCOL_VERSION = 2


class GtpError(Exception):
    """A failure response: the message is sent after `?`."""


@dataclass(frozen=True)
class Command:
    id: str | None     # the id's digits, leading zeros dropped; None when there is none
    name: str
    args: list[str]


class TooLong(str):
    """The first MAX_LINE_BYTES of an input line whose command text was longer (decoded):
    `execute` answers it with an error instead of running it."""


class OutputClosed(Exception):
    """The controller closed the engine's output: nothing can be answered any more."""


class Stream:
    """A streaming result: `run(write_line, interrupted)` writes lines (each flushed) until
    `interrupted()` turns true, i.e. until the next input line has arrived."""

    def __init__(self, run: Callable[[Callable[[str], None], Callable[[], bool]], None]):
        self.run = run


Handler = Callable[[list[str]], "str | Stream"]


def preprocess(line: str) -> str | None:
    """The command text of one input line, or None when the line is to be skipped (nothing
    but spaces and tabs is left)."""
    text = _CONTROL.sub("", line).split("#", 1)[0].replace("\t", " ")
    return text if text.strip(" ") else None


def parse(text: str) -> Command:
    """A preprocessed, non-blank line as a Command; name "" when only an id was given. Words
    are separated by spaces only (tabs became spaces in `preprocess`)."""
    words = [word for word in text.split(" ") if word]
    command_id = None
    if _ID.fullmatch(words[0]):
        command_id = words[0].lstrip("0") or "0"
        words = words[1:]
    return Command(command_id, words[0] if words else "", words[1:])


def leading_id(line: str) -> str | None:
    """The id a (possibly cut) line starts with, if a complete one is there."""
    text = preprocess(line)
    if text is None:
        return None
    words = text.lstrip(" ").split(" ", 1)
    return parse(words[0]).id if len(words) == 2 and _ID.fullmatch(words[0]) else None


def format_response(command_id: int | str | None, text: str, success: bool = True) -> str:
    head = ("=" if success else "?") + ("" if command_id is None else str(command_id))
    # An empty line would end the response early: drop those inside a multi-line result.
    lines = text.split("\n")
    body = "\n".join(lines[:1] + [line for line in lines[1:] if line.strip()])
    return f"{head} {body}\n\n" if body else f"{head}\n\n"


class GtpServer:
    """Reads commands, calls handlers, writes responses.

    `handlers` maps command names to functions of the argument list returning the result
    text (or a Stream) and raising GtpError for a failure. protocol_version, known_command,
    list_commands and quit are the server's own.
    """

    def __init__(self, handlers: dict[str, Handler], output: TextIO, log=None):
        self.handlers = dict(handlers)
        self.handlers.update({"protocol_version": lambda args: str(PROTOCOL_VERSION),
                              "known_command": self._known_command,
                              "list_commands": lambda args: "\n".join(self.command_names()),
                              "quit": lambda args: ""})
        self.output = output
        self.log = log or (lambda message: print(message, file=sys.stderr, flush=True))
        self._lines: queue.Queue[str | None] = queue.Queue()
        self.output_closed = False

    def command_names(self) -> list[str]:
        return sorted(self.handlers)

    def _known_command(self, args: list[str]) -> str:
        return "true" if len(args) == 1 and args[0] in self.handlers else "false"

    def _write(self, text: str) -> None:
        try:
            self.output.write(text)
            self.output.flush()
        except BrokenPipeError:
            raise OutputClosed from None

    def input_pending(self) -> bool:
        """True once another input line (or the end of input) has arrived."""
        return not self._lines.empty()

    def execute(self, line: str, interrupted: Callable[[], bool] | None = None) -> bool:
        """Run one input line; False after `quit`. `interrupted` ends a streaming response
        (default: the next line of `serve`'s input has arrived)."""
        if _too_long(line):
            self._write(format_response(leading_id(line[:MAX_LINE_BYTES]),
                                        f"line too long (more than {MAX_LINE_BYTES} bytes)",
                                        success=False))
            return True
        text = preprocess(line)
        if text is None:
            return True
        command = parse(text)
        if not command.name:
            self._write(format_response(command.id, "syntax error", success=False))
            return True
        handler = self.handlers.get(command.name)
        if handler is None:
            self._write(format_response(command.id, "unknown command", success=False))
            return True
        try:
            result = handler(command.args)
        except GtpError as error:
            self._write(format_response(command.id, str(error), success=False))
            return True
        except Exception as error:  # a bug must not kill the engine a GUI is talking to
            self.log(f"{command.name}: internal error\n{traceback.format_exc()}")
            self._write(format_response(command.id, f"internal error: {error}", success=False))
            return True
        if isinstance(result, Stream):
            self._stream(command, result, interrupted or self.input_pending)
            return True
        self._write(format_response(command.id, result))
        return command.name != "quit"

    def _stream(self, command: Command, stream: Stream, interrupted: Callable[[], bool]) -> None:
        self._write(("=" if command.id is None else f"={command.id}") + "\n")
        try:
            stream.run(lambda line: self._write(line.rstrip("\n") + "\n"), interrupted)
        except OutputClosed:
            raise      # not the handler's fault: the serving loop stops
        except Exception:
            self.log(f"{command.name}: internal error\n{traceback.format_exc()}")
        self._write("\n")

    def serve(self, input_stream) -> None:
        """Execute lines from a binary (or text) stream until `quit` or the end of input. A
        reader thread queues lines, so a running stream sees the next command arrive."""
        def read():
            try:
                for raw, complete in input_lines(input_stream):
                    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
                    self._lines.put(text if complete else TooLong(text))
            finally:
                self._lines.put(None)   # the end of input, also if reading failed

        threading.Thread(target=read, name="gtp-input", daemon=True).start()
        self._run_queue()

    def run_lines(self, lines: Iterable[str]) -> None:
        """Execute `lines` as if they were the whole input (a stream stops at once when
        another line follows it)."""
        self._lines = queue.Queue()
        for line in lines:
            self._lines.put(line)
        self._lines.put(None)
        self._run_queue()

    def _run_queue(self) -> None:
        try:
            while True:
                line = self._lines.get()
                if line is None or not self.execute(line):
                    return
        except OutputClosed:
            # A controller that goes away without `quit`: stop as at the end of input.
            self.output_closed = True
            self.log("gtp: the controller closed the engine's output; stopping")


def _too_long(line: str) -> bool:
    """Whether a line is answered `line too long`: its command text (what comes before its
    comment) is over MAX_LINE_BYTES and not blank (`input_lines` marks such lines TooLong)."""
    if isinstance(line, TooLong):
        return True
    text = line.split("#", 1)[0].rstrip("\n")
    return len(text) > MAX_LINE_BYTES and _BLANK_TEXT.fullmatch(text) is None


def input_lines(stream, limit: int = MAX_LINE_BYTES):
    """(text, complete) for each line of `stream` (binary or text): `text` is the line's
    command text, what comes before its first `#` (comments are dropped as they are read, so
    a comment of any length costs no memory), when that has at most `limit` bytes (characters
    for text); else its first `limit` and complete False, unless it is all blank (a blank
    line gets no answer however long). The newline is not included. Each chunk read is
    searched once, so a line costs time linear in its length however long it is."""
    empty = stream.read(0) if _descriptor(stream) is None else b""
    newline, mark = ("\n", "#") if isinstance(empty, str) else (b"\n", b"#")
    line = _Line(empty, limit)
    for chunk in _chunks(stream):
        start = 0
        while start < len(chunk):
            end = chunk.find(newline, start)
            stop = len(chunk) if end < 0 else end
            if not line.in_comment:
                comment = chunk.find(mark, start, stop)
                line.in_comment = comment >= 0
                line.add(chunk[start:comment if comment >= 0 else stop])
            if end < 0:
                break
            yield line.result()
            line = _Line(empty, limit)
            start = end + 1
    if line.size or line.overflow:
        yield line.result()


class _Line:
    """One input line's command text as it arrives: at most `limit` of it is kept, and
    whether all of it was blank is noted (a blank line is skipped whatever its length)."""

    def __init__(self, empty, limit: int):
        self.empty, self.limit = empty, limit
        self.blank_pattern = _BLANK_TEXT if isinstance(empty, str) else _BLANK_BYTES
        self.pieces: list = []
        self.size = 0
        self.overflow = False
        self.blank = True
        self.in_comment = False   # a `#` was read: the rest of the line is dropped

    def add(self, piece) -> None:
        self.blank = self.blank and self.blank_pattern.fullmatch(piece) is not None
        if self.overflow:
            return
        if self.size + len(piece) > self.limit:
            self.pieces.append(piece[:self.limit - self.size])
            self.overflow = True
            return
        self.pieces.append(piece)
        self.size += len(piece)

    def result(self):
        return self.empty.join(self.pieces), not self.overflow or self.blank


def _descriptor(stream) -> int | None:
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):
        return None


def _chunks(stream):
    """Blocks of input as they arrive. A stream with a file descriptor is read with os.read: a
    daemon thread blocked inside a buffered reader makes the interpreter abort at exit ("could
    not acquire lock for <stdin> at interpreter shutdown"), a thread blocked in os.read does
    not."""
    descriptor = _descriptor(stream)
    while True:
        chunk = os.read(descriptor, 1 << 16) if descriptor is not None else stream.read(1 << 16)
        if not chunk:
            return
        yield chunk
