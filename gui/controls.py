"""Clicks and keys turned into commands, and commands into game actions: plain functions of
plain values (pixel positions, pygame key names), so the tests need no window.

    P pass   U / Backspace undo   R resign   N new game   A handicap (none, 2, 3, 4 stones)
    C swap colours   S save SGF
    H heatmap (policy or visits) and value   O the net's territory estimate   M search on/off
    Esc / Q quit
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from gui.geometry import BoardGeometry


class Command(Enum):
    PLAY = "play"
    PASS = "pass"
    UNDO = "undo"
    RESIGN = "resign"
    NEW_GAME = "new game"
    HANDICAP = "handicap"
    SWAP_COLOURS = "swap colours"
    SAVE_SGF = "save SGF"
    TOGGLE_OVERLAY = "heatmap"
    TOGGLE_TERRITORY = "territory"
    TOGGLE_SEARCH = "search on/off"
    QUIT = "quit"


KEY_COMMANDS = {
    "p": Command.PASS,
    "u": Command.UNDO,
    "backspace": Command.UNDO,
    "r": Command.RESIGN,
    "n": Command.NEW_GAME,
    "a": Command.HANDICAP,
    "c": Command.SWAP_COLOURS,
    "s": Command.SAVE_SGF,
    "h": Command.TOGGLE_OVERLAY,
    "o": Command.TOGGLE_TERRITORY,
    "m": Command.TOGGLE_SEARCH,
    "escape": Command.QUIT,
    "q": Command.QUIT,
}

# (command, label, key shown on the button), in the panel's order.
BUTTONS = (
    (Command.PASS, "Pass", "P"),
    (Command.UNDO, "Undo", "U"),
    (Command.RESIGN, "Resign", "R"),
    (Command.NEW_GAME, "New game", "N"),
    (Command.HANDICAP, "Handicap", "A"),
    (Command.SWAP_COLOURS, "Swap colours", "C"),
    (Command.SAVE_SGF, "Save SGF", "S"),
    (Command.TOGGLE_OVERLAY, "Heatmap", "H"),
    (Command.TOGGLE_TERRITORY, "Territory", "O"),
    (Command.TOGGLE_SEARCH, "Search on/off", "M"),
)


@dataclass(frozen=True)
class Button:
    command: Command
    label: str
    key: str
    rect: tuple[int, int, int, int]    # x, y, width, height

    def contains(self, x: float, y: float) -> bool:
        left, top, width, height = self.rect
        return left <= x < left + width and top <= y < top + height

    @property
    def centre(self) -> tuple[int, int]:
        left, top, width, height = self.rect
        return left + width // 2, top + height // 2


def layout_buttons(left: int, top: int, width: int, columns: int = 2, height: int = 34,
                   gap: int = 8) -> list[Button]:
    """The panel's buttons in a grid of `columns` starting at (left, top), `width` wide."""
    button_width = (width - gap * (columns - 1)) // columns
    buttons = []
    for index, (command, label, key) in enumerate(BUTTONS):
        row, column = divmod(index, columns)
        rect = (left + column * (button_width + gap), top + row * (height + gap),
                button_width, height)
        buttons.append(Button(command, label, key, rect))
    return buttons


def command_for_key(key_name: str) -> Command | None:
    """The command of a key, by its pygame name (`pygame.key.name(event.key)`)."""
    return KEY_COMMANDS.get(key_name.lower())


def command_for_click(x: float, y: float, geometry: BoardGeometry,
                      buttons: list[Button]) -> tuple[Command, int | None] | None:
    """(PLAY, move) for a click on a point, (command, None) for a button, None elsewhere
    (the board's margin included)."""
    move = geometry.pixel_to_move(x, y)
    if move is not None:
        return Command.PLAY, move
    for button in buttons:
        if button.contains(x, y):
            return button.command, None
    return None


def dispatch(session, command: Command, move: int | None = None,
             save_dir: Path | None = None) -> bool:
    """Apply a command to a `GameSession`. Returns False for QUIT, True otherwise."""
    if command is Command.QUIT:
        return False
    if command is Command.PLAY:
        session.play(move)
    elif command is Command.PASS:
        session.human_pass()
    elif command is Command.UNDO:
        session.undo()
    elif command is Command.RESIGN:
        session.resign()
    elif command is Command.NEW_GAME:
        session.new_game()
    elif command is Command.HANDICAP:
        session.next_handicap()
    elif command is Command.SWAP_COLOURS:
        session.swap_colours()
    elif command is Command.SAVE_SGF:
        try:
            session.save_sgf(save_dir if save_dir is not None else Path.cwd())
        except OSError as error:
            session.message = f"Could not save the SGF: {error}"
    elif command is Command.TOGGLE_OVERLAY:
        session.toggle_overlay()
    elif command is Command.TOGGLE_TERRITORY:
        session.toggle_territory()
    elif command is Command.TOGGLE_SEARCH:
        session.toggle_search()
    return True
