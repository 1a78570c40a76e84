"""The net without TensorFlow (architectures/array_net.py): its weight names are Keras' own,
its NumPy forward pass answers as the Keras model does, the GPU's answers as the NumPy one
(skipped, not faked, without a GPU), and a CUDA search step is one round trip."""
from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from architectures.array_net import ArrayNet, named_weights, weight_names
from float_tolerance import assert_same_net_answers
from kernels import GoBatch
from kernels.go_batch import _cuda_available
from training.config import PRESETS
from training.nets import SHIPPED_MODEL, NetOpenError, open_array_net, read_config

ROOT = Path(__file__).resolve().parent.parent
NEEDS_CUDA = pytest.mark.skipif(not _cuda_available()[0],
                                reason="no CUDA device (CuPy and a GPU are needed)")


def game_positions(config, count: int, seed: int = 0) -> np.ndarray:
    """Input planes of `count` positions from random games 0-60 moves deep (on the CPU), at
    komis from -10 to 20 for a net with the komi plane."""
    go = GoBatch(count, config.board_size, history_length=config.history,
                 extra_features=config.extra_features, seed=seed,
                 komi_input=config.komi_input)
    rng = np.random.default_rng(seed)
    if config.komi_input:
        go.set_komi(rng.integers(-20, 41, count) / 2)
    depth = rng.integers(0, 60, count)
    for ply in range(60):
        playing = depth > ply
        if playing.any():
            go.play(go.random_moves(slots=np.flatnonzero(playing)), slots=np.flatnonzero(playing))
    return go.features(config.history)


def test_the_array_net_imports_without_tensorflow():
    code = ("import sys; import architectures.array_net, architectures.onnx_export, "
            "games.selfplay, training.nets; print('tensorflow' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, check=True)
    assert result.stdout.strip() == "False"


@pytest.mark.parametrize("blocks,heads,global_pooling",
                         list(itertools.product([0, 2], [(False, False), (True, False),
                                                         (True, True)], [False, True])))
def test_weight_names_are_the_keras_variable_order(blocks, heads, global_pooling):
    pytest.importorskip("tensorflow", reason="the reference is the Keras model")
    from architectures import build_model
    aux_heads, reply_head = heads
    model = build_model(5, 6, blocks, 8, aux_heads=aux_heads, global_pooling=global_pooling,
                        reply_head=reply_head)
    keras_names = [".".join(variable.path.split("/")[-2:]) for variable in model.weights]
    assert weight_names(blocks, aux_heads, global_pooling, reply_head) == keras_names


def keras_answers(model, planes):
    from architectures.quiet_tensorflow import load_tensorflow
    tf = load_tensorflow()
    logits, value = model(planes, training=False)[:2]
    return tf.nn.softmax(logits).numpy(), value.numpy().reshape(-1)


def test_the_shipped_model_answers_as_its_keras_model_on_game_positions():
    pytest.importorskip("tensorflow", reason="the reference is the Keras model")
    from training.nets import read_weights
    opened = open_array_net(SHIPPED_MODEL)
    planes = game_positions(opened.config, 200)
    policy, value = opened.net(planes)
    keras_policy, keras_value = keras_answers(read_weights(SHIPPED_MODEL).trainer.model, planes)
    assert_same_net_answers(policy, value, keras_policy, keras_value, opened.config)
    assert policy.dtype == np.float32 and value.shape == (200,)


@pytest.mark.parametrize("global_pooling", [False, True])
def test_a_trained_net_with_every_head_answers_as_keras(global_pooling):
    """A net whose every weight, batch-norm statistics included, is moved off its initial
    value, with the auxiliary heads and optionally global pooling."""
    pytest.importorskip("tensorflow", reason="the reference is the Keras model")
    from training.nets import build_trainer
    config = PRESETS["tiny"].overridden(board_size=7, blocks=2, filters=16, aux_heads=True,
                                        extra_features=True, global_pooling=global_pooling)
    trainer = build_trainer(config)
    rng = np.random.default_rng(1)
    for variable in trainer.model.weights:   # batch-norm statistics too, off their inits
        if "variance" in variable.path:
            variable.assign(rng.uniform(0.5, 1.5, variable.shape).astype(np.float32))
        else:
            variable.assign(variable.numpy()
                            + rng.normal(0, 0.2, variable.shape).astype(np.float32))
    arrays = {f"model.{i:04d}": w for i, w in enumerate(trainer.model.get_weights())}
    net = ArrayNet(named_weights(config, arrays), config)
    planes = game_positions(config, 64, seed=2)
    policy, value = net(planes)
    keras_policy, keras_value = keras_answers(trainer.model, planes)
    assert_same_net_answers(policy, value, keras_policy, keras_value, config)


def test_weights_that_do_not_fit_the_config_are_refused_in_one_line(tmp_path):
    config, _ = read_config(SHIPPED_MODEL)
    with np.load(SHIPPED_MODEL) as stored:
        arrays = {name: stored[name] for name in stored.files}
    with pytest.raises(ValueError, match="weight arrays, but a 6x32 net"):
        named_weights(config.overridden(blocks=6), arrays)
    with pytest.raises(ValueError, match="stem_conv.kernel has shape"):
        named_weights(config.overridden(extra_features=False), arrays)
    broken = tmp_path / "broken.npz"
    arrays["model.0003"] = arrays["model.0003"][:5]
    np.savez(broken, **arrays)
    with pytest.raises(NetOpenError, match="do not fit its config"):
        open_array_net(broken)


def test_float16_is_refused_on_numpy():
    opened = open_array_net(SHIPPED_MODEL)
    with pytest.raises(ValueError, match="float16 needs a GPU"):
        ArrayNet(named_weights(opened.config, np.load(SHIPPED_MODEL)), opened.config,
                 precision="float16")


# ---------------------------------------------------------------------------------- on a GPU


@NEEDS_CUDA
@pytest.mark.parametrize("precision", ["float32", "float16"])
def test_the_gpu_forward_answers_as_the_cpu_forward(precision):
    """On positions from games: float32 to rounding; float16 keeps the move the net likes best
    on at least 98% of them, and its value within 0.02 on average."""
    import cupy
    cpu = open_array_net(SHIPPED_MODEL)
    gpu = open_array_net(SHIPPED_MODEL, xp=cupy, precision=precision)
    planes = game_positions(cpu.config, 2000, seed=5)
    policy, value = cpu.net(planes)
    gpu_policy, gpu_value = (array.get() for array in gpu.net(cupy.asarray(planes)))
    agree = float((policy.argmax(1) == gpu_policy.argmax(1)).mean())
    value_error = float(np.abs(value - gpu_value).mean())
    print(f"{precision}: top-1 agreement {agree:.4f}, mean |value difference| {value_error:.5f}, "
          f"max |policy difference| {np.abs(policy - gpu_policy).max():.5f}")
    if precision == "float32":
        # CuPy leaves cuBLAS's TF32 off unless CUPY_TF32=1: float32 products and sums, so
        # the bound of any two float32 evaluations holds.
        if os.environ.get("CUPY_TF32", "0") != "0":
            pytest.skip("CUPY_TF32 is set: cuBLAS rounds float32 products to TF32")
        assert_same_net_answers(gpu_policy, gpu_value, policy, value, cpu.config)
    assert agree >= 0.98 and value_error <= 0.02


def replayed_start(board_size: int, game) -> GoBatch:
    """A one-board GoBatch (CPU rules) at a finished self-play game's komi, with its handicap
    stones placed and White to move when it has some."""
    replay = GoBatch(1, board_size, komi=game.komi)
    if game.handicap:
        stones = np.zeros(board_size * board_size, np.int8)
        stones[list(game.handicap)] = 1
        replay.set_board(stones.reshape(1, board_size, board_size), np.array([-1]))
    return replay


@NEEDS_CUDA
def test_self_play_with_the_gpu_net_plays_legal_games():
    """Self-play on the CUDA rules with the net on the GPU (no TensorFlow): every recorded game
    replays move by move on the CPU rules, from its handicap stones at its own komi (the
    shipped net's config draws both), and ends as they score it."""
    import cupy
    from games.selfplay import SelfPlay
    opened = open_array_net(SHIPPED_MODEL, xp=cupy, precision="float16")
    config = opened.config.overridden(num_games=64, backend="cuda")
    batch = SelfPlay(config, opened.net, seed=3).play(2000)
    assert len(batch.games) >= 10
    for game in batch.games[:10]:
        replay = replayed_start(config.board_size, game)
        for move in game.moves:
            replay.play([move])
        assert bool(replay.is_over()[0]) or game.resigned
        if not game.resigned:
            assert float(replay.score()[0]) == game.score


@NEEDS_CUDA
def test_a_cuda_search_step_is_one_upload_one_download_and_one_wait():
    """Counted by CUPTI (PyTorch's profiler, which sees every CUDA call of the process): a
    search step's evaluation makes one host-to-device copy, one device-to-host copy and one
    stream synchronisation, and the same kernels whatever its number of leaves."""
    torch = pytest.importorskip("torch", reason="the launch count reads CUPTI through PyTorch")
    import cupy
    from torch.profiler import ProfilerActivity, profile, record_function

    from games.device_step import COPY_PLAY
    from games.search import SearchingGames
    opened = open_array_net(SHIPPED_MODEL, xp=cupy, precision="float16")
    config = opened.config.overridden(num_games=256, backend="cuda")
    driver = SearchingGames(config, 256, opened.net, seed=1)
    driver.think(simulations=4)           # warm: kernels compiled, buffers allocated

    def counted_step(games):
        search = driver.search
        search.reset(games)
        driver._expand_roots(games)
        leaves = search.select(games=games)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as trace:
            with record_function("search_step"):
                evaluation = driver._device.evaluate(
                    COPY_PLAY, driver.node_slots(leaves.game, leaves.parent),
                    driver.node_slots(leaves.game, leaves.node), leaves.action)
        search.expand_and_backup(leaves.game, leaves.node, *evaluation)
        # Host-side calls inside the step (the profiler's own closing sync is outside it).
        step = next(event for event in trace.events() if event.name == "search_step")
        names = [event.name for event in trace.events()
                 if event.device_type != torch.autograd.DeviceType.CUDA
                 and step.time_range.start <= event.time_range.start <= step.time_range.end]
        names += [event.name for event in trace.events()
                  if event.device_type == torch.autograd.DeviceType.CUDA]
        kernels = sorted(event.name for event in trace.events()
                         if event.device_type == torch.autograd.DeviceType.CUDA
                         and "memcpy" not in event.name.lower()
                         and "memset" not in event.name.lower())
        return names, kernels

    names, kernels = counted_step(np.ones(256, bool))
    half = np.zeros(256, bool)
    half[::2] = True
    _, kernels_half = counted_step(half)
    to_device = [n for n in names if "HtoD" in n and "Memcpy" in n]
    to_host = [n for n in names if "DtoH" in n and "Memcpy" in n]
    waits = [n for n in names if "Synchronize" in n]
    print(f"kernels per step: {len(kernels)}; copies to the device {len(to_device)}, to the "
          f"host {len(to_host)}; waits {waits}")
    assert len(to_device) == 1 and len(to_host) == 1
    assert len(waits) == 1
    # The project's own kernels are the same list; cuBLAS picks its GEMM kernels by size (its
    # tile shapes, sometimes a split reduction), so only their number is bounded.
    ours = [name for name in kernels if name.startswith(("go_", "bgz_", "void im2col"))]
    assert ours == [name for name in kernels_half if name.startswith(("go_", "bgz_", "void im2col"))]
    assert abs(len(kernels) - len(kernels_half)) <= 4
