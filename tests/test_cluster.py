"""Self-play workers on Ray (cluster/, bp_tree.py --workers): a local Ray with 2 actors on the
`tiny` preset, run as a subprocess the way a user runs it. One run covers an actor killed by
its PID during iteration 2 (Ray restarts it; the iteration and the next complete); the run
directory is then read back without the code under test (tests/loop_runs.py's readers).
"""
import os
import re
import signal
import subprocess
import sys

import numpy as np
import pytest

from cluster import ClusterError
from training.config import PRESETS

from loop_runs import (PROJECT_ROOT, SIDE_TO_MOVE_PLANE, TINY_ARGS, assert_consistent,
                       read_chunk, split_games)

WORKER_FIELDS = {"workers", "workers_alive", "worker_restarts", "worker_restarts_total",
                 "positions_per_worker_per_s", "workers_busy_share", "weights_age_mean",
                 "weights_age_max"}


def game_fingerprints(chunk: dict) -> list[bytes]:
    return [chunk["planes"][game].tobytes() + chunk["policy"][game].tobytes()
            for game in split_games(chunk)]


# Enough iterations after the kill for Ray's control service to see the death on a loaded
# machine: with 3, iterations 2-3 once ended on the surviving actor's games first.
ITERATIONS = 5


@pytest.mark.long
def test_two_workers_two_iterations_survive_a_killed_worker(tmp_path):
    run = tmp_path / "run"
    log_path = tmp_path / "stderr.log"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [sys.executable, str(PROJECT_ROOT / "bp_tree.py"), "--run", str(run), *TINY_ARGS,
             "--workers", "2", "--iterations", str(ITERATIONS)],
            cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=log, text=True, env=env)
        try:
            killed = None
            for line in process.stdout:
                # Iteration 1 is done and 2 has begun.
                if killed is None and re.search(r"iter\s+1\b", line):
                    pids = dict(re.findall(r"ray: worker (\d+) is pid (\d+)", log_path.read_text()))
                    assert set(pids) == {"0", "1"}, log_path.read_text()
                    killed = int(pids["0"])
                    os.kill(killed, signal.SIGKILL)
            assert process.wait(timeout=300) == 0, log_path.read_text()[-3000:]
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert killed is not None, log_path.read_text()[-3000:]
    stderr = log_path.read_text()
    assert "worker 0 was restarted by Ray" in stderr, stderr[-3000:]
    # One kill, one outage: its lost calls are reported once, not once per failed call.
    assert stderr.count("worker 0: a call was lost") <= 1, stderr[-3000:]

    records = assert_consistent(run)
    assert [r["iteration"] for r in records] == list(range(1, ITERATIONS + 1))
    for record in records:
        assert WORKER_FIELDS <= set(record), sorted(WORKER_FIELDS - set(record))
        assert record["workers"] == 2 and record["positions_per_worker_per_s"] > 0
    # Ray notices a death at once; iteration 2 may still have ended first, on games queued
    # before the kill, so the restart is counted in a later iteration.
    assert records[0]["worker_restarts"] == 0 and records[0]["workers_alive"] == 2
    assert sum(r["worker_restarts"] for r in records) == 1
    assert records[-1]["worker_restarts_total"] == 1
    assert all(r["workers_alive"] in (1, 2) for r in records)  # 1 while it restarts
    # A worker's speed is the moves it plays per second of its own playing time, not the
    # positions of the games handed over after short calls over the call's time (once 10x
    # more). So the moves arriving per second of the iteration are the workers' speed times
    # their number times the share of the iteration they played, up to the fields' rounding
    # (speed and rate to 0.01, share to 0.001: each true value within half a step of the
    # field). How large that share is depends on the load (the actors wait while a slow
    # learner trains, or for Ray to restart one), so only this identity is checked in each
    # iteration; over the run an actor, playing one call at a time, cannot play more seconds
    # than passed.
    for record in records:
        speed, share = record["positions_per_worker_per_s"], record["workers_busy_share"]
        arrival = record["selfplay_positions_per_s"]
        assert share > 0.0005 and speed > 0.005 and arrival > 0.005, record
        # The rounded product over the rounded arrival, at the two ends of the true values.
        # The bound is relative to the true value, not the rounded one: at a share of 0.003
        # the true one may be 0.0025, 20% less (a loaded machine gave that once).
        low = speed / (speed + 0.005) * share / (share + 0.0005) * (arrival - 0.005) / arrival
        high = speed / (speed - 0.005) * share / (share - 0.0005) * (arrival + 0.005) / arrival
        assert low - 1e-9 <= speed * 2 * share / arrival <= high + 1e-9, record
    played_seconds = sum(r["workers_busy_share"] * r["selfplay_seconds"] for r in records)
    assert played_seconds <= (1 + 0.0005) * sum(r["selfplay_seconds"] for r in records), records

    chunks = [read_chunk(run, iteration) for iteration in range(1, ITERATIONS + 1)]
    for iteration, chunk in enumerate(chunks, start=1):
        assert len(chunk["value"]) >= 64
        # Positions were played by weights published before the iteration's self-play ended.
        versions = chunk["weights_version"]
        assert versions.min() >= 0 and versions.max() <= iteration - 1
        ages = iteration - 1 - versions
        assert records[iteration - 1]["weights_age_max"] == ages.max()
        assert np.isclose(records[iteration - 1]["weights_age_mean"], ages.mean(), atol=1e-3)
        # Every game is whole: its value targets are one result seen from alternating sides.
        black_to_move = chunk["planes"][:, 0, 0, SIDE_TO_MOVE_PLANE] == 1
        for game in split_games(chunk):
            assert black_to_move[game][0]
            result_for_black = chunk["value"][game] * np.where(black_to_move[game], 1, -1)
            assert np.all(result_for_black == result_for_black[0])
    # No shipment was taken twice: every game (its planes and noisy search targets) is unique.
    fingerprints = [f for chunk in chunks for f in game_fingerprints(chunk)]
    assert len(fingerprints) == len(set(fingerprints))


@pytest.mark.parametrize("address, mentions", [
    ("127.0.0.1:1", "cannot reach the Ray cluster at 127.0.0.1:1 ([Errno 111] Connection refused)"),
    ("nocolon", "ray_address 'nocolon' is not HOST:PORT or 'auto'"),
])
def test_unreachable_cluster_is_a_one_line_error(address, mentions):
    from cluster.selfplay_workers import connect     # imports Ray: 4.5 s, so only here
    config = PRESETS["tiny"].overridden(workers=1, ray_address=address)
    with pytest.raises(ClusterError) as error:
        connect(config, log=print)
    assert mentions in str(error.value) and "\n" not in str(error.value)


def test_an_unreachable_cluster_is_refused_before_the_run_directory_exists(tmp_path):
    from loop_runs import run_main
    run = tmp_path / "run"
    code, _, err = run_main(run, "--workers", "1", "--ray_address", "127.0.0.1:1")
    assert code == 2 and "cannot reach the Ray cluster at 127.0.0.1:1" in err
    assert not run.exists()
