"""A run directory and everything written to it, crash-safe.

    runs/NAME/
        config.json            the resolved Config
        revision.txt           `git describe`, plus `git diff` when the tree was dirty
        checkpoints/ckpt_000012.npz   trainer state + counters after iteration 12 (last few kept);
                               the counters' "net" records the weights' net shape
        model.npz              the newest checkpoint's net as a model file (training/nets.py)
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
import zlib
from pathlib import Path

import numpy as np

from training.config import Config
from training.net_shape import checkpoint_shape, recorded_shape

ROOT = Path(__file__).resolve().parents[1]   # the checkout: runs/ lives there
CHECKPOINT_PREFIX = "ckpt_"
COUNTERS_KEY = "__counters__"
# The kernel's table of file locks (Linux), where readers see a trainer's lock on its run.
LOCK_TABLE = Path("/proc/locks")


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
    disk) the temporary is removed and the old file, if any, is left as it was. An OSError
    names `path` (see _name_file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with open(temporary, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException as error:
        temporary.unlink(missing_ok=True)
        if isinstance(error, OSError):
            _name_file(error, path)
        raise


def _name_file(error: OSError, path: Path) -> None:
    """Make `error` name `path`, the file that was being written, so that its one-line message
    (storage_fault) says which file the disk refused: a failed write, flush or fsync names no
    file, and a failed open or rename names the temporary, which is removed and means nothing
    to the user."""
    error.filename, error.filename2 = str(path), None


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def atomic_save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    atomic_write_bytes(path, buffer.getvalue())


class NpzError(ValueError):
    """A file that is not a sound .npz archive of arrays of numbers; the message says why in a
    few words, to follow the file's name."""


# The first bytes of a zip archive (an empty one starts with its end record).
ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")
# What reading a torn or garbled archive raises: zipfile's own errors, a truncated member, a
# garbled compressed member, RuntimeError for an encrypted member or (NotImplementedError)
# an unknown compression method, OSError (EINVAL) for a seek to an offset garbled negative.
DAMAGED_ARCHIVE = (zipfile.BadZipFile, EOFError, zlib.error, RuntimeError, OSError)


def load_npz(path: Path, keys: tuple[str, ...] | None = None) -> dict[str, np.ndarray]:
    """Every array of an .npz archive, or those of `keys` it holds (only they are read and
    decompressed); zip CRCs are checked on read, so a torn file raises.
    Anything else raises NpzError: another format, a torn or garbled archive, an array of
    Python objects. Nothing is ever unpickled: np.load would take a file that is not a zip
    archive for a pickle, and then advise loading it unsafely."""
    with open(path, "rb") as handle:
        if handle.read(4) not in ZIP_MAGIC:
            raise NpzError("not an .npz archive")
        handle.seek(0)
        try:
            with np.load(handle, allow_pickle=False) as archive:
                names = archive.files if keys is None else [
                    name for name in keys if name in archive.files]
                return {name: _npz_array(archive, name) for name in names}
        except DAMAGED_ARCHIVE as error:
            raise NpzError(f"a torn or garbled .npz archive ({_one_line(error)})") from None


def _npz_array(archive, name: str) -> np.ndarray:
    try:
        array = archive[name]
    except ValueError as error:
        # NumPy refuses an array of Python objects (or an outsized header) with advice to load
        # the file unsafely: advice not to pass on about a file that should hold numbers.
        why = ("it is not an array of plain numbers" if "pickle" in str(error).lower()
               else _one_line(error))
        raise NpzError(f"its array {name} is unreadable ({why})") from None
    if not isinstance(array, np.ndarray):   # a member that is not an .npy file comes as bytes
        raise NpzError(f"its member {name} is not an array")
    return array


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


class CheckpointError(Exception):
    pass


def no_checkpoint_message(run: Path, iteration: int, kept: list[int]) -> str:
    """The one-line refusal of a checkpoint `run` does not have, naming the sorted iterations
    it keeps as runs of consecutive ones ("142-541", "3, 5-7" or "none"): a run keeps
    hundreds of checkpoints, and the line must stay readable."""
    spans: list[list[int]] = []
    for kept_iteration in kept:
        if spans and kept_iteration == spans[-1][1] + 1:
            spans[-1][1] = kept_iteration
        else:
            spans.append([kept_iteration, kept_iteration])
    listed = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in spans) or "none"
    return f"{run} has no checkpoint of iteration {iteration} (it has {listed})"


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
        # The newest checkpoint's weights as a model file, rewritten at every checkpoint, so
        # that the GUI and the GTP engine play a run's latest net with --model at once.
        self.model_path = self.path / "model.npz"
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
        try:
            handle.seek(0)
            handle.truncate()
            handle.write(f"{os.getpid()}\n")
            handle.flush()
        except OSError as error:
            handle.close()
            _name_file(error, self.lock_path)
            raise
        self._lock_handle = handle

    def unlock(self) -> None:
        if self._lock_handle is not None:
            self._lock_handle.close()   # closing the descriptor releases the flock
            self._lock_handle = None

    def trainer_running(self) -> bool:
        """Whether a trainer holds the run's lock now, seen without taking it: a reader that
        took it even for a moment could make a trainer starting then refuse the run. Read off
        the kernel's table of file locks (/proc/locks): an FLOCK on trainer.lock's inode held
        by the PID written in it (the device column is left alone: on overlay file systems
        the table and stat name different devices). Where there is no such table, whether
        that PID is a live process."""
        try:
            inode = os.stat(self.lock_path).st_ino
            written = self.lock_path.read_text().split()
        except (FileNotFoundError, UnicodeDecodeError):
            return False
        pid = written[0] if written and written[0].isdigit() else None
        try:
            table = LOCK_TABLE.read_text()
        except OSError:
            table = None
        if table is not None:
            # "1: FLOCK  ADVISORY  WRITE 2699 fe:00:2147076 0 EOF"; a waiter's line has "->".
            held = (line.replace("->", " ").split() for line in table.splitlines())
            return any(len(fields) > 5 and fields[1] == "FLOCK"
                       and fields[5].rsplit(":", 1)[-1] == str(inode)
                       and (pid is None or fields[4] == pid) for fields in held)
        if pid is None:
            return False
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return False
        except PermissionError:     # alive, another user's
            return True
        return True

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
                what_then = ("the run then resumes with the net shape its checkpoints hold"
                             if self.checkpoint_iterations() else "a new run starts there")
                raise ValueError(f"{self.config_path} is unreadable ({error}); fix that value, "
                                 f"or move the file away: {what_then}") from None
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
        elif self.checkpoint_iterations():
            config = self._config_of_checkpoints(config, overrides or {})
        atomic_write_text(self.config_path, config.to_json() + "\n")
        atomic_write_text(self.path / "revision.txt", code_revision())
        return config

    def _config_of_checkpoints(self, config: Config, overrides: dict) -> Config:
        """`config` with the net shape of the newest sound checkpoint, for a run whose
        config.json is gone; ValueError (nothing written) when the command line asks
        explicitly for another shape, or no checkpoint is sound."""
        try:
            loaded = self.load_latest_checkpoint(
                accept=lambda state, counters: checkpoint_shape(state, counters, config.history))
        except CheckpointError as error:
            raise ValueError(f"{self.config_path} is missing and {error}") from None
        state, counters = loaded
        shape = checkpoint_shape(state, counters, config.history)
        stored = dataclasses.replace(config, **shape)
        asked = dataclasses.replace(stored, **overrides)
        problems = asked.incompatibilities(stored)
        if problems:
            raise ValueError(f"cannot resume {self.path}: its config.json is missing and its "
                             f"checkpoints hold another net shape than asked: "
                             + "; ".join(problems).replace("run has", "checkpoints have"))
        self.log(f"{self.config_path.name} was missing: rebuilt from the command line and the "
                 f"net shape of checkpoint {counters['iteration']} ("
                 + ", ".join(f"{name} {value}" for name, value in shape.items()) + ")")
        return asked.validate()

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
                        net: Config, keep: int, protect: tuple[int, ...] = ()) -> None:
        """Write the checkpoint, its counters recording the shape of `net` (the config whose
        net the state's weights are) as "net", then delete all but the newest `keep` and those
        in `protect` (the rating's reference checkpoint)."""
        arrays = dict(state)
        arrays[COUNTERS_KEY] = np.frombuffer(json.dumps({**counters, "net": net.shape()}).encode(),
                                             dtype=np.uint8)
        atomic_save_npz(self.checkpoint_path(iteration), arrays)
        for old in self.checkpoint_iterations()[:-keep]:
            if old not in protect:
                self.checkpoint_path(old).unlink(missing_ok=True)

    def load_latest_checkpoint(self, iteration: int | None = None, accept=None):
        """(state, counters) of the newest sound checkpoint (or of `iteration`), falling back
        past damaged ones with a message; None when there is none.

        Damaged means: unreadable (torn, garbled), counters that are not a JSON object with
        whole-number iteration, games, positions and train_steps (and, where they record one,
        a whole net shape), a non-finite array, or one that `accept(state, counters)` refuses
        by raising ValueError (the caller loads the weights there: a wrong-shaped array is
        refused by the load, which is all or nothing)."""
        candidates = self.checkpoint_iterations()
        if iteration is not None:
            if iteration not in candidates:
                raise CheckpointError(no_checkpoint_message(self.path, iteration, candidates))
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
                    accept(arrays, counters)
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
        """Append one line, whole or not at all. An OSError names metrics.jsonl (see
        _name_file)."""
        line = (json.dumps(record, sort_keys=True) + "\n").encode()
        try:
            _append_whole(self.metrics_path, line)
        except OSError as error:
            _name_file(error, self.metrics_path)
            raise

    def read_metrics(self) -> list[dict]:
        """The sound records; readers skip damaged lines (the trainer sets them aside)."""
        return [record for record, _ in self._metrics_lines() if record is not None]

    def _metrics_lines(self) -> list[tuple[dict | None, bytes]]:
        """(record or None if the line is damaged, the line's bytes) for every line.

        Bytes, split at "\n" only: a damaged line is moved aside exactly as it was (decoding
        with replacement would alter invalid UTF-8 in it), and a line that is not UTF-8 is
        damaged (json.loads would guess UTF-16 from bytes such as a BOM)."""
        if not self.metrics_path.exists():
            return []
        lines = []
        for line in io.BytesIO(self.metrics_path.read_bytes()).readlines():
            try:
                record = json.loads(line.decode("utf-8"))
                if not isinstance(record, dict) or not isinstance(record.get("iteration"), int):
                    raise ValueError("not a record with an iteration")
            except ValueError:   # UnicodeDecodeError and JSONDecodeError are ValueErrors
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
            if lines and lines[-1][0] is None and not lines[-1][1].endswith(b"\n"):
                lines.pop()
            damaged = [line for record, line in lines if record is None]
            kept = [line for record, line in lines
                    if record is not None and record["iteration"] <= iteration]
            if damaged:
                aside = self.metrics_path.with_name(self.metrics_path.name + ".damaged")
                previous = aside.read_bytes() if aside.exists() else b""
                if previous and not previous.endswith(b"\n"):   # edited by hand
                    previous += b"\n"   # keep its last line and the first moved apart
                atomic_write_bytes(aside, previous + b"".join(damaged))
                self.log(f"{len(damaged)} damaged line(s) of {self.metrics_path.name} moved "
                         f"to {aside.name}")
            data = b"".join(kept)
            if data != self.metrics_path.read_bytes():
                atomic_write_bytes(self.metrics_path, data)
        for directory in (self.path, self.checkpoints, self.replay, self.sgf):
            if directory.exists():
                for temporary in directory.glob(".*.tmp*"):
                    temporary.unlink(missing_ok=True)


def _append_whole(path: Path, data: bytes) -> None:
    """Append `data`; if the write fails (a full disk), cut the file back to where it was, so
    no torn line is left behind."""
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(descriptor).st_size
        try:
            written = 0
            while written < len(data):
                written += os.write(descriptor, data[written:])
            os.fsync(descriptor)
        except OSError:
            os.ftruncate(descriptor, size)
            raise
    finally:
        os.close(descriptor)


def _check_counters(counters) -> None:
    if not isinstance(counters, dict):
        raise ValueError("its counters are not a JSON object")
    for key in ("iteration", "games", "positions", "train_steps"):
        value = counters.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"its counter {key} is {value!r}, not a whole number")
    recorded_shape(counters)


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
