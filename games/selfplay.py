"""Batched self-play: every game of the batch searches, moves and is recorded in lockstep; a
finished game hands its positions over and a new game starts in its place at once.

Per game in flight (preallocated, G games, L = max_moves):
    planes   uint8   [G, L, N, N, C]  input planes of each position played
    policy   float32 [G, L, A]        root visit distribution (the policy target)
    to_play  int8    [G, L]           +1 black / -1 white at that position
    moves    int16   [G, L]           the move played (for SGF records)
When a game ends, its positions get the value target z * to_play, z the result from black's
view (+1 / -1, 0 for a draw); a resigned game is lost by the side that resigned.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from games.search import SearchingGames, game_results
from training.config import Config


@dataclass
class FinishedGame:
    moves: list[int]
    result: float          # +1 black won, -1 white won, 0 draw
    score: float           # area score minus komi of the final position (nan if resigned)
    resigned: bool


@dataclass
class SelfPlayBatch:
    planes: np.ndarray
    policy: np.ndarray
    value: np.ndarray
    games: list[FinishedGame] = field(default_factory=list)
    seconds: float = 0.0
    nn_evaluations: int = 0
    false_resignations: int = 0
    playthrough_resignations: int = 0

    @property
    def positions(self) -> int:
        return len(self.value)


class SelfPlay:
    # One thread for the rules and the tree (measured, bench_selfplay and a timing of the
    # net's calls): idle OpenMP workers spinning between regions slowed each TensorFlow call
    # by 10-35%, more than a second thread saves on the search.
    def __init__(self, config: Config, evaluator, seed: int = 0, num_threads: int = 1):
        self.config = config
        games = config.num_games
        length = config.resolved_max_moves
        n = config.board_size
        self.driver = SearchingGames(config, games, evaluator, seed=seed, num_threads=num_threads)
        self.rng = np.random.default_rng(seed + 1)
        self.planes = np.zeros((games, length, n, n, config.input_planes), np.uint8)
        self.policy = np.zeros((games, length, config.num_actions), np.float32)
        self.to_play = np.zeros((games, length), np.int8)
        self.moves = np.zeros((games, length), np.int16)
        self.resigned_by = np.zeros(games, np.int8)        # side that resigned, 0 if none
        self.would_resign = np.zeros(games, np.int8)       # playthrough game: side that would have
        self.playthrough = np.zeros(games, bool)
        self._start_games(np.ones(games, bool))

    def _start_games(self, games: np.ndarray) -> None:
        self.driver.new_games(games)
        self.resigned_by[games] = 0
        self.would_resign[games] = 0
        self.playthrough[games] = self.rng.random(int(games.sum())) < self.config.resign_playthrough

    def play(self, num_positions: int, progress=None) -> SelfPlayBatch:
        """Play until at least `num_positions` positions of finished games are collected."""
        start = time.perf_counter()
        evaluations_before = self.driver.evaluations
        planes, policy, value, finished = [], [], [], []
        collected = false_resigns = playthrough_resigns = 0
        while collected < num_positions:
            done = self._step()
            for game in np.flatnonzero(done):
                record, positions = self._harvest(game)
                finished.append(record)
                planes.append(positions[0])
                policy.append(positions[1])
                value.append(positions[2])
                collected += len(positions[2])
                if self.would_resign[game]:
                    playthrough_resigns += 1
                    false_resigns += int(record.result == self.would_resign[game])
                if progress is not None:
                    progress(min(collected, num_positions))
            self._start_games(done)
        n = self.config.board_size
        return SelfPlayBatch(
            planes=np.concatenate(planes) if planes else np.zeros((0, n, n, self.config.input_planes), np.uint8),
            policy=np.concatenate(policy) if policy else np.zeros((0, self.config.num_actions), np.float32),
            value=np.concatenate(value) if value else np.zeros(0, np.float32),
            games=finished, seconds=time.perf_counter() - start,
            nn_evaluations=self.driver.evaluations - evaluations_before,
            false_resignations=false_resigns, playthrough_resignations=playthrough_resigns)

    def _step(self) -> np.ndarray:
        """One move in every game; returns the mask of games that just ended."""
        config, driver = self.config, self.driver
        go = driver.go
        driver.think(np.ones(config.num_games, bool), noise=True)
        # Once per move, the roots' planes and state come to the host for the replay buffer.
        move_number = go.to_numpy(go.move_count())
        rows = np.arange(config.num_games)
        self.planes[rows, move_number] = go.to_numpy(go.features(config.history).astype(np.uint8))
        self.policy[rows, move_number] = driver.search.policy_targets()
        to_play = go.to_numpy(go.to_play())
        self.to_play[rows, move_number] = to_play
        sampled = move_number < 2 * config.temperature_moves
        actions = driver.search.choose_actions(0.0)
        if sampled.any():
            actions[sampled] = driver.search.choose_actions(1.0, games=sampled)[sampled]
        self.moves[rows, move_number] = actions
        resigning = np.zeros(config.num_games, bool)
        if config.resign_threshold > -1:
            hopeless = driver.root_values() < config.resign_threshold
            resigning = hopeless & ~self.playthrough
            first_wish = hopeless & self.playthrough & (self.would_resign == 0)
            self.would_resign[first_wish] = to_play[first_wish]
            self.resigned_by[resigning] = to_play[resigning]
        driver.play(actions, games=~resigning)
        return go.to_numpy(go.is_over()) | resigning

    def _harvest(self, game: int):
        go = self.driver.go
        length = int(go.move_count([game])[0]) + (1 if self.resigned_by[game] else 0)
        if self.resigned_by[game]:
            result, score = float(-self.resigned_by[game]), float("nan")
        else:
            score = float(go.score([game])[0])
            result = float(game_results(go, [game])[0])
        record = FinishedGame(moves=self.moves[game, :length].tolist(), result=result, score=score,
                              resigned=bool(self.resigned_by[game]))
        if self.resigned_by[game]:
            # The resigning move was never played: drop it from the record, keep its position.
            record.moves = record.moves[:-1]
        values = result * self.to_play[game, :length].astype(np.float32)
        return record, (self.planes[game, :length].copy(), self.policy[game, :length].copy(), values)
