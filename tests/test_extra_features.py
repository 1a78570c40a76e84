"""GoBatch(extra_features=True): the liberty and ko planes after the basic ones, checked
against the flood-fill reference (tests/reference_rules.py) over random games and on a
position whose answer is worked out by hand."""
import numpy as np
import pytest

from kernels import GoBatch
from reference_rules import ReferenceGo, board_from_ascii, gtp_to_move


@pytest.mark.parametrize("board_size, games, seed", [(5, 24, 1), (9, 12, 2), (19, 3, 3)])
def test_extra_planes_match_the_reference_over_random_games(board_size, games, seed):
    history = 1
    engine = GoBatch(games, board_size, history_length=history, extra_features=True, seed=seed)
    basic = 2 * (history + 1) + 2
    assert engine.num_feature_planes() == basic + 7
    references = [ReferenceGo(board_size) for _ in range(games)]
    rng = np.random.default_rng(seed)
    checked_ko = checked_atari = 0
    for _ in range(3 * board_size * board_size):
        planes = engine.features()
        for game, reference in enumerate(references):
            want = np.concatenate([reference.features(history), reference.extra_features()], axis=2)
            np.testing.assert_array_equal(planes[game], want, err_msg=f"game {game}")
            checked_ko += int(want[:, :, basic + 6].any())
            checked_atari += int(want[:, :, [basic, basic + 3]].any())
        # Mostly legal random moves, with passes now and then; games that ended restart.
        moves = engine.random_moves(include_pass=rng.random() < 0.05)
        engine.play(moves)
        for game, reference in enumerate(references):
            reference.play(int(moves[game]))
        over = engine.is_over()
        if over.any():
            engine.reset(np.flatnonzero(over))
            for game in np.flatnonzero(over):
                references[game] = ReferenceGo(board_size)
    # The random games reached the cases the planes are for.
    assert checked_atari > 0
    if board_size <= 9:
        assert checked_ko > 0


def test_liberty_and_ko_planes_of_a_position_worked_by_hand():
    # A ko: black to move captures white B3 at C3, and C3 then has B3 as its one liberty.
    # Black A3 (libs A4, A2), B4 (A4, B5), B2 (A2, B1): 2 each. White B3: 1 (C3); C4 (C5,
    # D4, C3), C2 (C3, D2, C1) and D3 (C3, D4, E3, D2): 3 or more.
    stones = board_from_ascii("""
        . . . . .
        . X O . .
        X O . O .
        . X O . .
        . . . . .""")
    engine = GoBatch(1, 5, history_length=0, extra_features=True)
    engine.set_board(stones.reshape(1, 5, 5), np.array([1]))
    planes = engine.features(0)[0]
    extra = planes[:, :, 4:]
    assert extra[:, :, [0, 2]].sum() == 0                  # black: no group with 1 or 3+ libs
    assert np.array_equal(np.argwhere(extra[:, :, 1]), np.argwhere(stones == 1))
    assert np.argwhere(extra[:, :, 3]).tolist() == [[2, 1]]           # B3
    assert extra[:, :, 4].sum() == 0                       # white: no group with 2 libs
    assert np.argwhere(extra[:, :, 5]).tolist() == [[1, 2], [2, 3], [3, 2]]   # C4, D3, C2
    assert extra[:, :, 6].sum() == 0                       # no ko yet
    engine.play(np.array([gtp_to_move("C3", 5)]))          # captures B3
    extra = engine.features(0)[0][:, :, 4:]
    assert np.argwhere(extra[:, :, 6]).tolist() == [[2, 1]]   # white may not retake at B3
    # White to move now: black's C3 is the opponent's group with one liberty (B3).
    assert extra[2, 2, 3] == 1.0
    engine.play(np.array([gtp_to_move("E1", 5)]))          # white plays elsewhere: no ko
    assert engine.features(0)[0][:, :, 4 + 6].sum() == 0


@pytest.mark.parametrize("history", [0, 1, 3, 7])
@pytest.mark.parametrize("extra", [False, True])
@pytest.mark.parametrize("komi", [False, True])
def test_the_plane_count_is_defined_once_and_is_what_the_engine_writes(history, extra, komi):
    """feature_planes (Python) and go_feature_channels (C) agree: the C extension refuses an
    output buffer of another size, so features() runs only when they do; the config, the
    extension's EXTRA_PLANES and a net's shape read back from its weights (with the run's
    history where a plane count fits two inputs) agree with them."""
    from kernels.go_batch import EXTRA_PLANES, feature_planes
    from training.config import Config
    from training.net_shape import net_shape
    from architectures.array_net import expected_shapes, weight_names
    go = GoBatch(2, 5, history_length=max(history, 1), extra_features=extra, komi_input=komi)
    planes = go.features(history)
    assert planes.shape == (2, 5, 5, feature_planes(history, extra, komi))
    assert EXTRA_PLANES == feature_planes(history, True) - feature_planes(history, False) == 7
    config = Config(board_size=5, history=history, extra_features=extra, komi_input=komi,
                    blocks=2, filters=8, value_hidden=16, aux_heads=extra)
    assert config.input_planes == feature_planes(history, extra, komi)
    assert config.board_planes == feature_planes(history, extra)
    shapes = expected_shapes(config)
    names = weight_names(config.blocks, config.aux_heads, config.global_pooling)
    arrays = {f"model.{i:04d}": np.zeros(shapes[name], np.float32) for i, name in enumerate(names)}
    shape = {name: getattr(config, name) for name in Config.SHAPE_FIELDS}
    assert net_shape(arrays, history) == shape
    # 2h+5 planes are history h with the komi plane or history h-3 with the extra planes.
    twins = sum(feature_planes(h, e, k) == config.input_planes
                for h in range(20) for e in (False, True) for k in (False, True))
    if twins == 1:
        # The history decides only between twins: a run whose config.json is gone resumes
        # with its checkpoints' history whatever the command line's.
        assert net_shape(arrays) == net_shape(arrays, history + 2) == shape
    else:
        with pytest.raises(ValueError, match="history decides"):
            net_shape(arrays)
