"""The run's configuration: presets, command-line overrides and refusals, config.json, and
how --run names a run directory."""
import dataclasses
import json
import os
from pathlib import Path

import pytest

from training.config import PRESETS, Config
from training.run_directory import resolve_run_path

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def parse(*argv):
    config, _ = Config.from_args(list(argv))
    return config


# Presets.

@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_is_valid_and_selectable(name):
    assert PRESETS[name].validate() is PRESETS[name]
    assert parse("--preset", name) == PRESETS[name]


def test_default_preset_is_cpu_and_the_dataclass_defaults():
    assert parse() == PRESETS["cpu"] == Config()


def test_tiny_preset_is_the_test_sized_run():
    tiny = PRESETS["tiny"]
    assert (tiny.board_size, tiny.blocks, tiny.filters) == (5, 1, 8)
    assert tiny.simulations <= 8 and tiny.positions_per_iteration <= 128


def test_paper_preset_has_the_original_settings():
    paper = PRESETS["paper"]
    assert (paper.board_size, paper.filters, paper.blocks) == (7, 128, 5)
    assert (paper.simulations, paper.max_moves, paper.num_games) == (800, 64, 128)
    assert paper.resolved_max_moves == 64  # 32 turns per player


# Overrides.

def test_overrides_apply_on_top_of_the_preset():
    config = parse("--preset", "tiny", "--simulations", "3", "--sensible_moves_only", "false",
                   "--learning_rates", "0:0.1,10:0.01", "--komi", "5.5")
    assert config.simulations == 3
    assert config.sensible_moves_only is False
    assert config.learning_rates == ((0, 0.1), (10, 0.01))
    assert config.komi == 5.5
    # Everything not overridden keeps the preset's value.
    assert config == dataclasses.replace(PRESETS["tiny"], simulations=3, sensible_moves_only=False,
                                         learning_rates=((0, 0.1), (10, 0.01)), komi=5.5)


@pytest.mark.parametrize("text, expected", [
    ("true", True), ("True", True), ("1", True), ("yes", True), ("on", True),
    ("false", False), ("FALSE", False), ("0", False), ("no", False), ("off", False)])
def test_boolean_flags_take_the_usual_spellings(text, expected):
    assert parse("--superko", text).superko is expected


def test_every_field_has_a_flag():
    base = PRESETS["cpu"]
    for field in dataclasses.fields(Config):
        default = getattr(base, field.name)
        if field.name == "learning_rates":
            text, wanted = "0:0.5", ((0, 0.5),)
        elif isinstance(default, bool):
            text, wanted = str(not default).lower(), not default
        elif field.name == "backend":
            text = wanted = "cpu"
        else:
            wanted = default + 1 if isinstance(default, int) else default + 0.5
            text = str(wanted)
        config = parse(f"--{field.name}", text)
        assert getattr(config, field.name) == wanted, field.name
        assert config == dataclasses.replace(base, **{field.name: wanted})


def test_backend_flag_takes_the_three_names_and_refuses_others(capsys):
    for name in ("auto", "cpu", "cuda"):
        assert parse("--backend", name).backend == name
    assert Config().backend == "auto"
    with pytest.raises(SystemExit):
        parse("--backend", "gpu")
    assert "--backend: invalid choice: 'gpu'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="backend must be one of"):
        Config(backend="gpu").validate()


def test_run_flag_is_returned_with_the_config():
    _, args = Config.from_args(["--run", "experiment", "--preset", "tiny"])
    assert args.run == "experiment"
    _, args = Config.from_args([])
    assert args.run == "default"


@pytest.mark.parametrize("argv, mentions", [
    (["--simulations", "abc"], "--simulations"),
    (["--simulations", "2.5"], "--simulations"),
    (["--sensible_moves_only", "maybe"], "--sensible_moves_only"),
    (["--learning_rates", "0-0.1"], "--learning_rates"),
    (["--learning_rates", "0:0.1,10"], "--learning_rates"),
    (["--learning_rates", "5:0.1"], "step 0"),
    (["--learning_rates", "0:0.1,0:0.01"], "learning_rates"),
    (["--learning_rates", "0:-0.1"], "learning_rates"),
    (["--preset", "huge"], "--preset"),
    (["--board_size", "1"], "board_size"),
    (["--board_size", "20"], "board_size"),
    (["--checkpoints_to_keep", "1"], "checkpoints"),
    (["--noise_fraction", "1.5"], "noise_fraction"),
    (["--eval_games_random", "0"], "eval_games_random"),
    (["--positions_per_iteration", "0"], "positions_per_iteration"),
    (["--no_such_field", "1"], "unrecognized"),
])
def test_bad_values_are_usage_errors(argv, mentions, capsys):
    with pytest.raises(SystemExit) as exit_info:
        Config.from_args(argv)
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert "error:" in error and mentions in error
    assert "Traceback" not in error


def test_help_lists_every_field(capsys):
    with pytest.raises(SystemExit) as exit_info:
        Config.from_args(["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for field in dataclasses.fields(Config):
        assert f"--{field.name}" in text


# config.json.

@pytest.mark.parametrize("config", [
    *PRESETS.values(),
    PRESETS["tiny"].overridden(learning_rates=((0, 0.1), (10, 0.01)), sensible_moves_only=False,
                               komi=0.5, resign_threshold=-0.9),
], ids=[*PRESETS, "overridden"])
def test_config_json_round_trip(config):
    text = config.to_json()
    assert set(json.loads(text)) == {field.name for field in dataclasses.fields(Config)}
    restored = Config.from_json(text)
    assert restored == config
    assert isinstance(restored.learning_rates, tuple)
    assert all(isinstance(pair, tuple) for pair in restored.learning_rates)


def test_config_json_with_unknown_or_invalid_fields_is_refused():
    data = json.loads(PRESETS["tiny"].to_json())
    with pytest.raises(ValueError, match="unknown fields"):
        Config.from_json(json.dumps({**data, "board_sise": 5}))
    with pytest.raises(ValueError, match="board_size"):
        Config.from_json(json.dumps({**data, "board_size": 40}))


def test_only_board_and_net_shape_make_runs_incompatible():
    saved = PRESETS["tiny"]
    assert saved.incompatibilities(saved) == []
    harmless = saved.overridden(simulations=7, komi=6.5, learning_rates=((0, 0.5),), iterations=9)
    assert harmless.incompatibilities(saved) == []
    problems = saved.overridden(board_size=7, filters=16).incompatibilities(saved)
    assert len(problems) == 2
    assert any("board_size" in p and "5" in p and "7" in p for p in problems)
    assert any("filters" in p for p in problems)
    assert saved.overridden(history=2).incompatibilities(saved)  # changes the input planes


# --run.

def test_bare_run_name_means_runs_name_under_the_project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "experiment").mkdir()  # a same-named directory here does not matter
    assert resolve_run_path("experiment") == PROJECT_ROOT / "runs" / "experiment"
    assert resolve_run_path("default") == PROJECT_ROOT / "runs" / "default"


def test_run_path_is_used_as_given(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolve_run_path(str(tmp_path / "a" / "run")) == tmp_path.resolve() / "a" / "run"
    assert resolve_run_path(tmp_path / "b") == tmp_path.resolve() / "b"
    assert resolve_run_path(os.path.join("sub", "run")) == tmp_path.resolve() / "sub" / "run"
    assert resolve_run_path("./run") == tmp_path.resolve() / "run"
    assert resolve_run_path("../run") == tmp_path.resolve().parent / "run"


def test_home_relative_run_path_is_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert resolve_run_path("~/runs/x") == tmp_path.resolve() / "runs" / "x"
