"""Self-play overhead: NN evaluations per second during self-play over the same net's raw
batched inference rate, both measured in this run with the `cpu` preset's net and batch.

A ratio of 1 would mean rules, search and glue cost nothing next to the net. Repeats
alternate the two measurements; the median of each is reported.

    .venv/bin/python benchmarks/bench_selfplay.py [--repeats R] [--positions P] [--preset cpu]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from architectures import CompiledNet  # noqa: E402
from training.nets import build_trainer  # noqa: E402
from training.config import PRESETS  # noqa: E402
from games.selfplay import SelfPlay  # noqa: E402


def raw_inference_rate(net, planes: np.ndarray, seconds: float) -> float:
    calls = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        net(planes)
        calls += 1
    return calls * len(planes) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="cpu", choices=sorted(PRESETS))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--positions", type=int, default=1024, help="self-play positions per repeat")
    args = parser.parse_args()

    config = PRESETS[args.preset]
    trainer = build_trainer(config)
    net = CompiledNet(trainer.model, config.num_games)
    rng = np.random.default_rng(0)
    planes = (rng.random((config.num_games, config.board_size, config.board_size,
                          config.input_planes)) < 0.3).astype(np.float32)
    # Self-play's net as bp_tree.py builds it (several compiled shapes); the baseline is the
    # full batch, the net's best rate.
    selfplay = SelfPlay(config, CompiledNet(trainer.model, config.num_games, shapes=8), seed=1)
    selfplay.play(config.num_games)  # warm-up: traces, page faults, games under way
    net_rates, selfplay_rates, position_rates = [], [], []
    for _ in range(args.repeats):
        moves_before = int(selfplay.driver.go.move_count().sum())
        batch = selfplay.play(args.positions)
        selfplay_rates.append(batch.nn_evaluations / batch.seconds)
        # Positions played inside this window: the finished games' positions, less those their
        # games had played before it, plus those of the games still under way.
        played = batch.positions - moves_before + int(selfplay.driver.go.move_count().sum())
        position_rates.append(played / batch.seconds)
        net_rates.append(raw_inference_rate(net, planes, seconds=max(2.0, batch.seconds / 3)))
    evals, nn_only = statistics.median(selfplay_rates), statistics.median(net_rates)
    print(f"preset {args.preset}: {config.board_size}x{config.board_size}, net {config.blocks}x"
          f"{config.filters}, batch {config.num_games}, {config.simulations} simulations")
    print(f"self-play evals/s per repeat: {', '.join(f'{r:,.0f}' for r in selfplay_rates)}; "
          f"positions/s {statistics.median(position_rates):,.0f}")
    print(f"raw inference positions/s per repeat: {', '.join(f'{r:,.0f}' for r in net_rates)}")
    print(f"selfplay evals_per_s={evals:.0f} nn_only={nn_only:.0f} ratio={evals / nn_only:.3f}")


if __name__ == "__main__":
    main()
