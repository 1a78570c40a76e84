"""The checks on what Python hands the search's C extension: each array argument is turned
into the contiguous dtype and shape the C side reads (py_util/mcts.c), or refused with a
ValueError naming the argument, its expected dtype and shape and what it got. The C side
checks sizes again; these give the caller a message in its own terms first.
"""
from __future__ import annotations

import numpy as np


def positive_int(value, name: str, minimum: int = 1, maximum: int | None = None) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an int, got {value!r}")
    if value < minimum or (maximum is not None and value > maximum):
        bound = f"in {minimum}..{maximum}" if maximum is not None else f">= {minimum}"
        raise ValueError(f"{name} must be {bound}, got {value}")
    return int(value)


def index_array(values, name: str, length: int | None = None) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim != 1 or (array.size and array.dtype.kind not in "iu"):
        raise ValueError(f"{name} must be a 1-D integer array, got dtype {array.dtype} "
                         f"shape {array.shape}")
    if length is not None and len(array) != length:
        raise ValueError(f"{name} must have {length} items, got {len(array)}")
    return np.ascontiguousarray(array, dtype=np.int64)


def float_array(values, name: str, shape: tuple, dtype=np.float32) -> np.ndarray:
    return typed_array(values, name, shape, "fiu", "a float", dtype)


def int64_array(values, name: str, shape: tuple) -> np.ndarray:
    return typed_array(values, name, shape, "iu", "an integer", np.int64)


def typed_array(values, name: str, shape: tuple, kinds: str, what: str, dtype) -> np.ndarray:
    array = np.asarray(values)
    if array.dtype.kind not in kinds or array.shape != shape:
        raise ValueError(f"{name} must be {what} array of shape {shape}, got dtype "
                         f"{array.dtype} shape {array.shape}")
    return np.ascontiguousarray(array, dtype=dtype)


def bool_array(values, name: str, shape: tuple) -> np.ndarray:
    array = np.asarray(values)
    if array.dtype != np.bool_ or array.shape != shape:
        raise ValueError(f"{name} must be a bool array of shape {shape}, got dtype "
                         f"{array.dtype} shape {array.shape}")
    return np.ascontiguousarray(array)
