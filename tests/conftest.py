"""The suite's order. Tests marked `long` (8 s or more of wall time: processes across a kill
or a signal, a Ray cluster, a process per Keras backend, TensorFlow's start-up in fresh
processes) run first. pytest-xdist deals the tests out in their order and the two workers
take more as they finish, so the long ones, dealt last, kept one worker busy 25-30 s after
the other had run out; dealt first, short tests fill in around them. And the fixtures that
tests of several modules read; they import the project's heavy modules in their bodies, never
here: xdist's controller loads this file and must not import TensorFlow."""
import contextlib
import io
from pathlib import Path

import pytest


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: item.get_closest_marker("long") is None)   # a stable sort


@pytest.fixture(scope="session")
def one_iteration(tmp_path_factory):
    """A tiny run of one iteration (tests/loop_runs.py), built once per test process for the
    tests that read it (test_training_loop.py, test_warm_starts.py): (run directory, stdout,
    stderr)."""
    from loop_runs import run_main    # here: it loads TensorFlow, which xdist's controller skips
    run = tmp_path_factory.mktemp("one_iteration") / "run"
    code, out, err = run_main(run, "--iterations", "1")
    assert code == 0, err
    return run, out, err


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> Path:
    """The GTP tests' run (test_gtp_*.py), built once per test process: preset tiny (5x5, one
    block of 8 filters), one iteration. A module that defines its own `tiny_run` uses that
    one."""
    import bp_tree
    run = tmp_path_factory.mktemp("gtp") / "tiny run"   # a space in the path, as users have
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert bp_tree.main(["--run", str(run), "--preset", "tiny", "--iterations", "1"]) == 0
    return run


@pytest.fixture(scope="session")
def aux_run(tmp_path_factory) -> Path:
    """A tiny run (5x5, one iteration) whose net has the ownership and score heads, built once
    per test process for the GTP engine's and the GUI's tests of those heads."""
    import bp_tree
    run = tmp_path_factory.mktemp("aux") / "aux"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert bp_tree.main(["--run", str(run), "--preset", "tiny", "--aux_heads", "true",
                             "--iterations", "1"]) == 0
    return run


@pytest.fixture(scope="session")
def loaded(tiny_run):
    """(config, net) of the tiny run, loaded the way gtp_engine.py loads it."""
    import gtp_engine
    with contextlib.redirect_stderr(io.StringIO()):
        engine = gtp_engine.load_engine(gtp_engine.parse_args(["--run", str(tiny_run)]))
    return engine.config, engine.evaluator


@pytest.fixture(params=["engine", "reference"])
def new_game(request):
    """new_game(size, ascii=None, to_play=BLACK, **rules) -> a game on that position: on the
    engine (rules_games.EngineGame) and on the reference (reference_rules.ReferenceGo), for
    test_rules_captures.py and test_rules_game_state.py."""
    from reference_rules import BLACK, ReferenceGo, board_from_ascii
    from rules_games import EngineGame
    kind = request.param

    def make(board_size, ascii=None, to_play=BLACK, **rules):
        game = (EngineGame if kind == "engine" else ReferenceGo)(board_size, **rules)
        if ascii is not None:
            stones = board_from_ascii(ascii)
            assert stones.shape == (board_size, board_size)
            game.set_board(stones, to_play)
        return game

    return make
