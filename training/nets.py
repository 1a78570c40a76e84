"""The one way to get a net: build a run's trainer, or open a run's checkpoint or a model file
as a net that plays, together with the config it was trained under.

    opened = open_net("my9x9")                  # runs/my9x9: its newest readable checkpoint
    opened = open_net("runs/x", checkpoint=12)  # a path is used as given; iteration 12
    opened = open_net("models/9x9.npz")         # a model file
    opened.config, opened.net, opened.label     # Config, OnnxNet, "my9x9 iteration 12"
    opened = open_array_net("models/9x9.npz", xp=cupy)   # the array net (CuPy on a GPU)
    source = read_weights("runs/x/checkpoints/ckpt_000012.npz")   # weights only (warm starts)

Every front end (GUI, GTP engine, evaluate.py) and the training loop's reference player open
nets here; a source that cannot be played raises `NetOpenError` with a one-line message.
Opening a net to play imports neither TensorFlow nor Keras (ONNX Runtime runs it); building
or warm-starting a trainer (`build_trainer`, `read_weights`, `init_weights`) does.

A model file is one .npz (written atomically by `save_model_file`):
    model.NNNN      the model's weights in the model's variable order (batch-norm statistics
                    included, no optimizer state), as in `Trainer.state_dict()`
    __config__      uint8 bytes of the config JSON the net was trained under
    __info__        uint8 bytes of a JSON object: where it came from (run, iteration, games...)
"""
from __future__ import annotations

import json
import os
import sys
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from kernels.go_batch import EXTRA_PLANES, describe_backend, plane_names, resolve_backend
from training.config import Config
from training.net_shape import checkpoint_shape
from training.run_directory import (CHECKPOINT_PREFIX, ROOT, CheckpointError, RunDirectory,
                                    atomic_save_npz, load_npz, resolve_run_path)

# The 9x9 model shipped with the project (models/README.md): what the GUI plays when it is
# given neither a run nor a model.
SHIPPED_MODEL = ROOT / "models" / "9x9.npz"
CONFIG_KEY = "__config__"
INFO_KEY = "__info__"
MODEL_PREFIX = "model."


class NetOpenError(Exception):
    """A run or model file that cannot give a playing net; the message says why, in a line."""


@dataclass
class OpenedNet:
    config: Config
    net: object                 # architectures.OnnxNet (ArrayNet from open_array_net)
    label: str                  # "RUN iteration K" or the model file's name
    iteration: int | None       # the checkpoint's iteration (None for a model file)
    path: Path                  # the run directory or the model file


def prepare_jax(config: Config) -> None:
    """Where Keras trains on JAX (KERAS_BACKEND=jax): JAX starts before anything loads CUDA
    (CuPy's rules and the self-play net share the card with it), without taking most of the
    card up front as it does by default, and it must run where the rules do: JAX falls back
    to the CPU without a word when its CUDA plugin is missing. RuntimeError (one line) when
    the rules run on a GPU that JAX does not see."""
    if os.environ.get("KERAS_BACKEND", "tensorflow") != "jax":
        return
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax
    if resolve_backend(config.backend) == "cuda" and jax.default_backend() != "gpu":
        raise RuntimeError(f"KERAS_BACKEND=jax, but JAX runs on {jax.default_backend()}, not "
                           f"on the GPU the rules use (is its CUDA plugin installed?)")


def build_trainer(config: Config):
    """A fresh Trainer (and its model) for `config`; the initial weights follow config.seed."""
    from architectures import Trainer, build_model, seed_initial_weights  # deferred: TF is slow
    seed_initial_weights(config.seed)
    model = build_model(config.board_size, config.input_planes, config.blocks, config.filters,
                        l2=config.l2, value_hidden=config.value_hidden,
                        aux_heads=config.aux_heads, global_pooling=config.global_pooling,
                        reply_head=config.reply_head)
    return Trainer(model, config.train_batch_size, learning_rates=config.learning_rates,
                   momentum=config.momentum, ownership_loss_weight=config.ownership_loss_weight,
                   score_loss_weight=config.score_loss_weight,
                   reply_loss_weight=config.reply_loss_weight)


def playing_net(trainer, batch_size: int, shapes: int = 1):
    """The net a trainer's weights play as, following them as they train: on TensorFlow a
    CompiledNet over the trainer's model (`shapes` compiled batch sizes up to `batch_size`);
    on another Keras backend (JAX, where TensorFlow may be absent) ONNX Runtime's graph of
    the weights, which takes them again at its next call whenever a step changed them."""
    if trainer.backend != "tensorflow":
        from architectures.onnx_net import OnnxNet
        return OnnxNet.following(trainer.model, batch_size)
    from architectures import CompiledNet  # deferred: TensorFlow takes seconds to import
    return CompiledNet(trainer.model, batch_size, shapes=shapes)


def describe_devices(config: Config, net=None) -> str:
    """Where `config`'s rules and its net run, for start-up lines: `net`'s device, or with
    none where the trainer's default back end runs it (that loads TensorFlow). Raises
    RuntimeError (a one-line reason) when config.backend is "cuda" and no CUDA device is
    usable."""
    if net is None:
        from architectures import net_device  # deferred: TensorFlow takes seconds to import
        device = net_device()
    else:
        device = net.device
    rules = resolve_backend(config.backend)
    return f"rules: {describe_backend(rules)} (backend {config.backend}); net: {device}"


def is_model_file(source: str | os.PathLike) -> bool:
    return os.fspath(source).endswith(".npz")


def read_config(source: str | os.PathLike) -> tuple[Config, Path]:
    """The config of a run directory or model file, without loading any weights."""
    if is_model_file(source):
        path = Path(source).expanduser().resolve()
        return _model_config(_read_model_arrays(path), path), path
    path = resolve_run_path(source)
    if not path.is_dir():
        raise NetOpenError(f"there is no run directory {path} (train one with "
                           f"bp_tree.py --run {os.fspath(source)}, or name a model file .npz)")
    config_path = RunDirectory(path).config_path
    if not config_path.is_file():
        raise NetOpenError(f"{path} has no config.json: is it a run directory written by "
                           f"bp_tree.py?")
    try:
        return Config.from_json(config_path.read_text()), path
    except (ValueError, TypeError, OSError) as error:
        raise NetOpenError(f"{config_path} is unreadable ({error})") from None


@dataclass
class WeightsSource:
    config: Config              # the config the weights were trained under
    weights: dict               # "model.NNNN" arrays, as `Trainer.load_model_weights` takes
    iteration: int | None       # the checkpoint's iteration (None for a model file)
    label: str                  # "RUN iteration K" or the model file's name
    path: Path                  # the run directory or the model file
    trainer: object             # a Trainer of `config` holding these weights (they loaded)


def read_weights(source: str | os.PathLike, *, checkpoint: int | None = None,
                 log=print) -> WeightsSource:
    """The model weights of a run (its newest readable checkpoint, or iteration `checkpoint`),
    of one checkpoint file (runs/X/checkpoints/ckpt_NNNNNN.npz: its run's config.json applies)
    or of a model file (any other path ending in .npz)."""
    trainer = None

    def load(config, weights):
        nonlocal trainer
        trainer = trainer or build_trainer(config)
        trainer.load_model_weights(weights)

    config, path, weights, iteration, label = _source_weights(source, checkpoint, load, log)
    return WeightsSource(config, weights, iteration, label, path, trainer)


def _source_weights(source, checkpoint, fit, log):
    """(config, path, "model.NNNN" weights, iteration or None, label) of a run's newest sound
    checkpoint (or iteration `checkpoint`), one checkpoint file, or a model file.
    `fit(config, weights)` loads or checks the weights and raises ValueError when they do
    not fit; a checkpoint that does not fit counts as damaged."""
    source, checkpoint = checkpoint_file(source, checkpoint)
    config, path = read_config(source)
    if is_model_file(path):
        if checkpoint is not None:
            raise NetOpenError(f"{path} is a model file: it has no checkpoints to choose from")
        weights = _model_weights(_read_model_arrays(path))
        for name, array in weights.items():
            if array.dtype.kind == "f" and not np.isfinite(array).all():
                raise NetOpenError(f"{path}: its weight {name} holds non-finite values")
        try:
            fit(config, weights)
        except ValueError as error:
            raise NetOpenError(f"{path}: the weights do not fit its config ({error})") from None
        return config, path, weights, None, path.name
    # A damaged checkpoint (torn, bad counters, non-finite or wrong-shaped weights) is passed
    # over for the one before, here once for every reader.
    # A run that grows its net on schedule holds checkpoints of several shapes: each is read
    # with the shape its weights have (config.json keeps the run's first).
    try:
        loaded = RunDirectory(path, log=log).load_latest_checkpoint(
            checkpoint, accept=lambda state, counters: fit(grown_as(config, state, counters),
                                                           _model_weights(state)))
    except CheckpointError as error:
        raise NetOpenError(str(error)) from None
    if loaded is None:
        raise NetOpenError(f"{path} has no checkpoint yet: a run writes its first when "
                           f"iteration 1 is complete")
    state, counters = loaded
    iteration = int(counters["iteration"])
    config = grown_as(config.scheduled(schedule_position(counters)), state, counters)
    return config, path, _model_weights(state), iteration, f"{path.name} iteration {iteration}"


def read_net_config(source: str | os.PathLike, checkpoint: int | None = None) -> tuple[Config, Path]:
    """(the config a net plays with, its run directory or model file), without TensorFlow:
    a model file's own; for a run, its newest readable checkpoint's (or iteration
    `checkpoint`'s): config.json scheduled to the checkpoint's position and grown as its
    weights are, since a run that grew holds checkpoints of several shapes."""
    config, path, _, _, _ = _source_weights(source, checkpoint, lambda c, w: None, _to_stderr)
    return config, path


def _to_stderr(message: str) -> None:
    """Where readers without a log of their own report a damaged checkpoint passed over:
    stdout may be a protocol's (the GTP and JSON engines) or a report's."""
    print(message, file=sys.stderr, flush=True)


def schedule_position(counters: dict) -> int:
    """A run's position in its schedule: the self-play positions behind its net, those of a
    warm start's source (`schedule_start`) included."""
    return int(counters.get("schedule_start", 0)) + int(counters.get("positions", 0))


def grown_as(config: Config, state: dict, counters: dict) -> Config:
    """`config` grown as the checkpoint's net is (its recorded shape, or its weights'): a run
    that grows its net on schedule holds checkpoints of several sizes, and config.json keeps
    its first. Only growth is taken (more blocks, the auxiliary heads, the reply head, the
    extra planes): weights of any other shape are left for the fit that follows to refuse."""
    try:
        shape = checkpoint_shape(state, counters, config.history)
    except ValueError:
        if "net" in counters:
            raise            # weights that are not the net recorded: a damaged checkpoint
        return config        # refused by the fit that follows, with its own message
    grown = {name: shape[name] for name in Config.GROWTH_FIELDS}
    if any(grown[name] < getattr(config, name) for name in Config.GROWTH_FIELDS):
        return config
    return config.overridden(**grown)


def checkpoint_file(source, checkpoint):
    """(run directory, iteration) for a path to one checkpoint file; (source, checkpoint)
    unchanged for anything else."""
    text = os.fspath(source)
    name = Path(text).name
    if not (is_model_file(text) and name.startswith(CHECKPOINT_PREFIX)
            and Path(text).parent.name == "checkpoints"):
        return source, checkpoint
    digits = name[len(CHECKPOINT_PREFIX):-len(".npz")]
    if not digits.isdigit():
        raise NetOpenError(f"{text}: a checkpoint file is named ckpt_NNNNNN.npz")
    if checkpoint is not None:
        raise NetOpenError(f"{text} is one checkpoint: it has no others to choose from")
    return Path(text).expanduser().resolve().parent.parent, int(digits)


def open_array_net(source: str | os.PathLike, *, xp=np, precision: str = "float32",
                   checkpoint: int | None = None, log=print) -> OpenedNet:
    """A net that plays without TensorFlow (architectures/array_net.py) in namespace `xp`
    (NumPy, or CuPy for a GPU), from the same sources as `open_net`: what a GPU machine
    without TensorFlow self-plays with."""
    from architectures.array_net import ArrayNet
    config, weights, opened = read_named_weights(source, checkpoint=checkpoint, log=log)
    return replace(opened, net=ArrayNet(weights, config, xp=xp, precision=precision))


def read_named_weights(source: str | os.PathLike, *, checkpoint: int | None = None,
                       log=print) -> tuple[Config, dict[str, np.ndarray], OpenedNet]:
    """(config, {"layer.field": array}, an OpenedNet without its net) of a run, checkpoint or
    model file, without TensorFlow: the weights the array net and the ONNX graph are built
    from."""
    from architectures.array_net import named_weights
    config, path, weights, iteration, label = _source_weights(source, checkpoint, named_weights,
                                                              log)
    return (config, named_weights(config, weights),
            OpenedNet(config=config, net=None, label=label, iteration=iteration, path=path))


def open_net(source: str | os.PathLike, *, checkpoint: int | None = None, batch_size: int = 1,
             inference: str = "float32", log=print) -> OpenedNet:
    """A net that plays, from a run (a bare name means runs/NAME; its newest readable
    checkpoint, or iteration `checkpoint`) or a model file (a path ending in .npz): ONNX
    Runtime's graph of its named weights (architectures/onnx_net.py), without TensorFlow, so
    a front end starts in a second. Calls of more than `batch_size` rows run in chunks.
    `inference` (Config.inference) picks its precision on this CPU and logs the choice and
    why (training/inference_choice.py); NetOpenError for one that cannot be had."""
    config, weights, opened = read_named_weights(source, checkpoint=checkpoint, log=log)
    return replace(opened, net=_playing_net(config, weights, opened.label, batch_size,
                                            inference, log))


def net_of_weights(config: Config, weights: dict[str, np.ndarray], label: str, *,
                   batch_size: int = 1, inference: str = "float32", log=print):
    """The net `open_net` would make of "model.NNNN" weights held in memory rather than read
    from a file (the mean of a run's checkpoints, training/weight_averaging.py)."""
    from architectures.array_net import named_weights
    return _playing_net(config, named_weights(config, weights), label, batch_size, inference,
                        log)


def _playing_net(config, named, label, batch_size, inference, log):
    from training.inference_choice import choose_inference
    try:
        choice = choose_inference(inference, named, config, batch_size=batch_size, log=log)
    except ValueError as error:
        raise NetOpenError(str(error)) from None
    if inference != "float32":
        log(f"net: {choice.describe()}")
    return choice.net(named, config, label, batch_size)


def with_source_shape(config: Config, source: str | os.PathLike,
                      explicit: dict) -> tuple[Config, list[str]]:
    """`config` with the net shape (Config.SHAPE_FIELDS) of the warm start's `source` (a model
    file, run or checkpoint; its weights' shape, read without TensorFlow) wherever the command line
    did not set the field explicitly: a warm start needs no shape flags, and a flag given is
    an asked-for change (growth) that init_weights checks. Also returns the "field value"
    pairs taken over, for the start-up line."""
    source_config = _source_weights(source, None, lambda config, weights: None, _to_stderr)[0]
    taken = {name: getattr(source_config, name) for name in Config.SHAPE_FIELDS
             if name not in explicit}
    changed = [f"{name} {value}" for name, value in taken.items()
               if getattr(config, name) != value]
    return config.overridden(**taken), changed


def warm_start_position(config: Config, source: str | os.PathLike) -> int:
    """Where a warm start from `source` enters `config`'s schedule: the source's own schedule
    position when it keeps one (runs and model files written since the schedule came), else
    the first position whose scheduled net is as grown as the source's
    (Config.schedule_start). NetOpenError as read_weights."""
    source_config, path, _, iteration, _ = _source_weights(source, None, lambda c, w: None,
                                                           _to_stderr)
    if is_model_file(path):
        counters = model_info(path)
    else:
        counters = RunDirectory(path, log=lambda message: None).load_latest_checkpoint(
            iteration)[1]
    if "schedule_start" in counters:
        return schedule_position(counters)
    return config.schedule_start(source_config)


def init_weights(trainer, config: Config, source: str | os.PathLike, log=print) -> WeightsSource:
    """Load the model weights of `source` (see read_weights) into a fresh `trainer` built for
    `config`: a warm start. Refuses, in one line, weights of another board size or net shape,
    except that `config` may grow the net: add the auxiliary heads or the opponent's reply
    head to a net trained without them (they start fresh), residual blocks after its last
    one (they start as identities), the extra input planes or the komi plane to a net
    trained without them (the stem's weights on them start at zero) and filters to every
    layer (`_widened`: the added channels are copies of the source's, their outgoing weights
    shared out), so the grown net plays exactly as the source did; every shared layer is
    copied by name."""
    found = read_weights(source, log=log)
    adds_heads = config.aux_heads and not found.config.aux_heads
    adds_reply = config.reply_head and not found.config.reply_head
    new_blocks = range(found.config.blocks, config.blocks)
    adds_features = config.extra_features and not found.config.extra_features
    adds_komi = config.komi_input and not found.config.komi_input
    widens = config.filters > found.config.filters
    # Compare with the source as grown: only what cannot be grown remains to refuse.
    compared = replace(found.config.holding(config),
                       filters=max(config.filters, found.config.filters))
    problems = config.incompatibilities(compared)
    if problems:
        raise NetOpenError(f"cannot start from {found.label}: " + "; ".join(
            problem.replace("run has", "it has") for problem in problems))
    try:
        if adds_heads or adds_reply or new_blocks or adds_features or adds_komi or widens:
            _copy_shared_layers(found.trainer.model, trainer.model, (found.config, config),
                                new_blocks)
            if adds_heads:
                log(f"--init-from {found.label}: it has no ownership and score heads; they "
                    "start fresh, every other layer from its weights")
            if adds_reply:
                log(f"--init-from {found.label}: it has no opponent's reply head; it starts "
                    "fresh (trained only, play does not read it)")
            if new_blocks:
                log(f"--init-from {found.label}: it has {found.config.blocks} residual blocks; "
                    f"blocks {new_blocks.start}-{new_blocks.stop - 1} are added after them as "
                    "identities (their last batch norm zeroed), every other layer from its "
                    "weights")
            if adds_features:
                log(f"--init-from {found.label}: it has no extra input planes; the stem's "
                    f"weights on the {EXTRA_PLANES} added planes start at zero, every other "
                    "weight from it")
            if adds_komi:
                log(f"--init-from {found.label}: it has no komi plane; the stem's weights on "
                    "it start at zero, so it plays as it did until trained")
            if widens:
                log(f"--init-from {found.label}: it has {found.config.filters} filters; the "
                    f"{config.filters - found.config.filters} added to every layer are "
                    "copies of its channels, each source channel's outgoing weights shared out "
                    "among it and its copies, so it plays as it did until trained")
        else:
            trainer.load_model_weights(found.weights)
    except ValueError as error:
        # One line: a backend's message may hold a variable's repr, values and all.
        raise NetOpenError(f"cannot start from {found.label}: its weights do not fit "
                           f"({' '.join(str(error).split())})") from None
    return found


def grow_trainer(trainer, old: Config, new: Config):
    """A trainer of `new`'s net holding `trainer`'s weights, grown as a warm start grows them
    (more residual blocks as identities, fresh auxiliary heads, zero weights on added input
    planes), so it plays exactly as before; its steps go on from `trainer`'s, its momentum
    starts fresh. For a run's schedule (bp_tree.py)."""
    grown = build_trainer(new)
    _copy_shared_layers(trainer.model, grown.model, (old, new), range(old.blocks, new.blocks))
    grown.continue_from(trainer)
    return grown


def _copy_shared_layers(source, target, inputs: tuple[Config, Config],
                        new_blocks: range = range(0)) -> None:
    """Copy every layer's weights of `source` into the layer of the same name in `target`
    (batch-norm statistics included); `target` may have besides only the auxiliary heads and
    the reply head, which keep their fresh weights, and the residual blocks `new_blocks`,
    made identities, and its stem may read more input planes than the source's: the planes
    features() appends (extra_features, komi_input: `inputs` are the source's and the
    target's configs), whose kernel weights are zero, so they change nothing until trained;
    and `target` may be wider (more filters: `_widened`)."""
    from architectures.weights_version import weights_changed
    from architectures.resnet import (AUX_HEAD_LAYERS, REPLY_HEAD_LAYERS, STEM_CONV,
                                      block_layers, make_block_identity)
    layers = {layer.name: layer for layer in source.layers}
    rng = np.random.default_rng(0)     # the split shares (_widened): the same growth each time
    extra = sorted(layer.name for layer in target.layers
                   if layer.weights and layer.name not in layers)
    allowed = set(AUX_HEAD_LAYERS + REPLY_HEAD_LAYERS).union(
        *(block_layers(block) for block in new_blocks))
    if set(extra) - allowed:
        raise ValueError(f"layers {sorted(set(extra) - allowed)} are not in the source net")
    pairs = [(layers[layer.name], layer) for layer in target.layers
             if layer.weights and layer.name in layers]
    copies = []
    for src, dst in pairs:   # check every shape before assigning any
        weights = src.get_weights()
        needed = [b.shape for b in dst.get_weights()]
        if dst.name == STEM_CONV and len(weights) == 1 and len(needed) == 1:
            # The planes first, at the source's width; _widened then adds the filters.
            planes_needed = (*needed[0][:3], weights[0].shape[3])
            weights = [_with_added_inputs(weights[0], planes_needed, *inputs)]
        if inputs[1].filters > inputs[0].filters:
            weights = _widened(dst.name, weights, needed, inputs[0].filters, rng)
        shapes = [a.shape for a in weights]
        if shapes != needed:
            raise ValueError(f"layer {src.name} has shapes {shapes}, this net needs {needed}")
        copies.append((dst, weights))
    for dst, weights in copies:
        dst.set_weights(weights)
    for block in new_blocks:
        make_block_identity(target, block)
    weights_changed(target)


def _widened(name: str, weights: list, shapes: list, filters: int,
             rng: np.random.Generator) -> list:
    """A layer's source `weights` laid out in the wider target layer, whose arrays have
    `shapes`, by splitting channels (Net2Net's widening): added channel k copies
    source channel (k - filters) mod filters, the same map in every layer, so each copy
    computes what its source channel does. Along a widened output axis (a kernel's last, a
    bias, batch-norm entries) the copies take their source's values; along a kernel's widened
    input axis (..., inputs, outputs) a source channel's weights are then shared out among it
    and its copies, weight by weight, at random proportions that sum to one, so the layer
    computes exactly what it did, and the copies, read through different weights, learn
    apart. The global pooling layer's inputs are the trunk's means then its maxima, each
    `filters` wide in the source: each half is mapped on its own. Arrays that do not fit are
    returned as they are (and refused by the caller).

    Zero weights from fresh channels (the other function-preserving growth) left the added
    channels at a few percent of the source weights' norm after 150k positions at the
    schedule's last rate, and the 10x64 net fitted held-out games no better than 8x32."""
    grown = []
    for array, shape in zip(weights, shapes):
        if array.shape == shape or array.ndim != len(shape) or any(
                have > want for have, want in zip(array.shape, shape)):
            grown.append(array)
            continue
        sources = []
        for axis, (have, want) in enumerate(zip(array.shape, shape)):
            if name == "gpool_dense" and array.ndim == 2 and axis == 0 and have != want:
                half = _channel_sources(filters, want // 2)
                sources.append(np.r_[half, filters + half])
            else:
                sources.append(_channel_sources(have, want))
        out = array[np.ix_(*sources)]
        if array.ndim >= 2 and array.shape[-2] != shape[-2]:
            # Shares of each source input channel's weights: drawn, then made to sum to one
            # over the channel and its copies, weight by weight.
            share = rng.uniform(0.5, 1.5, out.shape)
            totals = np.zeros((*out.shape[:-2], array.shape[-2], out.shape[-1]), share.dtype)
            np.add.at(totals, (Ellipsis, sources[-2], slice(None)), share)
            out = out * (share / totals[..., sources[-2], :])
        grown.append(out.astype(array.dtype))
    return grown


def _channel_sources(have: int, want: int) -> np.ndarray:
    """The source channel of each of `want` channels grown from `have`: itself, then the
    added ones in turn."""
    return np.arange(want) % have


def _with_added_inputs(kernel: np.ndarray, needed: tuple, source: Config,
                       target: Config) -> np.ndarray:
    """A stem kernel (h, w, planes, filters) of `source`'s input planes laid out for
    `target`'s, which may add planes (the extra planes, the komi plane): each of the source's
    planes keeps its weights at its place in the target's layout (kernels.go_batch.plane_names),
    an added plane gets zero weights. Any other shape is returned as it is (and refused by the
    caller)."""
    height, width, planes, filters = kernel.shape
    have = plane_names(source.history, source.extra_features, source.komi_input)
    want = plane_names(target.history, target.extra_features, target.komi_input)
    if (needed[:2] != (height, width) or needed[3] != filters or planes != len(have)
            or needed[2] != len(want) or not set(have) <= set(want)):
        return kernel
    grown = np.zeros(needed, kernel.dtype)
    for index, name in enumerate(have):
        grown[:, :, want.index(name), :] = kernel[:, :, index, :]
    return grown


# The checkpoint counters a model file's info carries (bp_tree.py documents them).
INFO_COUNTERS = ("games", "positions", "cpu_seconds", "child_cpu_seconds", "train_steps",
                 "wall_time_s", "init_from", "commands", "schedule_start")


def run_model_info(run_name: str, iteration: int, counters: dict) -> dict:
    """A model file's info for iteration `iteration` of run `run_name`: where it came from."""
    info = {"run": run_name, "iteration": iteration}
    info.update({key: counters[key] for key in INFO_COUNTERS if key in counters})
    return info


def save_model_file(path: str | os.PathLike, config: Config, state: dict[str, np.ndarray],
                    info: dict) -> Path:
    """Write the model weights of a trainer state (`Trainer.state_dict()` or a checkpoint's)
    with their config and `info` as a model file."""
    path = Path(path)
    arrays = _model_weights(state)
    arrays[CONFIG_KEY] = np.frombuffer(config.to_json().encode(), dtype=np.uint8)
    arrays[INFO_KEY] = np.frombuffer(json.dumps(info, sort_keys=True).encode(), dtype=np.uint8)
    atomic_save_npz(path, arrays)
    return path


def model_info(path: str | os.PathLike) -> dict:
    return json.loads(_read_model_arrays(Path(path))[INFO_KEY].tobytes().decode())


def _read_model_arrays(path: Path) -> dict[str, np.ndarray]:
    if not path.is_file():
        raise NetOpenError(f"there is no model file {path}")
    try:
        arrays = load_npz(path)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:
        raise NetOpenError(f"{path} is not a readable model file ({error})") from None
    if CONFIG_KEY not in arrays or INFO_KEY not in arrays:
        raise NetOpenError(f"{path} is not a model file (it lacks {CONFIG_KEY} or {INFO_KEY})")
    return arrays


def _model_config(arrays: dict[str, np.ndarray], path: Path) -> Config:
    try:
        return Config.from_json(arrays[CONFIG_KEY].tobytes().decode())
    except (ValueError, TypeError, UnicodeDecodeError) as error:
        raise NetOpenError(f"{path}: its config is unreadable ({error})") from None


def _model_weights(state: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {name: array for name, array in state.items() if name.startswith(MODEL_PREFIX)}
