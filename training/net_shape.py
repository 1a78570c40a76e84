"""The shape of a stored net read off its weights alone: the config fields that shape it
(Config.SHAPE_FIELDS) from the "model.NNNN" arrays of a model file or checkpoint, without
TensorFlow. The run directory asks it when a run's config.json is gone; the net loader when a
run that grew on schedule holds checkpoints of several shapes. It sits below both, so that
neither has to reach up into the other.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from architectures.array_net import expected_shapes, weight_names
from kernels.go_batch import feature_planes


def net_shape(arrays: dict[str, np.ndarray], history: int | None = None) -> dict:
    """The config fields that shape a net (Config.SHAPE_FIELDS) read off the "model.NNNN"
    arrays of a model file or checkpoint: a run whose config.json is gone still knows its net.
    A plane count can mean two inputs (2h+5 planes: history h with the komi plane, or history
    h-3 with the extra planes): `history`, the run's, then decides (only then: a run whose
    config.json is gone may have another history than the command line's). ValueError when
    the arrays fit no `resnet.build_model` net, or fit two and no history tells them apart."""
    stored = [arrays[key] for key in sorted(key for key in arrays if key.startswith("model."))]
    ambiguous = False
    for aux_heads, reply_head in ((False, False), (True, False), (True, True)):
        for global_pooling in (False, True):
            heads = (aux_heads, global_pooling, reply_head)
            trunk_free = len(weight_names(0, *heads))
            per_block = len(weight_names(1, *heads)) - trunk_free
            blocks, rest = divmod(len(stored) - trunk_free, per_block)
            if blocks < 0 or rest:
                continue
            weights = dict(zip(weight_names(blocks, *heads), stored))
            stem, logits = weights["stem_conv.kernel"], weights["policy_logits.kernel"]
            if stem.ndim != 4 or logits.ndim != 2:
                continue
            planes = stem.shape[2]
            inputs = [(h, extra, komi) for komi in (False, True) for extra in (False, True)
                      for h in range(planes) if feature_planes(h, extra, komi) == planes]
            if len(inputs) > 1 and history is not None:
                inputs = [found for found in inputs if found[0] == history]
            if len(inputs) != 1:
                ambiguous = ambiguous or len(inputs) > 1
                continue
            (h, extra, komi), = inputs
            board_size = int(round((logits.shape[1] - 1) ** 0.5))
            shape = {"board_size": board_size, "history": h,
                     "extra_features": extra, "komi_input": komi, "blocks": blocks,
                     "filters": int(stem.shape[3]),
                     "value_hidden": int(weights["value_hidden.kernel"].shape[-1]),
                     "aux_heads": aux_heads, "global_pooling": global_pooling,
                     "reply_head": reply_head}
            expected = expected_shapes(SimpleNamespace(**shape, input_planes=planes))
            if all(weights[name].shape == size for name, size in expected.items()):
                return shape
    if ambiguous:
        raise ValueError("its input planes fit two inputs of this project; the run's history "
                         "decides between them")
    raise ValueError("its arrays fit no net of this project")
