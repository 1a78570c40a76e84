"""A pass of training as every trainer runs one (bp_tree.py's loop, train_sgf.py, distill.py):
the SGD steps over a replay buffer's samples with their mean losses, and the CPU time a run's
counters accumulate.

    losses = train_pass(trainer, buffer, steps, batch_size, rng)
    # {"loss_policy": mean, ..., "learning_rate": the last step's, "skipped_train_steps": k}
    cpu_time = CpuTime(children=True)        # counts from here
    record.update(cpu_time.charge(counters))  # {"cpu_seconds": ..., "child_cpu_seconds": ...}
"""
from __future__ import annotations

import resource
import sys
import time

import numpy as np
from tqdm import tqdm

from training.replay_buffer import ReplayBuffer, step_inputs

# The losses a pass averages, in the order records list them; a net without the auxiliary or
# reply heads has no ownership, score or reply loss.
LOSSES = ("loss_policy", "loss_value", "loss_l2", "loss_total", "loss_ownership", "loss_score",
          "loss_reply")


def train_pass(trainer, buffer: ReplayBuffer, steps: int, batch_size: int,
               rng: np.random.Generator, probabilities: np.ndarray | None = None,
               description: str | None = None) -> dict:
    """`steps` steps of `trainer` (architectures/train_step.py) on batches of `batch_size`
    drawn from `buffer`, uniformly or with `probabilities` (ReplayBuffer.sampling_weights).
    Returns each loss's mean over the steps taken (5 decimals), the learning rate of the last
    step taken, and `skipped_train_steps` when some steps were skipped (a non-finite loss
    changes nothing, so it counts in no mean). With a `description`, a progress bar on a
    terminal's stderr."""
    # Drawn as the trainer takes them: the host draws the next batch while the device
    # computes the last step (Trainer.train_steps). Where the host runs ahead, the device
    # queues at most the pass's batches (an iteration's positions times sample_reuse
    # samples: about 360 MB for the GPU script's 16,384 positions of 9x9 at reuse 4).
    batches = (step_inputs(trainer, buffer.sample(batch_size, rng, probabilities))
               for _ in tqdm(range(steps), desc=description, unit="step", leave=False,
                             file=sys.stderr, disable=None if description else True))
    totals: dict[str, float] = {}
    done = 0
    for stats in trainer.train_steps(batches):
        if stats["skipped"]:
            continue
        done += 1
        for key in LOSSES:
            if key in stats:
                totals[key] = totals.get(key, 0.0) + float(stats[key])
        totals["learning_rate"] = float(stats["learning_rate"])
    result = {key: round(value / max(done, 1), 5) if key != "learning_rate" else value
              for key, value in totals.items()}
    if done < steps:
        result["skipped_train_steps"] = steps - done
    return result


class CpuTime:
    """CPU seconds charged to a run's counters: this process's (time.process_time, all
    threads) and, with `children`, its finished child processes' (GNU Go), each counted from
    the previous charge, or from the clock's creation, so an iteration killed midway adds
    nothing to the checkpoint's counters."""

    def __init__(self, children: bool = False):
        self.children = children
        self._marks = self._read()

    def _read(self) -> dict[str, float]:
        marks = {"cpu_seconds": time.process_time()}
        if self.children:
            usage = resource.getrusage(resource.RUSAGE_CHILDREN)
            marks["child_cpu_seconds"] = usage.ru_utime + usage.ru_stime
        return marks

    def charge(self, counters: dict) -> dict:
        """Add the CPU time since the last charge to `counters`; returns their totals, rounded
        to hundredths, for the iteration's record."""
        now = self._read()
        for key, value in now.items():
            counters[key] += value - self._marks[key]
        self._marks = now
        return {key: round(counters[key], 2) for key in now}
