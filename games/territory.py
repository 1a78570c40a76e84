"""Who owns each point under area scoring: the GUI draws the score the engine counted with it,
and self-play takes the ownership targets of the net's ownership head from it.

Also whether a position is settled enough for area scoring to count what it is worth (the GTP
engine passes back only then), and the groups of stones (GTP's final_status_list).

The engine (GoBatch.score) is the authority for the result; this only shows where its points
come from. Like the engine it scores the final position as it stands (Tromp-Taylor): every
stone on the board counts as alive, and an empty region belongs to a colour when it touches
stones of that colour only. A one-off pass over at most 361 points when a game ends, so plain
Python is fine here.
"""
from __future__ import annotations

import numpy as np

# The net's ownership (in [-1, 1], i.e. a 85% chance or more) every point needs for the engine
# to pass back: on a finished 9x9 position the shipped net gives 0.8 to 1 (corners of small
# eyes the least), on an opening below 0.75.
SETTLED_OWNERSHIP = 0.7


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


def position_settled(board: np.ndarray, ownership: np.ndarray | None = None) -> bool:
    """Whether area scoring of `board` (+1 black, -1 white, 0 empty) as it stands counts what
    the game is worth, so that passing may end it: every empty point touches stones of one
    colour only (no neutral point, no stone left standing in the other side's area), and, given
    the net's `ownership` (float (N, N) in [-1, 1], Black's view), the net expects every point
    to end with that owner, each with at least SETTLED_OWNERSHIP (no invasion or dead group
    left). Without ownership only the shapes are checked; seki points are never settled."""
    owner = area_ownership(board)
    if not owner.all():
        return False
    return ownership is None or bool((ownership * owner >= SETTLED_OWNERSHIP).all())


def stone_groups(board: np.ndarray) -> list[list[int]]:
    """Flat points of every connected group of stones, each sorted, in board order."""
    n = board.shape[0]
    seen = np.zeros(n * n, bool)
    flat = board.ravel()
    groups = []
    for start in range(n * n):
        if flat[start] == 0 or seen[start]:
            continue
        group, stack = [], [start]
        seen[start] = True
        while stack:
            point = stack.pop()
            group.append(point)
            row, col = divmod(point, n)
            for r, c in ((row - 1, col), (row + 1, col), (row, col - 1), (row, col + 1)):
                neighbour = r * n + c
                if 0 <= r < n and 0 <= c < n and not seen[neighbour] \
                        and flat[neighbour] == flat[start]:
                    seen[neighbour] = True
                    stack.append(neighbour)
        groups.append(sorted(group))
    return groups
