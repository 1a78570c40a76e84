"""The mean of a run's last checkpoints' weights: one model whose strength depends less on
where the run's last steps happened to leave the weights.

    averaged = average_checkpoints("runs/x", 16)                 # the newest 16 sound ones
    averaged = average_checkpoints("runs/x", 16, checkpoint=120)  # the 16 up to iteration 120
    averaged.config, averaged.weights, averaged.iterations, averaged.counters

Every "model.NNNN" array is the arithmetic mean over the checkpoints, batch-norm moving means
and variances included: the nets of one run a few iterations apart are close enough that the
mean of their statistics is the statistics of the mean net. (Measured on the 9x9 preset's
net: re-estimated in one pass over the run's replay, the means moved by about 1% of a
channel's standard deviation, the variances by at most 5%, the held-out losses in the third
decimal; docs/RESULTS.md.)
The checkpoints must hold one net: a run whose schedule grew the net in the span cannot be
averaged across the growth. They are consecutive iterations: a damaged checkpoint in the span
is passed over with a message and the next older one taken instead, so the mean is always of
`count` checkpoints, but a missing one (an older checkpoint a run keeps for its rated
matches, past a gap) ends the span.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from training.config import Config
from training.nets import (MODEL_PREFIX, NetOpenError, checkpoint_file, grown_as, is_model_file,
                           read_config, schedule_position)
from training.net_shape import checkpoint_shape
from training.run_directory import CheckpointError, RunDirectory, no_checkpoint_message


@dataclass(frozen=True)
class AveragedWeights:
    path: Path                  # the run directory
    config: Config              # the newest checkpoint's config (its schedule position, its net)
    weights: dict               # "model.NNNN" float32 arrays, the means
    iterations: tuple           # the checkpoints averaged, oldest first
    counters: dict              # the newest checkpoint's counters

    @property
    def label(self) -> str:
        """Which net this is, for messages: "the mean of RUN's N checkpoints of iterations A
        to B"."""
        return (f"the mean of {self.path.name}'s {len(self.iterations)} checkpoints of "
                f"iterations {self.iterations[0]} to {self.iterations[-1]}")


def average_checkpoints(run: str | os.PathLike, count: int, *, checkpoint: int | None = None,
                        fewer: bool = False, log=print) -> AveragedWeights:
    """The mean of the weights of `count` sound checkpoints of `run` (a run directory, or one
    of its checkpoint files: then up to that one): the newest, or those up to iteration
    `checkpoint`, which must be sound itself. NetOpenError (one line) when there are not that
    many in a row, or they hold different nets. With `fewer`, the mean of as many as there are
    in a row of one net, at least one (a run's first iterations, as a follower meets them)."""
    if count < 1:
        raise NetOpenError(f"the number of checkpoints to average must be at least 1, got {count}")
    run, checkpoint = checkpoint_file(run, checkpoint)
    if is_model_file(run):
        raise NetOpenError(f"{run} is a model file: it has no checkpoints to average")
    config, path = read_config(run)
    directory = RunDirectory(path, log=log)
    available = directory.checkpoint_iterations()
    if checkpoint is not None:
        if checkpoint not in available:
            raise NetOpenError(no_checkpoint_message(path, checkpoint, available))
        available = [iteration for iteration in available if iteration <= checkpoint]
    sums: dict[str, np.ndarray] = {}
    dtypes: dict[str, np.dtype] = {}
    taken: list[int] = []            # newest first
    newest_config = newest_counters = newest_shape = None   # of taken[0]
    # The span is consecutive iterations: a run keeps an older checkpoint for its rated
    # matches beside its last few, and that one is not averaged with them.
    previous = None
    for iteration in reversed(available):
        if len(taken) == count or (previous is not None and iteration != previous - 1):
            break
        previous = iteration
        try:
            # A damaged one (its message is the run directory's) is passed over as a resume
            # passes it over; so are weights that fit no net.
            state, counters = directory.load_latest_checkpoint(
                iteration, accept=lambda state, counters: checkpoint_shape(state, counters,
                                                                           config.history))
        except CheckpointError:
            if iteration == checkpoint:
                raise NetOpenError(f"{path}: checkpoint {iteration} is damaged") from None
            continue
        shape = checkpoint_shape(state, counters, config.history)
        weights = {name: array for name, array in state.items()
                   if name.startswith(MODEL_PREFIX)}
        if not taken:
            newest_config = grown_as(config.scheduled(schedule_position(counters)), state,
                                     counters)
            if newest_config.shape() != shape:
                raise NetOpenError(f"{path}: checkpoint {iteration} does not hold the net its "
                                   f"config.json describes")
            newest_counters, newest_shape = counters, shape
            sums = {name: array.astype(np.float64) for name, array in weights.items()}
            dtypes = {name: array.dtype for name, array in weights.items()}
        elif shape != newest_shape:
            if fewer:       # the span ends where the schedule grew the net
                break
            raise NetOpenError(
                f"{path}: checkpoints {iteration} and {taken[-1]} hold different nets (the "
                f"schedule grew it in between): average at most {len(taken)} up to "
                f"{taken[0]}")
        else:
            for name, array in weights.items():
                sums[name] += array
        taken.append(iteration)
    if len(taken) < count and not (fewer and taken):
        raise NetOpenError(f"{path} has {len(taken)} sound checkpoint"
                           f"{'' if len(taken) == 1 else 's'} in a row"
                           f"{f' up to iteration {checkpoint}' if checkpoint else ''}, "
                           f"not the {count} to average (--checkpoints-to-keep sets how many a "
                           f"run keeps)")
    means = {name: (total / len(taken)).astype(dtypes[name]) for name, total in sums.items()}
    return AveragedWeights(path, newest_config, means, tuple(reversed(taken)), newest_counters)
