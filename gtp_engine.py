"""GTP (version 2) engine for GUIs (Sabaki, GoGui, Lizzie) and matches (GNU Go, gogui-twogtp).

    python gtp_engine.py --run runs/NAME [--checkpoint K] [--sims S] [--no-search]
                         [--resign-threshold V] [--analysis-sims A]

Loads the newest readable checkpoint of the run (or iteration K) and answers GTP on
stdin/stdout. `--run` works like everywhere else (a bare name is runs/NAME under the project,
whatever the working directory; a path is used as given), so GUIs that start engines in
another directory find the run. Only the protocol is written to stdout: the process keeps the
real stdout for itself and points file descriptor 1 at stderr, where logs go, so nothing
printed by a library can corrupt a response. Commands and their behaviour: gtp/engine.py.
"""
from __future__ import annotations

import argparse
import io
import os
import sys

from gtp import EngineOptions, GoEngine, GtpServer
from training.nets import NetOpenError, describe_devices, open_net


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="GTP engine playing a trained net.")
    parser.add_argument("--run", required=True,
                        help="run directory: a bare name means runs/NAME, a path is used as given")
    parser.add_argument("--checkpoint", type=int, default=None,
                        help="iteration to load (default: the newest readable checkpoint)")
    parser.add_argument("--sims", type=int, default=None,
                        help="simulations per genmove (default: the run's config)")
    parser.add_argument("--no-search", action="store_true",
                        help="genmove plays the net's most likely move, without search")
    parser.add_argument("--resign-threshold", type=float, default=None,
                        help="resign when the value (-1..1, mover's view) is below this "
                             "(default: never resign)")
    parser.add_argument("--analysis-sims", type=int, default=None,
                        help="simulations lz-analyze may grow one tree to (default: by board size)")
    args = parser.parse_args(argv)
    if args.sims is not None and args.sims < 1:
        parser.error("--sims must be at least 1")
    if args.analysis_sims is not None and args.analysis_sims < 1:
        parser.error("--analysis-sims must be at least 1")
    if args.resign_threshold is not None and not -1 <= args.resign_threshold <= 1:
        parser.error("--resign-threshold must be in -1..1")
    return args


def claim_stdout():
    """A text handle on the real stdout for the protocol alone; file descriptor 1 and
    sys.stdout then point at stderr, so stray output of any library lands there."""
    sys.stdout.flush()
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return io.TextIOWrapper(os.fdopen(protocol_fd, "wb"), encoding="utf-8", newline="\n",
                            write_through=True)


def load_engine(args: argparse.Namespace):
    """The GoEngine of the run's checkpoint; SystemExit(2) with a message if there is none."""
    try:
        opened = open_net(args.run, checkpoint=args.checkpoint, batch_size=1, log=log)
    except NetOpenError as error:
        log(f"gtp_engine: {error}")
        raise SystemExit(2) from None
    # One game at a time, whose board the engine reads on the host after every command: its
    # rules run on the CPU whatever the run was trained with (a kernel launch per call would
    # cost more than the C call for one board); the net still runs on a GPU when there is one.
    config = opened.config.overridden(backend="cpu")
    options = EngineOptions(simulations=args.sims or config.simulations,
                            use_search=not args.no_search,
                            resign_threshold=args.resign_threshold,
                            analysis_simulations=args.analysis_sims,
                            version=opened.label)
    engine = GoEngine(config, opened.net, options, log=log, seed=config.seed)
    log(f"gtp_engine: {opened.path}: {opened.label}, {config.board_size}x{config.board_size}, "
        f"net {config.blocks}x{config.filters}, "
        + (f"{options.simulations} simulations per move" if options.use_search else "no search")
        + f"; {describe_devices(config)}")
    return engine


def main(argv=None) -> int:
    args = parse_args(argv)
    protocol_output = claim_stdout()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    engine = load_engine(args)
    GtpServer(engine.handlers(), protocol_output, log=log).serve(sys.stdin)
    return 0


if __name__ == "__main__":
    sys.exit(main())
