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
larger --filters widens every layer (the added channels start with zero weights into the
source's), and --extra-features true or --komi-input true add the liberty and ko planes or
the komi plane (the stem's weights on them start at zero), so the grown net first plays as
the source did; every other layer comes from the source (training/nets.py init_weights). Train steps
count from 0 again, and so does the learning-rate schedule: a trained net went on better at
--learning-rates 0:0.005 than at the schedule's first 0.02 (docs/LINEAGE.md).

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

import math
import os
import resource
import shlex
import signal
import sys
import time
import zipfile
from pathlib import Path

import colorama
import numpy as np
from colorama import Fore, Style
from tqdm import tqdm

from cluster.address import ClusterError
from games.gnugo import GnuGoError, GnuGoNotFound
from games.matches import NetEntry, checkpoint_vs_checkpoint, play_against_gnugo, play_pair
from games.ratings import elo_step
from games.selfplay import SelfPlay
from games.stored_selfplay import StoredSelfPlay, StoredSelfPlayError, chunk_files
from games.sgf_records import game_to_sgf, result_text
from kernels.go_batch import resolve_backend
from training.config import Config
from training.nets import (NetOpenError, build_trainer, describe_devices, grow_trainer,
                           grown_as, init_weights, model_info, open_net, run_model_info,
                           save_model_file, schedule_position, warm_start_position,
                           with_source_shape)
from training.replay_buffer import ReplayBuffer, chunk_arrays, train_on
from training.run_directory import (CheckpointError, RunDirectory, RunLocked, atomic_save_npz,
                                    atomic_write_bytes, resolve_run_path, storage_fault)

EXIT_REFUSED, EXIT_LOCKED, EXIT_STORAGE, EXIT_DAMAGED = 2, 3, 4, 5
CHECKOUT = Path(__file__).resolve().parent


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class Stopped(BaseException):
    """A stop signal arrived: the step in flight is dropped and the trainer exits 128 + signum.
    A BaseException, so that no `except Exception` on the way up swallows it."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def stop_on_signals() -> None:
    """SIGTERM, SIGINT and SIGHUP stop the trainer cleanly (main prints one line). Python runs
    the handler between bytecodes, so a net call or a write in flight finishes first; files are
    written atomically either way. Once stopping, further signals are ignored, so the cleanup
    (the lock, Ray's actors) is not cut short by a second Ctrl-C or a forwarding run.sh."""
    def handler(signum, frame):
        for number in STOP_SIGNALS:
            signal.signal(number, signal.SIG_IGN)
        raise Stopped(signum)
    for number in STOP_SIGNALS:
        signal.signal(number, handler)


def child_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _checkout_relative(path: Path) -> str:
    """The source as a path inside this checkout when it lies there: the exported model keeps
    it in its __info__, and a path of the machine that trained it means nothing to a clone."""
    try:
        return path.relative_to(CHECKOUT).as_posix()
    except ValueError:
        return str(path)


class TrainingLoop:
    def __init__(self, config: Config, run: RunDirectory, init_from: str | None = None,
                 command: str = "", schedule_start: int = 0,
                 selfplay_from: list[Path] | None = None):
        # CPU time counts from here: TensorFlow's import and the resume included.
        self._cpu_mark, self._child_cpu_mark = time.process_time(), child_cpu_seconds()
        # Deferred: TensorFlow (and what imports it) loads only once the run is prepared.
        import tensorflow as tf
        from architectures import CompiledNet

        # `base` is the run's config.json; `config` what it is now, after the schedule's
        # events up to the run's position (Config.scheduled), with its net's shape.
        self.base = config
        self.config = config = config.scheduled(schedule_start)
        self._first_config = config      # the shape every checkpoint of the run grew from
        self.run = run
        self.trainer = build_trainer(config)
        self.counters = {"iteration": 0, "games": 0, "positions": 0, "train_steps": 0,
                         "wall_time_s": 0.0, "cpu_seconds": 0.0, "child_cpu_seconds": 0.0,
                         "gnugo_level": config.gnugo_level, "commands": [],
                         "schedule_start": schedule_start}
        self._resume(init_from)
        config = self.config
        # Eight compiled batch shapes: search steps often come up short of a full batch
        # (selections ending on finished games need no net), and padding them to the full
        # batch cost about a fifth of the net's time (bench_selfplay.py).
        self.net = CompiledNet(self.trainer.model, config.num_games, shapes=8)
        if command:
            self.counters["commands"] = [*self.counters.get("commands", []), command]
        iteration = self.counters["iteration"]
        self.rng = np.random.default_rng([config.seed, iteration])
        if config.workers:
            # Deferred: Ray takes seconds to import and only --workers needs it.
            from cluster import RaySelfPlay
            try:
                self.selfplay = RaySelfPlay(config, self.trainer.model.get_weights(), iteration, log)
            except ClusterError as error:
                log(f"bp_tree: {error}")
                raise SystemExit(EXIT_REFUSED) from None
        else:
            self.selfplay = SelfPlay(config, self._selfplay_net(),
                                     seed=config.seed * 1_000_003 + iteration)
            self.selfplay.weights_version = iteration
        self.stored = None
        if selfplay_from:
            # Raises StoredSelfPlayError for a directory without chunks (main refuses it).
            self.stored = StoredSelfPlay(selfplay_from, config,
                                         taken=self.counters.get("stored_positions", 0), log=log)
            log(f"self-play from {', '.join(map(str, selfplay_from))}: "
                f"{self.stored.remaining:,} of {self.stored.total:,} stored positions to train on "
                f"before the loop's own self-play")
        self.writer = tf.summary.create_file_writer(str(run.tensorboard))
        self.tf = tf

    def _selfplay_net(self):
        """The evaluator self-play runs: on the CUDA rules the net on the GPU without
        TensorFlow (architectures/array_net.py), so the planes never leave the device; it
        holds a folded copy of the weights, refreshed after each iteration's training.
        Elsewhere the compiled net, which reads the trainer's variables itself."""
        self.device_net = None
        if resolve_backend(self.config.backend) != "cuda":
            return self.net
        import cupy  # deferred: a GPU extra
        from architectures.array_net import GPU_PRECISION, ArrayNet, keras_named_weights
        self.device_net = ArrayNet(keras_named_weights(self.trainer.model), self.config,
                                   xp=cupy, precision=GPU_PRECISION)
        return self.device_net

    def _load_state(self, state: dict) -> None:
        """Load a checkpoint's state, first rebuilding the trainer when the checkpoint's net
        has another shape (a run that grew on schedule has checkpoints of several)."""
        grown = grown_as(self._first_config, state)
        trainer = self.trainer if grown == self.config else build_trainer(grown)
        trainer.load_state_dict(state)     # raises for weights that do not fit: nothing changed
        self.config, self.trainer = grown, trainer

    def _new_buffer(self) -> ReplayBuffer:
        config = self.config
        return ReplayBuffer(config.replay_window, config.board_size, config.board_planes,
                            config.komi_input, reply=config.reply_head)

    def _resume(self, init_from: str | None) -> None:
        try:
            loaded = self.run.load_latest_checkpoint(accept=self._load_state)
        except CheckpointError as error:
            log(f"bp_tree: {error}; move the damaged run away or pick another --run")
            raise SystemExit(EXIT_DAMAGED) from None
        if loaded is None:
            self.buffer = self._new_buffer()
            self.run.discard_after(0)
            if init_from is None:
                log(f"starting a new run in {self.run.path}")
                return
            try:
                found = init_weights(self.trainer, self.config, init_from, log=log)
            except NetOpenError as error:
                log(f"bp_tree: --init-from: {error}")
                raise SystemExit(EXIT_REFUSED) from None
            self.counters["init_from"] = _checkout_relative(found.path) + (
                f" iteration {found.iteration}" if found.iteration is not None else "")
            log(f"starting a new run in {self.run.path} from the weights of {found.label}")
            return
        if init_from is not None:
            log(f"--init-from {init_from} ignored: {self.run.path} resumes from its own checkpoint")
        _, counters = loaded   # the state is loaded: accept= did it
        self.counters.update(counters)
        self.counters.setdefault("schedule_start", 0)   # a run from before the schedule
        wanted = self.base.scheduled(schedule_position(self.counters))
        have = self.config                # the checkpoint's shape (_load_state)
        wanted = wanted.holding(have).validate()
        if wanted.grows_from(have):
            # The schedule stands past a growth this checkpoint lacks (a schedule given
            # since): grow it now, as the loop would have.
            log(f"the schedule at position {schedule_position(self.counters):,} asks for a "
                f"larger net than checkpoint {counters['iteration']}: growing it ("
                + ", ".join(wanted.changes_from(have)) + ")")
            self.trainer = grow_trainer(self.trainer, have, wanted)
            if wanted.input_planes != have.input_planes:
                self.counters["replay_since"] = self.counters["iteration"]
        self.config = wanted
        self.trainer.set_learning_rates(self.config.learning_rates)
        self.buffer = self._new_buffer()
        iteration = self.counters["iteration"]
        self.run.discard_after(iteration)
        # Positions from before the input planes grew have too few planes for this net.
        since = self.counters.get("replay_since", 0)
        chunks = [self.run.chunk_path(i) for i in self.run.chunk_iterations()
                  if since < i <= iteration]
        loaded_positions = self.buffer.load_chunks(chunks, log=log)
        log(f"resumed {self.run.path} after iteration {iteration}: {self.counters['games']} games, "
            f"{self.counters['train_steps']} train steps, {len(self.buffer)} buffered positions "
            f"(read {loaded_positions})")
        self._refresh_model()

    def iterate(self) -> dict:

        config, run = self.config, self.run
        iteration = self.counters["iteration"] + 1
        started = time.perf_counter()
        position_before = schedule_position(self.counters)

        stored = self.stored is not None and self.stored.remaining > 0
        source = self.stored if stored else self.selfplay
        with tqdm(total=config.positions_per_iteration, desc=f"iter {iteration} self-play",
                  unit="pos", leave=False, file=sys.stderr, disable=None) as bar:
            batch = source.play(config.positions_per_iteration,
                                progress=lambda done: bar.update(done - bar.n))
        if stored:
            self.counters["stored_positions"] = self.stored.taken
        # The reply targets are kept only for a net with the reply head.
        targets = (batch.planes, batch.policy, batch.value, batch.ownership, batch.score,
                   batch.final, batch.komi, batch.surprise,
                   batch.reply if config.reply_head else None)
        atomic_save_npz(run.chunk_path(iteration), {**chunk_arrays(*targets),
                                                    "weights_version": batch.weights_version})
        self.buffer.add(*targets)

        losses = self._train(batch.positions, iteration)
        # The weights are now version `iteration`: actors get them at their next call.
        if config.workers:
            self.selfplay.publish(self.trainer.model.get_weights(), iteration)
        else:
            self.selfplay.weights_version = iteration
            if self.device_net is not None:
                from architectures.array_net import keras_named_weights
                self.device_net.load(keras_named_weights(self.trainer.model))

        evaluation = None
        if config.random_every and iteration % config.random_every == 0:
            # Greedy after the match's random openings: the net at its strongest.
            evaluation = play_pair(config, self.net, "random", config.eval_games_random,
                                   config.eval_simulations, seed=config.seed + iteration,
                                   parallel=min(config.eval_games_random, config.num_games),
                                   names=("net", "random"), opening_moves=0)
        self._write_sgf(iteration, batch.games)

        self.counters["iteration"] = iteration
        self.counters["games"] += len(batch.games) + batch.other_games
        self.counters["positions"] += batch.positions
        self.counters["wall_time_s"] += time.perf_counter() - started
        record = {
            "iteration": iteration,
            "wall_time_s": round(self.counters["wall_time_s"], 3),
            "train_steps": self.counters["train_steps"],
            "games": self.counters["games"],
            "positions": self.counters["positions"],
            "policy_surprise": (round(float(np.nanmean(batch.surprise)), 4)
                                if np.isfinite(batch.surprise).any() else 0.0),
            "replay_size": len(self.buffer),
            "tree_overflows": self.selfplay.tree_overflows,
            # In iterations of training behind the weights this iteration trained from.
            "weights_age_mean": round(float(np.mean(iteration - 1 - batch.weights_version)), 3),
            "weights_age_max": int(np.max(iteration - 1 - batch.weights_version)),
        }
        if stored:
            # Positions played elsewhere: no games of this loop to describe.
            record.update(selfplay_source="stored", stored_positions=self.stored.taken,
                          stored_remaining=self.stored.remaining)
        else:
            record.update(selfplay_metrics(batch))
        if evaluation is not None:
            record.update(win_rate_random=evaluation.win_rate, random_games=evaluation.games)
        if config.workers:
            record.update(self.selfplay.last_metrics)
        if losses:
            record.update(losses)
        if config.resign_threshold > -1 and batch.playthrough_resignations:
            record["false_resign_rate"] = batch.false_resignations / batch.playthrough_resignations
        if config.gnugo_every and iteration % config.gnugo_every == 0:
            record.update(self._rated_evaluations(iteration))
        changes = self._follow_schedule(position_before, iteration)
        if changes:
            record["schedule"] = changes
        record["schedule_position"] = schedule_position(self.counters)
        cpu, child_cpu = time.process_time(), child_cpu_seconds()
        self.counters["cpu_seconds"] += cpu - self._cpu_mark
        self.counters["child_cpu_seconds"] += child_cpu - self._child_cpu_mark
        self._cpu_mark, self._child_cpu_mark = cpu, child_cpu
        record["cpu_seconds"] = round(self.counters["cpu_seconds"], 2)
        record["child_cpu_seconds"] = round(self.counters["child_cpu_seconds"], 2)
        run.append_metrics(record)
        self._tensorboard(record)
        # The checkpoint comes last: it is what makes this iteration complete (a net grown by
        # the schedule is saved grown: its shape and the counters' position agree).
        rated = self.counters.get("rated_iteration")
        state = self.trainer.state_dict()
        run.save_checkpoint(iteration, state, self.counters,
                            keep=self.config.checkpoints_to_keep,
                            protect=(rated,) if rated else ())
        save_model_file(run.model_path, self.config, state,
                        run_model_info(run.path.name, iteration, self.counters))
        self._prune_chunks()
        return record

    def _follow_schedule(self, before: int, iteration: int) -> list[str]:
        """Apply the schedule's events between the positions `before` and now: a new rate,
        more simulations, a grown net (function-preserving: it plays as before). Returns
        "field old -> new" for the metrics and the log."""
        position = schedule_position(self.counters)
        if not self.base.schedule_events(before, position):
            return []
        old = self.config
        new = self.base.scheduled(position)
        # A warm start's source may be larger than the schedule's net.
        new = new.holding(old).validate()
        changes = new.changes_from(old)
        if not changes:
            return []
        grows = new.grows_from(old)
        if grows:
            from architectures import CompiledNet   # loaded already: TensorFlow is deferred
            self.trainer = grow_trainer(self.trainer, old, new)
            self.net = CompiledNet(self.trainer.model, new.num_games, shapes=8)
            if new.input_planes != old.input_planes:
                # Stored positions lack the new planes: the replay restarts, as in a warm start.
                self.config = new
                self.buffer = self._new_buffer()
                self.counters["replay_since"] = iteration
        self.trainer.set_learning_rates(new.learning_rates)
        self.config = new
        if grows or new.simulations != old.simulations:
            if not new.workers:
                self.selfplay = SelfPlay(new, self._selfplay_net(),
                                         seed=new.seed * 1_000_003 + iteration)
                self.selfplay.weights_version = iteration
        log(f"iteration {iteration}: schedule position {position:,}: " + ", ".join(changes))
        return changes

    def _refresh_model(self) -> None:
        """Make model.npz the newest checkpoint's net when it is not (missing, from an older
        run's code, or a stop came between the checkpoint and it): from the checkpoint file,
        since the trainer's weights may hold part of a dropped iteration."""
        iteration = self.completed_iteration()
        try:
            if model_info(self.run.model_path).get("iteration") == iteration:
                return
        except (NetOpenError, ValueError, KeyError):
            pass
        loaded = self.run.load_latest_checkpoint(iteration)
        if loaded is not None:
            state, counters = loaded
            save_model_file(self.run.model_path, self.config, state,
                            run_model_info(self.run.path.name, iteration, counters))

    def completed_iteration(self) -> int:
        """The newest iteration with a checkpoint (0 if none). The counters run ahead of it
        from the moment an iteration's games are counted until its checkpoint is saved (its
        matches, GNU Go's included, come in between): a stop there drops that iteration."""
        saved = self.run.checkpoint_iterations()
        return saved[-1] if saved else 0

    def last_words(self) -> str:
        """Where the run's model is, and its newest figure against GNU Go: the trainer's last
        line however it ends."""
        iteration = self.completed_iteration()
        if not iteration:
            return f"run {self.run.path}: no iteration complete yet, so no model"
        self._refresh_model()
        line = f"model: {self.run.model_path} (iteration {iteration}"
        rated = [record for record in self.run.read_metrics() if "win_rate_gnugo" in record]
        if rated:
            last = rated[-1]
            line += (f"; at iteration {last['iteration']} it won {last['win_rate_gnugo']:.0%} of "
                     f"{last.get('gnugo_games', '?')} games against GNU Go level "
                     f"{last['gnugo_level']}")
        return line + ")"

    def _rated_evaluations(self, iteration: int) -> dict:
        """Every gnugo_every iterations: a match against GNU Go, and one against the checkpoint
        of the previous such evaluation, whose result moves a chained Elo rating (the first
        rated net, and a random player before it, sit at 0)."""
        config, record = self.config, {}
        seed = config.seed * 7919 + iteration
        level = int(self.counters.get("gnugo_level", config.gnugo_level))
        try:
            report = play_against_gnugo(config, self.net, level, config.gnugo_games,
                                        config.eval_simulations, seed=seed, log=log)
            if report.games:
                record.update(win_rate_gnugo=report.win_rate, gnugo_level=level,
                              gnugo_games=report.games, gnugo_distinct=report.distinct_games)
                if report.win_rate >= config.gnugo_promotion and level < 10:
                    self.counters["gnugo_level"] = level + 1
        except (GnuGoNotFound, GnuGoError) as error:
            log(f"iteration {iteration}: no GNU Go match ({error})")
        reference = self.counters.get("rated_iteration")
        if reference is None:
            self.counters.update(rated_iteration=iteration, elo=0.0)
            record["elo"] = 0.0
            return record
        previous = open_net(self.run.path, checkpoint=reference, log=log,
                            batch_size=min(config.previous_games, 32))
        # The previous net plays with its own input planes (a growth may have added some).
        report = checkpoint_vs_checkpoint(config, self.net,
                                          NetEntry(previous.net, previous.config),
                                          config.previous_games,
                                          config.eval_simulations, seed=seed, names=("new", "previous"))
        elo = self.counters["elo"] + elo_step(report.win_rate, report.games)
        self.counters.update(rated_iteration=iteration, elo=elo)
        record.update(win_rate_previous=report.win_rate, previous_iteration=reference,
                      previous_games=report.games, elo=round(elo, 1))
        return record

    def _train(self, new_positions: int, iteration: int) -> dict:
        config = self.config
        if len(self.buffer) < config.min_replay:
            return {}
        steps = max(1, math.ceil(new_positions * config.sample_reuse / config.train_batch_size))
        totals: dict[str, float] = {}
        done = skipped = 0
        probabilities = (self.buffer.sampling_weights(config.policy_surprise_weight)
                         if config.policy_surprise_weight > 0 else None)
        for _ in tqdm(range(steps), desc=f"iter {iteration} training", unit="step", leave=False,
                      file=sys.stderr, disable=None):
            sample = self.buffer.sample(config.train_batch_size, self.rng, probabilities)
            stats = train_on(self.trainer, sample)
            if stats.get("skipped"):
                skipped += 1
                continue
            done += 1
            for key in ("loss_policy", "loss_value", "loss_l2", "loss_total", "loss_ownership",
                        "loss_score", "loss_reply"):
                if key in stats:
                    totals[key] = totals.get(key, 0.0) + float(stats[key])
            totals["learning_rate"] = float(stats["learning_rate"])
        self.counters["train_steps"] += steps
        result = {key: round(value / max(done, 1), 5) if key != "learning_rate" else value
                  for key, value in totals.items()}
        if skipped:
            result["skipped_train_steps"] = skipped
            log(f"iteration {iteration}: {skipped} training steps skipped (non-finite loss)")
        return result

    def _write_sgf(self, iteration: int, games) -> None:
        for index, game in enumerate(games[:self.config.sgf_samples]):
            data = game_to_sgf(self.config.board_size, game.komi, game.moves,
                               result_text(game.result, game.score, game.resigned),
                               black="self-play", white="self-play",
                               comment=f"iteration {iteration}, self-play game {index}",
                               handicap=game.handicap)
            atomic_write_bytes(self.run.sgf / f"iter_{iteration:06d}_game_{index}.sgf", data)

    def _tensorboard(self, record: dict) -> None:
        with self.writer.as_default(step=record["train_steps"]):
            for key, value in record.items():
                if isinstance(value, (int, float)) and key != "iteration":
                    self.tf.summary.scalar(key, value)
        self.writer.flush()

    def _prune_chunks(self) -> None:
        """Delete chunks wholly outside the replay window, keeping one iteration of margin so
        a fallback to the previous checkpoint still finds its window."""
        kept = 0
        margin = self.config.replay_window + 2 * self.config.positions_per_iteration
        for iteration in reversed(self.run.chunk_iterations()):
            path = self.run.chunk_path(iteration)
            if kept >= margin:
                path.unlink(missing_ok=True)
                continue
            try:
                with np.load(path) as chunk:
                    kept += len(chunk["value"])
            except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
                continue   # a damaged chunk: resume skips it too


def selfplay_metrics(batch) -> dict:
    """The metrics of the loop's own self-play batch (stored positions have none of these)."""
    lengths = [len(game.moves) for game in batch.games]
    return {
        "selfplay_positions_per_s": round(batch.positions_played / batch.seconds, 2),
        "nn_evals_per_s": round(batch.nn_evaluations / batch.seconds, 2),
        "selfplay_games": len(batch.games),
        "selfplay_moves": sum(lengths),   # fast searches included
        "mean_game_length": round(float(np.mean(lengths)), 2),
        "black_win_rate_selfplay": round(float(np.mean([g.result > 0 for g in batch.games])), 4),
    }


def summary_line(record: dict) -> str:
    losses = (f"policy {record['loss_policy']:.3f} value {record['loss_value']:.3f}"
              if "loss_policy" in record else "training waits for the replay buffer")
    rate = record.get("win_rate_random")
    if rate is not None:
        colour = Fore.GREEN if rate >= 0.9 else Fore.YELLOW if rate >= 0.6 else Fore.RED
    return (f"{Style.BRIGHT}iter {record['iteration']:4d}{Style.RESET_ALL} "
            f"{record['wall_time_s'] / 60:6.1f} min | {losses} | "
            + (f"{record['selfplay_positions_per_s']:7.0f} pos/s {record['nn_evals_per_s']:7.0f} "
               f"evals/s | games {record['games']:6d} len {record['mean_game_length']:5.1f}"
               if "nn_evals_per_s" in record else
               f"stored self-play, {record['stored_remaining']:,} positions left | "
               f"games {record['games']:6d}")
            + (f" | vs random {colour}{rate:5.1%}{Style.RESET_ALL}" if rate is not None else "")
            + (f" | GNU Go L{record['gnugo_level']} {record['win_rate_gnugo']:5.1%}"
               if "win_rate_gnugo" in record else "")
            + (f" | elo {record['elo']:.0f}" if "elo" in record else ""))


def add_arguments(parser) -> None:
    parser.add_argument("--selfplay-from", default=None, metavar="DIR[,DIR...]",
                        type=lambda text: [Path(part) for part in text.split(",") if part],
                        help="train first on the self-play positions that selfplay_chunks.py "
                             "wrote in these directories (in order, each position once, also "
                             "across restarts), then go on with the loop's own self-play")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--progress"]:
        _, args = Config.from_args(argv[1:], add_arguments=add_arguments)
        iterations = RunDirectory(resolve_run_path(args.run)).checkpoint_iterations()
        print(iterations[-1] if iterations else 0)
        return 0
    config, args = Config.from_args(argv, add_arguments=add_arguments)
    # The preset and the command line, before a warm start's shape is taken: where a warm
    # start enters the schedule is measured against the schedule's own nets (a config that
    # took the source's 8 blocks would find every position as grown as the source).
    asked = config
    command = shlex.join(["bp_tree.py", *argv])
    try:
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
        # takes seconds to load (describe_devices and TrainingLoop load it).
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
        devices = describe_devices(config)
        colorama.just_fix_windows_console()
        loop = TrainingLoop(config, run, init_from=args.init_from, command=command,
                            schedule_start=schedule_start, selfplay_from=args.selfplay_from)
        now = loop.config
        log(f"run {run.path}: {now.board_size}x{now.board_size}, net {now.blocks}x{now.filters}, "
            f"{now.simulations} simulations, {now.num_games} games at once"
            + (f", schedule position {schedule_position(loop.counters):,} "
               f"({len(config.schedule_events(schedule_position(loop.counters), 2 ** 62))} "
               f"events ahead)" if config.schedule else "") + f"; {devices}")
        while not config.iterations or loop.counters["iteration"] < config.iterations:
            if config.max_cpu_seconds and loop.counters["cpu_seconds"] >= config.max_cpu_seconds:
                log(f"run {run.path}: {loop.counters['cpu_seconds']:.0f} CPU seconds reached "
                    f"(max_cpu_seconds {config.max_cpu_seconds:g})")
                break
            record = loop.iterate()
            print(summary_line(record), flush=True)
        else:
            # Also reached at once when a resumed run had already done its iterations (one that
            # train_sgf.py made, say): without a word the trainer would seem to exit for nothing.
            log(f"run {run.path}: iteration {loop.counters['iteration']} of {config.iterations} "
                f"done; --iterations N goes on to N (0: no limit)")
        log(loop.last_words())
        return 0
    except RunLocked as error:
        log(f"bp_tree: {error}")
        return EXIT_LOCKED
    except (Stopped, KeyboardInterrupt) as stop:
        signum = stop.signum if isinstance(stop, Stopped) else signal.SIGINT
        if loop is None:
            where = "before the first iteration began; nothing was changed"
        else:
            done = loop.completed_iteration()
            where = (f"during iteration {done + 1}, which is dropped; the "
                     f"same command resumes after iteration {done}")
        log(f"bp_tree: stopped by {signal.Signals(signum).name} {where}")
        if loop is not None:
            log(loop.last_words())
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
