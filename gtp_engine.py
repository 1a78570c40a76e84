"""GTP (version 2) engine for GUIs (Sabaki, GoGui, Lizzie) and matches (GNU Go, gogui-twogtp).

    python gtp_engine.py [--model models/9x9.npz] [--sims S] [--komi K] [...]
    python gtp_engine.py --run runs/NAME [--checkpoint K] [--sims S] [--no-search]
                         [--resign-threshold V] [--analysis-sims A] [--rollout-lambda L]
    python gtp_engine.py --player mcts:SIMS [--board-size N] [--komi K]

Loads a model file (by default the shipped 9x9 net, models/9x9.npz), or the newest readable
checkpoint of a run (or iteration K), and answers GTP on
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
import os
import sys

from games import players
from games.stdio import claim_stdout, discard_output
from games.search import pure_mcts
from gtp import EngineOptions, GoEngine, GtpServer
from gtp.version import program_version
from training import options
from training.nets import describe_devices
from training.options import OneLineParser


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def parse_args(argv=None) -> argparse.Namespace:
    parser = OneLineParser(description="GTP engine playing a trained net (default: the shipped "
                                       "model, models/9x9.npz).")
    parser.add_argument("--version", action="version", version=f"%(prog)s {program_version()}")
    options.add_net_source(parser)
    options.add_player(parser, "--player", dest="player",
                       help="mcts:SIMS plays pure Monte Carlo tree search without a net "
                            "(instead of --run or --model); model:FILE is --model")
    options.add_search(parser)
    options.add_game(parser)
    options.add_seed(parser)
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
    options.check_shared(args, parser)
    if args.player is not None and args.player.kind not in ("mcts", "model"):
        parser.error(f"--player {args.player}: the engine plays a net or mcts:SIMS")
    if args.analysis_sims is not None and args.analysis_sims < 1:
        parser.error("--analysis-sims must be at least 1")
    if args.resign_threshold is not None and not -1 <= args.resign_threshold <= 1:
        parser.error("--resign-threshold must be in -1..1")
    return args


def load_engine(args: argparse.Namespace) -> GoEngine:
    """The GoEngine of the net (or pure MCTS player) the command line names; SystemExit(2)
    with a one-line message when it cannot play."""
    try:
        source = players.net_source(args)
        if source is None:
            config, evaluator = pure_mcts(players.game_config(args, None))
            simulations = int(args.player.value)
            net = f"pure Monte Carlo tree search ({args.player})"
            use_search, devices = True, "one playout per leaf"
        else:
            opened = players.open_source(source, batch_size=1, log=log)
            # One game, whose board the engine reads on the host after every command: its
            # rules run on the CPU (game_config); the net still runs on a GPU if there is one.
            config, evaluator = players.game_config(args, opened.config), opened.net
            simulations = players.play_simulations(args, config)
            use_search, devices = not args.no_search, describe_devices(config, evaluator)
            net = (f"{players.describe(source, opened)}, {config.board_size}x{config.board_size}, "
                   f"net {config.blocks}x{config.filters}, "
                   + (f"{simulations} simulations per move" if use_search else "no search"))
    except players.SetupError as error:
        log(f"gtp_engine: {error}")
        raise SystemExit(2) from None
    engine_options = EngineOptions(simulations=simulations, use_search=use_search,
                                   net_komi=None if source is None else opened.config.komi,
                                   resign_threshold=args.resign_threshold,
                                   analysis_simulations=args.analysis_sims, net=net,
                                   **({"version": args.version_answer}
                                      if args.version_answer else {}))
    log(f"gtp_engine: Batched Go Zero {program_version()} playing {net}, komi {config.komi:g}; "
        f"{devices}")
    return GoEngine(config, evaluator, engine_options, log=log, seed=args.seed)


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


if __name__ == "__main__":
    sys.exit(main())
