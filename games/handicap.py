"""Where handicap stones go: GTP's fixed placement (the GTP engine's `fixed_handicap`, the
GUI's handicap games) and a random free placement (self-play's handicap games)."""
from __future__ import annotations

import numpy as np

from kernels import coords


def fixed_handicap_vertices(board_size: int, stones: int) -> list[str] | None:
    """The vertices of GTP's fixed handicap placement (corners, then sides, then the centre;
    the third line below 12x12, the fourth from there), None where it is not defined: boards
    below 7x7, fewer than 2 stones, more than 4 on even or 7x7 boards, more than 9."""
    most = 9 if board_size % 2 and board_size >= 9 else 4
    if board_size < 7 or not 2 <= stones <= most:
        return None
    low = 3 if board_size >= 12 else 2             # columns and rows counted from 0
    high, mid = board_size - 1 - low, board_size // 2
    points = [(low, low), (high, high), (low, high), (high, low)][:min(stones, 4)]
    if stones >= 6:
        points += [(low, mid), (high, mid)]
    if stones >= 8:
        points += [(mid, low), (mid, high)]
    if stones % 2 and stones >= 5:
        points.append((mid, mid))
    return [coords.to_gtp(coords.to_flat(board_size - 1 - row, col, board_size), board_size)
            for col, row in points]                 # row: GTP's row number - 1


def random_handicap_points(board_size: int, stones: int, rng: np.random.Generator) -> np.ndarray:
    """`stones` distinct flat points drawn uniformly off the first line (boards of 5x5 or
    more: Config.handicap_share needs one), for a self-play game started from free handicap
    stones."""
    n = board_size
    lines = np.arange(1, n - 1)
    points = (lines[:, None] * n + lines[None, :]).reshape(-1)
    return np.sort(rng.choice(points, size=min(stones, len(points)), replace=False))
