"""CUDA back end: a CuPy-owned slot pool driven by the kernels of go_kernels.cu.

The kernels include go_rules.h, the same rules source as the CPU back end, and are compiled by
CuPy at run time once per layout (board size, history, superko, max_moves as compile-time
constants; CuPy caches the binaries on disk). The slot layout comes from the CPU extension,
which compiles the same header, so both back ends agree on every byte of a slot.
Arrays are returned as CuPy arrays; `GoBatch.to_numpy` converts.
"""
from __future__ import annotations

import functools
from pathlib import Path

import cupy
import numpy as np

from . import _go_cpu

KERNEL_DIR = Path(__file__).resolve().parent
THREADS_PER_BLOCK = 128
KERNEL_NAMES = (
    "go_reset_kernel", "go_seed_kernel", "go_status_kernel", "go_play_kernel", "go_copy_play_kernel",
    "go_copy_kernel", "go_legal_kernel", "go_sensible_kernel", "go_board_kernel", "go_area_kernel", "go_random_kernel",
    "go_random_from_mask_kernel", "go_features_kernel", "go_set_board_kernel", "go_playout_kernel",
    "go_leaf_kernel", "go_pack_kernel",
)


def compile_options(board_size: int, history: int, superko: bool, max_moves: int) -> tuple[str, ...]:
    return (f"-DGO_N={board_size}", f"-DGO_HISTORY={history}", f"-DGO_SUPERKO={int(superko)}",
            f"-DGO_MAX_MOVES={max_moves}", f"-I{KERNEL_DIR}", "--std=c++14")


@functools.lru_cache(maxsize=None)
def _module(board_size: int, history: int, superko: bool, max_moves: int):
    source = (KERNEL_DIR / "go_kernels.cu").read_text()
    module = cupy.RawModule(code=source, options=compile_options(board_size, history, superko, max_moves),
                            name_expressions=None)
    return {name: module.get_function(name) for name in KERNEL_NAMES}


def device_name() -> str:
    """The current CUDA device's name and compute capability, e.g. "NVIDIA H100 (sm_90)"."""
    device = cupy.cuda.Device()
    name = cupy.cuda.runtime.getDeviceProperties(device.id)["name"]
    name = name.decode() if isinstance(name, bytes) else str(name)
    return f"{name} (sm_{device.compute_capability})"


class CudaBackend:
    name = "cuda"
    xp = cupy

    def __init__(self, board_size: int, history: int, superko: bool, max_moves: int,
                 num_slots: int):
        self.board_size = board_size
        self.layout = _go_cpu.Rules(board_size, history, superko, max_moves).layout()
        self.kernels = _module(board_size, history, superko, max_moves)
        self.pool = cupy.zeros((num_slots, self.layout["slot_bytes"]), dtype=cupy.uint8)

    def grow(self, num_slots: int):
        """A pool of `num_slots` slots holding the current ones first (the caller fills the
        rest)."""
        pool = cupy.zeros((num_slots, self.layout["slot_bytes"]), dtype=cupy.uint8)
        pool[:len(self.pool)] = self.pool
        self.pool = pool

    def to_numpy(self, array):
        return cupy.asnumpy(array) if isinstance(array, cupy.ndarray) else np.asarray(array)

    def _launch(self, name: str, count: int, *args):
        if count == 0:
            return
        blocks = (count + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK
        self.kernels[name]((blocks,), (THREADS_PER_BLOCK,), (self.pool, *args, np.int32(count)))

    def reset(self, slots):
        self._launch("go_reset_kernel", len(slots), slots)

    def seed(self, slots, seed: int):
        self._launch("go_seed_kernel", len(slots), slots, np.uint64(seed))

    def check(self, slots, moves):
        status = cupy.zeros(len(slots), dtype=cupy.int32)
        self._launch("go_status_kernel", len(slots), slots, moves, status)
        bad = cupy.flatnonzero(status)
        if bad.size == 0:
            return None
        index = int(bad[0])
        return index, int(status[index])

    def play(self, slots, moves):
        failure = self.check(slots, moves)
        if failure is None:
            self._launch("go_play_kernel", len(slots), slots, moves)
        return failure

    def copy_play(self, src, dst, moves):
        failure = self.check(src, moves)
        if failure is None:
            self._launch("go_copy_play_kernel", len(src), src, dst, moves)
        return failure

    def copy_play_unchecked(self, src, dst, moves):
        self._launch("go_copy_play_kernel", len(src), src, dst, moves)

    def leaf_step(self, src, dst, moves, mode: int, history: int, extra: bool, sensible: bool,
                  komi: bool, planes, mask, over, finished):
        """go_leaf_kernel over len(dst) rows (its comment says what each argument holds)."""
        self._launch("go_leaf_kernel", len(dst), src, dst, moves, np.int32(mode),
                     np.int32(history), np.int32(extra), np.int32(sensible), np.int32(komi),
                     planes, mask, over, finished)

    def pack(self, policy, value, finished, logits: bool, block, count: int):
        """go_pack_kernel over `count` rows of an evaluation block."""
        self._launch("go_pack_kernel", count, policy, value, finished, np.int32(logits), block)

    def copy(self, src, dst):
        self._launch("go_copy_kernel", len(src), src, dst)

    def legal(self, slots):
        out = cupy.empty((len(slots), self.board_size ** 2 + 1), dtype=cupy.bool_)
        self._launch("go_legal_kernel", len(slots), slots, out)
        return out

    def sensible(self, slots):
        out = cupy.empty((len(slots), self.board_size ** 2 + 1), dtype=cupy.bool_)
        self._launch("go_sensible_kernel", len(slots), slots, out)
        return out

    def board(self, slots):
        out = cupy.empty((len(slots), self.board_size, self.board_size), dtype=cupy.int8)
        self._launch("go_board_kernel", len(slots), slots, out)
        return out

    def area(self, slots):
        out = cupy.empty(len(slots), dtype=cupy.int64)
        self._launch("go_area_kernel", len(slots), slots, out)
        return out

    def random(self, slots, include_pass: bool):
        out = cupy.empty(len(slots), dtype=cupy.int64)
        self._launch("go_random_kernel", len(slots), slots, out, np.int32(include_pass))
        return out

    def random_from_mask(self, slots, legal, include_pass: bool):
        out = cupy.empty(len(slots), dtype=cupy.int64)
        self._launch("go_random_from_mask_kernel", len(slots), slots, legal, out, np.int32(include_pass))
        return out

    def playouts(self, slots):
        scratch = cupy.empty((len(slots), self.layout["slot_bytes"]), dtype=cupy.uint8)
        out = cupy.empty(len(slots), dtype=cupy.int64)
        self._launch("go_playout_kernel", len(slots), slots, scratch, out)
        return out

    def features(self, slots, history: int, extra: bool, komi: bool, channels: int):
        out = cupy.empty((len(slots), self.board_size, self.board_size, channels), dtype=cupy.float32)
        self._launch("go_features_kernel", len(slots), slots, np.int32(history), np.int32(extra),
                     np.int32(komi), out)
        return out

    def set_board(self, slots, stones, to_play):
        bad_side = cupy.flatnonzero((to_play != 1) & (to_play != -1))
        if bad_side.size:
            return int(bad_side[0]), 3
        status = cupy.zeros(len(slots), dtype=cupy.int32)
        self._launch("go_set_board_kernel", len(slots), slots, stones, to_play, status)
        bad = cupy.flatnonzero(status)
        if bad.size == 0:
            return None
        index = int(bad[0])
        return index, int(status[index])
