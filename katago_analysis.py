"""The net behind KataGo's JSON analysis protocol, for KaTrain and other tools written for
KataGo's analysis engine.

    python katago_analysis.py [--model models/9x9.npz | --run NAME [--checkpoint K]]
                              [--max-visits V] [--batch-size B] [--komi K]
    katago_analysis.sh analysis -model FILE|RUN -config FILE -override-config K=V,...

One JSON query a line on stdin, one JSON answer a line on stdout (analysis_engine/queries.py
for the fields, analysis_engine/engine.py for the answers and the batching); logs on stderr.
The second form is KataGo's own command line, so a program that starts KataGo can start this
instead: `-model` takes a model file or a run directory, `-config` a KataGo analysis config
(its `maxVisits` and `reportAnalysisWinratesAs` are read, the rest is KataGo's own tuning and
ignored), `-override-config` comma-separated `key=value` pairs on top of it, and
`-quit-without-waiting` drops queued queries when the input ends (otherwise they are all
answered first). Without a model the shipped one, models/9x9.npz, analyses.
Exit status 0 at the end of input; 2 when the command line or the net is refused (one line).
"""
from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

from analysis_engine.engine import AnalysisEngine
from analysis_engine.queries import PERSPECTIVES
from games import analysis, players
from games.stdio import claim_stdout, discard_output
from gtp.version import program_version
from training import options
from training.options import OneLineParser

# KataGo's single-dash flags and this script's spelling of them.
KATAGO_FLAGS = {"-model": "--model", "-config": "--config",
                "-override-config": "--override-config",
                "-quit-without-waiting": "--quit-without-waiting",
                "-analysis-threads": "--analysis-threads"}
DEFAULT_VISITS = 500          # KataGo's example analysis config
DEFAULT_BATCH = 64


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def katago_argv(argv: list[str]) -> list[str]:
    """KataGo's flags rewritten as this script's; `-model` naming a run directory (not a
    .npz file) becomes --run."""
    out = []
    words = list(argv)
    while words:
        word = words.pop(0)
        flag = KATAGO_FLAGS.get(word, word)
        if flag == "--model" and words and not words[0].endswith(".npz"):
            flag = "--run"
        out.append(flag)
    return out


def read_katago_config(path: str) -> dict[str, str]:
    """`key = value` lines of a KataGo config (# starts a comment); OSError if unreadable."""
    settings = {}
    for line in Path(path).read_text(encoding="utf-8", errors="replace").splitlines():
        line = line.split("#", 1)[0].strip()
        if "=" in line:
            key, value = (part.strip() for part in line.split("=", 1))
            settings[key] = value
    return settings


def parse_args(argv=None):
    parser = OneLineParser(description="KataGo's JSON analysis protocol for a trained net "
                                       "(default: the shipped model, models/9x9.npz).")
    parser.add_argument("command", nargs="?", default="analysis", choices=("analysis",),
                        help="KataGo's subcommand; only `analysis` is spoken here")
    options.add_net_source(parser)
    options.add_game(parser)
    options.add_seed(parser)
    parser.add_argument("--max-visits", type=int, default=None, metavar="V",
                        help=f"visits of a position whose query names none (default: the "
                             f"config's maxVisits, else {DEFAULT_VISITS})")
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH, metavar="B",
                        help=f"positions searched at once (default {DEFAULT_BATCH})")
    parser.add_argument("--tree-visits", type=int, default=None, metavar="T",
                        help="the most visits one position may get (default: min(10000, "
                             "800000 // (N*N + 1)), 9756 on 9x9)")
    parser.add_argument("--config", default=None, metavar="FILE",
                        help="a KataGo analysis config (-config)")
    parser.add_argument("--override-config", default="", metavar="K=V,...",
                        help="KataGo config values on top of --config (-override-config)")
    parser.add_argument("--quit-without-waiting", action="store_true",
                        help="at the end of input, drop the queries not yet answered")
    parser.add_argument("--analysis-threads", type=int, default=None,
                        help="KataGo's thread count: accepted and ignored (the search is "
                             "batched instead)")
    args = parser.parse_args(katago_argv(sys.argv[1:] if argv is None else argv))
    options.check_shared(args, parser)
    settings = {}
    if args.config is not None:
        try:
            settings = read_katago_config(args.config)
        except OSError as error:
            parser.error(f"--config {args.config}: {error.strerror or error}")
    for pair in filter(None, (p.strip() for p in args.override_config.split(","))):
        key, equals, value = pair.partition("=")
        if not equals:
            parser.error(f"--override-config {pair!r}: expected key=value")
        settings[key.strip()] = value.strip()
    args.perspective = settings.get("reportAnalysisWinratesAs", "SIDETOMOVE").upper()
    if args.perspective not in PERSPECTIVES:
        parser.error(f"reportAnalysisWinratesAs {args.perspective!r}: one of "
                     f"{', '.join(PERSPECTIVES)}")
    if args.max_visits is None:
        text = settings.get("maxVisits", str(DEFAULT_VISITS))
        if not text.isdigit():
            parser.error(f"maxVisits {text!r} in the config: expected a positive integer")
        args.max_visits = int(text)
    for name in ("max_visits", "batch_size", "tree_visits"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"{options.option_name(name)} must be at least 1")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    output = claim_stdout()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        source = players.net_source(args)
        opened = players.open_source(source, batch_size=args.batch_size, log=log)
        config = players.game_config(args, opened.config)
    except players.SetupError as error:
        log(f"katago_analysis: {error}")
        return 2
    n = config.board_size
    tree_visits = analysis.analysis_cap(n, requested=args.tree_visits)
    closed = threading.Event()

    def write(line: str) -> None:
        if closed.is_set():
            return
        try:
            output.write(line + "\n")
            output.flush()
        except (BrokenPipeError, OSError):
            closed.set()       # the reader has gone: stop at once, quietly
            engine.close(quit_now=True)

    engine = AnalysisEngine(config, opened.net, batch_size=args.batch_size,
                            tree_visits=tree_visits, default_visits=args.max_visits,
                            perspective=args.perspective, write=write, log=log,
                            seed=args.seed, version=program_version(),
                            net_komi=opened.config.komi)

    def read_input() -> None:
        try:
            for line in sys.stdin:
                engine.submit(line)
        except (OSError, ValueError) as error:   # an unreadable input: end as at its end
            log(f"katago_analysis: input unreadable ({error}); finishing what is queued")
        finally:
            engine.close(quit_now=args.quit_without_waiting)

    threading.Thread(target=read_input, name="input", daemon=True).start()
    log(f"katago_analysis: Batched Go Zero {program_version()}, "
        f"{players.describe(source, opened)}, {n}x{n}, net {config.blocks}x{config.filters}, "
        f"{args.batch_size} positions at once, {args.max_visits} visits by default "
        f"(at most {tree_visits}), win rates as {args.perspective}")
    log("Started, ready to begin handling requests")
    engine.run()
    if closed.is_set():
        discard_output(output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
