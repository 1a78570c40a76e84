"""The Pygame GUI's logic without a window (gui/): its geometry and command logic as plain
functions, area ownership against the engine's score, and a game session against scripted
stand-in nets (no TensorFlow): the net thinking in a thread, refusals with a reason, undo,
passes and the area count, resigning, colours, handicap, SGF, the heatmap and the territory
estimate, each against answers worked out by hand.

Positions are 5x5 boards (gui_points.py); flat index = row * 5 + col with row 0 at the top, so
C3 (the centre) is 12, A5 (top left) is 0 and pass is 25.
"""
import threading
import time

import numpy as np
import pytest

from gui.controls import (BUTTONS, Command, command_for_click, command_for_key, dispatch,
                          layout_buttons)
from gui.geometry import BoardGeometry
from gui.session import BLACK, WHITE, GameSession
from gui_points import A4, A5, B5, CENTRE, E1, N, PASS
from games.territory import area_counts, area_ownership
from kernels import GoBatch
from games.search import SearchingGames
from training.config import Config
from games.sgf_records import sgf_to_moves

def board_from_ascii(text: str) -> np.ndarray:
    rows = [line.split() for line in text.strip().splitlines()]
    return np.array([[{"X": 1, "O": -1, ".": 0}[ch] for ch in row] for row in rows], np.int8)


# Geometry.

@pytest.mark.parametrize("board_size", [2, 5, 9, 19])
def test_every_point_maps_to_its_pixel_and_back(board_size):
    geometry = BoardGeometry(board_size, size=600, origin=(10, 20), margin=30)
    half = geometry.cell / 2 - 1
    for move in range(board_size * board_size):
        x, y = geometry.move_to_pixel(move)
        assert geometry.pixel_to_move(x, y) == move
        # Anywhere in the point's cell selects it, not a neighbour.
        for dx, dy in ((-half, -half), (half, half), (-half, half), (half, -half)):
            assert geometry.pixel_to_move(x + dx, y + dy) == move
    assert geometry.move_to_pixel(board_size * board_size) is None  # pass has no pixel


def test_point_pixels_are_where_the_grid_is():
    geometry = BoardGeometry(9, size=500, origin=(0, 0), margin=25)   # cell = 50 px
    assert geometry.cell == 50
    assert geometry.point_to_pixel(0, 0) == (50, 50)          # A9, top left
    assert geometry.point_to_pixel(0, 8) == (450, 50)         # J9, top right
    assert geometry.point_to_pixel(8, 0) == (50, 450)         # A1, bottom left
    assert geometry.pixel_to_point(74, 26) == (0, 0)
    assert geometry.pixel_to_point(76, 26) == (0, 1)          # past the cell's edge: B9
    assert geometry.pixel_to_point(26, 76) == (1, 0)


def test_clicks_on_the_margin_or_outside_select_no_point():
    geometry = BoardGeometry(9, size=500, origin=(100, 0), margin=25)
    for x, y in ((110, 250), (300, 10), (590, 250), (300, 490), (50, 50), (700, 250), (300, -5)):
        assert geometry.pixel_to_point(x, y) is None
    assert geometry.contains(110, 250) and not geometry.contains(50, 50)


def test_labels_follow_gtp_coordinates():
    assert BoardGeometry(9).column_labels() == list("ABCDEFGHJ")        # no I
    assert BoardGeometry(9).row_labels() == [str(r) for r in range(9, 0, -1)]   # 9 at the top
    assert BoardGeometry(19).column_labels()[-1] == "T"


def test_star_points():
    assert set(BoardGeometry(9).star_points()) == {(2, 2), (2, 6), (6, 2), (6, 6), (4, 4)}
    assert len(BoardGeometry(19).star_points()) == 9
    assert (3, 9) in BoardGeometry(19).star_points()
    assert BoardGeometry(5).star_points() == []


def test_too_small_a_board_square_is_refused():
    with pytest.raises(ValueError, match="too few"):
        BoardGeometry(19, size=60, margin=20)


# Keys, clicks, buttons.

def test_keys_map_to_commands():
    assert command_for_key("p") is Command.PASS
    assert command_for_key("u") is command_for_key("backspace") is Command.UNDO
    assert command_for_key("r") is Command.RESIGN
    assert command_for_key("n") is Command.NEW_GAME
    assert command_for_key("c") is Command.SWAP_COLOURS
    assert command_for_key("s") is Command.SAVE_SGF
    assert command_for_key("h") is Command.TOGGLE_OVERLAY
    assert command_for_key("o") is Command.TOGGLE_TERRITORY
    assert command_for_key("m") is Command.TOGGLE_SEARCH
    assert command_for_key("escape") is Command.QUIT
    assert command_for_key("x") is None and command_for_key("space") is None


def test_clicks_map_to_points_buttons_or_nothing():
    geometry = BoardGeometry(N, size=400, margin=20)
    buttons = layout_buttons(420, 100, 200)
    assert command_for_click(*geometry.move_to_pixel(CENTRE), geometry, buttons) == (Command.PLAY, CENTRE)
    for button in buttons:
        assert command_for_click(*button.centre, geometry, buttons) == (button.command, None)
    assert command_for_click(5, 5, geometry, buttons) is None           # board margin
    assert command_for_click(520, 20, geometry, buttons) is None        # empty panel


def test_buttons_cover_every_command_without_overlapping():
    buttons = layout_buttons(700, 420, 290)
    assert {b.command for b in buttons} == {command for command, _, _ in BUTTONS}
    assert {Command.PASS, Command.UNDO, Command.RESIGN, Command.NEW_GAME, Command.SWAP_COLOURS,
            Command.SAVE_SGF} <= {b.command for b in buttons}
    for index, first in enumerate(buttons):
        for second in buttons[index + 1:]:
            assert not any(first.contains(*corner) for corner in corners(second.rect))


def corners(rect):
    x, y, w, h = rect
    return [(x, y), (x + w - 1, y), (x, y + h - 1), (x + w - 1, y + h - 1)]


# Area ownership (drawn at the end of a game) agrees with the engine's score.

def test_area_ownership_of_a_small_position():
    board = board_from_ascii("""
        . X O . .
        X X O . .
        . X O O O
        X X O . .
        . X O . .""")
    owner = area_ownership(board)
    assert (owner[:, :2] == 1).all() and (owner[:, 2:] == -1).all()
    assert area_counts(board) == (10, 15)
    assert area_counts(np.zeros((5, 5), np.int8)) == (0, 0)        # an empty board is nobody's
    mixed = board_from_ascii("X . O\n. . .\n. . .")
    assert area_counts(mixed) == (1, 1)                            # the region touches both


def test_area_counts_match_the_engine_score_on_random_positions():
    go = GoBatch(64, 7, komi=7.5, seed=3)
    for _ in range(40):
        go.play(go.random_moves(include_pass=False))
    scores, boards = go.score(), go.board()
    for board, score in zip(boards, scores):
        black, white = area_counts(board)
        assert black - white - 7.5 == score


# A game session against stand-in nets.

class ScriptedNet:
    """Puts nearly all of its policy on the next move of a script (one move per call: in
    policy mode the session evaluates once per net move), then on pass. Value +0.5."""

    def __init__(self, moves=()):
        self.moves = list(moves)

    def __call__(self, planes):
        k, passing = len(planes), planes.shape[1] * planes.shape[2]
        policy = np.full((k, passing + 1), 1e-4, np.float32)
        policy[:, self.moves.pop(0) if self.moves else passing] = 1.0
        return policy, np.full(k, 0.5, np.float32)


class SlowUniformNet:
    """A uniform policy and value 0, taking `delay` seconds per call, counting its calls."""

    def __init__(self, delay=0.0):
        self.delay = delay
        self.calls = 0
        self.threads = set()

    def __call__(self, planes):
        self.calls += 1
        self.threads.add(threading.current_thread().name)
        time.sleep(self.delay)
        k = len(planes)
        return np.full((k, PASS + 1), 1 / (PASS + 1), np.float32), np.zeros(k, np.float32)


def make_session(net, simulations=0, human_colour=BLACK, budget=16, sensible=False):
    config = Config(board_size=N, komi=7.5, history=1, simulations=budget,
                    sensible_moves_only=sensible)
    driver = SearchingGames(config, 1, net, seed=0, num_threads=1)
    return GameSession(driver, simulations=simulations, human_colour=human_colour, chunk=4,
                       net_name="test net")


def test_human_move_then_the_net_answers():
    session = make_session(ScriptedNet([A5]))
    assert session.play(CENTRE)
    assert session.net_to_move
    session.wait()
    view = session.view
    assert view.board[2, 2] == BLACK and view.board[0, 0] == WHITE
    assert view.moves == (CENTRE, A5) and view.last_move == A5
    assert view.to_play == BLACK and "A5" in session.message


def test_illegal_clicks_are_refused_with_a_reason_and_change_nothing():
    session = make_session(ScriptedNet([B5, A4]))
    session.play(CENTRE)
    session.wait()
    before = session.view
    assert not session.play(CENTRE)
    assert "occupied" in session.message
    assert session.view is before
    session.play(E1)
    session.wait()                            # white now holds B5 and A4 around the corner A5
    assert not session.play(A5)
    assert "A5 is illegal" in session.message and "suicide" in session.message
    assert session.view.moves == (CENTRE, B5, E1, A4) and session.view.to_play == BLACK


def test_clicks_while_the_net_thinks_are_refused():
    session = make_session(SlowUniformNet(delay=0.005), simulations=16)
    session.play(CENTRE)
    session.step()
    assert session.thinking
    assert not session.play(A5)
    assert "thinking" in session.message
    session.wait()
    assert not session.thinking and len(session.view.moves) == 2


def test_the_net_thinks_in_a_thread_and_the_caller_stays_responsive():
    net = SlowUniformNet(delay=0.04)          # 16 simulations take at least 0.64 s
    session = make_session(net, simulations=16)
    session.play(CENTRE)
    seen_progress, slowest_step = set(), 0.0
    while True:
        started = time.perf_counter()
        session.step()
        slowest_step = max(slowest_step, time.perf_counter() - started)
        analysis = session.current_analysis()
        if analysis is not None:
            seen_progress.add(analysis.simulations)
        if not session.busy:
            break
        time.sleep(0.005)
    assert slowest_step < 0.15
    assert threading.main_thread().name not in net.threads
    assert len(seen_progress) > 1, "progress should be visible while the search grows"
    assert len(session.view.moves) == 2
    analysis = session.analysis
    assert analysis.simulations == 16 and analysis.visits.sum() >= 16
    assert analysis.move == session.view.moves[-1]


def test_undo_takes_back_the_humans_move_and_the_nets_reply():
    session = make_session(ScriptedNet([A5, B5]))
    empty = session.view.board.copy()
    session.play(CENTRE)
    session.wait()
    after_first = session.view.board.copy()
    session.play(E1)
    session.wait()
    assert session.undo()
    assert session.view.moves == (CENTRE, A5)
    assert (session.view.board == after_first).all() and session.view.to_play == BLACK
    assert session.undo()
    assert (session.view.board == empty).all() and session.view.moves == ()
    assert not session.undo() and "Nothing" in session.message


def test_undo_while_the_net_thinks_takes_back_the_humans_move():
    session = make_session(SlowUniformNet(delay=0.01), simulations=16)
    session.play(CENTRE)
    session.step()
    assert session.thinking
    assert session.undo()
    assert not session.busy and session.view.moves == () and session.view.to_play == BLACK


def test_two_passes_end_the_game_with_the_engines_area_score():
    session = make_session(ScriptedNet([A5]))       # then the net passes
    session.play(CENTRE)
    session.wait()
    session.play(E1)
    session.wait()                                   # the net passes
    assert not session.over and "passes" in session.message
    assert session.human_pass()
    view = session.view
    assert view.over and view.moves == (CENTRE, A5, E1, PASS, PASS)
    assert view.score == session.go.score()[0]
    black, white = view.areas
    assert (black, white) == (2, 1)                   # stones only: every region touches both
    assert view.score == black - white - 7.5
    assert view.result == "W+6.5" and "W+6.5" in session.message
    assert not session.play(A4) and "over" in session.message
    assert session.undo() and not session.over     # undo reopens a finished game


def test_resign_and_take_it_back():
    session = make_session(ScriptedNet([A5]))
    session.play(CENTRE)
    session.wait()
    assert session.resign()
    assert session.over and session.view.result == "W+R"
    session.step()
    assert not session.busy
    assert session.undo() and not session.over and session.view.moves == (CENTRE, A5)


def test_swap_colours_hands_the_move_to_the_net():
    session = make_session(ScriptedNet([CENTRE]))
    assert session.swap_colours()
    assert session.human_colour == WHITE and session.net_to_move
    session.wait()
    assert session.view.board[2, 2] == BLACK and session.view.to_play == WHITE


def test_new_game_as_white_the_net_opens():
    session = make_session(ScriptedNet([A5, B5, CENTRE]), human_colour=WHITE)
    session.wait()
    assert session.view.moves == (A5,)
    session.play(E1)
    session.wait()
    assert session.view.moves == (A5, E1, B5)
    assert session.new_game()
    assert session.view.moves == () and session.view.board.sum() == 0 and not session.over
    session.wait()
    assert session.view.moves == (CENTRE,)


def test_save_sgf_writes_the_game(tmp_path):
    session = make_session(ScriptedNet([A5]))
    session.play(CENTRE)
    session.wait()
    session.play(PASS)
    session.wait()                                  # the net passes: the game is over
    path = session.save_sgf(tmp_path / "games")
    assert path.parent == tmp_path / "games" and path.suffix == ".sgf"
    board_size, komi, moves = sgf_to_moves(path.read_bytes())
    assert (board_size, komi) == (N, 7.5)
    assert moves == [(1, CENTRE), (-1, A5), (1, PASS), (-1, PASS)]
    text = path.read_text()
    assert "PB[human]" in text and "PW[test net]" in text and "RE[W+7.5]" in text
    assert session.save_sgf(tmp_path / "games") != path     # a second save does not overwrite


def test_a_handicap_game_starts_from_the_fixed_points_with_white_first(tmp_path):
    """A cycles the handicap (2, 3, 4, none) and starts a new game: GTP's fixed points
    (tests/test_gtp_process.py holds them to GNU Go's), White (the net) moves first, undo stops
    at the handicap stones, and the SGF sets them up."""
    from games.sgf_records import read_sgf
    n = 9
    c3, g7, c7, g3, e5 = 6 * n + 2, 2 * n + 6, 2 * n + 2, 6 * n + 6, 4 * n + 4
    config = Config(board_size=n, komi=0.5, history=1, simulations=16,
                    sensible_moves_only=False)
    script = ScriptedNet([e5, 0, 1])
    session = GameSession(SearchingGames(config, 1, script, seed=0, num_threads=1),
                          simulations=0, human_colour=BLACK, chunk=4, net_name="test net")
    assert dispatch(session, Command.HANDICAP)
    assert session.handicap == 2 and "handicap 2 (C3 G7), White first" in session.message
    session.wait()                                  # the net, White, opens
    board = session.view.board
    assert board.reshape(-1)[c3] == board.reshape(-1)[g7] == BLACK
    assert board.reshape(-1)[e5] == WHITE and (board == BLACK).sum() == 2
    assert session.view.to_play == BLACK
    assert session.play(80)                         # J1
    session.wait()
    assert session.view.moves == (e5, 80, 0)
    assert session.undo() and session.view.moves == (e5,)
    assert not session.undo() and (session.view.board == BLACK).sum() == 2
    record = read_sgf(session.save_sgf(tmp_path).read_bytes())
    assert sorted(record.nodes[0].add_black) == sorted([c3, g7]) and record.handicap == 2
    assert record.moves == [(WHITE, e5)] and record.komi == 0.5
    session.next_handicap()
    session.wait()
    assert session.handicap == 3 and (session.view.board == BLACK).sum() == 3
    session.next_handicap()
    session.wait()
    black = set(np.flatnonzero(session.view.board.reshape(-1) == BLACK).tolist())
    assert session.handicap == 4 and black == {c3, g7, c7, g3}
    session.next_handicap()
    assert session.handicap == 0 and not session.view.board.any()
    assert session.view.to_play == BLACK
    # No fixed placement below 7x7: refused with a message, the game left as it was.
    small = make_session(ScriptedNet())
    assert not small.new_game(2) and "No handicap of 2 stones on 5x5" in small.message


def test_heatmap_analyses_the_humans_position_policy_and_search():
    session = make_session(SlowUniformNet(), simulations=0)
    session.toggle_overlay()
    session.wait()
    analysis = session.current_analysis()
    assert analysis is not None and analysis.visits is None
    assert analysis.priors.sum() == pytest.approx(1.0) and analysis.black_win_chance == 0.5
    session.toggle_search()
    assert session.simulations == 16 and session.current_analysis() is None
    session.wait()
    analysis = session.current_analysis()
    assert analysis.visits.sum() >= 16 and analysis.heat().max() == 1.0
    assert session.view.moves == ()                 # analysing is not playing


def test_dispatch_applies_key_commands(tmp_path):
    session = make_session(ScriptedNet([A5]))
    assert dispatch(session, Command.PLAY, CENTRE)
    session.wait()
    assert dispatch(session, command_for_key("p"))
    assert session.view.moves[-1] == PASS
    session.wait()
    assert session.over
    assert dispatch(session, command_for_key("s"), save_dir=tmp_path)
    assert list(tmp_path.glob("*.sgf"))
    assert dispatch(session, command_for_key("u"))
    assert not session.over and session.view.moves == (CENTRE, A5)
    assert dispatch(session, command_for_key("r")) and session.view.result == "W+R"
    assert dispatch(session, command_for_key("n")) and session.view.moves == ()
    assert dispatch(session, command_for_key("c")) and session.human_colour == WHITE
    assert not dispatch(session, command_for_key("escape"))
    session.close()


class StoneCountingHeads:
    """Ownership heads that say: each stone's point goes to its owner, empty points to nobody,
    the score is the stone count; from the side to move's view, as a net's heads speak. Read
    from Black's view that is the board itself, an independent reference for the session."""

    def __init__(self):
        self.calls = 0

    def __call__(self, planes):
        self.calls += 1
        own_minus_other = planes[..., 0] - planes[..., 1]
        return own_minus_other, own_minus_other.sum(axis=(1, 2))


def test_territory_is_the_nets_estimate_from_blacks_view_once_per_position():
    heads = StoneCountingHeads()
    config = Config(board_size=N, komi=7.5, history=1, simulations=16)
    driver = SearchingGames(config, 1, ScriptedNet([A5, B5]), seed=0, num_threads=1)
    session = GameSession(driver, simulations=0, chunk=4, ownership=heads)
    assert dispatch(session, command_for_key("o"))
    assert session.show_territory and "territory estimate: on" in session.message
    assert heads.calls == 1 and session.territory.black_lead == 0
    for move in (CENTRE, E1):                        # the net answers A5, then B5
        session.play(move)
        session.wait()
        for _ in range(2):                           # frames: one net call per position
            session.step()
        board = session.view.board
        np.testing.assert_array_equal(session.territory.ownership, board)
        assert session.territory.black_lead == board.sum() == 0
    assert heads.calls == 5                          # empty board, then 2 moves each turn
    session.play(A4)                                 # white to move: the heads' view flips
    session.step()
    assert session.view.to_play == WHITE
    np.testing.assert_array_equal(session.territory.ownership, session.view.board)
    assert session.territory.black_lead == 1
    session.undo()
    session.step()
    np.testing.assert_array_equal(session.territory.ownership, session.view.board)
    assert dispatch(session, command_for_key("o")) and not session.show_territory
    session.close()


def test_territory_of_a_net_without_ownership_head_says_so():
    session = make_session(ScriptedNet())
    assert not session.toggle_territory()
    assert not session.show_territory
    assert session.message.startswith("This net has no ownership head")
