"""Benchmark: the batched tree search plus the rules engine, with a dummy evaluator (no net).

B games of self-play on an N x N board, `--simulations` per move, uniform priors and random
values, greedy moves, subtree reuse between moves, a finished game restarted at once. Node i of
game g keeps its position in engine slot B + g * max_nodes + i, so each simulation step is one
`select`, one `copy_play` + `legal_moves` + `is_over` over all leaves, one `expand_and_backup`.

Prints simulations per second over all games, where the time goes (tree code, rules engine,
Python glue; native C versus the Python facades), the pure-Python reference search on the same
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

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from contention import BusyNeighbour, quiet_and_contended  # noqa: E402
from kernels import GoBatch  # noqa: E402
from py_util import BatchedMCTS  # noqa: E402
from reference_mcts import ReferenceMCTS  # noqa: E402

# Raw batched inference of the small CPU default net at batch 128 on this machine (issue brief).
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
    """B games of self-play: the search drives GoBatch slots, a dummy net evaluates."""

    def __init__(self, search, board_size: int, leaves_per_game: int, seed: int):
        self.clocks: dict[str, float] = {}
        batch = search.batch_size
        self.batch, self.max_nodes, self.leaves_per_game = batch, search.max_nodes, leaves_per_game
        go = GoBatch(batch, board_size, num_slots=batch * (1 + search.max_nodes), seed=seed)
        if isinstance(search, BatchedMCTS):   # split native time from the Python facades
            search._tree = Timed(search._tree, self.clocks, "tree_native")
            go._backend = Timed(go._backend, self.clocks, "engine_native")
        self.search = Timed(search, self.clocks, "tree")
        self.go = Timed(go, self.clocks, "engine")
        self.rng = np.random.default_rng(seed)
        self.num_actions = board_size * board_size + 1
        self.uniform = np.full((batch * leaves_per_game, self.num_actions), 1 / self.num_actions,
                               np.float32)
        self.steps = 0

    def slots(self, game, node):
        return self.batch + game * self.max_nodes + node

    def evaluate(self, slots):
        legal = self.go.legal_moves(slots)
        terminal = self.go.is_over(slots)
        values = self.rng.uniform(-1, 1, len(slots)).astype(np.float32)
        if terminal.any():
            over = slots[terminal]
            values[terminal] = np.sign(self.go.score(over)) * self.go.to_play(over)
        return self.uniform[:len(slots)], legal, values, terminal

    def expand_roots(self):
        needs = np.asarray(self.search.needs_root_expansion)
        if not needs.any():
            return
        games = np.flatnonzero(needs)
        roots = self.slots(games, self.search.root_nodes[games])
        self.go.copy(games, roots)
        priors = np.zeros((self.batch, self.num_actions), np.float32)
        legal = np.zeros((self.batch, self.num_actions), bool)
        values = np.zeros(self.batch, np.float32)
        terminal = np.zeros(self.batch, bool)
        priors[games], legal[games], values[games], terminal[games] = self.evaluate(roots)
        self.search.expand_roots(priors, legal, values, terminal, games=needs)

    def move(self) -> int:
        """Search, play and advance one move in every game; returns the simulations run."""
        search, go = self.search, self.go
        self.expand_roots()
        while not search.done():
            leaves = search.select(self.leaves_per_game)
            self.steps += 1
            if len(leaves.game):
                destination = self.slots(leaves.game, leaves.node)
                go.copy_play(self.slots(leaves.game, leaves.parent), destination, leaves.action)
                search.expand_and_backup(leaves.game, leaves.node, *self.evaluate(destination))
        simulations = int(np.sum(search.simulations))
        actions = search.choose_actions(0)
        go.play(actions)
        search.advance(actions)
        finished = go.is_over()
        if finished.any():
            go.reset(finished)
            search.reset(finished)
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
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
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
    args = parser.parse_args()
    n, batch, simulations = args.board_size, args.batch, args.simulations
    actions = n * n + 1
    options = dict(c_puct=1.25, fpu_reduction=0.25, virtual_loss=1.0)

    print(f"workload: {n}x{n}, {batch} games, {simulations} simulations per move, "
          f"leaves per game per step: {args.leaves}, uniform priors, random values, greedy "
          f"moves, subtree reuse")
    search = BatchedMCTS(batch, actions, simulations, seed=args.seed, num_threads=args.threads,
                         **options)
    print(f"buffers: {search.max_nodes} nodes per game, tree {search.memory_bytes / 1e6:.0f} MB; "
          f"search threads: {search.num_threads}; load average before: "
          f"{os.getloadavg()[0]:.2f} (other busy processes make OpenMP barriers stall)")

    # Same first moves from a fresh start for both searches: that is the ratio's workload.
    first = SelfPlay(search, n, args.leaves, args.seed)
    c_first_sims, c_first_time = first.run(args.reference_moves)
    reference = SelfPlay(ReferenceMCTS(batch, actions, simulations, **options), n, args.leaves,
                         args.seed)
    reference_sims, reference_time = reference.run(args.reference_moves)
    ratio = (c_first_sims / c_first_time) / (reference_sims / reference_time)

    # Steady state: the same objects go on, buffers warm, trees reused.
    cpu_start = time.process_time()
    sims, elapsed = first.run(args.moves)
    cores_used = (time.process_time() - cpu_start) / elapsed
    clocks = first.clocks
    rate = sims / elapsed
    tree, engine = clocks["tree"], clocks["engine"]
    glue = elapsed - tree - engine
    print(f"search + engine: {sims:,} simulations in {elapsed:.2f} s over {first.steps:,} steps "
          f"({1e6 * elapsed / first.steps:.0f} us per step, {cores_used:.2f} cores busy) = "
          f"{rate:,.0f} simulations/s")
    print(f"time: tree {percent(tree, elapsed)} (C {percent(clocks['tree_native'], elapsed)}, "
          f"wrapper {percent(tree - clocks['tree_native'], elapsed)}), "
          f"engine {percent(engine, elapsed)} (C {percent(clocks['engine_native'], elapsed)}, "
          f"facade {percent(engine - clocks['engine_native'], elapsed)}), "
          f"Python glue {percent(glue, elapsed)}")
    print(f"tree alone: {sims / tree:,.0f} simulations/s (C part alone: "
          f"{sims / clocks['tree_native']:,.0f}/s)")
    share = (1 / rate) / (1 / rate + 1 / NET_POSITIONS_PER_S)
    print(f"next to a net of {NET_POSITIONS_PER_S:,} positions/s: search + engine would be "
          f"{100 * share:.1f}% of a self-play step (target < 10%, i.e. >= 400,000 sims/s)")
    rclocks = reference.clocks
    print(f"reference (pure Python tree, same engine and glue), {args.reference_moves} move(s) "
          f"from the start: {reference_sims / reference_time:,.0f} simulations/s "
          f"(tree {percent(rclocks['tree'], reference_time)}); C on the same moves: "
          f"{c_first_sims / c_first_time:,.0f} simulations/s")
    summary = f"tree {n}x{n} b{batch} sims_per_s={rate:.0f} vs_reference={ratio:.1f}x"
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
        print(f"parallel regions so far: tree {first.search._target.thread_stats()}, "
              f"engine {first.go._target.thread_stats()}")
        summary = (f"tree {n}x{n} b{batch} sims_per_s={rate:.0f} vs_reference={ratio:.1f}x "
                   f"contended_sims_per_s={contended_rate:.0f} "
                   f"contended_ratio={contended_rate / rate:.2f}")
    print(summary)


if __name__ == "__main__":
    main()
