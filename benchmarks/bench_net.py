"""Net inference against the machine's peak: TensorFlow and ONNX Runtime side by side.

1. The machine's dense float32 peak: a large square matmul through NumPy (BLAS), TensorFlow and
   ONNX Runtime, each the best of several timed calls; the best of the three is the peak.
2. Each preset's net (config.PRESETS; NAME@N is a preset's net on an NxN board), random weights and batch norm statistics: inference through
   `architectures.CompiledNet` (NumPy planes in, policy and value out, as the search calls it)
   with each back end at batch 16, 64 and 128. Repeats alternate the back ends; each figure is
   the median of the repeats, and counts the positions evaluated inside its timed window.
3. FLOPs per position counted from the model's layers (2 per multiply-add of every
   convolution and dense layer; batch norm, adds and activations not counted), so
   GFLOP/s = positions/s * FLOPs, and peak_fraction = that / the peak.

4. The shipped model in ONNX Runtime at batch 128, float32 against its int8 graph (what
   `--inference int8` plays: architectures/quantized.py), on
   planes of its own play, alternating, median of the repeats.

The last two lines are the `cpu` preset at batch 128 on the self-play back end
(`architectures.inference.DEFAULT_BACKEND`) and the shipped model's int8 speed-up:
    net cpu b128 positions_per_s=<X> peak_fraction=<Y>
    net shipped b128 fp32_per_s=<X> quantized_per_s=<Y> speedup=<Y/X>

    .venv/bin/python benchmarks/bench_net.py [--seconds S] [--repeats R] [--presets cpu,paper]
"""
from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from architectures import CompiledNet, build_model  # noqa: E402
from architectures.inference import DEFAULT_BACKEND, onnxruntime_available  # noqa: E402
from training.config import PRESETS  # noqa: E402
from training.options import OneLineParser  # noqa: E402

BATCHES = (16, 64, 128)


def net_flops(model) -> int:
    """FLOPs of one position's forward pass: 2 per multiply-add of each Conv2D and Dense."""
    total = 0
    for layer in model.layers:
        if isinstance(layer, tf.keras.layers.Conv2D):
            height, width, out_channels = layer.output.shape[1:]
            kh, kw, in_channels, _ = layer.kernel.shape
            total += 2 * height * width * kh * kw * in_channels * out_channels
        elif isinstance(layer, tf.keras.layers.Dense):
            total += 2 * int(np.prod(layer.kernel.shape))
    return int(total)


def best_seconds(function, repeats: int) -> float:
    function()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best


def matmul_peak(size: int, repeats: int) -> dict[str, float]:
    """GFLOP/s of a float32 (size x size) @ (size x size) through each library."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    flops = 2 * size ** 3
    results = {"numpy": flops / best_seconds(lambda: a @ b, repeats) / 1e9}
    ta, tb = tf.constant(a), tf.constant(b)
    matmul = tf.function(lambda x, y: tf.matmul(x, y))
    results["tensorflow"] = flops / best_seconds(lambda: matmul(ta, tb).numpy(), repeats) / 1e9
    if onnxruntime_available():
        import onnxruntime
        from onnx import TensorProto, helper
        graph = helper.make_graph(
            [helper.make_node("MatMul", ["a", "b"], ["c"])], "matmul",
            [helper.make_tensor_value_info(name, TensorProto.FLOAT, [size, size]) for name in "ab"],
            [helper.make_tensor_value_info("c", TensorProto.FLOAT, [size, size])])
        proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        session = onnxruntime.InferenceSession(proto.SerializeToString(),
                                               providers=["CPUExecutionProvider"])
        results["onnxruntime"] = flops / best_seconds(
            lambda: session.run(None, {"a": a, "b": b}), repeats) / 1e9
    return results


def randomise_batch_norms(model, rng) -> None:
    """Trained-looking batch norm statistics (fresh ones are the identity)."""
    for layer in model.layers:
        if isinstance(layer, tf.keras.layers.BatchNormalization):
            width = layer.gamma.shape[0]
            layer.gamma.assign(rng.uniform(0.5, 1.5, width).astype(np.float32))
            layer.beta.assign(rng.normal(0, 0.3, width).astype(np.float32))
            layer.moving_mean.assign(rng.normal(0, 0.5, width).astype(np.float32))
            layer.moving_variance.assign(rng.uniform(0.2, 2.0, width).astype(np.float32))


def positions_per_second(net, planes: np.ndarray, seconds: float) -> float:
    """Calls of `net` on `planes` for about `seconds`; positions evaluated in the window / s."""
    calls = 0
    start = time.perf_counter()
    while True:
        net(planes)
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return calls * len(planes) / elapsed


def main() -> None:
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0.5, help="per timed repeat")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--peak-size", type=int, default=4096, help="matmul side for the peak")
    parser.add_argument("--presets", default="cpu,9x9,tiny,paper",
                        help="comma-separated presets; NAME@N is that preset's net on an NxN board")
    args = parser.parse_args()
    backends = ["tensorflow"] + (["onnxruntime"] if onnxruntime_available() else [])
    if len(backends) == 1:
        print("onnxruntime is not installed: TensorFlow only")

    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} before the run; "
          f"TensorFlow {tf.__version__}", flush=True)
    peaks = matmul_peak(args.peak_size, repeats=max(3, args.repeats))
    peak = max(peaks.values())
    print(f"dense float32 matmul {args.peak_size}x{args.peak_size}, best of "
          f"{max(3, args.repeats)}: " + ", ".join(f"{name} {rate:.0f}" for name, rate in
                                                   peaks.items())
          + f" GFLOP/s; peak = {peak:.0f} GFLOP/s", flush=True)

    rng = np.random.default_rng(0)
    summary = None
    print(f"median of {args.repeats} x {args.seconds:g} s, back ends alternating; "
          f"self-play back end: {DEFAULT_BACKEND}")
    print(f"{'preset':>8} {'board':>5} {'net':>6} {'MFLOP/pos':>9} {'batch':>5} "
          + " ".join(f"{name + ' pos/s':>17} {'of peak':>7}" for name in backends)
          + (f" {'ORT/TF':>6}" if len(backends) == 2 else ""))
    for item in args.presets.split(","):
        name, _, board = item.partition("@")
        config = PRESETS[name]
        board_size = int(board) if board else config.board_size
        model = build_model(board_size, config.input_planes, config.blocks, config.filters,
                            value_hidden=config.value_hidden)
        randomise_batch_norms(model, rng)
        flops = net_flops(model)
        nets = {backend: CompiledNet(model, max(BATCHES), backend=backend) for backend in backends}
        for batch in BATCHES:
            planes = (rng.random((batch, board_size, board_size, config.input_planes)) < 0.3
                      ).astype(np.float32)
            for net in nets.values():
                net(planes)
            rates = {backend: [] for backend in backends}
            for _ in range(args.repeats):
                for backend, net in nets.items():
                    rates[backend].append(positions_per_second(net, planes, args.seconds))
            medians = {backend: statistics.median(values) for backend, values in rates.items()}
            row = " ".join(f"{medians[b]:17,.0f} {medians[b] * flops / 1e9 / peak:7.3f}"
                           for b in backends)
            if len(backends) == 2:
                row += f" {medians['onnxruntime'] / medians['tensorflow']:6.2f}"
            print(f"{item:>8} {board_size:>5} {config.blocks}x{config.filters:<4} "
                  f"{flops / 1e6:9.2f} {batch:5d} {row}", flush=True)
            if item == "cpu" and batch == 128:
                chosen = DEFAULT_BACKEND if DEFAULT_BACKEND in medians else "tensorflow"
                summary = (medians[chosen], medians[chosen] * flops / 1e9 / peak)
    shipped = shipped_rates(args.repeats, args.seconds)
    print(f"load average {os.getloadavg()[0]:.2f} after the run")
    if summary:
        print(f"net cpu b128 positions_per_s={summary[0]:.0f} peak_fraction={summary[1]:.3f}")
    if shipped:
        fp32, int8 = shipped
        print(f"net shipped b128 fp32_per_s={fp32:.0f} quantized_per_s={int8:.0f} "
              f"speedup={int8 / fp32:.2f}")


def shipped_rates(repeats: int, seconds: float) -> tuple[float, float] | None:
    """(float32, int8) positions/s of the shipped model at batch 128 in ONNX Runtime."""
    from architectures.onnx_net import OnnxNet
    from training.inference_choice import choose_inference
    from training.nets import SHIPPED_MODEL, read_named_weights
    if not (SHIPPED_MODEL.is_file() and onnxruntime_available()):
        return None
    config, weights, _ = read_named_weights(SHIPPED_MODEL)
    choice = choose_inference("int8", weights, config, batch_size=128, log=print)
    nets = {"float32": OnnxNet(weights, config.board_size, config.input_planes, "float32", 128),
            "int8": choice.net(weights, config, "int8", 128)}
    planes = np.resize(choice.calibration, (128,) + choice.calibration.shape[1:])
    rates = {name: [] for name in nets}
    for _ in range(repeats):
        for name, net in nets.items():
            net(planes)
            rates[name].append(positions_per_second(net, planes, seconds))
    return statistics.median(rates["float32"]), statistics.median(rates["int8"])


if __name__ == "__main__":
    main()
