"""distill.py and training/distillation.py: tempered targets against a hand computation, and
a student whose KL divergence to the teacher on held-out positions falls with training."""
from __future__ import annotations

import json

import numpy as np
import pytest

import distill
from training.config import PRESETS
from training.distillation import soften
from training.nets import build_trainer, save_model_file
from training.run_directory import RunDirectory


def test_soften_is_a_tempered_softmax():
    policy = np.array([[0.5, 0.25, 0.25, 0.0]], np.float32)
    np.testing.assert_allclose(soften(policy, 1.0), policy, atol=1e-6)
    # T = 2: weights sqrt(p) = (0.7071, 0.5, 0.5, ~0), normalised.
    root = np.sqrt([0.5, 0.25, 0.25])
    np.testing.assert_allclose(soften(policy, 2.0)[0, :3], root / root.sum(), atol=1e-5)
    with pytest.raises(ValueError, match="temperature"):
        soften(policy, 0.0)


def opinionated_teacher(path, config):
    """A teacher whose policy is far from uniform: trained a little towards the 3-3 points."""
    trainer = build_trainer(config)
    rng = np.random.default_rng(0)
    n, actions = config.board_size, config.num_actions
    target = np.zeros((config.train_batch_size, actions), np.float32)
    target[:, [n + 1, 2 * n - 2, n * (n - 2) + 1, n * n - n - 2]] = 0.25
    for _ in range(30):
        planes = (rng.random((config.train_batch_size, n, n, config.input_planes)) < 0.2)
        trainer.train_step(planes.astype(np.float32), target,
                           np.full(config.train_batch_size, 0.5, np.float32))
    save_model_file(path, config, trainer.state_dict(), {"made_by": "test"})


def test_the_students_kl_to_the_teacher_falls_on_held_out_positions(tmp_path, capsys):
    teacher_config = PRESETS["tiny"].overridden(filters=16, blocks=2)
    teacher = tmp_path / "teacher.npz"
    opinionated_teacher(teacher, teacher_config)
    run = tmp_path / "student"
    flags = ["--teacher", str(teacher), "--run", str(run), "--preset", "tiny", "--filters", "4",
             "--blocks", "1", "--teacher_sims", "2", "--held_out_positions", "64",
             "--learning_rates", "0:0.05"]
    assert distill.main([*flags, "--iterations", "3"]) == 0
    output = capsys.readouterr().out
    before = float(output.split("KL ")[1].split(" nats")[0])
    records = [json.loads(line) for line in (run / "supervised.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in records] == [1, 2, 3]
    assert records[-1]["kl_held_out"] < 0.5 * before, (before, records)
    assert RunDirectory(run).checkpoint_iterations() == [1, 2, 3]


def test_a_student_of_another_board_size_is_refused(tmp_path):
    teacher = tmp_path / "teacher.npz"
    config = PRESETS["tiny"]
    save_model_file(teacher, config, build_trainer(config).state_dict(), {})
    assert distill.main(["--teacher", str(teacher), "--run", str(tmp_path / "s"), "--preset",
                         "tiny", "--board_size", "7"]) == 2
