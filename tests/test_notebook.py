"""notebooks/training_visualizations.ipynb executed end to end on a fresh kernel (nbclient,
MPLBACKEND=Agg): against the shipped fixture run, and against a run just produced by one
`tiny` iteration of bp_tree.py (no GNU Go or rating fields yet). The final boards it draws
are checked against the rules engine replaying the same SGF records.
"""
import contextlib
import io
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from kernels import GoBatch, coords  # noqa: E402
from games.sgf_records import sgf_to_moves  # noqa: E402
from training.config import Config  # noqa: E402

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOK = NOTEBOOKS / "training_visualizations.ipynb"
FIXTURE_RUN = NOTEBOOKS / "fixture_run"

# Appended to the executed copy: what the notebook drew, as data.
REPORT_CELL = """print("REPORT " + json.dumps({
    "not_measured": not_measured,
    "events": [label for _, label in schedule_events],
    "games": [{"path": str(game["path"]),
               "stones": [[colour, list(point)] for colour, point in
                          game["board"].list_occupied_points()]} for game in recent_games]}))"""


def load_nbformat():
    """nbformat, imported here and not at collection, and without jsonschema's optional
    `rfc3987_syntax`: building that package's IRI grammar took 2.2 of nbformat's 2.6 s of
    import, which every test worker paid, and no field of a notebook's schema is an IRI."""
    sys.modules.setdefault("rfc3987_syntax", None)
    import nbformat
    return nbformat


def execute(monkeypatch, run_dir: Path | None) -> tuple[dict, int]:
    """Run every cell in a fresh kernel; returns (the report, number of PNG figures)."""
    nbformat = load_nbformat()
    from nbclient import NotebookClient
    monkeypatch.setenv("MPLBACKEND", "Agg")
    if run_dir is None:
        monkeypatch.delenv("RUN_DIR", raising=False)
    else:
        monkeypatch.setenv("RUN_DIR", str(run_dir))
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell(REPORT_CELL))
    NotebookClient(notebook, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    outputs = [output for cell in notebook.cells for output in cell.get("outputs", [])]
    errors = [output for output in outputs if output.get("output_type") == "error"]
    assert not errors, errors
    figures = sum("image/png" in output.get("data", {}) for output in outputs)
    texts = "".join(output.get("text", "") for output in outputs
                    if output.get("output_type") == "stream")
    report = json.loads(texts.split("REPORT ", 1)[1].splitlines()[0])
    return report, figures


def engine_final_board(path: Path) -> np.ndarray:
    board_size, komi, moves = sgf_to_moves(path.read_bytes())
    go = GoBatch(1, board_size, komi=komi)
    for _, move in moves:
        go.play(np.array([move]))
    return go.board()[0]


def assert_boards_match_the_engine(report: dict) -> None:
    assert report["games"], "the notebook should draw at least one recent game"
    for game in report["games"]:
        expected = engine_final_board(Path(game["path"]))
        drawn = np.zeros_like(expected)
        for colour, point in game["stones"]:
            row, col = coords.from_flat(coords.from_sgfmill(tuple(point), len(expected)),
                                        len(expected))
            drawn[row, col] = 1 if colour == "b" else -1
        np.testing.assert_array_equal(drawn, expected, err_msg=game["path"])


def test_the_notebook_is_stored_without_outputs_and_has_one_parameter_cell():
    nbformat = load_nbformat()
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert all(cell.outputs == [] and cell.execution_count is None for cell in code)
    parameters = [cell for cell in code if "parameters" in cell.metadata.get("tags", [])]
    assert len(parameters) == 1 and 'os.environ.get("RUN_DIR")' in parameters[0].source


def test_the_fixture_run_is_a_small_run_written_by_the_trainer():
    size = sum(path.stat().st_size for path in FIXTURE_RUN.rglob("*") if path.is_file())
    assert size < 300_000
    config = Config.from_json((FIXTURE_RUN / "config.json").read_text())
    every = config.gnugo_every
    records = [json.loads(line) for line in (FIXTURE_RUN / "metrics.jsonl").read_text().splitlines()]
    iterations = [record["iteration"] for record in records]
    assert iterations == list(range(1, len(records) + 1)) and every and len(records) >= 2 * every
    # GNU Go and the rating are measured on the trainer's schedule, with all their fields: what
    # bp_tree.py writes (docs/ARCHITECTURE.md), not what a hand could add.
    rated = [record for record in records if "win_rate_gnugo" in record]
    assert [record["iteration"] for record in rated] == iterations[every - 1::every]
    for index, record in enumerate(rated):
        assert {"gnugo_level", "gnugo_games", "elo"} <= set(record)
        assert ("win_rate_previous" in record) == (index > 0)
        if index:
            assert record["previous_iteration"] == rated[index - 1]["iteration"]
    # The newest checkpoint's counters (the GUI tests play it) agree with the metrics.
    [checkpoint] = (FIXTURE_RUN / "checkpoints").glob("ckpt_*.npz")
    with np.load(checkpoint) as arrays:
        counters = json.loads(arrays["__counters__"].tobytes())
    last = records[-1]
    assert all(counters[key] == last[key] for key in ("iteration", "games", "positions",
                                                      "train_steps"))
    assert counters["rated_iteration"] == rated[-1]["iteration"]
    assert round(counters["elo"], 1) == rated[-1]["elo"]
    assert counters["commands"] == [
        f"bp_tree.py --preset tiny --iterations {len(records)} --gnugo_every {every} "
        f"--run notebooks/fixture_run"]
    assert sorted(path.name for path in (FIXTURE_RUN / "sgf").iterdir()) == [
        f"iter_{i:06d}_game_0.sgf" for i in iterations]


def test_the_notebook_runs_on_the_fixture_run(monkeypatch):
    report, figures = execute(monkeypatch, None)
    assert figures == 3                      # main figure, self-play games, recent boards
    assert report["not_measured"] == []      # the fixture exercises every panel
    assert len(report["games"]) == 4         # the newest four of its ten SGF records
    assert_boards_match_the_engine(report)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    import bp_tree
    run = tmp_path_factory.mktemp("notebook") / "tiny_run"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = bp_tree.main(["--run", str(run), "--preset", "tiny", "--iterations", "1",
                             "--positions_per_iteration", "64", "--eval_games_random", "4"])
    assert code == 0
    return run


def test_the_notebook_runs_on_a_fresh_tiny_run(monkeypatch, tiny_run):
    report, figures = execute(monkeypatch, tiny_run)
    assert figures == 3
    missing = set(report["not_measured"])
    assert {"win rate against GNU Go", "rating (Elo)", "rating over time"} <= missing
    assert not any(what.startswith("losses") for what in missing)
    assert_boards_match_the_engine(report)


def test_the_notebook_marks_the_schedules_events(monkeypatch, tmp_path):
    import bp_tree
    run = tmp_path / "scheduled"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert bp_tree.main(["--run", str(run), "--preset", "tiny", "--iterations", "3",
                             "--schedule", "100:learning_rate=0.01,100:blocks=2"]) == 0
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    applied = [r["schedule"] for r in records if "schedule" in r]
    assert len(applied) == 1 and len(applied[0]) == 2     # both at the same iteration
    report, _ = execute(monkeypatch, run)
    assert len(report["events"]) == 1
    assert sorted(report["events"][0].split(", ")) == ["blocks 2", "rate 0.01"]


def test_the_notebook_runs_on_a_run_without_a_finished_iteration(monkeypatch, tmp_path):
    run = tmp_path / "just_started"
    run.mkdir()
    (run / "config.json").write_text((FIXTURE_RUN / "config.json").read_text())
    report, figures = execute(monkeypatch, run)
    assert figures == 2                      # no SGF record yet: no boards
    assert report["games"] == []
    assert "win rate against random" in report["not_measured"]
