"""Where the board's points are on the screen, and which point a pixel belongs to.

The board is drawn in a square of `size` pixels whose top-left corner is `origin`. A margin of
`margin` pixels on every side holds the coordinate labels; inside it the square is cut into
N x N cells and each point (intersection) sits at the centre of its cell. A click anywhere in
a point's cell selects that point; a click on the margin selects nothing. Points are the flat
indices of kernels/coords.py (row 0 at the top); the labels come from its GTP vertices.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from kernels import coords


@dataclass(frozen=True)
class BoardGeometry:
    board_size: int
    size: int = 680                    # pixels of the square holding the board and its labels
    origin: tuple[int, int] = (0, 0)
    margin: int = 28

    def __post_init__(self):
        coords.check_board_size(self.board_size)
        if self.size - 2 * self.margin < 2 * self.board_size:
            raise ValueError(f"{self.size} pixels are too few for a {self.board_size}x"
                             f"{self.board_size} board with a {self.margin}-pixel margin")

    @property
    def cell(self) -> float:
        return (self.size - 2 * self.margin) / self.board_size

    @property
    def stone_radius(self) -> int:
        return max(2, int(self.cell * 0.47))

    def point_to_pixel(self, row: int, col: int) -> tuple[int, int]:
        """Pixel (x, y) of the intersection at (row, col)."""
        x0, y0 = self.origin
        return (round(x0 + self.margin + (col + 0.5) * self.cell),
                round(y0 + self.margin + (row + 0.5) * self.cell))

    def move_to_pixel(self, move: int) -> tuple[int, int] | None:
        """Pixel of a flat move; None for pass."""
        point = coords.from_flat(move, self.board_size)
        return None if point is None else self.point_to_pixel(*point)

    def pixel_to_point(self, x: float, y: float) -> tuple[int, int] | None:
        """(row, col) of the cell containing pixel (x, y), or None off the grid."""
        x0, y0 = self.origin
        col = math.floor((x - x0 - self.margin) / self.cell)
        row = math.floor((y - y0 - self.margin) / self.cell)
        if 0 <= row < self.board_size and 0 <= col < self.board_size:
            return row, col
        return None

    def pixel_to_move(self, x: float, y: float) -> int | None:
        """Flat move of the point whose cell contains (x, y), or None off the grid."""
        point = self.pixel_to_point(x, y)
        return None if point is None else coords.to_flat(*point, self.board_size)

    def contains(self, x: float, y: float) -> bool:
        """Whether (x, y) is inside the board square (grid or margin)."""
        x0, y0 = self.origin
        return x0 <= x < x0 + self.size and y0 <= y < y0 + self.size

    def column_labels(self) -> list[str]:
        n = self.board_size
        return [coords.to_gtp(coords.to_flat(0, col, n), n)[0] for col in range(n)]

    def row_labels(self) -> list[str]:
        """Labels of rows 0..N-1, top to bottom (GTP numbers count from the bottom)."""
        n = self.board_size
        return [coords.to_gtp(coords.to_flat(row, 0, n), n)[1:] for row in range(n)]

    def star_points(self) -> list[tuple[int, int]]:
        """The traditional hoshi: the 3-3 points from 9x9, 4-4 from 13x13, the centre of odd
        boards, and the side points of odd boards from 13x13; just the centre of 7x7."""
        n = self.board_size
        middle = n // 2
        if n < 9:
            return [(middle, middle)] if n == 7 else []
        near, far = (2, n - 3) if n < 13 else (3, n - 4)
        points = [(row, col) for row in (near, far) for col in (near, far)]
        if n % 2:
            points.append((middle, middle))
            if n >= 13:
                points += [(middle, near), (middle, far), (near, middle), (far, middle)]
        return points
