"""The net in a child process, so that no net back end loads into the window's process.

Why: the net once ran in TensorFlow, whose `libtensorflow_framework.so.2` carries its own
copy of LLVM and is loaded with global symbol binding. When SDL opens a window on Linux it
probes OpenGL, and with Mesa's software renderer (llvmpipe: virtual machines, remote
desktops, machines without a GPU driver) Mesa's calls into its LLVM resolved into
TensorFlow's copy: SIGSEGV inside `pygame.display.set_mode`. With the net in a child
process, the window's process holds pygame, the rules and the search tree and nothing else,
whatever SDL's video driver, renderer or environment variables. `open_net` now plays through
ONNX Runtime without TensorFlow; the child stays, so that whatever a back end loads (its own
libraries, its threads) stays out of the window's process.

    net = NetProcess("runs/my9x9", checkpoint=None)   # starts the child; open_net runs there
    net.label                                          # "my9x9 iteration 12"
    policy, value = net(planes)             # an evaluator for SearchingGames
    net.has_aux_heads                       # whether the net has ownership and score heads
    ownership, score = net.ownership(planes)   # CompiledNet.ownership, run in the child
    net.close()

The parent talks to the child over a socket pair with `multiprocessing.connection`
(pickled NumPy arrays); one evaluation of a 9x9 position costs about 0.1 ms of round trip.
The child exits when the parent closes the socket or dies, so it never outlives the GUI.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from multiprocessing.connection import Connection
from pathlib import Path

import numpy as np

PROJECT_ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT = 300.0        # seconds for the child to open the net
CHILD = ("import sys; sys.path.insert(0, sys.argv[1]); "
         "from gui.net_process import serve; sys.exit(serve(int(sys.argv[2])))")


class NetProcessError(Exception):
    """The net's process refused the checkpoint, failed, or ended; the message says which."""


class NetProcess:
    """An evaluator (planes (k, N, N, C) -> (policy (k, A), value (k,))) whose net runs in a
    child Python process. Thread-safe: one evaluation at a time."""

    def __init__(self, source: str, checkpoint: int | None = None, python: str = sys.executable,
                 timeout: float = START_TIMEOUT, inference: str = "float32"):
        parent_end, child_end = socket.socketpair()
        env = dict(os.environ)
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        try:
            self.process = subprocess.Popen(
                [python, "-c", CHILD, str(PROJECT_ROOT), str(child_end.fileno())],
                pass_fds=(child_end.fileno(),), stdin=subprocess.DEVNULL,
                stdout=sys.__stderr__.fileno() if sys.__stderr__ else subprocess.DEVNULL,
                env=env)
        except OSError as error:
            parent_end.close()
            raise NetProcessError(f"could not start the net's process ({error})") from None
        finally:
            child_end.close()
        self._connection = Connection(parent_end.detach())
        self._lock = threading.Lock()
        self.closed = False
        try:
            self._connection.send(("load", str(source), checkpoint, inference))
            if not self._connection.poll(timeout):
                raise NetProcessError(f"the net's process did not load the net in {timeout:g} s")
            status, payload = self._connection.recv()
        except (EOFError, OSError):
            self.close()
            raise NetProcessError(self._ended()) from None
        except NetProcessError:
            self.close()
            raise
        if status != "ready":
            self.close()
            raise NetProcessError(payload)
        self.label, self.has_aux_heads = payload

    def __call__(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self._ask(np.ascontiguousarray(planes, dtype=np.float32))

    def ownership(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(ownership (k, N, N), score (k,)) of the net's auxiliary heads, as
        `CompiledNet.ownership`; NetProcessError for a net without them."""
        return self._ask(("ownership", np.ascontiguousarray(planes, dtype=np.float32)))

    def with_score(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(policy, value, score) in one pass, as `CompiledNet.with_score`, for a search with
        score utility; NetProcessError for a net without the score head."""
        return self._ask(("score", np.ascontiguousarray(planes, dtype=np.float32)))

    def _ask(self, request):
        with self._lock:
            if self.closed:
                raise NetProcessError("the net's process is closed")
            try:
                self._connection.send(request)
                status, payload = self._connection.recv()
            except (EOFError, OSError):
                raise NetProcessError(self._ended()) from None
        if status != "ok":
            raise NetProcessError(payload)
        return payload

    def _ended(self) -> str:
        try:
            code = self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "the net's process stopped answering"
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"the net's process was killed by {name}"
        return f"the net's process ended (exit status {code}); its messages are above"

    def close(self) -> None:
        """Ask the child to exit and wait for it (killed after a few seconds)."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            try:
                self._connection.send(None)
            except OSError:
                pass
            self._connection.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def serve(fd: int) -> int:
    """The child's loop: load the net, then answer evaluations until the parent goes away."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)     # Ctrl-C is the GUI's to handle
    connection = Connection(fd)
    try:
        request = connection.recv()
        if request is None:
            return 0
        _, source, checkpoint, inference = request
        from training.nets import NetOpenError, open_net  # the child alone loads the net
        try:
            opened = open_net(source, checkpoint=checkpoint, batch_size=1, inference=inference,
                              log=lambda message: print(message, file=sys.stderr, flush=True))
            net = opened.net
        except NetOpenError as error:
            connection.send(("error", str(error)))
            return 2
        except Exception as error:        # reported to the parent, which prints one line
            connection.send(("error", f"the net could not be built: "
                                      f"{type(error).__name__}: {error}"))
            return 2
        connection.send(("ready", (opened.label, net.has_aux_heads)))
        while True:
            request = connection.recv()
            if request is None:
                return 0
            try:
                if isinstance(request, tuple):      # ("ownership" or "score", planes)
                    ask = net.ownership if request[0] == "ownership" else net.with_score
                    answer = ("ok", ask(request[1]))
                else:
                    answer = ("ok", net(request))
            except ValueError as error:             # a net without the heads, bad planes
                answer = ("error", str(error))
            except Exception as error:
                answer = ("error", f"the net failed: {type(error).__name__}: {error}")
            connection.send(answer)
    except (EOFError, OSError):       # the parent closed the socket or died
        return 0
