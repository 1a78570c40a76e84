"""The precision the loop's self-play net plays in (Config.inference), and its int8 graph kept
in step with training.

Chosen once when the loop starts, from the trainer's weights then, as every front end chooses
(training/inference_choice.py). Only the CPU's self-play is quantized: training stays float32,
the replay's targets are what the search made, and the CUDA rules' net (float16 on the GPU)
and Ray's actors are left as they are. The match against a random player, a check of the net
self-play plays, plays it too; the rated evaluations (GNU Go, the previous checkpoint) play
float32, so that a run's rating chain is the same on every CPU. After each iteration's
training the int8 graph is made again from the new weights, its activation ranges from
CALIBRATION positions of the iteration's own self-play (`loop_calibration`), their komis spread
from one end to the other of those self-play draws, as at the start; `requantize` returns what
that took, which the loop records beside the iteration's time (metrics `quantize_seconds`).
"""
from __future__ import annotations

import numpy as np

from kernels.go_batch import resolve_backend, with_komi_plane
from training.config import Config
from training.inference_choice import InferenceChoice, calibration_komis, choose_inference

CALIBRATION = 512


def selfplay_choice(config: Config, model, log) -> InferenceChoice:
    """The self-play net's precision for `config` and the trainer's `model` now."""
    if config.inference == "float32":
        return InferenceChoice("float32", "asked for")
    if config.workers or resolve_backend(config.backend) == "cuda":
        return InferenceChoice("float32", "int8 is for self-play on the CPU")
    from architectures.array_net import keras_named_weights
    choice = choose_inference(config.inference, keras_named_weights(model), config,
                              batch_size=config.num_games, log=log)
    log(f"self-play net: {choice.describe()}")
    return choice


def int8_net(choice: InferenceChoice, model, config: Config):
    """The int8 self-play net following the trainer's `model` (OnnxNet.following)."""
    from architectures.onnx_net import OnnxNet
    return OnnxNet.following(model, config.num_games, precision="int8",
                             calibration=choice.calibration)


def requantize(net, batch, config: Config, rng: np.random.Generator) -> float:
    """Make `net`'s int8 graph from the trainer's new weights, calibrated on
    `loop_calibration`'s planes; the seconds it took."""
    net.calibrate(loop_calibration(batch, config, rng))
    before = net.quantize_seconds
    net.follow()
    return net.quantize_seconds - before


def loop_calibration(batch, config: Config, rng: np.random.Generator) -> np.ndarray:
    """float32 calibration planes: CALIBRATION positions of `batch` (the iteration's self-play:
    stored planes, and komi for the side to move), for a net that reads the komi each given a
    komi of `calibration_komis`, from one end to the other of those self-play draws, half of
    them for the other side to move. MinMax ranges need the ends, and the positions' own komis end
    wherever the sample's games happened to: calibrated on them, the net of 3 iterations in 16
    of a go-on run misread komis past 20 points by 0.07-0.44 in its value, towards an even
    game (docs/RESULTS.md, thirty-third session)."""
    count = min(CALIBRATION, len(batch.planes))
    rows = np.sort(rng.choice(len(batch.planes), count, replace=False))
    planes = np.asarray(batch.planes[rows], dtype=np.float32)
    if not config.komi_input:
        return planes
    komis = calibration_komis(config, (count + 1) // 2)     # each for either side to move
    own = np.concatenate([komis, -komis])[:count]
    return with_komi_plane(planes, rng.permutation(own))
