"""A run directory the loop cannot simply resume: an incompatible resume refused, a corrupt
or damaged checkpoint fallen back past, a damaged replay chunk skipped and a damaged metrics
line set aside (with a message, nothing lost), no readable checkpoint stopping with a
message, a run without its config.json resumed with its checkpoints' net shape, and a full
or read-only disk stopping the loop in one line with nothing lost.
"""
import contextlib
import errno
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import bp_tree  # noqa: E402
from training.run_directory import COUNTERS_KEY  # noqa: E402
from loop_runs import (  # noqa: E402
    PROJECT_ROOT, TINY, TINY_ARGS, run_main, checkpoint_iterations, chunk_iterations,
    read_checkpoint, read_chunk, metrics_lines, snapshot, assert_consistent)


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


# A disk that refuses a write.

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
