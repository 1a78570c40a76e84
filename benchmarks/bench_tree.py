"""Benchmark: the batched tree search plus the rules engine, with a dummy evaluator (no net).

B games of self-play on an N x N board through the production glue (games.search.
SearchingGames: sensible-move masks, input planes, subtree reuse), `--simulations` per move,
uniform priors and random values, greedy moves, a finished game restarted at once. Each search
step is one `select`, one `copy_play` + `sensible_moves` + `is_over` + `features` over all
leaves, one `expand_and_backup`.

Prints simulations per second over all games, where the time goes (tree and driver, rules
engine, dummy net; native C versus the Python facades), the pure-Python reference search on the same
workload for a ratio, and what the search and engine would cost next to a net.
Last line: ``tree 9x9 b128 sims_per_s=<X> vs_reference=<ratio>x``.

`--contended` then times `--repeats` more runs of `--moves` moves each way, alternately:
quiet, and beside one busy process pinned to a core (benchmarks/contention.py); sims_per_s is
then the quiet median and the last line adds ``contended_sims_per_s=<Y> contended_ratio=<Y/X>``
(ideal on 2 cores: 0.5).

    .venv/bin/python benchmarks/bench_tree.py [--batch 128] [--board-size 9] [--simulations 200]
                                              [--contended] [--repeats 5]
"""
from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from games.search import SearchingGames  # noqa: E402
from kernels.go_batch import describe_backend  # noqa: E402
from contention import BusyNeighbour, quiet_and_contended  # noqa: E402
from py_util import BatchedMCTS  # noqa: E402
from reference_mcts import ReferenceMCTS  # noqa: E402
from training.config import Config  # noqa: E402
from training.options import OneLineParser  # noqa: E402

# Raw batched inference of the cpu net at batch 128 (TensorFlow, measured when this was written).
NET_POSITIONS_PER_S = 38_000


class Timed:
    """Forwards attribute access to `target`, adding the time spent in its methods to a clock."""

    def __init__(self, target, clocks: dict, name: str):
        self._target, self._clocks, self._name = target, clocks, name
        clocks.setdefault(name, 0.0)

    def __getattr__(self, attribute):
        value = getattr(self._target, attribute)
        if not callable(value):
            return value

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return value(*args, **kwargs)
            finally:
                self._clocks[self._name] += time.perf_counter() - start
        return timed


class SelfPlay:
    """B games of self-play through the production glue (games.search.SearchingGames: sensible
    moves, input planes, subtree reuse), with a dummy net in place of the evaluator."""

    def __init__(self, config: Config, batch: int, seed: int, threads: int = 0, search=None):
        self.clocks: dict[str, float] = {"net": 0.0}
        num_actions = config.board_size ** 2 + 1
        rng = np.random.default_rng(seed)
        uniform = np.full((batch * config.leaves_per_game, num_actions), 1 / num_actions,
                          np.float32)

        def dummy_net(planes):
            start = time.perf_counter()
            self.steps += 1
            result = uniform[:len(planes)], rng.uniform(-1, 1, len(planes)).astype(np.float32)
            self.clocks["net"] += time.perf_counter() - start
            return result

        driver = SearchingGames(config, batch, dummy_net, seed=seed, search=search,
                                num_threads=threads)
        if isinstance(driver.search, BatchedMCTS):   # split native time from the facades
            driver.search._tree = Timed(driver.search._tree, self.clocks, "tree_native")
            driver.go._backend = Timed(driver.go._backend, self.clocks, "engine_native")
        driver.go = Timed(driver.go, self.clocks, "engine")
        self.driver = driver
        self.steps = 0

    def move(self) -> int:
        """Search, play and advance one move in every game; returns the simulations run."""
        driver = self.driver
        driver.think(np.ones(driver.num_games, bool))
        simulations = int(np.sum(driver.search.simulations))
        driver.play(driver.search.choose_actions(0))
        finished = driver.go.is_over()
        if finished.any():
            driver.new_games(finished)
        return simulations

    def run(self, moves: int) -> tuple[int, float]:
        for name in self.clocks:
            self.clocks[name] = 0.0
        self.steps = 0
        start = time.perf_counter()
        simulations = sum(self.move() for _ in range(moves))
        return simulations, time.perf_counter() - start


def percent(part: float, whole: float) -> str:
    return f"{100 * part / whole:4.1f}%"


def main() -> None:
    parser = OneLineParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--board-size", type=int, default=9)
    parser.add_argument("--simulations", type=int, default=200)
    parser.add_argument("--leaves", type=int, default=1, help="leaves per game per step")
    parser.add_argument("--threads", type=int, default=0,
                        help="OpenMP threads of the search (0: OpenMP's default)")
    parser.add_argument("--moves", type=int, default=10, help="timed moves (after one warm-up)")
    parser.add_argument("--reference-moves", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--contended", action="store_true",
                        help="also time runs beside one busy process pinned to a core")
    parser.add_argument("--repeats", type=int, default=5, help="runs each way with --contended")
    parser.add_argument("--backend", default="cpu", choices=["cpu", "cuda"],
                        help="where the rules engine runs (the tree is always C on the host)")
    args = parser.parse_args()
    n, batch, simulations = args.board_size, args.batch, args.simulations
    actions = n * n + 1
    config = Config(board_size=n, simulations=simulations, leaves_per_game=args.leaves,
                    c_puct=1.25, fpu_reduction=0.25, backend=args.backend)

    print(f"workload: {n}x{n}, {batch} games, {simulations} simulations per move, "
          f"leaves per game per step: {args.leaves}, uniform priors, random values, greedy "
          f"moves, subtree reuse; rules on {describe_backend(args.backend)}")
    first = SelfPlay(config, batch, args.seed, threads=args.threads)
    search = first.driver.search
    print(f"buffers: {search.max_nodes} nodes per game, tree {search.memory_bytes / 1e6:.0f} MB; "
          f"search threads: {search.num_threads}; load average before: "
          f"{os.getloadavg()[0]:.2f} (other busy processes make OpenMP barriers stall)")

    # Same first moves from a fresh start for both searches: that is the ratio's workload.
    c_first_sims, c_first_time = first.run(args.reference_moves)
    reference = SelfPlay(config, batch, args.seed, search=ReferenceMCTS(
        batch, actions, simulations, c_puct=config.c_puct, fpu_reduction=config.fpu_reduction))
    reference_sims, reference_time = reference.run(args.reference_moves)
    ratio = (c_first_sims / c_first_time) / (reference_sims / reference_time)

    # Steady state: the same objects go on, buffers warm, trees reused.
    sims, elapsed = first.run(args.moves)
    clocks = first.clocks
    rate = sims / elapsed
    engine, net = clocks["engine"], clocks["net"]
    tree = elapsed - engine - net       # the search and the driver's Python around it
    print(f"time: tree and driver {percent(tree, elapsed)} (tree C "
          f"{percent(clocks['tree_native'], elapsed)}), engine {percent(engine, elapsed)} "
          f"(C {percent(clocks['engine_native'], elapsed)}, facade "
          f"{percent(engine - clocks['engine_native'], elapsed)}), dummy net "
          f"{percent(net, elapsed)}")
    print(f"tree and driver alone: {sims / tree:,.0f} simulations/s (tree C part alone: "
          f"{sims / clocks['tree_native']:,.0f}/s)")
    share = (1 / rate) / (1 / rate + 1 / NET_POSITIONS_PER_S)
    print(f"next to a net of {NET_POSITIONS_PER_S:,} positions/s: search + engine would be "
          f"{100 * share:.1f}% of a self-play step (target < 10%, i.e. >= 400,000 sims/s)")
    rclocks = reference.clocks
    print(f"reference (pure Python tree, same engine and glue), {args.reference_moves} move(s) "
          f"from the start: {reference_sims / reference_time:,.0f} simulations/s "
          f"(tree and driver {percent(reference_time - rclocks['engine'] - rclocks['net'], reference_time)}); C on the same moves: "
          f"{c_first_sims / c_first_time:,.0f} simulations/s")
    contended_note = ""
    if args.contended:
        def measure():
            simulations, seconds = first.run(args.moves)
            return simulations / seconds
        with BusyNeighbour() as neighbour:
            quiet, contended = quiet_and_contended(measure, args.repeats, neighbour)
        rate, contended_rate = statistics.median(quiet), statistics.median(contended)
        print(f"quiet: {rate:,.0f} simulations/s (repeats {', '.join(f'{r:,.0f}' for r in quiet)}); "
              f"beside a busy process pinned to CPU {neighbour.cpu}: {contended_rate:,.0f} "
              f"(repeats {', '.join(f'{r:,.0f}' for r in contended)})")
        # Only the CPU engine runs OpenMP regions (GoBatch.thread_stats refuses the others).
        engine_stats = (first.driver.go._target.thread_stats() if args.backend == "cpu"
                        else f"none ({args.backend})")
        print(f"parallel regions so far: tree {first.driver.search.thread_stats()}, "
              f"engine {engine_stats}")
        contended_note = (f" contended_sims_per_s={contended_rate:.0f} "
                          f"contended_ratio={contended_rate / rate:.2f}")
    backend_note = f" backend={args.backend}" if args.backend != "cpu" else ""
    summary = (f"tree {n}x{n} b{batch} sims_per_s={rate:.0f} vs_reference={ratio:.1f}x"
               f"{contended_note}{backend_note}")
    print(summary)


if __name__ == "__main__":
    main()
