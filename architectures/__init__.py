"""The policy-value net: model (resnet), compiled inference, training step. See README.md.

TensorFlow's log level is left to the user. Setting TF_CPP_MIN_LOG_LEVEL from a library would
change the environment of every subprocess, and in TF 2.21 it does not even hide the two
"oneDNN custom operations are on" lines printed at import (they are logged before absl is
initialised; measured with levels 2 and 3): every module here loads TensorFlow through
`quiet_tensorflow.load_tensorflow`, which holds those start-up lines back. oneDNN stays on and
XLA off: on the 2-core AVX-512 machines XLA ran 15-45% slower and oneDNN off 20-55% slower.

The names below load on first use (PEP 562), so `architectures.array_net`, the net's
TensorFlow-free inference pass, imports without TensorFlow: the GPU machines self-play on
have none.
"""
import importlib

_HOMES = {"CompiledNet": "inference", "DeviceTensor": "inference", "mask_policy": "inference",
          "net_device": "inference", "build_model": "resnet", "seed_initial_weights": "resnet",
          "Trainer": "train_step"}

__all__ = sorted(_HOMES)


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module 'architectures' has no attribute {name!r}")
    return getattr(importlib.import_module(f"architectures.{_HOMES[name]}"), name)
