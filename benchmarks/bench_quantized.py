"""Quantized CPU inference of a model file: speed and accuracy against float32, in one run.

The int8 net is the one `--inference int8` plays on this CPU, from the int8 cache or made
as a front end makes it (training/inference_choice.py: static quantization, ONNX Runtime's
QDQ format, per-channel int8 weights, uint8 activations with MinMax ranges from the net's own
play over the komis its training drew, every layer in int8 on a CPU with VNNI but the value
head's dense layers, else the stem and the heads in float32; architectures/quantized.py).
Positions of the model's own search self-play (float32 ONNX Runtime, its own search
settings, komis and handicaps), none of them calibrated on, measure it. Each back end is
timed side by side at each batch (median of repeats, alternating), and compared with float32
on the same positions:

    top1        the share of positions whose most likely move is float32's
    top1_clear  the same where float32's two best moves are 0.1 or more apart
    prob_lost   float32's probability of its best move minus that of the quantized best move
    value_mae   the mean absolute difference of the value (in [-1, 1])

Back ends: `ort_fp32` (what self-play runs), `ort_int8` (the QDQ model in ONNX Runtime),
`ort_int8_also` with `--also-kept LAYERS` (the same calibration, those layers in float32
instead of this CPU's: the paired measurement behind a recipe), and when the `openvino`
package is installed `ov_fp32` and `ov_int8` (the same two models compiled by OpenVINO)
and `ov_bf16` where the CPU reports BF16. The CPU's instruction sets that matter (AVX-512,
VNNI, BF16) are printed first: they differ between machines.

    .venv/bin/python benchmarks/bench_quantized.py [--model models/9x9.npz] [--positions 3000]
        [--match GAMES --match-simulations SIMS] [--also-kept none|LAYER,LAYER...]

`--match` then plays the int8 net (ONNX Runtime) against the float32 one, each searching SIMS
simulations a move, colours alternating over random two-move openings (games/match_runner.py), and
prints the int8 side's score with its Wilson interval.

Last line: `quantized MODEL b128 fp32_per_s=X best=NAME per_s=Y speedup=Y/X top1=T value_mae=M`.
"""
from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from architectures.onnx_export import (onnx_graph, onnxruntime_session,  # noqa: E402
                                       session_evaluator)
from architectures.quantized import (agreement, cpu_flags, quantized_graph,  # noqa: E402
                                     search_layers)
from games.selfplay import SelfPlay  # noqa: E402
from kernels.go_batch import with_komi_plane  # noqa: E402
from training.inference_choice import choose_inference  # noqa: E402
from training.nets import read_named_weights  # noqa: E402
from training.options import OneLineParser  # noqa: E402

CPU_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16", "amx_int8")


def describe_cpu() -> str:
    flags = cpu_flags()
    return " ".join(f"{flag}={'yes' if flag in flags else 'no'}" for flag in CPU_FLAGS)


def selfplay_positions(config, evaluate, count: int) -> np.ndarray:
    batch = SelfPlay(config.overridden(num_games=128, backend="cpu"), evaluate, seed=7).play(count)
    return (with_komi_plane(batch.planes, batch.komi) if config.komi_input
            else batch.planes.astype(np.float32))


def openvino_nets(paths: dict[str, Path]) -> dict:
    try:
        import openvino
    except ImportError:
        print("openvino is not installed: its rows are skipped")
        return {}
    core = openvino.Core()
    capabilities = core.get_property("CPU", "OPTIMIZATION_CAPABILITIES")
    print(f"OpenVINO {openvino.__version__}: CPU capabilities {', '.join(capabilities)}")
    plans = [("ov_fp32", paths["fp32"], "f32"), ("ov_int8", paths["int8"], None)]
    if "BF16" in capabilities:
        plans.append(("ov_bf16", paths["fp32"], "bf16"))
    nets = {}
    for name, path, precision in plans:
        settings = {"PERFORMANCE_HINT": "LATENCY"}
        if precision:
            settings["INFERENCE_PRECISION_HINT"] = precision
        compiled = core.compile_model(str(path), "CPU", settings)
        request = compiled.create_infer_request()

        def evaluate(planes, compiled=compiled, request=request):
            results = request.infer({0: np.ascontiguousarray(planes, np.float32)})
            return results[compiled.outputs[0]], np.asarray(results[compiled.outputs[1]]).reshape(-1)
        nets[name] = evaluate
    return nets


# --store plays STORE_SPREAD times the positions it keeps (in whole games, so a little more)
# and keeps that many, evenly spaced: the first games to finish are a few short ones (640
# positions were 9 games at komis 5-10), and the tests calibrate on the first 256 stored
# positions and judge on the rest, so each part must hold many games and komis.
STORE_SPREAD = 12


def spread(positions: np.ndarray, count: int) -> np.ndarray:
    """`count` of `positions`, evenly spaced, in their order."""
    return positions[np.linspace(0, len(positions) - 1, min(count, len(positions))).astype(int)]


def store_positions(path: Path, positions: np.ndarray, komi_input: bool) -> None:
    """The positions as 0/1 uint8 planes (and the komi plane's value apart), compressed."""
    stones = positions[..., :-1] if komi_input else positions
    assert np.isin(stones, (0, 1)).all(), "stone planes must be 0/1"
    komi = positions[:, 0, 0, -1] if komi_input else np.zeros(len(positions), np.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    with open(temporary, "wb") as file:
        np.savez_compressed(file, planes=stones.astype(np.uint8), komi_plane=komi,
                            komi_input=np.array(komi_input))
    temporary.replace(path)
    print(f"{len(positions)} positions written to {path}")


def also_kept(text: str, proto, parser) -> frozenset[str]:
    """--also-kept's layers: `none`, or names of the search graph's convolution and dense
    layers (the score and ownership heads are not in it)."""
    if text == "none":
        return frozenset()
    layers = search_layers(proto)
    kept = frozenset(part.strip() for part in text.split(","))
    unknown = sorted(kept - layers)
    if unknown:
        parser.error(f"--also-kept: no layer {', '.join(unknown)} in this net's search graph "
                     f"(its layers: {', '.join(sorted(layers))})")
    return kept


def rate(net, planes, seconds: float) -> float:
    net(planes)
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        net(planes)
        calls += 1
    return calls * len(planes) / (time.perf_counter() - start)


def main() -> None:
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(ROOT / "models" / "9x9.npz"))
    parser.add_argument("--positions", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--match", type=int, default=0, help="games of int8 against float32")
    parser.add_argument("--store", default=None, metavar="FILE",
                        help="only write --positions self-play positions to FILE (.npz, 0/1 "
                             "planes as uint8 and each one's komi plane value), then stop: the "
                             f"test suite's stored positions (tests/data/), evenly spaced over "
                             f"{STORE_SPREAD} times as many positions of finished games")
    parser.add_argument("--match-simulations", type=int, default=100)
    parser.add_argument("--batches", default="16,64,128",
                        type=lambda text: [int(part) for part in text.split(",")])
    parser.add_argument("--also-kept", default=None, metavar="LAYERS",
                        help="also time and score the int8 graph with these layers in float32 "
                             "(comma-separated layer names, or none: every layer in int8) "
                             "beside this CPU's recipe, on the same calibration")
    args = parser.parse_args()

    import onnx
    config, weights, opened = read_named_weights(args.model)
    path = opened.path
    proto = onnx_graph(weights, config.board_size, config.input_planes, path.stem)
    kept = None if args.also_kept is None else also_kept(args.also_kept, proto, parser)
    print(f"model {path.name}: {config.blocks}x{config.filters}; CPU: {describe_cpu()}")
    with tempfile.TemporaryDirectory() as folder:
        paths = {"fp32": Path(folder) / "fp32.onnx", "int8": Path(folder) / "int8.onnx"}
        onnx.save(proto, paths["fp32"])
        fp32 = session_evaluator(onnxruntime_session(proto))
        if args.store:
            played = selfplay_positions(config, fp32, args.positions * STORE_SPREAD)
            store_positions(Path(args.store), spread(played, args.positions), config.komi_input)
            return
        positions = selfplay_positions(config, fp32, args.positions)
        started = time.perf_counter()
        choice = choose_inference("int8", weights, config, batch_size=None, log=print)
        paths["int8"].write_bytes(choice.int8_graph)
        print(f"{len(positions)} self-play positions measure the int8 net `--inference int8` "
              f"plays here ({choice.describe()}; {time.perf_counter() - started:.1f} s)")
        nets = {"ort_fp32": fp32,
                "ort_int8": session_evaluator(onnxruntime_session(choice.int8_graph))}
        if kept is not None:
            graph = quantized_graph(weights, config.board_size, config.input_planes,
                                    path.stem, choice.calibration, kept=kept)
            print(f"ort_int8_also: in float32 {', '.join(sorted(kept)) or 'none'}")
            nets["ort_int8_also"] = session_evaluator(
                onnxruntime_session(graph.SerializeToString()))
        nets.update(openvino_nets(paths))
        scores = {name: agreement(fp32, net, positions) for name, net in nets.items()}
        for name, score in scores.items():
            print(f"{name}: " + " ".join(f"{key}={value:.4f}" for key, value in score.items()))
        last = {}
        for batch in args.batches:
            planes = np.ascontiguousarray(positions[:batch])
            rates = {name: [] for name in nets}
            for _ in range(args.repeats):
                for name, net in nets.items():
                    rates[name].append(rate(net, planes, 0.5))
            last = {name: statistics.median(values) for name, values in rates.items()}
            print(f"b{batch} positions/s: "
                  + " ".join(f"{name}={value:.0f}" for name, value in last.items()))
        if args.match:
            from games.matches import checkpoint_vs_checkpoint
            match_config = config.overridden(backend="cpu")
            started = time.perf_counter()
            report = checkpoint_vs_checkpoint(match_config, nets["ort_int8"], fp32, args.match,
                                              args.match_simulations, seed=1,
                                              names=("int8", "float32"))
            low, high = report.interval()
            print(f"match int8 vs float32, {args.match_simulations} simulations: "
                  f"{report.wins}-{report.losses}-{report.draws}, score "
                  f"{report.win_rate:.3f} ({low:.3f}-{high:.3f}), {report.distinct_games} "
                  f"distinct games, {time.perf_counter() - started:.0f} s")
    fp32_rate = last["ort_fp32"]
    best = max((name for name in last if name != "ort_fp32"), key=last.get)
    print(f"quantized {path.name} b{args.batches[-1]} fp32_per_s={fp32_rate:.0f} best={best} "
          f"per_s={last[best]:.0f} speedup={last[best] / fp32_rate:.2f} "
          f"top1={scores[best]['top1']:.4f} value_mae={scores[best]['value_mae']:.4f}")


if __name__ == "__main__":
    main()
