"""The net in int8 on the CPU: ONNX Runtime's QDQ graph of the search's net (policy and value),
the CPU features that make it pay, and how closely it answers as float32 does.

    graph = quantized_graph(weights, board_size, input_planes, name, calibration)
    scores = agreement(float32_net, int8_net, planes)   # top1, top1_clear, prob_lost, value_mae
    gate_failures(scores)                                # [] when int8 may play by default

Quantization is static: per-channel int8 weights, uint8 activations whose ranges (MinMax) come
from `calibration`, planes of positions the net itself played (training/inference_choice.py).
Only the search's graph is quantized; the side graphs (score, ownership) stay float32.

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
# and the value keeps its resolution.
QUANTIZED_OPS = ["Conv", "Gemm", "MatMul", "Add"]
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


def reduced_range(flags: frozenset[str] | None = None) -> bool:
    """Whether int8 weights keep to 7 bits on this CPU: without VNNI, ONNX Runtime multiplies
    uint8 activations by int8 weights in pairs summed into int16 (AVX2's vpmaddubsw), which
    saturates; 7-bit weights keep the sums in range. The shipped net on a Zen 3 (AVX2, no
    VNNI), calibrated on 256 of tests/data's positions of its own self-play and checked on
    the other 541: with 8-bit weights the best move where it is clear agreed with float32's
    on 77.9% of them and the value was off by 0.208 on average; with 7-bit ones, 94.2% and
    0.064 (still short of the gate there)."""
    return vnni_name(cpu_flags() if flags is None else flags) is None


def quantized_graph(weights: dict[str, np.ndarray], board_size: int, input_planes: int,
                    name: str, calibration: np.ndarray, reduce_range: bool | None = None):
    """The search graph's (policy, value) static int8 QDQ model, its activation ranges from
    `calibration` (float32 planes (k, N, N, C), k >= 1); 7-bit weights where `reduce_range`
    (default: `reduced_range()` of this CPU)."""
    if reduce_range is None:
        reduce_range = reduced_range()
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

    with tempfile.TemporaryDirectory(prefix="int8-") as folder:
        source, prepared, target = (Path(folder) / f"{stem}.onnx"
                                    for stem in ("float32", "prepared", "int8"))
        onnx.save(onnx_graph(weights, board_size, input_planes, name), source)
        quant_pre_process(str(source), str(prepared), skip_symbolic_shape=True)
        quantize_static(str(prepared), str(target), Batches(), quant_format=QuantFormat.QDQ,
                        per_channel=True, weight_type=QuantType.QInt8,
                        activation_type=QuantType.QUInt8, reduce_range=reduce_range,
                        op_types_to_quantize=QUANTIZED_OPS)
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
