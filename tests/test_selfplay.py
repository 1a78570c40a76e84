"""Self-play bookkeeping with a stand-in evaluator: value targets from the final result (and
the search's value, with value_search_share), resignation and its play-through share, the
batch kept full, SGF-ready move lists."""
import numpy as np

from float_tolerance import EPS32, gamma
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
    np.testing.assert_allclose(batch.policy.sum(axis=1), 1.0, atol=gamma(2 * batch.policy.shape[1]))
    assert set(np.unique(batch.planes)) <= {0, 1}


def test_value_search_share_mixes_the_search_s_value_into_the_value_targets():
    # Every position is worth 0.3 to its side to move. With one simulation a move the root's
    # one visited child is a position of the opponent's, so the search values the root at
    # -0.3, except where the move played ends the game: that child is worth the result.
    config = tiny(num_games=4, simulations=1)
    evaluator = constant_evaluator(0.3, config.num_actions)
    plain = SelfPlay(config, evaluator, seed=3).play(100)
    for share in (0.5, 1.0):
        mixed = SelfPlay(config.overridden(value_search_share=share), evaluator, seed=3).play(100)
        # The targets do not change the games, only what is learnt from them.
        assert [game.moves for game in mixed.games] == [game.moves for game in plain.games]
        start = 0
        for game in mixed.games:
            length = len(game.moves)
            result = plain.value[start:start + length]
            expected = np.append((1 - share) * result[:-1] + share * -0.3, result[-1])
            # Two float32 products and a sum of values within [-1, 1], each rounded once,
            # and -0.3 itself rounded to float32: under 2 eps; 4 eps is the bound held to.
            np.testing.assert_allclose(mixed.value[start:start + length], expected,
                                       rtol=0, atol=4 * EPS32)
            start += length
        assert start == mixed.positions


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
def counting_evaluator(num_actions: int):
    calls = []

    def evaluate(planes):
        calls.append(len(planes))
        return constant_evaluator(0.0, num_actions)(planes)
    return evaluate, calls


def test_a_full_search_share_of_one_is_the_plain_loop():
    plain = tiny(num_games=4, simulations=6)
    capped = plain.overridden(full_search_share=1.0, fast_simulations=2)
    a = SelfPlay(plain, constant_evaluator(0.0, plain.num_actions), seed=5).play(120)
    b = SelfPlay(capped, constant_evaluator(0.0, plain.num_actions), seed=5).play(120)
    for name in ("planes", "policy", "value"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert all(game.full_searches == len(game.moves) for game in a.games)


def test_playout_cap_randomization_keeps_only_fully_searched_positions():
    config = tiny(num_games=8, simulations=12, full_search_share=0.25, fast_simulations=2,
                  temperature_moves=0)
    evaluate, calls = counting_evaluator(config.num_actions)
    batch = SelfPlay(config, evaluate, seed=2).play(150)
    moves = sum(len(game.moves) for game in batch.games)
    kept = sum(game.full_searches for game in batch.games)
    assert kept == batch.positions
    # A binomial(moves, 1/4) count, within 4 standard deviations.
    assert abs(kept - moves / 4) < 4 * np.sqrt(moves * 0.25 * 0.75)
    # Every kept position is one of its game's positions, in order: replay the moves in a
    # fresh GoBatch and find each kept position's planes among the game's own.
    start = 0
    for game in batch.games:
        replayed = GoBatch(1, config.board_size, komi=config.komi, history_length=config.history)
        positions = []
        for move in game.moves:
            positions.append(replayed.features(config.history)[0].astype(np.uint8))
            replayed.play(np.array([move]))
        cursor = 0
        for planes in batch.planes[start:start + game.full_searches]:
            while not np.array_equal(positions[cursor], planes):
                cursor += 1            # IndexError: not a position of this game, or out of order
            cursor += 1
        start += game.full_searches
    assert start == batch.positions
    # A fast search needs fewer evaluations: fewer than the plain loop's 12 per move played
    # (a new root is one more; reused subtrees make some moves cheaper still).
    assert sum(calls) < moves * (0.25 * 13 + 0.75 * 3) * 1.1


def test_ownership_and_score_targets_come_from_the_final_position():
    config = tiny(num_games=4, simulations=4)
    batch = SelfPlay(config, constant_evaluator(0.0, config.num_actions), seed=7).play(100)
    start = 0
    n = config.board_size
    for game in batch.games:
        final = replay(config.board_size, config.komi, game.moves)
        board = final.board()[0]
        rows = slice(start, start + len(game.moves))
        side = np.where(np.arange(len(game.moves)) % 2 == 0, 1, -1)     # black moves first
        assert batch.final[rows].all()
        # From the side to move's view, the owners flip sign with the side.
        black_view = batch.ownership[rows] * side[:, None, None]
        assert (black_view == black_view[0]).all()
        owner = black_view[0]
        # Every stone owns its point; the area count minus komi is the engine's own score.
        assert (owner[board != 0] == board[board != 0]).all()
        assert owner.sum() - config.komi == final.score()[0] == game.score
        np.testing.assert_array_equal(batch.score[rows], game.score * side)
        # An empty point is owned only if all its empty region's neighbours are that colour.
        for r, c in zip(*np.nonzero((board == 0) & (owner != 0))):
            neighbours = [board[rr, cc] for rr, cc in ((r - 1, c), (r + 1, c), (r, c - 1),
                                                       (r, c + 1)) if 0 <= rr < n and 0 <= cc < n]
            assert -owner[r, c] not in neighbours
        start += len(game.moves)
    assert start == batch.positions


def test_resigned_games_have_no_final_targets():
    config = tiny(num_games=6, simulations=2, resign_threshold=-0.5, resign_playthrough=0.0)
    batch = SelfPlay(config, constant_evaluator(1.0, config.num_actions), seed=1).play(6)
    assert batch.games and all(game.resigned for game in batch.games)
    assert not batch.final.any() and not batch.ownership.any() and not batch.score.any()


def position_evaluator(num_actions: int):
    """Priors and value a fixed function of the planes: a search without noise then plays
    each position the same way every time."""
    rng = np.random.default_rng(11)
    project = None

    def evaluate(planes):
        nonlocal project
        flat = np.asarray(planes, np.float32).reshape(len(planes), -1)
        if project is None:
            project = 0.2 * rng.standard_normal((flat.shape[1], num_actions + 1)).astype(np.float32)
        out = flat @ project
        logits = out[:, :-1] - out[:, :-1].max(axis=1, keepdims=True)
        policy = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
        return policy.astype(np.float32), np.tanh(out[:, -1]).astype(np.float32)
    return evaluate


def first_games(config, seed: int) -> list[list[int]]:
    batch = SelfPlay(config, position_evaluator(config.num_actions), seed=seed).play(150)
    return sorted(game.moves for game in batch.games)


def test_opening_noise_only_plays_the_search_s_own_moves_after_the_opening():
    # Without an opening every move is searched without noise and played by the search's
    # choice: the games are the same whatever the seed, for PUCT (Dirichlet noise) and for
    # Gumbel (its draw). With noise they differ, and with a noisy opening they part early
    # and each game's middle follows from its opening alone.
    for considered in (0, 4):
        config = tiny(num_games=3, simulations=8, gumbel_considered=considered,
                      temperature_moves=0)
        quiet = config.overridden(opening_noise_only="all")
        assert first_games(quiet, seed=1) == first_games(quiet, seed=2)
        assert first_games(config, seed=1) != first_games(config, seed=2)
        opening = quiet.overridden(temperature_moves=1)
        assert first_games(opening, seed=1) != first_games(opening, seed=2)


def test_opening_noise_only_wide_komi_quiets_the_wide_komi_games_alone():
    # Half the games draw a komi far from the standard one: each plays move for move as a
    # quiet self-play alone at its komi does. The others, at the standard komi, keep their
    # noise and so part from the quiet game there.
    config = tiny(num_games=8, simulations=8, gumbel_considered=4, temperature_moves=0,
                  komi_input=True, komi_wide_share=0.5, opening_noise_only="wide_komi")
    batch = SelfPlay(config, position_evaluator(config.num_actions), seed=5).play(300)
    wide = [game for game in batch.games if game.komi != config.komi]
    standard = [game for game in batch.games if game.komi == config.komi]
    assert len(wide) >= 2 and len(standard) >= 2

    def quiet_alone(komi: float) -> list[int]:
        alone = config.overridden(num_games=1, komi=komi, komi_wide_share=0.0,
                                  opening_noise_only="all")
        return first_games(alone, seed=9)[0]
    for game in wide:
        assert game.moves == quiet_alone(game.komi)
    quiet_standard = quiet_alone(config.komi)
    assert any(game.moves != quiet_standard for game in standard)
