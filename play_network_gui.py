"""Play a trained net in a Pygame window.

    python play_network_gui.py [--run NAME|PATH [--checkpoint K] | --model FILE]
                               [--no-search | --sims S] [--color black|white] [--komi K]
                               [--handicap 2|3|4]
                               [--save-dir DIR]

With neither --run nor --model it plays the shipped 9x9 model, models/9x9.npz.

Click a point to play. Keys (and the buttons beside the board): P pass, U undo, R resign,
N new game, A handicap (a new game with none, 2, 3 or 4 black stones at the fixed points,
White first; --handicap starts with one), C swap colours, S save SGF, H heatmap of the net's policy (or the search's visit
counts) with its value estimate, O the net's territory estimate (a net trained with
--aux-heads true: who it expects to own each point, and its expected score), M search on/off,
Esc quit. The net answers from its policy
alone (--no-search, instant) or after a tree search of S simulations (default: the run's own
`simulations`), thinking in a background thread while the window stays live. Two passes end
the game; it is scored like the engine scores it (area, every stone on the board alive).

The window, drawing and command line live here; what they drive (geometry, commands, the game
session) is in gui/ and is tested without a window (tests/test_gui_session.py; the headless
window in tests/test_gui_window.py).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

import pygame  # noqa: E402
from pygame import gfxdraw  # noqa: E402

from games.search import SearchingGames  # noqa: E402
from gui.controls import command_for_click, command_for_key, dispatch, layout_buttons  # noqa: E402
from gui.geometry import BoardGeometry  # noqa: E402
from gui.net_process import NetProcess, NetProcessError  # noqa: E402
from gui.session import BLACK, WHITE, GameSession, colour_name  # noqa: E402
from kernels import coords  # noqa: E402
from games import players  # noqa: E402
from games.players import SetupError  # noqa: E402
from training import options  # noqa: E402
from training.options import OneLineParser  # noqa: E402
from training.run_directory import ROOT  # noqa: E402

BOARD_PIXELS = 680
PANEL_LEFT = BOARD_PIXELS + 20
PANEL_WIDTH = 290
WINDOW_SIZE = (PANEL_LEFT + PANEL_WIDTH + 20, BOARD_PIXELS)
BUTTONS_TOP = 420
FRAMES_PER_SECOND = 30

WOOD = (218, 172, 98)
GRID = (40, 28, 14)
BLACK_STONE = (22, 22, 22)
WHITE_STONE = (238, 238, 232)
STONE_COLOURS = {BLACK: BLACK_STONE, WHITE: WHITE_STONE}
LAST_MOVE = (215, 40, 40)
PANEL = (36, 38, 44)
TEXT = (232, 232, 232)
DIM_TEXT = (160, 164, 172)
ACCENT = (250, 200, 90)
BUTTON = (64, 68, 78)
BUTTON_EDGE = (110, 116, 130)


def parse_args(argv=None) -> argparse.Namespace:
    parser = OneLineParser(description="Play a trained Go net in a Pygame window (default: the "
                                       "shipped model, models/9x9.npz).")
    options.add_net_source(parser)
    options.add_search(parser)
    options.add_game(parser)
    options.add_seed(parser)
    parser.add_argument("--color", "--colour", dest="colour", choices=("black", "white"),
                        default="black", help="the colour you play (default black)")
    parser.add_argument("--save-dir", type=Path, default=None,
                        help="where S saves games as SGF (default: RUN/gui_games)")
    parser.add_argument("--handicap", type=int, default=0, choices=(0, 2, 3, 4),
                        help="black handicap stones at the fixed points, White first (default "
                             "0; A in the window cycles it)")
    args = parser.parse_args(argv)
    options.check_shared(args, parser)
    if args.sims is not None and args.no_search:
        parser.error("--sims and --no-search: pick one")
    return args


def load_session(args: argparse.Namespace, log=print) -> tuple[GameSession, Path]:
    """The game against the net, and where to save SGF files; SetupError when it cannot be
    played (no such run, no checkpoint yet, another board size)."""
    source = players.net_source(args)
    net_config, run_path = players.read_source(source)
    config = players.game_config(args, net_config)
    # The net runs in a child process: a back end's libraries stay out of the window's
    # process (TensorFlow's once crashed SDL's OpenGL probe, see gui/net_process.py).
    try:
        net = NetProcess(str(run_path), source.checkpoint, inference=source.inference)
    except NetProcessError as error:
        raise SetupError(str(error)) from None
    search_simulations = players.play_simulations(args, config)
    simulations = 0 if args.no_search else search_simulations
    try:
        driver = SearchingGames(config, 1, net, simulations=search_simulations,
                                seed=args.seed, num_threads=1)
        session = GameSession(driver, simulations=simulations,
                              human_colour=BLACK if args.colour == "black" else WHITE,
                              net_name=net.label,
                              ownership=net.ownership if net.has_aux_heads else None)
        if args.handicap and not session.new_game(args.handicap):
            raise SetupError(f"--handicap {args.handicap}: {session.message}")
    except BaseException:
        net.close()
        raise
    session.message = (f"You play {colour_name(session.human_colour)}. Click a point to play; "
                       f"P passes, two passes end the game.")
    if session.handicap_points:
        session.message = (f"Handicap {len(session.handicap_points)}, White first: you play "
                           f"{colour_name(session.human_colour)}. Click a point to play.")
    if args.save_dir is not None:
        save_dir = args.save_dir
    elif run_path.is_dir():   # beside the net, in the run directory
        save_dir = run_path / "gui_games"
    else:   # a model file, maybe inside the checkout's models/: games go to runs/, not there
        save_dir = ROOT / "runs" / "gui_games"
    return session, save_dir


def wood_texture(size: int, seed: int = 7) -> np.ndarray:
    """uint8 (size, size, 3) in pygame's (x, y) order: warm wood with a wavy grain."""
    rng = np.random.default_rng(seed)
    x = np.arange(size, dtype=np.float64)[:, None]
    y = np.arange(size, dtype=np.float64)[None, :]
    wave = y + 7 * np.sin(x / 97.0) + 2 * np.sin(x / 29.0 + 1.3)
    grain = 0.5 * np.sin(wave / 2.3) + 0.5 * np.sin(wave / 7.1 + 0.7)
    shade = 6 * grain + 5 * np.sin(x / 160.0 + 0.4) + rng.normal(0, 1.5, (size, size))
    return np.clip(np.array(WOOD)[None, None, :] + shade[..., None] * np.array([1.0, 0.85, 0.6]),
                   0, 255).astype(np.uint8)


def wrap(text: str, font, width: int) -> list[str]:
    lines, line = [], ""
    for word in text.split():
        candidate = f"{line} {word}".strip()
        if line and font.size(candidate)[0] > width:
            lines.append(line)
            line = word
        else:
            line = candidate
    return lines + ([line] if line else [])


class Renderer:
    """Draws a GameSession: the board at the left, the panel with status and buttons."""

    def __init__(self, board_size: int):
        pygame.font.init()
        self.geometry = BoardGeometry(board_size, size=BOARD_PIXELS)
        self.buttons = layout_buttons(PANEL_LEFT, BUTTONS_TOP, PANEL_WIDTH)
        self.wood = pygame.surfarray.make_surface(wood_texture(BOARD_PIXELS))
        label_size = max(12, min(20, int(self.geometry.cell * 0.45)))
        self.label_font = pygame.font.Font(None, label_size + 6)
        self.title_font = pygame.font.Font(None, 34)
        self.font = pygame.font.Font(None, 24)
        self.small_font = pygame.font.Font(None, 20)
        self.heat_font = pygame.font.Font(None, max(14, int(self.geometry.cell * 0.42)))

    def draw(self, surface, session: GameSession, hover: int | None = None) -> None:
        self._draw_board(surface, session, hover)
        self._draw_panel(surface, session)

    def _draw_board(self, surface, session, hover):
        geometry = self.geometry
        view = session.view
        n = geometry.board_size
        surface.blit(self.wood, geometry.origin)
        first, last = geometry.point_to_pixel(0, 0), geometry.point_to_pixel(n - 1, n - 1)
        for index in range(n):
            x, y = geometry.point_to_pixel(index, index)
            width = 2 if index in (0, n - 1) else 1
            pygame.draw.line(surface, GRID, (first[0], y), (last[0], y), width)
            pygame.draw.line(surface, GRID, (x, first[1]), (x, last[1]), width)
        for point in geometry.star_points():
            x, y = geometry.point_to_pixel(*point)
            gfxdraw.aacircle(surface, x, y, 4, GRID)
            gfxdraw.filled_circle(surface, x, y, 4, GRID)
        self._draw_labels(surface)
        radius = geometry.stone_radius
        if view.ownership is not None:
            for row, col in zip(*np.nonzero((view.board == 0) & (view.ownership != 0))):
                x, y = geometry.point_to_pixel(row, col)
                side = max(4, radius // 2)
                colour = STONE_COLOURS[int(view.ownership[row, col])]
                pygame.draw.rect(surface, colour, (x - side // 2, y - side // 2, side, side))
        for row, col in zip(*np.nonzero(view.board)):
            self._draw_stone(surface, geometry.point_to_pixel(row, col),
                             int(view.board[row, col]), radius)
        last_move = view.last_move
        if last_move is not None and last_move != coords.pass_move(n):
            x, y = geometry.move_to_pixel(last_move)
            marker = max(3, radius // 4)
            gfxdraw.aacircle(surface, x, y, marker, LAST_MOVE)
            gfxdraw.filled_circle(surface, x, y, marker, LAST_MOVE)
        if session.show_territory and session.territory is not None and not view.over:
            self._draw_territory(surface, session.territory, view.board)
        if session.show_overlay and not view.over:
            self._draw_heatmap(surface, session)
        if (hover is not None and not view.over and not session.net_to_move
                and view.legal[hover] and hover != coords.pass_move(n)):
            ghost = pygame.Surface((2 * radius + 2, 2 * radius + 2), pygame.SRCALPHA)
            gfxdraw.filled_circle(ghost, radius + 1, radius + 1, radius,
                                  (*STONE_COLOURS[session.human_colour], 110))
            x, y = geometry.move_to_pixel(hover)
            surface.blit(ghost, (x - radius - 1, y - radius - 1))

    def _draw_labels(self, surface):
        geometry = self.geometry
        x0, y0 = geometry.origin
        for col, label in enumerate(geometry.column_labels()):
            x, _ = geometry.point_to_pixel(0, col)
            for y in (y0 + geometry.margin // 2, y0 + geometry.size - geometry.margin // 2):
                self._blit_centred(surface, self.label_font, label, (x, y), GRID)
        for row, label in enumerate(geometry.row_labels()):
            _, y = geometry.point_to_pixel(row, 0)
            for x in (x0 + geometry.margin // 2, x0 + geometry.size - geometry.margin // 2):
                self._blit_centred(surface, self.label_font, label, (x, y), GRID)

    def _draw_stone(self, surface, centre, colour, radius):
        x, y = centre
        gfxdraw.filled_circle(surface, x + 2, y + 2, radius, (120, 88, 44))   # shadow
        gfxdraw.filled_circle(surface, x, y, radius, STONE_COLOURS[colour])
        if colour == BLACK:
            gfxdraw.filled_circle(surface, x - radius // 3, y - radius // 3, max(1, radius // 4),
                                  (70, 70, 70))
            gfxdraw.aacircle(surface, x, y, radius, BLACK_STONE)
        else:
            gfxdraw.aacircle(surface, x, y, radius, (90, 90, 90))

    def _draw_territory(self, surface, territory, board):
        """A translucent square of the expected owner's colour on each point, its side growing
        with the net's certainty; on a stone only when the net expects the other colour to own
        its point (a stone it thinks is lost)."""
        geometry = self.geometry
        layer = pygame.Surface((geometry.size, geometry.size), pygame.SRCALPHA)
        x0, y0 = geometry.origin
        largest = geometry.cell * 0.6
        for (row, col), owner in np.ndenumerate(territory.ownership):
            stone = int(board[row, col])
            if abs(owner) < 0.05 or stone * owner > 0:
                continue
            side = max(2, int(largest * abs(owner)))
            x, y = geometry.point_to_pixel(row, col)
            colour = (*STONE_COLOURS[BLACK if owner > 0 else WHITE], 190)
            layer.fill(colour, (x - x0 - side // 2, y - y0 - side // 2, side, side))
        surface.blit(layer, geometry.origin)

    def _draw_heatmap(self, surface, session):
        geometry = self.geometry
        analysis = session.current_analysis()
        if analysis is None:
            return
        heat = analysis.heat()
        radius = geometry.stone_radius
        layer = pygame.Surface((geometry.size, geometry.size), pygame.SRCALPHA)
        x0, y0 = geometry.origin
        for move in np.flatnonzero(heat[:-1] > 0.02):
            x, y = geometry.move_to_pixel(int(move))
            weight = float(heat[move])
            colour = (int(60 + 195 * weight), int(120 - 80 * weight), int(255 - 215 * weight),
                      int(70 + 150 * weight))
            gfxdraw.filled_circle(layer, x - x0, y - y0, int(radius * (0.45 + 0.5 * weight)), colour)
        surface.blit(layer, geometry.origin)
        for move in np.flatnonzero(heat[:-1] > 0.15):
            label = (str(int(analysis.visits[move])) if analysis.visits is not None
                     else f"{100 * analysis.priors[move]:.0f}")
            self._blit_centred(surface, self.heat_font, label,
                               geometry.move_to_pixel(int(move)), (255, 255, 255))

    def _draw_panel(self, surface, session):
        view = session.view
        pygame.draw.rect(surface, PANEL, (BOARD_PIXELS, 0, WINDOW_SIZE[0] - BOARD_PIXELS,
                                          WINDOW_SIZE[1]))
        left, y = PANEL_LEFT, 18
        y = self._text(surface, self.title_font, "Go against the net", (left, y), ACCENT) + 6
        y = self._wrapped(surface, self.small_font, f"Net: {session.net_name}", y, DIM_TEXT)
        y = self._wrapped(surface, self.small_font, f"Plays by {session.mode_text()}", y,
                          DIM_TEXT)
        handicap = (f", handicap {len(session.handicap_points)}" if session.handicap_points
                    else "")
        y = self._wrapped(surface, self.small_font, f"Komi {session.go.komi:g}{handicap}", y,
                          DIM_TEXT) + 10
        you = f"You: {colour_name(session.human_colour)}    Net: {colour_name(session.net_colour)}"
        y = self._text(surface, self.font, you, (left, y), TEXT) + 4
        if view.over:
            status = f"Game over: {view.result}"
        else:
            status = f"Move {len(view.moves) + 1}: {colour_name(view.to_play)} to play"
        y = self._text(surface, self.font, status, (left, y), TEXT) + 4
        black, white = view.captures
        y = self._text(surface, self.font, f"Captured by Black {black}, by White {white}",
                       (left, y), TEXT) + 4
        if view.score is not None:
            black_area, white_area = view.areas
            y = self._wrapped(surface, self.font, f"Area: Black {black_area}, White {white_area} "
                              f"+ {session.go.komi:g} komi = {view.result}", y, ACCENT) + 4
        y += 6
        analysis = session.current_analysis()
        if session.thinking:
            progress = (f" {analysis.simulations}/{analysis.target_simulations} simulations"
                        if analysis is not None and analysis.target_simulations else "")
            y = self._text(surface, self.font, f"The net is thinking...{progress}",
                           (left, y), ACCENT) + 4
        elif not view.over:
            y = self._text(surface, self.font, "Your move.", (left, y), ACCENT) + 4
        if session.show_overlay:
            shown = analysis or session.analysis
            if shown is not None:
                chance = shown.black_win_chance
                y = self._text(surface, self.font, f"Net's value: Black {chance:.0%}, "
                               f"White {1 - chance:.0%}", (left, y), TEXT) + 4
                if shown.visits is not None and shown.visits.sum():
                    pass_text = f"pass {int(shown.visits[-1])} visits"
                else:
                    pass_text = f"pass {shown.priors[-1]:.0%}"
                kind = "visits" if shown.visits is not None else "policy"
                y = self._text(surface, self.small_font, f"Heatmap: {kind}; {pass_text}",
                               (left, y), DIM_TEXT) + 4
                y = self._draw_candidates(surface, shown, view.board.shape[0], left, y)
        if session.show_territory and session.territory is not None and not view.over:
            lead = session.territory.black_lead
            leader = "Black" if lead >= 0 else "White"
            y = self._wrapped(surface, self.small_font, f"Territory (net): {leader} ahead by "
                              f"{abs(lead):.1f} points, komi included", y, TEXT)
        if session.message:
            y += 4
            self._wrapped(surface, self.font, session.message, y, (255, 236, 180))
        for button in self.buttons:
            rect = pygame.Rect(button.rect)
            pygame.draw.rect(surface, BUTTON, rect, border_radius=6)
            pygame.draw.rect(surface, BUTTON_EDGE, rect, width=1, border_radius=6)
            self._blit_centred(surface, self.small_font, f"{button.label} ({button.key})",
                               button.centre, TEXT)
        hint = "Click a point to play. H: heatmap, O: territory, M: search on/off, Esc: quit."
        below_buttons = max(top + height for _, top, _, height in
                            (button.rect for button in self.buttons)) + 16
        self._wrapped(surface, self.small_font, hint, below_buttons, DIM_TEXT)

    def _draw_candidates(self, surface, shown, board_size: int, left: int, y: int) -> int:
        """The search's best moves with their win rates for the side to move, and the
        principal variation of the best (games.analysis)."""
        if not shown.candidates:
            return y
        best = ", ".join(f"{coords.to_gtp(c.action, board_size)} {c.winrate:.0%} ({c.visits})"
                         for c in shown.candidates)
        y = self._wrapped(surface, self.small_font, f"Best: {best}", y, TEXT)
        line = " ".join(coords.to_gtp(a, board_size) for a in shown.candidates[0].pv[:8])
        return self._wrapped(surface, self.small_font, f"Line: {line}", y, DIM_TEXT) + 4

    def _text(self, surface, font, text, position, colour) -> int:
        rendered = font.render(text, True, colour)
        surface.blit(rendered, position)
        return position[1] + rendered.get_height()

    def _wrapped(self, surface, font, text, y, colour) -> int:
        for line in wrap(text, font, PANEL_WIDTH):
            y = self._text(surface, font, line, (PANEL_LEFT, y), colour) + 2
        return y

    @staticmethod
    def _blit_centred(surface, font, text, centre, colour):
        rendered = font.render(text, True, colour)
        surface.blit(rendered, rendered.get_rect(center=centre))


class App:
    """The window's event loop around a GameSession."""

    def __init__(self, session: GameSession, save_dir: Path | None = None):
        open_display()
        pygame.font.init()
        try:
            self.screen = pygame.display.set_mode(WINDOW_SIZE)
        except pygame.error as error:
            raise SetupError(f"cannot open a window: {error}") from None
        pygame.display.set_caption(f"Go against {session.net_name}")
        self.session = session
        self.save_dir = save_dir
        self.renderer = Renderer(session.board_size)
        self.hover: int | None = None
        self.clock = pygame.time.Clock()

    def handle(self, event) -> bool:
        """Apply one pygame event; False when the window should close."""
        if event.type == pygame.QUIT:
            return False
        if event.type == pygame.MOUSEMOTION:
            self.hover = self.renderer.geometry.pixel_to_move(*event.pos)
        elif event.type == pygame.MOUSEBUTTONDOWN and event.button == 1:
            found = command_for_click(*event.pos, self.renderer.geometry, self.renderer.buttons)
            if found is not None:
                return dispatch(self.session, *found, save_dir=self.save_dir)
        elif event.type == pygame.KEYDOWN:
            command = command_for_key(pygame.key.name(event.key))
            if command is not None:
                return dispatch(self.session, command, save_dir=self.save_dir)
        return True

    def frame(self) -> bool:
        """One frame: events, the net's progress, drawing. False when the window should close."""
        running = all([self.handle(event) for event in pygame.event.get()])
        self.session.step()
        self.draw()
        pygame.display.flip()
        return running

    def draw(self):
        self.renderer.draw(self.screen, self.session, self.hover)
        return self.screen

    def run(self) -> None:
        try:
            while self.frame():
                self.clock.tick(FRAMES_PER_SECOND)
        finally:
            self.close()

    def close(self) -> None:
        try:
            self.session.close()
        finally:
            close_net = getattr(self.session.driver.evaluator, "close", None)
            if close_net is not None:
                close_net()
            pygame.quit()


HEADLESS_DRIVERS = ("offscreen", "dummy")    # SDL's drivers that show no window


@contextlib.contextmanager
def held_back_stderr(held: list):
    """What native code writes to file descriptor 2 inside the block is appended to `held`
    (as text) instead of showing."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as file:
        os.dup2(file.fileno(), 2)
        try:
            yield held
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            file.seek(0)
            held.append(file.read().decode(errors="replace"))


def open_display() -> None:
    """Start SDL's video; SetupError when there is no display to show the window on.

    SDL falls back to its invisible `offscreen` driver when it finds no display, and the GUI
    would then play to nobody; that driver (or `dummy`) is used only when SDL_VIDEODRIVER
    asks for it (as the headless tests do)."""
    requested = os.environ.get("SDL_VIDEODRIVER", "")
    if sys.platform.startswith("linux") and not requested and not (
            os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        raise SetupError("cannot open a window: no display (DISPLAY is not set). Run it on a "
                         "desktop, or play through gtp_engine.py in a GTP GUI.")
    probe_messages = []              # e.g. libwayland's complaints while SDL probes drivers
    try:
        with held_back_stderr(probe_messages):
            pygame.display.init()
            driver = pygame.display.get_driver()
    except pygame.error as error:
        raise SetupError(f"cannot open a window: {error}") from None
    if driver in HEADLESS_DRIVERS and driver not in requested.lower():
        pygame.display.quit()
        where = " or ".join(f"{name}={os.environ[name]!r}" for name in
                            ("DISPLAY", "WAYLAND_DISPLAY") if os.environ.get(name))
        raise SetupError(f"cannot open a window: no display answers at {where}. Run it on a "
                         f"desktop, or play through gtp_engine.py in a GTP GUI.")
    sys.stderr.write("".join(probe_messages))


def main(argv=None) -> int:
    args = parse_args(argv)
    error_line = "play_network_gui: {}"
    try:
        open_display()          # before loading the net: no display, no waiting
        session, save_dir = load_session(args, log=lambda text: print(text, file=sys.stderr))
        try:
            app = App(session, save_dir)
        except BaseException:
            session.close()
            session.driver.evaluator.close()
            raise
    except SetupError as error:
        print(error_line.format(error), file=sys.stderr)
        pygame.quit()
        return 2
    try:
        app.run()
    except KeyboardInterrupt:
        return 130
    except RuntimeError as error:          # the net's thread failed; its cause says why
        cause = error.__cause__
        if not isinstance(cause, NetProcessError):
            raise
        print(error_line.format(cause), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.exit(main())
