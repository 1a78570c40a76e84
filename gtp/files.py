"""Files a GTP controller names (`loadsgf`, `printsgf`): regular files only, reads bounded,
writes atomic.

A controller may name any path the engine's process can reach. Reading a FIFO blocks until a
writer comes (forever, for the whole engine), a device or a /proc file may never end, and a
plain write replaces a file byte by byte, so an engine killed halfway leaves it torn, and
follows whatever the name points at. So a read opens without blocking and checks that what it
opened is a regular file no larger than a cap before reading it; a write refuses an existing
path that is not a regular file (a symlink included: it is not followed) and moves a complete
temporary file into place.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

from training.run_directory import atomic_write_bytes

# The largest SGF file loadsgf reads. A 20,000-move game that printsgf wrote, the engine's
# comment on each of its own moves, is about 0.5 MB. The cost is in the moves: a legal game of
# 1 MB of bare moves (170,000 of them) took loadsgf 16.5 s on the 2-core development machine
# (parsing, then checking and replaying every move), which is what the cap bounds.
MAX_SGF_BYTES = 1 << 20


class FileRefused(Exception):
    """A path the engine will not read or write; the message says why, in a few words."""


def read_regular_file(path: str | os.PathLike, limit: int = MAX_SGF_BYTES) -> bytes:
    """The bytes of the regular file at `path` (symlinks followed), FileRefused if it is
    something else or larger than `limit`; OSError as the system reports it."""
    path = Path(path).expanduser()
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise FileRefused("not a regular file")
    # O_NONBLOCK: should the path have become a FIFO since the stat, opening it cannot block;
    # fstat then tells what was really opened.
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise FileRefused("not a regular file")
        if info.st_size > limit:
            raise FileRefused(f"larger than {limit} bytes")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(descriptor, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:                      # it grew after the fstat
            raise FileRefused(f"larger than {limit} bytes")
        return b"".join(chunks)
    finally:
        os.close(descriptor)


def write_regular_file(path: str | os.PathLike, data: bytes) -> None:
    """Write `data` to `path` atomically; FileRefused if the path exists and is not a regular
    file (a directory, FIFO, device or symlink) or its directory does not exist; OSError as
    the system reports it (permissions, a full disk: the old file is then untouched)."""
    path = Path(path).expanduser()
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        raise FileRefused("not a regular file")
    if not path.parent.is_dir():
        raise FileRefused("no such directory")
    atomic_write_bytes(path, data)
