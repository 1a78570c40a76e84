"""A learner (training/learner.py) resumed from its run's newest checkpoint, or started fresh
or from a warm start's weights, and saved at the end of each iteration, with the run's model
file kept the newest checkpoint's net.

An iteration is complete once its checkpoint is saved: the counters run ahead of the newest
checkpoint from the moment an iteration's games are counted until then, so a stop in between
drops that iteration and a resume starts after the newest checkpoint (training/run_directory.py
says what is written where).
"""
from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from training.config import Config
from training.learner import Learner
from training.nets import (NetOpenError, init_weights, model_info, run_model_info,
                           save_model_file)
from training.run_directory import ROOT, RunDirectory
from training.schedule_following import catch_up_with_schedule


def resume(learner: Learner, init_from: str | None, log=print) -> None:
    """Load the run's newest sound checkpoint into `learner` (its counters, its net's shape
    grown on to the schedule's, the replay buffer refilled from the chunks) and drop what
    came after it; without one, start from `init_from`'s weights (a fresh optimizer and an
    empty replay buffer) or from scratch. Raises CheckpointError when no checkpoint is
    readable, NetOpenError for an `init_from` that cannot be opened or does not fit."""
    run, counters = learner.run, learner.counters
    loaded = run.load_latest_checkpoint(accept=learner.load_state)
    if loaded is None:
        run.discard_after(0)
        if init_from is None:
            log(f"starting a new run in {run.path}")
            return
        found = init_weights(learner.trainer, learner.config, init_from, log=log)
        counters["init_from"] = _checkout_relative(found.path) + (
            f" iteration {found.iteration}" if found.iteration is not None else "")
        log(f"starting a new run in {run.path} from the weights of {found.label}")
        return
    if init_from is not None:
        log(f"--init-from {init_from} ignored: {run.path} resumes from its own checkpoint")
    _, saved = loaded   # the state is loaded: accept= did it
    counters.update(saved)
    counters.setdefault("schedule_start", 0)   # a run from before the schedule
    catch_up_with_schedule(learner, log)
    iteration = counters["iteration"]
    run.discard_after(iteration)
    # Positions from before the input planes grew have too few planes for this net.
    since = counters.get("replay_since", 0)
    chunks = [run.chunk_path(i) for i in run.chunk_iterations() if since < i <= iteration]
    learner.buffer = learner.new_buffer()
    loaded_positions = learner.buffer.load_chunks(chunks, log=log)
    log(f"resumed {run.path} after iteration {iteration}: {counters['games']} games, "
        f"{counters['train_steps']} train steps, {len(learner.buffer)} buffered positions "
        f"(read {loaded_positions})")
    refresh_model(learner)


def _checkout_relative(path: Path) -> str:
    """The source as a path inside this checkout when it lies there: the exported model keeps
    it in its __info__, and a path of the machine that trained it means nothing to a clone."""
    try:
        return path.relative_to(ROOT).as_posix()
    except ValueError:
        return str(path)


def save_iteration(learner: Learner, iteration: int) -> None:
    """Make `iteration` complete: its checkpoint (a net grown by the schedule is saved grown:
    its shape and the counters' position agree), the model file from it, and the replay
    chunks pruned to the window."""
    run, counters, config = learner.run, learner.counters, learner.config
    # The checkpoint the next rated evaluation plays against outlives the pruning.
    rated = counters.get("rated_iteration")
    state = learner.trainer.state_dict()
    run.save_checkpoint(iteration, state, counters, net=config,
                        keep=config.checkpoints_to_keep, protect=(rated,) if rated else ())
    save_model_file(run.model_path, config, state,
                    run_model_info(run.path.name, iteration, counters))
    _prune_chunks(run, config)


def _prune_chunks(run: RunDirectory, config: Config) -> None:
    """Delete chunks wholly outside the replay window, keeping one iteration of margin so
    a fallback to the previous checkpoint still finds its window."""
    kept = 0
    margin = config.replay_window + 2 * config.positions_per_iteration
    for iteration in reversed(run.chunk_iterations()):
        path = run.chunk_path(iteration)
        if kept >= margin:
            path.unlink(missing_ok=True)
            continue
        try:
            with np.load(path) as chunk:
                kept += len(chunk["value"])
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
            continue   # a damaged chunk: resume skips it too


def completed_iteration(run: RunDirectory) -> int:
    """The newest iteration with a checkpoint (0 if none)."""
    saved = run.checkpoint_iterations()
    return saved[-1] if saved else 0


def refresh_model(learner: Learner) -> None:
    """Make model.npz the newest checkpoint's net when it is not (missing, from an older
    run's code, or a stop came between the checkpoint and it): from the checkpoint file,
    since the trainer's weights may hold part of a dropped iteration."""
    run = learner.run
    iteration = completed_iteration(run)
    try:
        if model_info(run.model_path).get("iteration") == iteration:
            return
    except (NetOpenError, ValueError, KeyError):
        pass
    loaded = run.load_latest_checkpoint(iteration)
    if loaded is not None:
        state, counters = loaded
        save_model_file(run.model_path, learner.config, state,
                        run_model_info(run.path.name, iteration, counters))


def last_words(learner: Learner) -> str:
    """Where the run's model is, and its newest figure against GNU Go: the trainer's last
    line however it ends."""
    run = learner.run
    iteration = completed_iteration(run)
    if not iteration:
        return f"run {run.path}: no iteration complete yet, so no model"
    refresh_model(learner)
    line = f"model: {run.model_path} (iteration {iteration}"
    rated = [record for record in run.read_metrics() if "win_rate_gnugo" in record]
    if rated:
        last = rated[-1]
        line += (f"; at iteration {last['iteration']} it won {last['win_rate_gnugo']:.0%} of "
                 f"{last.get('gnugo_games', '?')} games against GNU Go level "
                 f"{last['gnugo_level']}")
    return line + ")"
