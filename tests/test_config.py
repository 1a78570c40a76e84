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
        elif field.name == "schedule":
            text, wanted = "100:blocks=2,200:learning_rate=0.01", ((100, "blocks", 2),
                                                                   (200, "learning_rate", 0.01))
        elif isinstance(default, bool):
            text, wanted = str(not default).lower(), not default
        elif field.name == "backend":
            text = wanted = "cpu"
        elif field.name == "inference":
            text = wanted = "int8"
        elif field.name == "opening_noise_only":
            text = wanted = "all"
        elif isinstance(default, str):
            text = wanted = "10.0.0.1:6379"
        else:
            wanted = default + 1 if isinstance(default, int) else default + 0.5
            if field.name == "momentum":   # must stay below 1
                wanted = default - 0.5
            text = str(wanted)
        # A cluster address means nothing without workers to put on it, komi draws nothing
        # without a net that reads the komi, score utility needs a score head that does, and
        # the reply head is trained beside the auxiliary heads.
        extra = ({"workers": 1} if field.name == "ray_address" else
                 {"komi_input": True} if field.name in ("komi_spread", "komi_wide_share")
                 else {"komi_input": True, "aux_heads": True} if field.name == "score_utility"
                 else {"aux_heads": True} if field.name == "reply_head"
                 else {})
        config = parse(f"--{field.name}", text, *(f"--{k}={v}" for k, v in extra.items()))
        assert getattr(config, field.name) == wanted, field.name
        assert config == dataclasses.replace(base, **{field.name: wanted}, **extra)


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
    (["--sensible_moves_only", "maybe"], "--sensible-moves-only"),
    (["--learning_rates", "0-0.1"], "--learning-rates"),
    (["--learning_rates", "0:0.1,10"], "--learning-rates"),
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
    (["--ray_address", "auto"], "ray_address needs workers"),
    (["--workers", "-1"], "workers"),
    (["--opening_noise_only", "true"], "--opening-noise-only"),
    (["--opening_noise_only", "wide_komi"], "needs komi_wide_share"),
])
def test_bad_values_are_usage_errors(argv, mentions, capsys):
    with pytest.raises(SystemExit) as exit_info:
        Config.from_args(argv)
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert "error:" in error and mentions in error
    assert "Traceback" not in error
    assert len(error.strip().splitlines()) == 1, error   # the reason alone, not the usage


def test_help_lists_every_field(capsys):
    with pytest.raises(SystemExit) as exit_info:
        Config.from_args(["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for field in dataclasses.fields(Config):
        assert f"--{field.name.replace('_', '-')}" in text


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


def test_a_config_json_of_the_opening_noise_flag_s_first_form_still_loads():
    # Before it named the games, opening_noise_only was true (every game) or false.
    data = json.loads(PRESETS["tiny"].to_json())
    for old, new in ((True, "all"), (False, "none")):
        assert Config.from_json(json.dumps({**data, "opening_noise_only": old})
                                ).opening_noise_only == new


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


def test_holding_takes_each_growth_from_the_more_grown_and_nothing_else():
    base = PRESETS["tiny"].overridden(blocks=2)
    small = base.overridden(simulations=7)
    large = base.overridden(blocks=5, aux_heads=True, reply_head=True, komi_input=True,
                            simulations=99)
    mixed = base.overridden(blocks=9, extra_features=True)
    held = small.holding(large)
    # Written out by hand: the larger blocks, every head and plane either has; the rest small's.
    assert (held.blocks, held.aux_heads, held.reply_head, held.extra_features,
            held.komi_input, held.simulations) == (5, True, True, False, True, 7)
    held = mixed.holding(large)
    assert (held.blocks, held.aux_heads, held.extra_features, held.komi_input) == \
        (9, True, True, True)
    assert large.holding(small) == large and not large.holding(small).grows_from(large)
    assert small.holding(large).grows_from(small)
    assert not small.grows_from(small.overridden(simulations=1))


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


# Every field is checked where it is parsed, with its allowed range in the message.

@pytest.mark.parametrize("flag, value, message", [
    ("komi", "nan", "komi must be a finite number"),
    ("komi", "inf", "komi must be a finite number"),
    ("dirichlet_alpha", "0", "dirichlet_alpha must be in [0.001, 100]"),
    ("max_moves", "-5", "max_moves must be in [0, 196]"),
    ("replay_window", "10000000000", "replay_window must be in [256, "),
    ("eval_simulations", "0", "eval_simulations must be in [1, 100000]"),
    ("c_puct", "-1", "c_puct must be in"),
    ("seed", "-1", "seed must be in [0, 4294967295]"),
    ("min_replay", "70000", "min_replay must be in [0, 60000]"),
    ("learning_rates", "0:nan", "learning_rates"),
])
def test_out_of_range_values_are_refused_where_parsed(capsys, flag, value, message):
    with pytest.raises(SystemExit) as exit_info:
        Config.from_args([f"--{flag}", value])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_config_json_values_of_the_wrong_type_are_refused():
    data = json.loads(Config().to_json())
    data["simulations"] = "many"
    with pytest.raises(ValueError, match="simulations must be a int"):
        Config.from_json(json.dumps(data))


# Resuming: config.json is the base, the command line's flags override it.

def test_resume_uses_the_edited_config_json_and_the_flags_override_it(tmp_path):
    from training.run_directory import RunDirectory
    messages = []
    run = RunDirectory(tmp_path / "run", log=messages.append)
    first, args = Config.from_args(["--preset", "tiny"])
    run.prepare(first, Config.explicit_overrides(args))
    edited = json.loads(run.config_path.read_text())
    edited["c_puct"] = 2.5
    edited["simulations"] = 7
    run.config_path.write_text(json.dumps(edited))

    command, args = Config.from_args(["--preset", "tiny", "--simulations", "9"])
    resumed = run.prepare(command, Config.explicit_overrides(args))
    assert resumed == dataclasses.replace(PRESETS["tiny"], c_puct=2.5, simulations=9)
    assert json.loads(run.config_path.read_text())["c_puct"] == 2.5
    assert "simulations 7 -> 9" in messages[-1]

    command, args = Config.from_args(["--filters", "16"])
    with pytest.raises(ValueError, match="filters: run has 8, command asks 16"):
        run.prepare(command, Config.explicit_overrides(args))
