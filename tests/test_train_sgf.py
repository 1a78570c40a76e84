"""train_sgf.py and games/sgf_corpus.py: SGF records into training positions (handicap,
passes, results, komi, the files that cannot be used and why), and a supervised run that
bp_tree.py continues. Known answers are worked out by hand from the SGF text."""
from __future__ import annotations

import json
import time

import numpy as np
import pytest

import bp_tree
import train_sgf
from games.sgf_corpus import UnusableGame, parse_result, read_sgf_directory, record_positions
from games.sgf_records import game_to_sgf, read_sgf
from kernels import GoBatch
from training.config import PRESETS
from training.run_directory import RunDirectory

CONFIG = PRESETS["tiny"].overridden(board_size=5, komi=0.5, history=1)


def positions(text: str, config=CONFIG):
    return record_positions(read_sgf(text.encode()), config)


def test_handicap_stones_white_first_and_passes():
    # Handicap stones at B4 (sgf bb: row 1 from the top, col 1) and D2 (dd: row 3, col 3);
    # white plays first, black passes (both FF[4] B[] and the old B[tt]), white wins.
    game = positions("(;GM[1]FF[4]SZ[5]KM[0.5]HA[2]AB[bb][dd]RE[W+R];W[cc];B[];W[bd];B[tt];W[aa])")
    pass_move = 25
    np.testing.assert_array_equal(game.move, [12, pass_move, 16, pass_move, 0])
    # Values from the side to move's view: white (the winner) moves at 0, 2, 4.
    np.testing.assert_array_equal(game.value, [1, -1, 1, -1, 1])
    first = game.planes[0]
    # White to move: the handicap stones are the opponent's (channel 1), black-to-move plane 0.
    assert first[1, 1, 1] == 1 and first[3, 3, 1] == 1 and first[..., 1].sum() == 2
    assert first[..., 0].sum() == 0 and first[..., 4].max() == 0
    # After W C3 and black's pass, white to move again sees its stone at C3 (row 2, col 2).
    assert game.planes[2][2, 2, 0] == 1
    np.testing.assert_array_equal(game.policy.argmax(axis=1), game.move)
    assert game.legal[0, 12] and not game.legal[0, 6]


@pytest.mark.parametrize("text, value", [
    ("B+3.5", (1, 3.5)), ("W+0.5", (-1, -0.5)), ("B+R", (1, None)), ("W+Resign", (-1, None)),
    ("W+T", (-1, None)), ("0", (0, 0.0)), ("Draw", (0, 0.0))])
def test_results(text, value):
    assert parse_result(text) == value


@pytest.mark.parametrize("text", ["", "?", "Void", "B+", "B+lots"])
def test_results_without_a_decided_winner_are_refused(text):
    with pytest.raises(UnusableGame, match="no usable result"):
        parse_result(text)


@pytest.mark.parametrize("sgf, reason", [
    ("(;GM[1]FF[4]SZ[9]RE[B+R];B[ee])", "board size"),
    ("(;GM[1]FF[4]SZ[5];B[cc])", "no usable result"),
    ("(;GM[1]FF[4]SZ[5]RE[?];B[cc])", "no usable result"),
    # Black by half a point at komi 0 is a draw at the run's komi 0.5: not the same result.
    ("(;GM[1]FF[4]SZ[5]KM[0]RE[B+0.5];B[cc])", "komi"),
    ("(;GM[1]FF[4]SZ[5]RE[B+R];B[cc];W[cc])", "illegal move"),
    ("(;GM[1]FF[4]SZ[5]RE[B+R];B[cc];B[dd])", "out of turn"),
    ("(;GM[1]FF[4]SZ[5]RE[B+R];B[cc];W[dd]AB[aa];B[ee])", "setup"),
    ("(;GM[1]FF[4]SZ[5]RE[B+R])", "no moves"),
])
def test_unusable_records_say_why(sgf, reason):
    with pytest.raises(UnusableGame, match=f"^{reason}"):
        positions(sgf)


def test_play_after_two_passes_resumes_from_the_stones():
    # A cleanup phase as our GNU Go matches record it: two passes, then play goes on.
    game = positions("(;GM[1]FF[4]SZ[5]KM[0.5]RE[B+R];B[cc];W[];B[];W[dd];B[bb])")
    np.testing.assert_array_equal(game.move, [12, 25, 25, 18, 6])
    # White to move after the passes sees black's C3 stone as the opponent's.
    assert game.planes[3][2, 2, 1] == 1 and game.planes[3][..., 1].sum() == 1


def test_another_komi_is_fine_when_the_winner_stays():
    assert len(positions("(;GM[1]FF[4]SZ[5]KM[6.5]RE[B+R];B[cc];W[dd])")) == 2
    assert len(positions("(;GM[1]FF[4]SZ[5]KM[0]RE[B+2];B[cc];W[dd])")) == 2


def write_corpus(directory, games: int, seed: int = 0) -> None:
    """Random sensible 5x5 games to the end, scored by the engine, as SGF files; plus files
    that must be skipped."""
    go = GoBatch(games, 5, komi=0.5, seed=seed)
    moves = [[] for _ in range(games)]
    while not go.is_over().all():
        live = np.flatnonzero(~go.is_over())
        chosen = go.random_moves(live, legal=go.sensible_moves(live))
        go.play(chosen, slots=live)
        for slot, move in zip(live.tolist(), chosen.tolist()):
            moves[slot].append(move)
    for index, (score, played) in enumerate(zip(go.score(), moves)):
        result = f"{'B' if score > 0 else 'W'}+{abs(score):g}"
        (directory / f"game_{index}.sgf").write_bytes(game_to_sgf(5, 0.5, played, result))
    (directory / "broken.sgf").write_text("this is not SGF")
    (directory / "nine.sgf").write_text("(;GM[1]FF[4]SZ[9]RE[B+R];B[ee])")


def test_corpus_counts_and_skips_files_with_reasons(tmp_path):
    write_corpus(tmp_path, 4)
    corpus = read_sgf_directory(tmp_path, CONFIG)
    assert corpus.files == 6 and len(corpus.games) == 4
    assert corpus.skipped_by_reason() == {"unreadable": 1, "board size": 1}
    assert dict(corpus.skipped)["nine.sgf"].startswith("board size: 9x9")


@pytest.mark.parametrize("komi_input", ["false", "true"])
def test_train_sgf_leaves_a_run_that_bp_tree_continues(tmp_path, capsys, komi_input):
    """With --komi-input true the records' positions carry the run's komi as the net's last
    plane (the replay keeps it as a number), and self-play goes on at its own komis."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    write_corpus(corpus, 10)
    run = tmp_path / "run"
    flags = ["--run", str(run), "--preset", "tiny", "--komi", "0.5", "--gnugo_every", "0",
             "--komi_input", komi_input]
    before = time.process_time()
    assert train_sgf.main(["--sgf", str(corpus), "--iterations", "2", "--held_out", "0.2",
                           *flags]) == 0
    used = time.process_time() - before
    output = capsys.readouterr().out
    assert "2 held out" in output and "iter 2:" in output
    records = [json.loads(line) for line in (run / "supervised.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in records] == [1, 2]
    assert all(0 <= r["accuracy_held_out"] <= 1 for r in records)
    # The passes' CPU time is the run's too, so self-play's cpu_seconds carry it on.
    assert 0 < records[0]["cpu_seconds"] < records[1]["cpu_seconds"] <= used
    assert RunDirectory(run).checkpoint_iterations() == [1, 2]
    assert bp_tree.main([*flags, "--iterations", "3"]) == 0
    assert RunDirectory(run).checkpoint_iterations()[-1] == 3
    selfplay = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
    assert selfplay["cpu_seconds"] > records[1]["cpu_seconds"]
    assert train_sgf.main(["--sgf", str(tmp_path / "missing"), *flags]) == 2
