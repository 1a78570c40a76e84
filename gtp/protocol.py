"""GTP version 2 framing: input preprocessing, command parsing, responses, and the serving
loop with streaming (analysis) responses. Knows nothing of Go.

Spec: https://www.lysator.liu.se/~gunnar/gtp/gtp2-spec-draft2/gtp2-spec.html
- Input (3.1): control characters other than HT and LF are removed, everything from `#` on is
  a comment, HT becomes a space, lines then empty or blank are skipped without a response.
- A command is `[id] name [arguments]`; id is an unsigned integer and is echoed in the
  response: `=id result` or `?id message`, each ended by an empty line. A response never
  contains an empty line itself, so multi-line results have theirs removed.
- Unknown names answer `? unknown command`; a line holding only an id answers
  `?id syntax error`.
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

PROTOCOL_VERSION = 2


class GtpError(Exception):
    """A failure response: the message is sent after `?`."""


@dataclass(frozen=True)
class Command:
    id: int | None
    name: str
    args: list[str]


class Stream:
    """A streaming result: `run(write_line, interrupted)` writes lines (each flushed) until
    `interrupted()` turns true, i.e. until the next input line has arrived."""

    def __init__(self, run: Callable[[Callable[[str], None], Callable[[], bool]], None]):
        self.run = run


Handler = Callable[[list[str]], "str | Stream"]


def preprocess(line: str) -> str | None:
    """The command text of one input line, or None when the line is to be skipped."""
    text = _CONTROL.sub("", line).split("#", 1)[0].replace("\t", " ")
    return text if text.strip() else None


def parse(text: str) -> Command:
    """A preprocessed, non-blank line as a Command; name "" when only an id was given."""
    words = text.split()
    command_id = None
    if _ID.fullmatch(words[0]):
        command_id = int(words[0])
        words = words[1:]
    return Command(command_id, words[0] if words else "", words[1:])


def format_response(command_id: int | None, text: str, success: bool = True) -> str:
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

    def command_names(self) -> list[str]:
        return sorted(self.handlers)

    def _known_command(self, args: list[str]) -> str:
        return "true" if len(args) == 1 and args[0] in self.handlers else "false"

    def _write(self, text: str) -> None:
        self.output.write(text)
        self.output.flush()

    def input_pending(self) -> bool:
        """True once another input line (or the end of input) has arrived."""
        return not self._lines.empty()

    def execute(self, line: str, interrupted: Callable[[], bool] | None = None) -> bool:
        """Run one input line; False after `quit`. `interrupted` ends a streaming response
        (default: the next line of `serve`'s input has arrived)."""
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
        except Exception:
            self.log(f"{command.name}: internal error\n{traceback.format_exc()}")
        self._write("\n")

    def serve(self, input_stream) -> None:
        """Execute lines from a binary (or text) stream until `quit` or the end of input. A
        reader thread queues lines, so a running stream sees the next command arrive."""
        def read():
            try:
                for raw in _input_lines(input_stream):
                    self._lines.put(raw.decode("utf-8", "replace") if isinstance(raw, bytes)
                                    else raw)
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
        while True:
            line = self._lines.get()
            if line is None or not self.execute(line):
                return


def _input_lines(stream):
    """Lines of `stream`. A stream with a file descriptor is read with os.read: a daemon
    thread blocked inside a buffered reader makes the interpreter abort at exit ("could not
    acquire lock for <stdin> at interpreter shutdown"), a thread blocked in os.read does not."""
    try:
        descriptor = stream.fileno()
    except (AttributeError, OSError, ValueError):
        yield from iter(stream.readline, stream.read(0))
        return
    pending = b""
    while True:
        chunk = os.read(descriptor, 1 << 16)
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield line + b"\n"
    if pending:
        yield pending
