"""Who owns each point under area scoring: the GUI draws the score the engine counted with it,
and self-play takes the ownership targets of the net's ownership head from it.

The engine (GoBatch.score) is the authority for the result; this only shows where its points
come from. Like the engine it scores the final position as it stands (Tromp-Taylor): every
stone on the board counts as alive, and an empty region belongs to a colour when it touches
stones of that colour only. A one-off pass over at most 361 points when a game ends, so plain
Python is fine here.
"""
from __future__ import annotations

import numpy as np


def area_ownership(board: np.ndarray) -> np.ndarray:
    """int8 (N, N): +1 black, -1 white, 0 neither, for a board of +1 / -1 / 0 stones."""
    board = np.asarray(board)
    n = board.shape[0]
    owner = board.astype(np.int8).copy()
    seen = np.zeros(board.shape, bool)
    for start in zip(*np.nonzero(board == 0)):
        if seen[start]:
            continue
        region, borders, stack = [], set(), [start]
        seen[start] = True
        while stack:
            row, col = stack.pop()
            region.append((row, col))
            for r, c in ((row - 1, col), (row + 1, col), (row, col - 1), (row, col + 1)):
                if not (0 <= r < n and 0 <= c < n):
                    continue
                if board[r, c] != 0:
                    borders.add(int(board[r, c]))
                elif not seen[r, c]:
                    seen[r, c] = True
                    stack.append((r, c))
        if len(borders) == 1:
            colour = borders.pop()
            for point in region:
                owner[point] = colour
    return owner


def area_counts(board: np.ndarray) -> tuple[int, int]:
    """(black area, white area): stones plus the empty points each colour owns alone."""
    owner = area_ownership(board)
    return int((owner == 1).sum()), int((owner == -1).sum())
