"""Integrity of saved positions before the rules walk them (`GoBatch.restore`).

The C rules trust a slot's bytes: they follow a group's circular stone list until it comes
back to its start, index arrays with the stored group representatives, ko point and move
count, and play playouts until the game-over flag is set. A slot with one wrong byte there
can make them loop for ever or read outside the slot. So a position from outside (a state
that was saved, kept and handed back) is checked here, in NumPy, against everything the
rules rely on; the rules' own moves keep these invariants, so a state `GoBatch.save` wrote is
always accepted. The layout is go_rules.h's (offsets from `Rules.layout()`):

- stones: the padded border cells hold BORDER, every board point EMPTY, BLACK or WHITE;
- header: to_play BLACK or WHITE, 0 <= move_count <= max_moves, passes 0..2, the game-over
  flag set exactly when two passes were played or move_count reached max_moves, captures
  not negative, the komi a finite number, the ko point -1 or an empty board point;
- groups: every stone's representative is a stone of its colour that represents itself;
  adjacent stones of one colour share a representative; each group is connected; its stone
  list (next[]) is one cycle through exactly its stones; size, pseudo-liberty count, sum and
  sum of squares at the representative are those of its stones, and it has a liberty;
- the Zobrist hash is that of the stones (and, with superko, the last one of the history);
  history boards hold stone values only.

Entries the rules never read (group[] of empty points, size[] of non-representatives, the
random generator's state) are not checked.
"""
from __future__ import annotations

import numpy as np

EMPTY, BLACK, WHITE, BORDER = 0, 1, 2, 3


def _mix64(z: np.ndarray) -> np.ndarray:
    """go_mix64 (splitmix64's finaliser) on uint64 arrays; wraps like C."""
    z = z + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _field(data: np.ndarray, offset: int, dtype, count: int) -> np.ndarray:
    size = np.dtype(dtype).itemsize * count
    return np.ascontiguousarray(data[:, offset:offset + size]).view(dtype)


def slot_faults(data: np.ndarray, layout: dict, board_size: int, history: int, superko: bool,
                max_moves: int) -> list[str | None]:
    """For each row of `data` (uint8 (k, slot_bytes), whole slots), None if the rules may
    use it, else what is wrong with it first, in a few words."""
    k = len(data)
    n, stride, padded = board_size, layout["stride"], layout["padded"]
    faults: list[str | None] = [None] * k

    def fail(mask: np.ndarray, why: str) -> None:
        for row in np.flatnonzero(mask):
            if faults[row] is None:
                faults[row] = why

    points = np.arange(padded)
    row, col = points // stride - 1, points % stride
    on_board = (row >= 0) & (row < n) & (col < n)
    stone = _field(data, layout["off_stone"], np.uint8, padded)
    fail((stone[:, ~on_board] != BORDER).any(axis=1), "the border around the board is damaged")
    fail((stone[:, on_board] > WHITE).any(axis=1), "a point is not empty, black or white")

    header = lambda name, dtype, count=1: _field(data, layout[name], dtype, count)  # noqa: E731
    to_play, passes = header("to_play", np.int8)[:, 0], header("passes", np.int8)[:, 0]
    over, moves = header("over", np.int8)[:, 0], header("move_count", np.int32)[:, 0]
    captures, ko = header("captures", np.int32, 2), header("ko_point", np.int16)[:, 0]
    fail(~np.isfinite(header("komi", np.float32)[:, 0]), "the komi is not a finite number")
    fail((to_play != BLACK) & (to_play != WHITE), "the side to move is not black or white")
    fail((moves < 0) | (moves > max_moves), f"the move count is outside 0..{max_moves}")
    fail((passes < 0) | (passes > 2), "the count of passes is outside 0..2")
    fail(over != ((passes >= 2) | (moves >= max_moves)).astype(np.int8),
         "the game-over flag disagrees with the passes and the move count")
    fail((captures < 0).any(axis=1), "a capture count is negative")
    ko_cell = np.clip(ko, 0, padded - 1).astype(np.int64)
    ko_empty = on_board[ko_cell] & (stone[np.arange(k), ko_cell] == EMPTY)
    fail((ko != -1) & ((ko < 0) | (ko >= padded) | ~ko_empty), "the ko point is not an empty point")
    if history:
        width = (padded + 7) & ~7                   # each board is 8-byte aligned
        boards = data[:, layout["off_history"]:layout["off_history"] + history * width]
        boards = boards.reshape(k, history, width)[:, :, :padded]
        fail((boards > BORDER).any(axis=(1, 2)), "a history board holds a value that is not a stone")

    bad = np.array([fault is not None for fault in faults])
    good = np.flatnonzero(~bad)
    if len(good):
        for index, why in zip(good, _group_faults(data[good], layout, on_board, stone[good],
                                                  superko, moves[good])):
            faults[index] = why
    return faults


def _group_faults(data, layout, on_board, stone, superko, moves) -> list[str | None]:
    """The group and hash checks, on slots whose stones and header already passed."""
    k, padded, stride = len(data), layout["padded"], layout["stride"]
    faults: list[str | None] = [None] * k

    def fail(mask: np.ndarray, why: str) -> None:
        for row in np.flatnonzero(mask):
            if faults[row] is None:
                faults[row] = why

    group = _field(data, layout["off_group"], np.int16, padded).astype(np.int64)
    following = _field(data, layout["off_next"], np.int16, padded).astype(np.int64)
    size = _field(data, layout["off_size"], np.int16, padded).astype(np.int64)
    libs = _field(data, layout["off_libs"], np.int16, padded).astype(np.int64)
    lib_sum = _field(data, layout["off_lib_sum"], np.int32, padded).astype(np.int64)
    lib_sum_sq = _field(data, layout["off_lib_sum_sq"], np.int32, padded).astype(np.int64)
    is_stone = (stone == BLACK) | (stone == WHITE)
    rows = np.repeat(np.arange(k), padded).reshape(k, padded)

    # Representatives and successors must be stones of the same colour before anything is
    # looked up through them.
    in_range = lambda a: (a >= 0) & (a < padded)  # noqa: E731
    fail((is_stone & ~(in_range(group) & in_range(following))).any(axis=1),
         "a stone's group or next stone is outside the board")
    group = np.where(is_stone & in_range(group), group, 0)
    following = np.where(is_stone & in_range(following), following, 0)
    rep_stone, next_stone = stone[rows, group], stone[rows, following]
    fail((is_stone & ((rep_stone != stone) | (group[rows, group] != group))).any(axis=1),
         "a stone's group representative is not a stone of its group")
    fail((is_stone & ((next_stone != stone) | (group[rows, following] != group))).any(axis=1),
         "a group's stone list leaves the group")

    # next[] must be a permutation of the stones: each stone the successor of exactly one.
    predecessors = np.zeros((k, padded), np.int64)
    np.add.at(predecessors, (rows[is_stone], following[is_stone]), 1)
    fail((predecessors != is_stone).any(axis=1), "a group's stone list is not a cycle")

    # Adjacent stones of one colour are one group; a group's stones are connected.
    for step in (1, stride):
        a, b = slice(0, padded - step), slice(step, padded)
        joined = is_stone[:, a] & (stone[:, a] == stone[:, b])
        fail((joined & (group[:, a] != group[:, b])).any(axis=1),
             "adjacent stones of one colour are in different groups")
    is_rep = is_stone & (group == np.arange(padded))
    members = np.zeros((k, padded), np.int64)
    np.add.at(members, (rows[is_stone], group[is_stone]), 1)
    reached = is_rep.copy()
    while True:
        grown = reached.copy()
        for step in (1, stride):
            a, b = slice(0, padded - step), slice(step, padded)
            same = is_stone[:, a] & (stone[:, a] == stone[:, b])
            grown[:, b] |= reached[:, a] & same
            grown[:, a] |= reached[:, b] & same
        if (grown == reached).all():
            break
        reached = grown
    fail((is_stone & ~reached).any(axis=1), "a group's stones are not connected")

    # Each representative's cycle must come back to it after exactly its group's stones.
    slot_of, rep_of = np.nonzero(is_rep)
    position = following[slot_of, rep_of]
    length = np.ones(len(rep_of), np.int64)
    open_cycles = position != rep_of
    limit = int(members.max(initial=0))
    while open_cycles.any() and int(length.max(initial=0)) <= limit:
        position = np.where(open_cycles, following[slot_of, position], position)
        length += open_cycles
        open_cycles &= position != rep_of
    short = open_cycles | (length != members[slot_of, rep_of])
    fail(np.bincount(slot_of[short], minlength=k) > 0, "a group's stone list is not a cycle")
    fail((is_rep & (size != members)).any(axis=1), "a group's stone count is wrong")

    # Pseudo-liberties: every (stone, empty neighbour) pair counts once for the stone's group.
    want_libs = np.zeros((k, padded), np.int64)
    want_sum, want_sum_sq = want_libs.copy(), want_libs.copy()
    stone_rows, stone_points = np.nonzero(is_stone)
    for step in (-stride, -1, 1, stride):
        neighbour = stone_points + step
        empty = stone[stone_rows, neighbour] == EMPTY
        target = (stone_rows[empty], group[stone_rows[empty], stone_points[empty]])
        np.add.at(want_libs, target, 1)
        np.add.at(want_sum, target, neighbour[empty])
        np.add.at(want_sum_sq, target, neighbour[empty] ** 2)
    fail((is_rep & ((libs != want_libs) | (lib_sum != want_sum)
                    | (lib_sum_sq != want_sum_sq))).any(axis=1),
         "a group's liberty counts are wrong")
    fail((is_rep & (want_libs == 0)).any(axis=1), "a group has no liberty")

    keys = _mix64((np.arange(padded, dtype=np.uint64)[None, :] << np.uint64(2))
                  | stone.astype(np.uint64))
    want_hash = np.bitwise_xor.reduce(np.where(is_stone, keys, np.uint64(0)), axis=1)
    stored = _field(data, layout["hash"], np.uint64, 1)[:, 0]
    fail(stored != want_hash, "the position hash does not match the stones")
    if superko:
        hashes = data[:, layout["off_hashes"]:]
        offsets = (moves.astype(np.int64) * 8)[:, None] + np.arange(8)
        last = np.ascontiguousarray(np.take_along_axis(hashes, offsets, axis=1)).view(np.uint64)
        fail(last[:, 0] != want_hash, "the superko history does not end with the position")
    return faults
