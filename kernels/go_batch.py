"""`GoBatch`: a batch of Go boards played in lockstep by the CPU or CUDA back end.

Storage is a pool of `num_slots` positions ("slots"). Slots 0..batch_size-1 are the batch
that every method addresses by default; further slots let a search keep one position per tree
node and expand many nodes in one call (`copy_play`). Every method takes an optional `slots`:
None (the batch), a bool mask over the batch, or an array of slot indices.

The contract and the rules are in kernels/README.md; the data layout in go_rules.h.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import coords
from .cpu_backend import CpuBackend
from .slot_check import slot_faults
from ._go_cpu import (EXTRA_PLANES, ILLEGAL_GAME_OVER, ILLEGAL_KO, ILLEGAL_OCCUPIED,
                      ILLEGAL_OUT_OF_RANGE, ILLEGAL_SUICIDE, ILLEGAL_SUPERKO)

BACKENDS = ("cpu", "cuda", "auto")

ILLEGAL_REASONS = {
    ILLEGAL_GAME_OVER: "the game is over",
    ILLEGAL_OCCUPIED: "the point is occupied",
    ILLEGAL_KO: "it retakes a ko",
    ILLEGAL_SUICIDE: "it is suicide",
    ILLEGAL_SUPERKO: "it repeats an earlier position (superko)",
}
SET_BOARD_ERRORS = {
    1: "a group has no liberty",
    2: "stones must be -1, 0 or +1",
    3: "to_play must be +1 (black) or -1 (white)",
}


@dataclass(frozen=True)
class GoState:
    """A snapshot of whole positions (slot bytes), as returned by `GoBatch.save`."""
    slots: np.ndarray
    data: object  # (k, slot_bytes) uint8, NumPy or CuPy like the back end's pool
    layout_key: tuple


@dataclass(frozen=True)
class CheckedSlots:
    """Slot indices range-checked on the host and already on the back end's device (made by
    `GoBatch.upload`): methods take them as they are, because checking a CuPy array's range
    would cost a device-to-host sync per call."""
    indices: object  # int64 (k,), NumPy or CuPy like the back end's pool

    def __len__(self) -> int:
        return len(self.indices)


def resolve_backend(backend: str) -> str:
    """The back end `backend` names on this machine: "cpu" or "cuda". "auto" is CUDA when CuPy
    sees a device; "cuda" without one raises RuntimeError with a one-line reason."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "cpu":
        return "cpu"
    available, why = _cuda_available()
    if backend == "cuda" and not available:
        raise RuntimeError(f"backend='cuda' requested but the CUDA back end is unavailable: {why}")
    return "cuda" if available else "cpu"


def describe_backend(name: str) -> str:
    """Where a resolved back end runs the rules, for start-up lines."""
    if name == "cuda":
        from .cuda_backend import device_name  # deferred: it imports CuPy
        return f"CUDA kernels on {device_name()}"
    return "C/OpenMP on the CPU"


def _cuda_available() -> tuple[bool, str]:
    try:
        import cupy  # deferred: optional (GPU installs only), and slow to import
    except ImportError:
        return False, "CuPy is not installed (./build.sh --cuda installs it)"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as error:  # CuPy raises its own CUDARuntimeError without a driver
        return False, f"no usable CUDA device ({error})"
    if count == 0:
        return False, "no CUDA device found"
    return True, ""


# OpenMP threads per call at most: one per core of any machine this runs on, and the bound
# BatchedMCTS takes too (OpenMP itself fails or exhausts memory asked for 100,000 threads).
MAX_THREADS = 1024
# EXTRA_PLANES (from the C extension, GO_EXTRA_PLANES of go_rules.h): the planes features()
# appends with extra_features: own groups with 1, 2, 3+ liberties, the opponent's, the
# simple-ko point.
# KOMI_SCALE (GO_KOMI_SCALE of go_rules.h): with komi_input, features() ends with one more
# plane, the game's komi for the side to move (+komi when White is to move, -komi when Black
# is) divided by KOMI_SCALE; the only plane that is not 0/1.
KOMI_SCALE = 20.0


def feature_planes(history: int, extra: bool, komi: bool = False) -> int:
    """Input planes per point of features(history) (go_feature_channels in go_rules.h): own
    and opponent stones now and `history` positions back, the side to move, ones, with
    `extra` the EXTRA_PLANES, and with `komi` the komi plane (last). Config.input_planes and
    the net's input width are this."""
    return 2 * (history + 1) + 2 + (EXTRA_PLANES if extra else 0) + (1 if komi else 0)


def with_komi_plane(planes, own_komi):
    """float32 (k, N, N, C + 1): stored 0/1 planes (k, N, N, C) with the komi plane appended,
    own_komi (k,) the komi for the side to move (+komi for White, -komi for Black): the planes
    features() writes with komi_input, for positions kept without their last plane."""
    planes = np.asarray(planes)
    out = np.empty((*planes.shape[:3], planes.shape[3] + 1), np.float32)
    out[..., :-1] = planes      # converted as copied: a replay batch's uint8 planes once
    out[..., -1] = (np.asarray(own_komi, dtype=np.float32).reshape(-1, 1, 1)
                    / np.float32(KOMI_SCALE))
    return out


def plane_names(history: int, extra: bool, komi: bool = False) -> list[str]:
    """What each of the feature_planes(history, extra, komi) planes holds, in order (the
    layout of go_features): a net grown to more inputs keeps its weights on the planes of the
    same name."""
    names = [f"{side} stones {back} back" for back in range(history + 1)
             for side in ("own", "opponent")]
    names += ["black to move", "ones"]
    if extra:
        names += [f"extra {i}" for i in range(EXTRA_PLANES)]
    return names + (["komi"] if komi else [])


def _check_positive_int(name: str, value, minimum: int = 1, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an int, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be at most {maximum}, got {value}")
    return int(value)


def _check_komi(komi) -> float:
    if isinstance(komi, bool) or not isinstance(komi, (int, float, np.integer, np.floating)) \
            or not np.isfinite(komi):
        raise ValueError(f"komi must be a finite number, got {komi!r}")
    return float(komi)


class GoBatch:
    def __init__(self, batch_size: int, board_size: int, komi: float = 7.5, backend: str = "cpu",
                 *, superko: bool = False, max_moves: int | None = None, history_length: int = 7,
                 num_slots: int | None = None, seed: int = 0, num_threads: int = 0,
                 adaptive_threads: bool = True, extra_features: bool = False,
                 komi_input: bool = False):
        self.batch_size = _check_positive_int("batch_size", batch_size)
        self.board_size = coords.check_board_size(board_size)
        komi = _check_komi(komi)
        self.superko = bool(superko)
        self.max_moves = (2 * board_size * board_size if max_moves is None
                          else _check_positive_int("max_moves", max_moves))
        self.history_length = _check_positive_int("history_length", history_length, minimum=0)
        # features() appends EXTRA_PLANES planes: liberties of each group and the ko point.
        self.extra_features = bool(extra_features)
        # features() ends with the komi plane (KOMI_SCALE).
        self.komi_input = bool(komi_input)
        self.num_slots = (self.batch_size if num_slots is None
                          else _check_positive_int("num_slots", num_slots, minimum=self.batch_size))
        self.num_actions = board_size * board_size + 1
        self.pass_move = board_size * board_size
        self.backend_name = resolve_backend(backend)
        args = (board_size, self.history_length, self.superko, self.max_moves, self.num_slots)
        if self.backend_name == "cuda":
            from .cuda_backend import CudaBackend  # deferred: it imports CuPy
            self._backend = CudaBackend(*args)
        else:

            # num_threads: CPU threads per call at most, 0 = OpenMP's default (all cores).
            # adaptive_threads: a kind of call whose thread team stalls (another busy program
            # holds a core, so a worker is off the CPU for whole scheduler slices) runs on one
            # thread for a while and then tries the team again (kernels/adaptive_threads.h).
            # False keeps the team always, the old behaviour.
            self._backend = CpuBackend(*args, num_threads=_check_positive_int(
                "num_threads", num_threads, minimum=0, maximum=MAX_THREADS),
                adaptive_threads=bool(adaptive_threads))
        self.xp = self._backend.xp
        self._batch_slots = self.xp.arange(self.batch_size, dtype=np.int64)
        self._seed = int(seed) & (2 ** 64 - 1)
        all_slots = self.xp.arange(self.num_slots, dtype=np.int64)
        self._backend.seed(all_slots, self._seed)
        self._backend.reset(all_slots)
        self.komi = komi

    def add_slots(self, count: int) -> None:
        """Grow the pool by `count` slots, numbered on from `num_slots`; every slot kept keeps
        its position. A new slot is what it would have been had the pool been that big from the
        start: an empty board, its own random generator (seeded from its index) and the komi
        last given to every slot. A search takes slots this way as its trees grow
        (games/node_slots.py) instead of reserving its visit cap for every tree up front."""
        count = _check_positive_int("count", count)
        first = self.num_slots
        self._backend.grow(first + count)
        self.num_slots = first + count
        added = self.xp.arange(first, first + count, dtype=np.int64)
        self._backend.seed(added, self._seed)
        self._backend.reset(added)
        self._write_komi(added, self.xp.full(count, self._komi, np.float32))

    @property
    def komi(self) -> float:
        """The komi last given to every slot; a finite number (a NaN would make every score
        and result NaN). Each position carries its own komi (`komi_of`, `set_komi`): setting
        this sets every slot's, and copies take their source's along."""
        return self._komi

    @komi.setter
    def komi(self, value) -> None:
        self._komi = _check_komi(value)
        self._write_komi(self.xp.arange(self.num_slots, dtype=np.int64),
                         self.xp.full(self.num_slots, self._komi, np.float32))

    def set_komi(self, komi, slots=None) -> None:
        """Give the positions in `slots` their own komi (a number, or one per slot): a game's
        komi stays with it through play, reset and every copy of its position."""
        slots = self._slots(slots)
        values = np.asarray(self._backend.to_numpy(komi) if not np.isscalar(komi) else komi,
                            dtype=np.float64)
        if values.ndim == 0:
            values = np.full(len(slots), float(values))
        if values.shape != (len(slots),):
            raise ValueError(f"komi must be a number or have shape ({len(slots)},), got "
                             f"{tuple(values.shape)}")
        if not np.isfinite(values).all():
            raise ValueError(f"komi must be finite numbers, got {values[~np.isfinite(values)][0]!r}")
        self._write_komi(slots, self.xp.asarray(values.astype(np.float32)))

    def _write_komi(self, slots, values) -> None:
        offset = self._backend.layout["komi"]
        self._backend.pool[slots, offset:offset + 4] = values.reshape(-1, 1).view(np.uint8)

    def komi_of(self, slots=None):
        """float64 (k,): each position's komi."""
        return self._header(slots, "komi", np.float32).astype(np.float64)

    def _slots(self, slots):
        """Validated int64 slot indices for `slots` (None, bool mask over the batch, indices,
        CheckedSlots)."""
        if slots is None:
            return self._batch_slots
        if isinstance(slots, CheckedSlots):
            return slots.indices
        xp = self.xp
        array = xp.asarray(slots)
        if array.dtype == np.bool_:
            if array.shape != (self.batch_size,):
                raise ValueError(
                    f"a bool slot mask must have shape ({self.batch_size},), got {tuple(array.shape)}")
            return xp.flatnonzero(array).astype(np.int64)
        if array.ndim == 0:
            array = array.reshape(1)
        if array.ndim != 1 or not (array.size == 0 or np.issubdtype(array.dtype, np.integer)):
            raise ValueError(f"slots must be a 1-D integer array or bool mask, got dtype "
                             f"{array.dtype} shape {tuple(array.shape)}")
        array = xp.ascontiguousarray(array, dtype=np.int64)
        # The CPU extension bounds-checks every slot itself; CUDA kernels trust their input.
        if self.backend_name == "cuda" and array.size and (
                int(array.min()) < 0 or int(array.max()) >= self.num_slots):
            raise ValueError(f"slots must be in 0..{self.num_slots - 1}, got "
                             f"{int(array.min())}..{int(array.max())}")
        return array

    def _moves(self, moves, count: int):
        array = self.xp.asarray(moves)
        if not np.issubdtype(array.dtype, np.integer):
            raise ValueError(f"moves must be an integer array, got dtype {array.dtype}")
        if array.shape != (count,):
            raise ValueError(f"moves must have shape ({count},), got {tuple(array.shape)}")
        return self.xp.ascontiguousarray(array, dtype=np.int64)

    def _raise_illegal(self, failure, slots, moves):
        index, status = failure
        slot = int(self._backend.to_numpy(slots[index]))
        move = int(self._backend.to_numpy(moves[index]))
        if status == ILLEGAL_OUT_OF_RANGE:
            raise ValueError(f"board {slot}: move {move} is out of range 0..{self.pass_move} "
                             f"({self.pass_move} is pass)")
        side = "black" if int(self.to_play([slot])[0]) == 1 else "white"
        raise ValueError(f"board {slot}: {side} {coords.to_gtp(move, self.board_size)} is illegal: "
                         f"{ILLEGAL_REASONS[status]}")

    def reset(self, slots=None):
        self._backend.reset(self._slots(slots))

    def legal_moves(self, slots=None):
        return self._backend.legal(self._slots(slots))

    def sensible_moves(self, slots=None):
        """bool (k, N*N+1): the legal points that do not fill the mover's own eye (all on-board
        neighbours its stones, diagonals at most one opponent stone, none on the edge); pass
        only when no such point is left. Self-play and matches play from this mask so that a
        game ends when neither side has anything useful left to do."""
        return self._backend.sensible(self._slots(slots))

    def play(self, moves, slots=None):
        explicit = slots is not None
        slots = self._slots(slots)
        moves = self._moves(moves, len(slots))
        if explicit and len(self.xp.unique(slots)) != len(slots):
            raise ValueError("play: a slot appears twice")
        failure = self._backend.play(slots, moves)
        if failure is not None:
            self._raise_illegal(failure, slots, moves)

    def copy_play(self, src_slots, dst_slots, moves, *, trusted: bool = False):
        """Copy position src[i] into slot dst[i] and play moves[i] there, for all i at once.
        Destinations must be distinct and not among the sources. `trusted`: the caller
        guarantees that and the moves' legality (a search expanding its own tree from its
        legal masks); CUDA then skips its checks, each a device-to-host sync. The CPU back
        end checks in C either way."""
        src = self._slots(src_slots)
        dst = self._slots(dst_slots)
        moves = self._moves(moves, len(src))
        if self.backend_name == "cuda" and trusted:
            self._backend.copy_play_unchecked(src, dst, moves)
            return
        if self.backend_name == "cuda":
            self._check_disjoint(src, dst)  # the CPU back end checks this in C
        failure = self._backend.copy_play(src, dst, moves)
        if failure is not None:
            self._raise_illegal(failure, src, moves)

    def upload(self, slot_arrays, moves=None):
        """Host int arrays of one length k -> ([CheckedSlots per slot array], moves int64 (k,)
        on the device or None), in one host-to-device transfer on CUDA: the slot ranges are
        checked on the host first, where it costs no sync."""
        rows = [np.asarray(array, dtype=np.int64).reshape(-1) for array in slot_arrays]
        count = len(rows[0]) if rows else 0
        if any(len(row) != count for row in rows) or (moves is not None and len(moves) != count):
            raise ValueError("upload: the slot and move arrays must have one length")
        for row in rows:
            if count and (row.min() < 0 or row.max() >= self.num_slots):
                raise ValueError(f"slots must be in 0..{self.num_slots - 1}, got "
                                 f"{int(row.min())}..{int(row.max())}")
        if moves is not None:
            moves = np.asarray(moves)
            if not np.issubdtype(moves.dtype, np.integer):
                raise ValueError(f"moves must be an integer array, got dtype {moves.dtype}")
            rows.append(moves.astype(np.int64).reshape(-1))
        block = self.xp.asarray(np.stack(rows) if rows else np.zeros((0, 0), np.int64))
        checked = [CheckedSlots(block[i]) for i in range(len(slot_arrays))]
        return checked, (block[-1] if moves is not None else None)

    def copy(self, src_slots, dst_slots):
        src = self._slots(src_slots)
        dst = self._slots(dst_slots)
        if self.backend_name == "cuda":
            self._check_disjoint(src, dst)  # the CPU back end checks this in C
        self._backend.copy(src, dst)

    def _check_disjoint(self, src, dst):
        if len(src) != len(dst):
            raise ValueError(f"{len(src)} source slots but {len(dst)} destination slots")
        xp = self.xp
        unique_dst = xp.unique(dst)
        if len(unique_dst) != len(dst):
            raise ValueError("destination slots must be distinct")
        if len(dst) and bool(xp.isin(unique_dst, src).any()):
            raise ValueError("a destination slot is also a source slot")

    def board(self, slots=None):
        return self._backend.board(self._slots(slots))

    def _header(self, slots, field: str, dtype, width: int = 1):
        offset = self._backend.layout[field]
        size = np.dtype(dtype).itemsize * width
        raw = self._backend.pool[self._slots(slots), offset:offset + size]
        values = self.xp.ascontiguousarray(raw).view(dtype)
        return values[:, 0] if width == 1 else values

    def to_play(self, slots=None):
        # The header stores 1 for black and 2 for white; the API speaks +1 / -1.
        return (3 - 2 * self._header(slots, "to_play", np.int8)).astype(np.int8)

    def captures(self, slots=None):
        return self._header(slots, "captures", np.int32, width=2).astype(np.int64)

    def is_over(self, slots=None):
        return self._header(slots, "over", np.int8) != 0

    def move_count(self, slots=None):
        return self._header(slots, "move_count", np.int32).astype(np.int64)

    def passes(self, slots=None):
        """Consecutive passes just played (0, 1 or 2)."""
        return self._header(slots, "passes", np.int8).astype(np.int64)

    def position_hash(self, slots=None):
        """Zobrist hash of the stones (equal positions, equal hashes)."""
        return self._header(slots, "hash", np.uint64)

    def score(self, slots=None):
        """float64 (k,): area score minus each position's komi, black's view."""
        slots = self._slots(slots)
        return self._backend.area(slots).astype(np.float64) - self.komi_of(CheckedSlots(slots))

    def finished_values(self, slots=None):
        """float32 (k,): a finished position's result (area score minus komi: +1 won, -1 lost,
        0 drawn) from the view of the side to move there; 0 where the game goes on. The CPU
        scores only the finished boards; CUDA scores every board, since picking the finished
        ones would need the game-over mask on the host."""
        slots = self._slots(slots)
        over = self.is_over(slots)
        if self.backend_name == "cpu":
            values = np.zeros(len(slots), np.float32)
            finished = slots[over]
            if len(finished):
                values[over] = np.sign(self.score(finished)) * self.to_play(finished)
            return values
        xp = self.xp
        return xp.where(over, xp.sign(self.score(slots)) * self.to_play(slots), 0).astype(np.float32)

    def features(self, history: int | None = None, slots=None):
        history = self.history_length if history is None else history
        if isinstance(history, bool) or not isinstance(history, (int, np.integer)) \
                or not 0 <= history <= self.history_length:
            raise ValueError(f"history must be an int in 0..{self.history_length} "
                             f"(history_length), got {history!r}")
        return self._backend.features(self._slots(slots), int(history), self.extra_features,
                                      self.komi_input, self.num_feature_planes(history))

    def num_feature_planes(self, history: int | None = None) -> int:
        history = self.history_length if history is None else history
        return feature_planes(history, self.extra_features, self.komi_input)

    def random_moves(self, slots=None, include_pass: bool = False, legal=None):
        """A uniformly random legal move per board, drawn inside the back end: among the legal
        points, and pass too when include_pass (pass when nothing else is legal). `legal`, the
        mask legal_moves() just returned for the same slots, saves computing it again."""
        slots = self._slots(slots)
        if legal is None:
            return self._backend.random(slots, bool(include_pass))
        legal = self.xp.asarray(legal)
        if legal.dtype != np.bool_ or legal.shape != (len(slots), self.num_actions):
            raise ValueError(f"legal must be a bool array of shape ({len(slots)}, {self.num_actions}), "
                             f"got {legal.dtype} {tuple(legal.shape)}")
        return self._backend.random_from_mask(slots, self.xp.ascontiguousarray(legal), bool(include_pass))

    def playouts(self, slots=None):
        """Final scores (area score minus the position's komi, black's view, float64 (k,)) of one playout from
        each slot: the game continued to its end with uniformly random sensible moves (see
        sensible_moves; pass only when nothing else is left), ending after two passes or at
        max_moves. The slots keep their positions; each slot's random generator moves on, so
        the next playout from it draws other moves. Slots must be distinct."""
        slots = self._slots(slots)
        if len(self.xp.unique(slots)) != len(slots):
            raise ValueError("playouts: a slot appears twice")
        return self._backend.playouts(slots).astype(np.float64) - self.komi_of(CheckedSlots(slots))

    def set_board(self, stones, to_play, slots=None):
        """Load positions as fresh games: stones (k, N, N) of +1/-1/0, to_play (k,) of +1/-1."""
        slots = self._slots(slots)
        n = self.board_size
        stones = self.xp.asarray(stones)
        if stones.shape == (n, n) and len(slots) == 1:
            stones = stones.reshape(1, n, n)
        if stones.shape != (len(slots), n, n):
            raise ValueError(f"stones must have shape ({len(slots)}, {n}, {n}), got {tuple(stones.shape)}")
        if not np.issubdtype(stones.dtype, np.integer):
            raise ValueError(f"stones must be integers -1/0/+1, got dtype {stones.dtype}")
        if bool(((stones < -1) | (stones > 1)).any()):
            raise ValueError("stones must be -1, 0 or +1")
        side = self.xp.asarray(to_play)
        if side.ndim == 0:
            side = side.reshape(1).repeat(len(slots))
        if side.shape != (len(slots),):
            raise ValueError(f"to_play must have shape ({len(slots)},), got {tuple(side.shape)}")
        # Checked before the int8 conversion, which would turn 257 into +1.
        if side.dtype == np.bool_ or not bool(((side == 1) | (side == -1)).all()):
            raise ValueError(SET_BOARD_ERRORS[3])
        failure = self._backend.set_board(
            slots, self.xp.ascontiguousarray(stones, dtype=np.int8),
            self.xp.ascontiguousarray(side, dtype=np.int8))
        if failure is not None:
            index, reason = failure
            raise ValueError(f"set_board: board {int(self._backend.to_numpy(slots[index]))}: "
                             f"{SET_BOARD_ERRORS[reason]}")

    def _layout_key(self):
        return (self.board_size, self.history_length, self.superko, self.max_moves)

    def save(self, slots=None) -> GoState:
        slots = self._slots(slots)
        return GoState(slots=self._backend.to_numpy(slots).copy(),
                       data=self._backend.pool[slots].copy(), layout_key=self._layout_key())

    def restore(self, state: GoState, slots=None):
        """Put saved positions back, into their own slots or into `slots`. Each position is
        checked first (kernels/slot_check.py): a damaged one raises ValueError naming it and
        what is wrong, and no slot is changed."""
        if not isinstance(state, GoState) or state.layout_key != self._layout_key():
            raise ValueError("restore: the state was saved by a GoBatch with another board size, "
                             "history length, superko or max_moves")
        slots = self._slots(state.slots if slots is None else slots)
        data = self._backend.to_numpy(state.data)
        slot_bytes = self._backend.layout["slot_bytes"]
        if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 \
                or data.shape[1] != slot_bytes:
            raise ValueError(f"restore: the saved data must be uint8 (k, {slot_bytes}), got "
                             f"{getattr(data, 'dtype', type(data).__name__)} "
                             f"{tuple(getattr(data, 'shape', ()))}")
        if len(slots) != len(data):
            raise ValueError(f"restore: {len(data)} saved positions for {len(slots)} slots")
        faults = slot_faults(data, self._backend.layout, self.board_size, self.history_length,
                             self.superko, self.max_moves)
        for index, fault in enumerate(faults):
            if fault is not None:
                raise ValueError(f"restore: saved position {index} is damaged: {fault}")
        self._backend.pool[slots] = self.xp.asarray(data)

    def thread_stats(self) -> dict:
        """CPU back end: {"parallel_runs", "serial_runs", "failed_runs"} of its parallel regions
        so far (team runs, one-thread runs while backing off, team runs judged too slow)."""
        if self.backend_name != "cpu":
            raise ValueError("thread_stats: only the CPU back end runs OpenMP regions")
        return self._backend.thread_stats()

    def to_numpy(self, array):
        """NumPy view/copy of an array returned by this batch (a no-op on the CPU back end)."""
        return self._backend.to_numpy(array)

    def __repr__(self):
        return (f"GoBatch(batch_size={self.batch_size}, board_size={self.board_size}, "
                f"komi={self.komi}, backend={self.backend_name!r}, superko={self.superko}, "
                f"max_moves={self.max_moves}, num_slots={self.num_slots}, "
                f"extra_features={self.extra_features}, komi_input={self.komi_input})")
