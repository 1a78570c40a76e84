"""A search step's evaluation on the CUDA back end in one round trip, with no other host sync.

`SearchingGames` uses it whenever its rules run on CUDA (without playouts). Per step:

    1 host-to-device copy   the leaves' source slots, slots and actions, int64 (3, k), from
                            pinned host memory, asynchronous
    1 kernel                go_leaf_kernel: copy, play, move mask, game-over flag, finished
                            result and input planes of every leaf (kernels/go_kernels.cu)
    the net                 a fixed sequence of kernels (architectures/array_net.py)
    1 kernel                go_pack_kernel: softmax and finished values into the block below
    1 device-to-host copy   the block, into pinned host memory; the step's only wait

The block the host reads, k leaves and A actions, in this order (the layout the C tree's
arguments are cut from; `SearchingGames._download` builds the same one on other paths):

    priors   float32 (k, A)   probabilities over all moves (the tree masks and renormalises)
    values   float32 (k,)     for the side to move at the leaf; a finished game's result
    legal    uint8 (k, A)     the move mask (sensible moves, or legal ones)
    terminal uint8 (k,)       1 where the game is over

Every buffer is allocated for the largest step seen and reused; all work runs on one
stream of its own. The slots and moves come from the search's own tree and legal
masks, so nothing is checked here (GoBatch's public methods check what callers give them).
"""
from __future__ import annotations

import numpy as np

# What go_leaf_kernel does to each row before evaluating it.
EVALUATE, COPY, COPY_PLAY = 0, 1, 2


def block_bytes(rows: int, actions: int) -> int:
    return rows * (5 * actions + 5)


def block_views(block, rows: int, actions: int):
    """(priors, legal, values, terminal): views of an evaluation block (layout above) of `rows`
    leaves, a host or device uint8 array; the tree takes them in this order."""
    values, legal, terminal = 4 * rows * actions, 4 * rows * (actions + 1), rows * (5 * actions + 4)
    return (block[:values].view(np.float32).reshape(rows, actions),
            block[legal:terminal].view(np.bool_).reshape(rows, actions),
            block[values:legal].view(np.float32),
            block[terminal:].view(np.bool_))


def in_namespace(xp, array):
    """An evaluator's output as an array of `xp`: device data is taken over by DLPack (no
    copy), host data is copied to the engine (only where a host evaluator meets CUDA)."""
    if isinstance(array, xp.ndarray):
        return array
    if hasattr(array, "__dlpack__") and not isinstance(array, np.ndarray):
        return xp.from_dlpack(array)
    return xp.asarray(array)


class DeviceEvaluation:
    """Evaluates positions of a CUDA `GoBatch` with `evaluator`, one round trip a call.

    `evaluator`: an `ArrayNet` on CuPy (its logits go straight to the pack kernel), or any
    evaluator of games/search.py (its probabilities are taken over by DLPack, or copied when it
    answers on the host)."""

    def __init__(self, go, evaluator, history: int, sensible: bool):
        import cupy  # deferred: the CUDA back end's namespace, a GPU extra
        import cupyx

        self._cupy, self._empty_pinned = cupy, cupyx.empty_pinned
        self.go = go
        self.evaluator = evaluator
        self.history = history
        self.sensible = bool(sensible)
        self.channels = go.num_feature_planes(history)
        self.actions = go.num_actions
        # A blocking stream: an evaluator that answers on the host is copied back by CuPy's
        # synchronous copies on the legacy default stream, which such a stream waits for.
        self.stream = cupy.cuda.Stream()
        self._on_device_logits = (hasattr(evaluator, "logits_and_value")
                                  and getattr(evaluator, "xp", None) is cupy)
        self._capacity = 0

    def _reserve(self, rows: int) -> None:
        if rows <= self._capacity:
            return
        cupy, n = self._cupy, self.go.board_size
        rows = max(rows, 2 * self._capacity)
        self._upload_host = self._empty_pinned(3 * rows, np.int64)
        self._upload = cupy.empty(3 * rows, np.int64)
        self._planes = cupy.empty((rows, n, n, self.channels), np.float32)
        self._finished = cupy.empty(rows, np.float32)
        self._block = cupy.empty(block_bytes(rows, self.actions), np.uint8)
        self._download_host = self._empty_pinned(block_bytes(rows, self.actions), np.uint8)
        self._capacity = rows

    def evaluate(self, mode: int, src, dst, moves=None):
        """(priors, legal, values, terminal), host views valid until the next call, of slots
        `dst` after `mode` (EVALUATE, COPY from `src`, COPY_PLAY `moves` from `src`); host int
        arrays of one length k."""
        k, a = len(dst), self.actions
        self._reserve(max(k, 1))
        upload = self._upload_host[:3 * k].reshape(3, k)
        upload[0] = src if src is not None else dst
        upload[1] = dst
        upload[2] = moves if moves is not None else 0
        cupy, backend = self._cupy, self.go._backend
        with self.stream:
            device = self._upload[:3 * k]
            device.set(upload.reshape(-1), stream=self.stream)
            block = self._block[:block_bytes(k, a)]
            _, legal, _, terminal = block_views(block, k, a)
            planes = self._planes[:k]
            finished = self._finished[:k]
            backend.leaf_step(device[:k], device[k:2 * k], device[2 * k:], mode, self.history,
                              self.go.extra_features, self.sensible, self.go.komi_input, planes,
                              legal, terminal, finished)
            if self._on_device_logits:
                policy, value = self.evaluator.logits_and_value(planes)
            else:
                policy, value = self.evaluator(planes)
                policy, value = in_namespace(cupy, policy), in_namespace(cupy, value)
            backend.pack(cupy.ascontiguousarray(policy, dtype=np.float32),
                         cupy.ascontiguousarray(value, dtype=np.float32).reshape(-1), finished,
                         self._on_device_logits, block, k)
            host = self._download_host[:block_bytes(k, a)]
            block.get(stream=self.stream, out=host)   # waits for the stream: the one sync
        return block_views(host, k, a)
