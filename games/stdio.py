"""The process's stdout kept for a protocol alone (GTP, KataGo's JSON analysis): a GUI reads
every line there as an answer, so nothing else may reach it.

`claim_stdout()` returns a text handle on the real stdout and points file descriptor 1 and
sys.stdout at stderr, where logs go, so nothing printed by a library (TensorFlow, ONNX
Runtime, a stray print) can corrupt an answer. `discard_output(handle)` points a handle whose
reader has gone at /dev/null.
"""
from __future__ import annotations

import io
import os
import sys


def claim_stdout():
    """A text handle on the real stdout for the protocol alone; file descriptor 1 and
    sys.stdout then point at stderr, so stray output of any library lands there."""
    sys.stdout.flush()
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return io.TextIOWrapper(os.fdopen(protocol_fd, "wb"), encoding="utf-8", newline="\n",
                            write_through=True)


def discard_output(output) -> None:
    """Point a closed pipe's descriptor at /dev/null: the answer it could not take is still
    buffered, and flushing it at exit would print a BrokenPipeError."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, output.fileno())
    os.close(devnull)
