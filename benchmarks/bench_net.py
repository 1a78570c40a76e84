"""Net throughput: compiled batched inference and training steps, positions per second.

For each net size, at batch 128 with the 18 input planes of `GoBatch(history_length=7)`:
inference through `CompiledNet` (NumPy in, NumPy out, as the search calls it; batch norm
folded, and for comparison `fold_batch_norm=False`, which calls the Keras model) and
`Trainer.train_step`, each the median of several timed repeats. The GFLOP/s column counts
2 FLOPs per multiply-add of the forward pass (the 2-core boxes measured ~450-540 GFLOP/s).
The last line is the 4x32 9x9 summary.

    .venv/bin/python benchmarks/bench_net.py [--seconds S] [--repeats R] [--batch B]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from architectures import CompiledNet, Trainer, build_model  # noqa: E402

INPUT_PLANES = 18
VALUE_HIDDEN = 64
# (board_size, blocks, filters); the first is the summary net.
SIZES = [(9, 4, 32), (9, 6, 64), (7, 5, 128), (5, 2, 16)]


def forward_flops(board_size: int, blocks: int, filters: int) -> int:
    points = board_size * board_size
    multiply_adds = (
        9 * INPUT_PLANES * filters * points               # stem
        + blocks * 2 * 9 * filters * filters * points     # residual blocks
        + filters * 3 * points                            # 1x1 head convs (2 + 1 filters)
        + 2 * points * (points + 1)                       # policy dense
        + points * VALUE_HIDDEN + VALUE_HIDDEN            # value dense layers
    )
    return 2 * multiply_adds


def rate(function, positions_per_call: int, seconds: float, repeats: int) -> float:
    """Median positions/s over `repeats` timed runs of about `seconds` each."""
    function()
    start = time.perf_counter()
    function()
    calls = max(1, int(seconds / max(time.perf_counter() - start, 1e-6)))
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            function()
        rates.append(calls * positions_per_call / (time.perf_counter() - start))
    return statistics.median(rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="per timed repeat")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch", type=int, default=128)
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    results = {}
    print(f"batch {args.batch}, {INPUT_PLANES} input planes, median of {args.repeats} x "
          f"{args.seconds:g} s")
    print(f"{'net':>12} {'MFLOP/pos':>10} {'infer pos/s':>12} {'GFLOP/s':>8} "
          f"{'unfolded':>9} {'train pos/s':>12} {'infer/train':>11}")
    for board_size, blocks, filters in SIZES:
        model = build_model(board_size, INPUT_PLANES, blocks, filters, value_hidden=VALUE_HIDDEN)
        shape = (args.batch, board_size, board_size, INPUT_PLANES)
        planes = (rng.random(shape) < 0.3).astype(np.float32)
        actions = board_size * board_size + 1
        policy_targets = rng.dirichlet(np.full(actions, 0.3), args.batch).astype(np.float32)
        value_targets = rng.choice([-1.0, 1.0], args.batch).astype(np.float32)

        net = CompiledNet(model, args.batch)
        inference = rate(lambda: net(planes), args.batch, args.seconds, args.repeats)
        keras_net = CompiledNet(model, args.batch, fold_batch_norm=False)
        unfolded = rate(lambda: keras_net(planes), args.batch, args.seconds, args.repeats)
        trainer = Trainer(model, args.batch)
        training = rate(lambda: trainer.train_step(planes, policy_targets, value_targets),
                        args.batch, args.seconds, args.repeats)
        assert net.tracing_count == 1 and trainer.tracing_count == 1

        flops = forward_flops(board_size, blocks, filters)
        name = f"{board_size}x{board_size} {blocks}x{filters}"
        results[(board_size, blocks, filters)] = (name, inference, training)
        print(f"{name:>12} {flops / 1e6:10.2f} {inference:12.0f} {inference * flops / 1e9:8.0f} "
              f"{unfolded:9.0f} {training:12.0f} {inference / training:11.2f}", flush=True)

    name, inference, training = results[SIZES[0]]
    print(f"net {name.replace(' ', '_')} inference_per_s={inference:.0f} "
          f"train_per_s={training:.0f}")


if __name__ == "__main__":
    main()
