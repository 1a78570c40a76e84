"""Self-play without training: a model file's net plays itself, and the positions are written
as replay chunks that a training run takes in with `bp_tree.py --selfplay-from DIR`.

    python3 selfplay_chunks.py --model models/9x9.npz --output DIR --positions 300000 \
        [--simulations 128] [--gumbel-considered 16] [--num-games 3072] [--backend cuda] \
        [--minutes 5] [--chunk-positions 70000] [--seed 0]

It needs no TensorFlow: the net is architectures/array_net.py (CuPy in float16 on the CUDA
back end, NumPy in float32 on the CPU), so a GPU machine that cannot train can still play a
run's games, often with more simulations than the run could afford. The games are the
model's own self-play (its config: komi drawn per game, handicap share, resignation, Gumbel
or PUCT), with `--simulations`, `--gumbel-considered` and `--num-games` in place of its own.

Output, in DIR (each file written atomically, so a stopped run leaves only whole files):
    chunk_000001.npz ...   the replay chunk keys (training/replay_buffer.py), compressed, the
                           policy and reply targets in float16 (half the bytes, 3
                           significant digits), plus `games`: how many games the chunk's
                           positions come from
    source.json            the model, the settings, the device, and the totals so far

It stops at `--positions` positions of finished games, or at the first move after
`--minutes` (games still in play then are dropped: a position's value target needs its game's
end). One chunk holds the positions of whole games, `--chunk-positions` or a few more.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

from games.selfplay import SelfPlay, SelfPlayBatch  # noqa: E402
from kernels.go_batch import describe_backend, resolve_backend  # noqa: E402
from training.nets import NetOpenError, open_array_net  # noqa: E402
from training.options import OneLineParser, add_seed  # noqa: E402
from training.replay_buffer import chunk_arrays  # noqa: E402
from training.run_directory import atomic_write_bytes  # noqa: E402

# Moves between looks at the clock: a few seconds of play at thousands of games.
MOVES_PER_CALL = 4


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def chunk_name(index: int) -> str:
    return f"chunk_{index:06d}.npz"


def write_chunk(path: Path, batches: list[SelfPlayBatch]) -> tuple[int, int]:
    """One compressed chunk of the batches' positions; returns (positions, games)."""
    arrays = chunk_arrays(*(np.concatenate([getattr(batch, key) for batch in batches])
                            for key in ("planes", "policy", "value", "ownership", "score",
                                        "final", "komi", "surprise", "reply")))
    arrays["policy"] = arrays["policy"].astype(np.float16)
    arrays["weights_version"] = np.zeros(len(arrays["value"]), np.int32)
    arrays["games"] = np.int64(sum(len(batch.games) for batch in batches))
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    atomic_write_bytes(path, buffer.getvalue())
    return len(arrays["value"]), int(arrays["games"])


def main(argv=None) -> int:
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, metavar="FILE", help="a model file (.npz)")
    parser.add_argument("--output", required=True, metavar="DIR",
                        help="where the chunks go (a new or empty directory)")
    parser.add_argument("--positions", type=int, required=True,
                        help="stop after this many positions of finished games")
    parser.add_argument("--minutes", type=float, default=0.0,
                        help="stop after this long, whatever the count (0: no limit)")
    parser.add_argument("--simulations", type=int, default=None,
                        help="simulations per move (default: the model's self-play setting)")
    parser.add_argument("--gumbel-considered", type=int, default=None,
                        help="Gumbel root actions considered (default: the model's)")
    parser.add_argument("--num-games", type=int, default=None,
                        help="games played at once (default: the model's num_games)")
    parser.add_argument("--backend", default="auto", choices=["cpu", "cuda", "auto"])
    parser.add_argument("--chunk-positions", type=int, default=70000,
                        help="positions per chunk (whole games: a few more)")
    add_seed(parser)
    args = parser.parse_args(argv)
    for name in ("positions", "chunk_positions"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    output = Path(args.output)
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        parser.error(f"--output {output}: not an empty directory (chunks are never overwritten)")
    try:
        backend = resolve_backend(args.backend)
    except RuntimeError as error:
        parser.error(str(error))
    xp, precision = np, "float32"
    if backend == "cuda":
        import cupy
        xp, precision = cupy, "float16"
    try:
        opened = open_array_net(args.model, xp=xp, precision=precision, log=log)
    except NetOpenError as error:
        parser.error(f"--model: {error}")
    changes = {"backend": backend}
    for name in ("simulations", "gumbel_considered", "num_games"):
        if getattr(args, name) is not None:
            changes[name] = getattr(args, name)
    try:
        config = opened.config.overridden(**changes)
    except ValueError as error:
        parser.error(str(error))

    output.mkdir(parents=True, exist_ok=True)
    source = {
        "model": str(args.model),
        "model_sha256": hashlib.sha256(Path(args.model).read_bytes()).hexdigest(),
        "device": describe_backend(backend), "net": f"array {precision}",
        "simulations": config.simulations, "gumbel_considered": config.gumbel_considered,
        "num_games": config.num_games, "seed": args.seed,
        "komi": config.komi, "komi_spread": config.komi_spread,
        "komi_wide_share": config.komi_wide_share, "handicap_share": config.handicap_share,
        "temperature_moves": config.temperature_moves,
        "opening_noise_only": config.opening_noise_only,
        "chunks": [], "positions": 0, "games": 0, "nn_evaluations": 0, "seconds": 0.0,
    }
    log(f"selfplay_chunks: {opened.label}, {config.board_size}x{config.board_size}, "
        f"{config.simulations} simulations, {config.num_games} games at once; "
        f"{source['device']}, net {source['net']}")
    selfplay = SelfPlay(config, opened.net, seed=args.seed, replies=True)
    started = time.perf_counter()
    deadline = started + 60 * args.minutes if args.minutes > 0 else float("inf")
    pending: list[SelfPlayBatch] = []
    pending_positions = 0

    def flush() -> None:
        nonlocal pending, pending_positions
        name = chunk_name(len(source["chunks"]) + 1)
        count, games = write_chunk(output / name, pending)
        source["chunks"].append(name)
        source["positions"] += count
        source["games"] += games
        source["seconds"] = round(time.perf_counter() - started, 1)
        atomic_write_bytes(output / "source.json",
                           (json.dumps(source, indent=2) + "\n").encode())
        log(f"{name}: {count:,} positions; {source['positions']:,} in all, "
            f"{source['games']:,} games, {source['seconds']:.0f} s, "
            f"{source['nn_evaluations'] / max(source['seconds'], 1e-9):,.0f} evaluations/s")
        pending, pending_positions = [], 0

    while source["positions"] + pending_positions < args.positions:
        if time.perf_counter() >= deadline:
            log(f"selfplay_chunks: --minutes {args.minutes:g} reached; the games still in play "
                f"are dropped")
            break
        batch = selfplay.play(10 ** 12, max_moves=MOVES_PER_CALL)
        source["nn_evaluations"] += batch.nn_evaluations
        if batch.positions:
            pending.append(batch)
            pending_positions += batch.positions
        if pending_positions >= args.chunk_positions:
            flush()
    if pending:
        flush()
    source["seconds"] = round(time.perf_counter() - started, 1)
    atomic_write_bytes(output / "source.json", (json.dumps(source, indent=2) + "\n").encode())
    log(f"selfplay_chunks: {source['positions']:,} positions of {source['games']:,} games in "
        f"{len(source['chunks'])} chunks, {source['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
