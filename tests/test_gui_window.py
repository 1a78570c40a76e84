"""The Pygame GUI's real window, driven headless (SDL_VIDEODRIVER=dummy), and its program
(play_network_gui.py).

Against the fixture run's net: clicks and keys change the game, and the pixels drawn show
every point's stone or wood and the last move's marker. The territory overlay is the Keras
model's own ownership head for the position (planes from a fresh rules engine), within the
round-off of float_tolerance.py, drawn in the owner's colour; a model file plays and saves its
games under runs/; runs without a checkpoint, other board sizes, missing checkpoints and a
missing shipped model get a message, not a traceback.
"""
import os

os.environ["SDL_VIDEODRIVER"] = "dummy"        # no window, on any machine
os.environ["PYGAME_HIDE_SUPPORT_PROMPT"] = "1"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import json  # noqa: E402
import shutil  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from float_tolerance import (accumulation_depths, assert_head_close, model_shape,  # noqa: E402
                             trunk_depth)
from gui.controls import Command  # noqa: E402
from gui.session import BLACK, WHITE  # noqa: E402
from gui_points import CENTRE, N, PASS  # noqa: E402
from kernels import GoBatch  # noqa: E402


FIXTURE_RUN = Path(__file__).resolve().parent.parent / "notebooks" / "fixture_run"


# The window, headless, against the fixture run's net.

def test_a_run_without_a_checkpoint_gets_a_message_not_a_traceback(tmp_path, capsys):
    import play_network_gui
    run = tmp_path / "young_run"
    run.mkdir()
    shutil.copy(FIXTURE_RUN / "config.json", run / "config.json")
    assert play_network_gui.main(["--run", str(run)]) == 2
    err = capsys.readouterr().err
    assert "no checkpoint yet" in err and "Traceback" not in err
    assert play_network_gui.main(["--run", str(tmp_path / "missing")]) == 2
    assert "no run directory" in capsys.readouterr().err


def test_a_board_size_other_than_the_runs_is_refused(capsys):
    import play_network_gui
    assert play_network_gui.main(["--run", str(FIXTURE_RUN), "--board-size", "9"]) == 2
    err = capsys.readouterr().err
    assert "--board-size 9: this net was trained on 5x5" in err


def test_a_missing_checkpoint_iteration_is_refused(capsys):
    import play_network_gui
    assert play_network_gui.main(["--run", str(FIXTURE_RUN), "--checkpoint", "1"]) == 2
    err = capsys.readouterr().err
    assert "no checkpoint of iteration 1" in err and "Traceback" not in err


@pytest.fixture(scope="module")
def app():
    import play_network_gui
    assert json.loads((FIXTURE_RUN / "config.json").read_text())["board_size"] == N
    args = play_network_gui.parse_args(["--run", str(FIXTURE_RUN), "--sims", "8"])
    session, _ = play_network_gui.load_session(args)
    window = play_network_gui.App(session)
    yield window
    window.close()


def click(app, x, y):
    import pygame
    pygame.event.post(pygame.event.Event(pygame.MOUSEBUTTONDOWN, pos=(x, y), button=1))
    return settle(app)


def press(app, key):
    import pygame
    pygame.event.post(pygame.event.Event(pygame.KEYDOWN, key=key, mod=0, unicode=""))
    return settle(app)


def settle(app):
    """Frames until the net has answered (it thinks in a thread)."""
    running = app.frame()
    app.session.wait()
    app.frame()
    return running


def assert_drawn(app):
    """Every point shows what the game holds: a dark stone, a light stone, or wood."""
    surface = app.draw()
    geometry = app.renderer.geometry
    offset = int(geometry.stone_radius * 0.45)   # off the grid lines and the last-move dot
    for row in range(N):
        for col in range(N):
            x, y = geometry.point_to_pixel(row, col)
            red, green, blue, _ = surface.get_at((x + offset, y + offset))
            stone = app.session.view.board[row, col]
            if stone == BLACK:
                assert red + green + blue < 150, (row, col)
            elif stone == WHITE:
                assert min(red, green, blue) > 200, (row, col)
            else:
                assert red > green > blue and red > 150 and blue < 160, (row, col)
    last = app.session.view.last_move
    if last is not None and last != PASS:
        red, green, blue, _ = surface.get_at(geometry.move_to_pixel(last))
        assert red > 180 and green < 90 and blue < 90, "the last move carries a red marker"


def test_headless_window_clicks_keys_and_pixels(app):
    import pygame
    session, geometry = app.session, app.renderer.geometry
    assert session.view.moves == ()
    assert_drawn(app)

    assert click(app, *geometry.move_to_pixel(CENTRE))
    assert session.view.board[2, 2] == BLACK
    assert len(session.view.moves) == 2 and (session.view.board == WHITE).sum() == 1
    net_reply = session.view.moves[1]
    assert_drawn(app)

    before = session.view.board.copy()
    assert click(app, *geometry.move_to_pixel(CENTRE))          # occupied: refused
    assert "occupied" in session.message and (session.view.board == before).all()

    assert press(app, pygame.K_u)                                # undo both moves
    assert session.view.moves == () and session.view.board.sum() == 0
    assert_drawn(app)

    free = next(m for m in range(PASS) if m != net_reply)
    assert click(app, *geometry.move_to_pixel(free))
    assert session.view.moves[0] == free and len(session.view.moves) == 2
    pass_button = next(b for b in app.renderer.buttons if b.command is Command.PASS)
    assert click(app, *pass_button.centre)                      # pass by the button
    assert session.view.moves[2] == PASS and len(session.view.moves) == 4
    assert press(app, pygame.K_p)                               # pass by the key
    assert session.view.moves[4] == PASS
    assert_drawn(app)

    assert press(app, pygame.K_h)                               # heatmap of the search
    analysis = session.current_analysis()
    if not session.over:
        assert analysis is not None and analysis.visits is not None
    assert not press(app, pygame.K_ESCAPE)


def test_the_territory_overlay_draws_the_nets_ownership_head(aux_run):
    """The estimate comes from the net's process and is the Keras model's own ownership head
    for the position (planes from a fresh rules engine), turned to Black's view; the window
    draws a square of the expected owner's colour where the net is most certain."""
    import play_network_gui
    from training.nets import read_weights
    args = play_network_gui.parse_args(["--run", str(aux_run), "--no-search"])
    session, _ = play_network_gui.load_session(args)
    window = play_network_gui.App(session)
    try:
        assert session.play(CENTRE)
        session.wait()
        assert session.toggle_territory()
        model = read_weights(aux_run).trainer.model
        go = GoBatch(1, N, history_length=1)
        for move in session.view.moves:
            go.play(np.array([move]))
        outputs = model(go.features(1), training=False)
        to_play = session.view.to_play
        assert to_play == BLACK
        expected = np.tanh(np.asarray(outputs[2])[0]) * to_play
        shape = model_shape(model)
        assert_head_close(session.territory.ownership, expected,
                          trunk_depth(shape) + shape.filters, tanh=True)
        assert_head_close(session.territory.black_lead,
                          float(np.asarray(outputs[3])[0, 0]) * N * N * to_play,
                          accumulation_depths(shape)[1])

        empty = np.argwhere(session.view.board == 0)
        row, col = max(empty, key=lambda point: abs(expected[tuple(point)]))
        assert abs(expected[row, col]) > 0.1, "the net should lean somewhere"
        x, y = window.renderer.geometry.point_to_pixel(row, col)
        red, green, blue, _ = window.draw().get_at((x + 4, y + 4))   # off the grid lines
        if expected[row, col] > 0:
            assert red + green + blue < 300, "a dark square where Black should own the point"
        else:
            assert min(red, green, blue) > 150, "a light square where White should own it"
        assert session.toggle_territory()                            # off: wood again
        red, green, blue, _ = window.draw().get_at((x + 4, y + 4))
        assert red > green > blue and red > 150 and blue < 160
    finally:
        window.close()


def test_a_model_file_plays_and_its_games_are_saved_under_runs_not_beside_it(tmp_path):
    import export_model
    import play_network_gui
    from training.run_directory import ROOT
    model = tmp_path / "models" / "net.npz"
    assert export_model.main(["--run", str(FIXTURE_RUN), "--output", str(model)]) == 0
    session, save_dir = play_network_gui.load_session(
        play_network_gui.parse_args(["--model", str(model), "--sims", "4"]))
    try:
        assert session.driver.go.board_size == N
        assert save_dir == ROOT / "runs" / "gui_games"
        # The model's net answers: the human's move is followed by the net's.
        assert session.play(0)
        session.wait()
        assert len(session.moves) == 2
    finally:
        session.close()
        session.driver.evaluator.close()


def test_without_run_or_model_the_shipped_model_is_played_or_its_absence_named(
        monkeypatch, tmp_path, capsys):
    import play_network_gui
    from games import players
    from training.nets import SHIPPED_MODEL, read_config
    if SHIPPED_MODEL.is_file():
        config, _ = read_config(SHIPPED_MODEL)
        assert config.board_size == 9   # models/README.md: the shipped net is the 9x9 one
    missing = tmp_path / "models" / "9x9.npz"
    monkeypatch.setattr(players, "SHIPPED_MODEL", missing)
    assert play_network_gui.main([]) == 2
    err = capsys.readouterr().err
    assert f"the shipped model {missing} is missing" in err and "Traceback" not in err
    with pytest.raises(SystemExit):
        play_network_gui.parse_args(["--model", "x.npz", "--checkpoint", "3"])
