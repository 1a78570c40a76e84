"""The training loop's matches: the net against a random player every random_every
iterations, and every gnugo_every iterations the rated evaluations: a match against GNU Go
at the run's current level and one against the checkpoint of the previous rated evaluation,
whose result moves a chained Elo rating.

Counters they keep (in the checkpoint, so they survive a restart): `gnugo_level`, the level of
the next GNU Go match (up one after a match won at >= gnugo_promotion, at most 10);
`rated_iteration`, the iteration of the last rated evaluation (its checkpoint is kept for the
next one); `elo`, the chained rating (the first rated net, and a random player before it, sit
at 0).
"""
from __future__ import annotations

from games.gnugo import GnuGoError, GnuGoNotFound
from games.match_players import NetEntry
from games.matches import checkpoint_vs_checkpoint, play_against_gnugo, play_pair
from games.ratings import elo_step
from training.config import Config
from training.nets import open_net
from training.run_directory import RunDirectory


def random_match(config: Config, net, iteration: int) -> dict:
    """The metrics of the match against a random player, on the iterations it is due ({}
    on the others)."""
    if not (config.random_every and iteration % config.random_every == 0):
        return {}
    # Greedy after the match's random openings: the net at its strongest.
    report = play_pair(config, net, "random", config.eval_games_random,
                       config.eval_simulations, seed=config.seed + iteration,
                       parallel=min(config.eval_games_random, config.num_games),
                       names=("net", "random"), opening_moves=0)
    return {"win_rate_random": report.win_rate, "random_games": report.games}


def rated_evaluations(config: Config, net, counters: dict, run: RunDirectory, iteration: int,
                      log=print) -> dict:
    """The rated evaluations' metrics on the iterations they are due ({} on the others);
    `counters` move on with them."""
    if not (config.gnugo_every and iteration % config.gnugo_every == 0):
        return {}
    record = {}
    seed = config.seed * 7919 + iteration
    level = int(counters.get("gnugo_level", config.gnugo_level))
    try:
        report = play_against_gnugo(config, net, level, config.gnugo_games,
                                    config.eval_simulations, seed=seed, log=log)
        if report.games:
            record.update(win_rate_gnugo=report.win_rate, gnugo_level=level,
                          gnugo_games=report.games, gnugo_distinct=report.distinct_games)
            if report.win_rate >= config.gnugo_promotion and level < 10:
                counters["gnugo_level"] = level + 1
    except (GnuGoNotFound, GnuGoError) as error:
        log(f"iteration {iteration}: no GNU Go match ({error})")
    reference = counters.get("rated_iteration")
    if reference is None:
        counters.update(rated_iteration=iteration, elo=0.0)
        record["elo"] = 0.0
        return record
    previous = open_net(run.path, checkpoint=reference, log=log,
                        batch_size=min(config.previous_games, 32))
    # The previous net plays with its own input planes (a growth may have added some).
    report = checkpoint_vs_checkpoint(config, net, NetEntry(previous.net, previous.config),
                                      config.previous_games, config.eval_simulations,
                                      seed=seed, names=("new", "previous"))
    elo = counters["elo"] + elo_step(report.win_rate, report.games)
    counters.update(rated_iteration=iteration, elo=elo)
    record.update(win_rate_previous=report.win_rate, previous_iteration=reference,
                  previous_games=report.games, elo=round(elo, 1))
    return record
