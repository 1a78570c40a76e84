"""SGF (FF[4]) game records through sgfmill: writing finished games, reading them back."""
from __future__ import annotations

import math

from sgfmill import sgf

from kernels import coords


def result_text(result: float, score: float, resigned: bool) -> str:
    """SGF RE value: B+3.5, W+R, 0 (draw)."""
    if result == 0:
        return "0"
    winner = "B" if result > 0 else "W"
    if resigned or math.isnan(score):
        return f"{winner}+R"
    return f"{winner}+{abs(score):g}"


def game_to_sgf(board_size: int, komi: float, moves: list[int], result: str,
                black: str = "", white: str = "", comment: str = "",
                first_player: int = 1) -> bytes:
    """An SGF record of a game from the empty board; moves are flat indices, pass = N*N,
    alternating from `first_player` (+1 black)."""
    game = sgf.Sgf_game(size=board_size)
    root = game.get_root()
    root.set("KM", float(komi))
    root.set("RU", "Chinese")  # area scoring, positional superko is not implied
    root.set("RE", result)
    if black:
        root.set("PB", black)
    if white:
        root.set("PW", white)
    if comment:
        root.set("C", comment)
    colour = "b" if first_player == 1 else "w"
    for move in moves:
        node = game.extend_main_sequence()
        node.set_move(colour, coords.to_sgfmill(int(move), board_size))
        colour = "w" if colour == "b" else "b"
    return game.serialise()


def sgf_to_moves(data: bytes) -> tuple[int, float, list[tuple[int, int]]]:
    """(board_size, komi, [(colour +1/-1, flat move), ...]) of an SGF game's main line."""
    game = sgf.Sgf_game.from_bytes(data)
    board_size = game.get_size()
    moves = []
    for node in game.get_main_sequence():
        colour, point = node.get_move()
        if colour is None:
            continue
        moves.append((1 if colour == "b" else -1, coords.from_sgfmill(point, board_size)))
    return board_size, game.get_komi(), moves
