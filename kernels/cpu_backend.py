"""CPU back end: a NumPy-owned slot pool driven by the C extension `kernels._go_cpu`.

Every method takes validated int64 slot (and move) arrays and returns NumPy arrays; argument
checking and error messages belong to `GoBatch`.
"""
from __future__ import annotations

import numpy as np

from . import _go_cpu


class CpuBackend:
    name = "cpu"
    xp = np

    def __init__(self, board_size: int, history: int, superko: bool, max_moves: int,
                 num_slots: int, num_threads: int = 0, adaptive_threads: bool = True):
        self.board_size = board_size
        self.rules = _go_cpu.Rules(board_size, history, superko, max_moves, num_threads,
                                   adaptive_threads)
        self.layout = self.rules.layout()
        # pool[s] is slot s: a GoHeader then the arrays described in go_rules.h.
        self.pool = np.zeros((num_slots, self.layout["slot_bytes"]), dtype=np.uint8)

    def grow(self, num_slots: int):
        """A pool of `num_slots` slots holding the current ones first (the caller fills the
        rest)."""
        pool = np.zeros((num_slots, self.layout["slot_bytes"]), dtype=np.uint8)
        pool[:len(self.pool)] = self.pool
        self.pool = pool

    def to_numpy(self, array):
        return array

    def asarray(self, array, dtype):
        return np.ascontiguousarray(array, dtype=dtype)

    def thread_stats(self) -> dict:
        parallel, serial, failed = self.rules.thread_stats()
        return {"parallel_runs": parallel, "serial_runs": serial, "failed_runs": failed}

    def reset(self, slots):
        self.rules.reset(self.pool, slots)

    def seed(self, slots, seed: int):
        self.rules.seed(self.pool, slots, seed)

    def play(self, slots, moves):
        return self.rules.play(self.pool, slots, moves)

    def copy_play(self, src, dst, moves):
        return self.rules.copy_play(self.pool, src, dst, moves)

    def copy(self, src, dst):
        self.rules.copy(self.pool, src, dst)

    def legal(self, slots):
        out = np.empty((len(slots), self.board_size ** 2 + 1), dtype=np.bool_)
        self.rules.legal(self.pool, slots, out)
        return out

    def sensible(self, slots):
        out = np.empty((len(slots), self.board_size ** 2 + 1), dtype=np.bool_)
        self.rules.sensible(self.pool, slots, out)
        return out

    def board(self, slots):
        out = np.empty((len(slots), self.board_size, self.board_size), dtype=np.int8)
        self.rules.board(self.pool, slots, out)
        return out

    def area(self, slots):
        out = np.empty(len(slots), dtype=np.int64)
        self.rules.area(self.pool, slots, out)
        return out

    def random(self, slots, include_pass: bool):
        out = np.empty(len(slots), dtype=np.int64)
        self.rules.random(self.pool, slots, out, include_pass)
        return out

    def random_from_mask(self, slots, legal, include_pass: bool):
        out = np.empty(len(slots), dtype=np.int64)
        self.rules.random_from_mask(self.pool, slots, legal, out, include_pass)
        return out

    def playouts(self, slots):
        out = np.empty(len(slots), dtype=np.int64)
        self.rules.playouts(self.pool, slots, out)
        return out

    def features(self, slots, history: int, extra: bool, komi: bool, channels: int):
        out = np.empty((len(slots), self.board_size, self.board_size, channels), dtype=np.float32)
        self.rules.features(self.pool, slots, history, extra, komi, out)
        return out

    def set_board(self, slots, stones, to_play):
        return self.rules.set_board(self.pool, slots, stones, to_play)
