"""A Keras model's weights version: whoever changes a model's weights (a training step, a
loaded state, a hand assignment) calls `weights_changed(model)`, and every net that plays
from a copy of those weights (CompiledNet's ONNX Runtime session) compares the version it
copied with `weights_version(model)` before each call. Backend-free, so the trainer needs no
TensorFlow to say so."""
from __future__ import annotations


def weights_changed(model) -> None:
    """Tell every copy of `model`'s weights that they are stale."""
    model._bgz_weights_version = getattr(model, "_bgz_weights_version", 0) + 1


def weights_version(model) -> int:
    return getattr(model, "_bgz_weights_version", 0)
