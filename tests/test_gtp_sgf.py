"""SGF records (games/sgf_records.py) and the GTP engine's printsgf and loadsgf (gtp/files.py).

A record written and read back is the same record (passes, captures, setup stones, escaped
comments), and replaying it through the rules gives the captures and passes it holds; printsgf
and loadsgf round-trip a game through a `Transcript` (gtp_sessions.py) of the tiny run's net
(`loaded`, conftest.py), read only regular files of bounded size, write only regular files
(atomically), and handle a 20,000-move game in linear time.
"""
from __future__ import annotations

import os
import queue
import threading
import time

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from games import sgf_records  # noqa: E402
from gtp_sessions import N, PASS, Transcript  # noqa: E402
from kernels import GoBatch, coords  # noqa: E402


# ---------------------------------------------------------------- SGF

def test_sgf_round_trip_with_passes_captures_setup_and_escaped_comments():
    nodes = [sgf_records.SgfNode(add_black=[0, 6], add_white=[24], to_play=-1,
                                 comment="root: a ] bracket and a \\ backslash")]
    # White B5 (1) between black A5 (0) and B4 (6) is captured by black C5 (2).
    moves = [(-1, 1), (1, 2), (-1, PASS), (1, 12), (-1, PASS), (1, PASS)]
    for index, (colour, move) in enumerate(moves):
        nodes.append(sgf_records.SgfNode(colour=colour, move=move,
                                         comment=f"move {index + 1}: ]\\[" if index % 2 else ""))
    record = sgf_records.SgfRecord(board_size=N, komi=6.5, nodes=nodes, handicap=2,
                                   result="B+R", black="us", white="them")
    data = sgf_records.write_sgf(record)
    text = data.decode()
    assert "W[]" in text and "B[]" in text and "tt" not in text, "FF[4] passes are empty values"
    assert "\\]" in text and "\\\\" in text
    back = sgf_records.read_sgf(data)
    assert back == record
    # The training loop's writer uses the same pass encoding, and readers take both.
    data = sgf_records.game_to_sgf(N, 7.5, [12, PASS, 13, PASS, PASS], "B+1", comment="x]\\y")
    assert b"tt" not in data and b"W[]" in data
    assert sgf_records.sgf_to_moves(data) == (N, 7.5, [(1, 12), (-1, PASS), (1, 13),
                                                       (-1, PASS), (1, PASS)])
    assert sgf_records.read_sgf(data).nodes[0].comment == "x]\\y"
    # Replaying the record through the rules: the capture happens, both passes are passes.
    back = sgf_records.read_sgf(sgf_records.write_sgf(record))
    game = GoBatch(1, N, komi=6.5)
    root = back.nodes[0]
    stones = np.zeros(N * N, np.int8)
    stones[root.add_black], stones[root.add_white] = 1, -1
    game.set_board(stones.reshape(1, N, N), np.array([root.to_play], np.int8))
    for colour, move in back.moves:
        assert int(game.to_play()[0]) == colour
        game.play(np.array([move]))
    assert game.board()[0].ravel()[1] == 0 and game.captures()[0, 0] == 1
    assert game.is_over()[0]
    old_style = b"(;FF[3]GM[1]SZ[5]KM[0.5];B[cc];W[tt];B[])"
    assert sgf_records.sgf_to_moves(old_style) == (N, 0.5, [(1, 12), (-1, PASS), (1, PASS)])


def test_printsgf_and_loadsgf_round_trip_a_game_with_captures_and_passes(loaded, tmp_path):
    gtp = Transcript(loaded)
    gtp.ok("komi 3.5")
    for line in ["play b B1", "play w A1", "play b A2", "play w pass", "play b C3",
                 "play w C2", "genmove b", "play w pass", "play b pass"]:
        gtp.ok(line)
    board = gtp.board()
    text = gtp.ok("printsgf")
    assert text.startswith("(;FF[4]") and "W[]" in text and "tt" not in text
    assert "KM[3.5]" in text and "RE[" in text, "two passes end the game: a result is written"
    path = tmp_path / "game with spaces.sgf"
    assert gtp.ok(f'printsgf "{path}"') == ""
    record = sgf_records.read_sgf(path.read_bytes())
    assert [m for _, m in record.moves][:3] == [coords.from_gtp(v, N) for v in ("B1", "A1", "A2")]
    assert len(record.moves) == 9

    fresh = Transcript(loaded)
    assert fresh.ok(f'loadsgf "{path}"') == ""
    np.testing.assert_array_equal(fresh.board(), board)
    assert fresh.ok("final_score") == gtp.ok("final_score")
    assert fresh.ok(f'loadsgf "{path}" 3') == ""     # the position before move 3
    expected = np.zeros((N, N), np.int8)
    expected.flat[coords.from_gtp("B1", N)], expected.flat[coords.from_gtp("A1", N)] = 1, -1
    np.testing.assert_array_equal(fresh.board(), expected)
    assert "black to move" in fresh.ok("showboard")

    handicap = tmp_path / "handicap.sgf"
    handicap.write_bytes(b"(;FF[4]GM[1]SZ[5]KM[0.5]HA[2]AB[bb][dd];W[cc];B[tt];W[])")
    assert fresh.ok(f"loadsgf {handicap}") == ""
    assert fresh.board().sum() == 1 and "black to move" in fresh.ok("showboard")
    assert "HA[2]" in fresh.ok("printsgf") and "AB[" in fresh.ok("printsgf")

    (tmp_path / "nine.sgf").write_bytes(b"(;FF[4]GM[1]SZ[9];B[cc])")
    (tmp_path / "illegal.sgf").write_bytes(b"(;FF[4]GM[1]SZ[5];B[cc];W[cc])")
    (tmp_path / "garbage.sgf").write_bytes(b"this is not sgf")
    for name in ("nine.sgf", "illegal.sgf", "garbage.sgf", "missing.sgf"):
        assert fresh.error(f"loadsgf {tmp_path / name}") == "cannot load file"
    assert fresh.board().sum() == 1, "a failed loadsgf leaves the game as it was"


def run_with_deadline(function, seconds: float):
    """function()'s result, or a test failure if it has not returned within `seconds` (it is
    left running in a daemon thread)."""
    results = queue.Queue()
    threading.Thread(target=lambda: results.put(function()), daemon=True).start()
    try:
        return results.get(timeout=seconds)
    except queue.Empty:
        pytest.fail(f"still running after {seconds} s")


def test_loadsgf_reads_only_regular_files_of_bounded_size(loaded, tmp_path):
    from gtp.files import MAX_SGF_BYTES
    gtp = Transcript(loaded)
    gtp.ok("play b C3")
    fifo = tmp_path / "fifo.sgf"
    os.mkfifo(fifo)                      # nobody writes it: reading it would block for ever
    big = tmp_path / "big.sgf"
    with open(big, "wb") as handle:      # a valid game padded past the cap with a comment
        handle.write(b"(;FF[4]GM[1]SZ[5]C[" + b"x" * MAX_SGF_BYTES + b"];B[aa])")
    link = tmp_path / "link.sgf"
    (tmp_path / "game.sgf").write_bytes(b"(;FF[4]GM[1]SZ[5];B[aa])")
    link.symlink_to(tmp_path / "game.sgf")
    for path in (fifo, big, tmp_path, "/dev/zero", "/proc/self/status"):
        assert run_with_deadline(lambda: gtp.error(f"loadsgf {path}"), 10) == "cannot load file"
    assert gtp.board().sum() == 1, "a refused loadsgf leaves the game as it was"
    assert gtp.ok(f"loadsgf {link}") == "", "a symlink to a regular file is read"
    assert gtp.board()[0, 0] == 1 and gtp.board().sum() == 1


def test_printsgf_writes_regular_files_atomically_and_nothing_else(loaded, tmp_path):
    gtp = Transcript(loaded)
    gtp.ok("play b C3")
    existing = tmp_path / "old.sgf"
    existing.write_bytes(b"an old file")
    inode = existing.stat().st_ino
    assert gtp.ok(f"printsgf {existing}") == ""
    assert sgf_records.read_sgf(existing.read_bytes()).moves == [(1, coords.from_gtp("C3", N))]
    assert existing.stat().st_ino != inode, "replaced by a rename, not rewritten in place"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.sgf"], "no temporary file left"

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)                      # opening it to write would block for ever
    target = tmp_path / "target.txt"
    target.write_bytes(b"keep me")
    link = tmp_path / "link.sgf"
    link.symlink_to(target)
    for path in (fifo, link, tmp_path, "/dev/null"):
        assert run_with_deadline(lambda: gtp.error(f"printsgf {path}"), 10) == \
            "cannot write file: not a regular file"
    assert gtp.error(f'printsgf "{tmp_path / "no such directory" / "game.sgf"}"') == \
        "cannot write file: no such directory"
    assert target.read_bytes() == b"keep me" and link.is_symlink()


def random_long_game(moves: int, seed: int = 0) -> list[int]:
    """`moves` legal moves on the 5x5 board, alternating from black: random legal moves,
    the game going on as a new segment on the same stones whenever the rules end it (as the
    GTP engine continues a game, games/game_record.py)."""
    go = GoBatch(1, N, max_moves=4 * N * N, seed=seed)
    played = []
    while len(played) < moves:
        if go.is_over()[0]:
            go.set_board(go.board(), go.to_play())
        move = go.random_moves()
        go.play(move)
        played.append(int(move[0]))
    return played


def test_printsgf_of_a_20000_move_game_takes_linear_time(loaded, tmp_path):
    moves = random_long_game(20_000)
    path = tmp_path / "long.sgf"
    path.write_bytes(sgf_records.game_to_sgf(N, 7.5, moves, ""))
    gtp = Transcript(loaded)
    assert gtp.ok(f"loadsgf {path}") == ""
    started = time.monotonic()
    text = gtp.ok("printsgf")
    elapsed = time.monotonic() - started
    assert [move for _, move in sgf_records.read_sgf(text.encode()).moves] == moves
    # It took about 30 s when every node was appended by walking the whole main line.
    assert elapsed < 5, f"printsgf of 20,000 moves took {elapsed:.1f} s"
