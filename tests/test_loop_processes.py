"""The training loop as a process, the way `run.sh` starts it: resuming after a SIGKILL at
various moments, stopping in one line on SIGTERM, SIGINT and SIGHUP, one trainer per run,
refusals before TensorFlow loads, and run.sh's restarts and stops.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import bp_tree  # noqa: E402
from loop_runs import (  # noqa: E402
    PROJECT_ROOT, TINY, TINY_ARGS, run_main, checkpoint_iterations, chunk_iterations,
    metrics_lines, assert_consistent)


# Kill and resume.

class LoopProcess:
    """bp_tree.py in a subprocess with its output in files, as run.sh starts it."""
    started: list["LoopProcess"] = []

    def __init__(self, run: Path, iterations: int, name: str):
        self.stdout_path = run.parent / f"{name}.out"
        self.stderr_path = run.parent / f"{name}.err"
        with open(self.stdout_path, "w") as out, open(self.stderr_path, "w") as err:
            self.process = subprocess.Popen(
                [sys.executable, "bp_tree.py", "--run", str(run), *TINY_ARGS,
                 "--iterations", str(iterations)],
                cwd=PROJECT_ROOT, stdout=out, stderr=err)
        LoopProcess.started.append(self)

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text()

    def wait_until(self, condition, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if self.process.poll() is not None:
                pytest.fail(f"bp_tree.py exited ({self.process.returncode}) early:\n{self.stderr}")
            if time.monotonic() > deadline:
                self.kill()
                pytest.fail(f"timed out waiting:\n{self.stderr}")
            # Finer than the tens of milliseconds between a chunk and its checkpoint; at 1 ms
            # the polling took a seventh of a core from the trainer it waits on.
            time.sleep(0.005)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def resumed_after(self) -> int | None:
        for line in self.stderr.splitlines():
            if line.startswith("resumed "):
                return int(line.split("after iteration ")[1].split(":")[0])
        return None


@pytest.fixture
def no_process_left_behind():
    yield
    while LoopProcess.started:
        LoopProcess.started.pop().kill()


@pytest.mark.long
def test_killed_runs_resume_from_the_last_complete_checkpoint(tmp_path, no_process_left_behind):
    run = tmp_path / "run"
    total_iterations = 8
    complete_lines: list[str] = []   # metrics lines of the iterations complete so far
    orphans: dict[Path, tuple] = {}  # replay chunks of iterations a kill left unfinished

    def newest_checkpoint() -> int:
        return checkpoint_iterations(run)[-1]

    def check_after_kill() -> None:
        """Lines of complete iterations are never rewritten; remember them for later, and
        the identity of any replay chunk whose iteration has no checkpoint."""
        nonlocal complete_lines, orphans
        latest = newest_checkpoint()
        lines = [line for line in metrics_lines(run)
                 if line.endswith("\n") and json.loads(line)["iteration"] <= latest]
        assert lines[:len(complete_lines)] == complete_lines
        complete_lines = lines
        paths = [run / "replay" / f"chunk_{i:06d}.npz" for i in chunk_iterations(run) if i > latest]
        orphans = {path: (path.stat().st_ino, path.stat().st_mtime_ns) for path in paths}

    def resume(name: str) -> LoopProcess:
        """The same command again: it says where it resumed, having removed what the killed
        iteration left (a chunk there now is a new file), then completes an iteration."""
        latest = newest_checkpoint()
        process = LoopProcess(run, total_iterations, name)
        process.wait_until(lambda: process.resumed_after() is not None)
        assert process.resumed_after() == latest
        for path, identity in orphans.items():
            assert not path.exists() or (path.stat().st_ino, path.stat().st_mtime_ns) != identity, \
                f"{path.name} of the killed iteration was kept"
        process.wait_until(lambda: newest_checkpoint() > latest)
        return process

    # Right after the first checkpoint is written.
    first = LoopProcess(run, total_iterations, "first")
    first.wait_until(lambda: (run / "checkpoints" / "ckpt_000001.npz").exists())
    first.kill()
    check_after_kill()

    # Mid-iteration, between the iteration's replay chunk and its checkpoint (the window is
    # training plus evaluation, tens of milliseconds: try again if a kill comes too late).
    for attempt in range(3):
        process = resume(f"chunk_{attempt}")
        in_flight = newest_checkpoint() + 1
        process.wait_until(lambda: (run / "replay" / f"chunk_{in_flight:06d}.npz").exists())
        process.kill()
        check_after_kill()
        if orphans:
            break
    assert orphans, "no kill landed between a replay chunk and its checkpoint"

    # At two other moments after a checkpoint: in self-play, training or evaluation.
    for delay in (0.05, 0.15):
        process = resume(f"delay_{delay}")
        time.sleep(delay)
        process.kill()
        check_after_kill()
    assert newest_checkpoint() < total_iterations

    # The same command once more runs to the end (in this process: the kills are done).
    latest = newest_checkpoint()
    code, _, err = run_main(run, "--iterations", str(total_iterations))
    assert code == 0, err
    assert any(line.startswith("resumed ") and f" after iteration {latest}:" in line
               for line in err.splitlines()), err
    assert not [path for path, identity in orphans.items() if path.exists()
                and (path.stat().st_ino, path.stat().st_mtime_ns) == identity]
    records = assert_consistent(run)
    assert records[-1]["iteration"] == total_iterations
    assert metrics_lines(run)[:len(complete_lines)] == complete_lines


def test_a_stop_during_an_iterations_matches_drops_it_and_names_the_last_checkpoint(
        tmp_path, monkeypatch):
    """A stop that comes while an iteration plays its matches (after its games were counted,
    before its checkpoint): the line names the iteration dropped and the one kept, and the
    last words the kept checkpoint's model, with no traceback (it crashed looking for the
    dropped iteration's checkpoint)."""
    # GNU Go's match, the last before the checkpoint
    def rated_until_stopped(config, net, counters, run, iteration, log):
        if iteration == 2:
            raise bp_tree.Stopped(signal.SIGTERM)
        return {}

    monkeypatch.setattr(bp_tree, "rated_evaluations", rated_until_stopped)
    run = tmp_path / "run"
    code, _, err = run_main(run, "--iterations", "3", "--gnugo_every", "1")
    assert code == 128 + signal.SIGTERM, err
    assert "Traceback" not in err, err
    assert checkpoint_iterations(run) == [1]
    stopped, last = err.strip().splitlines()[-2:]
    assert stopped == ("bp_tree: stopped by SIGTERM during iteration 2, which is dropped; "
                       "the same command resumes after iteration 1")
    assert last == f"model: {run / 'model.npz'} (iteration 1)", last


@pytest.mark.long
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_stop_signal_ends_the_trainer_in_one_line_and_the_run_resumes(
        tmp_path, stop, no_process_left_behind):
    """SIGTERM, Ctrl-C's SIGINT and SIGHUP mid-run: one line naming the signal and what is
    kept, exit 128 + signal, no traceback, the lock released, and the same command resumes
    after the last complete iteration. Before the signal, while the trainer runs: a second
    trainer on the run exits at once naming the owner, and a reader opens the run's net.
    (That a SIGKILL leaves no stale lock is the kill test's resumes.)"""
    from training.nets import model_info, open_array_net, open_net
    run = tmp_path / "run"
    process = LoopProcess(run, 1000, "stopped")
    process.wait_until(lambda: (run / "checkpoints" / "ckpt_000001.npz").exists())

    lines_before = metrics_lines(run)
    started = time.monotonic()
    code, _, err = run_main(run, "--iterations", "1000")
    assert code == 3, err
    assert time.monotonic() - started < 30
    assert f"PID {process.process.pid}" in err and "Traceback" not in err
    assert metrics_lines(run)[:len(lines_before)] == lines_before
    assert open_net(run, log=lambda message: None).iteration >= 1
    assert process.process.poll() is None, "the owner must still be training"

    process.process.send_signal(stop)
    assert process.process.wait(timeout=60) == 128 + stop
    err = process.stderr
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    stopped, last = err.strip().splitlines()[-2:]
    assert stopped.startswith(f"bp_tree: stopped by {signal.Signals(stop).name} during iteration ")
    kept = checkpoint_iterations(run)[-1]
    assert f"resumes after iteration {kept}" in stopped
    # The last line says where the run's model is: the newest checkpoint's, ready to play.
    assert last == f"model: {run / 'model.npz'} (iteration {kept})", last
    assert model_info(run / "model.npz")["iteration"] == kept
    with np.load(run / "checkpoints" / f"ckpt_{kept:06d}.npz") as checkpoint, \
            np.load(run / "model.npz") as model:
        for name in model.files:
            if name.startswith("model."):
                np.testing.assert_array_equal(model[name], checkpoint[name])
    assert open_array_net(run / "model.npz").net.board_size == TINY.board_size
    code, _, err = run_main(run, "--iterations", str(kept + 1))
    assert code == 0, err
    assert "resumed" in err and checkpoint_iterations(run)[-1] == kept + 1
    assert_consistent(run)


# One owner per run, and faults a restart cannot cure.

def test_the_lock_and_the_run_directory_refuse_before_tensorflow_loads(tmp_path):
    """A TensorFlow that cannot be imported: the lock refusal, a --run that is a file and an
    unreadable config.json still each answer in their one line, at once, so none of them
    waits for TensorFlow's seconds of loading or shows its start-up text."""
    poison = tmp_path / "poison"
    for package in ("tensorflow", "keras"):
        (poison / package).mkdir(parents=True)
        (poison / package / "__init__.py").write_text(f"raise ImportError('{package} loaded')\n")
    env = {**os.environ, "PYTHONPATH": str(poison)}

    def trainer(run: Path) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "bp_tree.py", "--run", str(run), *TINY_ARGS],
                              cwd=PROJECT_ROOT, env=env, capture_output=True, text=True,
                              timeout=120)

    from training.run_directory import RunDirectory
    owned = RunDirectory(tmp_path / "owned")
    owned.lock()
    try:
        locked = trainer(tmp_path / "owned")
    finally:
        owned.unlock()
    assert locked.returncode == 3 and "in use by another trainer" in locked.stderr
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    not_a_directory = trainer(a_file)
    assert not_a_directory.returncode == 4 and "a_file" in not_a_directory.stderr
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    unreadable = trainer(broken)
    assert unreadable.returncode == 2 and "config.json is unreadable" in unreadable.stderr
    for result in (locked, not_a_directory, unreadable):
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr


@pytest.mark.parametrize("table", ["the kernel's", "none"])
def test_readers_see_whether_a_trainer_holds_the_run_without_taking_its_lock(tmp_path,
                                                                              monkeypatch, table):
    # What `evaluate.py --follow` waits on. The holder is another process, killed with
    # SIGKILL: the kernel frees its lock, and the PID it wrote stays in the file. Without a
    # lock table (not Linux), the written PID's life decides.
    from training import run_directory
    from training.run_directory import RunDirectory, RunLocked
    if table == "none":
        monkeypatch.setattr(run_directory, "LOCK_TABLE", tmp_path / "no such table")
    run = RunDirectory(tmp_path / "run")
    assert not run.trainer_running()          # no trainer.lock yet
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from training.run_directory import RunDirectory; "
         f"held = RunDirectory({str(run.path)!r}); held.lock(); print('held', flush=True); "
         "sys.stdin.read()"],
        cwd=PROJECT_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        assert run.trainer_running() and run.trainer_running()
        with pytest.raises(RunLocked):         # looking took nothing from the holder
            run.lock()
    finally:
        holder.kill()
        holder.wait(timeout=30)
    assert (run.path / "trainer.lock").read_text().strip() == str(holder.pid)
    assert not run.trainer_running()
    run.lock()
    try:
        assert run.trainer_running()
    finally:
        run.unlock()
    # This process wrote its PID and lives on: only the lock table sees the lock gone.
    assert run.trainer_running() == (table == "none")


def fake_project(tmp_path: Path, script: str) -> Path:
    """A copy of run.sh beside a stand-in build.sh and bp_tree.py (what `script` does)."""
    project = tmp_path / "project"
    (project / ".venv" / "bin").mkdir(parents=True)
    shutil.copy(PROJECT_ROOT / "run.sh", project / "run.sh")
    (project / "build.sh").write_text("#!/bin/sh\nexit 0\n")
    (project / "build.sh").chmod(0o755)
    (project / ".venv" / "bin" / "python").symlink_to(sys.executable)
    (project / "bp_tree.py").write_text(script)
    return project


# The stand-in trainer counts its starts in starts.txt; --progress prints the completed
# iteration that progress.txt holds (0 if none), as bp_tree.py --progress does.
STAND_IN = """import sys, pathlib
here = pathlib.Path(__file__).parent
progress = here / "progress.txt"
if sys.argv[1:2] == ["--progress"]:
    print(progress.read_text() if progress.exists() else 0)
    sys.exit(0)
starts = here / "starts.txt"
count = int(starts.read_text()) + 1 if starts.exists() else 1
starts.write_text(str(count))
"""


@pytest.mark.parametrize("status", [2, 3, 4, 5])
def test_run_sh_stops_on_a_fault_a_restart_cannot_fix(tmp_path, status):
    project = fake_project(tmp_path, STAND_IN + f"sys.exit({status})\n")
    result = subprocess.run(["bash", "run.sh"], cwd=project, capture_output=True, text=True,
                            timeout=60, env={**os.environ, "RUN_SH_RESTART_DELAY": "0"})
    assert result.returncode == status
    assert (project / "starts.txt").read_text() == "1"


def test_run_sh_restarts_crashes_that_progress_and_gives_up_after_three_futile_ones(tmp_path):
    # Crashes 1-4 each complete an iteration; from the 5th on, none does.
    project = fake_project(tmp_path, STAND_IN + "if count <= 4:\n"
                           "    progress.write_text(str(count))\n"
                           "sys.exit(1)\n")
    result = subprocess.run(["bash", "run.sh"], cwd=project, capture_output=True, text=True,
                            timeout=60, env={**os.environ, "RUN_SH_RESTART_DELAY": "0"})
    assert result.returncode == 1
    assert (project / "starts.txt").read_text() == "7"
    assert "3 times in a row without completing an iteration" in result.stderr


@pytest.mark.parametrize("given, passed", [
    ([], ["--preset", "9x9"]),
    (["--run", "x"], ["--preset", "9x9", "--run", "x"]),
    (["--preset", "tiny", "--run", "x"], ["--preset", "tiny", "--run", "x"]),
    (["--run", "x", "--preset=cpu"], ["--run", "x", "--preset=cpu"]),
])
def test_run_sh_trains_the_9x9_preset_unless_told_another(tmp_path, given, passed):
    stand_in = STAND_IN + "(here / 'argv.txt').write_text(repr(sys.argv[1:]))\nsys.exit(0)\n"
    project = fake_project(tmp_path, stand_in)
    result = subprocess.run(["bash", "run.sh", *given], cwd=project, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert (project / "argv.txt").read_text() == repr(passed)


# The stand-in trainer that waits to be stopped: it records the signal it gets, and its PID,
# written once its handlers are in place (a background job starts with SIGINT ignored: a
# SIGINT sent before then was lost, and the test waited for nothing under a loaded machine).
WAITING_STAND_IN = STAND_IN + """import os, signal, time
def stopped(signum, frame):
    (here / "signal.txt").write_text(signal.Signals(signum).name)
    sys.exit(128 + signum)
for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(number, stopped)
(here / "pid.txt").write_text(str(os.getpid()))
time.sleep(120)
"""


# run.sh started as a terminal or a service manager starts it: the stop signals at their
# defaults, then exec (the same PID). A shell cannot trap a signal that was ignored when it
# started, so a suite launched under `nohup` or as a background job (SIGHUP or SIGINT
# ignored) would otherwise test its launcher, not run.sh. A wrapper, not preexec_fn, which is
# unsafe in a process with threads.
STOP_SIGNALS_DEFAULT = [sys.executable, "-c", "import os, signal, sys\n"
                        "for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):\n"
                        "    signal.signal(number, signal.SIG_DFL)\n"
                        "os.execvp(sys.argv[1], sys.argv[1:])"]


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_stopping_run_sh_stops_its_trainer_and_returns_its_status(tmp_path, stop):
    """A service manager, `timeout`, a closed terminal or Ctrl-C stop run.sh: the signal goes
    on to the trainer, run.sh waits for it and exits with its status, and no trainer is left
    running (it would hold the run's lock)."""
    project = fake_project(tmp_path, WAITING_STAND_IN)
    shell = subprocess.Popen(STOP_SIGNALS_DEFAULT + ["bash", "run.sh"], cwd=project,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not (project / "pid.txt").exists():
        assert time.monotonic() < deadline and shell.poll() is None, shell.stderr.read()
        time.sleep(0.01)
    time.sleep(0.2)   # pid.txt is written whole before the stand-in sleeps
    trainer = int((project / "pid.txt").read_text())
    shell.send_signal(stop)
    try:
        assert shell.wait(timeout=30) == 128 + stop
    finally:
        shell.kill()
    assert (project / "signal.txt").read_text() == signal.Signals(stop).name
    with pytest.raises(ProcessLookupError):
        os.kill(trainer, 0)
    assert (project / "starts.txt").read_text() == "1"


def test_run_naming_a_file_is_refused_in_one_line(tmp_path):
    target = tmp_path / "a_file"
    target.write_text("precious\n")
    code, _, err = run_main(target, "--iterations", "1")
    assert code == 4
    assert err.strip().count("\n") == 0 and "Not a directory" in err and str(target) in err
    assert target.read_text() == "precious\n"
