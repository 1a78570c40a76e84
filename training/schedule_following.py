"""The schedule (Config.schedule) followed by a learner (training/learner.py): at the end of
each iteration the events whose self-play position the run has reached change the learning
rate, the simulations or the net's shape, and a resumed checkpoint that lacks a growth its
position has passed is grown at once. A growth is function-preserving (training/nets.py
grow_trainer): the grown net first plays as before. New input planes restart the replay, since
the positions stored before lack them.
"""
from __future__ import annotations

from training.config import Config
from training.learner import Learner
from training.nets import grow_trainer, schedule_position


def scheduled_config(learner: Learner) -> Config:
    """The config the schedule asks for at the learner's position, holding the net's shape
    where the net is larger (a warm start's source may be larger than the schedule's net)."""
    return learner.base.scheduled(schedule_position(learner.counters)).holding(
        learner.config).validate()


def follow_schedule(learner: Learner, before: int, iteration: int, log=print) -> list[str]:
    """Apply the schedule's events between the positions `before` and now, at the end of
    `iteration`. Returns "field old -> new" for the metrics and the log."""
    position = schedule_position(learner.counters)
    if not learner.base.schedule_events(before, position):
        return []
    new = scheduled_config(learner)
    changes = new.changes_from(learner.config)
    if not changes:
        return []
    _take(learner, new, iteration)
    log(f"iteration {iteration}: schedule position {position:,}: " + ", ".join(changes))
    return changes


def catch_up_with_schedule(learner: Learner, log=print) -> None:
    """After a resume: train under the schedule's config at the checkpoint's position, grown
    now where the schedule stands past a growth the checkpoint lacks (a schedule given since),
    as the loop would have grown it."""
    wanted, have = scheduled_config(learner), learner.config
    if wanted.grows_from(have):
        log(f"the schedule at position {schedule_position(learner.counters):,} asks for a "
            f"larger net than checkpoint {learner.counters['iteration']}: growing it ("
            + ", ".join(wanted.changes_from(have)) + ")")
    _take(learner, wanted, learner.counters["iteration"])


def _take(learner: Learner, new: Config, iteration: int) -> None:
    """Train under `new` from here; a replay restarted here keeps the chunks after
    `iteration`."""
    old = learner.config
    if new.grows_from(old):
        learner.trainer = grow_trainer(learner.trainer, old, new)
        if new.input_planes != old.input_planes:
            learner.config = new
            learner.buffer = learner.new_buffer()
            learner.counters["replay_since"] = iteration
    learner.trainer.set_learning_rates(new.learning_rates)
    learner.config = new
