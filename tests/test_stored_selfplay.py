"""Self-play played elsewhere: `selfplay_chunks.py` writes whole games as compressed replay
chunks, and `bp_tree.py --selfplay-from DIR` trains on them in order, each position once
across restarts, before its own self-play takes over.

The references are the chunk files themselves, read with np.load, and hand-made chunks whose
`score` holds each position's serial number, so order and slicing can be read off."""
import contextlib
import io
import json
import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from float_tolerance import EPS16, gamma  # noqa: E402
import selfplay_chunks  # noqa: E402
from games.stored_selfplay import StoredSelfPlay, StoredSelfPlayError  # noqa: E402
from loop_runs import TINY, metrics, read_chunk, run_main, split_games  # noqa: E402
from training.replay_buffer import ReplayBuffer  # noqa: E402

N, PLANES, ACTIONS = TINY.board_size, TINY.board_planes, TINY.num_actions


def hand_made_chunk(path: Path, first: int, count: int, games: int, rng) -> None:
    """`count` positions numbered first.. in `score`, in selfplay_chunks.py's layout."""
    policy = rng.random((count, ACTIONS))
    np.savez_compressed(
        path, planes=(rng.random((count, N, N, PLANES)) < 0.3).astype(np.uint8),
        policy=(policy / policy.sum(axis=1, keepdims=True)).astype(np.float16),
        value=rng.choice([-1.0, 1.0], count).astype(np.float32),
        ownership=rng.integers(-1, 2, (count, N, N)).astype(np.int8),
        score=np.arange(first, first + count, dtype=np.float32),
        final=np.ones(count, bool), komi=np.full(count, 7.5, np.float32),
        surprise=rng.random(count).astype(np.float32),
        weights_version=np.zeros(count, np.int32), games=np.int64(games))


@pytest.fixture
def stored(tmp_path):
    """Two directories: a (10 positions, 2 games), a damaged file, b (7, 1), a chunk of the
    wrong board (5 positions); then c (13, 3). Positions numbered 0..34 in that order, the
    wrong board's 17..21 never to be seen."""
    rng = np.random.default_rng(5)
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    hand_made_chunk(first / "chunk_000001.npz", 0, 10, 2, rng)
    (first / "chunk_000002.npz").write_bytes(b"PK\x03\x04 torn")
    hand_made_chunk(first / "chunk_000003.npz", 10, 7, 1, rng)
    np.savez_compressed(first / "chunk_000004.npz", planes=np.zeros((5, N + 1, N + 1, PLANES)),
                        policy=np.zeros((5, ACTIONS)), value=np.zeros(5, np.float32),
                        score=np.arange(17, 22, dtype=np.float32), games=np.int64(1))
    hand_made_chunk(second / "chunk_000001.npz", 22, 13, 3, rng)
    return [first, second]


def numbers(batch) -> list[int]:
    return batch.score.astype(int).tolist()


def test_stored_positions_come_in_order_each_once_and_a_restart_skips_what_was_taken(stored):
    said = []
    source = StoredSelfPlay(stored, TINY.overridden(komi_input=True), log=said.append)
    assert source.total == 35 and source.remaining == 35
    batch = source.play(8)
    assert numbers(batch) == list(range(8)) and batch.other_games == 0
    assert batch.policy.dtype == np.float32 and batch.planes.dtype == np.uint8
    batch = source.play(8)      # crosses the end of the first chunk: its 2 games are counted
    assert numbers(batch) == list(range(8, 16)) and batch.other_games == 2
    batch = source.play(8)      # the wrong board's 5 positions are passed over, with a message
    assert numbers(batch) == [16, 22, 23] and batch.other_games == 1
    assert len(said) == 1 and "chunk_000004.npz is damaged" in said[0]
    assert source.taken == 24 and source.remaining == 11
    with open(stored[0] / "chunk_000001.npz", "rb") as handle:
        np.testing.assert_array_equal(
            StoredSelfPlay(stored, TINY.overridden(komi_input=True)).play(3).policy,
            np.load(handle)["policy"][:3].astype(np.float32))

    resumed = StoredSelfPlay(stored, TINY.overridden(komi_input=True), taken=24)
    batch = resumed.play(100)
    assert numbers(batch) == list(range(24, 35)) and batch.other_games == 3
    assert resumed.remaining == 0 and resumed.play(10).positions == 0


def test_a_directory_without_chunks_is_refused(tmp_path, stored):
    (tmp_path / "empty").mkdir()
    with pytest.raises(StoredSelfPlayError, match="empty: no chunk_"):
        StoredSelfPlay([stored[0], tmp_path / "empty"], TINY)
    code, out, err = run_main(tmp_path / "run", "--selfplay-from", str(tmp_path / "nowhere"))
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("bp_tree: ") and "nowhere: no chunk_" in err
    assert not (tmp_path / "run").exists()


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    run = tmp_path_factory.mktemp("model") / "run"
    code, _, err = run_main(run, "--iterations", "1")
    assert code == 0, err
    return run / "model.npz"


def chunks_main(*argv) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            code = selfplay_chunks.main(list(argv))
        except SystemExit as exit:
            code = exit.code
    return code, err.getvalue()


def test_selfplay_chunks_writes_whole_games_that_a_replay_buffer_reads(tiny_model, tmp_path):
    output = tmp_path / "played"
    code, err = chunks_main("--model", str(tiny_model), "--output", str(output),
                            "--positions", "150", "--chunk-positions", "60",
                            "--num-games", "8", "--backend", "cpu", "--seed", "3")
    assert code == 0, err
    source = json.loads((output / "source.json").read_text())
    names = sorted(path.name for path in output.glob("chunk_*.npz"))
    assert names == source["chunks"] and len(names) >= 2
    chunks = [dict(np.load(output / name)) for name in names]
    assert sum(len(chunk["value"]) for chunk in chunks) == source["positions"] >= 150
    assert all(len(chunk["value"]) >= 60 for chunk in chunks[:-1])
    # Whole games: each chunk starts on an empty board and counts the games it holds.
    assert [len(split_games(chunk)) for chunk in chunks] == [int(c["games"]) for c in chunks]
    assert sum(int(chunk["games"]) for chunk in chunks) == source["games"]
    for chunk in chunks:
        assert chunk["policy"].dtype == np.float16
        # A float32 distribution, each entry rounded once to float16 (half an ulp of it).
        moves = chunk["policy"].shape[1]
        np.testing.assert_allclose(chunk["policy"].astype(np.float64).sum(axis=1), 1,
                                   atol=EPS16 / 2 + gamma(2 * moves))
        for game in split_games(chunk):      # the result alternates with the side to move
            value = chunk["value"][game]
            assert set(np.abs(value)) <= {0.0, 1.0}
            assert (value[1:] == -value[:-1]).all()
            # The reply target: the game's next policy target, none after its last position.
            np.testing.assert_array_equal(chunk["reply"][game][:-1], chunk["policy"][game][1:])
            assert not chunk["reply"][game][-1].any()
    buffer = ReplayBuffer(1000, N, PLANES)
    assert buffer.load_chunks([output / name for name in names]) == source["positions"]
    assert source["simulations"] == TINY.simulations and source["num_games"] == 8

    code, err = chunks_main("--model", str(tiny_model), "--output", str(output),
                            "--positions", "10", "--backend", "cpu")
    assert code == 2 and err.count("\n") == 1 and "not an empty directory" in err
    code, err = chunks_main("--model", str(tmp_path / "none.npz"), "--output",
                            str(tmp_path / "other"), "--positions", "10", "--backend", "cpu")
    assert code == 2 and err.count("\n") == 1 and "--model" in err


def test_the_loop_trains_on_stored_positions_once_across_a_restart_then_plays_its_own(
        tmp_path, tiny_model):
    stored = tmp_path / "played"
    code, err = chunks_main("--model", str(tiny_model), "--output", str(stored),
                            "--positions", "100", "--chunk-positions", "50",
                            "--num-games", "8", "--backend", "cpu", "--seed", "4")
    assert code == 0, err
    files = sorted(stored.glob("chunk_*.npz"))
    reference = {key: np.concatenate([np.load(path)[key] for path in files])
                 for key in ("planes", "policy", "value", "komi", "score")}
    total = len(reference["value"])
    games = sum(int(np.load(path)["games"]) for path in files)
    run = tmp_path / "run"
    code, _, err = run_main(run, "--selfplay-from", str(stored), "--iterations", "1")
    assert code == 0, err
    code, _, err = run_main(run, "--selfplay-from", str(stored),
                            "--iterations", str(total // 64 + 2))
    assert code == 0, err
    records = metrics(run)
    taken = [read_chunk(run, record["iteration"]) for record in records]
    stored_iterations = -(-total // 64)
    assert [r.get("selfplay_source") for r in records] == (
        ["stored"] * stored_iterations + [None] * (len(records) - stored_iterations))
    for key in ("planes", "value", "komi", "score"):
        np.testing.assert_array_equal(
            np.concatenate([chunk[key] for chunk in taken[:stored_iterations]]), reference[key])
    np.testing.assert_array_equal(
        np.concatenate([chunk["policy"] for chunk in taken[:stored_iterations]]),
        reference["policy"].astype(np.float32))
    assert [len(chunk["value"]) for chunk in taken[:stored_iterations]] == (
        [64] * (stored_iterations - 1) + [total - 64 * (stored_iterations - 1)])
    assert records[stored_iterations - 1]["stored_remaining"] == 0
    # Then its own self-play: games of its own, counted on top of the stored ones.
    own = records[stored_iterations]
    assert own["nn_evals_per_s"] > 0 and own["selfplay_games"] >= 1
    assert own["games"] == games + own["selfplay_games"]
    assert records[stored_iterations - 1]["games"] == games
