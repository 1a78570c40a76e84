"""Warm starts (`--init_from` a run, a checkpoint or an exported model) and the nets they
grow: weights copied, shapes taken or refused, auxiliary heads, residual blocks, wider
layers, the komi plane and extra input planes added so that the grown net plays as its
source did.
"""
import contextlib
import io
import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import bp_tree  # noqa: E402
from float_tolerance import assert_outputs_close, model_shape  # noqa: E402
from training.config import Config  # noqa: E402
from training.run_directory import ROOT  # noqa: E402
from loop_runs import (  # noqa: E402
    TINY, TINY_ARGS, run_main, checkpoint_iterations, chunk_iterations, read_checkpoint,
    metrics)


# Warm starts and exported models.

def model_arrays(arrays: dict) -> dict:
    return {name: array for name, array in arrays.items() if name.startswith("model.")}


def test_init_from_a_run_a_checkpoint_or_an_exported_model_copies_the_weights_only(
        one_iteration, tmp_path):
    import export_model
    source, _, _ = one_iteration
    source_state, source_counters = read_checkpoint(source, 1)
    model = tmp_path / "exported.npz"
    with contextlib.redirect_stdout(io.StringIO()):
        assert export_model.main(["--run", str(source), "--output", str(model)]) == 0
    with np.load(model) as archive:
        info = json.loads(archive["__info__"].tobytes().decode())
        exported = {name: archive[name] for name in archive.files}
    assert info["run"] == "run" and info["iteration"] == 1
    assert info["games"] == source_counters["games"] and info["cpu_seconds"] > 0
    assert info["commands"][0].startswith("bp_tree.py --run ")
    assert model_arrays(exported).keys() == model_arrays(source_state).keys()
    assert not [name for name in exported if name.startswith(("optimizer.", "trainer."))]
    for start in (source, source / "checkpoints" / "ckpt_000001.npz", model):
        run = tmp_path / f"warm-{start.name}"
        # No training in the first iteration (min_replay out of reach): its checkpoint holds
        # the starting weights as they were loaded.
        code, _, err = run_main(run, "--iterations", "1", "--min_replay", "1024",
                                "--init_from", str(start))
        assert code == 0, err
        state, counters = read_checkpoint(run, 1)
        for name, array in model_arrays(source_state).items():
            np.testing.assert_array_equal(state[name], array)
        assert int(state["trainer.step"]) == 0 and counters["train_steps"] == 0
        assert counters["games"] == metrics(run)[0]["games"]     # a fresh count and replay
        assert chunk_iterations(run) == [1]
        assert counters["init_from"].startswith(str(source if start != model else model))


def test_a_warm_start_from_inside_the_checkout_records_a_path_a_clone_can_follow(
        one_iteration, tmp_path):
    # An exported model carries its run's init_from: a path of the training machine would
    # name nothing in another clone, so a source inside the checkout is kept relative to it.
    source, _, _ = one_iteration
    with tempfile.TemporaryDirectory(dir=ROOT, prefix=".test-init-from-") as inside:
        copied = Path(inside) / "run"
        shutil.copytree(source, copied, ignore=shutil.ignore_patterns("trainer.lock"))
        run = tmp_path / "warm-inside"
        code, _, err = run_main(run, "--iterations", "1", "--min_replay", "1024",
                                "--init_from", str(copied))
        assert code == 0, err
    _, counters = read_checkpoint(run, 1)
    assert counters["init_from"] == f"{Path(inside).name}/run iteration 1"


def refused(run: Path, *extra: str) -> str:
    """Stderr of a bp_tree.main that must stop with exit code 2 (a refusal)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = bp_tree.main(["--run", str(run), *TINY_ARGS, *extra])
        except SystemExit as exit_info:   # refusals from inside the loop exit this way
            code = exit_info.code
    assert code == 2, err.getvalue()
    return err.getvalue()


def test_init_from_refuses_another_net_shape_in_one_line(one_iteration, tmp_path):
    source, _, _ = one_iteration
    run = tmp_path / "misfit"
    err = refused(run, "--iterations", "1", "--filters", "4", "--init_from", str(source))
    [line] = [l for l in err.splitlines() if "init-from" in l]
    assert "filters: it has 8, command asks 4" in line     # a net is widened, never narrowed
    assert checkpoint_iterations(run) == []
    err = refused(tmp_path / "nothing", "--iterations", "1",
                  "--init_from", str(tmp_path / "absent.npz"))
    assert "there is no model file" in err


def test_a_warm_start_takes_the_sources_net_shape_without_shape_flags(one_iteration, tmp_path):
    """--init_from alone: the new run gets the source's shape (here filters 16, which no
    preset has), from a run or its exported model; a shape flag still grows the net."""
    source = tmp_path / "wide"
    code, _, err = run_main(source, "--filters", "16", "--iterations", "1")
    assert code == 0, err
    code, _, err = run_main(tmp_path / "from_run", "--iterations", "1", "--init_from", str(source))
    assert code == 0, err
    assert "its net shape: filters 16" in err
    assert json.loads((tmp_path / "from_run" / "config.json").read_text())["filters"] == 16
    code, _, err = run_main(tmp_path / "grown", "--iterations", "1", "--init_from", str(source),
                            "--blocks", "2")
    assert code == 0, err
    grown = json.loads((tmp_path / "grown" / "config.json").read_text())
    assert (grown["filters"], grown["blocks"]) == (16, 2)


def warm_start(run: Path, source: Path, *flags: str):
    """One iteration of a run warm-started from `source` with `flags`, its net not trained yet
    (--min_replay above the iteration's positions): (what it printed, its net read back)."""
    from training.nets import read_weights
    code, out, err = run_main(run, "--iterations", "1", "--min_replay", "1024", *flags,
                              "--init_from", str(source))
    assert code == 0, err
    return out + err, read_weights(run)


def random_planes(rng, shape) -> np.ndarray:
    """Six positions of random 0/1 input planes of `shape` (rows, columns, planes)."""
    return rng.integers(0, 2, (6, *shape)).astype(np.float32)


def test_init_from_adds_the_auxiliary_heads_to_a_net_trained_without(one_iteration, tmp_path):
    from training.nets import read_weights
    source, _, _ = one_iteration
    run = tmp_path / "grown"
    text, new = warm_start(run, source, "--aux_heads", "true")
    assert "no ownership and score heads; they start fresh" in text
    old = read_weights(source)
    assert not old.config.aux_heads and new.config.aux_heads
    # Every shared layer came from the source: policy and value agree on any input.
    planes = random_planes(np.random.default_rng(5), old.trainer.model.input_shape[1:])
    before = old.trainer.model(planes, training=False)
    after = new.trainer.model(planes, training=False)
    assert len(before) == 2 and len(after) == 4
    assert_outputs_close(after[:2], before, new.config)
    # Taking heads away, asked for explicitly, is still refused.
    err = refused(tmp_path / "shrunk", "--iterations", "1", "--aux_heads", "false",
                  "--init_from", str(run))
    assert "aux_heads: it has True, command asks False" in err


def assert_answers_as(grown, grown_planes, source, planes):
    """`grown` answers `grown_planes` as `source` answers `planes`, through the Keras model
    and through the folded inference graph the search uses."""
    from architectures.inference import inference_forward
    for outputs in ((grown(grown_planes, training=False), source(planes, training=False)),
                    (inference_forward(grown, grown_planes), inference_forward(source, planes))):
        assert_outputs_close(*outputs, model_shape(grown))


def train_one_random_step(trainer, rng) -> None:
    """One training step of `trainer` on a random batch of planes, policies and results."""
    batch, size = trainer.batch_size, trainer.model.input_shape[1]
    targets = rng.dirichlet(np.ones(size * size + 1), batch).astype(np.float32)
    trainer.train_step(
        rng.integers(0, 2, (batch, *trainer.model.input_shape[1:])).astype(np.float32),
        targets, rng.choice([-1.0, 1.0], batch).astype(np.float32))


def test_init_from_adds_residual_blocks_that_start_as_identities(one_iteration, tmp_path):
    from training.nets import read_weights
    source, _, _ = one_iteration
    old = read_weights(source)
    deeper = old.config.blocks + 2
    run = tmp_path / "deeper"
    text, new = warm_start(run, source, "--blocks", str(deeper))
    assert f"blocks {old.config.blocks}-{deeper - 1} are added after them as identities" in text
    assert new.config.blocks == deeper
    # The source net is the reference: the grown one answers every input as it did, through
    # the Keras model and through the folded inference graph the search uses.
    planes = random_planes(np.random.default_rng(7), old.trainer.model.input_shape[1:])
    assert_answers_as(new.trainer.model, planes, old.trainer.model, planes)
    # The added blocks are not frozen at zero: one training step moves their last scale.
    layer = new.trainer.model.get_layer(f"block{deeper - 1}_bn2")
    assert not np.asarray(layer.gamma).any()
    train_one_random_step(new.trainer, np.random.default_rng(8))
    assert np.asarray(layer.gamma).any()
    # Removing blocks is refused in one line.
    err = refused(tmp_path / "shallower", "--iterations", "1", "--blocks", str(old.config.blocks),
                  "--init_from", str(run))
    assert f"blocks: it has {deeper}, command asks {old.config.blocks}" in err


def test_init_from_widens_every_layer_and_the_wider_net_plays_as_before(one_iteration, tmp_path):
    from architectures.resnet import STEM_CONV
    from training.nets import read_weights
    source, _, _ = one_iteration
    old = read_weights(source)
    wider = old.config.filters + 4
    run = tmp_path / "wider"
    text, new = warm_start(run, source, "--filters", str(wider))
    assert f"it has {old.config.filters} filters; the 4 added" in text
    assert new.config.filters == wider
    planes = random_planes(np.random.default_rng(11), old.trainer.model.input_shape[1:])
    assert_answers_as(new.trainer.model, planes, old.trainer.model, planes)
    # The added channels start as copies of the first four (Net2Net's widening: the stem,
    # which reads the planes, gives them their sources' weights; the layers after share each
    # source channel's weights out among it and its copy) and a training step sets them
    # apart: they are neither dead nor clones.
    stem = new.trainer.model.get_layer(STEM_CONV).kernel
    added, copied = slice(old.config.filters, wider), slice(0, 4)
    np.testing.assert_array_equal(
        np.asarray(stem)[..., added],
        np.asarray(old.trainer.model.get_layer(STEM_CONV).kernel)[..., copied])
    assert np.asarray(new.trainer.model.get_layer("block0_conv1").kernel)[:, :, added].any()
    train_one_random_step(new.trainer, np.random.default_rng(12))
    assert not np.allclose(np.asarray(stem)[..., added], np.asarray(stem)[..., copied])
    err = refused(tmp_path / "narrower", "--iterations", "1",
                  "--filters", str(old.config.filters), "--init_from", str(run))
    assert f"filters: it has {wider}, command asks {old.config.filters}" in err


@pytest.mark.parametrize("global_pooling, adds_planes", [(False, False), (True, True)])
def test_a_widened_net_with_every_head_answers_as_its_source(global_pooling, adds_planes):
    """Every layer kind widened at once (the auxiliary heads, the global pooling's means and
    maxima), from a source with random weights and batch-norm statistics, once also growing
    the input by the extra planes in front of the source's komi plane: the source itself is
    the reference."""
    from training.nets import _copy_shared_layers, build_trainer
    narrow = Config(board_size=5, blocks=2, filters=8, aux_heads=True,
                    global_pooling=global_pooling, komi_input=adds_planes)
    wide = narrow.overridden(filters=13, extra_features=adds_planes)
    source, target = build_trainer(narrow), build_trainer(wide)
    rng = np.random.default_rng(3)
    for layer in source.model.layers:
        arrays = layer.get_weights()
        if "bn" in layer.name:     # gamma, beta, moving mean, moving variance (positive)
            arrays = [rng.normal(1, 0.3, a.shape) if i in (0, 3) else rng.normal(0, 0.3, a.shape)
                      for i, a in enumerate(arrays)]
            arrays[3] = np.abs(arrays[3])
        else:
            arrays = [rng.normal(0, 0.15, a.shape) for a in arrays]
        layer.set_weights([a.astype(np.float32) for a in arrays])
    _copy_shared_layers(source.model, target.model, (narrow, wide))
    planes = random_planes(rng, (5, 5, narrow.input_planes))
    if adds_planes:          # the extra planes go in before the komi plane, the last
        extra = random_planes(rng, (5, 5, wide.input_planes - narrow.input_planes))
        planes[..., -1] = rng.uniform(-1, 1, (6, 1, 1))
        grown = np.concatenate([planes[..., :-1], extra, planes[..., -1:]], -1).astype(np.float32)
    else:
        grown = planes
    assert_answers_as(target.model, grown, source.model, planes)


def test_init_from_adds_the_komi_plane_and_the_run_trains_and_resumes_at_drawn_komis(
        one_iteration, tmp_path):
    """A warm start to komi_input: the stem's weights on the komi plane start at zero, so the
    grown net answers as the source whatever the komi; the run self-plays at drawn komis and
    from handicap stones, its chunks keep each position's komi, and it resumes. Growing that
    run's net by the extra planes then keeps its weights on the komi plane, the last."""
    from kernels.go_batch import EXTRA_PLANES
    from training.nets import read_weights
    source, _, _ = one_iteration
    old = read_weights(source)
    run = tmp_path / "komi"
    draws = ("--komi_input", "true", "--komi_spread", "2", "--komi_wide_share", "0.3",
             "--handicap_share", "0.3")
    text, new = warm_start(run, source, *draws)
    assert "the stem's weights on it start at zero" in text
    assert new.config.komi_input
    rng = np.random.default_rng(10)
    planes = random_planes(rng, old.trainer.model.input_shape[1:])
    komi = rng.uniform(-1, 1, (6, *planes.shape[1:3], 1)).astype(np.float32)
    assert_answers_as(new.trainer.model, np.concatenate([planes, komi], -1),
                      old.trainer.model, planes)
    chunk = np.load(run / "replay" / "chunk_000001.npz")
    assert chunk["planes"].shape[-1] == TINY.input_planes
    assert len(set(np.abs(chunk["komi"]).tolist())) > 1
    code, _, err = run_main(run, "--iterations", "2", "--min_replay", "64", *draws)
    assert code == 0, err     # resumed, it trains on both iterations' positions
    assert "discarding" not in err and "damaged" not in err
    # Grown again, by the extra planes: they go before the komi plane, which keeps its weights.
    trained = read_weights(run)
    stem = np.asarray(trained.trainer.model.get_layer("stem_conv").kernel)
    assert stem[:, :, -1, :].any()
    _, grown = warm_start(tmp_path / "komi_featured", run, "--extra_features", "true")
    assert grown.config.komi_input and grown.config.extra_features
    planes = random_planes(rng, (*planes.shape[1:3], TINY.input_planes))
    extra = random_planes(rng, (*planes.shape[1:3], EXTRA_PLANES))
    assert_answers_as(grown.trainer.model, np.concatenate([planes, extra, komi], -1),
                      trained.trainer.model, np.concatenate([planes, komi], -1))


def test_init_from_adds_the_extra_input_planes_with_zero_weights(one_iteration, tmp_path):
    from kernels.go_batch import EXTRA_PLANES
    from training.nets import read_weights
    source, _, _ = one_iteration
    old = read_weights(source)
    assert not old.config.extra_features
    run = tmp_path / "featured"
    text, new = warm_start(run, source, "--extra_features", "true")
    assert f"the stem's weights on the {EXTRA_PLANES} added planes start at zero" in text
    assert new.config.extra_features
    base = old.trainer.model.input_shape[-1]
    assert new.trainer.model.input_shape[-1] == base + EXTRA_PLANES
    # The source net is the reference: the grown one answers its planes as the source did,
    # whatever the added planes hold.
    rng = np.random.default_rng(9)
    planes = random_planes(rng, old.trainer.model.input_shape[1:])
    extra = random_planes(rng, (*planes.shape[1:3], EXTRA_PLANES))
    grown_planes = np.concatenate([planes, extra], axis=-1)
    assert_answers_as(new.trainer.model, grown_planes, old.trainer.model, planes)
    # The added weights are not frozen at zero: one training step moves them.
    stem = new.trainer.model.get_layer("stem_conv")
    assert not np.asarray(stem.kernel)[:, :, base:, :].any()
    train_one_random_step(new.trainer, rng)
    assert np.asarray(stem.kernel)[:, :, base:, :].any()
    # Dropping the planes again is refused in one line.
    err = refused(tmp_path / "featureless", "--iterations", "1", "--extra_features", "false",
                  "--init_from", str(run))
    assert "extra_features: it has True, command asks False" in err
