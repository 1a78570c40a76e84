"""Which net a machine can afford to train: for each blocks x filters, the loop's two rates,
measured here one shape at a time, and what they give together.

A net of each shape (fresh weights; the shipped model's other settings: its board, input
planes, heads, simulations and Gumbel root) is timed twice:
- self-play: `--games` games at once, `--moves` moves of every game after a warm-up move
  (bench_selfplay.py's measure): on the CUDA rules with the array net in float16 on a GPU,
  else the C rules with ONNX Runtime (`--net` chooses);
- training: the loop's step (architectures/train_step.py) on Keras' backend (TensorFlow, or
  JAX with KERAS_BACKEND=jax), on host batches of `--batch` samples as the replay hands them
  over (drawn before the clock starts: the replay's own sampling is not timed); the first
  step (the trace or compilation) is timed apart, and the steps are timed both as the loop's
  passes take them and step by step.

The loop alternates the two, so at `--reuse` training samples per new position it keeps
1 / (1 / self-play positions/s + reuse / training samples/s) positions a second; the table
gives that as positions per minute of the machine, and each part's share of it.

    KERAS_BACKEND=jax python3 benchmarks/bench_shapes.py --shapes 8x32,10x64,10x128 \\
        --backend cuda --games 4096
    .venv/bin/python benchmarks/bench_shapes.py --shapes 2x16,4x32 --games 64 --net onnxruntime

One line per shape: `shape BxF selfplay_positions_per_s=S train_samples_per_s=T
stepwise_samples_per_s=W loop_positions_per_min=L selfplay_share=P first_step_s=C`: T is the
loop's passes (Trainer.train_steps, the figures read after the last step), W the same steps
with each one's figures read before the next (how the loop trained before the passes), and L
and P follow T.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from bench_selfplay import evaluator, selfplay_rates  # noqa: E402
from training.options import OneLineParser  # noqa: E402


def shapes(text: str) -> list[tuple[int, int]]:
    """[(blocks, filters), ...] of "BxF,BxF,..."."""
    found = []
    for part in text.split(","):
        blocks, _, filters = part.strip().lower().partition("x")
        if not (blocks.isdigit() and filters.isdigit() and int(blocks) and int(filters)):
            raise argparse.ArgumentTypeError(
                f"a shape is BLOCKSxFILTERS with both at least 1, such as 10x64; got {part!r}")
        found.append((int(blocks), int(filters)))
    return found


def training_batch(config, batch: int, rng) -> list[np.ndarray]:
    """Targets of the right shapes and ranges: 0/1 planes, a policy distribution, results,
    ownership in {-1, 0, 1}, scores, all outcomes final; the reply target where the net has
    that head."""
    n, moves = config.board_size, config.num_actions
    arrays = [(rng.random((batch, n, n, config.input_planes)) < 0.3).astype(np.float32),
              rng.dirichlet(np.ones(moves), batch).astype(np.float32),
              rng.choice([-1.0, 1.0], batch).astype(np.float32)]
    if config.aux_heads:
        arrays += [rng.integers(-1, 2, (batch, n, n)).astype(np.float32),
                   rng.normal(0, 0.3, batch).astype(np.float32),
                   np.ones(batch, np.float32)]
        if config.reply_head:
            arrays.append(rng.dirichlet(np.ones(moves), batch).astype(np.float32))
    return arrays


def training_rate(trainer, config, steps: int, repeats: int) -> tuple[float, float, float]:
    """(samples/s of the loop's passes, samples/s step by step, seconds of the first step):
    medians over `repeats` of `steps` steps, each on its own batch (drawn before the clock
    starts). A pass gives all its steps to `Trainer.train_steps` and reads the figures after
    the last; step by step, each step's figures are read before the next step is given."""
    rng = np.random.default_rng(0)
    batches = [training_batch(config, trainer.batch_size, rng) for _ in range(steps)]
    started = time.perf_counter()
    trainer.train_step(*batches[0])
    first = time.perf_counter() - started
    passes, stepwise = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        trainer.train_steps(batches)
        passes.append(steps * trainer.batch_size / (time.perf_counter() - started))
        started = time.perf_counter()
        for batch in batches:
            trainer.train_step(*batch)
        stepwise.append(steps * trainer.batch_size / (time.perf_counter() - started))
    return statistics.median(passes), statistics.median(stepwise), first


def main() -> None:
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="8x32,10x64,10x96,10x128,15x128",
                        type=shapes,
                        help="BLOCKSxFILTERS,... (default: %(default)s)")
    parser.add_argument("--model", default=str(ROOT / "models" / "9x9.npz"),
                        help="whose settings besides the shape the nets take")
    parser.add_argument("--backend", default="auto", choices=["cpu", "cuda", "auto"])
    parser.add_argument("--net", default="array", choices=["array", "onnxruntime"],
                        help="self-play's net: the array net (CuPy on a GPU) or ONNX Runtime")
    parser.add_argument("--games", type=int, default=4096, help="self-play games at once")
    parser.add_argument("--moves", type=int, default=2, help="moves per self-play repeat")
    parser.add_argument("--batch", type=int, default=256, help="training batch")
    parser.add_argument("--steps", type=int, default=50, help="training steps per repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--reuse", type=float, default=4.0,
                        help="training samples per new position (the loop's sample_reuse)")
    args = parser.parse_args()

    from kernels.go_batch import describe_backend, resolve_backend
    from training.nets import build_trainer, prepare_jax, read_config

    base, _ = read_config(args.model)
    try:
        # Under KERAS_BACKEND=jax, JAX starts before CuPy loads CUDA, and on the GPU the
        # rules use (bp_tree.py's order and check).
        prepare_jax(base.overridden(backend=args.backend))
    except RuntimeError as error:
        sys.exit(f"bench_shapes.py: {error}")
    backend = resolve_backend(args.backend)
    trainer_device = None
    for blocks, filters in args.shapes:
        config = base.overridden(blocks=blocks, filters=filters, backend=backend,
                                 train_batch_size=args.batch)
        trainer = build_trainer(config)
        if trainer_device is None:
            trainer_device = trainer.device
            print(f"{config.board_size}x{config.board_size}, {config.simulations} simulations, "
                  f"gumbel_considered {config.gumbel_considered}, {config.input_planes} input "
                  f"planes, aux heads {config.aux_heads}; rules: {describe_backend(backend)}; "
                  f"training: {trainer_device}, batch {args.batch}; {os.cpu_count()} CPU "
                  f"cores", flush=True)
        from architectures.array_net import keras_named_weights
        net, label, synchronize = evaluator(keras_named_weights(trainer.model), config, backend,
                                            args.net)
        _, positions, net_only, _ = selfplay_rates(config, net, synchronize, args.games, 1,
                                                   args.moves, args.repeats)
        del net
        samples, stepwise, first = training_rate(trainer, config, args.steps, args.repeats)
        loop = 1 / (1 / positions + args.reuse / samples)
        print(f"shape {blocks}x{filters} selfplay_positions_per_s={positions:.0f} "
              f"train_samples_per_s={samples:.0f} stepwise_samples_per_s={stepwise:.0f} "
              f"loop_positions_per_min={60 * loop:.0f} "
              f"selfplay_share={loop / positions:.2f} first_step_s={first:.1f} "
              f"net_only_evals_per_s={net_only:.0f} ({label})", flush=True)


if __name__ == "__main__":
    main()
