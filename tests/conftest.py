"""The suite's order. Tests marked `long` (8 s or more of wall time: processes across a kill
or a signal, a Ray cluster, a process per Keras backend, TensorFlow's start-up in fresh
processes) run first. pytest-xdist deals the tests out in their order and the two workers
take more as they finish, so the long ones, dealt last, kept one worker busy 25-30 s after
the other had run out; dealt first, short tests fill in around them. And the one fixture
that tests of several modules read."""
import pytest


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: item.get_closest_marker("long") is None)   # a stable sort


@pytest.fixture(scope="module")
def one_iteration(tmp_path_factory):
    """A tiny run of one iteration (tests/loop_runs.py) for the tests of a module that read
    it: (run directory, stdout, stderr)."""
    from loop_runs import run_main    # here: it loads TensorFlow, which xdist's controller skips
    run = tmp_path_factory.mktemp("one_iteration") / "run"
    code, out, err = run_main(run, "--iterations", "1")
    assert code == 0, err
    return run, out, err
