"""`--contended` for the benchmarks: one busy process pinned to one core beside the benchmark.

A user's machine is never quiet. `BusyNeighbour` starts a child process that spins on the last
CPU this process may use (pinned there, like another program's hot thread), stopped with
SIGSTOP while a quiet figure is measured and resumed with SIGCONT for a contended one, so one
child serves the whole run. `quiet_and_contended` alternates the two measurements, repeat by
repeat, so that a change in the machine's load during the run shows up in both medians alike.
On an ideal 2-core machine the contended rate is half the quiet one (one core is taken).

Before each quiet measurement it waits QUIET_SETTLE_S, longer than the engines' longest
back-off on one thread (ADAPT_BACKOFF_MAX_S in kernels/adaptive_threads.h): a quiet figure
must not be lowered by the contended repeat before it (which would flatter the ratio).
"""
from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import time
from typing import Callable

QUIET_SETTLE_S = 1.2

_SPIN = """
import os, sys
os.sched_setaffinity(0, {int(sys.argv[1])})
sys.stdout.write("ready\\n"); sys.stdout.flush()
while True:
    pass
"""


class BusyNeighbour:
    """A child process spinning on one core (the last one allowed), started stopped."""

    def __init__(self, cpu: int | None = None):
        allowed = sorted(os.sched_getaffinity(0))
        self.cpu = allowed[-1] if cpu is None else cpu
        self.process = subprocess.Popen([sys.executable, "-c", _SPIN, str(self.cpu)],
                                        stdout=subprocess.PIPE, text=True)
        if self.process.stdout.readline().strip() != "ready":
            self.close()
            raise RuntimeError("the busy process did not start")
        self.pause()

    def pause(self) -> None:
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.process.send_signal(signal.SIGCONT)
        time.sleep(0.05)   # let the scheduler see it running before timing starts

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def quiet_and_contended(measure: Callable[[], float], repeats: int,
                        neighbour: BusyNeighbour) -> tuple[list[float], list[float]]:
    """`measure()` repeated quiet and beside the busy neighbour, alternately; both lists."""
    quiet, contended = [], []
    for _ in range(repeats):
        neighbour.pause()
        time.sleep(QUIET_SETTLE_S)
        quiet.append(measure())
        neighbour.resume()
        contended.append(measure())
    neighbour.pause()
    return quiet, contended


def ratio_of_medians(quiet: list[float], contended: list[float]) -> float:
    return statistics.median(contended) / statistics.median(quiet)


def load_note() -> str:
    """The 1-minute load average, for the record (it counts this benchmark's own threads)."""
    return f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs"
