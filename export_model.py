"""Export a run's checkpoint as a model file: the weights and config a player needs, no
optimizer state and no replay, a few MB at most.

    python export_model.py --run runs/main9 --output models/9x9.npz [--checkpoint K]
    python export_model.py --run runs/main9 --output models/9x9.npz --average-last 16

With --average-last N the model is the mean of the weights of the run's newest N sound
checkpoints in a row (those up to --checkpoint K with it; training/weight_averaging.py), and
its info lists their iterations ("averaged").

The file's info (training.nets.model_info) says where it came from: run, iteration, self-play
games, positions, cpu_seconds and child_cpu_seconds (see bp_tree.py), train_steps, the
init_from source when the run was warm-started, and the bp_tree.py command lines that trained
it. Every front end opens it with training.nets.open_net (`--model PATH`, or a path ending in
.npz where a run is asked for); bp_tree.py --init-from starts a new run from it.
"""
from __future__ import annotations

import os
import sys

from training import options
from training.nets import NetOpenError, read_weights, run_model_info, save_model_file
from training.options import OneLineParser
from training.run_directory import RunDirectory
from training.weight_averaging import average_checkpoints


def main(argv=None) -> int:
    parser = OneLineParser(description="Write a run's checkpoint as a model file.")
    options.add_run(parser)
    options.add_checkpoint(parser)
    parser.add_argument("--output", required=True, help="the model file to write (.npz)")
    parser.add_argument("--play-simulations", type=int, default=None, metavar="S",
                        help="the search per move the GTP engine and the GUI use by default "
                             "(default: the run's play_simulations, else its simulations)")
    parser.add_argument("--average-last", type=int, default=1, metavar="N",
                        help="write the mean of the weights of the newest N checkpoints (up to "
                             "--checkpoint's), not one checkpoint's; the run must keep them "
                             "(bp_tree.py --checkpoints-to-keep) and they must hold one net "
                             "(default: 1, no averaging)")
    args = parser.parse_args(argv)
    options.check_shared(args, parser)
    if args.run is None:
        parser.error("name the run to export with --run")
    if args.play_simulations is not None and not 1 <= args.play_simulations <= 100_000:
        parser.error(f"--play-simulations must be in [1, 100000], got {args.play_simulations}")
    if not args.output.endswith(".npz"):
        parser.error(f"--output must end with .npz (a model file), got {args.output!r}")
    if not 1 <= args.average_last <= 1000:
        parser.error(f"--average-last must be in [1, 1000], got {args.average_last}")
    log = lambda message: print(message, file=sys.stderr, flush=True)  # noqa: E731
    try:
        if args.average_last > 1:
            averaged = average_checkpoints(args.run, args.average_last,
                                           checkpoint=args.checkpoint, log=log)
            config, weights, counters = averaged.config, averaged.weights, averaged.counters
            name, iteration, label = (averaged.path.name, averaged.iterations[-1],
                                      averaged.label)
        else:
            found = read_weights(args.run, checkpoint=args.checkpoint, log=log)
            config, weights, name, iteration = (found.config, found.weights, found.path.name,
                                                found.iteration)
            label = found.label
            if iteration is None:
                raise NetOpenError(f"{found.path} is a model file already: export a run or "
                                   f"one of its checkpoints")
            # read_weights gives the weights; the counters come with the same checkpoint.
            _, counters = RunDirectory(found.path, log=log).load_latest_checkpoint(iteration)
    except NetOpenError as error:
        log(f"export_model: {error}")
        return 2
    info = run_model_info(name, iteration, counters)
    if args.average_last > 1:
        info["averaged"] = list(averaged.iterations)
    if args.play_simulations is not None:
        config = config.overridden(play_simulations=args.play_simulations)
    path = save_model_file(args.output, config, weights, info)
    print(f"wrote {path} ({os.path.getsize(path) / 1e6:.2f} MB): {label}, "
          f"{info.get('games', '?')} self-play games, "
          f"{info.get('cpu_seconds', 0) / 3600:.2f} CPU-hours")
    return 0


if __name__ == "__main__":
    sys.exit(main())
