"""GTP (version 2) engine for GUIs (Sabaki, GoGui, Lizzie) and matches (GNU Go, gogui-twogtp).

    python gtp_engine.py --run runs/NAME [--checkpoint K] [--sims S] [--no-search]
                         [--resign-threshold V] [--analysis-sims A] [--rollout-lambda L]
    python gtp_engine.py --model models/9x9.npz [--sims S] [...]
    python gtp_engine.py --player mcts:SIMS [--board-size N] [--komi K]

Loads the newest readable checkpoint of the run (or iteration K), or a model file (the
shipped 9x9 net: models/9x9.npz), and answers GTP on
stdin/stdout; `--rollout-lambda` mixes random playout results into the search's leaf values
((1 - L) * net + L * playout). `--player mcts:SIMS` plays without a net instead: pure Monte
Carlo tree search (uniform priors over the sensible moves, one playout per leaf, SIMS
simulations per move) on an N x N board (default 9). `--run` works like everywhere else (a bare name is runs/NAME under the project,
whatever the working directory; a path is used as given), so GUIs that start engines in
another directory find the run. Only the protocol is written to stdout: the process keeps the
real stdout for itself and points file descriptor 1 at stderr, where logs go, so nothing
printed by a library can corrupt a response. Commands and their behaviour: gtp/engine.py.
`version` answers the program's version number (pyproject.toml; GUIs such as Lizzie parse
it); which net plays is on the start-up line on stderr and the answer to `bgz-net`.
Exit status 0 after `quit`, at the end of input, and when the controller closes the engine's
stdout (one line on stderr says so); 2 when there is no run, model or checkpoint to play.
"""
from __future__ import annotations

import argparse
import io
import os
import sys

from games.search import pure_mcts
from gtp import EngineOptions, GoEngine, GtpServer
from gtp.version import program_version
from training.config import Config
from training.nets import NetOpenError, describe_devices, open_net


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="GTP engine playing a trained net.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {program_version()}")
    parser.add_argument("--run",
                        help="run directory: a bare name means runs/NAME, a path is used as given")
    parser.add_argument("--model", default=None, metavar="FILE",
                        help="a model file (.npz, e.g. the shipped models/9x9.npz) instead of --run")
    parser.add_argument("--player", default=None,
                        help="mcts:SIMS: pure Monte Carlo tree search without a net (instead of --run)")
    parser.add_argument("--board-size", type=int, default=None, help="with --player (default 9)")
    parser.add_argument("--komi", type=float, default=None, help="with --player (default 7.5)")
    parser.add_argument("--rollout-lambda", type=float, default=None,
                        help="with --run: leaf value (1 - L) * net + L * random playout "
                             "(default: the run's config)")
    parser.add_argument("--checkpoint", type=int, default=None,
                        help="iteration to load (default: the newest readable checkpoint)")
    parser.add_argument("--sims", type=int, default=None,
                        help="simulations per genmove (default: the config's play_simulations, else its simulations)")
    parser.add_argument("--no-search", action="store_true",
                        help="genmove plays the net's most likely move, without search")
    parser.add_argument("--resign-threshold", type=float, default=None,
                        help="resign when the value (-1..1, mover's view) is below this "
                             "(default: never resign)")
    parser.add_argument("--analysis-sims", type=int, default=None,
                        help="visits lz-analyze and kata-analyze grow a position's search to "
                             "(default: min(10000, 800000 // (N*N + 1)), 9756 on 9x9)")
    parser.add_argument("--version-answer", default=None, metavar="TEXT",
                        help="what GTP `version` answers (default: the program's version, "
                             f"{program_version()}). Lizzie 0.7 reads it as Leela Zero's and "
                             "hangs below 0.15: give it --version-answer 0.17")
    args = parser.parse_args(argv)
    if [args.run, args.model, args.player].count(None) != 2:
        parser.error("name one of --run (a trained run), --model FILE (a model file) or "
                     "--player mcts:SIMS")
    if args.model is not None:
        if not args.model.endswith(".npz"):
            parser.error(f"--model {args.model}: a model file ends in .npz (export_model.py "
                         f"writes one); a run directory goes with --run")
        if args.checkpoint is not None:
            parser.error("--checkpoint picks a checkpoint of --run; a model file has one net")
    if args.player is not None:
        kind, _, value = args.player.partition(":")
        if kind != "mcts" or not value.isdigit() or int(value) < 1:
            parser.error(f"--player {args.player}: expected mcts:SIMS with SIMS >= 1")
        if args.checkpoint is not None or args.no_search or args.rollout_lambda is not None:
            parser.error("--checkpoint, --no-search and --rollout-lambda are for --run")
    elif args.board_size is not None or args.komi is not None:
        parser.error("--board-size and --komi are for --player (a run's net knows its board)")
    if args.rollout_lambda is not None and not 0 <= args.rollout_lambda <= 1:
        parser.error("--rollout-lambda must be in 0..1")
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


def pure_mcts_engine(args: argparse.Namespace) -> GoEngine:
    simulations = int(args.player.partition(":")[2])
    try:
        config = Config(board_size=9 if args.board_size is None else args.board_size,
                        komi=7.5 if args.komi is None else args.komi, backend="cpu").validate()
    except ValueError as error:
        log(f"gtp_engine: {error}")
        raise SystemExit(2) from None
    config, evaluator = pure_mcts(config)
    options = EngineOptions(simulations=simulations, resign_threshold=args.resign_threshold,
                            analysis_simulations=args.analysis_sims,
                            net=f"pure Monte Carlo tree search ({args.player})",
                            **({"version": args.version_answer} if args.version_answer else {}))
    log(f"gtp_engine: pure Monte Carlo tree search, {config.board_size}x{config.board_size}, "
        f"{simulations} simulations (one playout each) per move")
    return GoEngine(config, evaluator, options, log=log, seed=config.seed)


def load_engine(args: argparse.Namespace):
    """The GoEngine of the run's checkpoint (or the pure MCTS player); SystemExit(2) with a
    message if there is none."""
    if args.player is not None:
        return pure_mcts_engine(args)
    try:
        opened = open_net(args.model or args.run, checkpoint=args.checkpoint, batch_size=1,
                          log=log)
    except NetOpenError as error:
        log(f"gtp_engine: {error}")
        raise SystemExit(2) from None
    # One game at a time, whose board the engine reads on the host after every command: its
    # rules run on the CPU whatever the run was trained with (a kernel launch per call would
    # cost more than the C call for one board); the net still runs on a GPU when there is one.
    config = opened.config.overridden(backend="cpu")
    if args.rollout_lambda is not None:
        config = config.overridden(rollout_lambda=args.rollout_lambda)
    simulations = args.sims or config.resolved_play_simulations
    where = opened.path if opened.iteration is None else f"{opened.path} iteration {opened.iteration}"
    net = (f"{where}, {config.board_size}x{config.board_size}, "
           f"net {config.blocks}x{config.filters}, "
           + (f"{simulations} simulations per move" if not args.no_search else "no search"))
    options = EngineOptions(simulations=simulations, use_search=not args.no_search,
                            resign_threshold=args.resign_threshold,
                            analysis_simulations=args.analysis_sims, net=net,
                            **({"version": args.version_answer} if args.version_answer else {}))
    engine = GoEngine(config, opened.net, options, log=log, seed=config.seed)
    log(f"gtp_engine: Batched Go Zero {program_version()} playing {net}; {describe_devices(config)}")
    return engine


def main(argv=None) -> int:
    args = parse_args(argv)
    protocol_output = claim_stdout()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    engine = load_engine(args)
    server = GtpServer(engine.handlers(), protocol_output, log=log)
    server.serve(sys.stdin)
    if server.output_closed:
        discard_output(protocol_output)
    return 0


def discard_output(output) -> None:
    """Point a closed pipe's descriptor at /dev/null: the response it could not take is still
    buffered, and flushing it at exit would print a BrokenPipeError."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, output.fileno())
    os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())
