"""How an entry script that runs until stopped (the trainer, a match that follows a run)
stops on a signal: SIGTERM, SIGINT (Ctrl-C) and SIGHUP raise `Stopped` in the main thread,
the script catches it where it can say in one line what was dropped, and exits 128 + the
signal's number, as a shell reports a process a signal ended.

An exception raised at an arbitrary point can be lost: Cython's module set-up ignores errors
while it registers its types, and a SIGTERM that arrived while numpy.random was first
imported was seen to vanish so, the match playing on to its end. So the long loops also call
`check_stop()` at points where stopping is safe (each move of a match, each iteration of the
trainer, each match of a follower), which raises the Stopped again if a stop signal came.
"""
from __future__ import annotations

import signal

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Stopped(BaseException):
    """A stop signal arrived: the work in flight is dropped and the script exits 128 +
    signum. A BaseException, so that no `except Exception` on the way up swallows it."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


class _Received:
    """The process's first stop signal (signal handlers are the process's, so this is too):
    None until one arrives."""
    signum: int | None = None


_RECEIVED = _Received()


def stop_on_signals() -> None:
    """SIGTERM, SIGINT and SIGHUP raise Stopped. Python runs the handler between bytecodes,
    so a net call or a write in flight finishes first; files are written atomically either
    way. Once stopping, further signals are ignored, so the cleanup (a lock, child processes,
    Ray's actors) is not cut short by a second Ctrl-C or a forwarding run.sh."""
    def handler(signum, frame):
        for number in STOP_SIGNALS:
            signal.signal(number, signal.SIG_IGN)
        _RECEIVED.signum = signum
        raise Stopped(signum)
    for number in STOP_SIGNALS:
        signal.signal(number, handler)


def check_stop() -> None:
    """Raise Stopped where a stop signal has arrived (its first Stopped may have been lost on
    the way up); nothing otherwise, and nothing in a process that installed no handler."""
    if _RECEIVED.signum is not None:
        raise Stopped(_RECEIVED.signum)
