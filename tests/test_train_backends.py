"""One training step for every Keras backend (architectures/train_step.py): from the same
weights and batches, TensorFlow and JAX take the same steps (the same losses, the same new
weights, optimizer state and batch-norm statistics, to the round-off of the sums), skip the
same non-finite batch, follow the same learning-rate schedule, and a checkpoint written
under one backend resumes under the other. Keras' backend is fixed per process, so each
backend trains in a process of its own (side by side)."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from float_tolerance import accumulation_depths, assert_outputs_close, gamma
from kernels.go_batch import _cuda_available
from loop_runs import main_here
from training.config import PRESETS
from training.nets import build_trainer

# Only found here, not imported: the tests that use JAX run it in processes of their own, and
# importing it in every test worker took 1.2 s.
if importlib.util.find_spec("jax") is None:
    pytest.skip("JAX is the second backend", allow_module_level=True)
# This process trains on TensorFlow in the tests that hold JAX to it (skipped on a GPU
# machine without TensorFlow, where KERAS_BACKEND=jax).
NEEDS_TENSORFLOW = pytest.mark.skipif(
    importlib.util.find_spec("tensorflow") is None
    or os.environ.get("KERAS_BACKEND", "tensorflow") != "tensorflow",
    reason="TensorFlow is not this process's Keras backend")

ROOT = Path(__file__).resolve().parent.parent
TARGETS = ("planes", "policy", "value", "ownership", "score", "final", "reply")
# One trainer on JAX runs jobs (state in, steps, how, state out), printing each job's
# figures; without TensorFlow, as on the GPU machines. A job takes its steps as the loop's
# passes do ("pass": Trainer.train_steps) or one train_step call at a time ("stepwise").
DRIVER = """
import json, sys
sys.modules["tensorflow"] = None
sys.path.insert(0, sys.argv[1])
import numpy as np
from training.config import Config
from training.nets import build_trainer
config_path, batches_path, *jobs = sys.argv[2:]
trainer = build_trainer(Config.from_json(open(config_path).read()))
batches = dict(np.load(batches_path))
for state_path, steps, how, out_path in zip(*[iter(jobs)] * 4):
    trainer.load_state_dict(dict(np.load(state_path)))
    inputs = [[batches[f"{name}{k}"] for name in %r] for k in range(int(steps))]
    stats = (trainer.train_steps(inputs) if how == "pass"
             else [trainer.train_step(*batch) for batch in inputs])
    np.savez(out_path, **trainer.state_dict())
    print(json.dumps({"backend": trainer.backend, "stats": stats, "step": trainer.step,
                      "skipped": trainer.skipped_steps, "traces": trainer.tracing_count}))
""" % (TARGETS,)
# `python -c NO_TENSORFLOW script.py ARGS` runs an entry script where TensorFlow cannot be
# imported, as on the GPU machines.
NO_TENSORFLOW = ("import runpy, sys; sys.modules['tensorflow'] = None; "
                 "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')")
CONFIG = PRESETS["tiny"].overridden(aux_heads=True, reply_head=True, train_batch_size=8,
                                    learning_rates=((0, 0.02), (2, 0.01)))
STEPS = 4          # the schedule drops the rate at step 2; batch 2 holds a NaN
# JAX on the CPU compiled for a quick start: without XLA's backend optimizations, with its
# older loop emitters in place of the fusion emitters, in one code-generation thread. The
# step and the initializers compiled in 2.0-2.8 s instead of 5.2-5.8 s, and a JAX process
# took 8-10 s of CPU instead of 14-16 s here. These change only how fast the step runs; the
# bounds below hold any summation order. (The GPU test compiles as the loop does.) The flags
# are those of the jax release requirements.txt pins: XLA stops at a flag it does not know.
JAX_ON_THE_CPU = {**os.environ, "KERAS_BACKEND": "jax",
                  "XLA_FLAGS": " ".join([os.environ.get("XLA_FLAGS", ""),
                                         "--xla_backend_optimization_level=0",
                                         "--xla_cpu_use_fusion_emitters=false",
                                         "--xla_cpu_parallel_codegen_split_count=1"]).strip()}


def write_batches(path: Path) -> None:
    rng = np.random.default_rng(0)
    n, batch, moves = CONFIG.board_size, CONFIG.train_batch_size, CONFIG.num_actions
    arrays = {}
    for k in range(STEPS):
        planes = rng.integers(0, 2, (batch, n, n, CONFIG.input_planes)).astype(np.float32)
        if k == 2:
            planes[0, 0, 0, 0] = np.nan
        reply = rng.dirichlet(np.ones(moves), batch).astype(np.float32)
        reply[0] = 0                   # a game's last position: no reply target
        arrays.update({
            f"planes{k}": planes,
            f"policy{k}": rng.dirichlet(np.ones(moves), batch).astype(np.float32),
            f"value{k}": rng.choice([-1.0, 1.0], batch).astype(np.float32),
            f"ownership{k}": rng.integers(-1, 2, (batch, n, n)).astype(np.float32),
            f"score{k}": rng.normal(0, 0.3, batch).astype(np.float32),
            f"final{k}": (rng.random(batch) < 0.7).astype(np.float32),
            f"reply{k}": reply})
    np.savez(path, **arrays)


def train_here(state: dict, batches: dict, steps: int) -> tuple[dict, dict]:
    """This process's backend (TensorFlow) from `state`: (figures, state after)."""
    trainer = build_trainer(CONFIG)
    trainer.load_state_dict(state)
    stats = [trainer.train_step(*[batches[f"{name}{k}"] for name in TARGETS])
             for k in range(steps)]
    return ({"backend": trainer.backend, "stats": stats, "step": trainer.step,
             "skipped": trainer.skipped_steps}, trainer.state_dict())


def assert_same_training(a: dict, b: dict, before: dict, applied_steps: int) -> None:
    """Two backends' states after the same steps from `before` agree within round-off: each
    variable's difference at most `applied_steps` times gamma(n) of its largest change, n the
    products a gradient sums (the batch's points, and the forward and backward passes'
    depth), plus the rounding of the values themselves."""
    assert sorted(a) == sorted(b)
    points = CONFIG.train_batch_size * CONFIG.board_size ** 2
    bound = applied_steps * gamma(points + 2 * max(accumulation_depths(CONFIG)))
    for name in a:
        if name.startswith("trainer.") or a[name].dtype.kind in "iu":
            assert np.array_equal(a[name], b[name]), name     # counters
            continue
        got, want = a[name].astype(np.float64), b[name].astype(np.float64)
        change = np.abs(want - before[name]).max(initial=0)
        allowed = bound * change + 4 * np.finfo(np.float32).eps * np.abs(want).max(initial=0)
        worst = np.abs(got - want).max(initial=0)
        assert worst <= allowed, f"{name}: differs by {worst:.3g}, bound {allowed:.3g}"


@pytest.mark.long
@NEEDS_TENSORFLOW
def test_tensorflow_and_jax_take_the_same_steps_and_resume_each_others_checkpoints(tmp_path):
    (tmp_path / "config.json").write_text(CONFIG.to_json())
    write_batches(tmp_path / "batches.npz")
    batches = dict(np.load(tmp_path / "batches.npz"))
    start = build_trainer(CONFIG).state_dict()
    np.savez(tmp_path / "start.npz", **start)
    tf_figures, tf_state = train_here(start, batches, STEPS)
    np.savez(tmp_path / "tf.npz", **tf_state)
    # JAX in a process of its own: the same steps from the start as one pass, then on from
    # TensorFlow's checkpoint, then the first steps again one call at a time (one trainer, so
    # one compilation).
    jax_run = subprocess.run(
        [sys.executable, "-c", DRIVER, str(ROOT), str(tmp_path / "config.json"),
         str(tmp_path / "batches.npz"),
         str(tmp_path / "start.npz"), str(STEPS), "pass", str(tmp_path / "jax.npz"),
         str(tmp_path / "tf.npz"), "1", "pass", str(tmp_path / "jax_on.npz"),
         str(tmp_path / "start.npz"), str(STEPS), "stepwise", str(tmp_path / "jax_steps.npz")],
        env=JAX_ON_THE_CPU, capture_output=True, text=True, timeout=600)
    assert jax_run.returncode == 0, jax_run.stderr
    jax_figures, jax_on_figures, jax_stepwise_figures = (
        json.loads(line) for line in jax_run.stdout.strip().splitlines()[-3:])
    jax_state = dict(np.load(tmp_path / "jax.npz"))
    # Compiled once for the process: a step's new values go into the next as its first did.
    assert [f["traces"] for f in (jax_figures, jax_on_figures, jax_stepwise_figures)] == [1, 1, 1]
    # A pass takes exactly the steps of as many calls: the same compiled step on the same
    # values, only read back later.
    assert json.dumps(jax_stepwise_figures) == json.dumps(jax_figures)
    stepwise_state = dict(np.load(tmp_path / "jax_steps.npz"))
    assert sorted(stepwise_state) == sorted(jax_state)
    for name, array in jax_state.items():
        assert np.array_equal(stepwise_state[name], array), name

    assert (tf_figures["backend"], jax_figures["backend"]) == ("tensorflow", "jax")
    for figures in (tf_figures, jax_figures):
        assert figures["step"] == STEPS and figures["skipped"] == 1
        assert [s["skipped"] for s in figures["stats"]] == [False, False, True, False]
        assert [s["learning_rate"] for s in figures["stats"]] == pytest.approx(
            [0.02, 0.02, 0.01, 0.01])
    depth = max(accumulation_depths(CONFIG))
    for tf_step, jax_step in zip(tf_figures["stats"], jax_figures["stats"]):
        assert set(tf_step) == set(jax_step) >= {"loss_ownership", "loss_score", "loss_reply"}
        if tf_step["skipped"]:
            # A NaN in the planes: which losses come out NaN is the kernels' business (oneDNN's
            # ReLU turns NaN into 0); both skipped the step, which is what matters.
            continue
        for name, value in tf_step.items():
            if name != "skipped":
                # Same weights going in differ by earlier steps' round-off at most.
                assert abs(value - jax_step[name]) <= (
                    STEPS * gamma(depth) * max(1.0, abs(value))), name
    assert_same_training(jax_state, tf_state, start, applied_steps=STEPS - 1)

    # Each backend's checkpoint, resumed by the other, trains on as its own backend would.
    _, tf_on = train_here(jax_state, batches, 1)           # TensorFlow on from JAX's
    assert jax_on_figures["step"] == STEPS + 1 and int(tf_on["trainer.step"]) == STEPS + 1
    assert_same_training(tf_on, dict(np.load(tmp_path / "jax_on.npz")), start,
                         applied_steps=STEPS)


@pytest.mark.long
@NEEDS_TENSORFLOW
def test_the_loop_trains_on_jax_without_tensorflow_and_tensorflow_resumes_it(tmp_path):
    """bp_tree.py with KERAS_BACKEND=jax where TensorFlow cannot be imported (as on the GPU
    machines): the loop self-plays, trains, plays its matches and checkpoints; TensorFlow (this
    process) then resumes the run from that checkpoint."""
    run = tmp_path / "run"
    common = ["--run", str(run), "--preset", "tiny", "--positions_per_iteration", "64",
              "--eval_games_random", "2"]
    jax_run = subprocess.run([sys.executable, "-c", NO_TENSORFLOW, str(ROOT / "bp_tree.py"),
                              *common, "--iterations", "1"],
                             env=JAX_ON_THE_CPU, capture_output=True, text=True,
                             timeout=600)
    assert jax_run.returncode == 0, jax_run.stderr
    assert "training: JAX on the CPU" in jax_run.stderr
    assert "no TensorBoard log: TensorFlow is not installed" in jax_run.stderr
    first = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert len(first) == 1 and first[0]["train_steps"] > 0 and "loss_policy" in first[0]
    # TensorFlow resumes it in this process, which trains on TensorFlow already.
    code, _, err = main_here([*common, "--iterations", "2"])
    assert code == 0, err
    assert "training: TensorFlow on the CPU" in err
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in records] == [1, 2]
    assert records[1]["train_steps"] > records[0]["train_steps"]


# A net grown under JAX without TensorFlow, as the GPU loop grows one: a warm start's growth
# (training.nets.init_weights, the device script's go-on to a bigger net) and the schedule's
# (grow_trainer), each evaluated on the same planes.
GROW_DRIVER = """
import sys
sys.modules["tensorflow"] = None
sys.path.insert(0, sys.argv[1])
import numpy as np
from training.config import Config
from training.nets import build_trainer, grow_trainer, init_weights, read_weights
source_path, config_path, planes_path, out_path = sys.argv[2:]
config = Config.from_json(open(config_path).read())
planes = np.load(planes_path)
warm = build_trainer(config)
init_weights(warm, config, source_path, log=lambda message: None)
found = read_weights(source_path, log=lambda message: None)
scheduled = grow_trainer(found.trainer, found.config, config)
np.savez(out_path, **{f"{name}{k}": np.asarray(output)
                      for name, trainer in (("warm", warm), ("scheduled", scheduled))
                      for k, output in enumerate(trainer.model(planes, training=False))})
"""


@NEEDS_TENSORFLOW
def test_a_net_grown_under_jax_plays_as_its_source_did(tmp_path):
    """More residual blocks and more filters, grown under JAX from a model file TensorFlow
    wrote, compute what the source computes (TensorFlow's evaluation here is the reference)."""
    from training.nets import save_model_file
    source_config = CONFIG.overridden(reply_head=False)
    source = build_trainer(source_config)
    rng = np.random.default_rng(5)
    for variable in source.model.weights:      # weights that are not an initialiser's
        drawn = rng.normal(0, 0.3, variable.shape).astype(np.float32)
        variable.assign(np.abs(drawn) + 0.5 if "variance" in variable.path else drawn)
    save_model_file(tmp_path / "source.npz", source_config, source.state_dict(), {"run": "test"})
    config = source_config.overridden(blocks=source_config.blocks + 2,
                                      filters=2 * source_config.filters)
    (tmp_path / "config.json").write_text(config.to_json())
    n = config.board_size
    planes = rng.integers(0, 2, (16, n, n, config.input_planes)).astype(np.float32)
    np.save(tmp_path / "planes.npy", planes)
    result = subprocess.run(
        [sys.executable, "-c", GROW_DRIVER, str(ROOT), str(tmp_path / "source.npz"),
         str(tmp_path / "config.json"), str(tmp_path / "planes.npy"), str(tmp_path / "out.npz")],
        env=JAX_ON_THE_CPU, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    grown = dict(np.load(tmp_path / "out.npz"))
    desired = [output.numpy() for output in source.model(planes, training=False)]
    assert len(desired) == 4                   # policy, value, ownership, score
    for how in ("warm", "scheduled"):
        assert_outputs_close([grown[f"{how}{k}"] for k in range(len(desired))], desired, config)


@NEEDS_TENSORFLOW
def test_supervised_training_runs_on_jax_without_tensorflow(tmp_path):
    """train_sgf.py (and distill.py, the same SupervisedRun) under JAX where TensorFlow cannot
    be imported: its net is then ONNX Runtime's graph of the trained weights, and the held-out
    accuracy it reports is what TensorFlow's compiled net of its checkpoint finds on the same
    held-out games (a position whose best moves tie within round-off may go either way)."""
    from games.sgf_corpus import read_sgf_directory
    from test_train_sgf import write_corpus
    from training.config import Config
    from training.nets import playing_net
    from training.run_directory import RunDirectory
    from training.supervised import move_accuracy, split_games, stack
    corpus, run = tmp_path / "corpus", tmp_path / "run"
    corpus.mkdir()
    write_corpus(corpus, 10)
    result = subprocess.run(
        [sys.executable, "-c", NO_TENSORFLOW, str(ROOT / "train_sgf.py"), "--sgf", str(corpus),
         "--run", str(run), "--preset", "tiny", "--komi", "0.5", "--gnugo_every", "0",
         "--iterations", "1", "--held_out", "0.3"],
        env=JAX_ON_THE_CPU, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    record = json.loads((run / "supervised.jsonl").read_text())
    config = Config.from_json((run / "config.json").read_text())
    games = read_sgf_directory(corpus, config).games
    held = stack([games[i] for i in split_games(games, 0.3, config.seed)[1]])
    assert record["held_out_positions"] == len(held)
    trainer = build_trainer(config)
    trainer.load_state_dict(RunDirectory(run).load_latest_checkpoint()[0])
    accuracy = move_accuracy(playing_net(trainer, 256), held)
    assert trainer.backend == "tensorflow"
    assert abs(record["accuracy_held_out"] - accuracy) <= 1 / len(held) + 1e-4


def test_jax_on_the_gpu_takes_the_cpus_steps(tmp_path):
    """The step JAX compiles for the GPU against the same step on JAX's CPU, at the highest
    matmul precision (the loop may train in TF32; this checks the arithmetic is the same)."""
    if not _cuda_available()[0]:  # asked first: importing JAX to ask it takes 1.5 s
        pytest.skip("no CUDA device (CuPy and a GPU are needed)")
    import jax      # here, not at collection: starting JAX's backends takes every worker 1.6 s
    if jax.default_backend() != "gpu":
        pytest.skip("JAX sees no GPU")
    (tmp_path / "config.json").write_text(CONFIG.to_json())
    write_batches(tmp_path / "batches.npz")
    start = build_trainer(CONFIG).state_dict()
    np.savez(tmp_path / "start.npz", **start)
    states = {}
    # JAX_PLATFORMS names the plugin: "gpu" asked JAX 0.11 for ROCm as well, and failed there.
    for platform in ("cuda", "cpu"):
        out = tmp_path / f"{platform}.npz"
        result = subprocess.run(
            [sys.executable, "-c", DRIVER, str(ROOT), str(tmp_path / "config.json"),
             str(tmp_path / "batches.npz"), str(tmp_path / "start.npz"), str(STEPS), "pass",
             str(out)],
            env={**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": platform,
                 "JAX_DEFAULT_MATMUL_PRECISION": "highest",
                 "XLA_PYTHON_CLIENT_PREALLOCATE": "false"},
            capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, f"{platform}: {result.stderr}"
        states[platform] = dict(np.load(out))
    assert_same_training(states["cuda"], states["cpu"], start, applied_steps=STEPS - 1)
