"""Distillation: a (smaller) student net learns a teacher's soft policies at temperature T
and its values, over positions from the teacher's own games (training/distillation.py).

    python distill.py --teacher PATH --run NAME [--preset P] [--blocks 2 --filters 16]
                      [--temperature 1.0] [--teacher-sims S] [--iterations 4]

PATH is a run directory (its newest checkpoint) or a model file, opened by
training.nets.open_net. The student's config comes from the usual config flags (those of
bp_tree.py); its board size, input history and komi must be the teacher's. Each iteration
the teacher self-plays `positions_per_iteration` positions (searching `--teacher-sims`
simulations, default its config's eval_simulations), the student trains on them
(`sample_reuse` samples per position, 8 random symmetries) and a checkpoint is written, so
the run is one bp_tree.py continues. As in bp_tree.py, `--iterations I` runs until the run
has I iterations (0: one more). Before training, a separate set of the teacher's games
is held out; every iteration reports the student's KL divergence to the teacher on it, the
top-1 agreement, and both nets' speed (positions/s on one batch of num_games).
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

from games.selfplay import SelfPlay
from kernels.go_batch import with_komi_plane
from training.config import Config
from training.distillation import mean_kl, positions_per_second, teacher_targets
from training.nets import NetOpenError, open_net
from training.options import BACKEND_HELP
from training.supervised import RunRefused, move_accuracy, open_supervised_run


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def add_arguments(parser) -> None:
    parser.add_argument("--teacher", required=True,
                        help="the teacher: a run directory (newest checkpoint) or a model file .npz")
    parser.add_argument("--temperature", type=float, default=1.0,
                        help="softmax temperature of the teacher's policy targets (default 1)")
    parser.add_argument("--teacher-sims", type=int, default=None,
                        help="simulations per move of the teacher's games (default: its "
                             "config's eval_simulations)")
    parser.add_argument("--held-out-positions", type=int, default=512,
                        help="positions of separate teacher games to measure the KL on")


def check(args, parser) -> None:
    if args.temperature <= 0:
        parser.error("--temperature must be positive")
    if args.teacher_sims is not None and args.teacher_sims < 1:
        parser.error("--teacher-sims must be at least 1")
    if args.held_out_positions < 1:
        parser.error("--held-out-positions must be at least 1")


def net_input(batch, komi_input: bool) -> np.ndarray:
    """The nets' input planes of self-play positions: the komi plane goes back on for nets
    that read it (self-play keeps the 0/1 planes and each position's komi apart)."""
    return with_komi_plane(batch.planes, batch.komi) if komi_input else batch.planes


def main(argv=None) -> int:
    config, args = Config.from_args(
        argv, description="Distil a teacher net into a student run. " + BACKEND_HELP,
        add_arguments=add_arguments, check=check)
    try:
        teacher = open_net(args.teacher, batch_size=config.num_games, log=log)
    except NetOpenError as error:
        log(f"distill: {error}")
        return 2
    mismatched = [f"{name}: teacher {getattr(teacher.config, name)}, student {getattr(config, name)}"
                  for name in ("board_size", "history", "komi", "komi_input")
                  if getattr(teacher.config, name) != getattr(config, name)]
    if mismatched:
        log(f"distill: the student must play the teacher's game ({'; '.join(mismatched)}); "
            f"pass the teacher's values as flags")
        return 2
    try:
        student = open_supervised_run(config, args, log=log, eval_batch=config.num_games)
    except RunRefused as error:
        log(f"distill: {error}")
        return error.code
    config = student.config
    teacher_config = teacher.config.overridden(
        num_games=config.num_games, simulations=args.teacher_sims or teacher.config.eval_simulations,
        resign_threshold=-1.0)
    iteration = student.counters["iteration"]
    held_games = SelfPlay(teacher_config, teacher.net, seed=config.seed * 1_000_003 + 999_999)
    held = teacher_targets(teacher.net, net_input(held_games.play(args.held_out_positions),
                                                   config.komi_input),
                           args.temperature)
    speed_planes = held.planes[:config.num_games]
    teacher_speed = positions_per_second(teacher.net, speed_planes)
    student_speed = positions_per_second(student.net, speed_planes)
    print(f"teacher {teacher.label} ({teacher.config.blocks}x{teacher.config.filters}, "
          f"{teacher_speed:.0f} positions/s), student {config.blocks}x{config.filters} "
          f"({student_speed:.0f} positions/s); T = {args.temperature:g}; {len(held)} held-out "
          f"positions; KL {mean_kl(student.net, held):.4f} nats before", flush=True)
    games = SelfPlay(teacher_config, teacher.net, seed=config.seed * 1_000_003 + iteration)
    rng = np.random.default_rng([config.seed, iteration])
    goal = config.iterations or iteration + 1
    while student.counters["iteration"] < goal:
        started = time.perf_counter()
        batch = games.play(config.positions_per_iteration)
        targets = teacher_targets(teacher.net, net_input(batch, config.komi_input), args.temperature)
        steps = max(1, int(np.ceil(len(targets) * config.sample_reuse / config.train_batch_size)))
        losses = student.train(targets, steps, rng)
        record = {**losses, "positions": len(targets), "teacher_games": len(batch.games),
                  "kl_held_out": round(mean_kl(student.net, held), 5),
                  "agreement_held_out": round(move_accuracy(student.net, held), 4),
                  "student_positions_per_s": round(student_speed, 1),
                  "teacher_positions_per_s": round(teacher_speed, 1),
                  "temperature": args.temperature}
        record["seconds"] = round(time.perf_counter() - started, 2)
        record = student.finish_iteration(record, time.perf_counter() - started)
        print(f"iter {record['iteration']}: policy {record['loss_policy']:.3f} value "
              f"{record['loss_value']:.3f} | held out: KL {record['kl_held_out']:.4f} nats, "
              f"agreement {record['agreement_held_out']:.1%} | {record['seconds']:.0f} s",
              flush=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.exit(main())
