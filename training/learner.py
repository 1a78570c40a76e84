"""The learning side of the training loop (bp_tree.py): a run's trainer, the config it trains
under, the counters its checkpoints carry and the replay buffer, with the loop's training
pass. training/checkpointing.py resumes and saves it; training/schedule_following.py moves it
along the schedule.

Configs: `base` is the run's config.json; `config` what it is now, after the schedule's
events up to the run's position (Config.scheduled), with its net's shape; `first_config` the
shape every checkpoint of the run grew from.

Counters (a checkpoint's, bp_tree.py's docstring says what each means): iteration, games,
positions, train_steps, wall_time_s, cpu_seconds, child_cpu_seconds, gnugo_level, commands,
schedule_start; later also init_from, stored_positions, replay_since (the iteration from
which the replay chunks have this net's input planes), rated_iteration and elo.
"""
from __future__ import annotations

import math

import numpy as np

from training.config import Config
from training.nets import build_trainer, grown_as
from training.passes import train_pass
from training.replay_buffer import ReplayBuffer
from training.run_directory import RunDirectory


class Learner:
    """A new run's learner until training/checkpointing.py resume loads the run's state:
    the trainer built for the schedule's config at `schedule_start`, fresh counters and an
    empty replay buffer."""

    def __init__(self, base: Config, run: RunDirectory, schedule_start: int = 0, log=print):
        self.base = base
        self.config = base.scheduled(schedule_start)
        self.first_config = self.config
        self.run, self.log = run, log
        self.trainer = build_trainer(self.config)
        self.counters = {"iteration": 0, "games": 0, "positions": 0, "train_steps": 0,
                         "wall_time_s": 0.0, "cpu_seconds": 0.0, "child_cpu_seconds": 0.0,
                         "gnugo_level": self.config.gnugo_level, "commands": [],
                         "schedule_start": schedule_start}
        self.buffer = self.new_buffer()

    def new_buffer(self) -> ReplayBuffer:
        config = self.config
        return ReplayBuffer(config.replay_window, config.board_size, config.board_planes,
                            config.komi_input, reply=config.reply_head)

    def load_state(self, state: dict, counters: dict) -> None:
        """Load a checkpoint's state, first rebuilding the trainer when the checkpoint's net
        has another shape (a run that grew on schedule has checkpoints of several)."""
        grown = grown_as(self.first_config, state, counters)
        trainer = self.trainer if grown == self.config else build_trainer(grown)
        trainer.load_state_dict(state)     # raises for weights that do not fit: nothing changed
        self.config, self.trainer = grown, trainer

    def train(self, new_positions: int, iteration: int, rng: np.random.Generator) -> dict:
        """An iteration's training pass: sample_reuse samples per new position, drawn
        uniformly or by policy surprise; none until the buffer holds min_replay positions.
        Returns the pass's losses ({} without one)."""
        config = self.config
        if len(self.buffer) < config.min_replay:
            return {}
        steps = max(1, math.ceil(new_positions * config.sample_reuse / config.train_batch_size))
        probabilities = (self.buffer.sampling_weights(config.policy_surprise_weight)
                         if config.policy_surprise_weight > 0 else None)
        losses = train_pass(self.trainer, self.buffer, steps, config.train_batch_size, rng,
                            probabilities, description=f"iter {iteration} training")
        self.counters["train_steps"] += steps
        if "skipped_train_steps" in losses:
            self.log(f"iteration {iteration}: {losses['skipped_train_steps']} training steps "
                     f"skipped (non-finite loss)")
        return losses
