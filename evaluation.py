"""Matches played in a batch through the same engine and search as self-play.

`play_against_random`: the net (with `simulations` of search per move, 0 = its policy alone,
greedy, no noise) against a uniformly random legal player drawn inside the rules back end
(it never passes while it has another legal move). Colours alternate between games.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from config import Config
from search_driver import SearchingGames, game_results
from selfplay import search_settings


@dataclass(frozen=True)
class MatchResult:
    wins: int
    losses: int
    draws: int

    @property
    def games(self) -> int:
        return self.wins + self.losses + self.draws

    @property
    def win_rate(self) -> float:
        return (self.wins + 0.5 * self.draws) / max(self.games, 1)


def play_against_random(config: Config, evaluator, num_games: int, simulations: int,
                        seed: int = 0, num_threads: int = 0) -> MatchResult:
    driver = SearchingGames(num_games, config.board_size, komi=config.komi,
                            superko=config.superko, max_moves=config.resolved_max_moves,
                            history=config.history,
                            settings=search_settings(config, simulations=max(simulations, 1)),
                            evaluator=evaluator, seed=seed, num_threads=num_threads)
    go = driver.go
    our_colour = np.where(np.arange(num_games) % 2 == 0, 1, -1).astype(np.int8)
    while True:
        active = ~go.is_over()
        if not active.any():
            break
        ours = active & (go.to_play() == our_colour)
        theirs = active & ~ours
        actions = np.zeros(num_games, np.int64)
        if ours.any():
            driver.think(ours, noise=False, simulations=simulations)
            actions[ours] = driver.search.choose_actions(0.0, games=ours)[ours]
        if theirs.any():
            actions[theirs] = go.random_moves(slots=np.flatnonzero(theirs))
        driver.play(actions, games=active)
    results = game_results(go, None) * our_colour
    return MatchResult(wins=int((results > 0).sum()), losses=int((results < 0).sum()),
                       draws=int((results == 0).sum()))
