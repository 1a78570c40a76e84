"""The 8 symmetries of the square board (the dihedral group D4), batched.

Index convention, on the board as displayed (row 0 at the top, column 0 at the left, the
layout `GoBatch` uses, point `p = row * N + col`, pass `N * N`):

    symmetry  image of the board                                 NumPy, one (N, N) plane
    0         identity                                           b
    1         rotated 90 degrees counter-clockwise               np.rot90(b, 1)
    2         rotated 180 degrees                                np.rot90(b, 2)
    3         rotated 270 degrees counter-clockwise (90 cw)      np.rot90(b, 3)
    4         transposed (mirrored in the main diagonal)         b.T
    5..7      transposed, then rotated as 1..3                   np.rot90(b.T, k - 4)

So symmetry `k` is "transpose if k >= 4, then rotate k % 4 quarter turns counter-clockwise".
Rotations 1 and 3 are each other's inverse; 0, 2 and every k >= 4 are their own inverse
(`inverse(k)`). `compose(a, b)` is the single symmetry equal to applying `b` first, then `a`.

Planes (B, N, N, C) and policies (B, N*N+1) are transformed together by the same per-sample
index array `symmetry` (B,) (or one int for the whole batch); pass stays pass. A stone at
point p of sample i and policy mass at p land on the same point `transform_points(p, s, N)`.
To train on a random symmetry: `transform_planes(x, s)`, `transform_policy(pi, s)` with
`s = rng.integers(0, 8, B)`; to evaluate under one, transform the planes with `s` and bring
the net's policy back with `transform_policy(policy, inverse(s))`.

The work is one gather per call, driven by a cached (8, N*N+1) table of source points: no
loop over samples or symmetries.
"""
from __future__ import annotations

import functools
import math

import numpy as np

NUM_SYMMETRIES = 8


@functools.lru_cache(maxsize=None)
def source_points(board_size: int) -> np.ndarray:
    """int64 (8, N*N+1): `source_points(N)[k, q]` is the point whose content lands on q.

    Column N*N (pass) maps to itself. Read-only; cached per board size.
    """
    if int(board_size) != board_size or board_size < 1:
        raise ValueError(f"board_size must be a positive integer, got {board_size!r}")
    points = np.arange(board_size * board_size).reshape(board_size, board_size)
    table = np.empty((NUM_SYMMETRIES, board_size * board_size + 1), dtype=np.int64)
    for k in range(NUM_SYMMETRIES):
        image = np.rot90(points.T if k >= 4 else points, k % 4)
        table[k, :-1] = image.ravel()
        table[k, -1] = board_size * board_size
    table.setflags(write=False)
    return table


@functools.lru_cache(maxsize=None)
def destination_points(board_size: int) -> np.ndarray:
    """int64 (8, N*N+1): `destination_points(N)[k, p]` is where point (or pass) p lands."""
    source = source_points(board_size)
    table = np.argsort(source, axis=1)
    table.setflags(write=False)
    return table


def _symmetry_indices(symmetry, batch: int) -> np.ndarray:
    symmetry = np.asarray(symmetry)
    if not np.issubdtype(symmetry.dtype, np.integer):
        raise ValueError(f"symmetry must be integers in 0..7, got dtype {symmetry.dtype}")
    if symmetry.ndim == 0:
        symmetry = np.full(batch, symmetry)
    if symmetry.shape != (batch,):
        raise ValueError(f"symmetry must be one int or shape ({batch},), got {symmetry.shape}")
    if symmetry.size and (symmetry.min() < 0 or symmetry.max() >= NUM_SYMMETRIES):
        raise ValueError("symmetry indices must lie in 0..7")
    return symmetry


def transform_planes(planes: np.ndarray, symmetry) -> np.ndarray:
    """Apply symmetry[i] to planes[i]; planes (B, N, N, C), any dtype. Returns a new array."""
    planes = np.asarray(planes)
    if planes.ndim != 4 or planes.shape[1] != planes.shape[2]:
        raise ValueError(f"planes must be (B, N, N, C), got shape {planes.shape}")
    return take_planes(planes, np.arange(len(planes)), symmetry)


def take_planes(stored: np.ndarray, index: np.ndarray, symmetry) -> np.ndarray:
    """stored[index[i]] under symmetry[i]: stored (M, N, N, ...) (planes, or ownership
    (M, N, N)), index (B,) ints into it; (B, N, N, ...) of stored's dtype. One gather, so a
    replay buffer's batch is neither copied nor converted before it is transformed."""
    stored, index = np.asarray(stored), np.asarray(index)
    board_size = stored.shape[1]
    symmetry = _symmetry_indices(symmetry, len(index))
    points = board_size * board_size
    source = source_points(board_size)[symmetry, :-1]                      # (B, N*N)
    # Rows of one point's values, taken by flat row number: np.take of whole rows is several
    # times faster than indexing with two broadcast index arrays.
    rows = stored.reshape(len(stored) * points, math.prod(stored.shape[3:]))
    taken = np.take(rows, (index[:, None] * points + source).ravel(), axis=0)
    return taken.reshape(len(index), *stored.shape[1:])


def transform_policy(policy: np.ndarray, symmetry) -> np.ndarray:
    """Apply symmetry[i] to policy[i]; policy (B, N*N+1) (pass last, kept). Any dtype."""
    policy = np.asarray(policy)
    if policy.ndim != 2:
        raise ValueError(f"policy must be (B, N*N+1), got shape {policy.shape}")
    return take_policy(policy, np.arange(len(policy)), symmetry)


def take_policy(stored: np.ndarray, index: np.ndarray, symmetry) -> np.ndarray:
    """stored[index[i]] under symmetry[i]: stored (M, N*N+1) policies (pass last, kept),
    index (B,) ints into it; (B, N*N+1) of stored's dtype, in one gather."""
    stored, index = np.asarray(stored), np.asarray(index)
    actions = stored.shape[1]
    board_size = int(round(np.sqrt(actions - 1)))
    if board_size < 1 or board_size * board_size + 1 != actions:
        raise ValueError(f"policy width {actions} is not N*N+1 for any board size N")
    symmetry = _symmetry_indices(symmetry, len(index))
    flat = (index[:, None] * actions + source_points(board_size)[symmetry]).ravel()
    return np.take(stored.reshape(-1), flat).reshape(len(index), actions)


def transform_points(points, symmetry, board_size: int) -> np.ndarray:
    """Where points (int array, pass = N*N allowed) land under symmetry (same shape or int)."""
    points = np.asarray(points)
    symmetry = np.asarray(symmetry)
    if points.size and (points.min() < 0 or points.max() > board_size * board_size):
        raise ValueError(f"points must lie in 0..{board_size * board_size} (pass)")
    if symmetry.size and (symmetry.min() < 0 or symmetry.max() >= NUM_SYMMETRIES):
        raise ValueError("symmetry indices must lie in 0..7")
    return destination_points(board_size)[symmetry, points]


_INVERSE = np.array([0, 3, 2, 1, 4, 5, 6, 7], dtype=np.int64)


def inverse(symmetry):
    """The symmetry that undoes `symmetry` (int or int array, same shape)."""
    return _INVERSE[np.asarray(symmetry)]


@functools.lru_cache(maxsize=None)
def _composition_table() -> np.ndarray:
    # Any board size >= 2 with asymmetric labels tells the 8 symmetries apart; 3 suffices.
    source = source_points(3)
    lookup = {tuple(row): k for k, row in enumerate(source)}
    table = np.empty((NUM_SYMMETRIES, NUM_SYMMETRIES), dtype=np.int64)
    for a in range(NUM_SYMMETRIES):
        for b in range(NUM_SYMMETRIES):
            # Content at q after "b then a" comes from source_b[source_a[q]].
            table[a, b] = lookup[tuple(source[b][source[a]])]
    table.setflags(write=False)
    return table


def compose(a, b):
    """The symmetry equal to applying `b` first, then `a` (ints or broadcastable arrays)."""
    return _composition_table()[np.asarray(a), np.asarray(b)]
