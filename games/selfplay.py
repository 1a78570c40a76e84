"""Batched self-play: every game of the batch searches, moves and is recorded in lockstep; a
finished game hands its positions over and a new game starts in its place at once.

Per game in flight (preallocated, G games, L = max_moves):
    planes   uint8   [G, L, N, N, C]  input planes of each position played, but the komi plane
    komi     float32 [G, L]           the game's komi for the side to move (+ for White)
    policy   float32 [G, L, A]        root visit distribution (the policy target)
    surprise float32 [G, L]           KL(policy target || the root's priors), in nats: how much
                                      the search taught the net there (`policy_surprise`)
    to_play  int8    [G, L]           +1 black / -1 white at that position
    moves    int16   [G, L]           the move played (for SGF records)
    full     bool    [G, L]           searched fully: only these become training positions
    version  int32   [G, L]           `weights_version` when the position was searched
    search_value float32 [G, L]       the root's visit-weighted mean Q after the search, the
                                      side to move's view (recorded where root values are
                                      read: value_search_share or resignation; read only
                                      with value_search_share)
When a game ends, its positions get the value target z * to_play, z the result from black's
view (+1 / -1, 0 for a draw); a resigned game is lost by the side that resigned. With
Config.value_search_share s > 0 the target is (1 - s) * z * to_play + s * search_value.
Its positions also get the auxiliary targets (replay_buffer.py): the final position's area
ownership (games/territory.py) and area score (black - white - komi, as GoBatch.score), both times
to_play; a resigned game has no final position, so its positions are marked not final.
Each position's reply target is the policy target of the game's next position (a fast search's
too, under playout cap randomization), rows of 0 for the last (the opponent's reply head).
Only a self-play that keeps them builds them (`replies`: a net with the head, or stored
chunks); otherwise the rows have width 0, so a Ray actor sends no second policy array.

Each game draws its komi (Config.komi_spread, komi_wide_share; `draw_komi`), and a share of
games (Config.handicap_share) starts from 2-4 black stones at random points off the edge with
White to move (games/handicap.py); the finished game carries both for its SGF record.

With Gumbel root selection (config.gumbel_considered > 0) the move and the policy target
come from py_util/gumbel.py instead of visit counts and temperature. In the
games config.opening_noise_only names (all, or the wide-komi draws) the root noise stops
after each player's first temperature_moves moves (for Gumbel, its draw: the move is then the
search's best, not a sample).

Playout cap randomization (config.full_search_share < 1): each move of each game draws a full
search (noise, config.simulations) or a fast one (no noise, config.fast_simulations). All
games first search to the fast budget in one batch, then the full ones go on to the full
budget (the tree counts simulations per move, so the second run continues the first).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from games.handicap import random_handicap_points
from games.search import SearchingGames, game_results
from games.territory import area_ownership
from kernels.go_batch import resolve_backend
from training.config import Config


def policy_surprise(targets: np.ndarray, priors: np.ndarray) -> np.ndarray:
    """float32 (k,): KL(target || prior) in nats per row, the priors floored at 1e-12 (the
    root's priors as the net gave them, masked to the searched moves and renormalised, before
    root noise: SearchingGames.net_priors); 0 where target and priors agree."""
    targets = targets.astype(np.float64)
    ratio = np.where(targets > 0, targets / np.maximum(priors.astype(np.float64), 1e-12), 1.0)
    # Two float32 distributions renormalised apart can make a KL of a hair below 0 (a Gumbel
    # target equal to its priors, all completed values alike): it is 0.
    return np.maximum((targets * np.log(ratio)).sum(axis=1), 0.0).astype(np.float32)


def wide_komi_reach(board_size: int) -> float:
    """How far from config.komi the komis of draw_komi's wide share go (a big lead given or
    taken); the int8 calibration spans it too (training/inference_choice.py)."""
    return board_size ** 2 / 4


def draw_komi(config: Config, count: int,
              rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(komi float64 (count,), wide bool (count,)): self-play komis, rounded to half points:
    most from a normal law around config.komi (standard deviation komi_spread), a share
    komi_wide_share (`wide`) uniform within config.komi +- wide_komi_reach."""
    komi = config.komi + config.komi_spread * rng.standard_normal(count)
    wide = rng.random(count) < config.komi_wide_share
    reach = wide_komi_reach(config.board_size)
    komi[wide] = config.komi + rng.uniform(-reach, reach, int(wide.sum()))
    return np.round(2 * komi) / 2, wide


@dataclass
class FinishedGame:
    moves: list[int]
    result: float          # +1 black won, -1 white won, 0 draw
    score: float           # area score minus komi of the final position (nan if resigned)
    resigned: bool
    full_searches: int = 0     # moves searched fully (the game's training positions)
    komi: float = 7.5
    handicap: tuple = ()       # black stones set before the first move (White then moves first)
    slot: int = -1             # the game in flight that played it (0 .. num_games - 1)


@dataclass
class SelfPlayBatch:
    planes: np.ndarray
    policy: np.ndarray
    value: np.ndarray
    ownership: np.ndarray      # int8 (k, N, N), see the module docstring
    score: np.ndarray          # float32 (k,)
    final: np.ndarray          # bool (k,)
    komi: np.ndarray           # float32 (k,): the game's komi for the side to move
    surprise: np.ndarray       # float32 (k,): KL(policy target || root priors), see above
    reply: np.ndarray          # float32 (k, A): the next position's policy target, 0 if none;
                               # (k, 0) when the self-play keeps no reply targets
    weights_version: np.ndarray        # int32 (P,): the weights version that played each position
    games: list[FinishedGame] = field(default_factory=list)
    seconds: float = 0.0
    # Moves made during this call, in every game in flight: the games handed over may have
    # begun in an earlier call, so `positions` overstates the call's own work.
    positions_played: int = 0
    nn_evaluations: int = 0
    false_resignations: int = 0
    playthrough_resignations: int = 0
    # Games whose positions came without their records (games/stored_selfplay.py).
    other_games: int = 0

    @property
    def positions(self) -> int:
        return len(self.value)


class SelfPlay:
    # num_threads None: one thread for the rules and the tree on the CPU back end (measured,
    # bench_selfplay and a timing of the net's calls: idle OpenMP workers spinning between
    # regions slowed each TensorFlow call by 10-35%, more than a second thread saves on the
    # search); every core for the tree on CUDA, where the net is not on the CPU and the
    # tree's share of a step grows with thousands of games.
    def __init__(self, config: Config, evaluator, seed: int = 0, num_threads: int | None = None,
                 replies: bool | None = None):
        """`replies`: build the reply targets (default: when the net has the reply head)."""
        if num_threads is None:
            num_threads = 0 if resolve_backend(config.backend) == "cuda" else 1
        self.config = config
        self.reply_width = config.num_actions if (
            config.reply_head if replies is None else replies) else 0
        games = config.num_games
        length = config.resolved_max_moves
        n = config.board_size
        # Forced playouts are for self-play's training targets only (matches search plainly);
        # score utility and LCB move choice are for play only (self-play's values are the
        # net's win probabilities, its moves Gumbel's or the visits').
        self.driver = SearchingGames(config.overridden(score_utility=0.0), games, evaluator,
                                     seed=seed, num_threads=num_threads,
                                     forced_playouts=config.forced_playouts,
                                     gumbel_considered=config.gumbel_considered)
        self.rng = np.random.default_rng(seed + 1)
        self.planes = np.zeros((games, length, n, n, config.board_planes), np.uint8)
        self.komi = np.zeros((games, length), np.float32)
        self.game_komi = np.full(games, config.komi)
        self.quiet = np.zeros(games, bool)     # root noise in the opening only (see above)
        self.handicap: list[tuple] = [() for _ in range(games)]
        self.policy = np.zeros((games, length, config.num_actions), np.float32)
        self.surprise = np.zeros((games, length), np.float32)
        self.to_play = np.zeros((games, length), np.int8)
        self.moves = np.zeros((games, length), np.int16)
        self.full = np.ones((games, length), bool)
        self.version = np.zeros((games, length), np.int32)
        self.search_value = np.zeros((games, length), np.float32)
        # The caller's label for the evaluator's current weights (the training loop: the
        # iteration that trained them); set it whenever the weights change.
        self.weights_version = 0
        self.resigned_by = np.zeros(games, np.int8)        # side that resigned, 0 if none
        self.would_resign = np.zeros(games, np.int8)       # playthrough game: side that would have
        self.playthrough = np.zeros(games, bool)
        self._start_games(np.ones(games, bool))

    @property
    def tree_overflows(self) -> int:
        return int(self.driver.search.overflow_count)

    def _start_games(self, games: np.ndarray) -> None:
        self.driver.new_games(games)
        config, go, chosen = self.config, self.driver.go, np.flatnonzero(games)
        wide = np.zeros(len(chosen), bool)
        if config.komi_spread or config.komi_wide_share:
            self.game_komi[chosen], wide = draw_komi(config, len(chosen), self.rng)
            go.set_komi(self.game_komi[chosen], chosen)
        self.quiet[chosen] = {"none": False, "all": True,
                              "wide_komi": wide}[config.opening_noise_only]
        handicapped = chosen[self.rng.random(len(chosen)) < config.handicap_share]
        n = config.board_size
        for game in chosen:
            self.handicap[game] = ()
        for game in handicapped:
            points = random_handicap_points(n, int(self.rng.integers(2, 5)), self.rng)
            stones = np.zeros(n * n, np.int8)
            stones[points] = 1
            go.set_board(stones.reshape(1, n, n), np.array([-1]), slots=[game])
            self.handicap[game] = tuple(int(point) for point in points)
        self.resigned_by[games] = 0
        self.would_resign[games] = 0
        self.playthrough[games] = self.rng.random(int(games.sum())) < self.config.resign_playthrough

    def play(self, num_positions: int, progress=None, max_moves: int | None = None) -> SelfPlayBatch:
        """Play until at least `num_positions` positions of finished games are collected, or
        (benchmarks) until every game made `max_moves` moves, whichever comes first."""
        start = time.perf_counter()
        evaluations_before = self.driver.evaluations
        planes, policy, value, versions, finished, komi, surprise = [], [], [], [], [], [], []
        ownership, score, final, reply = [], [], [], []
        collected = false_resigns = playthrough_resigns = played = moves = 0
        while collected < num_positions and (max_moves is None or moves < max_moves):
            moves += 1
            done = self._step()
            played += self.config.num_games   # every game made one move (or resigned)
            for game in np.flatnonzero(done):
                record, positions = self._harvest(game)
                finished.append(record)
                planes.append(positions[0])
                policy.append(positions[1])
                value.append(positions[2])
                ownership.append(positions[3])
                score.append(positions[4])
                final.append(positions[5])
                versions.append(positions[6])
                komi.append(positions[7])
                surprise.append(positions[8])
                reply.append(positions[9])
                collected += len(positions[2])
                if self.would_resign[game]:
                    playthrough_resigns += 1
                    false_resigns += int(record.result == self.would_resign[game])
                if progress is not None:
                    progress(min(collected, num_positions))
            self._start_games(done)
        n = self.config.board_size
        return SelfPlayBatch(
            planes=np.concatenate(planes) if planes else np.zeros((0, n, n, self.config.board_planes), np.uint8),
            policy=np.concatenate(policy) if policy else np.zeros((0, self.config.num_actions), np.float32),
            value=np.concatenate(value) if value else np.zeros(0, np.float32),
            ownership=np.concatenate(ownership) if ownership else np.zeros((0, n, n), np.int8),
            score=np.concatenate(score) if score else np.zeros(0, np.float32),
            final=np.concatenate(final) if final else np.zeros(0, bool),
            komi=np.concatenate(komi) if komi else np.zeros(0, np.float32),
            surprise=np.concatenate(surprise) if surprise else np.zeros(0, np.float32),
            reply=(np.concatenate(reply) if reply
                   else np.zeros((0, self.reply_width), np.float32)),
            weights_version=np.concatenate(versions) if versions else np.zeros(0, np.int32),
            games=finished, seconds=time.perf_counter() - start, positions_played=played,
            nn_evaluations=self.driver.evaluations - evaluations_before,
            false_resignations=false_resigns, playthrough_resignations=playthrough_resigns)

    def _step(self) -> np.ndarray:
        """One move in every game; returns the mask of games that just ended."""
        config, driver = self.config, self.driver
        go = driver.go
        move_number = go.to_numpy(go.move_count())
        everyone = np.ones(config.num_games, bool)
        opening = move_number < 2 * config.temperature_moves
        noise = opening | ~self.quiet
        if config.full_search_share >= 1:
            full = everyone
            driver.think(everyone, noise=noise)
        else:
            full = self.rng.random(config.num_games) < config.full_search_share
            fast = min(config.fast_simulations, config.simulations)
            driver.think(everyone, noise=full & noise, simulations=fast)
            if full.any():
                driver.think(full, simulations=config.simulations)
        # Once per move, the roots' planes and state come to the host for the replay buffer.
        rows = np.arange(config.num_games)
        self.full[rows, move_number] = full
        features = go.features(config.history)[..., :config.board_planes]   # no komi plane
        self.planes[rows, move_number] = go.to_numpy(features.astype(np.uint8))
        to_play = go.to_numpy(go.to_play())
        self.to_play[rows, move_number] = to_play
        self.komi[rows, move_number] = -to_play * self.game_komi   # komi counts for White
        if driver.gumbel is not None:
            # The Gumbel draw samples the move; its target is the improved policy.
            self.policy[rows, move_number] = driver.gumbel.policy_targets(driver.search)
            actions = driver.gumbel.actions(driver.search)
        else:
            self.policy[rows, move_number] = driver.search.policy_targets()
            actions = driver.search.choose_actions(0.0)
            if opening.any():
                actions[opening] = driver.search.choose_actions(1.0, games=opening)[opening]
        self.surprise[rows, move_number] = policy_surprise(self.policy[rows, move_number],
                                                           driver.net_priors)
        self.moves[rows, move_number] = actions
        self.version[rows, move_number] = self.weights_version
        resigning = np.zeros(config.num_games, bool)
        if config.value_search_share > 0 or config.resign_threshold > -1:
            root_values = driver.root_values()
            self.search_value[rows, move_number] = root_values
        if config.resign_threshold > -1:
            hopeless = root_values < config.resign_threshold
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
                              resigned=bool(self.resigned_by[game]),
                              full_searches=int(self.full[game, :length].sum()),
                              komi=float(self.game_komi[game]), handicap=self.handicap[game],
                              slot=int(game))
        if self.resigned_by[game]:
            # The resigning move was never played: drop it from the record, keep its position.
            record.moves = record.moves[:-1]
        to_play = self.to_play[game, :length].astype(np.float32)
        values = result * to_play
        share = self.config.value_search_share
        if share > 0:
            values = (1 - share) * values + share * self.search_value[game, :length]
        n = self.config.board_size
        if self.resigned_by[game]:
            owner, final = np.zeros((n, n), np.int8), False
            score = 0.0
        else:
            owner, final = area_ownership(go.to_numpy(go.board([game]))[0]), True
        kept = self.full[game, :length]
        side = self.to_play[game, :length][kept]
        reply = np.zeros((length, self.reply_width), np.float32)
        if self.reply_width:
            reply[:-1] = self.policy[game, 1:length]
        return record, (self.planes[game, :length][kept], self.policy[game, :length][kept],
                        values[kept], (owner[None] * side[:, None, None]).astype(np.int8),
                        (score * side).astype(np.float32), np.full(len(side), final),
                        self.version[game, :length][kept], self.komi[game, :length][kept],
                        self.surprise[game, :length][kept], reply[kept])
