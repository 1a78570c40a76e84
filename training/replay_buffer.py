"""The replay buffer: the most recent self-play positions, sampled for training (uniformly,
or weighted by policy surprise), each sample under a random one of the 8 board symmetries.

Storage (a ring of `capacity` positions, oldest overwritten first):
    planes  uint8   [capacity, N, N, C]   the net's input planes but the komi plane (all 0/1)
    komi    float32 [capacity]            the game's komi for the side to move (+ for White);
                                          with komi_input, samples end with its plane
    policy  float32 [capacity, N*N+1]     search visit distribution, pass last
    value   float32 [capacity]            game result from the side to move's view, -1..1
    ownership int8  [capacity, N, N]      final owner of each point (Tromp-Taylor, the end
                                          position), +1 the side to move, -1 the opponent
    score   float32 [capacity]            final area margin for the side to move, komi included
    final   bool    [capacity]            ownership and score exist (False: a resigned game, or
                                          a chunk written before they were recorded)
    surprise float32 [capacity]           KL(policy target || the net's root priors) in nats
                                          (games/selfplay.py); NaN where unknown (game records,
                                          chunks written before it was recorded)
    reply   float32 [capacity, N*N+1]     only with `reply` (a net with the opponent's reply
                                          head): the policy target of the game's next position;
                                          all 0 where there is none (a game's last position,
                                          game records, chunks written before it was recorded)

Policy surprise weighting (KataGo; Config.policy_surprise_weight w): a position is drawn with
probability proportional to (1 - w) + w * s / mean(s), s its surprise and the mean over the
buffer's known ones; an unknown surprise counts as the mean. w = 0 is uniform sampling.

On disk it is the run directory's replay chunks (one per iteration, see run_directory.py);
`load_chunks` rebuilds the ring from the newest chunks after a restart.
"""
from __future__ import annotations

import zipfile
from pathlib import Path
from typing import NamedTuple

import numpy as np

from kernels.go_batch import with_komi_plane
from training import symmetries
from training.run_directory import load_npz


class Sample(NamedTuple):
    """A training batch, float32, each sample under its own random symmetry; score is divided
    by N*N (the scale the score head predicts)."""
    planes: np.ndarray      # (B, N, N, C), C the net's input planes (the komi plane included)
    policy: np.ndarray      # (B, N*N+1)
    value: np.ndarray       # (B,)
    ownership: np.ndarray   # (B, N, N)
    score: np.ndarray       # (B,)
    final: np.ndarray       # (B,) 1.0 where ownership and score exist
    reply: np.ndarray       # (B, N*N+1) the next position's policy target; 0 rows where none


def step_inputs(trainer, sample: Sample) -> tuple:
    """`sample` as the arguments of a step of `trainer` (architectures/train_step.py): the
    auxiliary targets exactly when its net has the ownership and score heads, the reply
    targets exactly when it has the reply head, None for the others."""
    auxiliary = ((sample.ownership, sample.score, sample.final) if trainer.aux_heads
                 else (None, None, None))
    return (sample.planes, sample.policy, sample.value, *auxiliary,
            sample.reply if trainer.reply_head else None)


class ReplayBuffer:
    """`board_planes`: the stored 0/1 planes (Config.board_planes); `komi_input`: samples
    get the komi plane appended (the net reads it); `reply`: the reply targets are kept
    (Config.reply_head), else they are dropped and samples carry rows of 0."""

    def __init__(self, capacity: int, board_size: int, board_planes: int,
                 komi_input: bool = False, reply: bool = False):
        self.capacity = capacity
        self.board_size = board_size
        self.komi_input = bool(komi_input)
        self.num_actions = board_size * board_size + 1
        self.planes = np.zeros((capacity, board_size, board_size, board_planes), dtype=np.uint8)
        self.komi = np.zeros(capacity, dtype=np.float32)
        self.policy = np.zeros((capacity, self.num_actions), dtype=np.float32)
        self.value = np.zeros(capacity, dtype=np.float32)
        self.ownership = np.zeros((capacity, board_size, board_size), dtype=np.int8)
        self.score = np.zeros(capacity, dtype=np.float32)
        self.final = np.zeros(capacity, dtype=bool)
        self.surprise = np.full(capacity, np.nan, dtype=np.float32)
        self.reply = (np.zeros((capacity, self.num_actions), dtype=np.float32) if reply
                      else None)
        self.size = 0
        self.next = 0  # ring position of the next write

    def __len__(self) -> int:
        return self.size

    def add(self, planes: np.ndarray, policy: np.ndarray, value: np.ndarray,
            ownership: np.ndarray | None = None, score: np.ndarray | None = None,
            final: np.ndarray | None = None, komi: np.ndarray | None = None,
            surprise: np.ndarray | None = None, reply: np.ndarray | None = None) -> None:
        """Append positions; without ownership/score/final they are marked as not final.
        `komi` (k,), each position's komi for the side to move, is needed with komi_input;
        `surprise` (k,) is unknown (NaN) where not given; `reply` (k, N*N+1) is none (rows
        of 0) where not given."""
        count = len(value)
        if reply is not None and (np.shape(reply) != (count, self.num_actions)
                                  or not np.isfinite(reply).all()):
            raise ValueError(f"replay add: reply must be ({count}, {self.num_actions}) finite "
                             f"numbers, got {np.shape(reply)}")
        if surprise is None:
            surprise = np.full(count, np.nan, np.float32)
        surprise = np.asarray(surprise, np.float32)
        if surprise.shape != (count,) or (surprise[~np.isnan(surprise)] < 0).any():
            raise ValueError(f"replay add: surprise must be {count} numbers >= 0 (or NaN)")
        n = self.board_size
        if komi is None:
            if self.komi_input:
                raise ValueError("replay add: positions without their komi, for a net that "
                                 "reads it")
            komi = np.zeros(count, np.float32)
        if np.shape(komi) != (count,) or not np.isfinite(komi).all():
            raise ValueError(f"replay add: komi must be {count} finite numbers")
        if ownership is None:
            ownership = np.zeros((count, n, n), np.int8)
            score, final = np.zeros(count, np.float32), np.zeros(count, bool)
        if planes.shape[1:] != self.planes.shape[1:] or policy.shape != (count, self.num_actions):
            raise ValueError(f"replay add: planes {planes.shape} / policy {policy.shape} do not match "
                             f"the buffer's {self.planes.shape[1:]} / (k, {self.num_actions})")
        if ownership.shape != (count, n, n) or len(score) != count or len(final) != count:
            raise ValueError(f"replay add: ownership {ownership.shape}, score {len(score)}, final "
                             f"{len(final)} do not match {count} positions of {n}x{n}")
        keep = slice(-min(count, self.capacity), None)
        count = min(count, self.capacity)
        positions = (self.next + np.arange(count)) % self.capacity
        self.planes[positions] = planes[keep]
        self.policy[positions] = policy[keep]
        self.value[positions] = value[keep]
        self.ownership[positions] = ownership[keep]
        self.score[positions] = score[keep]
        self.final[positions] = final[keep]
        self.komi[positions] = np.asarray(komi, np.float32)[keep]
        self.surprise[positions] = surprise[keep]
        if self.reply is not None:
            self.reply[positions] = 0.0 if reply is None else np.asarray(reply)[keep]
        self.next = int((self.next + count) % self.capacity)
        self.size = min(self.capacity, self.size + count)

    def sampling_weights(self, surprise_weight: float) -> np.ndarray:
        """float64 (size,): each stored position's probability of being drawn (see the module
        docstring)."""
        surprise = self.surprise[:self.size].astype(np.float64)
        known = ~np.isnan(surprise)
        mean = surprise[known].mean() if known.any() else 0.0
        relative = np.where(known, surprise / mean, 1.0) if mean > 0 else np.ones(self.size)
        weights = (1 - surprise_weight) + surprise_weight * relative
        return weights / weights.sum()

    def sample(self, batch_size: int, rng: np.random.Generator,
               probabilities: np.ndarray | None = None) -> Sample:
        """Stored positions, uniformly or with `probabilities` (`sampling_weights`, computed
        once for the many batches drawn between additions), each under a random symmetry (the
        same one for its planes, policy and ownership)."""
        if self.size == 0:
            raise ValueError("replay buffer is empty")
        if probabilities is not None:
            if len(probabilities) != self.size:
                raise ValueError(f"replay sample: {len(probabilities)} probabilities for "
                                 f"{self.size} positions")
            index = rng.choice(self.size, batch_size, p=probabilities)
        else:
            index = rng.integers(0, self.size, batch_size)
        symmetry = rng.integers(0, 8, batch_size)
        stored = symmetries.take_planes(self.planes, index, symmetry)
        # The komi plane is one value over the board: every symmetry keeps it.
        planes = (with_komi_plane(stored, self.komi[index]) if self.komi_input
                  else stored.astype(np.float32))
        policy = symmetries.take_policy(self.policy, index, symmetry)
        ownership = symmetries.take_planes(self.ownership, index, symmetry).astype(np.float32)
        reply = (symmetries.take_policy(self.reply, index, symmetry)
                 if self.reply is not None
                 else np.zeros((batch_size, self.num_actions), np.float32))
        return Sample(planes, policy, self.value[index], ownership,
                      self.score[index] / np.float32(self.board_size ** 2),
                      self.final[index].astype(np.float32), reply)

    def load_chunks(self, paths: list[Path], log=print) -> int:
        """Fill from chunk files, oldest first, keeping the newest `capacity` positions. A
        damaged chunk (unreadable, a key missing, shapes that disagree, values outside their
        range) is skipped with a message: losing its positions costs a little data, refusing
        to resume would cost the run."""
        loaded = 0
        for path in paths:
            try:
                positions = read_chunk(path, self.planes.shape[1:], self.num_actions)
                self.add(*positions)
            except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
                log(f"replay chunk {path.name} is damaged ({type(error).__name__}: {error}); "
                    f"skipping it")
                continue
            loaded += len(positions.value)
        return loaded


class ChunkPositions(NamedTuple):
    """A chunk's positions, in the order of `ReplayBuffer.add`'s arguments."""
    planes: np.ndarray
    policy: np.ndarray
    value: np.ndarray
    ownership: np.ndarray | None
    score: np.ndarray | None
    final: np.ndarray | None
    komi: np.ndarray | None
    surprise: np.ndarray | None
    reply: np.ndarray | None


def read_chunk(path: Path, planes_shape: tuple, num_actions: int) -> ChunkPositions:
    """A chunk file's positions, checked against the buffer's planes (N, N, C) and actions.
    Raises (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) for a damaged one:
    shapes that disagree, 0/1 planes above 1, a policy not finite, a value outside -1..1.
    Chunks written before the auxiliary heads carry no ownership targets, and those written
    before komi was an input no komi (runs whose net cannot read it: a net that does refuses
    them in add); a policy may be stored in float16 (selfplay_chunks.py), so may the reply
    targets, which chunks written before the reply head lack."""
    chunk = load_npz(path)
    planes, policy, value = chunk["planes"], chunk["policy"], chunk["value"]
    count = len(value)
    if (value.ndim != 1 or planes.shape != (count, *planes_shape)
            or policy.shape != (count, num_actions)):
        raise ValueError(f"shapes {planes.shape}, {policy.shape}, {value.shape}")
    if planes.max(initial=0) > 1 or not (np.isfinite(policy).all()
                                         and (np.abs(value) <= 1).all()):
        raise ValueError("values outside their range")
    extra = ((chunk["ownership"], chunk["score"], chunk["final"])
             if "ownership" in chunk else (None, None, None))
    reply = chunk["reply"].astype(np.float32) if "reply" in chunk else None
    if reply is not None and reply.shape != policy.shape:
        raise ValueError(f"reply targets {reply.shape} for policy targets {policy.shape}")
    return ChunkPositions(planes, policy.astype(np.float32), value, *extra,
                          komi=chunk["komi"] if "komi" in chunk else None,
                          surprise=chunk["surprise"] if "surprise" in chunk else None,
                          reply=reply)


def chunk_arrays(planes: np.ndarray, policy: np.ndarray, value: np.ndarray,
                 ownership: np.ndarray, score: np.ndarray, final: np.ndarray,
                 komi: np.ndarray, surprise: np.ndarray,
                 reply: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """A chunk's arrays (the keys read_chunk reads); the reply targets, when given, in
    float16: half the bytes, and rows of 0 stay 0."""
    arrays = {"planes": planes.astype(np.uint8), "policy": policy.astype(np.float32),
              "value": value.astype(np.float32), "ownership": ownership.astype(np.int8),
              "score": score.astype(np.float32), "final": final.astype(bool),
              "komi": komi.astype(np.float32), "surprise": surprise.astype(np.float32)}
    if reply is not None:
        arrays["reply"] = reply.astype(np.float16)
    return arrays
