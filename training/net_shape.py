"""The shape of a checkpoint's net: the config fields that shape it (Config.SHAPE_FIELDS), as
the checkpoint records them (its counters' "net", written since 2026-11-27) or, for older
checkpoints and bare weights, read off its "model.NNNN" arrays, without TensorFlow. The run
directory asks it when a run's config.json is gone; the net loader and the learner when a run
that grew on schedule holds checkpoints of several shapes. It sits below all three, so that
none has to reach up into another.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from architectures.array_net import expected_shapes, weight_names
from kernels.go_batch import feature_planes
from training.config import Config

# The type of each recorded shape field: its default's in Config (all int or bool).
_FIELD_TYPES = {name: type(getattr(Config, name)) for name in Config.SHAPE_FIELDS}


def recorded_shape(counters: dict) -> dict | None:
    """The net shape a checkpoint's counters record, None where they record none (a
    checkpoint from before 2026-11-27); ValueError for a record that is not a whole one."""
    recorded = counters.get("net")
    if recorded is None:
        return None
    if not isinstance(recorded, dict) or set(recorded) != set(_FIELD_TYPES):
        raise ValueError(f"its recorded net shape is not one of the fields "
                         f"{', '.join(_FIELD_TYPES)}")
    for name, kind in _FIELD_TYPES.items():
        value = recorded[name]
        # bool is a kind of int in Python: a count must not be True, a flag must be a bool.
        if type(value) is not kind or (kind is int and value < 0):
            raise ValueError(f"its recorded net shape has {name} {value!r}")
    return dict(recorded)


def checkpoint_shape(state: dict[str, np.ndarray], counters: dict,
                     history: int | None = None) -> dict:
    """The shape of a checkpoint's net: as recorded, once its weights are seen to fit it;
    else read off its weights (net_shape, `history` deciding where the planes fit two
    inputs). ValueError as those raise it, and for a record its weights do not fit."""
    recorded = recorded_shape(counters)
    if recorded is None:
        return net_shape(state, history)
    if not _fits(recorded, _stored_weights(state)):
        raise ValueError("its weights are not the net its counters record")
    return recorded


def _stored_weights(arrays: dict[str, np.ndarray]) -> list[np.ndarray]:
    return [arrays[key] for key in sorted(key for key in arrays if key.startswith("model."))]


def _fits(shape: dict, stored: list[np.ndarray]) -> bool:
    """Whether the "model.NNNN" arrays, in order, are the weights of a net of `shape`."""
    heads = (shape["aux_heads"], shape["global_pooling"], shape["reply_head"])
    names = weight_names(shape["blocks"], *heads)
    if len(names) != len(stored):
        return False
    planes = feature_planes(shape["history"], shape["extra_features"], shape["komi_input"])
    expected = expected_shapes(SimpleNamespace(**shape, input_planes=planes))
    weights = dict(zip(names, stored))
    return all(weights[name].shape == size for name, size in expected.items())


def net_shape(arrays: dict[str, np.ndarray], history: int | None = None) -> dict:
    """The config fields that shape a net (Config.SHAPE_FIELDS) read off the "model.NNNN"
    arrays of a model file or checkpoint: a run whose config.json is gone still knows its net.
    A plane count can mean two inputs (2h+5 planes: history h with the komi plane, or history
    h-3 with the extra planes): `history`, the run's, then decides (only then: a run whose
    config.json is gone may have another history than the command line's). ValueError when
    the arrays fit no `resnet.build_model` net, or fit two and no history tells them apart."""
    stored = _stored_weights(arrays)
    ambiguous: list = []       # the inputs the planes fit, where they fit several
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
            candidates = [(h, extra, komi) for komi in (False, True) for extra in (False, True)
                          for h in range(planes) if feature_planes(h, extra, komi) == planes]
            inputs = candidates
            if len(candidates) > 1 and history is not None:
                inputs = [found for found in candidates if found[0] == history]
            if len(inputs) != 1:
                ambiguous = ambiguous or (candidates if len(candidates) > 1 else [])
                continue
            (h, extra, komi), = inputs
            board_size = int(round((logits.shape[1] - 1) ** 0.5))
            shape = {"board_size": board_size, "history": h,
                     "extra_features": extra, "komi_input": komi, "blocks": blocks,
                     "filters": int(stem.shape[3]),
                     "value_hidden": int(weights["value_hidden.kernel"].shape[-1]),
                     "aux_heads": aux_heads, "global_pooling": global_pooling,
                     "reply_head": reply_head}
            if _fits(shape, stored):
                return shape
    if ambiguous:
        readings = " or ".join(f"history {h}" + (" with the extra planes" if extra else "")
                               + (" with the komi plane" if komi else "")
                               for h, extra, komi in ambiguous)
        neither = f", neither with history {history}" if history is not None else ""
        raise ValueError(f"its input planes fit two inputs of this project ({readings}"
                         f"{neither}); the run's history decides between them (--history)")
    raise ValueError("its arrays fit no net of this project")
