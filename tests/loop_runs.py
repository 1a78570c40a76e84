"""The training loop's test helpers: bp_tree.py run on the `tiny` preset (5x5, one block of
8 filters, a few simulations) in the test's own process (TensorFlow is imported once), and
readers of what a run wrote. The readers decode the files themselves (npz, JSON lines)
instead of going through run_directory, the code under test. Used by test_training_loop.py,
test_damaged_runs.py, test_loop_processes.py, test_warm_starts.py and the other tests that
run the loop.
"""
import contextlib
import hashlib
import io
import json
import os
from pathlib import Path

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import bp_tree  # noqa: E402
from training.config import PRESETS  # noqa: E402
from training.run_directory import COUNTERS_KEY  # noqa: E402

PROJECT_ROOT = Path(__file__).resolve().parent.parent
TINY = PRESETS["tiny"]
TINY_ARGS = ["--preset", "tiny", "--positions_per_iteration", "64", "--eval_games_random", "4"]
DOCUMENTED_FIELDS = {"iteration", "wall_time_s", "train_steps", "games", "positions",
                     "loss_policy", "loss_value", "selfplay_positions_per_s", "nn_evals_per_s",
                     "win_rate_random"}
TRAINING_FIELDS = {"loss_policy", "loss_value", "loss_l2", "loss_total", "learning_rate"}
STONE_PLANES = 2 * (TINY.history + 1)   # own and opponent stones, now and `history` back
SIDE_TO_MOVE_PLANE = STONE_PLANES

# Running the loop and reading what it wrote. The readers decode the files themselves (npz,
# JSON lines) instead of going through run_directory, the code under test.

def main_here(argv: list[str]) -> tuple[int, str, str]:
    """bp_tree.main(argv) in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = bp_tree.main(argv)
    return code, out.getvalue(), err.getvalue()


def run_main(run: Path, *extra: str) -> tuple[int, str, str]:
    """The tiny loop on `run` in this process: (exit code, stdout, stderr)."""
    return main_here(["--run", str(run), *TINY_ARGS, *extra])


def checkpoint_iterations(run: Path) -> list[int]:
    return sorted(int(p.stem[len("ckpt_"):]) for p in (run / "checkpoints").glob("ckpt_*.npz"))


def chunk_iterations(run: Path) -> list[int]:
    return sorted(int(p.stem[len("chunk_"):]) for p in (run / "replay").glob("chunk_*.npz"))


def read_checkpoint(run: Path, iteration: int) -> tuple[dict, dict]:
    with np.load(run / "checkpoints" / f"ckpt_{iteration:06d}.npz") as archive:
        arrays = {name: archive[name] for name in archive.files}
    counters = json.loads(arrays.pop(COUNTERS_KEY).tobytes().decode())
    return arrays, counters


def read_chunk(run: Path, iteration: int) -> dict:
    with np.load(run / "replay" / f"chunk_{iteration:06d}.npz") as archive:
        return {name: archive[name] for name in archive.files}


def metrics_lines(run: Path) -> list[str]:
    return (run / "metrics.jsonl").read_text().splitlines(keepends=True)


def metrics(run: Path) -> list[dict]:
    """Every line, strictly: a torn or invalid line fails the test."""
    return [json.loads(line) for line in metrics_lines(run)]


def snapshot(directory: Path) -> dict:
    """Content hash and modification time of every file below `directory`, but the lock
    (it names the PID of the last trainer that started there)."""
    return {str(path.relative_to(directory)): (hashlib.sha256(path.read_bytes()).hexdigest(),
                                               path.stat().st_mtime_ns)
            for path in sorted(directory.rglob("*")) if path.is_file() and path.name != "trainer.lock"}


def split_games(chunk: dict) -> list[slice]:
    """A chunk is whole games one after another; a game starts on the empty board, and no
    later position of a game has an empty board (a capture leaves the capturing stone)."""
    empty = ~chunk["planes"][..., :STONE_PLANES].any(axis=(1, 2, 3))
    starts = list(np.flatnonzero(empty)) + [len(empty)]
    assert starts[0] == 0, "a chunk must start with a game's first position"
    return [slice(a, b) for a, b in zip(starts, starts[1:])]


def assert_consistent(run: Path) -> list[dict]:
    """The bookkeeping invariants of a run directory after its last complete iteration K:
    metrics.jsonl holds iterations 1..K once each and every line parses; each iteration's
    replay chunk holds exactly the positions its metrics line added; the newest checkpoint's
    counters agree with both; the replay buffer held every position exactly once (replay_size)."""
    records = metrics(run)
    latest = checkpoint_iterations(run)[-1]
    state, counters = read_checkpoint(run, latest)
    assert counters["iteration"] == latest
    assert [r["iteration"] for r in records] == list(range(1, latest + 1))
    assert chunk_iterations(run) == list(range(1, latest + 1))
    new_positions = np.diff([0] + [r["positions"] for r in records]).tolist()
    chunk_sizes = [len(read_chunk(run, i)["value"]) for i in range(1, latest + 1)]
    assert chunk_sizes == new_positions
    assert sum(chunk_sizes) == counters["positions"] == records[-1]["positions"]
    new_games = np.diff([0] + [r["games"] for r in records]).tolist()
    assert [len(split_games(read_chunk(run, i))) for i in range(1, latest + 1)] == new_games
    assert counters["games"] == records[-1]["games"]
    assert counters["train_steps"] == records[-1]["train_steps"] == int(state["trainer.step"])
    assert sum(chunk_sizes) <= TINY.replay_window  # so the buffer holds all of them:
    assert [r["replay_size"] for r in records] == [r["positions"] for r in records]
    assert not [p for p in run.rglob(".*.tmp*")], "temporary files left behind"
    return records
