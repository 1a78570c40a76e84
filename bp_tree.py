"""The training loop: self-play -> replay buffer -> train -> evaluate -> checkpoint, repeated.

    python bp_tree.py [--run NAME] [--preset cpu|tiny|paper|9x9] [--FIELD VALUE ...]
    python bp_tree.py --preset 9x9 --run NEW --init-from models/9x9.npz   # a warm start (or a run / checkpoint)

Run again with the same --run to resume exactly where the last complete iteration left off
(see training/run_directory.py for what "complete" means and what is written where).

Exit codes (run.sh restarts the loop after any other, such as 1 for a crash):
    0    the requested iterations are done
    2    refused: bad arguments or config, or a run of another board size or net shape
    3    the run directory is owned by another trainer (the message names its PID)
    4    a file-system fault: --run names a file, or the disk is read-only or full
    5    damaged data that cannot be skipped (no readable checkpoint)
    129, 130, 143  stopped by SIGHUP, SIGINT (Ctrl-C) or SIGTERM: one line says which iteration
         was dropped; the same command resumes after the last complete one

    python bp_tree.py --progress [ARGS]   prints the newest checkpoint's iteration of the
                                          run ARGS name (0 if none), for run.sh
--init-from only applies to a run without a checkpoint: weights only, a fresh optimizer and
an empty replay buffer. The new run takes the source's board size and net shape
(Config.SHAPE_FIELDS, from its config) wherever the command line sets none, so a warm start
needs no shape flags; a shape flag that asks for another board size or net shape is refused,
except that the net may grow: --aux-heads true adds the ownership and score heads to a net
trained without them and --reply-head true the opponent's reply head (they start fresh), a
larger --blocks adds residual blocks after the source's last (they start as identities), a
larger --filters widens every layer (the added channels start as copies of the source's,
each one's outgoing weights shared out among it and its copies), and --extra-features true
or --komi-input true add the liberty and ko planes or the komi plane (the stem's weights on
them start at zero), so the grown net first plays as the source did; every other layer
comes from the source (training/nets.py init_weights). Train steps count from 0 again, and
so does the learning-rate schedule: a trained net went on better at --learning-rates
0:0.005 than at the schedule's first 0.02 (docs/LINEAGE.md).

The schedule (Config.schedule, the `9x9` preset's is the shipped net's lineage to its ninth
version) is followed at
the end of each iteration: events whose self-play position the run has reached change the
rate, the simulations or the net's shape (grown as a warm start grows it), before that
iteration's checkpoint, which is saved grown; a resume reads the shape off the checkpoint
and the position off its counters (`schedule_start`, a warm start's source's position, plus
`positions`).

Bookkeeping kept in the checkpoint's counters and written to metrics.jsonl each iteration:
`cpu_seconds`, the process's CPU time (time.process_time, all threads: self-play, training,
evaluation, and the start-up from TensorFlow's import on) summed over the processes that ran
the run's complete iterations (an iteration killed midway is not counted); `child_cpu_seconds`, the same for finished child
processes (GNU Go); `games`, self-play games; `gnugo_level`, the level of the next GNU Go match:
it starts at config.gnugo_level and goes up one after a match won at >= gnugo_promotion.
"""
from __future__ import annotations

import os
import shlex
import signal
import sys
import time
from pathlib import Path

import colorama
import numpy as np
from tqdm import tqdm

from cluster.address import ClusterError
from games.selfplay import SelfPlay
from games.stored_selfplay import StoredSelfPlay, StoredSelfPlayError, chunk_files
from kernels.go_batch import resolve_backend
from loop.evaluations import random_match, rated_evaluations
from loop.iteration_report import TensorBoard, iteration_record, summary_line, write_sgf_samples
from loop.selfplay_precision import int8_net, requantize, selfplay_choice
from training.checkpointing import completed_iteration, last_words, resume, save_iteration
from training.config import Config
from training.learner import Learner
from training.nets import (NetOpenError, describe_devices, playing_net, prepare_jax,
                           schedule_position, warm_start_position, with_source_shape)
from training.options import BACKEND_HELP
from training.passes import CpuTime
from training.replay_buffer import chunk_arrays
from training.run_directory import (CheckpointError, RunDirectory, RunLocked, atomic_save_npz,
                                    resolve_run_path, storage_fault)
from training.schedule_following import follow_schedule
from training.stopping import Stopped, check_stop, stop_on_signals

EXIT_REFUSED, EXIT_LOCKED, EXIT_STORAGE, EXIT_DAMAGED = 2, 3, 4, 5


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class TrainingLoop:
    """One run's loop: each `iterate` plays the iteration's self-play (or takes stored
    positions), keeps them as its replay chunk, trains the learner (training/learner.py) on
    the replay, plays the matches due (loop/evaluations.py), follows the schedule and saves
    the checkpoint that makes the iteration complete (training/checkpointing.py)."""

    def __init__(self, config: Config, run: RunDirectory, init_from: str | None = None,
                 command: str = "", schedule_start: int = 0,
                 selfplay_from: list[Path] | None = None):
        # CPU time counts from here: TensorFlow's import and the resume included.
        self.cpu_time = CpuTime(children=True)
        self.run = run
        self.learner = learner = Learner(config, run, schedule_start, log=log)
        try:
            resume(learner, init_from, log)
        except CheckpointError as error:
            log(f"bp_tree: {error}; move the damaged run away or pick another --run")
            raise SystemExit(EXIT_DAMAGED) from None
        except NetOpenError as error:
            log(f"bp_tree: --init-from: {error}")
            raise SystemExit(EXIT_REFUSED) from None
        config, counters = learner.config, learner.counters
        self.net = self._compiled_net()
        self.device_net = None       # the CUDA self-play net (_selfplay_net), if any
        try:
            self.inference = selfplay_choice(config, learner.trainer.model, log)
        except ValueError as error:
            log(f"bp_tree: {error}")
            raise SystemExit(EXIT_REFUSED) from None
        self.int8_net = None         # the int8 self-play net (_selfplay_net), if any
        if command:
            counters["commands"] = [*counters.get("commands", []), command]
        iteration = counters["iteration"]
        self.rng = np.random.default_rng([config.seed, iteration])
        if config.workers:
            # Deferred: Ray takes seconds to import and only --workers needs it.
            from cluster import RaySelfPlay
            try:
                self.selfplay = RaySelfPlay(config, learner.trainer.model.get_weights(),
                                            iteration, log)
            except ClusterError as error:
                log(f"bp_tree: {error}")
                raise SystemExit(EXIT_REFUSED) from None
        else:
            self.selfplay = self._local_selfplay(iteration)
        self.stored = None
        if selfplay_from:
            # Raises StoredSelfPlayError for a directory without chunks (main refuses it).
            self.stored = StoredSelfPlay(selfplay_from, config,
                                         taken=counters.get("stored_positions", 0), log=log)
            log(f"self-play from {', '.join(map(str, selfplay_from))}: "
                f"{self.stored.remaining:,} of {self.stored.total:,} stored positions to train on "
                f"before the loop's own self-play")
        self.tensorboard = TensorBoard(run, log)

    def _compiled_net(self):
        """The trainer's net as matches (and self-play off the CUDA rules) play it
        (training.nets.playing_net). On TensorFlow with eight compiled batch shapes: search
        steps often come up short of a full batch (selections ending on finished games need
        no net), and padding them to the full batch cost about a fifth of the net's time
        (bench_selfplay.py)."""
        return playing_net(self.learner.trainer, self.learner.config.num_games, shapes=8)

    def _selfplay_evaluator(self):
        """The net the CPU's self-play plays: the int8 graph where chosen, else the compiled
        net (the CUDA self-play net stays on the GPU; the CPU's matches play the compiled one)."""
        return self.int8_net if self.int8_net is not None else self.net

    def _local_selfplay(self, iteration: int) -> SelfPlay:
        config = self.learner.config
        selfplay = SelfPlay(config, self._selfplay_net(), seed=config.seed * 1_000_003 + iteration)
        selfplay.weights_version = iteration
        return selfplay

    def _selfplay_net(self):
        """The evaluator self-play runs: on the CUDA rules the net on the GPU without
        TensorFlow (architectures/array_net.py), so the planes never leave the device; it
        holds a folded copy of the weights, refreshed after each iteration's training.
        Elsewhere the compiled net, which reads the trainer's variables itself, or where the
        self-play precision is int8 (loop/selfplay_precision.py) ONNX Runtime's int8 graph of
        the trainer's weights, re-made after each iteration's training."""
        self.device_net = self.int8_net = None
        if resolve_backend(self.learner.config.backend) != "cuda":
            if self.inference.precision == "int8":
                self.int8_net = int8_net(self.inference, self.learner.trainer.model,
                                         self.learner.config)
                return self.int8_net
            return self.net
        import cupy  # deferred: a GPU extra
        from architectures.array_net import GPU_PRECISION, ArrayNet, keras_named_weights
        self.device_net = ArrayNet(keras_named_weights(self.learner.trainer.model),
                                   self.learner.config, xp=cupy, precision=GPU_PRECISION)
        return self.device_net

    def iterate(self) -> dict:
        learner, run = self.learner, self.run
        config, counters = learner.config, learner.counters
        iteration = counters["iteration"] + 1
        started = time.perf_counter()
        position_before = schedule_position(counters)

        stored = self.stored if self.stored is not None and self.stored.remaining > 0 else None
        source = self.selfplay if stored is None else stored
        with tqdm(total=config.positions_per_iteration, desc=f"iter {iteration} self-play",
                  unit="pos", leave=False, file=sys.stderr, disable=None) as bar:
            batch = source.play(config.positions_per_iteration,
                                progress=lambda done: bar.update(done - bar.n))
        if stored is not None:
            counters["stored_positions"] = stored.taken
        # The reply targets are kept only for a net with the reply head.
        targets = (batch.planes, batch.policy, batch.value, batch.ownership, batch.score,
                   batch.final, batch.komi, batch.surprise,
                   batch.reply if config.reply_head else None)
        atomic_save_npz(run.chunk_path(iteration), {**chunk_arrays(*targets),
                                                    "weights_version": batch.weights_version})
        learner.buffer.add(*targets)

        steps_before, training_started = counters["train_steps"], time.perf_counter()
        losses = learner.train(batch.positions, iteration, self.rng)
        train_seconds = time.perf_counter() - training_started
        self._publish(iteration)
        quantize_seconds = (requantize(self.int8_net, batch, config, self.rng)
                            if self.int8_net is not None else 0.0)
        # The match against random checks the net that self-play plays (int8 where chosen);
        # the rated evaluations below play float32, so that a rating chain does not depend on
        # the CPU a run was on.
        evaluation = random_match(config, self._selfplay_evaluator(), iteration)
        write_sgf_samples(run, config, iteration, batch.games)

        counters["iteration"] = iteration
        counters["games"] += len(batch.games) + batch.other_games
        counters["positions"] += batch.positions
        counters["wall_time_s"] += time.perf_counter() - started
        record = iteration_record(iteration, counters, batch, len(learner.buffer),
                                  self.selfplay.tree_overflows, stored)
        record.update(evaluation)
        if config.workers:
            record.update(self.selfplay.last_metrics)
        record.update(losses)
        record.update(inference=self.inference.precision,
                      quantize_seconds=round(quantize_seconds, 3),
                      selfplay_seconds=round(batch.seconds, 3),
                      train_seconds=round(train_seconds, 3),
                      train_samples_per_s=round(
                          (counters["train_steps"] - steps_before) * config.train_batch_size
                          / max(train_seconds, 1e-9), 1))
        if config.resign_threshold > -1 and batch.playthrough_resignations:
            record["false_resign_rate"] = batch.false_resignations / batch.playthrough_resignations
        record.update(rated_evaluations(config, self.net, counters, run, iteration, log))
        changes = self._follow_schedule(position_before, iteration)
        if changes:
            record["schedule"] = changes
        record["schedule_position"] = schedule_position(counters)
        record.update(self.cpu_time.charge(counters))
        run.append_metrics(record)
        self.tensorboard.write(record)
        # The checkpoint comes last: it is what makes this iteration complete.
        save_iteration(learner, iteration)
        return record

    def _publish(self, iteration: int) -> None:
        """The weights are now version `iteration`: actors get them at their next call, the
        CUDA self-play net now. The matches' net follows the trainer's weights itself (a
        CompiledNet reads its variables; OnnxNet.following their version)."""
        model = self.learner.trainer.model
        if self.learner.config.workers:
            self.selfplay.publish(model.get_weights(), iteration)
            return
        self.selfplay.weights_version = iteration
        if self.device_net is not None:
            from architectures.array_net import keras_named_weights
            self.device_net.load(keras_named_weights(model))

    def _follow_schedule(self, before: int, iteration: int) -> list[str]:
        """The schedule's events since `before` (training/schedule_following.py), and the nets
        that play rebuilt for a grown net or new simulations."""
        old = self.learner.config
        changes = follow_schedule(self.learner, before, iteration, log)
        new = self.learner.config
        grew = new.grows_from(old)
        if grew:
            self.net = self._compiled_net()
        if (grew or new.simulations != old.simulations) and not new.workers:
            self.selfplay = self._local_selfplay(iteration)
        return changes


DESCRIPTION = "Train a Go net by batched self-play. " + BACKEND_HELP


def add_arguments(parser) -> None:
    parser.add_argument("--selfplay-from", default=None, metavar="DIR[,DIR...]",
                        type=lambda text: [Path(part) for part in text.split(",") if part],
                        help="train first on the self-play positions that selfplay_chunks.py "
                             "wrote in these directories (in order, each position once, also "
                             "across restarts), then go on with the loop's own self-play")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--progress"]:
        _, args = Config.from_args(argv[1:], add_arguments=add_arguments,
                                   description=DESCRIPTION)
        iterations = RunDirectory(resolve_run_path(args.run)).checkpoint_iterations()
        print(iterations[-1] if iterations else 0)
        return 0
    config, args = Config.from_args(argv, add_arguments=add_arguments,
                                    description=DESCRIPTION)
    # The preset and the command line, before a warm start's shape is taken: where a warm
    # start enters the schedule is measured against the schedule's own nets (a config that
    # took the source's 8 blocks would find every position as grown as the source).
    asked = config
    command = shlex.join(["bp_tree.py", *argv])
    try:
        prepare_jax(config)
        resolve_backend(config.backend)   # a missing GPU is refused before anything is touched
        if args.selfplay_from:
            chunk_files(args.selfplay_from)   # a directory without chunks: refused here
        if config.workers and config.ray_address not in ("", "auto"):
            # Likewise a cluster that does not answer (Ray itself would retry for minutes).
            from cluster.address import check_reachable
            check_reachable(config.ray_address)
    except (RuntimeError, ClusterError, StoredSelfPlayError) as error:
        log(f"bp_tree: {error}")
        return EXIT_REFUSED
    run = RunDirectory(resolve_run_path(args.run), log=log)
    loop = None
    try:
        # The lock and the run directory come first: their refusals need no TensorFlow, which
        # takes seconds to load (TrainingLoop loads it).
        run.lock()
        schedule_start = 0
        try:
            if args.init_from is not None and not run.config_path.exists():
                # A new run from a warm start takes the source's net shape by default.
                config, taken = with_source_shape(config, args.init_from,
                                                  Config.explicit_overrides(args))
                if taken:
                    log(f"--init-from {args.init_from}: its net shape: {', '.join(taken)}")
            config = run.prepare(config, Config.explicit_overrides(args))
            if args.init_from is not None and not run.checkpoint_iterations():
                # It enters the schedule where the source stands in it (again on a restart
                # before its first checkpoint: the position lives in the checkpoints).
                schedule_start = warm_start_position(asked, args.init_from)
                if config.schedule:
                    log(f"--init-from {args.init_from}: schedule position {schedule_start:,}")
            scheduled = {name for _, name, _ in config.schedule}
            for name, flag in (("simulations", "simulations"), ("learning_rate", "learning_rates")):
                if name in scheduled and flag in Config.explicit_overrides(args):
                    log(f"note: the schedule sets {name} from its events' positions on; "
                        f"--{flag.replace('_', '-')} holds only before them (--schedule \"\" "
                        f"drops the schedule)")
        except NetOpenError as error:
            log(f"bp_tree: --init-from: {error}")
            return EXIT_REFUSED
        except ValueError as error:
            log(f"bp_tree: {error}")
            return EXIT_REFUSED
        colorama.just_fix_windows_console()
        loop = TrainingLoop(config, run, init_from=args.init_from, command=command,
                            schedule_start=schedule_start, selfplay_from=args.selfplay_from)
        devices = (f"{describe_devices(config, loop.net)}; "
                   f"training: {loop.learner.trainer.device}")
        now, counters = loop.learner.config, loop.learner.counters
        log(f"run {run.path}: {now.board_size}x{now.board_size}, net {now.blocks}x{now.filters}, "
            f"{now.simulations} simulations, {now.num_games} games at once"
            + (f", schedule position {schedule_position(counters):,} "
               f"({len(config.schedule_events(schedule_position(counters), 2 ** 62))} "
               f"events ahead)" if config.schedule else "") + f"; {devices}")
        while not config.iterations or counters["iteration"] < config.iterations:
            check_stop()
            if config.max_cpu_seconds and counters["cpu_seconds"] >= config.max_cpu_seconds:
                log(f"run {run.path}: {counters['cpu_seconds']:.0f} CPU seconds reached "
                    f"(max_cpu_seconds {config.max_cpu_seconds:g})")
                break
            record = loop.iterate()
            print(summary_line(record), flush=True)
        else:
            # Also reached at once when a resumed run had already done its iterations (one that
            # train_sgf.py made, say): without a word the trainer would seem to exit for nothing.
            log(f"run {run.path}: iteration {counters['iteration']} of {config.iterations} "
                f"done; --iterations N goes on to N (0: no limit)")
        log(last_words(loop.learner))
        return 0
    except RunLocked as error:
        log(f"bp_tree: {error}")
        return EXIT_LOCKED
    except (Stopped, KeyboardInterrupt) as stop:
        signum = stop.signum if isinstance(stop, Stopped) else signal.SIGINT
        if loop is None:
            where = "before the first iteration began; nothing was changed"
        else:
            done = completed_iteration(run)
            where = (f"during iteration {done + 1}, which is dropped; the "
                     f"same command resumes after iteration {done}")
        log(f"bp_tree: stopped by {signal.Signals(signum).name} {where}")
        if loop is not None:
            log(last_words(loop.learner))
        return 128 + signum
    except OSError as error:
        line = storage_fault(error)
        if line is None:
            raise
        log(f"bp_tree: {line} (free space, fix permissions or pick another --run; what was "
            f"written before is intact)")
        return EXIT_STORAGE
    finally:
        if loop is not None and config.workers:
            loop.selfplay.close()
        run.unlock()


if __name__ == "__main__":
    stop_on_signals()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.exit(main())
