"""A run directory and everything written to it, crash-safe.

    runs/NAME/
        config.json            the resolved Config
        revision.txt           `git describe`, plus `git diff` when the tree was dirty
        checkpoints/ckpt_000012.npz   trainer state + counters after iteration 12 (last few kept)
        replay/chunk_000012.npz       positions self-played in iteration 12
        metrics.jsonl          one JSON object per completed iteration
        sgf/iter_000012_game_0.sgf    sample games
        tensorboard/           TensorBoard event files
        trainer.lock           the PID of the trainer that owns the run (see RunDirectory.lock)

Every file is written to a temporary name and moved into place with os.replace, so a kill
at any moment leaves either the old file or the new one. An iteration is complete when its
checkpoint exists; on resume, replay chunks and metrics lines of later (incomplete)
iterations are removed, so nothing is lost or counted twice.
"""
from __future__ import annotations

import dataclasses
import errno
import fcntl
import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np

from training.config import Config

ROOT = Path(__file__).resolve().parents[1]   # the checkout: runs/ lives there
CHECKPOINT_PREFIX = "ckpt_"
COUNTERS_KEY = "__counters__"


def resolve_run_path(run: str | os.PathLike) -> Path:
    """A bare name means runs/NAME under the project, whatever the working directory; anything
    with a path separator, or starting with ".", is a path used as given (relative to the
    working directory). Every entry point resolves --run through here."""
    text = os.fspath(run)
    if os.sep in text or (os.altsep and os.altsep in text) or text.startswith("."):
        return Path(text).expanduser().resolve()
    return ROOT / "runs" / text


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write to a temporary name and move it into place; on any failure (a full or read-only
    disk) the temporary is removed and the old file, if any, is left as it was."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with open(temporary, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def atomic_save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    atomic_write_bytes(path, buffer.getvalue())


def load_npz(path: Path) -> dict[str, np.ndarray]:
    """Load every array (zip CRCs are checked on read, so a torn file raises)."""
    with np.load(path, allow_pickle=False) as archive:
        return {name: archive[name] for name in archive.files}


class CheckpointError(Exception):
    pass


class RunLocked(Exception):
    """Another trainer owns the run directory; the message names its PID."""


# Errors of the file system that a restart cannot cure: the user must free space, fix
# permissions or name another --run.
STORAGE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM,
                  errno.ENOTDIR, errno.EEXIST, errno.EISDIR, errno.ENAMETOOLONG, errno.EFBIG}


def storage_fault(error: BaseException) -> str | None:
    """One line describing a file-system fault a restart cannot fix, or None for others."""
    if isinstance(error, OSError) and error.errno in STORAGE_ERRNOS:
        where = f" {error.filename}" if error.filename else ""
        return f"cannot write{where}: {error.strerror or error}"
    return None


class RunDirectory:
    def __init__(self, path: Path, log=print):
        self.path = Path(path)
        self.log = log
        self.checkpoints = self.path / "checkpoints"
        self.replay = self.path / "replay"
        self.sgf = self.path / "sgf"
        self.tensorboard = self.path / "tensorboard"
        self.metrics_path = self.path / "metrics.jsonl"
        self.config_path = self.path / "config.json"
        self.lock_path = self.path / "trainer.lock"
        self._lock_handle = None

    # Ownership.

    def lock(self) -> None:
        """Make this process the run's one trainer, or raise RunLocked naming the holder.

        An flock on trainer.lock, held open for the process's life: the kernel releases it
        when the process dies however it dies, so a killed run never leaves a stale lock and
        nothing needs cleaning up. The holder's PID is written in the file for the message.
        Readers (GUI, GTP, evaluate, the notebook) never take it and are never blocked."""
        if self.path.exists() and not self.path.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(self.path))
        self.path.mkdir(parents=True, exist_ok=True)
        handle = open(self.lock_path, "a+")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise RunLocked(f"{self.path} is in use by another trainer (PID {holder}); "
                            f"stop it first, or pick another --run") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._lock_handle = handle

    def unlock(self) -> None:
        if self._lock_handle is not None:
            self._lock_handle.close()   # closing the descriptor releases the flock
            self._lock_handle = None

    # Config and revision.

    def prepare(self, config: Config, overrides: dict | None = None) -> Config:
        """Create the directory, or resume: the run's saved config.json (edits by hand
        included) with the command line's explicit `overrides` on top, the changes logged.
        `config` (the preset plus overrides) is used for a new run. Returns the config to run
        with, saved for next time; raises ValueError for an unreadable config.json, a value
        out of range or a change of board size or net shape."""
        self.path.mkdir(parents=True, exist_ok=True)
        if self.config_path.exists():
            try:
                saved = Config.from_json(self.config_path.read_text())
            except (ValueError, TypeError) as error:
                raise ValueError(f"{self.config_path} is unreadable ({error}); "
                                 f"move it away to start a new run there") from None
            resumed = dataclasses.replace(saved, **(overrides or {}))
            problems = resumed.incompatibilities(saved)
            if problems:
                raise ValueError(
                    f"cannot resume {self.path} with a different board size or net shape: "
                    + "; ".join(problems) + ". Use another --run, or the run's own settings.")
            config = resumed.validate()
            changes = config.changes_from(saved)
            self.log(f"resuming with {self.config_path.name}"
                     + (f"; the command line changes {', '.join(changes)}" if changes else ""))
        atomic_write_text(self.config_path, config.to_json() + "\n")
        atomic_write_text(self.path / "revision.txt", code_revision())
        return config

    # Checkpoints.

    def checkpoint_path(self, iteration: int) -> Path:
        return self.checkpoints / f"{CHECKPOINT_PREFIX}{iteration:06d}.npz"

    def checkpoint_iterations(self) -> list[int]:
        if not self.checkpoints.exists():
            return []
        found = []
        for path in self.checkpoints.glob(f"{CHECKPOINT_PREFIX}*.npz"):
            digits = path.stem[len(CHECKPOINT_PREFIX):]
            if digits.isdigit():
                found.append(int(digits))
        return sorted(found)

    def save_checkpoint(self, iteration: int, state: dict[str, np.ndarray], counters: dict,
                        keep: int, protect: tuple[int, ...] = ()) -> None:
        """Write the checkpoint, then delete all but the newest `keep` and those in `protect`
        (the rating's reference checkpoint)."""
        arrays = dict(state)
        arrays[COUNTERS_KEY] = np.frombuffer(json.dumps(counters).encode(), dtype=np.uint8)
        atomic_save_npz(self.checkpoint_path(iteration), arrays)
        for old in self.checkpoint_iterations()[:-keep]:
            if old not in protect:
                self.checkpoint_path(old).unlink(missing_ok=True)

    def load_latest_checkpoint(self, iteration: int | None = None, accept=None):
        """(state, counters) of the newest sound checkpoint (or of `iteration`), falling back
        past damaged ones with a message; None when there is none.

        Damaged means: unreadable (torn, garbled), counters that are not a JSON object with
        whole-number iteration, games, positions and train_steps, a non-finite array, or one
        that `accept(state)` refuses by raising ValueError (the caller loads the weights
        there: a wrong-shaped array is refused by the load, which is all or nothing)."""
        candidates = self.checkpoint_iterations()
        if iteration is not None:
            if iteration not in candidates:
                raise CheckpointError(f"{self.path} has no checkpoint of iteration {iteration} "
                                      f"(it has {candidates or 'none'})")
            candidates = [iteration]
        for candidate in reversed(candidates):
            path = self.checkpoint_path(candidate)
            try:
                arrays = load_npz(path)
                counters = json.loads(arrays.pop(COUNTERS_KEY).tobytes().decode())
                _check_counters(counters)
                for name, array in arrays.items():
                    if array.dtype.kind == "f" and not np.isfinite(array).all():
                        raise ValueError(f"{name} holds non-finite values")
                if accept is not None:
                    accept(arrays)
            except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
                self.log(f"checkpoint {path.name} is damaged ({type(error).__name__}: {error}); "
                         f"falling back to the previous one")
                continue
            if counters.get("iteration") != candidate:
                self.log(f"checkpoint {path.name} holds iteration {counters.get('iteration')}; "
                         f"skipping it")
                continue
            return arrays, counters
        if candidates:
            raise CheckpointError(f"no readable checkpoint in {self.checkpoints}")
        return None

    # Replay chunks.

    def chunk_path(self, iteration: int) -> Path:
        return self.replay / f"chunk_{iteration:06d}.npz"

    def chunk_iterations(self) -> list[int]:
        if not self.replay.exists():
            return []
        return sorted(int(p.stem[len("chunk_"):]) for p in self.replay.glob("chunk_*.npz")
                      if p.stem[len("chunk_"):].isdigit())

    # Metrics.

    def append_metrics(self, record: dict) -> None:
        """Append one line; if the write fails (a full disk), cut the file back to where it
        was, so no torn line is left behind."""
        line = (json.dumps(record, sort_keys=True) + "\n").encode()
        descriptor = os.open(self.metrics_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            size = os.fstat(descriptor).st_size
            try:
                written = 0
                while written < len(line):
                    written += os.write(descriptor, line[written:])
                os.fsync(descriptor)
            except OSError:
                os.ftruncate(descriptor, size)
                raise
        finally:
            os.close(descriptor)

    def read_metrics(self) -> list[dict]:
        """The sound records; readers skip damaged lines (the trainer sets them aside)."""
        return [record for record, _ in self._metrics_lines() if record is not None]

    def _metrics_lines(self) -> list[tuple[dict | None, str]]:
        """(record or None if the line is damaged, the line) for every line."""
        if not self.metrics_path.exists():
            return []
        lines = []
        for line in self.metrics_path.read_text(errors="replace").splitlines(keepends=True):
            try:
                record = json.loads(line)
                if not isinstance(record, dict) or not isinstance(record.get("iteration"), int):
                    raise ValueError("not a record with an iteration")
            except ValueError:
                record = None
            lines.append((record, line))
        return lines

    def discard_after(self, iteration: int) -> None:
        """Forget what incomplete iterations (> iteration) left behind: replay chunks, metrics
        lines, a torn last metrics line, temporary files.

        A last line without its newline was torn by a kill mid-append: it belongs to the
        incomplete iteration (the checkpoint is written after the metrics line) and goes.
        Any other damaged line is the user's data in a complete iteration: it is moved to
        metrics.jsonl.damaged, with a message, never dropped."""
        for later in self.chunk_iterations():
            if later > iteration:
                self.log(f"discarding replay chunk of incomplete iteration {later}")
                self.chunk_path(later).unlink()
        if self.metrics_path.exists():
            lines = self._metrics_lines()
            if lines and lines[-1][0] is None and not lines[-1][1].endswith("\n"):
                lines.pop()
            damaged = [line for record, line in lines if record is None]
            kept = [line for record, line in lines
                    if record is not None and record["iteration"] <= iteration]
            if damaged:
                aside = self.metrics_path.with_name(self.metrics_path.name + ".damaged")
                previous = aside.read_text(errors="replace") if aside.exists() else ""
                atomic_write_text(aside, previous + "".join(
                    line if line.endswith("\n") else line + "\n" for line in damaged))
                self.log(f"{len(damaged)} damaged line(s) of {self.metrics_path.name} moved "
                         f"to {aside.name}")
            text = "".join(kept)
            if text != self.metrics_path.read_text(errors="replace"):
                atomic_write_text(self.metrics_path, text)
        for directory in (self.path, self.checkpoints, self.replay, self.sgf):
            if directory.exists():
                for temporary in directory.glob(".*.tmp*"):
                    temporary.unlink(missing_ok=True)


def _check_counters(counters) -> None:
    if not isinstance(counters, dict):
        raise ValueError("its counters are not a JSON object")
    for key in ("iteration", "games", "positions", "train_steps"):
        value = counters.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"its counter {key} is {value!r}, not a whole number")


def code_revision() -> str:
    def git(*args):
        try:
            return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                                  timeout=10).stdout
        except (OSError, subprocess.TimeoutExpired):
            return ""
    described = git("describe", "--always", "--dirty").strip() or "unknown (not a git checkout)"
    text = f"revision: {described}\npython: {sys.version.split()[0]}\n"
    diff = git("diff", "HEAD")
    if diff:
        text += "\n" + diff
    return text
