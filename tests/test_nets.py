"""Opening nets (training/nets.py): a run's checkpoint and a model file give the net that the
trainer's own weights give, and every source that cannot be played is one clear error."""
from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from float_tolerance import assert_same_net_answers  # noqa: E402
from training.config import PRESETS  # noqa: E402
from training.nets import (CONFIG_KEY, INFO_KEY, NetOpenError, build_trainer,  # noqa: E402
                           model_info, open_array_net, open_net, read_config, save_model_file)
from training.run_directory import RunDirectory  # noqa: E402

CONFIG = PRESETS["tiny"].overridden(seed=5)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A run directory with checkpoints of iterations 1 and 2 holding different weights, and
    the trainer state of each (the weights are perturbed by hand, no training needed)."""
    path = tmp_path_factory.mktemp("nets") / "run"
    run = RunDirectory(path, log=lambda message: None)
    config = run.prepare(CONFIG)
    trainer = build_trainer(config)
    states = {}
    rng = np.random.default_rng(0)
    for iteration in (1, 2):
        for variable in trainer.model.weights:
            variable.assign(variable.numpy() + rng.normal(0, 0.1, variable.shape).astype(np.float32))
        states[iteration] = trainer.state_dict()
        counters = {"iteration": iteration, "games": 0, "positions": 0, "train_steps": 0}
        run.save_checkpoint(iteration, states[iteration], counters, net=config, keep=3)
    return path, states


def reference_outputs(state, planes):
    """The net of `state` evaluated straight through Keras, without open_net."""
    trainer = build_trainer(CONFIG)
    trainer.load_state_dict(state)
    logits, value = trainer.model(planes, training=False)
    policy = np.exp(logits - np.max(logits, axis=1, keepdims=True))
    return policy / policy.sum(axis=1, keepdims=True), np.reshape(value, -1)


def planes_batch(count=3):
    n, c = CONFIG.board_size, CONFIG.input_planes
    return (np.random.default_rng(1).random((count, n, n, c)) < 0.3).astype(np.float32)


def test_a_run_opens_at_its_newest_or_a_chosen_checkpoint(trained):
    path, states = trained
    planes = planes_batch()
    for checkpoint, iteration in ((None, 2), (1, 1)):
        opened = open_net(path, checkpoint=checkpoint, batch_size=4)
        assert opened.iteration == iteration and opened.label == f"run iteration {iteration}"
        assert opened.config == CONFIG
        policy, value = opened.net(planes)
        want_policy, want_value = reference_outputs(states[iteration], planes)
        assert_same_net_answers(policy, value, want_policy, want_value, CONFIG)


def test_a_model_file_plays_like_the_checkpoint_it_came_from(trained, tmp_path):
    path, states = trained
    model = save_model_file(tmp_path / "tiny.npz", CONFIG, states[2], {"run": "run", "iteration": 2})
    assert model_info(model) == {"iteration": 2, "run": "run"}
    assert read_config(model)[0] == CONFIG
    opened = open_net(model, batch_size=4)
    assert opened.iteration is None and opened.label == "tiny.npz"
    planes = planes_batch()
    want_policy, want_value = reference_outputs(states[2], planes)
    policy, value = opened.net(planes)
    assert_same_net_answers(policy, value, want_policy, want_value, CONFIG)
    # Only the model's weights travel: no optimizer state, no counters.
    with np.load(model) as archive:
        assert all(name.startswith("model.") or name.startswith("__") for name in archive.files)


def test_sources_that_cannot_play_are_one_line_errors(trained, tmp_path):
    path, states = trained
    (tmp_path / "empty").mkdir()
    (tmp_path / "junk.npz").write_bytes(b"not a zip file")
    np.savez(tmp_path / "plain.npz", x=np.zeros(3))
    wrong = save_model_file(tmp_path / "wrong.npz", CONFIG.overridden(filters=16), states[2], {})
    cases = [
        (dict(source=tmp_path / "missing"), "there is no run directory"),
        (dict(source=tmp_path / "empty"), "has no config.json"),
        (dict(source=tmp_path / "missing.npz"), "there is no model file"),
        (dict(source=tmp_path / "junk.npz"), "not a readable model file"),
        (dict(source=tmp_path / "plain.npz"), "is not a model file"),
        (dict(source=wrong), "do not fit its config"),
        (dict(source=path, checkpoint=7), "no checkpoint of iteration 7"),
        (dict(source=wrong, checkpoint=1), "has no checkpoints"),
    ]
    for arguments, message in cases:
        with pytest.raises(NetOpenError, match=message) as raised:
            open_net(arguments.pop("source"), **arguments)
        assert "\n" not in str(raised.value)


def random_model(path):
    path.write_bytes(np.random.default_rng(3).bytes(3000))   # head -c 3000 /dev/urandom


def truncated_model(path):
    save_model_file(path, CONFIG, {"model.0000": np.zeros(500, np.float32)}, {"run": "x"})
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])


def model_with_an_object_array(path):
    # A model file in every other respect; np.savez pickles the object array to write it.
    np.savez(path, **{CONFIG_KEY: np.frombuffer(CONFIG.to_json().encode(), np.uint8),
                      INFO_KEY: np.frombuffer(b"{}", np.uint8),
                      "model.0000": np.array([{"weights": 1}, None], dtype=object)})


@pytest.mark.parametrize("make", [random_model, truncated_model, model_with_an_object_array])
def test_a_model_file_that_is_not_an_npz_of_numbers_is_refused_without_advice_to_unpickle(
        tmp_path, make):
    """NumPy called a file of random bytes pickled data it could load "unsafely": wrong about
    the file, and advice never to follow for a model file."""
    path = tmp_path / "g.npz"
    make(path)
    for reader in (read_config, model_info, open_array_net, open_net):
        with pytest.raises(NetOpenError) as raised:
            reader(path)
        message = str(raised.value)
        assert message.startswith(f"{path} is not a readable model file ("), message
        assert "\n" not in message and "pickle" not in message.lower(), message
    if make is random_model:
        assert message == f"{path} is not a readable model file (not an .npz archive)"
