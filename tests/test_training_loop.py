"""The training loop (bp_tree.py) end to end on the `tiny` preset (5x5, one block of 8 filters,
a few simulations): what one iteration writes, resuming after a SIGKILL at various moments,
refusing an incompatible resume, falling back past a corrupt checkpoint, and the replay
buffer's symmetric samples.

Quick cases call `bp_tree.main` in this process (TensorFlow is imported once); the kill test
runs `bp_tree.py` as a subprocess, the way `run.sh` does.
"""
import contextlib
import errno
import hashlib
import io
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import bp_tree  # noqa: E402
from float_tolerance import assert_outputs_close, gamma, model_shape  # noqa: E402
from training import symmetries  # noqa: E402
from training.config import PRESETS, Config  # noqa: E402
from training.replay_buffer import ReplayBuffer  # noqa: E402
from training.run_directory import COUNTERS_KEY, ROOT  # noqa: E402
from games.sgf_records import sgf_to_moves  # noqa: E402

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


# One iteration end to end.

@pytest.fixture(scope="module")
def one_iteration(tmp_path_factory):
    run = tmp_path_factory.mktemp("one_iteration") / "run"
    code, out, err = run_main(run, "--iterations", "1")
    assert code == 0, err
    return run, out, err


def test_one_iteration_writes_config_revision_checkpoint_chunk_and_metrics(one_iteration):
    run, out, _ = one_iteration
    expected_config, _ = Config.from_args([*TINY_ARGS, "--iterations", "1"])
    assert Config.from_json((run / "config.json").read_text()) == expected_config
    assert (run / "revision.txt").read_text().startswith("revision: ")
    assert checkpoint_iterations(run) == [1] and chunk_iterations(run) == [1]

    chunk = read_chunk(run, 1)
    positions = len(chunk["value"])
    assert positions >= 64
    assert chunk["planes"].dtype == np.uint8
    assert chunk["planes"].shape == (positions, 5, 5, TINY.input_planes)
    assert set(np.unique(chunk["planes"])) <= {0, 1}
    assert chunk["policy"].shape == (positions, 26)
    assert (chunk["policy"] >= 0).all()
    np.testing.assert_allclose(chunk["policy"].sum(axis=1), 1.0,
                               atol=gamma(2 * chunk["policy"].shape[1]))
    assert chunk["surprise"].shape == (positions,) and (chunk["surprise"] >= 0).all()
    # komi 7.5: no draws, so every value target is a win or a loss, from the side to move's
    # view: it flips with the side to move within a game.
    games = split_games(chunk)
    assert set(np.unique(chunk["value"])) <= {-1.0, 1.0}
    for game in games:
        side = chunk["planes"][game, 0, 0, SIDE_TO_MOVE_PLANE].astype(np.float32) * 2 - 1
        assert (np.diff(side) != 0).all(), "players alternate"
        assert len(np.unique(chunk["value"][game] * side)) == 1, "one result per game"

    state, counters = read_checkpoint(run, 1)
    assert counters["iteration"] == 1
    assert counters["positions"] == positions and counters["games"] == len(games)
    assert counters["train_steps"] == math.ceil(positions * TINY.sample_reuse / TINY.train_batch_size)
    assert int(state["trainer.step"]) == counters["train_steps"]
    assert any(name.startswith("model.") for name in state)

    [record] = metrics(run)
    assert DOCUMENTED_FIELDS <= set(record)
    assert TRAINING_FIELDS <= set(record)  # tiny's min_replay (32) is below one iteration
    assert record["iteration"] == 1
    assert (record["positions"], record["games"]) == (positions, len(games))
    assert record["policy_surprise"] == round(float(np.mean(chunk["surprise"])), 4) > 0
    assert record["train_steps"] == counters["train_steps"]
    assert record["wall_time_s"] > 0
    assert record["selfplay_positions_per_s"] > 0 and record["nn_evals_per_s"] > 0
    assert 0 <= record["win_rate_random"] <= 1 and record["random_games"] == 4
    assert math.isfinite(record["loss_policy"]) and record["loss_policy"] > 0
    assert math.isfinite(record["loss_value"]) and record["loss_value"] >= 0
    assert "iter    1" in out  # the one-line summary


def test_backend_cpu_trains_exactly_like_the_default_auto_on_a_machine_without_a_gpu(
        one_iteration, tmp_path):
    from kernels.go_batch import _cuda_available
    if _cuda_available()[0]:
        pytest.skip("this machine has a CUDA device: auto means cuda here")
    auto_run, _, auto_err = one_iteration
    assert "rules: C/OpenMP on the CPU (backend auto)" in auto_err
    run = tmp_path / "cpu"
    code, _, err = run_main(run, "--iterations", "1", "--backend", "cpu")
    assert code == 0, err
    from architectures import net_device
    assert f"rules: C/OpenMP on the CPU (backend cpu); net: {net_device()}" in err
    weights, counters = read_checkpoint(run, 1)
    auto_weights, auto_counters = read_checkpoint(auto_run, 1)
    assert weights.keys() == auto_weights.keys()
    for name in weights:
        np.testing.assert_array_equal(weights[name], auto_weights[name], err_msg=name)
    for name, array in read_chunk(run, 1).items():
        np.testing.assert_array_equal(array, read_chunk(auto_run, 1)[name], err_msg=name)
    assert counters["games"] == auto_counters["games"]


def test_backend_cuda_without_a_device_is_refused_in_one_line_before_the_run_exists(tmp_path):
    from kernels.go_batch import _cuda_available
    if _cuda_available()[0]:
        pytest.skip("this machine has a CUDA device")
    run = tmp_path / "cuda"
    code, out, err = run_main(run, "--iterations", "1", "--backend", "cuda")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("bp_tree: backend='cuda' requested but the CUDA")
    assert not run.exists()


def test_one_iteration_writes_a_readable_sample_game_and_tensorboard_events(one_iteration):
    run, _, _ = one_iteration
    board_size, komi, moves = sgf_to_moves((run / "sgf" / "iter_000001_game_0.sgf").read_bytes())
    assert (board_size, komi) == (5, TINY.komi)
    assert len(moves) > 5
    assert [colour for colour, _ in moves[:4]] == [1, -1, 1, -1]
    assert list((run / "tensorboard").glob("events.out.tfevents.*"))


def test_losses_are_absent_until_the_replay_buffer_reaches_min_replay(tmp_path):
    run = tmp_path / "run"
    # 8 games of at most 50 moves cannot fill 1000 positions in one iteration.
    code, out, err = run_main(run, "--iterations", "1", "--min_replay", "1000")
    assert code == 0, err
    [first] = metrics(run)
    assert not TRAINING_FIELDS & set(first), "missing losses must be absent, not zero"
    assert first["train_steps"] == 0
    assert DOCUMENTED_FIELDS - TRAINING_FIELDS <= set(first)
    assert "training waits for the replay buffer" in out

    # min_replay may change on resume (it shapes neither positions nor the net).
    code, out, err = run_main(run, "--iterations", "2", "--min_replay", "32")
    assert code == 0, err
    assert "resumed" in err and "after iteration 1" in err
    first_again, second = metrics(run)
    assert first_again == first
    assert TRAINING_FIELDS <= set(second) and second["train_steps"] > 0
    assert Config.from_json((run / "config.json").read_text()).min_replay == 32
    assert_consistent(run)


def test_random_every_spaces_the_matches_against_random(tmp_path):
    run = tmp_path / "run"
    code, out, err = run_main(run, "--iterations", "2", "--random_every", "2")
    assert code == 0, err
    first, second = metrics(run)
    assert "win_rate_random" not in first and "random_games" not in first
    assert second["random_games"] == 4 and 0 <= second["win_rate_random"] <= 1
    lines = [line for line in out.splitlines() if "iter " in line]
    assert len(lines) == 2
    assert "vs random" not in lines[0] and "vs random" in lines[1]


# Refusals.

@pytest.fixture(scope="module")
def three_iterations(tmp_path_factory):
    run = tmp_path_factory.mktemp("three_iterations") / "run"
    code, _, err = run_main(run, "--iterations", "3")
    assert code == 0, err
    assert_consistent(run)
    return run


@pytest.mark.parametrize("change, field", [
    (["--board_size", "7"], "board_size"),
    (["--filters", "16"], "filters"),
    (["--blocks", "2"], "blocks"),
    (["--history", "2"], "history"),
], ids=["board_size", "filters", "blocks", "history"])
def test_incompatible_resume_is_refused_and_leaves_the_run_untouched(
        three_iterations, tmp_path, change, field):
    run = tmp_path / "run"
    shutil.copytree(three_iterations, run)
    before = snapshot(run)
    result = subprocess.run(
        [sys.executable, "bp_tree.py", "--run", str(run), *TINY_ARGS, "--iterations", "4", *change],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert "cannot resume" in result.stderr and field in result.stderr
    assert "Traceback" not in result.stderr
    assert snapshot(run) == before


def garble(path: Path) -> None:
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 64] = bytes(b ^ 0xFF for b in data[middle:middle + 64])
    path.write_bytes(bytes(data))


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def empty(path: Path) -> None:
    path.write_bytes(b"")


@pytest.mark.parametrize("damage", [truncate, garble, empty])
def test_corrupt_newest_checkpoint_falls_back_to_the_previous_iteration(
        three_iterations, tmp_path, damage):
    run = tmp_path / "run"
    shutil.copytree(three_iterations, run)
    complete_lines = metrics_lines(run)[:2]
    _, counters_2 = read_checkpoint(run, 2)
    damage(run / "checkpoints" / "ckpt_000003.npz")

    # Resuming without playing on shows what the fallback removed.
    code, _, err = run_main(run, "--iterations", "2")
    assert code == 0, err
    assert "ckpt_000003.npz is damaged" in err and "falling back" in err
    assert "after iteration 2" in err
    assert "discarding replay chunk of incomplete iteration 3" in err
    assert chunk_iterations(run) == [1, 2]
    assert metrics_lines(run) == complete_lines

    # The same command as before plays iteration 3 again on top of iteration 2, counted once.
    code, _, err = run_main(run, "--iterations", "3")
    assert code == 0, err
    assert "falling back" in err and "after iteration 2" in err
    assert metrics_lines(run)[:2] == complete_lines
    records = assert_consistent(run)
    _, counters_3 = read_checkpoint(run, 3)
    assert counters_3["iteration"] == 3
    assert counters_3["positions"] - counters_2["positions"] == len(read_chunk(run, 3)["value"])
    assert counters_3["train_steps"] > counters_2["train_steps"]
    assert records[2]["games"] > counters_2["games"]


def rewrite_checkpoint(path: Path, change) -> None:
    with np.load(path) as archive:
        arrays = {name: archive[name] for name in archive.files}
    change(arrays)
    np.savez(path, **arrays)


def bad_counters(arrays):
    arrays[COUNTERS_KEY] = np.frombuffer(b'{"iteration": 3, "games": ', dtype=np.uint8)


def counters_not_numbers(arrays):
    arrays[COUNTERS_KEY] = np.frombuffer(b'{"iteration": 3, "games": "x", "positions": 1, '
                                         b'"train_steps": 1}', dtype=np.uint8)


def wrong_shaped_weights(arrays):
    name = next(n for n in sorted(arrays) if n.startswith("model.") and arrays[n].ndim == 4)
    arrays[name] = arrays[name][..., :-1]


def nan_weights(arrays):
    name = next(n for n in sorted(arrays) if n.startswith("model.") and arrays[n].ndim == 4)
    arrays[name] = arrays[name].copy()
    arrays[name].flat[0] = np.nan


def recorded_net_not_whole(arrays):
    counters = json.loads(arrays[COUNTERS_KEY].tobytes().decode())
    counters["net"] = {**counters["net"], "blocks": "two"}
    arrays[COUNTERS_KEY] = np.frombuffer(json.dumps(counters).encode(), dtype=np.uint8)


def recorded_net_of_another_shape(arrays):
    counters = json.loads(arrays[COUNTERS_KEY].tobytes().decode())
    counters["net"] = {**counters["net"], "filters": counters["net"]["filters"] * 2}
    arrays[COUNTERS_KEY] = np.frombuffer(json.dumps(counters).encode(), dtype=np.uint8)


@pytest.mark.parametrize("damage", [bad_counters, counters_not_numbers, wrong_shaped_weights,
                                    nan_weights, recorded_net_not_whole,
                                    recorded_net_of_another_shape])
def test_a_damaged_checkpoint_of_any_kind_falls_back_in_the_trainer_and_the_readers(
        three_iterations, tmp_path, damage):
    from training.nets import open_net
    run = tmp_path / "run"
    shutil.copytree(three_iterations, run)
    rewrite_checkpoint(run / "checkpoints" / "ckpt_000003.npz", damage)

    messages = []
    opened = open_net(run, log=messages.append)
    assert opened.iteration == 2
    assert any("ckpt_000003.npz is damaged" in message for message in messages)
    assert np.isfinite(opened.net(np.zeros((1, 5, 5, TINY.input_planes), np.float32))[1]).all()

    code, _, err = run_main(run, "--iterations", "2")
    assert code == 0, err
    assert "ckpt_000003.npz is damaged" in err and "after iteration 2" in err


def empty_chunk(path):
    path.write_bytes(b"")


def junk_chunk(path):
    path.write_bytes(os.urandom(300))


def chunk_missing_policy(path):
    with np.load(path) as archive:
        np.savez(path, planes=archive["planes"], value=archive["value"])


def chunk_with_wrong_shape(path):
    with np.load(path) as archive:
        np.savez(path, planes=archive["planes"][:, :4], policy=archive["policy"],
                 value=archive["value"])


@pytest.mark.parametrize("damage", [empty_chunk, junk_chunk, chunk_missing_policy,
                                    chunk_with_wrong_shape])
def test_a_damaged_replay_chunk_is_skipped_and_the_run_resumes(three_iterations, tmp_path, damage):
    run = tmp_path / "run"
    shutil.copytree(three_iterations, run)
    sizes = {i: len(read_chunk(run, i)["value"]) for i in (1, 2, 3)}
    damage(run / "replay" / "chunk_000002.npz")
    code, _, err = run_main(run, "--iterations", "4")
    assert code == 0, err
    assert "replay chunk chunk_000002.npz is damaged" in err and "skipping it" in err
    assert f"{sizes[1] + sizes[3]} buffered positions" in err
    assert checkpoint_iterations(run)[-1] == 4


def test_a_damaged_metrics_line_is_set_aside_with_a_message(three_iterations, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(three_iterations, run)
    lines = metrics_lines(run)
    damaged = '{"iteration": 2, "games": 1\x00\x00 garbled\n'
    (run / "metrics.jsonl").write_text(lines[0] + damaged + lines[2])
    code, _, err = run_main(run, "--iterations", "3")
    assert code == 0, err
    assert "1 damaged line(s) of metrics.jsonl moved to metrics.jsonl.damaged" in err
    assert (run / "metrics.jsonl.damaged").read_text() == damaged
    assert metrics_lines(run) == [lines[0], lines[2]]


def test_no_readable_checkpoint_stops_with_a_message_and_deletes_nothing(three_iterations, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(three_iterations, run)
    for iteration in checkpoint_iterations(run):
        garble(run / "checkpoints" / f"ckpt_{iteration:06d}.npz")
    kept = {name: value for name, value in snapshot(run).items()
            if name.startswith(("checkpoints", "replay", "metrics"))}
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exit_info:
        bp_tree.main(["--run", str(run), *TINY_ARGS, "--iterations", "4"])
    assert exit_info.value.code == 5  # damaged data, which run.sh does not retry
    assert "no readable checkpoint" in err.getvalue()
    assert {name: value for name, value in snapshot(run).items() if name in kept} == kept


def test_a_run_without_its_config_json_resumes_with_its_checkpoints_net_shape(tmp_path):
    """A run of a shape no preset has (--filters 16): a bad value in config.json is refused
    with advice that works and nothing rewritten; with config.json moved away, as that advice
    says, the usual command resumes with the checkpoints' shape; asking explicitly for another
    shape is refused and writes nothing."""
    run = tmp_path / "run"
    code, _, err = run_main(run, "--filters", "16", "--iterations", "2")
    assert code == 0, err
    config_path = run / "config.json"
    good = config_path.read_bytes()
    config_path.write_text(good.decode().replace('"simulations": 4', '"simulations": "many"'))
    broken = config_path.read_bytes()
    code, _, err = run_main(run, "--iterations", "3")
    assert code == 2
    assert "move the file away: the run then resumes with the net shape its checkpoints hold" in err
    assert config_path.read_bytes() == broken            # a refused start rewrites nothing
    config_path.rename(tmp_path / "config.json.bad")
    code, _, err = run_main(run, "--filters", "8", "--iterations", "3")
    assert code == 2 and "filters: checkpoints have 16, command asks 8" in err, err
    assert not config_path.exists()
    code, _, err = run_main(run, "--iterations", "3")
    assert code == 0, err
    assert "config.json was missing: rebuilt" in err and "resumed" in err
    assert json.loads(config_path.read_text())["filters"] == 16
    assert checkpoint_iterations(run)[-1] == 3


def test_checkpoints_record_their_nets_shape_and_older_ones_are_read_off_their_weights(
        tmp_path):
    """History 4 with the extra planes takes as many input planes (19) as history 7 with the
    komi plane, so weights alone cannot say which net they are. Without config.json, the
    usual command resumes with the shape the checkpoints record. A checkpoint from before
    they recorded it (its counters without "net") is read off its weights: refused in one
    line while nothing decides between the two, resumed once --history does."""
    run = tmp_path / "run"
    code, _, err = run_main(run, "--history", "4", "--extra_features", "true",
                            "--iterations", "1")
    assert code == 0, err
    arrays, counters = read_checkpoint(run, 1)
    assert counters["net"] == {**TINY.shape(), "history": 4, "extra_features": True}
    (run / "config.json").unlink()
    code, _, err = run_main(run, "--iterations", "2")
    assert code == 0, err
    assert "config.json was missing: rebuilt" in err, err
    saved = json.loads((run / "config.json").read_text())
    assert (saved["history"], saved["extra_features"], saved["komi_input"]) == (4, True, False)

    # The same run as an older version left it: no config.json, no recorded shape.
    (run / "config.json").unlink()
    for iteration in checkpoint_iterations(run):
        arrays, counters = read_checkpoint(run, iteration)
        del counters["net"]
        arrays[COUNTERS_KEY] = np.frombuffer(json.dumps(counters).encode(), np.uint8)
        np.savez(run / "checkpoints" / f"ckpt_{iteration:06d}.npz", **arrays)
    code, _, err = run_main(run, "--iterations", "3")
    assert code != 0 and "Traceback" not in err, err
    assert ("fit two inputs of this project (history 4 with the extra planes or history 7 with "
            "the komi plane, neither with history 1)") in err, err
    assert not (run / "config.json").exists()
    code, _, err = run_main(run, "--history", "4", "--iterations", "3")
    assert code == 0, err
    assert json.loads((run / "config.json").read_text())["extra_features"] is True
    assert read_checkpoint(run, 3)[1]["net"]["history"] == 4


# Kill and resume.

class LoopProcess:
    """bp_tree.py in a subprocess with its output in files, as run.sh starts it."""
    started: list["LoopProcess"] = []

    def __init__(self, run: Path, iterations: int, name: str):
        self.stdout_path = run.parent / f"{name}.out"
        self.stderr_path = run.parent / f"{name}.err"
        with open(self.stdout_path, "w") as out, open(self.stderr_path, "w") as err:
            self.process = subprocess.Popen(
                [sys.executable, "bp_tree.py", "--run", str(run), *TINY_ARGS,
                 "--iterations", str(iterations)],
                cwd=PROJECT_ROOT, stdout=out, stderr=err)
        LoopProcess.started.append(self)

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text()

    def wait_until(self, condition, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if self.process.poll() is not None:
                pytest.fail(f"bp_tree.py exited ({self.process.returncode}) early:\n{self.stderr}")
            if time.monotonic() > deadline:
                self.kill()
                pytest.fail(f"timed out waiting:\n{self.stderr}")
            # Finer than the tens of milliseconds between a chunk and its checkpoint; at 1 ms
            # the polling took a seventh of a core from the trainer it waits on.
            time.sleep(0.005)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def resumed_after(self) -> int | None:
        for line in self.stderr.splitlines():
            if line.startswith("resumed "):
                return int(line.split("after iteration ")[1].split(":")[0])
        return None


@pytest.fixture
def no_process_left_behind():
    yield
    while LoopProcess.started:
        LoopProcess.started.pop().kill()


@pytest.mark.long
def test_killed_runs_resume_from_the_last_complete_checkpoint(tmp_path, no_process_left_behind):
    run = tmp_path / "run"
    total_iterations = 8
    complete_lines: list[str] = []   # metrics lines of the iterations complete so far
    orphans: dict[Path, tuple] = {}  # replay chunks of iterations a kill left unfinished

    def newest_checkpoint() -> int:
        return checkpoint_iterations(run)[-1]

    def check_after_kill() -> None:
        """Lines of complete iterations are never rewritten; remember them for later, and
        the identity of any replay chunk whose iteration has no checkpoint."""
        nonlocal complete_lines, orphans
        latest = newest_checkpoint()
        lines = [line for line in metrics_lines(run)
                 if line.endswith("\n") and json.loads(line)["iteration"] <= latest]
        assert lines[:len(complete_lines)] == complete_lines
        complete_lines = lines
        paths = [run / "replay" / f"chunk_{i:06d}.npz" for i in chunk_iterations(run) if i > latest]
        orphans = {path: (path.stat().st_ino, path.stat().st_mtime_ns) for path in paths}

    def resume(name: str) -> LoopProcess:
        """The same command again: it says where it resumed, having removed what the killed
        iteration left (a chunk there now is a new file), then completes an iteration."""
        latest = newest_checkpoint()
        process = LoopProcess(run, total_iterations, name)
        process.wait_until(lambda: process.resumed_after() is not None)
        assert process.resumed_after() == latest
        for path, identity in orphans.items():
            assert not path.exists() or (path.stat().st_ino, path.stat().st_mtime_ns) != identity, \
                f"{path.name} of the killed iteration was kept"
        process.wait_until(lambda: newest_checkpoint() > latest)
        return process

    # Right after the first checkpoint is written.
    first = LoopProcess(run, total_iterations, "first")
    first.wait_until(lambda: (run / "checkpoints" / "ckpt_000001.npz").exists())
    first.kill()
    check_after_kill()

    # Mid-iteration, between the iteration's replay chunk and its checkpoint (the window is
    # training plus evaluation, tens of milliseconds: try again if a kill comes too late).
    for attempt in range(3):
        process = resume(f"chunk_{attempt}")
        in_flight = newest_checkpoint() + 1
        process.wait_until(lambda: (run / "replay" / f"chunk_{in_flight:06d}.npz").exists())
        process.kill()
        check_after_kill()
        if orphans:
            break
    assert orphans, "no kill landed between a replay chunk and its checkpoint"

    # At two other moments after a checkpoint: in self-play, training or evaluation.
    for delay in (0.05, 0.15):
        process = resume(f"delay_{delay}")
        time.sleep(delay)
        process.kill()
        check_after_kill()
    assert newest_checkpoint() < total_iterations

    # The same command once more runs to the end (in this process: the kills are done).
    latest = newest_checkpoint()
    code, _, err = run_main(run, "--iterations", str(total_iterations))
    assert code == 0, err
    assert any(line.startswith("resumed ") and f" after iteration {latest}:" in line
               for line in err.splitlines()), err
    assert not [path for path, identity in orphans.items() if path.exists()
                and (path.stat().st_ino, path.stat().st_mtime_ns) == identity]
    records = assert_consistent(run)
    assert records[-1]["iteration"] == total_iterations
    assert metrics_lines(run)[:len(complete_lines)] == complete_lines


def test_a_stop_during_an_iterations_matches_drops_it_and_names_the_last_checkpoint(
        tmp_path, monkeypatch):
    """A stop that comes while an iteration plays its matches (after its games were counted,
    before its checkpoint): the line names the iteration dropped and the one kept, and the
    last words the kept checkpoint's model, with no traceback (it crashed looking for the
    dropped iteration's checkpoint)."""
    # GNU Go's match, the last before the checkpoint
    def rated_until_stopped(config, net, counters, run, iteration, log):
        if iteration == 2:
            raise bp_tree.Stopped(signal.SIGTERM)
        return {}

    monkeypatch.setattr(bp_tree, "rated_evaluations", rated_until_stopped)
    run = tmp_path / "run"
    code, _, err = run_main(run, "--iterations", "3", "--gnugo_every", "1")
    assert code == 128 + signal.SIGTERM, err
    assert "Traceback" not in err, err
    assert checkpoint_iterations(run) == [1]
    stopped, last = err.strip().splitlines()[-2:]
    assert stopped == ("bp_tree: stopped by SIGTERM during iteration 2, which is dropped; "
                       "the same command resumes after iteration 1")
    assert last == f"model: {run / 'model.npz'} (iteration 1)", last


@pytest.mark.long
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_stop_signal_ends_the_trainer_in_one_line_and_the_run_resumes(
        tmp_path, stop, no_process_left_behind):
    """SIGTERM, Ctrl-C's SIGINT and SIGHUP mid-run: one line naming the signal and what is
    kept, exit 128 + signal, no traceback, the lock released, and the same command resumes
    after the last complete iteration. Before the signal, while the trainer runs: a second
    trainer on the run exits at once naming the owner, and a reader opens the run's net.
    (That a SIGKILL leaves no stale lock is the kill test's resumes.)"""
    from training.nets import model_info, open_array_net, open_net
    run = tmp_path / "run"
    process = LoopProcess(run, 1000, "stopped")
    process.wait_until(lambda: (run / "checkpoints" / "ckpt_000001.npz").exists())

    lines_before = metrics_lines(run)
    started = time.monotonic()
    code, _, err = run_main(run, "--iterations", "1000")
    assert code == 3, err
    assert time.monotonic() - started < 30
    assert f"PID {process.process.pid}" in err and "Traceback" not in err
    assert metrics_lines(run)[:len(lines_before)] == lines_before
    assert open_net(run, log=lambda message: None).iteration >= 1
    assert process.process.poll() is None, "the owner must still be training"

    process.process.send_signal(stop)
    assert process.process.wait(timeout=60) == 128 + stop
    err = process.stderr
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    stopped, last = err.strip().splitlines()[-2:]
    assert stopped.startswith(f"bp_tree: stopped by {signal.Signals(stop).name} during iteration ")
    kept = checkpoint_iterations(run)[-1]
    assert f"resumes after iteration {kept}" in stopped
    # The last line says where the run's model is: the newest checkpoint's, ready to play.
    assert last == f"model: {run / 'model.npz'} (iteration {kept})", last
    assert model_info(run / "model.npz")["iteration"] == kept
    with np.load(run / "checkpoints" / f"ckpt_{kept:06d}.npz") as checkpoint, \
            np.load(run / "model.npz") as model:
        for name in model.files:
            if name.startswith("model."):
                np.testing.assert_array_equal(model[name], checkpoint[name])
    assert open_array_net(run / "model.npz").net.board_size == TINY.board_size
    code, _, err = run_main(run, "--iterations", str(kept + 1))
    assert code == 0, err
    assert "resumed" in err and checkpoint_iterations(run)[-1] == kept + 1
    assert_consistent(run)


# One owner per run, and faults a restart cannot cure.

def test_the_lock_and_the_run_directory_refuse_before_tensorflow_loads(tmp_path):
    """A TensorFlow that cannot be imported: the lock refusal, a --run that is a file and an
    unreadable config.json still each answer in their one line, at once, so none of them
    waits for TensorFlow's seconds of loading or shows its start-up text."""
    poison = tmp_path / "poison"
    for package in ("tensorflow", "keras"):
        (poison / package).mkdir(parents=True)
        (poison / package / "__init__.py").write_text(f"raise ImportError('{package} loaded')\n")
    env = {**os.environ, "PYTHONPATH": str(poison)}

    def trainer(run: Path) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "bp_tree.py", "--run", str(run), *TINY_ARGS],
                              cwd=PROJECT_ROOT, env=env, capture_output=True, text=True,
                              timeout=120)

    from training.run_directory import RunDirectory
    owned = RunDirectory(tmp_path / "owned")
    owned.lock()
    try:
        locked = trainer(tmp_path / "owned")
    finally:
        owned.unlock()
    assert locked.returncode == 3 and "in use by another trainer" in locked.stderr
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    not_a_directory = trainer(a_file)
    assert not_a_directory.returncode == 4 and "a_file" in not_a_directory.stderr
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    unreadable = trainer(broken)
    assert unreadable.returncode == 2 and "config.json is unreadable" in unreadable.stderr
    for result in (locked, not_a_directory, unreadable):
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def fake_project(tmp_path: Path, script: str) -> Path:
    """A copy of run.sh beside a stand-in build.sh and bp_tree.py (what `script` does)."""
    project = tmp_path / "project"
    (project / ".venv" / "bin").mkdir(parents=True)
    shutil.copy(PROJECT_ROOT / "run.sh", project / "run.sh")
    (project / "build.sh").write_text("#!/bin/sh\nexit 0\n")
    (project / "build.sh").chmod(0o755)
    (project / ".venv" / "bin" / "python").symlink_to(sys.executable)
    (project / "bp_tree.py").write_text(script)
    return project


# The stand-in trainer counts its starts in starts.txt; --progress prints the completed
# iteration that progress.txt holds (0 if none), as bp_tree.py --progress does.
STAND_IN = """import sys, pathlib
here = pathlib.Path(__file__).parent
progress = here / "progress.txt"
if sys.argv[1:2] == ["--progress"]:
    print(progress.read_text() if progress.exists() else 0)
    sys.exit(0)
starts = here / "starts.txt"
count = int(starts.read_text()) + 1 if starts.exists() else 1
starts.write_text(str(count))
"""


@pytest.mark.parametrize("status", [2, 3, 4, 5])
def test_run_sh_stops_on_a_fault_a_restart_cannot_fix(tmp_path, status):
    project = fake_project(tmp_path, STAND_IN + f"sys.exit({status})\n")
    result = subprocess.run(["bash", "run.sh"], cwd=project, capture_output=True, text=True,
                            timeout=60, env={**os.environ, "RUN_SH_RESTART_DELAY": "0"})
    assert result.returncode == status
    assert (project / "starts.txt").read_text() == "1"


def test_run_sh_restarts_crashes_that_progress_and_gives_up_after_three_futile_ones(tmp_path):
    # Crashes 1-4 each complete an iteration; from the 5th on, none does.
    project = fake_project(tmp_path, STAND_IN + "if count <= 4:\n"
                           "    progress.write_text(str(count))\n"
                           "sys.exit(1)\n")
    result = subprocess.run(["bash", "run.sh"], cwd=project, capture_output=True, text=True,
                            timeout=60, env={**os.environ, "RUN_SH_RESTART_DELAY": "0"})
    assert result.returncode == 1
    assert (project / "starts.txt").read_text() == "7"
    assert "3 times in a row without completing an iteration" in result.stderr


@pytest.mark.parametrize("given, passed", [
    ([], ["--preset", "9x9"]),
    (["--run", "x"], ["--preset", "9x9", "--run", "x"]),
    (["--preset", "tiny", "--run", "x"], ["--preset", "tiny", "--run", "x"]),
    (["--run", "x", "--preset=cpu"], ["--run", "x", "--preset=cpu"]),
])
def test_run_sh_trains_the_9x9_preset_unless_told_another(tmp_path, given, passed):
    stand_in = STAND_IN + "(here / 'argv.txt').write_text(repr(sys.argv[1:]))\nsys.exit(0)\n"
    project = fake_project(tmp_path, stand_in)
    result = subprocess.run(["bash", "run.sh", *given], cwd=project, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert (project / "argv.txt").read_text() == repr(passed)


# The stand-in trainer that waits to be stopped: it records the signal it gets, and its PID,
# written once its handlers are in place (a background job starts with SIGINT ignored: a
# SIGINT sent before then was lost, and the test waited for nothing under a loaded machine).
WAITING_STAND_IN = STAND_IN + """import os, signal, time
def stopped(signum, frame):
    (here / "signal.txt").write_text(signal.Signals(signum).name)
    sys.exit(128 + signum)
for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(number, stopped)
(here / "pid.txt").write_text(str(os.getpid()))
time.sleep(120)
"""


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_stopping_run_sh_stops_its_trainer_and_returns_its_status(tmp_path, stop):
    """A service manager, `timeout`, a closed terminal or Ctrl-C stop run.sh: the signal goes
    on to the trainer, run.sh waits for it and exits with its status, and no trainer is left
    running (it would hold the run's lock)."""
    project = fake_project(tmp_path, WAITING_STAND_IN)
    shell = subprocess.Popen(["bash", "run.sh"], cwd=project, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not (project / "pid.txt").exists():
        assert time.monotonic() < deadline and shell.poll() is None, shell.stderr.read()
        time.sleep(0.01)
    time.sleep(0.2)   # pid.txt is written whole before the stand-in sleeps
    trainer = int((project / "pid.txt").read_text())
    shell.send_signal(stop)
    try:
        assert shell.wait(timeout=30) == 128 + stop
    finally:
        shell.kill()
    assert (project / "signal.txt").read_text() == signal.Signals(stop).name
    with pytest.raises(ProcessLookupError):
        os.kill(trainer, 0)
    assert (project / "starts.txt").read_text() == "1"


def test_run_naming_a_file_is_refused_in_one_line(tmp_path):
    target = tmp_path / "a_file"
    target.write_text("precious\n")
    code, _, err = run_main(target, "--iterations", "1")
    assert code == 4
    assert err.strip().count("\n") == 0 and "Not a directory" in err and str(target) in err
    assert target.read_text() == "precious\n"


@pytest.mark.parametrize("fails_on, error", [
    ("config.json", errno.EROFS), ("chunk_000004", errno.ENOSPC),
    ("metrics.jsonl", errno.ENOSPC), ("ckpt_000004", errno.ENOSPC),
    ("trainer.lock", errno.EROFS)])
def test_a_full_or_read_only_disk_stops_in_one_line_losing_nothing(
        three_iterations, tmp_path, monkeypatch, fails_on, error):
    """The disk refuses the write of one file (fsync is where a full disk shows on many file
    systems; opening the lock is where a read-only one shows first)."""
    run = tmp_path / "run"
    shutil.copytree(three_iterations, run)
    complete = {name: value[0] for name, value in snapshot(run).items()
                if name.startswith(("checkpoints", "replay"))
                or name == "metrics.jsonl" != fails_on.replace("ckpt_000004", "metrics.jsonl")
                or name == "config.json" == fails_on}
    lines_before = metrics_lines(run)
    real_fsync, real_open = os.fsync, open

    def failing_fsync(descriptor):
        if fails_on in os.readlink(f"/proc/self/fd/{descriptor}"):
            raise OSError(error, os.strerror(error))
        return real_fsync(descriptor)

    def failing_open(path, *args, **kwargs):
        if fails_on in str(path):
            raise OSError(error, os.strerror(error), str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "fsync", failing_fsync)
    monkeypatch.setattr("builtins.open", failing_open)
    code, _, err = run_main(run, "--iterations", "4")
    monkeypatch.undo()
    assert code == 4, err
    fault_lines = [line for line in err.splitlines() if line.startswith("bp_tree:")]
    assert len(fault_lines) == 1 and os.strerror(error) in fault_lines[0]
    assert "Traceback" not in err
    assert not list(run.rglob(".*.tmp*")), "temporary files left behind"
    assert metrics_lines(run)[:len(lines_before)] == lines_before
    assert all(line.endswith("\n") for line in metrics_lines(run))
    if fails_on != "ckpt_000004":   # else metrics line 4 waits for its checkpoint
        assert metrics_lines(run) == lines_before
    after = snapshot(run)
    assert {name: after.get(name, (None,))[0] for name in complete} == complete

    # Once the disk is fixed, the same command carries on.
    code, _, err = run_main(run, "--iterations", "4")
    assert code == 0, err
    assert_consistent(run)


# The replay buffer.

def test_replay_samples_are_symmetric_images_of_stored_positions():
    rng = np.random.default_rng(7)
    stored = 5
    planes = rng.integers(0, 2, (stored, 5, 5, TINY.input_planes)).astype(np.uint8)
    policy = rng.random((stored, 26)).astype(np.float32)
    policy /= policy.sum(axis=1, keepdims=True)
    value = (np.array([1, -1, 1, -1, 1]) * np.arange(1, stored + 1) / stored).astype(np.float32)
    buffer = ReplayBuffer(capacity=16, board_size=5, board_planes=TINY.board_planes)
    buffer.add(planes, policy, value)

    sampled_planes, sampled_policy, sampled_value = buffer.sample(64, np.random.default_rng(1))[:3]
    images = {}  # every (stored position, symmetry) pair: its planes, policy and value
    for k in range(8):
        for i in range(stored):
            key = (symmetries.transform_planes(planes[i:i + 1].astype(np.float32), k).tobytes(),
                   symmetries.transform_policy(policy[i:i + 1], k).tobytes(),
                   value[i:i + 1].tobytes())
            images[key] = (i, k)
    seen = set()
    for j in range(64):
        key = (sampled_planes[j:j + 1].astype(np.float32).tobytes(),
               sampled_policy[j:j + 1].astype(np.float32).tobytes(),
               sampled_value[j:j + 1].astype(np.float32).tobytes())
        assert key in images, f"sample {j} is no symmetric image of a stored position"
        seen.add(images[key])
    assert len({k for _, k in seen}) > 4 and len({i for i, _ in seen}) == stored


@pytest.mark.skipif(not Path("/usr/games/gnugo").exists() and shutil.which("gnugo") is None,
                    reason="GNU Go is not installed")
def test_rated_evaluations_log_gnugo_previous_and_a_chained_elo(tmp_path):
    run = tmp_path / "rated"
    code, _, err = run_main(run, "--iterations", "4", "--gnugo_every", "2", "--gnugo_games", "2",
                            "--previous_games", "4", "--checkpoints_to_keep", "2")
    assert code == 0, err
    lines = metrics(run)
    assert [line["iteration"] for line in lines] == [1, 2, 3, 4]
    for line in (lines[0], lines[2]):
        assert not {"win_rate_gnugo", "elo", "win_rate_previous"} & set(line)
    first, second = lines[1], lines[3]
    assert first["gnugo_level"] == 0 and first["gnugo_games"] == 2
    assert 0 <= first["win_rate_gnugo"] <= 1 and first["elo"] == 0.0
    assert "win_rate_previous" not in first  # nothing rated before it
    assert second["previous_iteration"] == 2 and second["previous_games"] == 4
    # The chained rating moves by the Elo difference of the match, a sweep clamped to half a game.
    rate = min(max(second["win_rate_previous"], 0.5 / 4), 1 - 0.5 / 4)
    assert second["elo"] == pytest.approx(400 * math.log10(rate / (1 - rate)), abs=0.06)
    # The newest two checkpoints are kept, plus the rating's reference (iteration 4 itself now).
    assert checkpoint_iterations(run) == [3, 4]
    _, counters = read_checkpoint(run, 4)
    assert counters["rated_iteration"] == 4


# Warm starts, exported models, CPU time and the GNU Go level.

def model_arrays(arrays: dict) -> dict:
    return {name: array for name, array in arrays.items() if name.startswith("model.")}


def test_init_from_a_run_a_checkpoint_or_an_exported_model_copies_the_weights_only(
        one_iteration, tmp_path):
    import export_model
    source, _, _ = one_iteration
    source_state, source_counters = read_checkpoint(source, 1)
    model = tmp_path / "exported.npz"
    with contextlib.redirect_stdout(io.StringIO()):
        assert export_model.main(["--run", str(source), "--output", str(model)]) == 0
    with np.load(model) as archive:
        info = json.loads(archive["__info__"].tobytes().decode())
        exported = {name: archive[name] for name in archive.files}
    assert info["run"] == "run" and info["iteration"] == 1
    assert info["games"] == source_counters["games"] and info["cpu_seconds"] > 0
    assert info["commands"][0].startswith("bp_tree.py --run ")
    assert model_arrays(exported).keys() == model_arrays(source_state).keys()
    assert not [name for name in exported if name.startswith(("optimizer.", "trainer."))]
    for start in (source, source / "checkpoints" / "ckpt_000001.npz", model):
        run = tmp_path / f"warm-{start.name}"
        # No training in the first iteration (min_replay out of reach): its checkpoint holds
        # the starting weights as they were loaded.
        code, _, err = run_main(run, "--iterations", "1", "--min_replay", "1024",
                                "--init_from", str(start))
        assert code == 0, err
        state, counters = read_checkpoint(run, 1)
        for name, array in model_arrays(source_state).items():
            np.testing.assert_array_equal(state[name], array)
        assert int(state["trainer.step"]) == 0 and counters["train_steps"] == 0
        assert counters["games"] == metrics(run)[0]["games"]     # a fresh count and replay
        assert chunk_iterations(run) == [1]
        assert counters["init_from"].startswith(str(source if start != model else model))


def test_a_warm_start_from_inside_the_checkout_records_a_path_a_clone_can_follow(
        one_iteration, tmp_path):
    # An exported model carries its run's init_from: a path of the training machine would
    # name nothing in another clone, so a source inside the checkout is kept relative to it.
    source, _, _ = one_iteration
    with tempfile.TemporaryDirectory(dir=ROOT, prefix=".test-init-from-") as inside:
        copied = Path(inside) / "run"
        shutil.copytree(source, copied, ignore=shutil.ignore_patterns("trainer.lock"))
        run = tmp_path / "warm-inside"
        code, _, err = run_main(run, "--iterations", "1", "--min_replay", "1024",
                                "--init_from", str(copied))
        assert code == 0, err
    _, counters = read_checkpoint(run, 1)
    assert counters["init_from"] == f"{Path(inside).name}/run iteration 1"


def refused(run: Path, *extra: str) -> str:
    """Stderr of a bp_tree.main that must stop with exit code 2 (a refusal)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = bp_tree.main(["--run", str(run), *TINY_ARGS, *extra])
        except SystemExit as exit_info:   # refusals from inside the loop exit this way
            code = exit_info.code
    assert code == 2, err.getvalue()
    return err.getvalue()


def test_init_from_refuses_another_net_shape_in_one_line(one_iteration, tmp_path):
    source, _, _ = one_iteration
    run = tmp_path / "misfit"
    err = refused(run, "--iterations", "1", "--filters", "4", "--init_from", str(source))
    [line] = [l for l in err.splitlines() if "init-from" in l]
    assert "filters: it has 8, command asks 4" in line     # a net is widened, never narrowed
    assert checkpoint_iterations(run) == []
    err = refused(tmp_path / "nothing", "--iterations", "1",
                  "--init_from", str(tmp_path / "absent.npz"))
    assert "there is no model file" in err


def test_a_warm_start_takes_the_sources_net_shape_without_shape_flags(one_iteration, tmp_path):
    """--init_from alone: the new run gets the source's shape (here filters 16, which no
    preset has), from a run or its exported model; a shape flag still grows the net."""
    source = tmp_path / "wide"
    code, _, err = run_main(source, "--filters", "16", "--iterations", "1")
    assert code == 0, err
    code, _, err = run_main(tmp_path / "from_run", "--iterations", "1", "--init_from", str(source))
    assert code == 0, err
    assert "its net shape: filters 16" in err
    assert json.loads((tmp_path / "from_run" / "config.json").read_text())["filters"] == 16
    code, _, err = run_main(tmp_path / "grown", "--iterations", "1", "--init_from", str(source),
                            "--blocks", "2")
    assert code == 0, err
    grown = json.loads((tmp_path / "grown" / "config.json").read_text())
    assert (grown["filters"], grown["blocks"]) == (16, 2)


def test_init_from_adds_the_auxiliary_heads_to_a_net_trained_without(one_iteration, tmp_path):
    from training.nets import read_weights
    source, _, _ = one_iteration
    run = tmp_path / "grown"
    code, out, err = run_main(run, "--iterations", "1", "--min_replay", "1024",
                              "--aux_heads", "true", "--init_from", str(source))
    assert code == 0, err
    assert "no ownership and score heads; they start fresh" in out + err
    old, new = read_weights(source), read_weights(run)
    assert not old.config.aux_heads and new.config.aux_heads
    # Every shared layer came from the source: policy and value agree on any input.
    planes = np.random.default_rng(5).integers(
        0, 2, (6, *old.trainer.model.input_shape[1:])).astype(np.float32)
    before = old.trainer.model(planes, training=False)
    after = new.trainer.model(planes, training=False)
    assert len(before) == 2 and len(after) == 4
    assert_outputs_close(after[:2], before, new.config)
    # Taking heads away, asked for explicitly, is still refused.
    err = refused(tmp_path / "shrunk", "--iterations", "1", "--aux_heads", "false",
                  "--init_from", str(run))
    assert "aux_heads: it has True, command asks False" in err


def assert_answers_as(grown, grown_planes, source, planes):
    """`grown` answers `grown_planes` as `source` answers `planes`, through the Keras model
    and through the folded inference graph the search uses."""
    from architectures.inference import inference_forward
    for outputs in ((grown(grown_planes, training=False), source(planes, training=False)),
                    (inference_forward(grown, grown_planes), inference_forward(source, planes))):
        assert_outputs_close(*outputs, model_shape(grown))


def train_one_random_step(trainer, rng) -> None:
    """One training step of `trainer` on a random batch of planes, policies and results."""
    batch, size = trainer.batch_size, trainer.model.input_shape[1]
    targets = rng.dirichlet(np.ones(size * size + 1), batch).astype(np.float32)
    trainer.train_step(
        rng.integers(0, 2, (batch, *trainer.model.input_shape[1:])).astype(np.float32),
        targets, rng.choice([-1.0, 1.0], batch).astype(np.float32))


def test_init_from_adds_residual_blocks_that_start_as_identities(one_iteration, tmp_path):
    from training.nets import read_weights
    source, _, _ = one_iteration
    old = read_weights(source)
    deeper = old.config.blocks + 2
    run = tmp_path / "deeper"
    code, out, err = run_main(run, "--iterations", "1", "--min_replay", "1024",
                              "--blocks", str(deeper), "--init_from", str(source))
    assert code == 0, err
    assert f"blocks {old.config.blocks}-{deeper - 1} are added after them as identities" in out + err
    new = read_weights(run)
    assert new.config.blocks == deeper
    # The source net is the reference: the grown one answers every input as it did, through
    # the Keras model and through the folded inference graph the search uses.
    planes = np.random.default_rng(7).integers(
        0, 2, (6, *old.trainer.model.input_shape[1:])).astype(np.float32)
    assert_answers_as(new.trainer.model, planes, old.trainer.model, planes)
    # The added blocks are not frozen at zero: one training step moves their last scale.
    layer = new.trainer.model.get_layer(f"block{deeper - 1}_bn2")
    assert not np.asarray(layer.gamma).any()
    train_one_random_step(new.trainer, np.random.default_rng(8))
    assert np.asarray(layer.gamma).any()
    # Removing blocks is refused in one line.
    err = refused(tmp_path / "shallower", "--iterations", "1", "--blocks", str(old.config.blocks),
                  "--init_from", str(run))
    assert f"blocks: it has {deeper}, command asks {old.config.blocks}" in err


def test_init_from_widens_every_layer_and_the_wider_net_plays_as_before(one_iteration, tmp_path):
    from training.nets import read_weights
    source, _, _ = one_iteration
    old = read_weights(source)
    wider = old.config.filters + 4
    run = tmp_path / "wider"
    code, out, err = run_main(run, "--iterations", "1", "--min_replay", "1024",
                              "--filters", str(wider), "--init_from", str(source))
    assert code == 0, err
    assert f"it has {old.config.filters} filters; the 4 added" in out + err
    new = read_weights(run)
    assert new.config.filters == wider
    planes = np.random.default_rng(11).integers(
        0, 2, (6, *old.trainer.model.input_shape[1:])).astype(np.float32)
    assert_answers_as(new.trainer.model, planes, old.trainer.model, planes)
    # The added channels are not dead: a training step gives them weights into the old ones.
    kernel = new.trainer.model.get_layer("block0_conv1").kernel
    assert not np.asarray(kernel)[:, :, old.config.filters:, :old.config.filters].any()
    train_one_random_step(new.trainer, np.random.default_rng(12))
    assert np.asarray(kernel)[:, :, old.config.filters:, :old.config.filters].any()
    err = refused(tmp_path / "narrower", "--iterations", "1",
                  "--filters", str(old.config.filters), "--init_from", str(run))
    assert f"filters: it has {wider}, command asks {old.config.filters}" in err


@pytest.mark.parametrize("global_pooling, adds_planes", [(False, False), (True, True)])
def test_a_widened_net_with_every_head_answers_as_its_source(global_pooling, adds_planes):
    """Every layer kind widened at once (the auxiliary heads, the global pooling's means and
    maxima), from a source with random weights and batch-norm statistics, once also growing
    the input by the extra planes in front of the source's komi plane: the source itself is
    the reference."""
    from training.nets import _copy_shared_layers, build_trainer
    narrow = Config(board_size=5, blocks=2, filters=8, aux_heads=True,
                    global_pooling=global_pooling, komi_input=adds_planes)
    wide = narrow.overridden(filters=13, extra_features=adds_planes)
    source, target = build_trainer(narrow), build_trainer(wide)
    rng = np.random.default_rng(3)
    for layer in source.model.layers:
        arrays = layer.get_weights()
        if "bn" in layer.name:     # gamma, beta, moving mean, moving variance (positive)
            arrays = [rng.normal(1, 0.3, a.shape) if i in (0, 3) else rng.normal(0, 0.3, a.shape)
                      for i, a in enumerate(arrays)]
            arrays[3] = np.abs(arrays[3])
        else:
            arrays = [rng.normal(0, 0.15, a.shape) for a in arrays]
        layer.set_weights([a.astype(np.float32) for a in arrays])
    _copy_shared_layers(source.model, target.model, (narrow, wide))
    planes = rng.integers(0, 2, (6, 5, 5, narrow.input_planes)).astype(np.float32)
    if adds_planes:          # the extra planes go in before the komi plane, the last
        extra = rng.integers(0, 2, (6, 5, 5, wide.input_planes - narrow.input_planes))
        planes[..., -1] = rng.uniform(-1, 1, (6, 1, 1))
        grown = np.concatenate([planes[..., :-1], extra, planes[..., -1:]], -1).astype(np.float32)
    else:
        grown = planes
    assert_answers_as(target.model, grown, source.model, planes)


def test_init_from_adds_the_komi_plane_and_the_run_trains_and_resumes_at_drawn_komis(
        one_iteration, tmp_path):
    """A warm start to komi_input: the stem's weights on the komi plane start at zero, so the
    grown net answers as the source whatever the komi; the run self-plays at drawn komis and
    from handicap stones, its chunks keep each position's komi, and it resumes. Growing that
    run's net by the extra planes then keeps its weights on the komi plane, the last."""
    from kernels.go_batch import EXTRA_PLANES
    from training.nets import read_weights
    source, _, _ = one_iteration
    old = read_weights(source)
    run = tmp_path / "komi"
    draws = ("--komi_input", "true", "--komi_spread", "2", "--komi_wide_share", "0.3",
             "--handicap_share", "0.3")
    code, out, err = run_main(run, "--iterations", "1", "--min_replay", "1024", *draws,
                              "--init_from", str(source))
    assert code == 0, err
    assert "the stem's weights on it start at zero" in out + err
    new = read_weights(run)
    assert new.config.komi_input
    rng = np.random.default_rng(10)
    planes = rng.integers(0, 2, (6, *old.trainer.model.input_shape[1:])).astype(np.float32)
    komi = rng.uniform(-1, 1, (6, *planes.shape[1:3], 1)).astype(np.float32)
    assert_answers_as(new.trainer.model, np.concatenate([planes, komi], -1),
                      old.trainer.model, planes)
    chunk = np.load(run / "replay" / "chunk_000001.npz")
    assert chunk["planes"].shape[-1] == TINY.input_planes
    assert len(set(np.abs(chunk["komi"]).tolist())) > 1
    code, _, err = run_main(run, "--iterations", "2", "--min_replay", "64", *draws)
    assert code == 0, err     # resumed, it trains on both iterations' positions
    assert "discarding" not in err and "damaged" not in err
    # Grown again, by the extra planes: they go before the komi plane, which keeps its weights.
    trained = read_weights(run)
    stem = np.asarray(trained.trainer.model.get_layer("stem_conv").kernel)
    assert stem[:, :, -1, :].any()
    featured = tmp_path / "komi_featured"
    code, out, err = run_main(featured, "--iterations", "1", "--min_replay", "1024",
                              "--extra_features", "true", "--init_from", str(run))
    assert code == 0, err
    grown = read_weights(featured)
    assert grown.config.komi_input and grown.config.extra_features
    planes = rng.integers(0, 2, (6, *planes.shape[1:3], TINY.input_planes)).astype(np.float32)
    extra = rng.integers(0, 2, (6, *planes.shape[1:3], EXTRA_PLANES)).astype(np.float32)
    assert_answers_as(grown.trainer.model, np.concatenate([planes, extra, komi], -1),
                      trained.trainer.model, np.concatenate([planes, komi], -1))


def test_init_from_adds_the_extra_input_planes_with_zero_weights(one_iteration, tmp_path):
    from kernels.go_batch import EXTRA_PLANES
    from training.nets import read_weights
    source, _, _ = one_iteration
    old = read_weights(source)
    assert not old.config.extra_features
    run = tmp_path / "featured"
    code, out, err = run_main(run, "--iterations", "1", "--min_replay", "1024",
                              "--extra_features", "true", "--init_from", str(source))
    assert code == 0, err
    assert f"the stem's weights on the {EXTRA_PLANES} added planes start at zero" in out + err
    new = read_weights(run)
    assert new.config.extra_features
    base = old.trainer.model.input_shape[-1]
    assert new.trainer.model.input_shape[-1] == base + EXTRA_PLANES
    # The source net is the reference: the grown one answers its planes as the source did,
    # whatever the added planes hold.
    rng = np.random.default_rng(9)
    planes = rng.integers(0, 2, (6, *old.trainer.model.input_shape[1:])).astype(np.float32)
    extra = rng.integers(0, 2, (6, *planes.shape[1:3], EXTRA_PLANES)).astype(np.float32)
    grown_planes = np.concatenate([planes, extra], axis=-1)
    assert_answers_as(new.trainer.model, grown_planes, old.trainer.model, planes)
    # The added weights are not frozen at zero: one training step moves them.
    stem = new.trainer.model.get_layer("stem_conv")
    assert not np.asarray(stem.kernel)[:, :, base:, :].any()
    train_one_random_step(new.trainer, rng)
    assert np.asarray(stem.kernel)[:, :, base:, :].any()
    # Dropping the planes again is refused in one line.
    err = refused(tmp_path / "featureless", "--iterations", "1", "--extra_features", "false",
                  "--init_from", str(run))
    assert "extra_features: it has True, command asks False" in err


def test_cpu_seconds_accumulate_across_resumes_and_stay_within_the_process_time(tmp_path):
    run = tmp_path / "cpu"
    before = time.process_time()
    code, _, err = run_main(run, "--iterations", "2")
    assert code == 0, err
    code, _, err = run_main(run, "--iterations", "3")
    assert code == 0, err
    used = time.process_time()          # this process ran every iteration
    # Resumed with its iterations done, the run says so instead of exiting without a word.
    code, _, err = run_main(run, "--iterations", "3")
    assert code == 0 and "iteration 3 of 3 done" in err and len(metrics(run)) == 3
    seconds = [line["cpu_seconds"] for line in metrics(run)]
    assert 0 < seconds[0] < seconds[1] < seconds[2] <= used
    assert seconds[2] <= used - before   # both loops ran inside the test's own CPU time
    # A CPU budget already spent stops the run before another iteration.
    # (metrics round to 0.01 s: a budget just below the last figure is surely spent)
    code, _, err = run_main(run, "--max_cpu_seconds", str(seconds[2] - 0.01), "--iterations", "0")
    assert code == 0 and "CPU seconds reached" in err and len(metrics(run)) == 3
    assert [line["games"] for line in metrics(run)] == sorted({l["games"] for l in metrics(run)})


def test_gnugo_level_climbs_after_a_match_won_at_the_promotion_rate(tmp_path, monkeypatch):
    from games.match_report import MatchReport
    results = iter([(4, 1), (3, 2), (5, 0)])     # 80%, 60%, 100% wins
    levels = []

    def fake_match(config, net, level, games, simulations, seed=0, log=None):
        levels.append(level)
        wins, losses = next(results)
        return MatchReport(wins=wins, losses=losses, draws=0, player_a="net",
                           player_b=f"gnugo:{level}")

    monkeypatch.setattr("loop.evaluations.play_against_gnugo", fake_match)
    run = tmp_path / "climb"
    code, _, err = run_main(run, "--iterations", "2", "--gnugo_every", "1", "--previous_games", "2")
    assert code == 0, err
    code, _, err = run_main(run, "--iterations", "3", "--gnugo_every", "1", "--previous_games", "2")
    assert code == 0, err
    assert levels == [0, 1, 1]                       # 80% promotes, 60% does not; kept on resume
    assert [line["gnugo_level"] for line in metrics(run)] == [0, 1, 1]
    _, counters = read_checkpoint(run, 3)
    assert counters["gnugo_level"] == 2


def test_replay_ownership_samples_turn_with_their_planes():
    n = TINY.board_size
    rng = np.random.default_rng(4)
    buffer = ReplayBuffer(64, n, TINY.input_planes)
    stones = rng.integers(-1, 2, (20, n, n))
    planes = np.zeros((20, n, n, TINY.input_planes), np.uint8)
    planes[..., 0], planes[..., 1] = stones == 1, stones == -1
    policy = np.full((20, n * n + 1), 1 / (n * n + 1), np.float32)
    final = np.arange(20) % 3 != 0
    buffer.add(planes, policy, np.zeros(20, np.float32), stones.astype(np.int8),
               np.arange(20, dtype=np.float32), final)
    sample = buffer.sample(256, np.random.default_rng(2))
    # Ownership was the stones: under any symmetry it still is, point for point.
    np.testing.assert_array_equal(sample.ownership, sample.planes[..., 0] - sample.planes[..., 1])
    assert set(sample.final.tolist()) == {0.0, 1.0}
    # The score travels with its position (score i was stored with position i), scaled by N*N.
    stored = np.rint(sample.score * n * n).astype(int)
    np.testing.assert_array_equal(sample.final, final[stored].astype(np.float32))


def test_auxiliary_heads_and_playout_caps_train_end_to_end(tmp_path):
    run = tmp_path / "aux"
    code, _, err = run_main(run, "--iterations", "2", "--aux_heads", "true",
                            "--full_search_share", "0.5", "--fast_simulations", "2")
    assert code == 0, err
    records = metrics(run)
    # Only the fully searched moves were kept: about half of the moves played.
    for record, before in zip(records, [0] + [r["positions"] for r in records]):
        kept = record["positions"] - before
        assert kept == len(read_chunk(run, record["iteration"])["value"])
        assert 0.2 * record["selfplay_moves"] < kept < 0.8 * record["selfplay_moves"]
    trained = [r for r in records if "loss_policy" in r]
    assert trained and all(r["loss_ownership"] > 0 and r["loss_score"] >= 0 for r in trained)
    chunk = read_chunk(run, 1)
    assert chunk["ownership"].shape == chunk["planes"].shape[:3] and chunk["final"].any()
    code, _, err = run_main(run, "--iterations", "3", "--aux_heads", "false")  # shapes the net
    assert code == 2 and "aux_heads: run has True, command asks False" in err
