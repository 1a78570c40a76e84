"""Komi as an input (Config.komi_input): each position carries its game's komi, the rules
score with it, the net reads it as the last input plane, self-play draws it per game (and
starts some games from handicap stones), and the replay keeps it.

The references: tests/reference_rules.py scores and builds the planes of the same games on its
own, and the komi plane's definition is written out here (komi counts for White; the plane
holds +komi / 20 when White is to move, -komi / 20 when Black is)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from games.handicap import random_handicap_points  # noqa: E402
from games.selfplay import SelfPlay, draw_komi  # noqa: E402
from games.search import uniform_evaluator  # noqa: E402
from games.sgf_records import game_to_sgf, read_sgf  # noqa: E402
from kernels import GoBatch  # noqa: E402
from reference_rules import BLACK, WHITE, ReferenceGo  # noqa: E402
from training.config import PRESETS, Config  # noqa: E402
from training.replay_buffer import ReplayBuffer, chunk_arrays  # noqa: E402
from training.run_directory import atomic_save_npz  # noqa: E402

N = 7


def komi_plane_value(komi: float, to_play: int) -> float:
    return (komi if to_play == WHITE else -komi) / 20.0


def random_legal(reference: ReferenceGo, rng) -> int:
    legal = np.flatnonzero(reference.legal_moves())
    return int(rng.choice(legal))


def test_each_position_scores_and_reads_its_own_komi():
    komis = [-3.5, 0.0, 7.5, 40.0]
    go = GoBatch(4, N, komi=7.5, history_length=1, komi_input=True, num_slots=8, seed=3)
    go.set_komi(komis, np.arange(4))
    references = [ReferenceGo(N, komi=k) for k in komis]
    rng = np.random.default_rng(5)
    for _ in range(30):
        moves = np.array([random_legal(r, rng) for r in references])
        go.play(moves)
        for reference, move in zip(references, moves):
            reference.play(int(move))
        planes = go.features(1)
        assert np.allclose(go.score(), [r.score() for r in references])
        for g, reference in enumerate(references):
            assert np.array_equal(planes[g, :, :, :-1], reference.features(1))
            assert np.allclose(planes[g, :, :, -1],
                               komi_plane_value(komis[g], reference.to_play))
    # A copy takes its source's komi; a reset and a board load keep the slot's.
    go.copy(np.arange(4), np.arange(4, 8))
    assert np.array_equal(go.komi_of(np.arange(8)), komis * 2)
    assert np.allclose(go.score(np.arange(4, 8)), [r.score() for r in references])
    go.reset()
    assert np.array_equal(go.score(), [-k for k in komis])
    stones = np.zeros((4, N, N), np.int8)
    stones[:, 3, 3] = 1
    go.set_board(stones, np.full(4, -1))
    assert np.array_equal(go.komi_of(), komis)
    assert np.allclose(go.features(1)[:, 0, 0, -1], [k / 20 for k in komis])
    # Setting the batch's komi sets every slot's.
    go.komi = 5.5
    assert np.array_equal(go.komi_of(np.arange(8)), [5.5] * 8)


def test_bad_komis_are_refused_and_a_damaged_one_is_not_restored():
    go = GoBatch(2, N, komi_input=True)
    for bad, message in ((float("nan"), "finite"), ([1.0, 2.0, 3.0], "shape")):
        with pytest.raises(ValueError, match=message):
            go.set_komi(bad)
    state = go.save()
    data = state.data.copy()
    offset = go._backend.layout["komi"]
    data[1, offset:offset + 4] = np.array([np.inf], np.float32).view(np.uint8)
    damaged = type(state)(slots=state.slots, data=data, layout_key=state.layout_key)
    with pytest.raises(ValueError, match="saved position 1 is damaged: the komi is not a finite"):
        go.restore(damaged)


def test_the_config_refuses_komi_draws_for_a_net_that_cannot_see_the_komi():
    with pytest.raises(ValueError, match="komi_spread and komi_wide_share need komi_input"):
        Config(komi_spread=2.0).validate()
    drawing = Config(komi_spread=2.0, komi_input=True).validate()
    # A match of such a run against an older net: that net plays without the draws.
    older = drawing.with_inputs_of(Config())
    assert not older.komi_input and older.komi_spread == 0 and older.validate()
    # Nor the quiet wide-komi games, which name games of the draws it no longer has.
    quiet = Config(komi_wide_share=0.2, komi_input=True, opening_noise_only="wide_komi")
    older = quiet.validate().with_inputs_of(Config())
    assert older.komi_wide_share == 0 and older.opening_noise_only == "none"
    with pytest.raises(ValueError, match="handicap_share needs a board of 5x5"):
        Config(board_size=4, handicap_share=0.1).validate()


def test_komi_draws_and_handicap_points():
    config = Config(board_size=9, komi=7.0, komi_input=True, komi_spread=1.0,
                    komi_wide_share=0.25)
    komi, wide = draw_komi(config, 4000, np.random.default_rng(0))
    assert np.array_equal(komi * 2, np.round(komi * 2))          # half points
    # A quarter uniform within 7 +- 20.25, so 0.25 * 15.25 / 20.25 of all beyond 7 +- 5, where
    # the normal law (standard deviation 1) puts almost nothing.
    away = np.abs(komi - 7.0)
    assert abs((away > 5).mean() - 0.25 * 15.25 / 20.25) < 0.02 and away.max() <= 20.5
    # Within 7 +- 1 after rounding: the normal law's 79% (|x| < 1.25) of three quarters, and
    # the uniform law's 2.5 / 40.5 of a quarter.
    assert abs((away <= 1).mean() - (0.75 * 0.789 + 0.25 * 2.5 / 40.5)) < 0.03
    # `wide` marks the uniform share: every komi beyond 7 +- 5 is one, a quarter in all.
    assert wide[away > 5].all() and abs(wide.mean() - 0.25) < 0.02
    points = random_handicap_points(9, 4, np.random.default_rng(1))
    rows, cols = np.divmod(points, 9)
    assert len(set(points.tolist())) == 4 and rows.min() >= 1 and rows.max() <= 7
    assert cols.min() >= 1 and cols.max() <= 7


def test_self_play_plays_each_game_at_its_komi_and_from_its_handicap():
    """Every finished game is replayed by the reference from its handicap stones at its own
    komi: the result and the score the self-play recorded are the reference's."""
    config = PRESETS["tiny"].overridden(
        board_size=N, komi_input=True, komi_spread=3.0, komi_wide_share=0.3,
        handicap_share=0.4, simulations=4, num_games=12, backend="cpu")
    selfplay = SelfPlay(config, uniform_evaluator(config.num_actions), seed=2)
    batch = selfplay.play(600)
    games = batch.games
    assert len({game.komi for game in games}) > 3
    handicapped = [game for game in games if game.handicap]
    assert handicapped and len(handicapped) < len(games)
    assert all(2 <= len(game.handicap) <= 4 for game in handicapped)
    for game in games:
        reference = ReferenceGo(N, komi=game.komi, max_moves=config.resolved_max_moves)
        if game.handicap:
            stones = np.zeros(N * N, np.int8)
            stones[list(game.handicap)] = BLACK
            reference.set_board(stones.reshape(N, N), WHITE)
        for move in game.moves:
            reference.play(int(move))
        if not game.resigned:
            assert game.score == pytest.approx(reference.score())
            assert game.result == np.sign(reference.score())
    # Each position keeps its game's komi for the side to move.
    assert set(np.abs(batch.komi).tolist()) <= {abs(game.komi) for game in games}
    assert batch.planes.shape[-1] == config.board_planes == config.input_planes - 1
    # The SGF record starts from the handicap stones, White first, at the game's komi.
    game = handicapped[0]
    record = read_sgf(game_to_sgf(N, game.komi, game.moves, "?", handicap=game.handicap))
    assert sorted(record.nodes[0].add_black) == sorted(game.handicap)
    assert record.handicap == len(game.handicap) and record.komi == game.komi
    assert record.moves[0][0] == -1 and record.nodes[0].to_play == -1


def test_the_replay_appends_the_komi_plane_and_its_chunks_keep_the_komi(tmp_path):
    rng = np.random.default_rng(4)
    count, planes = 40, 4
    stored = rng.integers(0, 2, (count, N, N, planes)).astype(np.uint8)
    policy = rng.dirichlet(np.ones(N * N + 1), count).astype(np.float32)
    value = rng.choice([-1.0, 1.0], count).astype(np.float32)
    ownership = rng.integers(-1, 2, (count, N, N)).astype(np.int8)
    score = rng.normal(0, 5, count).astype(np.float32)
    final = np.ones(count, bool)
    komi = np.full(count, -6.5, np.float32)          # every position: Black to move, komi 6.5
    path = tmp_path / "chunk.npz"
    atomic_save_npz(path, chunk_arrays(stored, policy, value, ownership, score, final, komi,
                                       np.zeros(len(value), np.float32)))
    buffer = ReplayBuffer(100, N, planes, komi_input=True)
    assert buffer.load_chunks([path]) == count
    sample = buffer.sample(64, rng)
    assert sample.planes.shape == (64, N, N, planes + 1)
    assert np.allclose(sample.planes[..., -1], -6.5 / 20)
    # A position's other planes are one of the stored positions under some symmetry.
    assert set(np.unique(sample.planes[..., :-1])) <= {0.0, 1.0}
    with pytest.raises(ValueError, match="without their komi"):
        buffer.add(stored, policy, value)
    # A chunk from before komi was an input: a net that reads the komi cannot use it (set
    # aside with a message), one that does not can.
    old = tmp_path / "old.npz"
    atomic_save_npz(old, {"planes": stored, "policy": policy, "value": value})
    messages = []
    assert ReplayBuffer(100, N, planes, komi_input=True).load_chunks([old], messages.append) == 0
    assert "old.npz is damaged" in messages[0] and "komi" in messages[0]
    assert ReplayBuffer(100, N, planes).load_chunks([old]) == count


def test_the_gtp_komi_reaches_the_net():
    """A net that reads the komi sees the game's komi from the GTP `komi` command on, for
    the side to move at every position it evaluates."""
    from gtp import EngineOptions, GoEngine
    seen = []

    def recording_net(planes):
        seen.append(np.asarray(planes)[:, :, :, -1].copy())
        actions = planes.shape[1] * planes.shape[2] + 1
        return (np.full((len(planes), actions), 1 / actions, np.float32),
                np.zeros(len(planes), np.float32))

    config = PRESETS["tiny"].overridden(board_size=N, komi_input=True)
    engine = GoEngine(config, recording_net, EngineOptions(simulations=8,
                                                          analysis_simulations=16))
    for komi in (0.5, 15.0):
        seen.clear()
        engine.handlers()["komi"]([str(komi)])
        engine.handlers()["genmove"](["b"])
        values = np.concatenate([plane.reshape(len(plane), -1) for plane in seen])
        assert np.allclose(values, values[:, :1])                     # constant over the board
        assert set(np.round(values[:, 0].astype(float), 6)) == {round(-komi / 20, 6),
                                                                round(komi / 20, 6)}
        engine.handlers()["clear_board"]([])


def test_the_calibration_tool_finds_where_a_net_gives_komi_its_worth():
    """benchmarks/komi_calibration.py on a stand-in net that values the empty board for Black
    as tanh((7 - komi) / 4), read off the komi plane: Black's win probability crosses 50%
    at komi 7, from the net alone and after a search that sees only that value."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import komi_calibration

    def komi_reader(planes):
        planes = np.asarray(planes)
        actions = planes.shape[1] * planes.shape[2] + 1
        black_to_move = planes[:, 0, 0, -3] == 1   # the black-to-move plane (history 1)
        # The plane holds -komi / 20 with Black to move, +komi / 20 with White to move.
        komi = planes[:, 0, 0, -1] * 20 * np.where(black_to_move, -1, 1)
        value = np.tanh((7 - komi) / 4) * np.where(black_to_move, 1, -1)
        return np.full((len(planes), actions), 1 / actions, np.float32), value.astype(np.float32)

    config = PRESETS["tiny"].overridden(board_size=N, komi_input=True, history=1)
    komis = komi_calibration.komi_range("2:12:2")
    assert komis.tolist() == [2, 4, 6, 8, 10, 12]
    by_net, by_search = komi_calibration.black_win_probabilities(config, komi_reader, komis,
                                                                 16, seed=0)
    assert np.allclose(by_net, (1 + np.tanh((7 - komis) / 4)) / 2, atol=1e-6)
    assert komi_calibration.crossing(komis, by_net) == pytest.approx(7.0)
    # Every position of a search has the value of its komi: the search agrees with the net.
    assert np.allclose(by_search, by_net, atol=1e-6)
    assert komi_calibration.crossing(komis, np.full(len(komis), 0.48)) is None


def test_komi_calibration_s_selfplay_games_follow_a_komi_beyond_the_board():
    """A komi larger than the board decides every game whatever is played: the self-play
    part of komi_calibration.py counts one result per game in flight at the komi it was
    given (1 for Black below -N*N, 0 above N*N, halves only from draws in between)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import komi_calibration

    config = PRESETS["tiny"].overridden(board_size=N, komi_input=True, history=1,
                                        simulations=4, gumbel_considered=4,
                                        opening_noise_only="all", temperature_moves=1)

    def uniform(planes):
        actions = N * N + 1
        return (np.full((len(planes), actions), 1 / actions, np.float32),
                np.zeros(len(planes), np.float32))
    assert komi_calibration.selfplay_black_result(config, uniform, -N * N - 0.5, 6, 0)[0] == 1.0
    assert komi_calibration.selfplay_black_result(config, uniform, N * N + 0.5, 6, 0)[0] == 0.0
    middle, distinct = komi_calibration.selfplay_black_result(config, uniform, 0.0, 6, 0)
    assert 0.0 <= middle <= 1.0 and (12 * middle) % 1 == 0
    assert 1 <= distinct <= 6
    # Without any noise every game in flight plays the same game.
    silent = config.overridden(temperature_moves=0)
    assert komi_calibration.selfplay_black_result(silent, uniform, 0.0, 6, 0)[1] == 1
