"""The precision a net plays in on this machine (`--inference auto|float32|int8|bf16`), chosen
where the net is loaded: machines of one kind differ in CPU, so a choice written on one box
would be wrong on the next.

    choice = choose_inference("auto", weights, config, batch_size=64, log=print)
    choice.precision, choice.reason        # "int8", "this CPU has AVX-512 VNNI"
    net = choice.net(weights, config, name, batch_size)

`auto`:
1. int8 where the CPU has int8 dot products (AVX-512 VNNI or AVX-VNNI);
2. otherwise int8 only if it measured faster than float32 here, at the rows the net is
   called with (median of TIMING_REPEATS alternating timings), else float32;
3. int8 only if it passes the gate by agreement (architectures/quantized.py) on held-out
   positions, else float32.
bf16 is refused in one line: ONNX Runtime, the one inference path, has no bfloat16 CPU kernels
(OpenVINO has, and it is not a requirement), so `auto` never picks it.

Calibration: positions the net plays against itself by its own policy (sampled over the
sensible moves, no search), CALIBRATION_GAMES games side by side from the empty board, each
at its own komi from one end to the other of those the net's self-play drew
(`calibration_komis`), one position per game per move, restarting finished games; the first
CALIBRATION_POSITIONS set the activation ranges, the next GATE_POSITIONS check the gate.

Cache: the int8 graph, its positions, and per CPU its gate scores and timings are kept in
$XDG_CACHE_HOME/batched-go-zero/int8 (else ~/.cache/...), files per set of weights and
recipe (named by a SHA-256 of the format, the shapes, the layers kept in float32 and the
weights: `weights_key`; layout below), written atomically, so later starts take a few
milliseconds. An entry that cannot be read is set aside (renamed *.damaged) with a message
and made again. The KEPT_ENTRIES entries used last are kept (a read marks its entry used): a
training loop makes one at every start, from that start's weights, and a follower (evaluate.py
--follow) one for each checkpoint it plays; a model started in between keeps its entry.
"""
from __future__ import annotations

import hashlib
import json
import os
import statistics
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from architectures.quantized import (agreement, cpu_flags, float32_layers, gate_failures,
                                     vnni_name)
from training.config import Config

CALIBRATION_GAMES = 16
CALIBRATION_POSITIONS = 512
GATE_POSITIONS = 512
TIMING_REPEATS = 5
TIMING_SECONDS = 0.05
FORMAT = 4             # 3: Relu fused; all int8 with VNNI, else the stem and heads float32;
                       # 4: calibrated over the komis the net's self-play drew
KEPT_ENTRIES = 32      # the cache keeps the entries used last (a loop makes one a start)


@dataclass(frozen=True)
class InferenceChoice:
    precision: str                        # "float32" or "int8"
    reason: str                           # why, for the start-up line
    int8_graph: bytes | None = None       # the quantized search graph (serialised ONNX)
    calibration: np.ndarray | None = None

    def describe(self) -> str:
        return f"{self.precision} ({self.reason})"

    def net(self, weights: dict[str, np.ndarray], config: Config, name: str,
            batch_size: int | None):
        from architectures.onnx_net import OnnxNet
        return OnnxNet(weights, config.board_size, config.input_planes, name, batch_size,
                       precision=self.precision, calibration=self.calibration,
                       search_graph=self.int8_graph)


def cache_folder() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "batched-go-zero" / "int8"


def weights_key(weights: dict[str, np.ndarray], config: Config) -> str:
    # The graph depends on the CPU's recipe too: a cache folder shared between machines
    # keeps one entry per recipe.
    recipe = " ".join(sorted(float32_layers(cpu_flags())))
    digest = hashlib.sha256(f"{FORMAT} {config.board_size} {config.input_planes} "
                            f"{recipe}".encode())
    for name in sorted(weights):
        array = np.ascontiguousarray(weights[name])
        digest.update(f"{name} {array.dtype} {array.shape}".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()[:32]


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def calibration_komis(config: Config, count: int) -> np.ndarray:
    """`count` komis, evenly from one end to the other of those the net's self-play drew
    (games/selfplay.py draw_komi: within komi +- its wide_komi_reach with a wide share, else
    3 standard deviations), rounded to half points; all `config.komi` for a net that does not
    read the komi. MinMax ranges need the ends, not the law: calibrated at one komi, every
    layer's uint8 range, the planes' first, clipped the others (the shipped net's value moved
    by 0.46-0.51 at komi 11.5 and 19 when calibrated at 7.5 alone)."""
    from games.selfplay import wide_komi_reach
    reach = 0.0
    if config.komi_input:
        reach = (wide_komi_reach(config.board_size) if config.komi_wide_share
                 else 3 * config.komi_spread)
    return np.round(2 * np.linspace(config.komi - reach, config.komi + reach, count)) / 2


def own_play_positions(net, config: Config, count: int, seed: int = 0) -> np.ndarray:
    """`count` float32 planes of positions `net` played against itself by its policy, its
    CALIBRATION_GAMES games at `calibration_komis` (each keeps its komi through restarts)."""
    from kernels import GoBatch
    n = config.board_size
    go = GoBatch(CALIBRATION_GAMES, n, komi=config.komi, superko=config.superko,
                 history_length=config.history, extra_features=config.extra_features,
                 komi_input=config.komi_input, max_moves=2 * n * n, seed=seed)
    go.set_komi(calibration_komis(config, CALIBRATION_GAMES))
    rng = np.random.default_rng(seed)
    found, total = [], 0
    while total < count:
        planes = np.asarray(go.features(config.history), dtype=np.float32)
        found.append(planes)
        total += len(planes)
        policy, _ = net(planes)
        sensible = go.sensible_moves()
        policy = np.where(sensible, np.maximum(policy, 0), 0).astype(np.float64)
        # A row whose sensible moves all underflowed to 0 picks among them evenly.
        policy = np.where(policy.sum(axis=1, keepdims=True) > 0, policy, sensible)
        policy /= policy.sum(axis=1, keepdims=True)
        moves = (policy.cumsum(axis=1) < rng.random((len(policy), 1))).sum(axis=1)
        go.play(np.minimum(moves, n * n))
        over = go.is_over()
        if over.any():
            go.reset(over)
    return np.concatenate(found)[:count]


def choose_inference(requested: str, weights: dict[str, np.ndarray], config: Config, *,
                     batch_size: int | None, log=print) -> InferenceChoice:
    """The precision `requested` (INFERENCES) resolves to for these weights on this CPU."""
    if requested == "float32":
        return InferenceChoice("float32", "asked for")
    if requested == "bf16":
        raise ValueError("--inference bf16 is not available: ONNX Runtime, the project's "
                         "inference path, has no bfloat16 CPU kernels (use auto, int8 or float32)")
    if requested not in ("auto", "int8"):
        raise ValueError(f"--inference must be auto, float32, int8 or bf16, got {requested!r}")
    if requested == "auto":
        try:
            return _automatic(weights, config, batch_size, log)
        except Exception as error:      # noqa: BLE001 - auto must still play, in float32
            first = (str(error).strip().splitlines() or [""])[0]
            return InferenceChoice("float32", f"the int8 net could not be made: "
                                              f"{type(error).__name__}: {first}")
    entry, here, failures = _gated(weights, config, log)
    reason = "asked for" + (f"; it fails the gate here: {'; '.join(failures)}"
                            if failures else "")
    return InferenceChoice("int8", reason, entry["graph"], entry["calibration"])


def _gated(weights, config: Config, log) -> tuple[dict, dict, list[str]]:
    """(the cache entry, this CPU's record of it, what keeps it from the gate here)."""
    entry = _cached(weights, config, log)
    here = _on_this_cpu(entry, weights, config)
    return entry, here, gate_failures(here["scores"])


def _automatic(weights, config: Config, batch_size: int | None, log) -> InferenceChoice:
    entry, here, failures = _gated(weights, config, log)
    graph, calibration = entry["graph"], entry["calibration"]
    if failures:
        return InferenceChoice("float32", f"int8 refused on this CPU: {'; '.join(failures)}")
    vnni = vnni_name(cpu_flags())
    if vnni:
        return InferenceChoice("int8", f"this CPU has {vnni}", graph, calibration)
    rows = min(batch_size or 64, 256)
    ratio = _measured_ratio(entry, here, weights, config, rows)
    if ratio > 1:
        return InferenceChoice("int8", f"no VNNI, but int8 measured {ratio:.2f}x float32 here "
                                       f"at {rows} rows", graph, calibration)
    return InferenceChoice("float32", f"no VNNI, and int8 measured {ratio:.2f}x float32 here "
                                      f"at {rows} rows")


# ------------------------------------------------------------------------------ the cache
# Per set of weights: KEY.onnx (the int8 graph), KEY.npz (calibration and gate positions) and
# KEY.json {"format", "cpus": {CPU: {"scores": {...}, "timings": {rows: ratio}}}}: CPUs with
# and without VNNI play different graphs (the recipe is in the key), but one graph still
# answers differently on CPUs of one recipe (their kernels sum in other orders, some
# saturate), so the gate is scored on each CPU it runs on.

def _paths(key: str) -> tuple[Path, Path, Path]:
    folder = cache_folder()
    return folder / f"{key}.json", folder / f"{key}.onnx", folder / f"{key}.npz"


def _cached(weights, config: Config, log) -> dict:
    """{"key", "graph", "calibration", "gate", "cpus"}: read, or made and written."""
    key = weights_key(weights, config)
    paths = _paths(key)
    # The record is written last: without it the entry is not (yet) there.
    if paths[0].exists():
        try:
            record = json.loads(paths[0].read_text())
            graph = paths[1].read_bytes()
            with np.load(paths[2]) as arrays:
                calibration = arrays["calibration"].astype(np.float32)
                gate = arrays["gate"].astype(np.float32)
            if not isinstance(record, dict) or record.get("format") != FORMAT or not graph:
                raise ValueError("another format")
            for here in record["cpus"].values():
                if "scores" in here and not {"top1_clear", "value_mae"} <= set(here["scores"]):
                    raise ValueError("a CPU's scores are incomplete")
                dict(here["timings"])
            try:
                os.utime(paths[0])      # used now: pruned after the entries not used since
            except OSError:
                pass
            return {"key": key, "graph": graph, "calibration": calibration, "gate": gate,
                    "cpus": record["cpus"]}
        except (OSError, ValueError, KeyError, TypeError, AttributeError, EOFError,
                zipfile.BadZipFile) as error:
            for path in paths:
                if path.exists():
                    path.replace(path.with_name(path.name + ".damaged"))
            log(f"int8 cache entry {paths[0]} could not be read ({error}): set aside as "
                f"*.damaged, made again")
    return _make(weights, config, key, log)


def _make(weights, config: Config, key: str, log) -> dict:
    from architectures.onnx_net import OnnxNet
    started = time.perf_counter()
    float32 = OnnxNet(weights, config.board_size, config.input_planes, "float32")
    positions = own_play_positions(float32, config, CALIBRATION_POSITIONS + GATE_POSITIONS)
    calibration, gate = positions[:CALIBRATION_POSITIONS], positions[CALIBRATION_POSITIONS:]
    int8 = OnnxNet(weights, config.board_size, config.input_planes, "int8",
                   precision="int8", calibration=calibration)
    # Scored on this CPU now, with the two nets at hand.
    entry = {"key": key, "graph": int8.int8_graph, "calibration": calibration, "gate": gate,
             "cpus": {cpu_key(): {"scores": agreement(float32, int8, gate), "timings": {}}}}
    kept = _write(entry, arrays=True)
    log(f"int8 net made in {time.perf_counter() - started:.1f} s from {len(positions)} "
        f"positions of its own play; " + (f"kept in {cache_folder()}" if kept else
                                          f"not kept: {cache_folder()} cannot be written"))
    return entry


def _on_this_cpu(entry: dict, weights, config: Config) -> dict:
    """This CPU's record of the entry, its gate scores measured now if missing."""
    here = entry["cpus"].setdefault(cpu_key(), {"timings": {}})
    if "scores" not in here:
        from architectures.onnx_net import OnnxNet
        float32 = OnnxNet(weights, config.board_size, config.input_planes, "float32")
        int8 = _int8_net(entry, weights, config)
        here["scores"] = agreement(float32, int8, entry["gate"])
        _write(entry)
    return here


def cpu_key() -> str:
    return f"{cpu_name()} | {' '.join(sorted(f for f in cpu_flags() if 'avx' in f))}"


def _int8_net(entry: dict, weights, config: Config):
    from architectures.onnx_net import OnnxNet
    return OnnxNet(weights, config.board_size, config.input_planes, "int8", precision="int8",
                   calibration=entry["calibration"], search_graph=entry["graph"])


def _write(entry: dict, arrays: bool = False) -> bool:
    """Whether the entry could be written."""
    record_path, graph_path, arrays_path = _paths(entry["key"])
    record = {"format": FORMAT, "cpus": entry["cpus"]}
    try:
        record_path.parent.mkdir(parents=True, exist_ok=True)
        if arrays:
            _prune(record_path.parent, KEPT_ENTRIES - 1)
            _atomic(graph_path, lambda f: f.write(entry["graph"]))
            _atomic(arrays_path, lambda f: np.savez_compressed(
                f, calibration=entry["calibration"], gate=entry["gate"]))
        _atomic(record_path, lambda f: f.write(json.dumps(record, indent=1).encode()))
    except OSError:
        return False    # a cache that cannot be written only costs the next start the same work
    return True


def _prune(folder: Path, keep: int) -> None:
    """Remove all but the `keep` entries used last (their records' times: written, or read)."""
    records = sorted(folder.glob("*.json"), key=lambda path: path.stat().st_mtime, reverse=True)
    for record in records[keep:]:
        for path in (record, record.with_suffix(".onnx"), record.with_suffix(".npz")):
            path.unlink(missing_ok=True)


def _atomic(path: Path, write) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(temporary, "wb") as file:
        write(file)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)


def _measured_ratio(entry: dict, here: dict, weights, config: Config, rows: int) -> float:
    """int8's positions/s over float32's at `rows` rows on this CPU (kept per CPU)."""
    if str(rows) in here["timings"]:
        return float(here["timings"][str(rows)])
    from architectures.onnx_net import OnnxNet
    float32 = OnnxNet(weights, config.board_size, config.input_planes, "float32")
    int8 = _int8_net(entry, weights, config)
    planes = np.resize(entry["calibration"], (rows,) + entry["calibration"].shape[1:])
    rates = {"float32": [], "int8": []}
    for _ in range(TIMING_REPEATS):
        for name, net in (("float32", float32), ("int8", int8)):
            net(planes)
            calls, begun = 0, time.perf_counter()
            while time.perf_counter() - begun < TIMING_SECONDS:
                net(planes)
                calls += 1
            rates[name].append(calls / (time.perf_counter() - begun))
    ratio = statistics.median(rates["int8"]) / statistics.median(rates["float32"])
    here["timings"][str(rows)] = ratio
    _write(entry)
    return ratio
