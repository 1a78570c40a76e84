"""architectures/: the ONNX Runtime inference back end against TensorFlow's."""
import os
from pathlib import Path

import numpy as np
import pytest

from architectures.quiet_tensorflow import load_keras

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
keras = load_keras()

from architectures import CompiledNet, Trainer, build_model, seed_initial_weights  # noqa: E402
from architectures.weights_version import weights_changed  # noqa: E402
from architectures.onnx_export import keras_weights, onnx_model  # noqa: E402
from float_tolerance import (accumulation_depths, assert_head_close,  # noqa: E402
                             assert_same_net_answers, model_shape, trunk_depth)
from test_net import randomise_batch_norm  # noqa: E402

BOARD, PLANES = 5, 6
ACTIONS = BOARD * BOARD + 1


def model_with_statistics(seed=0, blocks=2, filters=8, board_size=BOARD):
    """A net whose batch norms are not the identity (fresh ones are)."""
    seed_initial_weights(seed)
    model = build_model(board_size, PLANES, blocks=blocks, filters=filters, value_hidden=16)
    randomise_batch_norm(model, seed)
    return model


def planes(rows, seed=0, board_size=BOARD):
    rng = np.random.default_rng(seed)
    return (rng.random((rows, board_size, board_size, PLANES)) < 0.3).astype(np.float32)


@pytest.mark.parametrize("blocks", [0, 1, 3])
def test_weights_round_trip_exactly(blocks):
    model = model_with_statistics(seed=blocks, blocks=blocks)
    proto = onnx_model(model)
    onnx.checker.check_model(proto)
    back = keras_weights(proto, model)
    original = model.get_weights()
    assert len(back) == len(original)
    for a, b in zip(back, original):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    # Loaded into a fresh net of the same shape, they give TensorFlow's outputs bit for bit.
    fresh = build_model(BOARD, PLANES, blocks=blocks, filters=8, value_hidden=16)
    fresh.set_weights(back)
    probe = planes(7, seed=blocks)
    for a, b in zip(CompiledNet(model, 8, backend="tensorflow")(probe),
                    CompiledNet(fresh, 8, backend="tensorflow")(probe)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("board_size", [5, 9])
def test_onnxruntime_matches_tensorflow(board_size):
    model = model_with_statistics(seed=board_size, board_size=board_size, filters=16)
    tf_net = CompiledNet(model, 16, backend="tensorflow")
    ort_net = CompiledNet(model, 16, backend="onnxruntime")
    assert ort_net.backend == "onnxruntime" and ort_net.tracing_count == 1
    probe = planes(40, seed=1, board_size=board_size)
    for rows in (0, 1, 5, 16, 17, 40):      # empty, partial, full and chunked batches
        expected, got = tf_net(probe[:rows]), ort_net(probe[:rows])
        assert got[0].shape == (rows, board_size ** 2 + 1) and got[1].shape == (rows,)
        assert got[0].dtype == np.float32 and got[1].dtype == np.float32
        assert_same_net_answers(*got, *expected, model_shape(model))


def test_onnxruntime_follows_training_and_loaded_state():
    model = model_with_statistics(seed=3, blocks=1)
    net = CompiledNet(model, 8, backend="onnxruntime")
    trainer = Trainer(model, batch_size=8, learning_rates=[(0, 0.1)])
    rng = np.random.default_rng(4)
    batch = (planes(8, seed=4), rng.dirichlet(np.full(ACTIONS, 0.3), 8).astype(np.float32),
             rng.choice([-1.0, 1.0], 8).astype(np.float32))
    before = net(batch[0])
    for _ in range(3):
        trainer.train_step(*batch)
    after = net(batch[0])
    assert not np.allclose(before[0], after[0])
    reference = CompiledNet(model, 8, backend="tensorflow")(batch[0])
    assert_same_net_answers(*after, *reference, model_shape(model))

    other = Trainer(model_with_statistics(seed=5, blocks=1), batch_size=8)
    other_net = CompiledNet(other.model, 8, backend="onnxruntime")
    other_net(batch[0])
    other.load_state_dict(trainer.state_dict())
    for a, b in zip(other_net(batch[0]), net(batch[0])):
        np.testing.assert_array_equal(a, b)

    # Variables assigned by hand: the owner says so, or refreshes the net.
    kernel = model.get_layer("value").kernel
    kernel.assign(kernel.numpy() * -1)
    weights_changed(model)
    expected = CompiledNet(model, 8, backend="tensorflow")(batch[0])
    assert not np.allclose(expected[1], after[1])
    assert_same_net_answers(*net(batch[0]), *expected, model_shape(model))


def test_backend_choice_is_checked():
    model = model_with_statistics()
    with pytest.raises(ValueError, match="backend"):
        CompiledNet(model, 4, backend="torch")
    with pytest.raises(ValueError, match="fold_batch_norm"):
        CompiledNet(model, 4, fold_batch_norm=False, backend="onnxruntime")
    assert CompiledNet(model, 4, fold_batch_norm=False).backend == "tensorflow"


def aux_model(seed, board_size, global_pooling=False):
    """A net with ownership and score heads whose biases and batch norms are not the
    identity, so a head that skipped a bias or a batch norm would disagree."""
    seed_initial_weights(seed)
    model = build_model(board_size, PLANES, blocks=2, filters=8, value_hidden=16,
                        aux_heads=True, global_pooling=global_pooling)
    randomise_batch_norm(model, seed)
    rng = np.random.default_rng(seed)
    for name in ("ownership_conv", "score"):
        bias = model.get_layer(name).bias
        bias.assign(rng.normal(0, 0.5, bias.shape).astype(np.float32))
    return model


@pytest.mark.parametrize("backend", ["onnxruntime", "tensorflow"])
@pytest.mark.parametrize("board_size, global_pooling", [(5, False), (7, True)])
def test_ownership_and_score_match_the_keras_model(backend, board_size, global_pooling):
    model = aux_model(board_size, board_size, global_pooling)
    net = CompiledNet(model, 4, backend=backend)
    assert net.has_aux_heads
    probe = planes(9, seed=2, board_size=board_size)      # more rows than the batch size
    logits, score = (np.asarray(t) for t in model(probe, training=False)[2:])
    ownership, points = net.ownership(probe)
    assert ownership.shape == (9, board_size, board_size) and points.shape == (9,)
    assert ownership.dtype == np.float32 and points.dtype == np.float32
    shape = model_shape(model)
    value_depth = accumulation_depths(shape)[1]
    assert_head_close(ownership, np.tanh(logits), trunk_depth(shape) + shape.filters, tanh=True)
    assert_head_close(points, score[:, 0] * board_size ** 2, value_depth)
    assert np.abs(ownership).max() <= 1.0
    # The search's outputs are unchanged beside it.
    policy, value = net(probe)
    keras_logits, keras_value = (np.asarray(t) for t in model(probe, training=False)[:2])
    keras_policy = np.exp(keras_logits - keras_logits.max(axis=1, keepdims=True))
    assert_same_net_answers(policy, value, keras_policy / keras_policy.sum(axis=1, keepdims=True),
                            keras_value[:, 0], shape)
    # And a search that reads the score gets all three in one pass.
    policy_2, value_2, points_2 = net.with_score(probe)
    assert_same_net_answers(policy_2, value_2, policy, value, shape)
    assert_head_close(points_2, score[:, 0] * board_size ** 2, value_depth)


def test_ownership_follows_weight_changes_and_is_refused_without_the_heads():
    model = aux_model(1, BOARD)
    net = CompiledNet(model, 4, backend="onnxruntime")
    probe = planes(3, seed=5)
    before = net.ownership(probe)[0]
    kernel = model.get_layer("ownership_conv").kernel
    kernel.assign(kernel.numpy() * -1)
    weights_changed(model)
    after = net.ownership(probe)[0]
    assert not np.allclose(before, after)
    shape = model_shape(model)
    assert_head_close(after, np.tanh(np.asarray(model(probe, training=False)[2])),
                      trunk_depth(shape) + shape.filters, tanh=True)
    for backend in ("onnxruntime", "tensorflow"):
        plain = CompiledNet(model_with_statistics(), 4, backend=backend)
        assert not plain.has_aux_heads
        with pytest.raises(ValueError, match="no ownership head"):
            plain.ownership(planes(1))
        with pytest.raises(ValueError, match="no score head"):
            plain.with_score(planes(1))


def _thread_affinities() -> dict[int, set[int]]:
    affinities = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            status = (task / "status").read_text()
        except FileNotFoundError:   # the thread ended meanwhile
            continue
        line = next(row for row in status.splitlines() if row.startswith("Cpus_allowed_list:"))
        cores = set()
        for part in line.split(":", 1)[1].strip().split(","):
            low, _, high = part.partition("-")
            cores.update(range(int(low), int(high or low) + 1))
        affinities[int(task.name)] = cores
    return affinities


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or not Path("/proc/self/task").is_dir()
                    or len(os.sched_getaffinity(0)) < 2, reason="needs Linux and two cores")
def test_onnxruntime_threads_stay_on_the_cores_the_process_may_use():
    # A process confined to one core (taskset): ONNX Runtime used to pin a thread of its own
    # to each of the machine's cores regardless.
    # On one core the session needs no thread of its own; any it starts must stay there.
    allowed = os.sched_getaffinity(0)
    core = min(allowed)
    model = model_with_statistics()
    before = set(_thread_affinities())
    os.sched_setaffinity(0, {core})   # this thread; the threads it starts inherit it
    try:
        net = CompiledNet(model, 8, backend="onnxruntime")
        net(planes(8))
    finally:
        os.sched_setaffinity(0, allowed)
    new = {tid: cores for tid, cores in _thread_affinities().items() if tid not in before}
    assert all(cores == {core} for cores in new.values()), new
