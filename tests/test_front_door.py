"""The entry scripts' shared command line (training/options.py) and the one loader of what
plays (games/players.py): one spelling per option in every script's --help, the underscore
spelling accepted everywhere, the player grammar, and the loader's defaults and refusals."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from games import players
from training.config import Config
from training.nets import SHIPPED_MODEL
from training.options import OneLineParser, PlayerSpec, parse_player

ROOT = Path(__file__).resolve().parents[1]
FIXTURE_RUN = ROOT / "notebooks" / "fixture_run"

# Which shared options each entry script takes, written out by hand (not read from the code).
SHARED = {
    "gtp_engine.py": {"--run", "--model", "--checkpoint", "--sims", "--no-search",
                      "--rollout-lambda", "--board-size", "--komi", "--seed", "--player"},
    "play_network_gui.py": {"--run", "--model", "--checkpoint", "--sims", "--no-search",
                            "--rollout-lambda", "--board-size", "--komi", "--seed"},
    "evaluate.py": {"--run", "--sims", "--rollout-lambda", "--board-size", "--komi", "--seed",
                    "--black", "--white"},
    "export_model.py": {"--run", "--checkpoint"},
    "katago_analysis.py": {"--run", "--model", "--checkpoint", "--board-size", "--komi",
                           "--seed"},
    "bp_tree.py": {"--run", "--board-size", "--komi", "--rollout-lambda", "--seed",
                   "--init-from"},
    "train_sgf.py": {"--run", "--board-size", "--komi", "--seed", "--init-from"},
    "distill.py": {"--run", "--board-size", "--komi", "--seed", "--init-from"},
}
# The help line of an option shared by several scripts, which must read the same everywhere.
OPTION_LINE = re.compile(r"^  (--[a-z0-9-]+)(?: [A-Z_]+)?(?:, [^ ]+(?: [A-Z_]+)?)*\s*(.*)$")


def script_help(script: str) -> str:
    done = subprocess.run([sys.executable, script, "--help"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def helps() -> dict[str, str]:
    return {script: script_help(script) for script in SHARED}


def test_every_entry_script_spells_its_options_with_hyphens(helps):
    for script, text in helps.items():
        options = set(re.findall(r"(?<![\w-])--[a-z0-9][a-z0-9_-]*", text))
        assert SHARED[script] <= options, (script, SHARED[script] - options)
        assert not [o for o in options if "_" in o], (script, options)


def test_a_shared_option_has_one_help_text_in_every_script(helps):
    """Among the scripts that play (a trainer's --board-size sets a new run's board instead)."""
    wording: dict[str, set[str]] = {}
    for script, text in helps.items():
        if "--init-from" in SHARED[script]:
            continue
        # argparse wraps help: join continuation lines onto their option's line.
        joined = re.sub(r"\n {20,}", " ", text)
        for line in joined.splitlines():
            found = OPTION_LINE.match(line)
            if found and found.group(1) in ("--run", "--model", "--checkpoint", "--sims",
                                             "--board-size", "--komi", "--no-search"):
                wording.setdefault(found.group(1), set()).add(
                    re.sub(r"\s+", " ", found.group(2)).split(";")[0])
    assert set(wording) >= {"--run", "--model", "--checkpoint", "--sims", "--board-size"}
    for option, texts in wording.items():
        assert len(texts) == 1, (option, texts)


def test_underscores_and_hyphens_name_the_same_option():
    hyphens, _ = Config.from_args(["--board-size", "7", "--rollout-lambda", "0.5"])
    underscores, _ = Config.from_args(["--board_size", "7", "--rollout_lambda=0.5"])
    assert hyphens == underscores and hyphens.board_size == 7 and hyphens.rollout_lambda == 0.5
    parser = OneLineParser()
    parser.add_argument("--init-from")
    parser.add_argument("rest", nargs="*")
    # A value is never rewritten, nor anything after "--".
    args = parser.parse_args(["--init_from", "runs/a_b", "--", "--not_an_option"])
    assert args.init_from == "runs/a_b" and args.rest == ["--not_an_option"]


@pytest.mark.parametrize("text, expected", [
    ("random", PlayerSpec("random")),
    ("mcts:40", PlayerSpec("mcts", "40")),
    ("mcts:007", PlayerSpec("mcts", "7")),
    ("gnugo:0", PlayerSpec("gnugo", "0")),
    ("gnugo:10", PlayerSpec("gnugo", "10")),
    ("ckpt:latest", PlayerSpec("ckpt", "latest")),
    ("ckpt:", PlayerSpec("ckpt", "latest")),
    ("ckpt:12", PlayerSpec("ckpt", "12")),
    ("model:models/9x9.npz", PlayerSpec("model", "models/9x9.npz")),
])
def test_player_specs(text, expected):
    assert parse_player(text) == expected


@pytest.mark.parametrize("text, message", [
    ("mcts:0", "mcts:SIMS"), ("mcts:lots", "mcts:SIMS"), ("mcts:٣", "mcts:SIMS"),
    ("gnugo:11", "an integer in 0..10"), ("gnugo:", "an integer in 0..10"), ("random:3", "unknown player"),
    ("ckpt:last", "unknown player"), ("model:", "unknown player"), ("leela", "unknown player"),
])
def test_bad_player_specs_are_refused_in_one_line(text, message):
    with pytest.raises(ValueError, match=message) as refused:
        parse_player(text)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize("script, argv, message", [
    ("gtp_engine.py", ["--run", "x", "--model", "m.npz"], "name one of --run"),
    ("gtp_engine.py", ["--model", "m.npz", "--checkpoint", "3"], "a model file has one net"),
    ("gtp_engine.py", ["--model", "runs/x"], "ends in .npz"),
    ("gtp_engine.py", ["--player", "gnugo:3"], "plays a net or mcts:SIMS"),
    ("gtp_engine.py", ["--player", "mcts:3", "--run", "x"], "plays without a net"),
    ("play_network_gui.py", ["--sims", "0"], "--sims must be at least 1"),
    ("play_network_gui.py", ["--rollout_lambda", "2"], "--rollout-lambda must be in 0..1"),
    ("evaluate.py", ["--black", "random", "--white", "gnugo:12"], "0..10"),
    ("evaluate.py", ["--black", "random", "--white", "random", "--komi", "nan"], "finite"),
    ("export_model.py", ["--output", "x.npz"], "--run"),
    ("export_model.py", ["--run", "x", "--output", "x.npz", "--average-last", "0"],
     "--average-last must be in [1, 1000]"),
])
def test_refusals_are_one_line(script, argv, message):
    done = subprocess.run([sys.executable, script, *argv], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2
    assert message in done.stderr and done.stderr.count("\n") == 1, done.stderr


def namespace(**values):
    import argparse
    defaults = dict(run=None, model=None, checkpoint=None, player=None, board_size=None,
                    komi=None, rollout_lambda=None, sims=None)
    return argparse.Namespace(**{**defaults, **values})


def test_the_loader_defaults_to_the_shipped_model_and_the_nets_board():
    source = players.net_source(namespace())
    assert Path(source.path) == SHIPPED_MODEL and source.checkpoint is None
    net_config, _ = players.read_source(source)
    config = players.game_config(namespace(komi=15.0), net_config)
    assert (config.board_size, config.komi, config.backend) == (9, 15.0, "cpu")
    assert config.blocks == net_config.blocks


def test_without_a_net_the_board_is_9x9_unless_named():
    assert players.net_source(namespace(player=parse_player("mcts:5"))) is None
    assert players.game_config(namespace(), None).board_size == 9
    assert players.game_config(namespace(board_size=7, komi=0.5), None).komi == 0.5


def test_the_loader_refuses_what_cannot_play():
    run_config, _ = players.read_source(players.NetSource(FIXTURE_RUN))
    with pytest.raises(players.SetupError, match="trained on 5x5"):
        players.game_config(namespace(board_size=9), run_config)
    with pytest.raises(players.SetupError, match="no run directory"):
        players.read_source(players.NetSource("no_such_run_anywhere"))
    with pytest.raises(players.SetupError, match="name the run"):
        players.net_source(namespace(checkpoint=3))
