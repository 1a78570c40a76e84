"""Training positions from a directory of SGF game records (what `train_sgf.py` reads).

    corpus = read_sgf_directory("games/", config)   # usable games, skipped files with reasons
    corpus.games[i]                                 # training.supervised.Positions of game i

A game record is used from its setup (handicap stones, AB/AW in the first node, and who is to
play: PL, else the first move's colour) through every move, passes included, under the run's
rules (komi, simple ko or superko, suicide forbidden); moves after two passes resume play
from the stones as a fresh position (no ko ban carried over). The value target is the recorded
winner (RE) from the side to move's view; a game recorded with another komi is used when its
margin makes the same player win under the run's komi (a resignation always does) and
skipped otherwise. Files that cannot be used are counted and skipped, each with its reason
(the text before the first colon names the kind): unreadable, board size, no usable result,
komi, setup (stones added after the first node, or a setup group without liberties), out of
turn (two moves by one colour: our engine alternates), illegal move, no moves.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from games.sgf_records import SgfRecord, read_sgf
from kernels import GoBatch
from training.config import Config
from training.supervised import Positions


class UnusableGame(ValueError):
    """A game record that cannot give training positions; the message is the reason."""


@dataclass
class Corpus:
    games: list[Positions] = field(default_factory=list)
    names: list[str] = field(default_factory=list)                 # file of each usable game
    skipped: list[tuple[str, str]] = field(default_factory=list)   # (file, reason)
    files: int = 0
    handicap_games: int = 0

    @property
    def positions(self) -> int:
        return sum(len(game) for game in self.games)

    def skipped_by_reason(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for _, reason in self.skipped:
            kind = reason.split(":")[0]
            counts[kind] = counts.get(kind, 0) + 1
        return counts


def parse_result(text: str) -> tuple[int, float | None]:
    """(winner +1 black / -1 white / 0 draw, black's margin, None when won by resignation,
    time or forfeit) of an SGF RE value; UnusableGame when there is no decided result."""
    value = text.strip()
    if value in ("0", "Draw", "draw", "Jigo", "jigo"):
        return 0, 0.0
    if len(value) >= 3 and value[0] in "BWbw" and value[1] == "+":
        winner = 1 if value[0] in "Bb" else -1
        margin = value[2:]
        if margin in ("R", "Resign", "T", "Time", "F", "Forfeit"):
            return winner, None
        try:
            points = float(margin)
        except ValueError:
            raise UnusableGame(f"no usable result: RE[{text}]") from None
        return winner, winner * points
    raise UnusableGame(f"no usable result: RE[{text}]" if value else "no usable result: no RE")


def record_positions(record: SgfRecord, config: Config) -> Positions:
    """The positions of one game record under `config`'s rules (see the module docstring)."""
    n = config.board_size
    if record.board_size != n:
        raise UnusableGame(f"board size: {record.board_size}x{record.board_size}, the run "
                           f"plays {n}x{n}")
    winner, black_margin = parse_result(record.result)
    komi = 0.0 if record.komi is None else float(record.komi)
    if black_margin is not None and komi != config.komi:
        # Black's margin under the run's komi: white's compensation changes by the difference.
        ours = black_margin + komi - config.komi
        if np.sign(ours) != winner:
            raise UnusableGame(f"komi: {record.result} at komi {komi:g} is not the same result "
                               f"at the run's komi {config.komi:g}")
    root, rest = record.nodes[0], record.nodes[1:]
    if any(node.has_setup for node in rest):
        raise UnusableGame("setup: stones added or removed after the first node")
    moves = record.moves
    if not moves:
        raise UnusableGame("no moves")
    stones = np.zeros(n * n, np.int8)
    stones[root.add_black] = 1
    stones[root.add_white] = -1
    to_play = root.to_play or moves[0][0]
    go = GoBatch(1, n, komi=config.komi, superko=config.superko, max_moves=len(moves) + 1,
                 history_length=config.history, extra_features=config.extra_features,
                 komi_input=config.komi_input)
    try:
        go.set_board(stones.reshape(1, n, n), np.array([to_play]))
    except ValueError as error:
        raise UnusableGame(f"setup: {error}") from None
    count, actions = len(moves), n * n + 1
    # 0/1 planes as uint8; a net that reads the komi gets its plane (the run's komi) too.
    planes = np.empty((count, n, n, config.input_planes),
                      np.float32 if config.komi_input else np.uint8)
    legal = np.empty((count, actions), bool)
    value = np.empty(count, np.float32)
    played = np.empty(count, np.int64)
    for index, (colour, move) in enumerate(moves):
        if go.is_over()[0]:
            # Moves after two passes: SGF play goes on (our matches record GNU Go's cleanup
            # phase so). Play resumes from the stones with the side to move as a fresh
            # position, as games/match_runner.py's cleanup phase does.
            go.set_board(go.board(), go.to_play())
        if colour != int(go.to_play()[0]):
            raise UnusableGame(f"out of turn: move {index + 1} is "
                               f"{'black' if colour > 0 else 'white'}'s, the other side is to play")
        planes[index] = go.features(config.history)[0]
        legal[index] = go.legal_moves()[0]
        value[index] = winner * colour
        played[index] = move
        try:
            go.play(np.array([move]))
        except ValueError as error:
            raise UnusableGame(f"illegal move: move {index + 1}: {error}") from None
    policy = np.zeros((count, actions), np.float32)
    policy[np.arange(count), played] = 1.0
    return Positions(planes, policy, value, legal, played)


def read_sgf_directory(directory: str | Path, config: Config) -> Corpus:
    """Every *.sgf file under `directory` (recursively, in sorted order), read as one game."""
    root = Path(directory)
    if not root.is_dir():
        raise FileNotFoundError(f"there is no directory {root}")
    corpus = Corpus()
    for path in sorted(root.rglob("*.sgf")):
        corpus.files += 1
        name = str(path.relative_to(root))
        try:
            record = read_sgf(path.read_bytes())
        except (ValueError, OSError) as error:
            corpus.skipped.append((name, f"unreadable: {error}"))
            continue
        try:
            positions = record_positions(record, config)
        except UnusableGame as error:
            corpus.skipped.append((name, str(error)))
            continue
        corpus.games.append(positions)
        corpus.names.append(name)
        corpus.handicap_games += bool(record.nodes[0].add_black)
    return corpus
