"""architectures/: the residual net, compiled inference and the training step."""
import random

import numpy as np
import pytest

from architectures.quiet_tensorflow import load_keras, load_tensorflow
from architectures import CompiledNet, Trainer, build_model, mask_policy, seed_initial_weights
from float_tolerance import accumulation_depths, assert_same_net_answers, gamma, model_shape

keras = load_keras()

BOARD = 5
PLANES = 6          # GoBatch.features(history=1): 2 * (1 + 1) + 2
ACTIONS = BOARD * BOARD + 1


def tiny_model(seed=0, blocks=1, filters=8, board_size=BOARD):
    seed_initial_weights(seed)
    return build_model(board_size, PLANES, blocks=blocks, filters=filters)


def random_planes(batch, seed=0, board_size=BOARD):
    """Binary stone planes that never overlap, a side-to-move plane and the ones plane."""
    rng = np.random.default_rng(seed)
    planes = np.zeros((batch, board_size, board_size, PLANES), np.float32)
    for history in range(2):
        stones = rng.integers(-1, 2, (batch, board_size, board_size))
        planes[..., 2 * history] = stones == 1
        planes[..., 2 * history + 1] = stones == -1
    planes[..., 4] = rng.integers(0, 2, (batch, 1, 1))
    planes[..., 5] = 1
    return planes


def training_batch(batch, seed=0):
    rng = np.random.default_rng(seed + 100)
    planes = random_planes(batch, seed)
    # Peaked visit distributions, like a search's, so the targets are learnable.
    policy = rng.dirichlet(np.full(ACTIONS, 0.3), batch).astype(np.float32)
    value = rng.choice([-1.0, 1.0], batch).astype(np.float32)
    return planes, policy, value


def all_weights(model):
    return [np.array(w) for w in model.get_weights()]


def test_initial_weights_follow_the_seed_whatever_was_drawn_before():
    first = all_weights(tiny_model(seed=5))
    np.random.random(3), random.random()      # other draws in between
    keras.random.normal((2,))
    again, other = all_weights(tiny_model(seed=5)), all_weights(tiny_model(seed=6))
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    kernels = [index for index, w in enumerate(tiny_model().weights) if w.path.endswith("kernel")]
    assert all(not np.array_equal(first[index], other[index]) for index in kernels)


def test_output_shapes_dtypes_and_ranges():
    model = tiny_model(blocks=2)
    assert [tuple(o.shape) for o in model.outputs] == [(None, ACTIONS), (None, 1)]
    net = CompiledNet(model, batch_size=16)
    policy, value = net(random_planes(11))
    assert policy.shape == (11, ACTIONS) and value.shape == (11,)
    assert policy.dtype == np.float32 and value.dtype == np.float32
    assert (policy >= 0).all()
    np.testing.assert_allclose(policy.sum(axis=1), 1.0, atol=gamma(2 * ACTIONS))
    assert (np.abs(value) <= 1).all()
    # The compiled function agrees with the Keras model in inference mode.
    logits, reference_value = model(random_planes(11), training=False)
    reference_policy = keras.ops.convert_to_numpy(keras.ops.softmax(logits, axis=-1))
    assert_same_net_answers(policy, value, reference_policy,
                            keras.ops.convert_to_numpy(reference_value)[:, 0], model_shape(model))


def randomise_batch_norm(model, seed):
    rng = np.random.default_rng(seed)
    for layer in model.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            width = layer.gamma.shape[0]
            layer.gamma.assign(rng.uniform(0.5, 1.5, width).astype(np.float32))
            layer.beta.assign(rng.normal(0, 0.3, width).astype(np.float32))
            layer.moving_mean.assign(rng.normal(0, 0.5, width).astype(np.float32))
            layer.moving_variance.assign(rng.uniform(0.2, 2.0, width).astype(np.float32))


@pytest.mark.parametrize("blocks, global_pooling", [(0, False), (1, False), (3, False),
                                                    (2, True)])
def test_folded_batch_norm_matches_the_keras_model(blocks, global_pooling):
    seed_initial_weights(blocks)
    model = build_model(BOARD, PLANES, blocks=blocks, filters=16, global_pooling=global_pooling)
    assert ("gpool_dense" in {layer.name for layer in model.layers}) == global_pooling
    randomise_batch_norm(model, seed=blocks)
    planes = random_planes(12, seed=blocks)
    folded = CompiledNet(model, batch_size=12)
    unfolded = CompiledNet(model, batch_size=12, fold_batch_norm=False)
    assert folded.fold_batch_norm and not unfolded.fold_batch_norm
    logits, value = model(planes, training=False)
    expected_policy = keras.ops.convert_to_numpy(keras.ops.softmax(logits, axis=-1))
    expected_value = keras.ops.convert_to_numpy(value)[:, 0]
    for net in (folded, unfolded):
        policy, value = net(planes)
        assert_same_net_answers(policy, value, expected_policy, expected_value,
                                model_shape(model))


def test_folding_refuses_a_foreign_model():
    inputs = keras.Input((BOARD, BOARD, PLANES))
    flat = keras.layers.Flatten()(inputs)
    model = keras.Model(inputs, [keras.layers.Dense(ACTIONS)(flat),
                                 keras.layers.Dense(1, activation="tanh")(flat)])
    with pytest.raises(ValueError, match="fold_batch_norm"):
        CompiledNet(model, batch_size=4)
    policy, value = CompiledNet(model, batch_size=4, fold_batch_norm=False)(random_planes(3))
    assert policy.shape == (3, ACTIONS) and value.shape == (3,)


def test_partial_and_oversized_batches_match_full_batches_without_retracing():
    model = tiny_model()
    net = CompiledNet(model, batch_size=8)
    planes = random_planes(24, seed=3)
    full = [net(planes[start:start + 8]) for start in (0, 8, 16)]
    full_policy = np.concatenate([policy for policy, _ in full])
    full_value = np.concatenate([value for _, value in full])
    for rows in (1, 3, 7, 8, 9, 17, 24):
        policy, value = net(planes[:rows])
        assert_same_net_answers(policy, value, full_policy[:rows], full_value[:rows],
                                model_shape(model))
    empty_policy, empty_value = net(planes[:0])
    assert empty_policy.shape == (0, ACTIONS) and empty_value.shape == (0,)
    # float64 input is cast, not a second trace: the same numbers as float32's.
    policy, value = net(planes.astype(np.float64)[:5])
    assert_same_net_answers(policy, value, full_policy[:5], full_value[:5], model_shape(model))
    assert net.tracing_count == 1
    with pytest.raises(ValueError):
        net(np.zeros((4, BOARD + 1, BOARD + 1, PLANES), np.float32))


def test_inference_sees_training_updates():
    model = tiny_model()
    net = CompiledNet(model, batch_size=8)
    trainer = Trainer(model, batch_size=8, learning_rates=[(0, 0.1)])
    planes, policy_targets, value_targets = training_batch(8)
    before = net(planes)
    for _ in range(3):
        trainer.train_step(planes, policy_targets, value_targets)
    after = net(planes)
    assert not np.allclose(before[0], after[0])
    logits, value = model(planes, training=False)
    assert_same_net_answers(*after, keras.ops.convert_to_numpy(keras.ops.softmax(logits)),
                            keras.ops.convert_to_numpy(value)[:, 0], model_shape(model))
    assert net.tracing_count == 1 and trainer.tracing_count == 1


def test_tiny_net_overfits_fixed_samples():
    model = tiny_model(seed=1)
    trainer = Trainer(model, batch_size=8, learning_rates=[(0, 0.05)], momentum=0.9)
    planes, policy_targets, value_targets = training_batch(8, seed=1)
    # Cross-entropy cannot fall below the targets' own entropy; compare the excess (KL).
    target_entropy = -np.mean(np.sum(policy_targets * np.log(policy_targets + 1e-30), axis=1))
    history = [trainer.train_step(planes, policy_targets, value_targets) for _ in range(200)]
    first, last = history[0], history[-1]
    assert not any(stats["skipped"] for stats in history)
    assert last["loss_policy"] - target_entropy < 0.25 * (first["loss_policy"] - target_entropy)
    assert first["loss_value"] > 0.3 and last["loss_value"] < 0.05
    assert last["loss_total"] < 0.5 * first["loss_total"]
    assert trainer.step == 200 and trainer.skipped_steps == 0


def test_l2_term_is_the_kernel_regularizer_sum():
    model = tiny_model()
    trainer = Trainer(model, batch_size=4)
    kernels = [w for w in model.weights if w.path.endswith("/kernel")]
    assert len(kernels) == 1 + 2 + 2 + 3  # stem, 2 block convs, 2 head convs, 3 dense
    expected = 1e-4 * sum(float(np.sum(np.square(w.numpy()))) for w in kernels)
    stats = trainer.train_step(*training_batch(4))
    # Sums of squares over every kernel weight, and of three losses, in float32.
    assert stats["loss_l2"] == pytest.approx(expected, rel=gamma(sum(int(np.prod(w.shape)) for w in kernels)))
    assert stats["loss_total"] == pytest.approx(
        stats["loss_policy"] + stats["loss_value"] + stats["loss_l2"], rel=gamma(3))


def test_non_finite_steps_are_skipped_and_leave_weights_untouched():
    """Each kind of poison in turn, on one trainer (one trace): the step is skipped, weights,
    moving averages and optimizer state stay as they were, and a clean step then trains."""
    model = tiny_model()
    trainer = Trainer(model, batch_size=8, learning_rates=[(0, 0.05)])
    planes, policy_targets, value_targets = training_batch(8)
    trainer.train_step(planes, policy_targets, value_targets)
    for skipped, poison in enumerate(["planes_nan", "policy_nan", "value_inf", "planes_huge"], 1):
        before_weights = all_weights(model)
        before_optimizer = [v.numpy() for v in trainer.optimizer.variables]
        bad_planes, bad_policy, bad_value = (planes.copy(), policy_targets.copy(),
                                             value_targets.copy())
        if poison == "planes_nan":
            bad_planes[3, 2, 2, 0] = np.nan
        elif poison == "policy_nan":
            bad_policy[0, 0] = np.nan
        elif poison == "value_inf":
            bad_value[5] = np.inf
        else:
            bad_planes[1] = 3e38
        stats = trainer.train_step(bad_planes, bad_policy, bad_value)
        assert stats["skipped"], poison
        assert (trainer.skipped_steps, trainer.step) == (skipped, 2 * skipped), poison
        for before, after in zip(before_weights, all_weights(model)):
            np.testing.assert_array_equal(before, after, err_msg=poison)   # moving averages too
        for before, variable in zip(before_optimizer, trainer.optimizer.variables):
            np.testing.assert_array_equal(before, variable.numpy(), err_msg=poison)
        stats = trainer.train_step(planes, policy_targets, value_targets)
        assert not stats["skipped"] and np.isfinite(stats["loss_total"]), poison
        assert all(np.isfinite(w).all() for w in all_weights(model)), poison


def test_learning_rate_schedule_is_piecewise_constant_in_steps():
    trainer = Trainer(tiny_model(), batch_size=4, learning_rates=[(0, 0.1), (2, 0.01), (4, 0.001)])
    batch = training_batch(4)
    rates = [trainer.train_step(*batch)["learning_rate"] for _ in range(6)]
    np.testing.assert_allclose(rates, [0.1, 0.1, 0.01, 0.01, 0.001, 0.001], rtol=1e-6)
    assert [trainer.learning_rate_at(step) for step in range(6)] == pytest.approx(rates)
    for bad in ([], [(1, 0.1)], [(0, 0.1), (0, 0.2)], [(0, -0.1)]):
        with pytest.raises(ValueError):
            Trainer(tiny_model(), batch_size=4, learning_rates=bad)


def test_a_pass_takes_the_steps_of_as_many_calls_and_keeps_them_when_a_batch_is_refused():
    """Trainer.train_steps against train_step call by call, from the same weights: the same
    figures (a non-finite batch skipped, the schedule's rate dropping midway) and the same
    weights, moving averages, optimizer state and counters, bit for bit. A batch refused
    midway (a wrong shape) raises, and the steps given before it stay taken."""
    batches = [training_batch(8, seed=seed) for seed in range(6)]
    batches[2][0][1, 1, 1, 0] = np.nan
    passed = Trainer(tiny_model(seed=5), batch_size=8, learning_rates=[(0, 0.05), (2, 0.01)])
    stepwise = Trainer(tiny_model(seed=5), batch_size=8, learning_rates=[(0, 0.05), (2, 0.01)])

    def same_state():
        assert (passed.step, passed.skipped_steps) == (stepwise.step, stepwise.skipped_steps)
        for got, want in zip(passed.state_dict().values(), stepwise.state_dict().values()):
            np.testing.assert_array_equal(got, want)

    figures = passed.train_steps(batches[:4])
    expected = [stepwise.train_step(*batch) for batch in batches[:4]]
    assert repr(figures) == repr(expected)          # NaN losses of the skipped step as well
    assert [f["skipped"] for f in figures] == [False, False, True, False]
    assert [f["learning_rate"] for f in figures] == pytest.approx([0.05, 0.05, 0.01, 0.01])
    same_state()

    batches[5][1][0, 0] = np.inf

    def drawn():
        yield batches[4]
        yield batches[5]                            # skipped, and counted as skipped
        yield training_batch(4)                     # not the trainer's batch size
    with pytest.raises(ValueError, match="planes must have shape"):
        passed.train_steps(drawn())
    for batch in batches[4:]:
        stepwise.train_step(*batch)
    assert (passed.step, passed.skipped_steps) == (6, 2)
    same_state()


def keras_sgd_steps(model, batches, rate, momentum, nesterov) -> None:
    """The reference: Keras' own SGD applied eagerly, on a tape around the model's call (its
    batch norm updating its moving statistics as it goes), to the cross-entropy, squared
    error and L2 terms the module docstring defines."""
    tf = load_tensorflow()
    optimizer = keras.optimizers.SGD(rate, momentum=momentum, nesterov=nesterov)
    for planes, policy, value in batches:
        with tf.GradientTape() as tape:
            logits, predicted = model(planes, training=True)
            loss = (-tf.reduce_mean(tf.reduce_sum(policy * tf.nn.log_softmax(logits), axis=-1))
                    + tf.reduce_mean(tf.square(predicted[:, 0] - value)) + tf.add_n(model.losses))
        optimizer.apply(tape.gradient(loss, model.trainable_variables), model.trainable_variables)


def test_trainers_of_one_net_share_a_compiled_step_and_each_takes_keras_sgds_steps():
    """Trainers of the same net and settings run one compiled step, each on its own weights;
    other settings get a step of their own. Every one moves its weights (batch-norm
    statistics included) as Keras' SGD does, to the round-off of the gradients' sums."""
    batches = [training_batch(8, seed=seed) for seed in (3, 4)]
    shape = model_shape(tiny_model())
    points = 8 * BOARD * BOARD
    bound = len(batches) * gamma(points + 2 * max(accumulation_depths(shape)))
    trainers = {}
    for label, seed, momentum, nesterov in (("first", 1, 0.9, False), ("second", 2, 0.9, False),
                                            ("nesterov", 3, 0.9, True),
                                            ("no momentum", 4, 0.0, False)):
        trainer = Trainer(tiny_model(seed=seed), batch_size=8, learning_rates=[(0, 0.05)],
                          momentum=momentum, nesterov=nesterov)
        reference = tiny_model(seed=seed)
        before = all_weights(reference)
        if label == "first":
            trainer.train_steps(batches)           # as the loop's passes take them
        else:
            for batch in batches:
                trainer.train_step(*batch)
        keras_sgd_steps(reference, batches, 0.05, momentum, nesterov)
        for name, got, want, start in zip([w.path for w in reference.weights],
                                          all_weights(trainer.model), all_weights(reference),
                                          before):
            allowed = (bound * np.abs(want - start).max(initial=0)
                       + 4 * np.finfo(np.float32).eps * np.abs(want).max(initial=0))
            assert np.abs(got - want).max(initial=0) <= allowed, (label, name)
        trainers[label] = trainer
    assert trainers["first"]._shared is trainers["second"]._shared
    assert trainers["second"].tracing_count == 1
    assert len({id(trainer._shared) for trainer in trainers.values()}) == 3


def test_state_round_trip_is_exact(tmp_path):
    schedule = [(0, 0.05), (4, 0.02)]
    trainer = Trainer(tiny_model(seed=1), batch_size=8, learning_rates=schedule, nesterov=True)
    batches = [training_batch(8, seed=seed) for seed in range(5)]
    for batch in batches[:3]:
        trainer.train_step(*batch)
    poisoned = batches[3][0].copy()
    poisoned[0, 0, 0, 0] = np.nan
    trainer.train_step(poisoned, *batches[3][1:])
    path = tmp_path / "state.npz"
    np.savez(path, **trainer.state_dict())

    fresh = Trainer(tiny_model(seed=2), batch_size=8, learning_rates=schedule, nesterov=True)
    probe = random_planes(8, seed=9)
    assert not np.array_equal(CompiledNet(fresh.model, 8)(probe)[0],
                              CompiledNet(trainer.model, 8)(probe)[0])
    with np.load(path) as state:
        fresh.load_state_dict(state)
    assert (fresh.step, fresh.skipped_steps) == (4, 1)
    for a, b in zip(CompiledNet(trainer.model, 8)(probe), CompiledNet(fresh.model, 8)(probe)):
        np.testing.assert_array_equal(a, b)
    original_stats = trainer.train_step(*batches[4])
    fresh_stats = fresh.train_step(*batches[4])
    assert original_stats == fresh_stats and original_stats["learning_rate"] == pytest.approx(0.02)
    for a, b in zip(all_weights(trainer.model), all_weights(fresh.model)):
        np.testing.assert_array_equal(a, b)
    for key, value in trainer.state_dict().items():
        np.testing.assert_array_equal(value, fresh.state_dict()[key])


def test_loading_a_different_net_shape_is_refused():
    state = Trainer(tiny_model(filters=8), batch_size=4).state_dict()
    other = Trainer(tiny_model(filters=16), batch_size=4)
    with pytest.raises(ValueError, match="net shape"):
        other.load_state_dict(state)
    with pytest.raises(ValueError, match="does not match"):
        other.load_state_dict({key: value for key, value in state.items() if key != "trainer.step"})


def test_train_step_rejects_wrong_shapes():
    trainer = Trainer(tiny_model(), batch_size=4)
    planes, policy_targets, value_targets = training_batch(4)
    with pytest.raises(ValueError):
        trainer.train_step(planes[:3], policy_targets[:3], value_targets[:3])
    with pytest.raises(ValueError):
        trainer.train_step(planes, policy_targets[:, :-1], value_targets)


def test_mask_policy_renormalises_over_legal_moves():
    policy = np.array([[0.5, 0.2, 0.2, 0.1], [1.0, 0.0, 0.0, 0.0]], np.float32)
    legal = np.array([[False, True, True, True], [False, True, False, True]])
    masked = mask_policy(policy, legal)
    np.testing.assert_allclose(masked[0], [0, 0.4, 0.4, 0.2], rtol=1e-6)
    np.testing.assert_allclose(masked[1], [0, 0.5, 0, 0.5], rtol=1e-6)   # underflow -> uniform
    assert masked.dtype == np.float32
    with pytest.raises(ValueError):
        mask_policy(policy, np.zeros_like(legal))


def test_several_compiled_shapes_pad_to_the_smallest_that_fits():
    model = build_model(5, 6, blocks=1, filters=8)
    one = CompiledNet(model, batch_size=8)
    several = CompiledNet(model, batch_size=8, shapes=4)
    assert several.compiled_sizes == [2, 4, 6, 8]
    planes = (np.random.default_rng(0).random((19, 5, 5, 6)) < 0.4).astype(np.float32)
    for rows in (1, 2, 3, 7, 8, 9, 19):
        expected, got = one(planes[:rows]), several(planes[:rows])
        assert_same_net_answers(*got, *expected, model_shape(model))
    assert several.tracing_count == 1
    with pytest.raises(ValueError, match="shapes"):
        CompiledNet(model, batch_size=8, shapes=9)


def test_auxiliary_losses_match_a_numpy_reference_and_fold_with_the_policy_and_value():
    seed_initial_weights(3)
    model = build_model(BOARD, PLANES, blocks=1, filters=8, aux_heads=True)
    trainer = Trainer(model, batch_size=6, ownership_loss_weight=1.5, score_loss_weight=0.7)
    planes, policy, value = training_batch(6, seed=2)
    rng = np.random.default_rng(5)
    ownership = rng.integers(-1, 2, (6, BOARD, BOARD)).astype(np.float32)
    score = rng.normal(0, 0.3, 6).astype(np.float32)
    final = np.array([1, 1, 0, 1, 0, 1], np.float32)
    # The forward pass the step takes (training mode: batch statistics), before its update.
    outputs = [np.array(o) for o in model(planes, training=True)]
    assert [o.shape for o in outputs] == [(6, ACTIONS), (6, 1), (6, BOARD, BOARD), (6, 1)]
    stats = trainer.train_step(planes, policy, value, ownership, score, final)
    owned = 1 / (1 + np.exp(-2.0 * outputs[2].astype(np.float64)))     # (1 + tanh y) / 2
    target = (1 + ownership) / 2
    cross_entropy = -(target * np.log(owned) + (1 - target) * np.log(1 - owned))
    chosen = final == 1
    expected_ownership = cross_entropy.mean(axis=(1, 2))[chosen].mean()
    expected_score = np.square(outputs[3][:, 0] - score)[chosen].mean()
    assert stats["loss_ownership"] == pytest.approx(expected_ownership, rel=1e-4)
    assert stats["loss_score"] == pytest.approx(expected_score, rel=1e-4)
    assert stats["loss_total"] == pytest.approx(
        stats["loss_policy"] + stats["loss_value"] + stats["loss_l2"]
        + 1.5 * expected_ownership + 0.7 * expected_score, rel=1e-4)
    with pytest.raises(ValueError, match="auxiliary heads"):
        trainer.train_step(planes, policy, value)
    # Play reads policy and value only: folded inference still matches the model.
    net = CompiledNet(model, batch_size=6)
    keras_policy, keras_value = (np.array(o) for o in model(planes, training=False)[:2])
    folded_policy, folded_value = net(planes)
    assert_same_net_answers(folded_policy, folded_value, np.exp(keras_policy) / np.exp(
        keras_policy).sum(axis=1, keepdims=True), keras_value[:, 0], model_shape(model))
def test_the_device_path_pads_and_chunks_like_the_host_path():
    """The path GPU planes take (DLPack into TensorFlow, padding and chunking on the device,
    DeviceTensor results taken back by DLPack) runs here on the CPU device: its results must
    equal the host path's for short, exact and oversized batches."""
    from architectures import DeviceTensor
    model = tiny_model(seed=3)
    net = CompiledNet(model, batch_size=8, shapes=2, backend="tensorflow")
    for rows in (0, 1, 3, 4, 8, 13, 20):
        planes = random_planes(rows, seed=rows)
        policy, value = net(planes)
        device_policy, device_value = net._call_on_device(aligned(planes))
        assert isinstance(device_policy, DeviceTensor) and len(device_value) == rows
        assert_same_net_answers(np.from_dlpack(device_policy), np.from_dlpack(device_value),
                                policy, value, model_shape(model))
    with pytest.raises(ValueError, match="planes must be"):
        net._call_on_device(aligned(random_planes(2, board_size=BOARD + 1)))


def aligned(array: np.ndarray) -> np.ndarray:
    """A copy at a 64-byte boundary: TensorFlow aborts on a less aligned imported buffer (a
    GPU allocator's blocks always are)."""
    raw = np.empty(array.nbytes + 64, np.uint8)
    start = -raw.ctypes.data % 64
    copy = raw[start:start + array.nbytes].view(array.dtype).reshape(array.shape)
    copy[...] = array
    return copy


def test_host_arrays_never_take_the_device_path():
    from architectures.inference import on_accelerator
    assert not on_accelerator(random_planes(2))
    assert not on_accelerator([[0.0]])
