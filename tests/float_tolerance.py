"""How far two float evaluations of one computation may differ by round-off alone, from the
arithmetic rather than from what one machine happened to print.

Two implementations of the same net (Keras, the folded inference graph, ONNX Runtime, the
array net; oneDNN's kernels or Eigen's, AVX2 or AVX-512) sum the same products in other
orders. A sum of n products computed in floating point with unit round-off u = eps/2 is off
by at most gamma(n) = n*u / (1 - n*u) times the sum of the products' absolute values (the
standard worst-case bound). Along a net the error of one layer is carried into the next, so a
logit is off by at most gamma(D) times its magnitude, where D, the accumulation depth, counts
the products summed along the longest path from the input planes to it:

    stem:            9 * input_planes
    each block:      2 * 9 * filters          (two 3x3 convolutions)
    policy head:     filters + 2 * N*N        (1x1 convolution to 2 channels, dense)
    value head:      filters + N*N + hidden   (1x1 convolution, dense, dense)

(batch norm, bias and ReLU add a few operations each, far below a convolution's sums; global
pooling's mean over N*N points is a shorter sum than the dense layer after it.)

What the tests compare are softmax probabilities and tanh values, so the logit bound becomes:
    policy: p = softmax(z), so |dp_i| <= 2 * p_i * max|dz|, plus the softmax's own sum of
            N*N+1 terms; an entry near underflow may differ by twice float32's smallest
            normal (UNDERFLOW32);
    value:  v = tanh(y), so |dv| <= (1 - v^2) * |dy| <= |dy|, plus tanh's own rounding
            (4 ulp of 1: vectorised tanh is not correctly rounded).
The magnitude a logit's error scales with is the logits' spread (read back from the
reference's log-probabilities) and, for the value, |atanh(v)|, each at least 1.

Besides the elementwise bounds, `assert_same_net_answers` checks what a user notices: the
same best move wherever the reference's best move leads the next one by more than the bound.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

EPS32 = float(np.finfo(np.float32).eps)
EPS16 = float(np.finfo(np.float16).eps)
TINY32 = float(np.finfo(np.float32).tiny)
# Near the smallest normal, a vectorised exp (oneDNN's, Eigen's) builds 2^n from the exponent
# field and flushes to zero once n would leave the normal range: a probability below twice
# the smallest normal may be 0 in one implementation and not in another (seen with oneDNN on:
# 2.2e-38 against 0).
UNDERFLOW32 = 2 * TINY32


def gamma(terms: int, eps: float = EPS32) -> float:
    """The worst-case relative error of a sum of `terms` products (u = eps / 2)."""
    unit = terms * eps / 2
    if unit >= 1:
        raise ValueError(f"{terms} terms at eps {eps} leave no bound (n*u >= 1)")
    return unit / (1 - unit)


def accumulation_depths(config) -> tuple[int, int]:
    """(policy depth, value depth): products summed from the planes to the policy logits and
    to the value's pre-tanh output, for a net of `config`'s shape (a Config, or anything with
    board_size, input_planes, blocks, filters and value_hidden). The score head reads the
    value's hidden layer (the value depth), the ownership head the trunk through one 1x1
    convolution (`trunk_depth(config) + config.filters`)."""
    points = config.board_size ** 2
    trunk = trunk_depth(config)
    return (trunk + config.filters + 2 * points,
            trunk + config.filters + points + config.value_hidden)


def trunk_depth(config) -> int:
    return 9 * config.input_planes + config.blocks * 2 * 9 * config.filters


def assert_head_close(actual, desired, depth: int, *, tanh: bool = False,
                      eps: float = EPS32) -> None:
    """One head's outputs of two evaluations of a net agree within the round-off of `depth`
    products, relative to the magnitude of the head's pre-activation outputs (at least 1);
    `tanh`: the outputs went through tanh, whose slope is at most 1 (4 ulp of its own)."""
    actual, desired = np.asarray(actual, np.float64), np.asarray(desired, np.float64)
    assert actual.shape == desired.shape
    raw = np.arctanh(np.clip(desired, -1 + EPS32, 1 - EPS32)) if tanh else desired
    allowed = gamma(depth, eps) * max(1.0, float(np.abs(raw).max(initial=0))) + 4 * EPS32
    worst = float(np.abs(actual - desired).max(initial=0))
    assert worst <= allowed, f"differ by {worst:.3g}, beyond the round-off bound {allowed:.3g}"


def model_shape(model) -> SimpleNamespace:
    """The shape fields `accumulation_depths` reads, from a Keras model that
    architectures.resnet.build_model built (its layer names)."""
    names = {layer.name for layer in model.layers}
    return SimpleNamespace(board_size=int(model.input_shape[1]),
                           input_planes=int(model.input_shape[-1]),
                           blocks=sum(1 for name in names if name.endswith("_add")
                                      and name.startswith("block")),
                           filters=int(model.get_layer("stem_conv").filters),
                           value_hidden=int(model.get_layer("value_hidden").units))


def assert_outputs_close(outputs, desired_outputs, config) -> None:
    """Every raw output of two evaluations of nets that compute the same function (a net and
    the same net grown, a Keras pass and the folded inference pass) agrees within the
    round-off of the deeper of the two heads' sums, `config` being the larger net's shape."""
    depth = max(accumulation_depths(config))
    for output, desired in zip(outputs, desired_outputs):
        assert_head_close(np.asarray(output), np.asarray(desired), depth)


def logit_spread(policy: np.ndarray) -> np.ndarray:
    """Each row's logit spread (max - min over the moves not underflowed), at least 1."""
    safe = np.where(policy > TINY32, policy, np.nan).astype(np.float64)
    logs = np.log(safe)
    spread = np.nanmax(logs, axis=1) - np.nanmin(logs, axis=1)
    return np.maximum(spread, 1.0)


def net_bounds(config, desired_policy: np.ndarray, desired_value: np.ndarray, *,
               eps: float = EPS32) -> tuple[np.ndarray, np.ndarray]:
    """(per-row logit error bound, per-row value error bound) for two evaluations of a net of
    `config`'s shape at unit round-off eps/2."""
    policy_depth, value_depth = accumulation_depths(config)
    relative_policy, relative_value = gamma(policy_depth, eps), gamma(value_depth, eps)
    value = np.clip(np.asarray(desired_value, np.float64), -1 + EPS32, 1 - EPS32)
    value_scale = np.maximum(np.abs(np.arctanh(value)), 1.0)
    return relative_policy * logit_spread(desired_policy), relative_value * value_scale


def assert_same_net_answers(policy, value, desired_policy, desired_value, config, *,
                            eps: float = EPS32) -> None:
    """Two evaluations of one net agree within round-off (module docstring), and pick the same
    best move wherever the reference's choice is clear by more than the bound."""
    policy = np.asarray(policy, np.float64)
    desired_policy = np.asarray(desired_policy, np.float64)
    value = np.asarray(value, np.float64).reshape(-1)
    desired_value = np.asarray(desired_value, np.float64).reshape(-1)
    assert policy.shape == desired_policy.shape and value.shape == desired_value.shape
    if not len(policy):
        return
    logit_error, value_error = net_bounds(config, desired_policy, desired_value, eps=eps)
    softmax_sum = gamma(policy.shape[1] + 4, max(eps, EPS32))
    allowed = (np.maximum(policy, desired_policy) * (2 * logit_error[:, None] + softmax_sum)
               + UNDERFLOW32)
    excess = np.abs(policy - desired_policy) - allowed
    worst = np.unravel_index(np.argmax(excess), excess.shape)
    assert (excess <= 0).all(), (
        f"policy {worst}: {policy[worst]!r} against {desired_policy[worst]!r}, beyond the "
        f"round-off bound {allowed[worst]:.3g} (logit bound {logit_error[worst[0]]:.3g})")
    value_allowed = value_error * (1 - np.minimum(desired_value ** 2, 1)) + 4 * EPS32
    value_excess = np.abs(value - desired_value) - value_allowed
    row = int(np.argmax(value_excess))
    assert (value_excess <= 0).all(), (
        f"value {row}: {value[row]!r} against {desired_value[row]!r}, beyond the round-off "
        f"bound {value_allowed[row]:.3g}")
    ranked = np.sort(np.log(np.maximum(desired_policy, TINY32)), axis=1)
    clear = ranked[:, -1] - ranked[:, -2] > 4 * logit_error + softmax_sum
    assert (policy.argmax(axis=1)[clear] == desired_policy.argmax(axis=1)[clear]).all()
