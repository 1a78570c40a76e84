"""`export_model.py --average-last N`: the mean of a run's last checkpoints' weights as a model
file, checked against the mean the test takes itself of the checkpoint files it reads with
NumPy; damaged checkpoints passed over, too few or a grown net refused in one line (or, for a
follower, as many as there are).
"""
import contextlib
import io
import json
import os
import shutil

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import export_model  # noqa: E402
from loop_runs import checkpoint_iterations, read_checkpoint, run_main  # noqa: E402
from training.weight_averaging import average_checkpoints  # noqa: E402


def export(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = export_model.main(list(argv))
    return code, out.getvalue(), err.getvalue()


def model_file(path) -> tuple[dict, dict]:
    with np.load(path) as archive:
        arrays = {name: archive[name] for name in archive.files if name.startswith("model.")}
        info = json.loads(archive["__info__"].tobytes().decode())
    return arrays, info


def refusal(output, *argv: str) -> str:
    """The last line export_model prints where it refuses `argv` (exit 2) to `output`,
    which it must not have written."""
    code, _, err = export(*argv, "--output", str(output))
    assert code == 2 and not output.exists(), err
    return err.splitlines()[-1]


def too_few(run, have: int, asked: int) -> str:
    return (f"export_model: {run} has {have} sound checkpoints in a row, not the {asked} to "
            f"average (--checkpoints-to-keep sets how many a run keeps)")


def mean_of(run, iterations) -> dict:
    states = [read_checkpoint(run, iteration)[0] for iteration in iterations]
    return {name: np.mean([state[name].astype(np.float64) for state in states], axis=0)
            for name in states[0] if name.startswith("model.")}


@pytest.fixture(scope="module")
def four_iterations(tmp_path_factory):
    run = tmp_path_factory.mktemp("averaging") / "run"
    code, _, err = run_main(run, "--iterations", "4", "--checkpoints_to_keep", "4",
                            "--min_replay", "64")
    assert code == 0, err
    assert checkpoint_iterations(run) == [1, 2, 3, 4]
    return run


def test_the_model_is_the_mean_of_the_newest_checkpoints_weights(four_iterations, tmp_path):
    run = four_iterations
    last, first = read_checkpoint(run, 4), read_checkpoint(run, 2)
    # The run trained between the checkpoints, so a mean differs from each of them.
    assert any(not np.array_equal(last[0][name], first[0][name])
               for name in last[0] if name.startswith("model."))
    model = tmp_path / "averaged.npz"
    code, out, err = export("--run", str(run), "--output", str(model), "--average-last", "3")
    assert code == 0, err
    assert "the mean of run's 3 checkpoints of iterations 2 to 4" in out
    weights, info = model_file(model)
    expected = mean_of(run, [2, 3, 4])
    assert weights.keys() == expected.keys()
    for name, array in expected.items():
        assert weights[name].dtype == np.float32
        np.testing.assert_allclose(weights[name], array, rtol=1e-6, atol=1e-7)
    assert info["averaged"] == [2, 3, 4] and info["iteration"] == 4
    assert info["games"] == last[1]["games"] and info["positions"] == last[1]["positions"]
    # Up to an earlier checkpoint: the mean of those before it.
    earlier = tmp_path / "earlier.npz"
    code, _, err = export("--run", str(run), "--output", str(earlier), "--average-last", "2",
                          "--checkpoint", "3")
    assert code == 0, err
    weights, info = model_file(earlier)
    for name, array in mean_of(run, [2, 3]).items():
        np.testing.assert_allclose(weights[name], array, rtol=1e-6, atol=1e-7)
    assert info["averaged"] == [2, 3]
    # The averaged model opens as every model file does, and plays.
    from training.nets import open_net
    opened = open_net(model)
    planes = np.zeros((1, 5, 5, opened.net.input_planes), np.float32)
    policy, value = opened.net(planes)
    assert np.isclose(policy.sum(), 1, atol=1e-5) and -1 <= float(value[0]) <= 1


def test_a_damaged_checkpoint_is_passed_over_and_too_few_is_refused(four_iterations, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(four_iterations, run)
    newest = run / "checkpoints" / "ckpt_000004.npz"
    newest.write_bytes(newest.read_bytes()[:1000])
    model = tmp_path / "averaged.npz"
    code, _, err = export("--run", str(run), "--output", str(model), "--average-last", "3")
    assert code == 0, err
    assert "ckpt_000004.npz is damaged" in err
    weights, info = model_file(model)
    for name, array in mean_of(run, [1, 2, 3]).items():
        np.testing.assert_allclose(weights[name], array, rtol=1e-6, atol=1e-7)
    assert info["averaged"] == [1, 2, 3] and info["iteration"] == 3
    assert refusal(tmp_path / "four.npz", "--run", str(run), "--average-last", "4") == (
        too_few(run, 3, 4))
    # A config.json that describes another net than the checkpoints hold (a run directory
    # put together by hand) is refused, not averaged into a model of the wrong shape.
    config = json.loads((run / "config.json").read_text())
    config["filters"] *= 2
    (run / "config.json").write_text(json.dumps(config))
    assert refusal(tmp_path / "other.npz", "--run", str(run), "--average-last", "2") == (
        f"export_model: {run}: checkpoint 3 does not hold the net its config.json describes")


def test_the_span_is_consecutive_and_names_its_end(four_iterations, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(four_iterations, run)
    # One checkpoint file of the run names the span's end, as --checkpoint does.
    model = tmp_path / "from_file.npz"
    code, _, err = export("--run", str(run / "checkpoints" / "ckpt_000003.npz"), "--output",
                          str(model), "--average-last", "2")
    assert code == 0, err
    weights, info = model_file(model)
    for name, array in mean_of(run, [2, 3]).items():
        np.testing.assert_allclose(weights[name], array, rtol=1e-6, atol=1e-7)
    assert info["averaged"] == [2, 3] and info["run"] == "run"
    # A missing iteration ends the span (a run keeps an older checkpoint for its rated
    # matches beside its last few): 1 is not averaged with 3 and 4.
    (run / "checkpoints" / "ckpt_000002.npz").unlink()
    assert refusal(tmp_path / "gap.npz", "--run", str(run), "--average-last", "3") == (
        too_few(run, 2, 3))
    # A follower (evaluate.py --follow --average-last) takes as many as there are in a row.
    fewer = average_checkpoints(run, 3, fewer=True, log=lambda message: None)
    assert fewer.iterations == (3, 4)
    for name, array in mean_of(run, [3, 4]).items():
        np.testing.assert_allclose(fewer.weights[name], array, rtol=1e-6, atol=1e-7)
    # The checkpoint asked for must be sound itself, as without averaging.
    newest = run / "checkpoints" / "ckpt_000004.npz"
    newest.write_bytes(b"torn")
    assert refusal(tmp_path / "torn.npz", "--run", str(run), "--average-last", "2",
                   "--checkpoint", "4") == f"export_model: {run}: checkpoint 4 is damaged"
    # A model file has no checkpoints, averaged or not.
    for extra in ([], ["--average-last", "2"]):
        assert refusal(tmp_path / "again.npz", "--run", str(model), *extra).startswith(
            f"export_model: {model} is a model file")


def test_checkpoints_of_a_net_the_schedule_grew_are_not_averaged(tmp_path):
    run = tmp_path / "grown"
    # 64 positions an iteration: the second block comes at the end of iteration 2.
    code, _, err = run_main(run, "--iterations", "3", "--checkpoints_to_keep", "3",
                            "--schedule", "100:blocks=2")
    assert code == 0, err
    assert refusal(tmp_path / "x.npz", "--run", str(run), "--average-last", "3") == (
        f"export_model: {run}: checkpoints 1 and 2 hold different nets (the schedule grew it "
        f"in between): average at most 2 up to 3")
    # A follower's mean ends where the net grew.
    assert average_checkpoints(run, 3, fewer=True).iterations == (2, 3)
    code, _, err = export("--run", str(run), "--output", str(tmp_path / "y.npz"),
                          "--average-last", "2")
    assert code == 0, err
