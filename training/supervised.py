"""Training a run's net on positions with fixed targets instead of self-play: game records
(SGF files, `train_sgf.py`, positions from games/sgf_corpus.py) and a teacher's soft targets
(`distill.py`, training/distillation.py).

    corpus = games.sgf_corpus.read_sgf_directory("games/", config)
    train, held_out = split_games(corpus.games, 0.1, seed)
    loop = SupervisedRun(config, run_directory)           # resumes the run's newest checkpoint
    losses = loop.train(stack(train), steps, rng)         # 8 random symmetries per sample
    accuracy = move_accuracy(loop.net, stack(held_out))   # argmax over legal moves == played

Positions (`Positions`, one row per position, the run's input planes):
    planes  uint8   (P, N, N, C)   as self-play stores them (kernels/README.md)
    policy  float32 (P, N*N+1)     target distribution: one-hot on the played move for game
                                   records, the teacher's soft policy for distillation
    value   float32 (P,)           target from the side to move's view: the game's result
                                   (+1 / -1 / 0) for records, the teacher's value for distillation
    legal   bool    (P, N*N+1)     the legal moves there (accuracy is judged among them)
    move    int64   (P,)           the move played (pass = N*N)

The run directory stays one that `bp_tree.py` continues: each pass of training writes a
checkpoint (weights, optimizer, counters) as bp_tree's iterations do, and `supervised.jsonl`
gets one JSON line per pass (losses, accuracies, positions).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np

from kernels.go_batch import KOMI_SCALE
from training.config import Config
from training.nets import build_trainer, playing_net
from training.passes import CpuTime, train_pass
from training.replay_buffer import ReplayBuffer
from training.run_directory import (CheckpointError, RunDirectory, RunLocked, atomic_write_text,
                                    resolve_run_path)

# What supervised.jsonl keeps of a pass's losses (training/passes.py): the heads these
# targets train are the policy and value heads.
SUPERVISED_FIELDS = ("loss_policy", "loss_value", "loss_total", "skipped_train_steps")


@dataclass
class Positions:
    planes: np.ndarray
    policy: np.ndarray
    value: np.ndarray
    legal: np.ndarray
    move: np.ndarray

    FIELDS = ("planes", "policy", "value", "legal", "move")

    def __len__(self) -> int:
        return len(self.value)

    def take(self, index) -> "Positions":
        return Positions(*(getattr(self, name)[index] for name in self.FIELDS))


def stack(parts: list[Positions]) -> Positions:
    if not parts:
        raise ValueError("no positions to stack")
    return Positions(*(np.concatenate([getattr(p, name) for p in parts])
                       for name in Positions.FIELDS))


def split_games(games: list, held_out_share: float, seed: int) -> tuple[list[int], list[int]]:
    """(training, held-out) game indices: a seeded shuffle, round(share * games) held out
    (at least one when the share is positive and there are two games or more)."""
    count = len(games)
    order = np.random.default_rng(seed).permutation(count)
    held = int(round(held_out_share * count))
    if held_out_share > 0 and count >= 2:
        held = min(max(held, 1), count - 1)
    return sorted(order[held:].tolist()), sorted(order[:held].tolist())


def move_accuracy(net, positions: Positions, batch: int = 256) -> float:
    """Share of positions where the net's most likely legal move is the move played."""
    hits = 0
    for start in range(0, len(positions), batch):
        stop = start + batch
        policy, _ = net(positions.planes[start:stop].astype(np.float32))
        masked = np.where(positions.legal[start:stop], policy, -1.0)
        hits += int((masked.argmax(axis=1) == positions.move[start:stop]).sum())
    return hits / max(len(positions), 1)


class RunRefused(Exception):
    """A run a supervised command cannot train: the message is one line, `code` the exit
    code (bp_tree.py's: 3 another trainer owns the run, 2 a refused config)."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


def open_supervised_run(config: Config, args, log=print, **options) -> "SupervisedRun":
    """The SupervisedRun of `args.run`, owned and resumed as bp_tree.py owns and resumes a run:
    the directory's lock first, then its config.json with the command line's explicit flags on
    top. Raises RunRefused."""
    run = RunDirectory(resolve_run_path(args.run), log=log)
    try:
        run.lock()
    except RunLocked as error:
        raise RunRefused(str(error), 3) from None
    try:
        config = run.prepare(config, Config.explicit_overrides(args))
        return SupervisedRun(config, run, log=log, **options)
    except ValueError as error:
        raise RunRefused(str(error), 2) from None


class SupervisedRun:
    """A run's trainer and the net its weights play as (training.nets.playing_net: a
    compiled net on TensorFlow, ONNX Runtime's on JAX), resumed from the run's newest
    checkpoint if it has one (its counters carry on), with what a pass of fixed-target
    training needs."""

    def __init__(self, config: Config, run: RunDirectory, log=print, eval_batch: int = 256):
        # CPU time counts from here, as in bp_tree's loop, so a run's cpu_seconds include the
        # passes that trained it before self-play took over.
        self.cpu_time = CpuTime()
        self.config, self.run, self.log = config, run, log
        self.trainer = build_trainer(config)
        self.net = playing_net(self.trainer, eval_batch)
        self.counters = {"iteration": 0, "games": 0, "positions": 0, "train_steps": 0,
                         "wall_time_s": 0.0, "cpu_seconds": 0.0}
        try:
            loaded = run.load_latest_checkpoint()
        except CheckpointError as error:
            raise ValueError(f"{error}; move the damaged run away or pick another --run") from None
        if loaded is not None:
            state, counters = loaded
            self.trainer.load_state_dict(state)
            self.counters.update(counters)
            run.discard_after(self.counters["iteration"])
            log(f"continuing {run.path} after iteration {self.counters['iteration']}")

    def train(self, positions: Positions, steps: int, rng: np.random.Generator) -> dict:
        """`steps` SGD steps on batches drawn uniformly from `positions`, each sample under a
        random one of the 8 symmetries; the mean losses of the steps."""
        config = self.config
        buffer = ReplayBuffer(len(positions), config.board_size, config.board_planes,
                              config.komi_input)
        if config.komi_input:
            # The net's planes end with the komi plane: the buffer keeps it as a number.
            buffer.add(positions.planes[..., :-1], positions.policy, positions.value,
                       komi=positions.planes[:, 0, 0, -1] * KOMI_SCALE)
        else:
            buffer.add(positions.planes, positions.policy, positions.value)
        # Records have no final position (not final) and no reply targets (rows of 0): the
        # auxiliary heads and the reply head learn nothing here.
        losses = train_pass(self.trainer, buffer, steps, config.train_batch_size, rng)
        self.counters["train_steps"] += steps
        return {key: value for key, value in losses.items() if key in SUPERVISED_FIELDS}

    def steps_per_pass(self, positions: int) -> int:
        return max(1, math.ceil(positions / self.config.train_batch_size))

    def finish_iteration(self, record: dict, seconds: float) -> dict:
        """Checkpoint the pass as the run's next iteration and log its record."""
        self.counters["iteration"] += 1
        self.counters["wall_time_s"] += seconds
        record = {"iteration": self.counters["iteration"],
                  "train_steps": self.counters["train_steps"],
                  **self.cpu_time.charge(self.counters), **record}
        path = self.run.path / "supervised.jsonl"
        lines = path.read_text() if path.exists() else ""
        atomic_write_text(path, lines + json.dumps(record) + "\n")
        self.run.save_checkpoint(self.counters["iteration"], self.trainer.state_dict(),
                                 self.counters, net=self.config,
                                 keep=self.config.checkpoints_to_keep)
        return record
