"""An independent, deliberately simple reference of the Go rules in kernels/README.md.

One game per object, plain Python lists and flood fill; it shares no code with the engine in
kernels/ (not even kernels.coords), so the two can be checked against each other. The tests
run the engine and this reference side by side and compare them after every move.

Rules implemented (kernels/README.md): captures; suicide illegal; simple ko (after a move that
captured exactly one stone with a single stone left with exactly one liberty, the captured
point is illegal for the very next move only, so a pass clears it); optional positional
superko (a non-pass move may not recreate the stones of any earlier position of the game,
the starting position included); the game ends after two consecutive passes or when
move_count reaches max_moves; on a finished game only pass is legal and it changes nothing;
Tromp-Taylor area score, black - white - komi.
"""
from __future__ import annotations

import numpy as np

BLACK, WHITE, EMPTY = 1, -1, 0
GTP_COLUMNS = "ABCDEFGHJKLMNOPQRST"  # GTP skips the letter I


def gtp_to_move(vertex: str, board_size: int) -> int:
    """Flat move index of a GTP vertex ("D4", "pass"); row 0 is the top row (GTP row N)."""
    text = vertex.strip().upper()
    if text == "PASS":
        return board_size * board_size
    col = GTP_COLUMNS.index(text[0])
    number = int(text[1:])
    if not (col < board_size and 1 <= number <= board_size):
        raise ValueError(f"{vertex!r} is off a {board_size}x{board_size} board")
    return (board_size - number) * board_size + col


def move_to_gtp(move: int, board_size: int) -> str:
    if move == board_size * board_size:
        return "pass"
    row, col = divmod(int(move), board_size)
    return f"{GTP_COLUMNS[col]}{board_size - row}"


def board_from_ascii(text: str) -> np.ndarray:
    """int8 (N, N) board from rows of '.', 'X' (black) and 'O' (white); spaces are ignored."""
    rows = ["".join(line.split()) for line in text.strip().splitlines()]
    rows = [row for row in rows if row]
    size = len(rows)
    if any(len(row) != size for row in rows):
        raise ValueError(f"not a square board: {rows}")
    value = {".": EMPTY, "X": BLACK, "O": WHITE}
    return np.array([[value[ch] for ch in row] for row in rows], dtype=np.int8)


def board_to_ascii(board) -> str:
    char = {EMPTY: ".", BLACK: "X", WHITE: "O"}
    return "\n".join(" ".join(char[int(v)] for v in row) for row in np.asarray(board))


class ReferenceGo:
    """One game of Go under the kernels/README.md rules."""

    def __init__(self, board_size: int, komi: float = 7.5, superko: bool = False,
                 max_moves: int | None = None):
        if not isinstance(board_size, int) or not 2 <= board_size <= 19:
            raise ValueError(f"board_size must be an int in 2..19, got {board_size!r}")
        n = board_size
        self.board_size = n
        self.komi = float(komi)
        self.superko = bool(superko)
        self.max_moves = 2 * n * n if max_moves is None else int(max_moves)
        self.pass_move = n * n
        self._neighbors = []
        for p in range(n * n):
            row, col = divmod(p, n)
            near = []
            if row > 0:
                near.append(p - n)
            if row < n - 1:
                near.append(p + n)
            if col > 0:
                near.append(p - 1)
            if col < n - 1:
                near.append(p + 1)
            self._neighbors.append(tuple(near))
        self.reset()


    def reset(self) -> None:
        self._load([EMPTY] * (self.board_size ** 2), BLACK)

    def set_board(self, stones, to_play: int) -> None:
        """Load a position (history, ko, passes, captures and move count cleared)."""
        array = np.asarray(stones)
        n = self.board_size
        if array.shape != (n, n):
            raise ValueError(f"stones must have shape ({n}, {n}), got {array.shape}")
        if not np.isin(array, (BLACK, WHITE, EMPTY)).all():
            raise ValueError("stones must be +1, -1 or 0")
        if int(to_play) not in (BLACK, WHITE):
            raise ValueError(f"to_play must be +1 or -1, got {to_play!r}")
        flat = [int(v) for v in array.reshape(-1)]
        self._load(flat, int(to_play))
        for color, members, libs in self._groups():
            if not libs:
                raise ValueError(f"group at {move_to_gtp(members[0], n)} has no liberties")

    def _load(self, stones: list, to_play: int) -> None:
        self._stones = stones
        self.to_play = to_play
        self._captures = [0, 0]
        self.move_count = 0
        self._passes = 0
        self._ko = None
        self.is_over = False
        self._positions = [tuple(stones)]  # one entry per position, for features()
        self.moves = []                    # moves played since the start, passes included
        self._seen = {tuple(stones)}       # every stone configuration of the game, for superko
        self._seen_counts = {self._counts(stones)}  # their (black, white) stone counts
        self._derived = {}                 # what _regions and _analyze found for this position

    def copy(self) -> "ReferenceGo":
        other = object.__new__(ReferenceGo)
        other.__dict__.update(self.__dict__)
        other._stones = list(self._stones)
        other._captures = list(self._captures)
        other._positions = list(self._positions)
        other.moves = list(self.moves)
        other._seen = set(self._seen)
        other._seen_counts = set(self._seen_counts)
        other._derived = {}
        return other

    @property
    def board(self) -> np.ndarray:
        n = self.board_size
        return np.array(self._stones, dtype=np.int8).reshape(n, n)

    @property
    def captures(self) -> tuple:
        """Stones captured by black, by white."""
        return tuple(self._captures)

    @property
    def ko_point(self):
        """The point the side to move may not play because of simple ko, or None."""
        return self._ko

    @property
    def passes(self) -> int:
        """Consecutive passes just played."""
        return self._passes


    def _regions(self):
        """One flood fill over the board, of each maximal region of one kind (black stones,
        white stones or empty points): (label per point, [(kind, members, around)]), `around`
        being a stone group's liberties and an empty region's bordering colours. The legal
        moves and the area score of a position both read it."""
        if "regions" in self._derived:
            return self._derived["regions"]
        stones = self._stones
        neighbors = self._neighbors
        label = [-1] * len(stones)
        regions = []
        for p, kind in enumerate(stones):
            if label[p] >= 0:
                continue
            rid = len(regions)
            label[p] = rid
            members = [p]
            around = set()
            for q in members:                   # grows while it is walked: breadth first
                for r in neighbors[q]:
                    s = stones[r]
                    if s == kind:
                        if label[r] < 0:
                            label[r] = rid
                            members.append(r)
                    elif kind == EMPTY:
                        around.add(s)           # a colour bordering the empty region
                    elif s == EMPTY:
                        around.add(r)           # a liberty of the group
            regions.append((kind, members, around))
        self._derived["regions"] = (label, regions)
        return label, regions

    def _groups(self) -> list:
        """Every stone group: [(color, members, liberty set)]."""
        return [region for region in self._regions()[1] if region[0] != EMPTY]

    def _analyze(self):
        """Per point: None when legal for the side to move, else the reason; and captures."""
        if "analysis" in self._derived:
            return self._derived["analysis"]
        stones = self._stones
        neighbors = self._neighbors
        me = self.to_play
        label, regions = self._regions()
        liberties = [len(around) for kind, _, around in regions]   # read for stones only
        counts = self._counts(stones)
        status = []
        captured_by = []
        for p, color in enumerate(stones):
            captured = []
            captured_by.append(captured)
            if color != EMPTY:
                status.append("occupied")
                continue
            breathes = False
            for r in neighbors[p]:
                s = stones[r]
                if s == EMPTY:
                    breathes = True
                elif s == me:
                    if liberties[label[r]] > 1:
                        breathes = True
                elif liberties[label[r]] == 1 and label[r] not in captured:
                    captured.append(label[r])
            if not breathes and not captured:
                status.append("suicide")
            elif p == self._ko:
                status.append("ko")
            elif self.superko and self._repeats(p, captured, regions, counts):
                status.append("superko")
            else:
                status.append(None)
        if self.is_over:
            status = ["game over" if s is None else s for s in status]
        legal = np.array([s is None for s in status] + [True], dtype=bool)
        self._derived["analysis"] = (status, captured_by, regions, legal)
        return self._derived["analysis"]

    @staticmethod
    def _counts(stones) -> tuple:
        return stones.count(BLACK), stones.count(WHITE)

    def _repeats(self, p, captured, groups, counts) -> bool:
        """Would playing p (capturing `captured`) recreate an earlier position?"""
        black, white = counts
        taken = sum(len(groups[gid][1]) for gid in captured)
        if self.to_play == BLACK:
            after_counts = (black + 1, white - taken)
        else:
            after_counts = (black - taken, white + 1)
        if after_counts not in self._seen_counts:  # a cheap filter; the full check follows
            return False
        after = list(self._stones)
        after[p] = self.to_play
        for gid in captured:
            for q in groups[gid][1]:
                after[q] = EMPTY
        return tuple(after) in self._seen

    def illegal_reason(self, move: int):
        """None if `move` is legal now, else 'occupied', 'suicide', 'ko', 'superko', ..."""
        if move == self.pass_move:
            return None
        return self._analyze()[0][move]

    def illegal_reasons(self) -> list:
        """Per point: None when legal, else why not ('occupied', 'suicide', 'ko', ...)."""
        return list(self._analyze()[0])

    def legal_moves(self) -> np.ndarray:
        status, _, _, legal = self._analyze()
        return legal.copy()

    def capturing_moves(self) -> list:
        """Legal moves that capture at least one stone."""
        status, captured_by, _, _ = self._analyze()
        return [p for p, s in enumerate(status) if s is None and captured_by[p]]


    def play(self, move) -> None:
        move = int(move)
        if not 0 <= move <= self.pass_move:
            raise ValueError(f"move {move} out of range 0..{self.pass_move}")
        if self.is_over:
            if move == self.pass_move:
                return
            raise ValueError(f"game is over; {move_to_gtp(move, self.board_size)} is illegal")
        if move == self.pass_move:
            self._passes += 1
            self._ko = None
        else:
            status, captured_by, groups, _ = self._analyze()
            if status[move] is not None:
                raise ValueError(
                    f"{move_to_gtp(move, self.board_size)} is illegal ({status[move]})")
            stones = self._stones
            stones[move] = self.to_play
            removed = []
            for gid in captured_by[move]:
                for q in groups[gid][1]:
                    stones[q] = EMPTY
                    removed.append(q)
            self._captures[0 if self.to_play == BLACK else 1] += len(removed)
            self._ko = None
            if len(removed) == 1:
                own_neighbors = [r for r in self._neighbors[move] if stones[r] == self.to_play]
                liberties = [r for r in self._neighbors[move] if stones[r] == EMPTY]
                if not own_neighbors and len(liberties) == 1:
                    self._ko = removed[0]
            self._passes = 0
            self._seen.add(tuple(stones))
            self._seen_counts.add(self._counts(stones))
        self.to_play = -self.to_play
        self.move_count += 1
        self.moves.append(move)
        self._positions.append(tuple(self._stones))
        if self._passes >= 2 or self.move_count >= self.max_moves:
            self.is_over = True
        self._derived = {}


    def score(self) -> float:
        """Tromp-Taylor area: stones plus empty regions reaching one colour only."""
        black = white = 0
        for kind, members, around in self._regions()[1]:
            if kind == BLACK or (kind == EMPTY and around == {BLACK}):
                black += len(members)
            elif kind == WHITE or (kind == EMPTY and around == {WHITE}):
                white += len(members)
        return black - white - self.komi


    def features(self, history: int) -> np.ndarray:
        """float32 (N, N, 2*(history+1)+2) planes from the view of the side to move."""
        n = self.board_size
        planes = np.zeros((n, n, 2 * (history + 1) + 2), dtype=np.float32)
        t = len(self._positions) - 1
        me = self.to_play
        for j in range(history + 1):
            if t - j < 0:
                continue
            position = np.array(self._positions[t - j], dtype=np.int8).reshape(n, n)
            planes[:, :, 2 * j] = position == me
            planes[:, :, 2 * j + 1] = position == -me
        planes[:, :, 2 * history + 2] = 1.0 if me == BLACK else 0.0
        planes[:, :, 2 * history + 3] = 1.0
        return planes

    def extra_features(self) -> np.ndarray:
        """float32 (N, N, 7): the side to move's stones whose group has 1, 2, 3+ liberties,
        the same for the opponent, and the simple-ko point (GoBatch(extra_features=True))."""
        n = self.board_size
        planes = np.zeros((n * n, 7), dtype=np.float32)
        for color, members, libs in self._groups():
            channel = (0 if color == self.to_play else 3) + min(len(libs), 3) - 1
            planes[members, channel] = 1.0
        if self.ko_point is not None:
            planes[self.ko_point, 6] = 1.0
        return planes.reshape(n, n, 7)
