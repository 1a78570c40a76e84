"""The policy-value net: model (resnet), compiled inference, training step. See README.md.

TensorFlow's log level is left to the user. Setting TF_CPP_MIN_LOG_LEVEL from a library would
change the environment of every subprocess, and in TF 2.21 it does not even hide the two
"oneDNN custom operations are on" lines printed at import (they are logged before absl is
initialised; measured with levels 2 and 3). oneDNN stays on and XLA off: on the 2-core
AVX-512 machines XLA ran 15-45% slower and oneDNN off 20-55% slower.
"""
from architectures.inference import CompiledNet, DeviceTensor, mask_policy, net_device
from architectures.resnet import build_model
from architectures.training import Trainer

__all__ = ["CompiledNet", "DeviceTensor", "Trainer", "build_model", "mask_policy", "net_device"]
