"""Matches between two players, many games at once: the module to import to play a match (a
net against random, GNU Go, another net or checkpoint).

    report = play_pair(config, net, "random", games=64, simulations=16, opening_moves=0)
    report = play_against_gnugo(config, net, level=5, games=50, simulations=48)
    report = checkpoint_vs_checkpoint(config, net_a, net_b, games=50, simulations=48)
    report.wins, report.losses, report.draws, report.win_rate, report.interval()
    ratings.fit_bradley_terry([report.pair(), ...], anchor="random")   # games/ratings.py

Each builds its players (games/match_players.py) for a batch of `parallel` games and plays
them through the one game loop, `play_match` (games/match_runner.py: colours alternating,
varied openings, GNU Go's dead stones cleaned up, scores cross-checked, points given); the
result is a `MatchReport` (games/match_report.py).
"""
from __future__ import annotations

from typing import Callable

from games.gnugo import find_gnugo
from games.match_players import GnuGoPlayer, NetEntry, NetPlayer, log_to_stderr, make_player
from games.match_report import MatchReport
from games.match_runner import RANDOM_OPENINGS, play_match
from training.config import Config

DEFAULT_PARALLEL = 32


def _parallel(games: int, parallel: int | None) -> int:
    if games < 1:
        raise ValueError(f"games must be at least 1, got {games}")
    return max(1, min(games, parallel or DEFAULT_PARALLEL))


def play_against_gnugo(config: Config, evaluator, level: int, games: int, simulations: int,
                       seed: int = 0, parallel: int | None = None, *, opening_moves: int = 0,
                       random_openings: int = RANDOM_OPENINGS,
                       gnugo_path=None, log: Callable[[str], None] = log_to_stderr) -> MatchReport:
    """The net (A) against GNU Go at `level` (B), colours alternating, `parallel` games at once
    (default min(games, 32)). Raises GnuGoNotFound before playing when there is no GNU Go; a
    process that dies costs its game only (`not_played`, a message through `log`)."""
    path = find_gnugo(gnugo_path)
    parallel = _parallel(games, parallel)
    net = NetPlayer(config, evaluator, parallel, simulations, seed=seed,
                    opening_moves=opening_moves, name="net")
    opponent = GnuGoPlayer(config, level, parallel, seed=seed, path=path, log=log)
    try:
        return play_match(config, net, opponent, games, parallel=parallel, seed=seed,
                          gnugo_path=path, random_openings=random_openings, log=log)
    finally:
        opponent.close()


def checkpoint_vs_checkpoint(config: Config, net_a, net_b, games: int, simulations: int,
                             seed: int = 0, parallel: int | None = None, *, opening_moves: int = 0,
                             random_openings: int = RANDOM_OPENINGS,
                             names: tuple[str, str] = ("A", "B")) -> MatchReport:
    """Two nets (evaluators, or NetEntry for a net with its own input planes: a run's net
    before its planes grew) against each other, each searching its own moves through its own
    SearchingGames, all games in one batch per net; wins are net_a's."""
    parallel = _parallel(games, parallel)
    player_a, player_b = (
        NetPlayer(config.with_inputs_of(net.config) if isinstance(net, NetEntry) else config,
                  net.evaluator if isinstance(net, NetEntry) else net, parallel, simulations,
                  seed=seed + offset, opening_moves=opening_moves, name=name)
        for offset, (net, name) in enumerate(zip((net_a, net_b), names)))
    return play_match(config, player_a, player_b, games, parallel=parallel, seed=seed,
                      random_openings=random_openings)



def play_pair(config: Config, entry_a, entry_b, games: int, simulations: int, *, seed: int = 0,
              parallel: int | None = None, names: tuple[str, str] = ("A", "B"),
              opening_moves: int = 0, random_openings: int = RANDOM_OPENINGS, gnugo_path=None,
              give: float = 0.0, log: Callable[[str], None] = log_to_stderr) -> MatchReport:
    """A match between two entries of `make_player` (A black in even-numbered games, giving
    `give` points of komi)."""
    parallel = _parallel(games, parallel)
    built = []
    try:
        for offset, (entry, name) in enumerate(zip((entry_a, entry_b), names)):
            built.append(make_player(config, entry, name, parallel, simulations,
                                     seed=seed + 7919 * offset, opening_moves=opening_moves,
                                     gnugo_path=gnugo_path, log=log))
        return play_match(config, built[0], built[1], games, parallel=parallel, seed=seed,
                          gnugo_path=gnugo_path, random_openings=random_openings, give=give,
                          log=log)
    finally:
        for player in built:
            player.close()


def round_robin(config: Config, entries: dict, games_per_pair: int, simulations: int, *,
                seed: int = 0, parallel: int | None = None, opening_moves: int = 0,
                random_openings: int = RANDOM_OPENINGS, gnugo_path=None,
                log: Callable[[str], None] = log_to_stderr) -> list[MatchReport]:
    """Every pair of `entries` ({name: "random" | "gnugo:L" | "mcts:S" | evaluator}) plays `games_per_pair`
    games, colours alternating; feed the reports (or their `pair()`s, kept across calls) to
    `fit_bradley_terry`."""
    names = list(entries)
    reports = []
    for i, first in enumerate(names):
        for second in names[i + 1:]:
            reports.append(play_pair(config, entries[first], entries[second], games_per_pair,
                                     simulations, seed=seed + len(reports) * 1009,
                                     parallel=parallel, names=(first, second),
                                     opening_moves=opening_moves, random_openings=random_openings,
                                     gnugo_path=gnugo_path, log=log))
    return reports
