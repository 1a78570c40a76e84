"""SGF (FF[4]) game records through sgfmill: writing games, reading them back.

Conventions (coordinates through kernels/coords.py, as everywhere):
- A pass is written as an empty value, `B[]` / `W[]`, as FF[4] says; sgfmill would write the
  FF[3] form `tt`, so pass nodes are set raw. Reading accepts both.
- Text values (comments, names) go through sgfmill, which escapes `]` and `\\`.
- Only the main line is read; setup properties (AB, AW, AE, PL) are kept per node, so a
  handicap or an edited position survives a round trip.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from sgfmill import sgf

from kernels import coords


@dataclass
class SgfNode:
    """One node of the main line. `colour` +1 black / -1 white with `move` a flat index
    (pass = N*N), or colour 0 for a node without a move."""
    colour: int = 0
    move: int = -1
    add_black: list[int] = field(default_factory=list)
    add_white: list[int] = field(default_factory=list)
    add_empty: list[int] = field(default_factory=list)
    to_play: int = 0           # PL: +1 / -1, 0 when absent
    comment: str = ""

    @property
    def has_setup(self) -> bool:
        return bool(self.add_black or self.add_white or self.add_empty or self.to_play)


@dataclass
class SgfRecord:
    """A game's main line; nodes[0] is the root (setup, comment, rarely a move)."""
    board_size: int
    komi: float | None = None  # None: no KM property
    nodes: list[SgfNode] = field(default_factory=lambda: [SgfNode()])
    handicap: int = 0
    result: str = ""
    black: str = ""
    white: str = ""
    rules: str = "Chinese"     # area scoring; positional superko is not implied

    @property
    def moves(self) -> list[tuple[int, int]]:
        """[(colour +1/-1, flat move), ...] of the main line."""
        return [(node.colour, node.move) for node in self.nodes if node.colour]


def result_text(result: float, score: float, resigned: bool) -> str:
    """SGF RE value: B+3.5, W+R, 0 (draw)."""
    if result == 0:
        return "0"
    winner = "B" if result > 0 else "W"
    if resigned or math.isnan(score):
        return f"{winner}+R"
    return f"{winner}+{abs(score):g}"


def write_sgf(record: SgfRecord) -> bytes:
    size = coords.check_board_size(record.board_size)
    game = sgf.Sgf_game(size=size)
    root = game.get_root()
    if record.komi is not None:
        root.set("KM", float(record.komi))
    if record.rules:
        root.set("RU", record.rules)
    if record.handicap:
        root.set("HA", int(record.handicap))
    if record.result:
        root.set("RE", record.result)
    if record.black:
        root.set("PB", record.black)
    if record.white:
        root.set("PW", record.white)
    node = root
    for index, item in enumerate(record.nodes or [SgfNode()]):
        # new_child of the last node, not extend_main_sequence, which walks the whole main line
        # for every node (a 20,000-move game took 30 s to write).
        node = root if index == 0 else node.new_child()
        _write_node(node, item, size)
    return game.serialise()


def _write_node(node, item: SgfNode, size: int) -> None:
    points = lambda moves: {coords.to_sgfmill(move, size) for move in moves}  # noqa: E731
    if item.add_black or item.add_white or item.add_empty:
        node.set_setup_stones(points(item.add_black), points(item.add_white),
                              points(item.add_empty))
    if item.to_play:
        node.set("PL", "b" if item.to_play == 1 else "w")
    if item.colour:
        colour = "b" if item.colour == 1 else "w"
        if item.move == coords.pass_move(size):
            node.set_raw(colour.upper(), b"")   # FF[4] pass; sgfmill would write "tt"
        else:
            node.set_move(colour, coords.to_sgfmill(item.move, size))
    if item.comment:
        node.set("C", item.comment)


def read_sgf(data: bytes) -> SgfRecord:
    """The main line of the first game in `data`; ValueError if it is not a readable Go game
    of size 2..19."""
    game = sgf.Sgf_game.from_bytes(data)
    size = coords.check_board_size(game.get_size())
    root = game.get_root()
    text = lambda node, name: node.get(name) if node.has_property(name) else ""  # noqa: E731
    record = SgfRecord(board_size=size, nodes=[],
                       komi=game.get_komi() if root.has_property("KM") else None,
                       handicap=game.get_handicap() or 0, result=text(root, "RE"),
                       black=text(root, "PB"), white=text(root, "PW"), rules=text(root, "RU"))
    flat = lambda points: sorted(coords.from_sgfmill(p, size) for p in points)  # noqa: E731
    for node in game.get_main_sequence():
        colour, point = node.get_move()
        black, white, empty = node.get_setup_stones()
        to_play = node.get("PL") if node.has_property("PL") else None
        record.nodes.append(SgfNode(
            colour={"b": 1, "w": -1}.get(colour, 0),
            move=coords.from_sgfmill(point, size) if colour else -1,
            add_black=flat(black), add_white=flat(white), add_empty=flat(empty),
            to_play={"b": 1, "w": -1}.get(to_play, 0), comment=text(node, "C")))
    return record


def game_to_sgf(board_size: int, komi: float, moves: list[int], result: str,
                black: str = "", white: str = "", comment: str = "",
                handicap: tuple = ()) -> bytes:
    """An SGF record of a game from the empty board, Black first, or from `handicap` black
    stones (flat indices, set up in the root with HA and PL[W]), White first; moves are flat
    indices, pass = N*N, the colours alternating."""
    nodes = [SgfNode(comment=comment, add_black=[int(point) for point in handicap],
                     to_play=-1 if handicap else 0)]
    colour = -1 if handicap else 1
    for move in moves:
        nodes.append(SgfNode(colour=colour, move=int(move)))
        colour = -colour
    return write_sgf(SgfRecord(board_size=board_size, komi=komi, nodes=nodes, result=result,
                               black=black, white=white, handicap=len(handicap)))


def sgf_to_moves(data: bytes) -> tuple[int, float, list[tuple[int, int]]]:
    """(board_size, komi, [(colour +1/-1, flat move), ...]) of an SGF game's main line."""
    record = read_sgf(data)
    return record.board_size, record.komi or 0.0, record.moves
