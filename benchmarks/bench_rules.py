"""Rules engine throughput: random legal games, legal mask after every move.

Each ply, for every board of the batch: draw a uniformly random legal move (pass included)
from the legal mask computed after the previous move, play it, compute the new legal mask;
finished games restart at once. Moves per second over all boards, median of several repeats.
In the same run the pure-Python reference of tests/ plays the same workload (fewer moves)
for a ratio. The last line is the 9x9 batch-1024 summary.

`--contended` measures every figure twice, alternately: quiet, and beside one busy process
pinned to a core (benchmarks/contention.py); the last line then adds the contended rate and
`contended_ratio=<contended / quiet>` (ideal on 2 cores: 0.5).

    .venv/bin/python benchmarks/bench_rules.py [--seconds S] [--repeats R] [--backend cpu]
                                               [--contended]
                                               [--batches 128,1024]
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from contention import BusyNeighbour, load_note, quiet_and_contended  # noqa: E402
from kernels import GoBatch  # noqa: E402
from reference_rules import ReferenceGo  # noqa: E402
from training.options import OneLineParser  # noqa: E402


def engine_moves_per_second(board_size: int, batch: int, seconds: float, backend: str) -> float:
    games = GoBatch(batch, board_size, backend=backend, seed=board_size * batch)
    legal = games.legal_moves()

    def ply(legal):
        games.play(games.random_moves(include_pass=True, legal=legal))
        legal = games.legal_moves()
        over = games.is_over()
        if over.any():
            games.reset(over)
            legal[over] = games.legal_moves(over)
        return legal

    # Warm up past the empty-board opening so the timed plies see mid-game positions too.
    for _ in range(board_size * board_size // 2):
        legal = ply(legal)
    plies = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        legal = ply(legal)
        plies += 1
    if backend == "cuda":
        import cupy  # deferred: optional, GPU runs only
        cupy.cuda.Device().synchronize()
    return plies * batch / (time.perf_counter() - start)


def reference_moves_per_second(board_size: int, seconds: float, seed: int) -> float:
    rng = np.random.default_rng(seed)
    game = ReferenceGo(board_size)
    legal = game.legal_moves()
    moves = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        game.play(int(rng.choice(np.flatnonzero(legal))))
        legal = game.legal_moves()
        moves += 1
        if game.is_over:
            game = ReferenceGo(board_size)
            legal = game.legal_moves()
    return moves / (time.perf_counter() - start)


def main() -> None:
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="timed seconds per repeat")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--backend", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--contended", action="store_true",
                        help="also measure beside one busy process pinned to a core")
    parser.add_argument("--batches", default="128,1024",
                        help="comma-separated batch sizes; the summary needs 1024 among them")
    args = parser.parse_args()
    try:
        batches = sorted({int(text) for text in args.batches.split(",")})
    except ValueError:
        parser.error(f"--batches must be comma-separated integers, got {args.batches!r}")
    if 1024 not in batches or batches[0] < 1:
        parser.error("--batches must be positive and include 1024 (the summary line's batch)")

    neighbour = BusyNeighbour() if args.contended else None
    print(f"{load_note()} before the run" + (f"; busy neighbour pinned to CPU {neighbour.cpu}"
                                               if neighbour else ""))
    results = {}
    try:
        for board_size in (9, 19):
            reference = statistics.median(
                reference_moves_per_second(board_size, args.seconds / 2, seed) for seed in range(3))
            for batch in batches:
                def measure():
                    return engine_moves_per_second(board_size, batch, args.seconds, args.backend)
                if neighbour:
                    rates, contended = quiet_and_contended(measure, args.repeats, neighbour)
                else:
                    rates, contended = [measure() for _ in range(args.repeats)], []
                rate = statistics.median(rates)
                results[board_size, batch] = (rate, rate / reference, contended)
                print(f"{board_size}x{board_size} batch {batch:4d}: {rate:12,.0f} moves/s "
                      f"(repeats {', '.join(f'{r:,.0f}' for r in rates)}); "
                      f"reference {reference:,.0f} moves/s; ratio {rate / reference:,.0f}x",
                      flush=True)
                if contended:
                    print(f"    contended: {statistics.median(contended):12,.0f} moves/s (repeats "
                          f"{', '.join(f'{r:,.0f}' for r in contended)}); "
                          f"{statistics.median(contended) / rate:.2f} of quiet", flush=True)
    finally:
        if neighbour:
            neighbour.close()
    rate, ratio, contended = results[9, 1024]
    summary = f"rules 9x9 b1024 moves_per_s={rate:.0f} vs_reference={ratio:.0f}x"
    if contended:
        contended_rate = statistics.median(contended)
        summary += (f" contended_moves_per_s={contended_rate:.0f} "
                    f"contended_ratio={contended_rate / rate:.2f}")
    print(summary)


if __name__ == "__main__":
    main()
