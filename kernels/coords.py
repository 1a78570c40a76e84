"""The one owner of board coordinates.

Every part of the project converts between these forms here and nowhere else.

=============  ==============================  =================================
form           example on 9x9 (top-left, pass)  meaning
=============  ==============================  =================================
flat index     ``0``, ``81``                    ``row * N + col``; pass is ``N * N``
(row, col)     ``(0, 0)``                       row 0 is the top row, col 0 is left
GTP vertex     ``"A9"``, ``"pass"``             column letter A.. skipping I, row N at top
sgfmill        ``(8, 0)``, ``None``             (row from the BOTTOM, col), as the
                                                sgfmill library counts
=============  ==============================  =================================
"""
from __future__ import annotations

GTP_COLUMNS = "ABCDEFGHJKLMNOPQRST"  # GTP skips I
MIN_BOARD_SIZE = 2
MAX_BOARD_SIZE = 19


def check_board_size(board_size: int) -> int:
    if not isinstance(board_size, int) or isinstance(board_size, bool):
        raise ValueError(f"board_size must be an int, got {board_size!r}")
    if not MIN_BOARD_SIZE <= board_size <= MAX_BOARD_SIZE:
        raise ValueError(
            f"board_size must be in {MIN_BOARD_SIZE}..{MAX_BOARD_SIZE}, got {board_size}")
    return board_size


def pass_move(board_size: int) -> int:
    return board_size * board_size


def to_flat(row: int, col: int, board_size: int) -> int:
    if not (0 <= row < board_size and 0 <= col < board_size):
        raise ValueError(f"point ({row}, {col}) is off a {board_size}x{board_size} board")
    return row * board_size + col


def from_flat(move: int, board_size: int) -> tuple[int, int] | None:
    """(row, col) of a flat move, or None for pass."""
    if move == board_size * board_size:
        return None
    if not 0 <= move < board_size * board_size:
        raise ValueError(f"move {move} is out of range 0..{board_size * board_size}")
    return divmod(move, board_size)


def to_gtp(move: int, board_size: int) -> str:
    point = from_flat(int(move), board_size)
    if point is None:
        return "pass"
    row, col = point
    return f"{GTP_COLUMNS[col]}{board_size - row}"


def from_gtp(vertex: str, board_size: int) -> int:
    text = vertex.strip().upper()
    if text == "PASS":
        return pass_move(board_size)
    if len(text) < 2 or text[0] not in GTP_COLUMNS[:board_size] or not text[1:].isdigit():
        raise ValueError(f"{vertex!r} is not a vertex on a {board_size}x{board_size} board")
    col = GTP_COLUMNS.index(text[0])
    number = int(text[1:])
    if not 1 <= number <= board_size:
        raise ValueError(f"{vertex!r} is not a vertex on a {board_size}x{board_size} board")
    return to_flat(board_size - number, col, board_size)


def to_sgfmill(move: int, board_size: int) -> tuple[int, int] | None:
    """sgfmill's point: (row counted from the BOTTOM, col), None for pass."""
    point = from_flat(int(move), board_size)
    if point is None:
        return None
    row, col = point
    return board_size - 1 - row, col


def from_sgfmill(point: tuple[int, int] | None, board_size: int) -> int:
    if point is None:
        return pass_move(board_size)
    row_from_bottom, col = point
    return to_flat(board_size - 1 - row_from_bottom, col, board_size)
