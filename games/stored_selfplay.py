"""Self-play played elsewhere: the chunks of `selfplay_chunks.py` (a GPU machine without
TensorFlow, say), handed to the training loop in order in place of its own self-play
(`bp_tree.py --selfplay-from DIR[,DIR...]`).

    stored = StoredSelfPlay([Path("gpu1"), Path("gpu2")], config, taken=0, log=print)
    stored.remaining            # positions not yet handed over
    batch = stored.play(4096)   # the next 4096 positions (fewer at the end): a SelfPlayBatch

Order: the directories as given, each one's chunk_NNNNNN.npz by name, each chunk's positions
as stored. `taken` skips that many positions (a resumed run: the loop keeps the count in its
counters), so every stored position is trained once whatever the stops. A damaged chunk
(training/replay_buffer.read_chunk's checks) is skipped with a message when its turn comes:
the batch that reaches it comes out short by its positions (one whose `value` array cannot
even be read counts no positions from the start). The batches carry no game records (the
chunks keep none): a chunk's games are counted in `other_games` of the batch that hands over
its last position.
"""
from __future__ import annotations

import time
import zipfile
from pathlib import Path

import numpy as np

from games.selfplay import SelfPlayBatch
from training.replay_buffer import read_chunk
from training.run_directory import load_npz

CHUNK_GLOB = "chunk_*.npz"


class StoredSelfPlayError(ValueError):
    """Directories that hold no chunks; the message names the first such."""


def chunk_files(directories: list[Path]) -> list[Path]:
    files = []
    for directory in directories:
        found = sorted(directory.glob(CHUNK_GLOB)) if directory.is_dir() else []
        if not found:
            raise StoredSelfPlayError(f"{directory}: no {CHUNK_GLOB} files (selfplay_chunks.py "
                                      f"writes them)")
        files.extend(found)
    return files


class StoredSelfPlay:
    def __init__(self, directories: list[Path], config, taken: int = 0, log=print):
        self.files = chunk_files(directories)
        self.config = config
        self.log = log
        self.planes_shape = (config.board_size, config.board_size, config.board_planes)
        # The chunks' sizes, from their small `value` arrays alone (one that cannot be read
        # counts 0); damage elsewhere in a chunk is found and reported when its turn comes.
        self.sizes, self.games = zip(*(self._size(path) for path in self.files))
        self.total = sum(self.sizes)
        self.taken = min(taken, self.total)
        self._loaded: tuple[int, object] | None = None   # (file index, ChunkPositions)

    @staticmethod
    def _size(path: Path) -> tuple[int, int]:
        """(positions, games) of a chunk."""
        try:
            chunk = load_npz(path, keys=("value", "games"))
            return len(chunk["value"]), int(chunk["games"]) if "games" in chunk else 0
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
            return 0, 0

    @property
    def remaining(self) -> int:
        return self.total - self.taken

    def _chunk(self, index: int):
        if self._loaded is None or self._loaded[0] != index:
            path = self.files[index]
            try:
                positions = read_chunk(path, self.planes_shape, self.config.num_actions)
                if self.config.komi_input and positions.komi is None:
                    raise ValueError("no komi, for a net that reads it")
            except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
                self.log(f"stored self-play chunk {path} is damaged ({type(error).__name__}: "
                         f"{error}); skipping its {self.sizes[index]:,} positions")
                positions = None
            self._loaded = (index, positions)
        return self._loaded[1]

    def play(self, num_positions: int, progress=None) -> SelfPlayBatch:
        """The next `num_positions` stored positions (fewer once they run out)."""
        start = time.perf_counter()
        parts, games = [], 0
        wanted = min(num_positions, self.remaining)
        while wanted > 0:
            index, offset = self._position(self.taken)
            positions = self._chunk(index)
            count = min(wanted, self.sizes[index] - offset)
            if positions is not None:
                parts.append((positions, slice(offset, offset + count)))
            if offset + count == self.sizes[index] and positions is not None:
                games += self.games[index]
            self.taken += count
            wanted -= count
            if progress is not None:
                progress(min(num_positions, sum(p[1].stop - p[1].start for p in parts)))
        return self._batch(parts, games, time.perf_counter() - start)

    def _position(self, taken: int) -> tuple[int, int]:
        """(file index, offset in it) of the `taken`-th stored position."""
        for index, size in enumerate(self.sizes):
            if taken < size:
                return index, taken
            taken -= size
        raise IndexError("no stored positions left")

    def _batch(self, parts, games: int, seconds: float) -> SelfPlayBatch:
        n, count = self.config.board_size, sum(part.stop - part.start for _, part in parts)

        def joined(name, empty, fill=None):
            arrays = []
            for positions, part in parts:
                array = getattr(positions, name)
                if array is None:
                    array = np.full((part.stop - part.start, *empty.shape[1:]), fill, empty.dtype)
                else:
                    array = array[part]
                arrays.append(array.astype(empty.dtype))
            return np.concatenate(arrays) if arrays else empty

        return SelfPlayBatch(
            planes=joined("planes", np.zeros((0, *self.planes_shape), np.uint8)),
            policy=joined("policy", np.zeros((0, self.config.num_actions), np.float32)),
            value=joined("value", np.zeros(0, np.float32)),
            ownership=joined("ownership", np.zeros((0, n, n), np.int8), 0),
            score=joined("score", np.zeros(0, np.float32), 0.0),
            final=joined("final", np.zeros(0, bool), False),
            komi=joined("komi", np.zeros(0, np.float32), 0.0),
            surprise=joined("surprise", np.zeros(0, np.float32), np.nan),
            reply=joined("reply", np.zeros((0, self.config.num_actions), np.float32), 0.0),
            # Counted as played by the weights the run started from (version 0).
            weights_version=np.zeros(count, np.int32),
            seconds=max(seconds, 1e-9), positions_played=count, other_games=games)
