"""The net in int8 on the CPU: ONNX Runtime's QDQ graph of the search's net (policy and value),
the CPU features that make it pay, and how closely it answers as float32 does.

    graph = quantized_graph(weights, board_size, input_planes, name, calibration)
    scores = agreement(float32_net, int8_net, planes)   # top1, top1_clear, prob_lost, value_mae
    gate_failures(scores)                                # [] when int8 may play by default

Quantization is static: per-channel int8 weights, uint8 activations whose ranges (MinMax) come
from `calibration`, planes of positions the net itself played (training/inference_choice.py).
Only the search's graph is quantized: on a CPU with VNNI every layer but the value head's
two dense layers, otherwise only the residual tower, with its global pooling layer where the
net has one (`float32_layers`: no gate has been measured for such a net yet; the gate at load
judges each); the side graphs (score, ownership) stay float32.

The gate by agreement (the match against float32, benchmarks/bench_quantized.py --match, is
the third condition, measured per model and recorded in benchmarks/README.md): the Gumbel-
trained net's priors are flat, so the top move over all positions is the wrong question
(31% of the shipped net's positions have their two best moves within 0.1); the top move
where float32's two best are CLEAR_GAP or more apart, and the value, are the right ones.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from architectures.onnx_export import onnx_graph

INFERENCES = ("auto", "float32", "int8", "bf16")
CLEAR_GAP = 0.1
GATE_TOP1_CLEAR = 0.98
GATE_VALUE_MAE = 0.05
CALIBRATION_BATCH = 64
# The products and sums are quantized; the heads' Softmax and Tanh stay float32, so the
# policy is a distribution (a uint8 softmax moves in steps of 1/255 and loses small priors)
# and the value keeps its resolution. A quantized Relu is removed: the uint8 range of the
# convolution or sum before it starts at 0, which is the Relu. Left out, each Relu ran in
# float between a DequantizeLinear and a QuantizeLinear (two Relus a block, 32 conversions a
# call in the shipped net, and each a second rounding): with it in, that net's int8 graph
# ran 1.15-1.3x faster and agreed more closely (value error 0.029 against 0.032 on
# tests/data, on a CPU with VNNI).
QUANTIZED_OPS = ["Conv", "Gemm", "MatMul", "Add", "Relu"]
# Layers kept in float32 without VNNI (their Conv or Gemm; the names of
# architectures/array_net.py); with VNNI only VALUE_DENSE (`float32_layers`). The
# stem reads the planes: 0/1 planes at the top of one uint8 range, beside the komi plane, a
# real number that range rounds. Without VNNI, ONNX Runtime sums uint8 x int8 products in
# pairs into int16 (AVX2's vpmaddubsw), and the stem's large inputs saturated those sums; the
# tower's activations, mostly small after ReLU, do not. The heads turn the tower's last
# activations into the prior and the value that the gate judges, for a few per cent of the
# products. The shipped net on tests/data's positions (calibrated on 256, checked on 541), on
# a Zen 3 (AVX2, no VNNI): with every layer quantized, top-1 where the best move is clear
# 0.779 and value error 0.208 (0.942 and 0.064 with 7-bit weights, which it then used; 0.988
# and 0.050 with ONNX Runtime's graph optimisations off, its QDQ graph in float: the exact
# sums VNNI computes); with the stem and the heads in float32, 1.000 and 0.032 (the same in
# float), at 1.21x float32's speed there against 1.41x (two threads, batch 128). With VNNI
# the sums are exact and nothing saturates: there every layer in int8 kept the gate (0.991
# and 0.037) and ran 2.9x float32 at batch 128 on one core and 2.1-2.5x on two threads,
# against 2.3x and 1.9x with these kept.
FLOAT32_LAYERS = frozenset({"stem_conv", "policy_conv", "policy_logits", "value_conv",
                            "value_hidden", "value"})
# The value head's dense layers, kept in float32 with VNNI too. Their last output is the value
# before its Tanh, one number whose uint8 range spans the whole game: a step of that range
# moves the value most where it is near 0, in the positions still in doubt. With them in
# int8, the loop's graph of a net from zero (models/9x9_cpu_zero.npz at c8433d2) read a
# value error of 0.052-0.057 at komi 5 on tests/data (the positions nearest an even game
# there), over the gate's 0.05, and 0.026-0.030 over all komis; kept, 0.039-0.049 and
# 0.018-0.019, at a speed that paired timings could not tell apart (benchmarks/README.md,
# 2026-12-07). The whole value head, its 1x1 convolution too, gained little more and cost
# 3-7%.
VALUE_DENSE = frozenset({"value_hidden", "value"})
# CPU features (Linux /proc/cpuinfo names) under which int8 matrix products run natively.
VNNI_FLAGS = {"avx512_vnni": "AVX-512 VNNI", "avx_vnni": "AVX-VNNI"}


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags as Linux names them; empty where /proc/cpuinfo is not there."""
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def vnni_name(flags: frozenset[str]) -> str | None:
    """The name of the CPU's int8 dot-product instructions, or None without them."""
    return next((name for flag, name in VNNI_FLAGS.items() if flag in flags), None)


def float32_layers(flags: frozenset[str]) -> frozenset[str]:
    """The layers a CPU with these flags keeps in float32: VALUE_DENSE with VNNI, else
    FLOAT32_LAYERS (its uint8 x int8 pair sums would saturate on the stem's inputs)."""
    return VALUE_DENSE if vnni_name(flags) else FLOAT32_LAYERS


def layer_of(node) -> str | None:
    """The layer (architectures/array_net.py's name) whose weights an ONNX Conv or Gemm node
    of `onnx_graph` multiplies by; None for other nodes. A node is known by its weights' layer
    because quant_pre_process renames folded weights."""
    return node.input[1].split(".")[0] if node.op_type in ("Conv", "Gemm") else None


def search_layers(graph) -> frozenset[str]:
    """The layers of a search graph that `quantized_graph` can keep in float32."""
    return frozenset(filter(None, map(layer_of, graph.graph.node)))


def quantized_graph(weights: dict[str, np.ndarray], board_size: int, input_planes: int,
                    name: str, calibration: np.ndarray, kept: frozenset[str] | None = None):
    """The search graph's (policy, value) static int8 QDQ model, its activation ranges from
    `calibration` (float32 planes (k, N, N, C), k >= 1), the layers `kept` (default: this
    CPU's `float32_layers`) in float32."""
    import onnx
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)
    from onnxruntime.quantization.shape_inference import quant_pre_process

    calibration = np.ascontiguousarray(calibration, dtype=np.float32)
    if calibration.ndim != 4 or len(calibration) == 0:
        raise ValueError(f"calibration must be planes (k, N, N, C) with k >= 1, got shape "
                         f"{calibration.shape}")

    class Batches(CalibrationDataReader):
        def __init__(self):
            self.batches = iter([{"planes": calibration[start:start + CALIBRATION_BATCH]}
                                 for start in range(0, len(calibration), CALIBRATION_BATCH)])

        def get_next(self):
            return next(self.batches, None)

    if kept is None:
        kept = float32_layers(cpu_flags())
    graph = onnx_graph(weights, board_size, input_planes, name)
    excluded = [node.name for node in graph.graph.node if layer_of(node) in kept]
    with tempfile.TemporaryDirectory(prefix="int8-") as folder:
        source, prepared, target = (Path(folder) / f"{stem}.onnx"
                                    for stem in ("float32", "prepared", "int8"))
        onnx.save(graph, source)
        quant_pre_process(str(source), str(prepared), skip_symbolic_shape=True)
        quantize_static(str(prepared), str(target), Batches(), quant_format=QuantFormat.QDQ,
                        per_channel=True, weight_type=QuantType.QInt8,
                        activation_type=QuantType.QUInt8, op_types_to_quantize=QUANTIZED_OPS,
                        nodes_to_exclude=excluded)
        return onnx.load(target)


def agreement(reference, other, planes: np.ndarray) -> dict[str, float]:
    """How `other` (an evaluator: planes -> (policy, value)) answers beside `reference` on
    `planes`: top1 (the share of positions with the same most likely move), top1_clear (the
    same where the reference's two best moves are CLEAR_GAP or more apart; 1 where there is no
    such position), prob_lost (the reference's probability of its best move minus that of the
    other's best, on average) and value_mae."""
    policy, value = reference(planes)
    other_policy, other_value = other(planes)
    best, other_best = policy.argmax(1), other_policy.argmax(1)
    ordered = np.sort(policy, axis=1)
    clear = ordered[:, -1] - ordered[:, -2] >= CLEAR_GAP
    same = best == other_best
    rows = np.arange(len(policy))
    return {"top1": float(same.mean()),
            "top1_clear": float(same[clear].mean()) if clear.any() else 1.0,
            "prob_lost": float((policy[rows, best] - policy[rows, other_best]).mean()),
            "value_mae": float(np.abs(value - other_value).mean())}


def gate_failures(scores: dict[str, float]) -> list[str]:
    """What keeps a quantized net from playing by default ([] when nothing does)."""
    failures = []
    if scores["top1_clear"] < GATE_TOP1_CLEAR:
        failures.append(f"top-1 where the best move is clear {scores['top1_clear']:.3f} < "
                        f"{GATE_TOP1_CLEAR}")
    if scores["value_mae"] > GATE_VALUE_MAE:
        failures.append(f"value error {scores['value_mae']:.3f} > {GATE_VALUE_MAE}")
    return failures
