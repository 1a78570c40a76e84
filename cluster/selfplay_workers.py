"""Self-play on a Ray cluster: N actors play games without pause, one learner collects them.

Who owns what:
    actor (`SelfPlayWorker`, one process each, 1 CPU): its own copy of the weights in an
        OnnxNet (ONNX Runtime, no TensorFlow) and games.selfplay.SelfPlay (GoBatch and search
        trees). Each call plays until at least
        `positions_per_call` positions of finished games are collected and returns them as a
        SelfPlayBatch of NumPy arrays through the object store; games in flight stay in the
        actor and go on in the next call.
    learner (`RaySelfPlay`, in the driver process, bp_tree.py's TrainingLoop): the run
        directory, replay buffer, training, evaluation and checkpoints. It keeps two calls
        queued per actor, so an actor starts its next call as soon as one ends and plays on
        while the learner trains and evaluates; after each training phase the learner
        publishes the weights once (`ray.put`).

Weights version: the iteration whose training produced the weights (0 for a new run's initial
weights; a run resumed after iteration K starts at K). Every call carries the newest version
and a reference to its weights; an actor loads them between calls when they are newer, and
SelfPlay tags each position with the version that played it. A game that spans an update has
positions of two versions.

Faults: actors are created with max_restarts=-1, so Ray restarts one that dies (killed, out of
memory, its machine gone while another can host it). The calls it had queued fail: the games
it had in flight are lost, nothing else is, because every finished call's result is taken
exactly once (a result already in the object store survives its actor). Liveness and restart
counts come from Ray's own actor table, so a death is counted even when no call of the
learner's failed (an actor killed while idle). The restarted actor seeds its games with its
new process id, so it does not replay the lost games' openings.
"""
from __future__ import annotations

import math
import os
import socket
import time
from pathlib import Path

import numpy as np
import ray
from ray._private.state import state as actor_table
from ray.exceptions import NodeDiedError, OutOfMemoryError, RayActorError, WorkerCrashedError

from cluster.address import ClusterError, check_reachable
from games.selfplay import SelfPlay, SelfPlayBatch
from training.config import Config

PROJECT_ROOT = Path(__file__).resolve().parent.parent

# The errors that mean "the actor (or its machine) died", not "the code raised".
ACTOR_LOST = (RayActorError, WorkerCrashedError, OutOfMemoryError, NodeDiedError)
# Calls queued per actor: the next one waits in the actor while the learner takes a result.
CALLS_QUEUED = 2


class SelfPlayWorker:
    """One self-play actor (wrapped by ray.remote in `RaySelfPlay`). The SelfPlay is built on
    the first call, from the seed the learner gives and the process id."""

    def __init__(self, config: Config):
        self.config = config
        self.net = None             # an OnnxNet from the first call's weights on
        self.selfplay: SelfPlay | None = None
        self.version = -1

    def where(self) -> tuple[int, str]:
        return os.getpid(), socket.gethostname()

    def play(self, num_positions: int, weights: list, version: int, seed: int):
        """(SelfPlayBatch, tree overflows so far). `weights` is [ObjectRef] of the model's
        `get_weights()`: nested in a list so Ray fetches it only when the version is new."""
        if version != self.version:
            from architectures.array_net import named_weights
            from architectures.onnx_net import OnnxNet
            arrays = {f"model.{index:04d}": array
                      for index, array in enumerate(ray.get(weights[0]))}
            named = named_weights(self.config, arrays)
            if self.net is None:
                self.net = OnnxNet(named, self.config.board_size, self.config.input_planes,
                                   batch_size=self.config.num_games)
            else:
                self.net.load(named)
            self.version = version
        if self.selfplay is None:
            # The process id tells a restarted actor's games from its predecessor's.
            own_seed = np.random.SeedSequence([seed, os.getpid()]).generate_state(1)[0]
            self.selfplay = SelfPlay(self.config, self.net, seed=int(own_seed))
        self.selfplay.weights_version = version
        batch = self.selfplay.play(num_positions)
        return batch, self.selfplay.tree_overflows


def connect(config: Config, log) -> None:
    """Join the cluster at config.ray_address, or start a local Ray sized to this machine."""
    # Actors import the project from the checkout at the same path on every machine.
    runtime_env = {"env_vars": {"PYTHONPATH": str(PROJECT_ROOT), "TF_CPP_MIN_LOG_LEVEL": "2"}}
    started = time.perf_counter()
    if config.ray_address and config.ray_address != "auto":
        check_reachable(config.ray_address)
    try:
        if config.ray_address:
            ray.init(address=config.ray_address, runtime_env=runtime_env, log_to_driver=True)
        else:
            # The driver needs no CPU of Ray's: every CPU hosts an actor, and more actors than
            # CPUs share them rather than wait forever. The object store holds only shipments
            # in flight and the weights: a few iterations' positions at most.
            cpus = max(os.cpu_count() or 1, config.workers)
            # planes, policy, value, ownership, score, final and weights version
            position_bytes = (config.board_size ** 2 * (config.input_planes + 1)
                              + 4 * config.num_actions + 13)
            store = max(80 << 20, 8 * config.positions_per_iteration * position_bytes)
            # Ray gives a starting raylet 30 s to register; a 2-core machine shared with other
            # jobs took longer (measured), and a late raylet fails the whole start.
            os.environ.setdefault("RAY_raylet_start_wait_time_s", "180")
            ray.init(num_cpus=cpus, include_dashboard=False, object_store_memory=store,
                     runtime_env=runtime_env, log_to_driver=True)
    except Exception as error:  # Ray raises ConnectionError, RuntimeError, ValueError...
        where = f"the Ray cluster at {config.ray_address}" if config.ray_address else "a local Ray"
        first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise ClusterError(f"cannot reach {where} ({first_line})") from None
    resources = ray.cluster_resources()
    log(f"ray: {'joined ' + config.ray_address if config.ray_address else 'local instance'} "
        f"with {resources.get('CPU', 0):g} CPUs, {resources.get('GPU', 0):g} GPUs on "
        f"{len(ray.nodes())} node(s) in {time.perf_counter() - started:.1f} s")


class RaySelfPlay:
    """The learner's side: `play` has the interface of games.selfplay.SelfPlay.play."""

    def __init__(self, config: Config, weights: list[np.ndarray], version: int, log):
        self.config = config
        self.log = log
        connect(config, log)
        worker_class = ray.remote(num_cpus=1, num_gpus=config.worker_gpus, max_restarts=-1,
                                  max_task_retries=0)(SelfPlayWorker)
        self.actors = [worker_class.remote(config) for _ in range(config.workers)]
        # Two calls per actor per iteration: fresh weights reach games within half an
        # iteration, and a death loses at most half an actor's share.
        self.positions_per_call = max(1, math.ceil(config.positions_per_iteration
                                                   / (2 * config.workers)))
        self.overflows = [0] * config.workers
        self.lost_calls = [0] * config.workers   # calls lost in a row, per actor
        self.restarts_seen = [0] * config.workers
        self.pending: dict = {}          # ObjectRef of a call in flight -> actor index
        self.last_metrics: dict = {}
        self.weights_version = version
        self.publish(weights, version)
        # Before the first call: an actor answers calls in order, and this waits for all of
        # them to be built (TensorFlow imported, net traced).
        for index, (pid, host) in enumerate(self.worker_locations()):
            log(f"ray: worker {index} is pid {pid} on {host}")
        for index in range(config.workers):
            for _ in range(CALLS_QUEUED):
                self._submit(index)
        self.cycle_started = time.perf_counter()

    def publish(self, weights: list[np.ndarray], version: int) -> None:
        """Put new weights into the object store; calls from now on carry them."""
        self.weights_ref = ray.put(weights)
        self.weights_version = version

    def worker_locations(self) -> list[tuple[int, str]]:
        """(pid, host) of each actor, in actor order."""
        return ray.get([actor.where.remote() for actor in self.actors])

    @property
    def tree_overflows(self) -> int:
        return sum(self.overflows)

    def _submit(self, index: int) -> None:
        seed = int(np.random.SeedSequence([self.config.seed, self.weights_version, index])
                   .generate_state(1)[0])
        call = self.actors[index].play.remote(self.positions_per_call, [self.weights_ref],
                                              self.weights_version, seed)
        self.pending[call] = index

    def play(self, num_positions: int, progress=None) -> SelfPlayBatch:
        """Collect shipments until at least `num_positions` positions have arrived.

        `seconds` of the batch is the time since the previous collection ended: actors play
        through training and evaluation, so positions over it is the rate they arrive at."""
        batches: list[SelfPlayBatch] = []
        collected = played = 0
        actor_seconds = 0.0
        while collected < num_positions:
            # Everything ready, not just the first: a failed call is seen as soon as it fails.
            ready, _ = ray.wait(list(self.pending), num_returns=1)
            ready, _ = ray.wait(list(self.pending), num_returns=len(self.pending), timeout=0)
            for call in ready:
                index = self.pending.pop(call)
                self._submit(index)
                try:
                    batch, overflows = ray.get(call)
                except ACTOR_LOST as error:
                    # Once per outage: while Ray restarts the actor every queued call fails.
                    if not self.lost_calls[index]:
                        reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
                        self.log(f"worker {index}: a call was lost ({type(error).__name__}: "
                                 f"{reason[:160]}); Ray restarts the actor, its games in flight "
                                 f"are lost")
                    self.lost_calls[index] += 1
                    continue
                if self.lost_calls[index] > 1:
                    self.log(f"worker {index} answers again ({self.lost_calls[index]} calls "
                             f"were lost in all)")
                self.lost_calls[index] = 0
                self.overflows[index] = overflows
                batches.append(batch)
                collected += batch.positions
                played += batch.positions_played
                actor_seconds += batch.seconds
                if progress is not None:
                    progress(min(collected, num_positions))
        now = time.perf_counter()
        seconds, self.cycle_started = now - self.cycle_started, now
        states = actor_states(self.actors)
        restarts = [count for _, count in states]
        for index, (before, after) in enumerate(zip(self.restarts_seen, restarts)):
            if after > before:
                self.log(f"worker {index} was restarted by Ray ({after - before} time(s) since "
                         f"the last iteration); its games in flight were lost")
        new_restarts = sum(restarts) - sum(self.restarts_seen)
        self.restarts_seen = restarts
        self.last_metrics = {
            "workers": self.config.workers,
            "workers_alive": sum(state == "ALIVE" for state, _ in states),
            "worker_restarts": new_restarts,
            "worker_restarts_total": sum(restarts),
            # Moves played over each actor's own playing time: the speed of one worker,
            # whatever the learner did. (Not the positions of the games handed over: a short
            # call hands over games that were mostly played in earlier calls.)
            "positions_per_worker_per_s": round(played / max(actor_seconds, 1e-9), 2),
            # The actors' playing time over theirs since the last collection: well below 1,
            # they wait for the learner, and more actors would only wait too. An actor runs
            # one call at a time, all after the first submission, so over a run it is <= 1.
            "workers_busy_share": round(actor_seconds / (self.config.workers
                                                         * max(seconds, 1e-9)), 3),
        }
        return merge(batches, seconds)

    def close(self) -> None:
        ray.shutdown()


def actor_states(actors) -> list[tuple[str, int]]:
    """(state, restarts so far) of each actor from the cluster's actor table: state is ALIVE,
    RESTARTING, DEAD, PENDING_CREATION or DEPENDENCIES_UNREADY. The public state API
    (ray.util.state) needs the dashboard, which a local instance here does not start, so this
    reads the table the dashboard itself reads; requirements.txt pins the Ray release it was
    checked against."""
    rows = [actor_table.actor_table(actor._actor_id.hex()) for actor in actors]
    return [(row.get("State", "UNKNOWN"), int(row.get("NumRestarts", 0))) for row in rows]


def merge(batches: list[SelfPlayBatch], seconds: float) -> SelfPlayBatch:
    """One SelfPlayBatch of several shipments, in arrival order."""
    return SelfPlayBatch(
        planes=np.concatenate([b.planes for b in batches]),
        policy=np.concatenate([b.policy for b in batches]),
        value=np.concatenate([b.value for b in batches]),
        ownership=np.concatenate([b.ownership for b in batches]),
        score=np.concatenate([b.score for b in batches]),
        final=np.concatenate([b.final for b in batches]),
        komi=np.concatenate([b.komi for b in batches]),
        surprise=np.concatenate([b.surprise for b in batches]),
        reply=np.concatenate([b.reply for b in batches]),
        weights_version=np.concatenate([b.weights_version for b in batches]),
        games=[game for b in batches for game in b.games], seconds=seconds,
        positions_played=sum(b.positions_played for b in batches),
        nn_evaluations=sum(b.nn_evaluations for b in batches),
        false_resignations=sum(b.false_resignations for b in batches),
        playthrough_resignations=sum(b.playthrough_resignations for b in batches))
