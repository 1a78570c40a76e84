"""Matches and ratings from the command line.

    python evaluate.py --run runs/NAME --black ckpt:latest --white gnugo:5 --games 50 --sims 48
    python evaluate.py --run runs/NAME --rating [--checkpoints 4] [--games 20] [--sims 48]
    python evaluate.py --black random --white gnugo:0 --board-size 7 --komi 7.5 --games 20

Players: `ckpt:latest`, `ckpt:ITERATION` (a checkpoint of --run), `model:PATH` (a model file,
e.g. models/9x9.npz: without --run its config sets the game), `gnugo:LEVEL`, `random`,
`mcts:SIMS` (pure Monte Carlo tree search without a net: uniform priors over the sensible
moves, each leaf valued by one random playout, SIMS simulations per move).
`--rollout-lambda L` makes the nets' search mix playout results into their leaf values
(AlphaGo's (1 - L) * v + L * z; default: the run's config).
`--black` is player A and `--white` player B (aliases `-a`, `-b`): A is black in the first game
and colours alternate, so both play each colour equally. The report gives A's win rate with a
95% Wilson interval, per colour counts, the number of distinct games, and for games with GNU Go
the cross-check of our score against a fresh GNU Go's final_score (games/match_runner.py has
the rules). Every game starts from `--random-openings` random moves (default 2), each opening
played once with each colour.

--rating plays a round robin between the run's newest checkpoints (`--checkpoints`, default all
that are kept) and the random player, optionally GNU Go levels (`--gnugo-levels 0,5`), fits
Bradley-Terry ratings on the Elo scale with random anchored at 0 and prints the table, then one
JSON line {"iteration": I, "elo": R} for the newest checkpoint (appended to --output if given).
Without --run the first model player's config sets the game, else --board-size (default 9);
--komi sets the komi of any match. `--give P`: player A gives P points of komi in every game
(komi + P when A is black, komi - P when white); e.g. `--give 9` around komi 7.5 plays A as
black at komi 16.5 and as white at -1.5. A net that reads the komi sees each game's.

--follow plays `--black ckpt:latest` against --white beside a training run, on cores the trainer
leaves idle (a GPU loop's): the match with the run's newest checkpoint, then, as soon as it
ends, again with the checkpoint newest then, until the run's trainer has stopped and its last
checkpoint has played (or until SIGTERM or Ctrl-C: the match in flight is dropped, exit 128 +
the signal's number). A checkpoint that cannot be opened (damaged, or removed as the trainer
keeps its last few) is named in a line and passed over for the newest one before it that is
still newer than the last match's. Every match has the same --seed, so each checkpoint meets the
same openings. After each, one JSON line {"iteration", "positions", "player_b", "simulations",
"games", "wins", "losses", "draws", "win_rate", "low", "high", "seed"} (low-high: the 95% Wilson
interval; positions: the run's self-play positions at that checkpoint) is printed and appended
to --output if given. With `--average-last N` the match plays the mean of the weights of the
checkpoint and the N-1 before it (as many as the run has in a row at its start), the model
`export_model.py --average-last N` would write there, and the line adds "averaged": the
iterations.

Everything that can be checked before the first game is: flags and their ranges, the GNU Go
levels (0..10), the --output and --sgf paths, and that the GNU Go binary answers GTP as GNU Go
(a wrong --gnugo would otherwise lose every game as "not counted"). Each refusal is one line
on stderr and a non-zero exit: 2 for a bad flag, 1 for what the run, a model or GNU Go lacks.
A match in which no game could be counted exits 1 after its report.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import stat
import sys
import time
from pathlib import Path

from games import players
from games.gnugo import GnuGoError, probe_gnugo
from games.match_runner import check_give
from games.matches import play_pair, round_robin
from games.players import NetSource
from games.ratings import fit_bradley_terry, rating_table
from training import options
from training.config import Config
from training.options import OneLineParser, parse_player
from training.run_directory import RunDirectory, atomic_write_bytes, resolve_run_path
from training.stopping import Stopped, check_stop, stop_on_signals

# How often a follower looks for a new checkpoint or the trainer's end while it waits.
FOLLOW_POLL_SECONDS = 2.0


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def parse_args(argv=None) -> argparse.Namespace:
    parser = OneLineParser(description="Matches between checkpoints, GNU Go and a random "
                                       "player; ratings of a run's checkpoints.")
    options.add_run(parser, extra_help="; its config sets the board, komi and rules")
    options.add_player(parser, "--black", "-a", "--player-a", dest="player_a",
                       help="player A (black in the first game)")
    options.add_player(parser, "--white", "-b", "--player-b", dest="player_b", help="player B")
    parser.add_argument("--rating", action="store_true",
                        help="round robin of the run's checkpoints and random, Bradley-Terry fit")
    parser.add_argument("--games", type=int, default=None,
                        help="games (per pair with --rating); default 50, 20 with --rating")
    options.add_search(parser, no_search=False)
    options.add_game(parser)
    options.add_seed(parser)
    parser.add_argument("--parallel", type=int, default=None,
                        help="games played at once (default min(games, 32))")
    parser.add_argument("--random-openings", type=int, default=2,
                        help="random opening moves of every game (games 2k and 2k+1 share one "
                             "opening, colours swapped); 0 starts every game from the empty board")
    parser.add_argument("--opening-moves", type=int, default=0,
                        help="a net's own first moves sampled by visit count (default greedy)")
    parser.add_argument("--give", type=float, default=0.0, metavar="P",
                        help="player A gives P points of komi: each game's komi is --komi + P "
                             "when A is black, --komi - P when A is white (default 0)")
    parser.add_argument("--checkpoints", type=int, default=None,
                        help="with --rating: the newest this many checkpoints (default all kept)")
    parser.add_argument("--gnugo-levels", default="",
                        help="with --rating: GNU Go levels to include, e.g. 0,5")
    parser.add_argument("--gnugo", default=None, help="GNU Go binary (default gnugo on PATH, "
                                                      "then /usr/games/gnugo)")
    parser.add_argument("--sgf", default=None, help="directory to write each game's SGF into")
    parser.add_argument("--follow", action="store_true",
                        help="with --run and --black ckpt:latest: play the match again with "
                             "each newer checkpoint, as soon as the last match ends, until the "
                             "run's trainer has stopped and its last checkpoint has played; a "
                             "JSON line after each match")
    parser.add_argument("--average-last", type=int, default=1, metavar="N",
                        help="with --follow: each match plays the mean of the weights of the "
                             "newest checkpoint and the N-1 before it (fewer at a run's start), "
                             "the model export_model.py --average-last N would write there "
                             "(default: 1, the checkpoint itself)")
    parser.add_argument("--output", default=None,
                        help="with --rating or --follow: append the JSON lines here")
    options.add_inference(parser)
    args = parser.parse_args(argv)
    options.check_shared(args, parser, min_sims=0)
    if args.rating:
        if not args.run:
            parser.error("--rating needs --run")
        if args.player_a or args.player_b:
            parser.error("--rating plays its own pairs; leave out --black/--white")
        if args.give:
            parser.error("--give is for a match between --black and --white, not --rating")
    elif not (args.player_a and args.player_b):
        parser.error("name two players with --black and --white (or use --rating)")
    if args.follow:
        if args.rating:
            parser.error("--follow plays one match again and again; leave out --rating")
        if not args.run:
            parser.error("--follow needs --run: the run whose checkpoints it plays")
        if str(args.player_a) != "ckpt:latest":
            parser.error("--follow plays the run's newest checkpoint: --black ckpt:latest")
        if args.player_b.kind == "ckpt":
            parser.error("--follow: --white must not be a checkpoint of the run (it would be "
                         "taken once, while --black moves on); use a model file")
        if args.sgf:
            parser.error("--sgf is for one match, not --follow")
        if not 1 <= args.average_last <= 1000:
            parser.error(f"--average-last must be in [1, 1000], got {args.average_last}")
    elif args.average_last != 1:
        parser.error("--average-last is for --follow (export_model.py --average-last writes "
                     "a mean as a model file)")
    if args.run and args.board_size is not None:
        parser.error("--board-size is for games without --run (the run's net knows its board)")
    for name in ("games", "parallel", "checkpoints"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name} must be at least 1")
    if args.random_openings < 0 or args.opening_moves < 0:
        parser.error("--random-openings and --opening-moves must be at least 0")
    try:
        args.gnugo_levels = [int(parse_player(f"gnugo:{level}").value)
                             for level in filter(None, args.gnugo_levels.split(","))]
    except ValueError as error:
        parser.error(f"--gnugo-levels: {error}")
    if args.output is not None:
        why = unwritable_file(args.output)
        if why:
            parser.error(f"--output {args.output}: {why}")
    if args.sgf is not None:
        why = unusable_directory(args.sgf)
        if why:
            parser.error(f"--sgf {args.sgf}: {why}")
    return args


def unwritable_file(path: str) -> str | None:
    """Why the JSON line could not be appended to `path`, or None: it must be a regular file
    or not exist yet, in an existing directory, and writable."""
    target = Path(path)
    if target.exists() or target.is_symlink():
        if not target.is_file():
            return "not a regular file"
        if not os.access(target, os.W_OK):
            return "not writable"
        return None
    if not target.parent.is_dir():
        return "its directory does not exist"
    if not os.access(target.parent, os.W_OK):
        return "its directory is not writable"
    return None


def unusable_directory(path: str) -> str | None:
    """Why game records could not be written into directory `path` (made if missing), or
    None."""
    target = Path(path)
    if target.exists():
        if not stat.S_ISDIR(os.stat(target).st_mode):
            return "not a directory"
        return None if os.access(target, os.W_OK) else "not writable"
    parent = next((p for p in target.absolute().parents if p.exists()), None)
    if parent is None or not parent.is_dir():
        return "cannot be made: a parent is not a directory"
    return None if os.access(parent, os.W_OK) else f"cannot be made in {parent}: not writable"


def load_config(args: argparse.Namespace) -> tuple[Config, Path | None]:
    """The match's config: --run's, else the first model player's, else --board-size's (9 by
    default); --komi and --rollout-lambda on top."""
    models = [spec for spec in (args.player_a, args.player_b) if spec and spec.kind == "model"]
    if args.run:
        source = NetSource(args.run)
    elif models and args.board_size is None:
        source = NetSource(models[0].value)
    else:
        return players.game_config(args, None), None
    config, path = players.read_source(source)
    return players.game_config(args, config), (path if args.run else None)


def write_sgf(directory: str, report) -> None:
    for record in report.records:
        atomic_write_bytes(Path(directory) / f"game_{record.index:04d}.sgf", record.sgf)


def check_gnugo(args: argparse.Namespace, specs) -> None:
    """Before playing: the GNU Go binary must answer GTP as GNU Go when a player is GNU Go
    (the referee of such games is GNU Go too)."""
    if not any(spec.startswith("gnugo:") for spec in specs):
        return
    try:
        log(f"evaluate: playing {probe_gnugo(args.gnugo)}")
    except GnuGoError as error:     # GnuGoNotFound included
        raise SystemExit(f"evaluate: GNU Go cannot play: {error}") from None


def write_output(path: str, line: str) -> None:
    """Append `line` to `path` atomically: the file is rewritten whole under a temporary name."""
    target = Path(path)
    try:
        old = target.read_bytes() if target.exists() else b""
        if old and not old.endswith(b"\n"):
            old += b"\n"
        atomic_write_bytes(target, old + line.encode() + b"\n")
    except OSError as error:
        raise SystemExit(f"evaluate: --output {path}: {error.strerror or error}") from None


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        if args.follow:
            return follow(args)
        return play(args)
    except players.SetupError as error:
        raise SystemExit(f"evaluate: {error}") from None


def match_size(args: argparse.Namespace, config: Config) -> tuple[int, int, int]:
    """(simulations, games, games at once) of a match or of each pair of a rating. As
    --sims's help says: the net's play budget (a model file's --play-simulations), else its
    self-play simulations; 0 is allowed here (the policy alone)."""
    simulations = config.resolved_play_simulations if args.sims is None else args.sims
    games = args.games or (20 if args.rating else 50)
    return simulations, games, min(games, args.parallel or 32)


def checked_give(args: argparse.Namespace, config: Config) -> None:
    try:
        check_give(args.give, config.board_size)
    except ValueError as error:
        raise SystemExit(f"evaluate: --give: {error}") from None


def play(args: argparse.Namespace) -> int:
    config, run_path = load_config(args)
    simulations, games, parallel = match_size(args, config)
    checkpoints = (players.Checkpoints(run_path, parallel, log=log, inference=args.inference)
                   if run_path else None)
    if args.rating:
        check_gnugo(args, [f"gnugo:{level}" for level in args.gnugo_levels])
        return rating(args, config, checkpoints, games, simulations, parallel)
    checked_give(args, config)
    entry_a, name_a = players.match_entry(args.player_a, config, checkpoints, parallel, log=log,
                                          inference=args.inference)
    entry_b, name_b = players.match_entry(args.player_b, config, checkpoints, parallel, log=log,
                                          inference=args.inference)
    check_gnugo(args, [name_a, name_b])
    report = match(args, config, (entry_a, name_a), (entry_b, name_b), games, simulations,
                   parallel)
    if args.sgf:
        write_sgf(args.sgf, report)
    if report.games == 0:
        raise SystemExit("evaluate: no game could be counted (see the messages above)")
    return 0


def match(args, config: Config, a: tuple, b: tuple, games: int, simulations: int,
          parallel: int):
    """One match between the players `a` and `b` ((make_player entry, name) each): its
    conditions in a line, then the report's summary; the report."""
    (entry_a, name_a), (entry_b, name_b) = a, b
    if name_a == name_b:
        name_a, name_b = f"A {name_a}", f"B {name_b}"
    nets = "ckpt" in (name_a + name_b) or "model" in (name_a + name_b)
    searching = (f"{simulations} simulations per net move"
                 + (f" (rollout_lambda {config.rollout_lambda:g})" if config.rollout_lambda else "")
                 + ", " if nets else "")
    komi = (f"komi {config.komi + args.give:g} when A is black, "
            f"{config.komi - args.give:g} when white" if args.give else f"komi {config.komi:g}")
    print(f"{config.board_size}x{config.board_size}, {komi}, "
          f"{'positional superko' if config.superko else 'simple ko'}, "
          f"{searching}{games} games ({parallel} at once)", flush=True)
    try:
        report = play_pair(config, entry_a, entry_b, games, simulations, seed=args.seed,
                           parallel=parallel, names=(name_a, name_b),
                           opening_moves=args.opening_moves,
                           random_openings=args.random_openings, gnugo_path=args.gnugo,
                           give=args.give, log=log)
    except GnuGoError as error:
        raise SystemExit(f"evaluate: GNU Go cannot play: {error}") from None
    print(report.summary(), flush=True)
    return report


def follow(args: argparse.Namespace) -> int:
    """--follow: the match with each newest checkpoint of --run in turn (the module's
    docstring), until the trainer has stopped and its last checkpoint has played."""
    stop_on_signals()
    run = RunDirectory(resolve_run_path(args.run), log=log)
    # The newest checkpoint whose match was taken up, the one whose match is in flight until
    # its line is written, and those that could not be opened (damaged, or removed as the
    # trainer kept its last few): each is tried once.
    played = playing = None
    unplayable: set[int] = set()
    try:
        # GNU Go is checked before the wait: the first checkpoint may be minutes away.
        check_gnugo(args, [str(args.player_b)])
        while True:
            # The trainer's state first: a checkpoint it wrote before stopping is then listed.
            running = run.trainer_running()
            if run.checkpoint_iterations():
                break
            if not running:
                raise SystemExit(f"evaluate: {run.path} has no checkpoint and no trainer is "
                                 f"running in it")
            time.sleep(FOLLOW_POLL_SECONDS)
        config, run_path = load_config(args)
        simulations, games, parallel = match_size(args, config)
        checked_give(args, config)
        opponent = players.match_entry(args.player_b, config, None, parallel, log=log,
                                       inference=args.inference)
        while True:
            check_stop()
            running = run.trainer_running()
            # Newer than the last match's, newest first: where the newest cannot be opened,
            # the one before it plays, so a damaged last checkpoint does not leave the run's
            # end unmeasured.
            waiting = [iteration for iteration in reversed(run.checkpoint_iterations())
                       if (played is None or iteration > played)
                       and iteration not in unplayable]
            if waiting:
                playing = waiting[0]
                try:
                    # A checkpoint source of its own each time: one net in memory at once.
                    checkpoints = players.Checkpoints(run_path, parallel, log=log,
                                                      inference=args.inference)
                    if args.average_last > 1:
                        entry, averaged = checkpoints.mean(playing, args.average_last)
                    else:
                        entry, averaged = checkpoints.net(playing), None
                except players.SetupError as error:
                    log(f"evaluate: checkpoint {playing} cannot play ({error})")
                    unplayable.add(playing)
                    playing = None
                    continue
                played = playing
                name = (f"mean of ckpt:{averaged[0]}-{averaged[-1]}" if averaged and
                        len(averaged) > 1 else f"ckpt:{playing}")
                report = match(args, config, (entry, name), opponent, games, simulations,
                               parallel)
                if report.games:
                    line = json.dumps(follow_record(run, playing, opponent[1], simulations,
                                                    report, args.seed, averaged))
                    print(line, flush=True)
                    if args.output:
                        write_output(args.output, line)
                else:
                    log(f"evaluate: no game of checkpoint {playing}'s match could be counted "
                        f"(see the messages above); no line for it")
                playing = None
            elif not running:
                log(f"evaluate: {run.path}'s trainer has stopped, and "
                    + (f"no checkpoint after {played} is left to play" if played is not None
                       else "none of its checkpoints could be opened"))
                return 0 if played is not None else 1
            else:
                time.sleep(FOLLOW_POLL_SECONDS)
    except Stopped as stop:
        dropped = (f"during the match of checkpoint {playing}, which is dropped"
                   if playing is not None else
                   "between matches" if played is not None else "before the first match")
        log(f"evaluate: stopped by {signal.Signals(stop.signum).name} {dropped}")
        return 128 + stop.signum


def follow_record(run, iteration: int, opponent: str, simulations: int, report,
                  seed: int, averaged: tuple[int, ...] | None = None) -> dict:
    """The JSON line of a followed match: the checkpoint, the run's positions at it (from
    its metrics line, where there is one), the opponent, the result, and with --average-last
    the iterations whose mean played."""
    positions = next((record["positions"] for record in run.read_metrics()
                      if record.get("iteration") == iteration and "positions" in record), None)
    low, high = report.interval()
    return {"iteration": iteration, "positions": positions, "player_b": opponent,
            "simulations": simulations, "games": report.games, "wins": report.wins,
            "losses": report.losses, "draws": report.draws,
            "win_rate": round(report.win_rate, 4), "low": round(low, 4),
            "high": round(high, 4), "seed": seed,
            **({"averaged": list(averaged)} if averaged is not None else {})}


def rating(args, config, checkpoints: players.Checkpoints, games: int, simulations: int,
           parallel: int) -> int:
    iterations = checkpoints.run.checkpoint_iterations()
    if not iterations:
        raise SystemExit(f"evaluate: {checkpoints.run.path} has no checkpoint")
    if args.checkpoints:
        iterations = iterations[-args.checkpoints:]
    entries = {"random": "random"}
    for iteration in iterations:
        try:
            entries[f"ckpt:{iteration}"] = checkpoints.net(iteration)
        except players.SetupError as error:
            log(f"evaluate: skipping checkpoint {iteration} ({error})")
    iterations = [i for i in iterations if f"ckpt:{i}" in entries]
    if not iterations:
        raise SystemExit("evaluate: no checkpoint could be loaded")
    for level in args.gnugo_levels:
        entries[f"gnugo:{level}"] = f"gnugo:{level}"
    print(f"round robin of {', '.join(entries)}: {games} games per pair, {simulations} "
          f"simulations per net move", flush=True)
    try:
        reports = round_robin(config, entries, games, simulations, seed=args.seed,
                              parallel=parallel, opening_moves=args.opening_moves,
                              random_openings=args.random_openings, gnugo_path=args.gnugo,
                              log=log)
    except GnuGoError as error:
        raise SystemExit(f"evaluate: GNU Go cannot play: {error}") from None
    for report in reports:
        low, high = report.interval()
        print(f"  {report.player_a} vs {report.player_b}: {report.wins}-{report.losses}"
              f"{f'-{report.draws}' if report.draws else ''} "
              f"({report.win_rate:.0%}, 95% {low:.0%}-{high:.0%})", flush=True)
    if not any(report.games for report in reports):
        raise SystemExit("evaluate: no game could be counted (see the messages above)")
    ratings = fit_bradley_terry(reports, anchor="random")
    print(rating_table(ratings))
    newest = iterations[-1]
    line = json.dumps({"iteration": newest, "elo": round(ratings[f"ckpt:{newest}"].elo, 1)})
    print(line)
    if args.output:
        write_output(args.output, line)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.exit(main())
