"""Supervised training from a directory of SGF game records: the run's net learns the moves
played (policy) and the results (value), under the 8 board symmetries, and a share of the
games is held out to measure move-prediction accuracy.

    python train_sgf.py --sgf DIR --run NAME [--preset P] [--board-size 9] [--iterations 4]
                        [--held-out 0.1] [any bp_tree.py config flag]

Every config flag of bp_tree.py applies (they shape the net and the rules). Each pass over
the training positions is an iteration of the run with its checkpoint; as in bp_tree.py,
`--iterations I` trains until the run has I iterations (0: one more pass), and
`bp_tree.py --run NAME --iterations 0` (or a higher I) then continues by self-play (the
run's config keeps the I it was given, so without the flag the trainer finds it done).
Files that cannot be used are counted and skipped with their reasons (games/sgf_corpus.py).
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

from games.sgf_corpus import read_sgf_directory
from training.config import Config
from training.options import BACKEND_HELP
from training.supervised import (RunRefused, move_accuracy, open_supervised_run, split_games,
                                 stack)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def add_arguments(parser) -> None:
    parser.add_argument("--sgf", required=True, help="directory of .sgf files (searched recursively)")
    parser.add_argument("--held-out", type=float, default=0.1,
                        help="share of the games held out for move-prediction accuracy (default 0.1)")


def check(args, parser) -> None:
    if not 0 <= args.held_out < 1:
        parser.error("--held-out must be in [0, 1)")


def main(argv=None) -> int:
    config, args = Config.from_args(
        argv, description="Train a run's net on SGF game records. " + BACKEND_HELP,
        add_arguments=add_arguments, check=check)
    try:
        corpus = read_sgf_directory(args.sgf, config)
    except FileNotFoundError as error:
        log(f"train_sgf: {error}")
        return 2
    log(f"{args.sgf}: {corpus.files} files, {len(corpus.games)} games used "
        f"({corpus.handicap_games} with handicap), {corpus.positions} positions, "
        f"{len(corpus.skipped)} skipped")
    for kind, count in sorted(corpus.skipped_by_reason().items()):
        example = next(f"{name}: {why}" for name, why in corpus.skipped if why.split(":")[0] == kind)
        log(f"  skipped {count} ({kind}), e.g. {example}")
    if not corpus.games:
        log(f"train_sgf: no usable game in {args.sgf}")
        return 2
    train_games, held_games = split_games(corpus.games, args.held_out, config.seed)
    train = stack([corpus.games[i] for i in train_games])
    held = stack([corpus.games[i] for i in held_games]) if held_games else None
    try:
        loop = open_supervised_run(config, args, log=log)
    except RunRefused as error:
        log(f"train_sgf: {error}")
        return error.code
    config = loop.config
    rng = np.random.default_rng([config.seed, loop.counters["iteration"]])
    steps = loop.steps_per_pass(len(train))
    goal = config.iterations or loop.counters["iteration"] + 1
    passes = goal - loop.counters["iteration"]
    print(f"{len(train_games)} training games ({len(train)} positions), {len(held_games)} held "
          f"out ({len(held) if held is not None else 0} positions); {passes} passes of {steps} "
          f"steps of {config.train_batch_size}", flush=True)
    sample = np.random.default_rng(config.seed).choice(len(train), min(len(train), 4096),
                                                       replace=False)
    train_sample = train.take(sample)
    while loop.counters["iteration"] < goal:
        started = time.perf_counter()
        losses = loop.train(train, steps, rng)
        record = {**losses, "sgf_games": len(train_games), "sgf_positions": len(train),
                  "accuracy_train": round(move_accuracy(loop.net, train_sample), 4)}
        if held is not None:
            record["accuracy_held_out"] = round(move_accuracy(loop.net, held), 4)
            record["held_out_positions"] = len(held)
        record["seconds"] = round(time.perf_counter() - started, 2)
        record = loop.finish_iteration(record, time.perf_counter() - started)
        print(f"iter {record['iteration']}: policy {record['loss_policy']:.3f} value "
              f"{record['loss_value']:.3f} | move accuracy train {record['accuracy_train']:.1%}"
              + (f", held out {record['accuracy_held_out']:.1%}" if held is not None else "")
              + f" | {record['seconds']:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.exit(main())
