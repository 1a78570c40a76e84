"""Self-play speed, two ways.

Preset mode (the default): NN evaluations per second during self-play over the same net's raw
batched inference rate, both measured in this run with a preset's fresh net and batch (needs
TensorFlow). A ratio of 1 would mean rules, search and glue cost nothing next to the net.
Repeats alternate the two measurements; the median of each is reported.

    .venv/bin/python benchmarks/bench_selfplay.py [--repeats R] [--positions P] [--preset cpu]

Model mode (`--model`): a model file's net and its own self-play settings (the shipped net's:
Gumbel root selection, 32 simulations) at each batch of `--batches`, on one rules back end and
one net back end, with no TensorFlow: what a GPU machine without it measures.
`--net array` runs architectures/array_net.py (CuPy on the CUDA back end, NumPy on the CPU);
`--net onnxruntime` runs the model in ONNX Runtime on the CPU (the CPU back end's best). Each
repeat times `--moves` moves of every game after `--warmup` moves (finished games restart).

    python3 benchmarks/bench_selfplay.py --model models/9x9.npz --backend cuda --net array \
        --batches 1024,4096,16384
    python3 benchmarks/bench_selfplay.py --model models/9x9.npz --backend cpu --net onnxruntime \
        --batches 256,1024

The last line: `selfplay MODEL backend=B net=NET best_batch=K evals_per_s=X positions_per_s=Y`.
"""
from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from games.selfplay import SelfPlay  # noqa: E402
from training.config import PRESETS  # noqa: E402
from training.options import OneLineParser  # noqa: E402


def raw_inference_rate(net, planes, seconds: float, synchronize=lambda: None) -> float:
    calls = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        net(planes)
        synchronize()
        calls += 1
    return calls * len(planes) / (time.perf_counter() - start)


def preset_mode(args) -> None:
    from architectures import CompiledNet
    from training.nets import build_trainer

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


def evaluator(weights: dict, config, backend: str, net: str = "array",
              precision: str = "float16"):
    """(evaluator, label, synchronize) of named weights for the chosen net back end."""
    from architectures.array_net import ArrayNet

    if net == "array":
        if backend == "cuda":
            import cupy
            array_net = ArrayNet(weights, config, xp=cupy, precision=precision)
            return array_net, f"array {precision} (CuPy)", cupy.cuda.Device().synchronize
        return ArrayNet(weights, config), "array float32 (NumPy)", lambda: None
    from architectures.onnx_export import (allowed_cores, onnx_graph, onnxruntime_session,
                                           session_evaluator)

    session = onnxruntime_session(onnx_graph(weights, config.board_size, config.input_planes,
                                             "model"))
    return session_evaluator(session), f"onnxruntime ({allowed_cores()} threads)", lambda: None


def selfplay_rates(config, net, synchronize, batch_size: int, warmup: int, moves: int,
                   repeats: int) -> tuple[float, float, float, list[float]]:
    """(evaluations/s, positions/s, the net alone's evaluations/s, each repeat's
    evaluations/s) of self-play at `batch_size` games: `repeats` times `moves` moves of
    every game after `warmup` moves (finished games restart); medians."""
    selfplay = SelfPlay(config.overridden(num_games=batch_size), net, seed=1)
    selfplay.play(10 ** 12, max_moves=warmup)
    rates, position_rates = [], []
    for _ in range(repeats):
        batch = selfplay.play(10 ** 12, max_moves=moves)
        rates.append(batch.nn_evaluations / batch.seconds)
        position_rates.append(batch.positions_played / batch.seconds)
    xp = selfplay.driver.go.xp
    planes = xp.asarray((np.random.default_rng(0).random(
        (batch_size, config.board_size, config.board_size, config.input_planes)) < 0.3
                         ).astype(np.float32))
    net_only = raw_inference_rate(net, planes, seconds=2.0, synchronize=synchronize)
    return statistics.median(rates), statistics.median(position_rates), net_only, rates


def model_mode(args) -> None:
    from kernels.go_batch import describe_backend, resolve_backend
    from training.nets import read_named_weights

    config, weights, opened = read_named_weights(args.model)
    path = opened.path
    backend = resolve_backend(args.backend)
    net, label, synchronize = evaluator(weights, config, backend, args.net, args.precision)
    print(f"model {path.name}: {config.board_size}x{config.board_size}, net {config.blocks}x"
          f"{config.filters}, {config.simulations} simulations, gumbel_considered "
          f"{config.gumbel_considered}; rules: {describe_backend(backend)}; net: {label}; "
          f"{os.cpu_count()} CPU cores", flush=True)
    best = None
    for batch_size in args.batches:
        evals, positions, net_only, rates = selfplay_rates(
            config.overridden(backend=backend), net, synchronize, batch_size, args.warmup,
            args.moves, args.repeats)
        print(f"selfplay b{batch_size} evals_per_s={evals:.0f} positions_per_s={positions:.0f} "
              f"net_only_per_s={net_only:.0f} repeats={', '.join(f'{r:,.0f}' for r in rates)}",
              flush=True)
        if best is None or evals > best[1]:
            best = (batch_size, evals, positions)
    print(f"selfplay {path.name} backend={backend} net={args.net} best_batch={best[0]} "
          f"evals_per_s={best[1]:.0f} positions_per_s={best[2]:.0f}")


def main() -> None:
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="cpu", choices=sorted(PRESETS))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--positions", type=int, default=1024, help="self-play positions per repeat")
    parser.add_argument("--model", help="a model file: model mode (see the docstring)")
    parser.add_argument("--backend", default="auto", choices=["cpu", "cuda", "auto"])
    parser.add_argument("--net", default="array", choices=["array", "onnxruntime"])
    parser.add_argument("--precision", default="float16", choices=["float32", "float16"])
    parser.add_argument("--batches", default="1024,4096,16384",
                        type=lambda text: [int(part) for part in text.split(",")])
    parser.add_argument("--moves", type=int, default=2, help="moves per repeat (model mode)")
    parser.add_argument("--warmup", type=int, default=1, help="moves before timing (model mode)")
    args = parser.parse_args()
    if args.model:
        model_mode(args)
    else:
        preset_mode(args)


if __name__ == "__main__":
    main()
