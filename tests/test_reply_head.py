"""The opponent's reply head (Config.reply_head): targets, loss, storage and warm start.

- Self-play: each position's reply target is the policy target of its game's next position,
  rows of 0 for a game's last; the games are cut apart by the records' move counts.
- The replay buffer turns a sample's reply target with the same symmetry as its policy.
- The trainer's loss_reply against a NumPy cross-entropy of the model's own reply logits,
  over the samples that have a target only, and its share of loss_total.
- A warm start from a net without the head plays exactly as that net; a model file with the
  head is read back with its shape (net_shape) and answers as its Keras model without
  TensorFlow (ArrayNet).
- The loop: a tiny run with the head writes reply targets in its chunks, reports loss_reply,
  and resumes.
"""
from __future__ import annotations

import numpy as np
import pytest

from float_tolerance import assert_same_net_answers
from games.selfplay import SelfPlay
from training.config import Config
from training.replay_buffer import ReplayBuffer

N = 5
ACTIONS = N * N + 1


def uniform_net(planes):
    k = len(planes)
    return np.full((k, ACTIONS), 1.0 / ACTIONS, np.float32), np.zeros(k, np.float32)


def test_each_positions_reply_is_the_next_positions_policy_target_in_its_game():
    config = Config(board_size=N, num_games=4, simulations=8, temperature_moves=2,
                    max_moves=30, resign_threshold=-1.0)
    batch = SelfPlay(config, uniform_net, seed=5, replies=True).play(120)
    assert batch.reply.shape == batch.policy.shape
    # Without the head (and not asked for) the targets are not built: rows of width 0.
    assert SelfPlay(config, uniform_net, seed=5).play(20).reply.shape[1] == 0
    start = 0
    for game in batch.games:           # every search full: a game's positions are contiguous
        length = game.full_searches
        assert length == len(game.moves)
        policy = batch.policy[start:start + length]
        reply = batch.reply[start:start + length]
        np.testing.assert_array_equal(reply[:-1], policy[1:])
        assert not reply[-1].any()
        start += length
    assert start == batch.positions


def test_a_sampled_reply_turns_with_its_positions_symmetry():
    buffer = ReplayBuffer(64, N, 3, reply=True)
    rng = np.random.default_rng(0)
    count = 40
    planes = np.zeros((count, N, N, 3), np.uint8)
    points = rng.integers(0, N * N, count)
    planes[np.arange(count), points // N, points % N, 0] = 1     # a marker stone
    policy = np.zeros((count, ACTIONS), np.float32)
    policy[np.arange(count), points] = 1
    reply = np.zeros((count, ACTIONS), np.float32)
    reply[np.arange(count), points] = 1
    reply[::5] = 0                                                 # some without a reply
    buffer.add(planes, policy, np.zeros(count, np.float32), reply=reply)
    sample = buffer.sample(200, rng)
    marker = sample.planes[..., 0].reshape(200, -1).argmax(axis=1)
    has = sample.reply.sum(axis=1) > 0
    assert 0 < has.sum() < 200
    assert (sample.reply[has].argmax(axis=1) == marker[has]).all()
    assert (sample.policy.argmax(axis=1) == marker).all()
    # A buffer that keeps none hands out rows of 0.
    plain = ReplayBuffer(64, N, 3)
    plain.add(planes, policy, np.zeros(count, np.float32), reply=reply)
    assert not plain.sample(8, rng).reply.any()


@pytest.fixture(scope="module")
def tf():
    return pytest.importorskip("tensorflow")


def test_the_reply_loss_is_the_cross_entropy_over_samples_with_a_target(tf):
    from architectures import Trainer, build_model
    model = build_model(N, 4, 1, 8, aux_heads=True, reply_head=True)
    trainer = Trainer(model, batch_size=16, ownership_loss_weight=1.5, score_loss_weight=1.0,
                      reply_loss_weight=0.3)
    rng = np.random.default_rng(1)
    planes = rng.integers(0, 2, (16, N, N, 4)).astype(np.float32)
    policy = rng.dirichlet(np.ones(ACTIONS), 16).astype(np.float32)
    reply = rng.dirichlet(np.ones(ACTIONS), 16).astype(np.float32)
    reply[[2, 7, 11]] = 0
    value = rng.choice([-1.0, 1.0], 16).astype(np.float32)
    ownership = rng.choice([-1.0, 1.0], (16, N, N)).astype(np.float32)
    score, final = rng.normal(0, 0.2, 16).astype(np.float32), np.ones(16, np.float32)
    logits = model(planes, training=True)[4].numpy().astype(np.float64)
    log_softmax = logits - logits.max(axis=1, keepdims=True)
    log_softmax -= np.log(np.exp(log_softmax).sum(axis=1, keepdims=True))
    has = reply.sum(axis=1) > 0
    expected = -(reply * log_softmax).sum(axis=1)[has].mean()
    stats = trainer.train_step(planes, policy, value, ownership, score, final, reply=reply)
    assert stats["loss_reply"] == pytest.approx(expected, rel=1e-4)
    assert stats["loss_total"] == pytest.approx(
        stats["loss_policy"] + stats["loss_value"] + stats["loss_l2"]
        + 1.5 * stats["loss_ownership"] + stats["loss_score"] + 0.3 * stats["loss_reply"],
        rel=1e-5)
    with pytest.raises(ValueError, match="reply"):
        trainer.train_step(planes, policy, value, ownership, score, final)


def test_reply_head_needs_the_auxiliary_heads():
    with pytest.raises(ValueError, match="reply_head needs aux_heads"):
        Config(board_size=N, reply_head=True).validate()


def test_a_warm_start_adds_the_head_and_plays_as_before_and_the_file_reads_back(tf, tmp_path):
    from architectures.array_net import ArrayNet, keras_named_weights
    from training.net_shape import net_shape
    from training.nets import build_trainer, init_weights, open_net, save_model_file
    source_config = Config(board_size=N, history=1, blocks=1, filters=8, value_hidden=16,
                           aux_heads=True, train_batch_size=8)
    source = build_trainer(source_config)
    rng = np.random.default_rng(2)
    for variable in source.model.weights:      # weights that are not an initialiser's
        drawn = rng.normal(0, 0.3, variable.shape).astype(np.float32)
        variable.assign(np.abs(drawn) + 0.5 if "variance" in variable.path else drawn)
    source_file = save_model_file(tmp_path / "source.npz", source_config, source.state_dict(),
                                  {"run": "test"})
    config = source_config.overridden(reply_head=True)
    grown = build_trainer(config)
    messages = []
    init_weights(grown, config, source_file, log=messages.append)
    assert any("no opponent's reply head" in message for message in messages)
    planes = rng.integers(0, 2, (6, N, N, config.input_planes)).astype(np.float32)
    before = source.model(planes, training=False)
    after = grown.model(planes, training=False)
    assert len(after) == 5
    for old, new in zip(before, after[:4]):
        np.testing.assert_array_equal(old.numpy(), new.numpy())

    grown_file = save_model_file(tmp_path / "grown.npz", config, grown.state_dict(),
                                 {"run": "test"})
    arrays = dict(np.load(grown_file))
    shape = net_shape(arrays)
    assert shape["reply_head"] and shape["aux_heads"]
    opened = open_net(grown_file)
    assert opened.config.reply_head
    array_net = ArrayNet(keras_named_weights(grown.model), config)
    policy, value = array_net(planes)[:2]
    logits, keras_value = grown.model(planes, training=False)[:2]
    assert np.isfinite(policy).all() and np.isfinite(value).all()
    assert_same_net_answers(policy, value, tf.nn.softmax(logits).numpy(),
                            keras_value.numpy().reshape(-1), config)


def test_the_loop_trains_the_head_stores_its_targets_and_resumes(tf, tmp_path):
    from loop_runs import metrics, read_chunk, run_main
    run = tmp_path / "run"
    code, _, err = run_main(run, "--aux-heads", "true", "--reply-head", "true",
                            "--iterations", "2")
    assert code == 0, err
    records = metrics(run)
    assert all(record["loss_reply"] > 0 for record in records if "loss_policy" in record)
    chunk = read_chunk(run, 1)
    reply = chunk["reply"].astype(np.float64)
    sums = reply.sum(axis=1)
    assert reply.shape == chunk["policy"].shape
    assert ((np.abs(sums - 1) < 3e-3) | (sums == 0)).all() and (sums == 0).any()
    code, _, err = run_main(run, "--iterations", "3")
    assert code == 0, err
    assert metrics(run)[-1]["iteration"] == 3
