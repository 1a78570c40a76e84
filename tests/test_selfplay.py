"""Self-play bookkeeping with a stand-in evaluator: value targets from the final result,
resignation and its play-through share, the batch kept full, SGF-ready move lists."""
import numpy as np

from training.config import PRESETS
from kernels import GoBatch
from games.selfplay import SelfPlay


def constant_evaluator(value: float, num_actions: int):
    def evaluate(planes):
        count = len(planes)
        return (np.full((count, num_actions), 1.0 / num_actions, np.float32),
                np.full(count, value, np.float32))
    return evaluate


def tiny(**changes):
    return PRESETS["tiny"].overridden(**changes)


def replay(board_size: int, komi: float, moves: list[int]) -> GoBatch:
    games = GoBatch(1, board_size, komi=komi)
    for move in moves:
        games.play(np.array([move]))
    return games


def test_value_targets_follow_the_final_score_from_the_side_to_move():
    config = tiny(num_games=4, simulations=4)
    selfplay = SelfPlay(config, constant_evaluator(0.0, config.num_actions), seed=3)
    batch = selfplay.play(200)
    assert batch.positions >= 200 and len(batch.games) >= 1
    start = 0
    for game in batch.games:
        assert not game.resigned
        final = replay(config.board_size, config.komi, game.moves)
        assert final.is_over()[0]
        assert game.score == final.score()[0]
        assert game.result == np.sign(final.score()[0])
        length = len(game.moves)
        values = batch.value[start:start + length]
        # Black moves at even plies (the first position), white at odd ones.
        expected = game.result * np.where(np.arange(length) % 2 == 0, 1.0, -1.0)
        np.testing.assert_array_equal(values, expected)
        start += length
    assert start == batch.positions
    # Policy targets are distributions; planes are 0/1.
    np.testing.assert_allclose(batch.policy.sum(axis=1), 1.0, rtol=1e-5)
    assert set(np.unique(batch.planes)) <= {0, 1}


def test_hopeless_games_resign_and_playthrough_games_count_false_resignations():
    # Every position looks won for the side to move there, so every move the searcher
    # considers hands the opponent a won position: a root value near -1, hopeless.
    config = tiny(num_games=6, simulations=2, resign_threshold=-0.5, resign_playthrough=0.0)
    selfplay = SelfPlay(config, constant_evaluator(1.0, config.num_actions), seed=1)
    batch = selfplay.play(6)
    assert batch.games and all(game.resigned for game in batch.games)
    for game in batch.games:
        # Black is to move first and resigns at once: white wins, no move was played.
        assert game.moves == [] and game.result == -1.0
    assert batch.value.tolist() == [-1.0] * batch.positions

    config = tiny(num_games=6, simulations=2, resign_threshold=-0.5, resign_playthrough=1.0)
    selfplay = SelfPlay(config, constant_evaluator(1.0, config.num_actions), seed=1)
    batch = selfplay.play(100)
    assert batch.games and not any(game.resigned for game in batch.games)
    assert batch.playthrough_resignations == len(batch.games)
    black_wins = sum(game.result > 0 for game in batch.games)
    # Black always "wanted" to resign first; each black win is a false resignation.
    assert batch.false_resignations == black_wins


def test_positions_played_counts_the_moves_of_the_call_only():
    """Over several calls, the moves counted equal every position handed over plus those of
    the games still in flight (their move counts), whatever call they were made in; a call
    that hands over a game begun earlier counts only its own moves."""
    config = tiny(num_games=4, simulations=2, max_moves=60, sensible_moves_only=False)
    selfplay = SelfPlay(config, constant_evaluator(0.0, config.num_actions), seed=5)
    batches = [selfplay.play(need) for need in (1, 1, 1, 40)]
    in_flight = int(selfplay.driver.go.move_count(list(range(config.num_games))).sum())
    assert sum(b.positions_played for b in batches) == sum(b.positions for b in batches) + in_flight
    # A call that handed over games begun in earlier calls made fewer moves than it handed over.
    assert any(b.positions > b.positions_played for b in batches)
