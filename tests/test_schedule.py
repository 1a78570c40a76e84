"""The run's schedule (Config.schedule): parsing, what it gives at each position, where a warm
start enters it, growth in the loop that plays as before, and a run that crosses a growth
resuming after SIGKILL on both sides of it (the `tiny` preset, a schedule of a few
iterations)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from float_tolerance import assert_outputs_close
from loop_runs import main_here
from training.config import PRESETS, Config
from training.run_directory import COUNTERS_KEY

ROOT = Path(__file__).resolve().parents[1]


def test_the_command_line_and_config_json_carry_the_schedule():
    config, _ = Config.from_args(["--preset", "tiny", "--schedule",
                                  "100:learning_rate=0.005, 200:blocks=3,200:aux_heads=true"])
    assert config.schedule == ((100, "learning_rate", 0.005), (200, "blocks", 3),
                               (200, "aux_heads", True))
    assert Config.from_json(config.to_json()) == config
    empty, _ = Config.from_args(["--preset", "9x9", "--schedule", ""])
    assert empty.schedule == ()


@pytest.mark.parametrize("text, words", [
    ("100:depth=3", "expected POSITIONS:field=value"),
    ("abc:blocks=3", "expected POSITIONS:field=value"),
    ("100:blocks", "expected POSITIONS:field=value"),
    ("100:blocks=0", "whole number >= 1"),
    ("100:aux_heads=false", "a growth only adds"),
    ("100:learning_rate=0", "a rate in (0, 10]"),
    ("200:blocks=3,100:blocks=4", "must not decrease"),
])
def test_a_bad_schedule_is_one_line(text, words, capsys):
    with pytest.raises(SystemExit) as exit_info:
        Config.from_args(["--preset", "tiny", "--schedule", text])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert words in error and len(error.strip().splitlines()) == 1


def test_a_schedule_with_workers_may_only_change_the_rate():
    with pytest.raises(ValueError, match="only learning_rate events"):
        PRESETS["tiny"].overridden(workers=2, schedule=((10, "blocks", 2),))
    PRESETS["tiny"].overridden(workers=2, schedule=((10, "learning_rate", 0.01),))


def test_what_the_schedule_gives_at_each_position():
    base = PRESETS["tiny"].overridden(
        learning_rates=((0, 0.02),), blocks=1,
        schedule=((100, "learning_rate", 0.005), (100, "simulations", 8), (250, "blocks", 3),
                  (250, "aux_heads", True), (400, "learning_rate", 0.001),
                  (500, "blocks", 2)))
    # Written out by hand: (position, rates, simulations, blocks, aux heads).
    expected = [(0, ((0, 0.02),), 4, 1, False), (99, ((0, 0.02),), 4, 1, False),
                (100, ((0, 0.005),), 8, 1, False), (249, ((0, 0.005),), 8, 1, False),
                (250, ((0, 0.005),), 8, 3, True), (400, ((0, 0.001),), 8, 3, True),
                (10 ** 9, ((0, 0.001),), 8, 3, True)]    # blocks=2 after 3: never shrinks
    for position, rates, simulations, blocks, aux in expected:
        now = base.scheduled(position)
        assert (now.learning_rates, now.simulations, now.blocks, now.aux_heads) == \
            (rates, simulations, blocks, aux), position
    assert base.schedule_events(99, 250) == [(100, "learning_rate", 0.005),
                                             (100, "simulations", 8), (250, "blocks", 3),
                                             (250, "aux_heads", True)]


def test_a_warm_start_enters_the_schedule_where_its_net_is_as_grown():
    base = PRESETS["9x9"]
    blocks_at = {value: at for at, name, value in base.schedule if name == "blocks"}
    three = base.overridden(schedule=base.schedule)          # the preset's own first net
    assert base.schedule_start(three) == base.schedule[0][0]
    six = base.overridden(blocks=6, aux_heads=True)
    assert base.schedule_start(six) == blocks_at[6]
    shipped = base.overridden(blocks=8, aux_heads=True, extra_features=True)
    assert base.schedule_start(shipped) == blocks_at[8]
    after = base.scheduled(base.schedule_start(shipped))
    # The lineage's last rate and search for the shipped model's size (docs/LINEAGE.md).
    assert after.learning_rates == ((0, 0.0003),) and after.simulations == 32
    assert PRESETS["tiny"].schedule_start(shipped) == 0


def test_the_model_cards_lineage_command_is_the_preset_with_the_heads_and_planes_added_late():
    """models/README.md's command that retraces the lineage: the preset's net without the
    heads and planes at first, the preset's other events unchanged, and at its end the shipped
    net's shape (less the komi plane, which the tenth version added by a warm start)."""
    import re
    import shlex
    from training.nets import SHIPPED_MODEL, read_config
    card = (ROOT / "models" / "README.md").read_text()
    command = re.search(r"\./run\.sh --run repro (.*?)\n\n", card, re.S).group(1)
    lineage, _ = Config.from_args(["--preset", "9x9", *shlex.split(command.replace("\\\n", " "))])
    preset = PRESETS["9x9"]
    start = lineage.scheduled(0)
    assert (start.blocks, start.aux_heads, start.extra_features) == (3, False, False)
    assert set(lineage.schedule) - set(preset.schedule) == {
        (4_010_000, "aux_heads", True), (7_470_000, "extra_features", True)}
    assert set(preset.schedule) <= set(lineage.schedule)
    shipped, _ = read_config(SHIPPED_MODEL)
    for config in (lineage.scheduled(lineage.schedule[-1][0]),
                   preset.scheduled(preset.schedule[-1][0])):
        assert ((config.blocks, config.filters, config.aux_heads, config.extra_features)
                == (shipped.blocks, shipped.filters, shipped.aux_heads, shipped.extra_features))


def test_the_shipped_model_enters_the_9x9_schedule_where_it_stands_through_bp_tree(tmp_path):
    """`./run.sh --run R --init-from models/9x9.npz`: the run takes the model's shape (8
    blocks, the heads, the liberty, ko and komi planes) and enters the schedule at the
    model's own position (its source's position plus its own self-play positions, from its
    info record), past the point where the preset's own net has 8 blocks: rate 0.0003 and 32
    simulations, not the schedule's first event. Then again on a restart before any
    checkpoint."""
    from training.nets import SHIPPED_MODEL, model_info
    base = PRESETS["9x9"]
    eight = next(at for at, name, value in base.schedule if name == "blocks" and value == 8)
    info = model_info(SHIPPED_MODEL)
    position = info["schedule_start"] + info["positions"]
    assert position >= eight
    flags = ["--run", str(tmp_path / "next"), "--preset", "9x9", "--init-from",
             str(SHIPPED_MODEL), "--iterations", "1", "--positions-per-iteration", "32",
             "--num-games", "8", "--max-moves", "12", "--gnugo-every", "0",
             "--random-every", "0", "--min-replay", "1024"]
    for attempt in ("new", "restarted before its first checkpoint"):
        code, out, err = main_here(flags)
        text = out + err
        assert code == 0, text
        assert f"schedule position {position:,}" in text and "32 simulations" in text, attempt
        assert "net 8x32" in text, attempt
        for path in (tmp_path / "next" / "checkpoints").glob("*.npz"):
            path.unlink()
    assert json.loads((tmp_path / "next" / "config.json").read_text())["komi_input"] is True


def test_a_net_grown_in_the_loop_plays_as_before_and_keeps_its_steps():
    from training.nets import build_trainer, grow_trainer
    old = PRESETS["tiny"].overridden(history=1, blocks=1)
    new = old.overridden(blocks=3, aux_heads=True, extra_features=True)
    trainer = build_trainer(old)
    rng = np.random.default_rng(0)
    sample = (rng.integers(0, 2, (32, 5, 5, old.input_planes)).astype(np.float32),
              np.full((32, 26), 1 / 26, np.float32), rng.uniform(-1, 1, 32).astype(np.float32))
    for _ in range(3):
        trainer.train_step(*sample)
    grown = grow_trainer(trainer, old, new)
    assert grown.step == trainer.step == 3
    planes = rng.integers(0, 2, (16, 5, 5, old.input_planes)).astype(np.float32)
    # The grown net reads the extra planes too: they carry zero weights.
    extra = rng.integers(0, 2, (16, 5, 5, new.input_planes - old.input_planes)).astype(np.float32)
    before = trainer.model(planes, training=False)
    after = grown.model(np.concatenate([planes, extra], axis=-1), training=False)
    assert_outputs_close(after[:2], before[:2], new)
    grown.set_learning_rates(((0, 0.001),))
    assert grown.learning_rate_at(grown.step) == 0.001
    grown_planes = rng.integers(0, 2, (32, 5, 5, new.input_planes)).astype(np.float32)
    stats = grown.train_step(grown_planes, *sample[1:], np.zeros((32, 5, 5), np.float32),
                             np.zeros(32, np.float32), np.ones(32, np.float32))
    assert float(stats["learning_rate"]) == pytest.approx(0.001) and grown.step == 4


# A run crossing a growth, killed on both sides of it.

SCHEDULE = "150:blocks=2,150:learning_rate=0.01,300:aux_heads=true"
TINY = ["--preset", "tiny", "--gnugo-every", "0", "--schedule", SCHEDULE]


def trainer(run: Path, iterations: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "bp_tree.py", "--run", str(run), *TINY,
                             "--iterations", str(iterations)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})


def checkpoints(run: Path) -> dict[int, dict]:
    """{iteration: counters} of the run's checkpoints as they are on disk."""
    found = {}
    for path in sorted((run / "checkpoints").glob("ckpt_*.npz")):
        try:
            with np.load(path) as arrays:
                counters = json.loads(arrays[COUNTERS_KEY].tobytes().decode())
                blocks = sum(1 for key in arrays if key.startswith("model."))
        except (OSError, ValueError, KeyError, EOFError):
            continue    # being written
        found[counters["iteration"]] = {**counters, "arrays": blocks}
    return found


def kill_when(process: subprocess.Popen, run: Path, ready, timeout: float = 300) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = checkpoints(run)
        if ready(found):
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=60)
            return found
        assert process.poll() is None, process.stdout.read()
        time.sleep(0.05)
    process.kill()
    raise AssertionError(f"not ready in {timeout} s: {process.stdout.read()}")


def position(counters: dict) -> int:
    return counters.get("schedule_start", 0) + counters["positions"]


@pytest.mark.long
def test_a_run_crossing_a_growth_resumes_after_sigkill_on_both_sides(tmp_path):
    from training.net_shape import net_shape
    from training.nets import open_net
    run = tmp_path / "grows"
    # Before the growth: killed once its first checkpoint (under 150 positions) is on disk.
    before = kill_when(trainer(run, 12), run,
                       lambda found: any(position(c) < 150 for c in found.values()))
    assert all(position(c) < 300 for c in before.values())
    # Across it: resumed, killed once a checkpoint past the growth and one after it exist.
    after = kill_when(trainer(run, 12), run,
                      lambda found: sum(position(c) >= 150 for c in found.values()) >= 2)
    grown = [i for i, c in after.items() if position(c) >= 150]
    small = [i for i, c in after.items() if position(c) < 150]
    assert grown and all(after[i]["arrays"] > after[j]["arrays"] for i in grown for j in small)
    # Resumed again to the end (in this process: the kills are done): every iteration once,
    # the net grown twice.
    code, _, err = main_here(["--run", str(run), *TINY, "--iterations", "12"])
    assert code == 0, err
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in records] == list(range(1, 13))
    changes = [change for r in records for change in r.get("schedule", [])]
    assert sum(change.startswith("blocks 1 -> 2") for change in changes) == 1
    assert sum(change.startswith("aux_heads False -> True") for change in changes) == 1
    assert [r["schedule_position"] for r in records] == sorted(r["schedule_position"]
                                                               for r in records)
    # Every checkpoint on disk opens with its own shape, the newest grown.
    newest = open_net(run, batch_size=1)
    assert (newest.config.blocks, newest.config.aux_heads) == (2, True)
    assert newest.config.learning_rates == ((0, 0.01),)
    for iteration, counters in checkpoints(run).items():
        opened = open_net(run, checkpoint=iteration, batch_size=1)
        with np.load(run / "checkpoints" / f"ckpt_{iteration:06d}.npz") as arrays:
            # The shape each checkpoint records is its weights' own.
            assert counters["net"] == net_shape(dict(arrays))
            assert opened.config.blocks == counters["net"]["blocks"]
