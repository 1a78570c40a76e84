"""The front ends (play_network_gui.py, gtp_engine.py, evaluate.py) meeting what they cannot do:
no display, a damaged checkpoint, a checkpoint that does not fit the run's config, a config
that is not JSON. Each says so in one last line on stderr and exits non-zero: no traceback, no
core dump. Also the GUI's net process (gui/net_process.py): its death mid-game is reported,
not a hang.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from float_tolerance import gamma

ROOT = Path(__file__).resolve().parent.parent
FIXTURE_RUN = ROOT / "notebooks" / "fixture_run"


def front_end(script: str, *args, display: bool = False, timeout: int = 120):
    environment = {name: value for name, value in os.environ.items()
                   if not name.startswith("SDL_") and name not in ("DISPLAY", "WAYLAND_DISPLAY")}
    if display:
        environment["SDL_VIDEODRIVER"] = "dummy"       # a display that is not the question
    return subprocess.run([sys.executable, str(ROOT / script), *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, env=environment,
                          stdin=subprocess.DEVNULL)


def assert_refused(result, *expected: str) -> None:
    err = result.stderr
    assert result.returncode not in (0, None) and result.returncode > 0, (result.returncode, err)
    assert "Traceback" not in err and result.stdout == "", err
    last = err.strip().splitlines()[-1]
    for text in expected:
        assert text in last, last


@pytest.fixture
def run_copy(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(FIXTURE_RUN, run)
    return run


def test_the_gui_without_a_display_says_so_before_loading_anything():
    result = front_end("play_network_gui.py", "--run", FIXTURE_RUN)
    assert_refused(result, "play_network_gui: cannot open a window", "DISPLAY is not set")
    assert len(result.stderr.strip().splitlines()) == 1


def test_damaged_checkpoints_are_refused_by_every_front_end(run_copy):
    for checkpoint in (run_copy / "checkpoints").glob("ckpt_*.npz"):
        checkpoint.write_bytes(b"not a checkpoint")
    assert_refused(front_end("play_network_gui.py", "--run", run_copy, display=True),
                   "no readable checkpoint")
    assert_refused(front_end("gtp_engine.py", "--run", run_copy), "no readable checkpoint")
    assert_refused(front_end("evaluate.py", "--run", run_copy, "--black", "ckpt:latest",
                             "--white", "random", "--games", "2"), "no readable checkpoint")


def test_a_model_file_of_random_bytes_is_not_called_pickled_data(tmp_path):
    # head -c 3000 /dev/urandom > g.npz: NumPy took it for a pickle and advised loading it
    # unsafely with allow_pickle.
    model = tmp_path / "g.npz"
    model.write_bytes(os.urandom(3000))
    why = f"{model} is not a readable model file (not an .npz archive)"
    for result in (front_end("gtp_engine.py", "--model", model),
                   front_end("evaluate.py", "--black", f"model:{model}", "--white", "random",
                             "--games", "2")):
        assert_refused(result, why)
        assert "pickle" not in result.stderr.lower(), result.stderr


def test_a_config_that_is_not_json_is_refused(run_copy):
    (run_copy / "config.json").write_text("{not json")
    assert_refused(front_end("gtp_engine.py", "--run", run_copy), "config.json is unreadable")
    assert_refused(front_end("evaluate.py", "--run", run_copy, "--black", "ckpt:latest",
                             "--white", "random"), "config.json is unreadable")


def test_a_checkpoint_of_another_net_shape_is_refused(run_copy):
    # Every checkpoint then fails to load, so each is passed over and none is left.
    config = json.loads((run_copy / "config.json").read_text())
    config["filters"] *= 2
    (run_copy / "config.json").write_text(json.dumps(config))
    # The GUI's net loads in its child process: the refusal crosses the process boundary.
    assert_refused(front_end("play_network_gui.py", "--run", run_copy, display=True),
                   "no readable checkpoint")
    assert_refused(front_end("evaluate.py", "--run", run_copy, "--black", "ckpt:latest",
                             "--white", "random", "--games", "2"),
                   "no readable checkpoint")


def assert_bad_flag(result, *expected: str) -> None:
    """Refused as a bad flag: exit status 2, the usage line, then one line of reason."""
    assert_refused(result, *expected)
    assert result.returncode == 2, result.stderr


def test_evaluate_refuses_bad_numbers_before_playing():
    players = ("--black", "random", "--white", "random")
    assert_bad_flag(front_end("evaluate.py", *players, "--board-size", "30"),
                    "--board-size must be in 2..19, got 30")
    assert_bad_flag(front_end("evaluate.py", *players, "--board-size", "40"),
                    "--board-size must be in 2..19, got 40")
    for komi in ("nan", "inf", "-inf"):
        assert_bad_flag(front_end("evaluate.py", *players, f"--komi={komi}"),
                        "--komi must be a finite number")


def test_evaluate_refuses_gnugo_levels_outside_0_to_10(run_copy):
    # gnugo:99 used to start GNU Go at level 99, which never finished a move.
    result = front_end("evaluate.py", "--black", "random", "--white", "gnugo:99",
                       "--board-size", "5", "--games", "2", timeout=30)
    assert_refused(result, "gnugo:99", "expected an integer in 0..10")
    assert_refused(front_end("evaluate.py", "--black", "random", "--white", "gnugo:x"),
                   "expected an integer in 0..10")
    assert_bad_flag(front_end("evaluate.py", "--run", run_copy, "--rating",
                              "--gnugo-levels", "0,99", timeout=30),
                    "GNU Go level '99': expected an integer in 0..10")
    assert_bad_flag(front_end("evaluate.py", "--run", run_copy, "--rating",
                              "--gnugo-levels", "zero"), "expected an integer in 0..10")


def fake_gnugo(path: Path, script: str) -> Path:
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)
    return path


def test_evaluate_refuses_a_gnugo_that_is_not_a_gtp_engine(tmp_path):
    players = ("--black", "random", "--white", "gnugo:0", "--board-size", "5", "--games", "2")
    # cat exits at once on GNU Go's flags; an echo of the commands is not GTP either.
    echo = fake_gnugo(tmp_path / "echo", "exec cat\n")
    for binary, why in (("/bin/cat", "(exit code 1)"), (echo, "not a GTP response")):
        result = front_end("evaluate.py", *players, "--gnugo", binary, timeout=60)
        assert_refused(result, "evaluate: GNU Go cannot play", why)
        assert result.returncode == 1
    # A GTP engine that is not GNU Go is refused too: the matches rely on GNU Go's commands.
    other = fake_gnugo(tmp_path / "other", 'while read line; do case "$line" in\n'
                       '  name) printf "= Other Engine\\n\\n";;\n  *) printf "= \\n\\n";;\n'
                       'esac; done\n')
    assert_refused(front_end("evaluate.py", *players, "--gnugo", other, timeout=60),
                   "is not GNU Go", "'Other Engine'")


def test_evaluate_exits_non_zero_when_no_game_could_be_counted(tmp_path):
    # Answers like GNU Go until it is asked for a move, then dies: every game is lost.
    dies = fake_gnugo(tmp_path / "dies", 'while read line; do case "$line" in\n'
                      '  name) printf "= GNU Go\\n\\n";;\n  version) printf "= 3.8\\n\\n";;\n'
                      '  genmove*) exit 1;;\n  *) printf "= \\n\\n";;\nesac; done\n')
    result = front_end("evaluate.py", "--black", "random", "--white", "gnugo:0",
                       "--board-size", "5", "--games", "2", "--gnugo", dies, timeout=120)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip().splitlines()[-1] == \
        "evaluate: no game could be counted (see the messages above)"
    assert "2 games not played" in result.stdout


def test_evaluate_checks_its_output_paths_before_playing(run_copy, tmp_path):
    # --output used to be opened after the whole rating was played, and then failed.
    for output, why in ((tmp_path, "not a regular file"),
                        (tmp_path / "missing" / "elo.jsonl", "its directory does not exist")):
        result = front_end("evaluate.py", "--run", run_copy, "--rating", "--output", output,
                           timeout=30)
        assert_bad_flag(result, f"--output {output}: {why}")
    a_file = tmp_path / "a file"
    a_file.write_text("")
    for sgf, why in ((a_file, "not a directory"),
                     (a_file / "games", "cannot be made: a parent is not a directory")):
        assert_bad_flag(front_end("evaluate.py", "--black", "random", "--white", "random",
                                  "--board-size", "5", "--sgf", sgf, timeout=30),
                        f"--sgf {sgf}: {why}")


def test_the_net_process_answers_and_its_death_is_reported():
    import play_network_gui
    from gui.net_process import NetProcess, NetProcessError
    from gui.session import BLACK

    session, _ = play_network_gui.load_session(
        play_network_gui.parse_args(["--run", str(FIXTURE_RUN), "--sims", "4"]),
        log=lambda text: None)
    net = session.driver.evaluator
    try:
        assert isinstance(net, NetProcess)
        n = session.board_size
        policy, value = net(np.zeros((2, n, n, net_planes(session)), np.float32))
        assert policy.shape == (2, n * n + 1) and value.shape == (2,)
        np.testing.assert_allclose(policy.sum(axis=1), 1, atol=gamma(2 * (n * n + 1)))
        # The fixture's net has no score head: a search with score utility is told so.
        with pytest.raises(NetProcessError, match="no score head"):
            net.with_score(np.zeros((1, n, n, net_planes(session)), np.float32))

        net.process.send_signal(signal.SIGKILL)
        net.process.wait(timeout=10)
        assert session.human_colour == BLACK and session.play(12)    # the net must reply
        with pytest.raises(RuntimeError) as failure:
            session.wait()
        assert isinstance(failure.value.__cause__, NetProcessError)
        assert "killed by SIGKILL" in str(failure.value.__cause__)
    finally:
        session.close()
        net.close()
    assert net.process.poll() is not None


def net_planes(session) -> int:
    return session.driver.go.features(session.driver.history, np.zeros(1, np.int64)).shape[-1]
