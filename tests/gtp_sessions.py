"""The GTP tests' shared helpers: `Transcript`, an engine in the test's own process behind a
`GtpServer` writing to a string (the same code path as gtp_engine.py's process, without a
process), the parser of its output, and a stand-in net. Used by test_gtp_protocol.py,
test_gtp_sgf.py, test_gtp_analysis.py and test_gtp_process.py; the tiny run they play
(`tiny_run`, `loaded`) is a fixture in conftest.py.
"""
from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np

from gtp.protocol import GtpServer
from kernels import coords

PROJECT_ROOT = Path(__file__).resolve().parent.parent
# The program's version, read here independently of gtp/version.py.
PROGRAM_VERSION = re.search(r'^version = "([^"]+)"', (PROJECT_ROOT / "pyproject.toml").read_text(),
                            re.M).group(1)
N = 5                      # the tiny preset's board
PASS = N * N


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

def uniform_net(planes):
    """A stand-in evaluator: every move equally likely, an even game."""
    actions = planes.shape[1] * planes.shape[2] + 1
    return (np.full((len(planes), actions), 1 / actions, np.float32),
            np.zeros(len(planes), np.float32))
