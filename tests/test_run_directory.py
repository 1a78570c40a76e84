"""The run directory's files (training/run_directory.py) meeting a full disk and damaged input:
a refused write names the file and leaves the previous one intact, an .npz that is not one is
refused in a line that says so (nothing is unpickled), and a damaged metrics line is moved
aside byte for byte.

The files are read back here with plain reads, not through run_directory, the code under test.
"""
import errno
import io
import json
import os
import pickle
from pathlib import Path

import numpy as np
import pytest

from training import run_directory
from training.config import PRESETS
from training.run_directory import (CheckpointError, NpzError, RunDirectory, atomic_save_npz,
                                    load_npz, storage_fault)

COUNTERS = {"games": 0, "positions": 0, "train_steps": 0}
TINY = PRESETS["tiny"]     # the net a checkpoint records (these hold stand-in arrays)
FULL = os.strerror(errno.ENOSPC)


def counters(iteration: int) -> dict:
    return {"iteration": iteration, **COUNTERS}


def full_disk() -> OSError:
    """What the kernel raises: errno and message, no file name (write and fsync name none)."""
    return OSError(errno.ENOSPC, FULL)


def descriptor_path(descriptor: int) -> str:
    return os.readlink(f"/proc/self/fd/{descriptor}")


def refuse(monkeypatch, step: str, name: str) -> None:
    """Make the disk refuse, at `step`, the writes of the file whose name contains `name`:
    "write" (the data), "fsync" (where a full disk shows on many file systems) or "replace"
    (moving the temporary into place)."""
    if step == "write":
        real_write = os.write

        class FullFile(io.FileIO):
            def write(self, data):
                raise full_disk()

        def opener(path, mode="r", *args, **kwargs):
            if name in os.fspath(path) and "w" in mode:
                return FullFile(path, mode)
            return open(path, mode, *args, **kwargs)

        def failing_write(descriptor, data):
            if name in descriptor_path(descriptor):
                raise full_disk()
            return real_write(descriptor, data)

        # The atomic writes go through open() (its file object's write), the metrics append
        # through os.write.
        monkeypatch.setattr(run_directory, "open", opener, raising=False)
        monkeypatch.setattr(os, "write", failing_write)
    elif step == "fsync":
        real_fsync = os.fsync

        def failing_fsync(descriptor):
            if name in descriptor_path(descriptor):
                raise full_disk()
            return real_fsync(descriptor)

        monkeypatch.setattr(os, "fsync", failing_fsync)
    else:
        real_replace = os.replace

        def failing_replace(source, target, *args, **kwargs):
            if name in os.fspath(target):
                raise OSError(errno.ENOSPC, FULL, os.fspath(source), os.fspath(target))
            return real_replace(source, target, *args, **kwargs)

        monkeypatch.setattr(os, "replace", failing_replace)


def assert_names_the_file(error: OSError, path: Path) -> None:
    assert error.errno == errno.ENOSPC
    line = storage_fault(error)
    assert line is not None and "\n" not in line
    assert str(path) in line and FULL in line, line
    assert ".tmp" not in line, line   # the temporary is gone: naming it would mislead


def temporaries(root: Path) -> list[Path]:
    return list(root.rglob(".*.tmp*"))


@pytest.mark.parametrize("step", ["write", "fsync", "replace"])
def test_a_full_disk_names_the_checkpoint_and_keeps_the_previous_one(tmp_path, monkeypatch, step):
    run = RunDirectory(tmp_path / "run", log=lambda message: None)
    for iteration in (1, 2):
        run.save_checkpoint(iteration, {"w": np.full(3, iteration, np.float32)},
                            counters(iteration), net=TINY, keep=2)
    target = run.checkpoints / "ckpt_000002.npz"   # written again, as after a fallback
    before = {path.name: path.read_bytes() for path in run.checkpoints.iterdir()}

    refuse(monkeypatch, step, "ckpt_000002")
    with pytest.raises(OSError) as raised:
        run.save_checkpoint(2, {"w": np.zeros(3, np.float32)}, counters(2), net=TINY, keep=1)
    monkeypatch.undo()

    assert_names_the_file(raised.value, target)
    assert not temporaries(tmp_path)
    assert {path.name: path.read_bytes() for path in run.checkpoints.iterdir()} == before


@pytest.mark.parametrize("step", ["write", "fsync", "replace"])
def test_a_full_disk_names_the_replay_chunk_and_keeps_the_previous_one(tmp_path, monkeypatch, step):
    run = RunDirectory(tmp_path / "run", log=lambda message: None)
    target = run.chunk_path(3)
    atomic_save_npz(target, {"value": np.ones(4, np.float32)})
    before = target.read_bytes()

    refuse(monkeypatch, step, target.name)
    with pytest.raises(OSError) as raised:
        atomic_save_npz(target, {"value": np.zeros(9, np.float32)})
    monkeypatch.undo()

    assert_names_the_file(raised.value, target)
    assert not temporaries(tmp_path)
    assert target.read_bytes() == before


@pytest.mark.parametrize("step", ["write", "fsync"])
def test_a_full_disk_names_metrics_jsonl_and_leaves_no_torn_line(tmp_path, monkeypatch, step):
    run = RunDirectory(tmp_path / "run", log=lambda message: None)
    run.path.mkdir()
    before = b'{"iteration": 1, "games": 4}\n'
    run.metrics_path.write_bytes(before)

    refuse(monkeypatch, step, "metrics.jsonl")
    with pytest.raises(OSError) as raised:
        run.append_metrics({"iteration": 2, "games": 8})
    monkeypatch.undo()

    assert_names_the_file(raised.value, run.metrics_path)
    assert not temporaries(tmp_path)
    assert run.metrics_path.read_bytes() == before


# Files that are not .npz archives of numbers.

class LeavesAMark:
    """Unpickling this creates a directory: proof that something was unpickled."""

    def __init__(self, mark: Path):
        self.mark = mark

    def __reduce__(self):
        return os.mkdir, (str(self.mark),)


def random_bytes(path: Path, mark: Path) -> None:
    path.write_bytes(np.random.default_rng(7).bytes(3000))


def truncated_archive(path: Path, mark: Path) -> None:
    np.savez(path, w=np.arange(1000, dtype=np.float32), __counters__=np.zeros(3, np.uint8))
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])


def object_array(path: Path, mark: Path) -> None:
    # np.savez pickles an object array (writing allows it; reading must not).
    np.savez(path, w=np.array([LeavesAMark(mark), None], dtype=object))


def a_pickle(path: Path, mark: Path) -> None:
    # What np.load would unpickle if the file were not a zip archive and pickles were allowed.
    path.write_bytes(pickle.dumps({"w": LeavesAMark(mark)}))


NOT_NPZ = [random_bytes, truncated_archive, object_array, a_pickle]


def assert_plain_refusal(message: str) -> None:
    assert "\n" not in message, message
    assert "pickle" not in message.lower(), message   # nor "allow_pickle": no unsafe advice


@pytest.mark.parametrize("make", NOT_NPZ)
def test_a_file_that_is_not_an_npz_of_numbers_is_refused_in_one_line(tmp_path, make):
    path, mark = tmp_path / "g.npz", tmp_path / "unpickled"
    make(path, mark)
    with pytest.raises(NpzError) as raised:
        load_npz(path)
    assert_plain_refusal(str(raised.value))
    assert not mark.exists(), "something in the file was unpickled"


def test_a_file_of_another_format_is_called_not_an_npz_archive(tmp_path):
    path = tmp_path / "g.npz"
    random_bytes(path, tmp_path / "unused")
    with pytest.raises(NpzError, match=r"^not an \.npz archive$"):
        load_npz(path)


@pytest.mark.parametrize("make", NOT_NPZ)
def test_a_checkpoint_that_is_not_an_npz_of_numbers_is_passed_over(tmp_path, make):
    messages = []
    run = RunDirectory(tmp_path / "run", log=messages.append)
    run.save_checkpoint(1, {"w": np.ones(3, np.float32)}, counters(1), net=TINY, keep=3)
    make(run.checkpoint_path(2), tmp_path / "unpickled")

    state, found = run.load_latest_checkpoint()
    assert found["iteration"] == 1 and state["w"].tolist() == [1, 1, 1]
    damaged = [message for message in messages if "ckpt_000002.npz is damaged" in message]
    assert len(damaged) == 1, messages
    assert_plain_refusal(damaged[0])
    assert not (tmp_path / "unpickled").exists()

    # With no sound checkpoint left, the run says so in a line and deletes nothing.
    run.checkpoint_path(1).unlink()
    with pytest.raises(CheckpointError, match="no readable checkpoint"):
        run.load_latest_checkpoint()
    assert run.checkpoint_path(2).exists()


def test_a_missing_checkpoint_names_the_kept_ones_as_spans(tmp_path):
    """A run keeps hundreds of checkpoints; the refusal lists them as spans in one line."""
    run = RunDirectory(tmp_path / "run", log=lambda message: None)
    kept = [1, 2, 3, 7, 9, 10] + list(range(100, 500))
    for iteration in kept:
        run.save_checkpoint(iteration, {"w": np.ones(3, np.float32)}, counters(iteration),
                            net=TINY, keep=len(kept))
    with pytest.raises(CheckpointError) as raised:
        run.load_latest_checkpoint(iteration=5)
    assert str(raised.value).endswith("has no checkpoint of iteration 5 "
                                      "(it has 1-3, 7, 9-10, 100-499)")
    empty = RunDirectory(tmp_path / "empty", log=lambda message: None)
    with pytest.raises(CheckpointError, match=r"\(it has none\)$"):
        empty.load_latest_checkpoint(iteration=1)


# A damaged metrics line is moved aside exactly as it was.

def record_line(iteration: int) -> bytes:
    return (json.dumps({"iteration": iteration, "games": iteration * 4}) + "\n").encode()


def test_a_damaged_metrics_line_reaches_metrics_jsonl_damaged_byte_for_byte(tmp_path):
    messages = []
    run = RunDirectory(tmp_path / "run", log=messages.append)
    run.path.mkdir()
    damaged = b"\xff\xfe{bad\n"           # not UTF-8 (and a UTF-16 byte-order mark at that)
    run.metrics_path.write_bytes(record_line(1) + damaged + record_line(2))

    run.discard_after(2)

    assert (run.path / "metrics.jsonl.damaged").read_bytes() == damaged
    assert run.metrics_path.read_bytes() == record_line(1) + record_line(2)
    assert [record["iteration"] for record in run.read_metrics()] == [1, 2]
    assert any("1 damaged line(s)" in message for message in messages), messages


def test_lines_set_aside_before_are_kept_byte_for_byte(tmp_path):
    run = RunDirectory(tmp_path / "run", log=lambda message: None)
    run.path.mkdir()
    aside = run.path / "metrics.jsonl.damaged"
    earlier = b"\xc3(earlier\n"
    aside.write_bytes(earlier)
    # Valid JSON but for one byte that is not UTF-8: JSON is UTF-8, so the line is damaged,
    # and moved as it is rather than kept with the byte replaced.
    damaged = b'{"iteration": 1, "note": "caf\xe9"}\n'
    run.metrics_path.write_bytes(damaged + record_line(2))

    run.discard_after(2)

    assert aside.read_bytes() == earlier + damaged
    assert run.metrics_path.read_bytes() == record_line(2)
