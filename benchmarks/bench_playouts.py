"""Playouts in the rules engine: random sensible games from the empty board to the end, all
boards of a batch in one `GoBatch.playouts` call (C), against the same games stepped from
Python with one engine call per move (sensible_moves, random_moves, play), in one run,
median of repeats, one thread. Last line: `playouts 9x9 b256 per_s=<X> vs_stepped=<ratio>x`.
With `--backend cuda` the same on the GPU back end (one CUDA thread per board), and the last
line ends in `backend=cuda`.

    .venv/bin/python benchmarks/bench_playouts.py [--board-size 9] [--batch 256] [--repeats 5]
                                                  [--backend cpu|cuda]
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kernels import GoBatch  # noqa: E402
from kernels.go_batch import describe_backend  # noqa: E402
from training.options import OneLineParser  # noqa: E402


def stepped(board_size: int, batch: int, backend: str) -> float:
    games = GoBatch(batch, board_size, history_length=1, num_threads=1, seed=1, backend=backend)
    started = time.perf_counter()
    while True:
        live = np.flatnonzero(~games.to_numpy(games.is_over()))
        if live.size == 0:
            return time.perf_counter() - started
        games.play(games.random_moves(live, legal=games.sensible_moves(live)), slots=live)


def main() -> None:
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("--board-size", type=int, default=9)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--backend", default="cpu", choices=["cpu", "cuda"])
    args = parser.parse_args()
    n, batch = args.board_size, args.batch
    games = GoBatch(batch, n, history_length=1, num_threads=1, backend=args.backend)
    games.to_numpy(games.playouts())   # the first CUDA call compiles and loads the kernels
    in_c, in_python = [], []
    for _ in range(args.repeats):
        started = time.perf_counter()
        games.to_numpy(games.playouts())   # to the host: on the GPU that waits for the kernel
        in_c.append(time.perf_counter() - started)
        in_python.append(stepped(n, batch, args.backend))
    c, python = statistics.median(in_c), statistics.median(in_python)
    where = "one thread" if args.backend == "cpu" else describe_backend(args.backend)
    print(f"{n}x{n}, {batch} boards, {where}: {batch / c:.0f} playouts/s in one call, "
          f"{batch / python:.0f}/s stepped from Python")
    backend_note = f" backend={args.backend}" if args.backend != "cpu" else ""
    print(f"playouts {n}x{n} b{batch} per_s={batch / c:.0f} vs_stepped={python / c:.1f}x{backend_note}")


if __name__ == "__main__":
    main()
