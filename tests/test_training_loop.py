"""The training loop (bp_tree.py) end to end on the `tiny` preset (5x5, one block of 8 filters,
a few simulations), in this process (tests/loop_runs.py): what one iteration writes, the
replay buffer's symmetric samples, the rated evaluations, the CPU time and the GNU Go level
carried across resumes, and the auxiliary heads and playout caps trained end to end.
Damaged runs are test_damaged_runs.py's, processes killed and stopped
test_loop_processes.py's, warm starts and growth test_warm_starts.py's.
"""
import math
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from float_tolerance import gamma  # noqa: E402
from training import symmetries  # noqa: E402
from training.config import Config  # noqa: E402
from training.replay_buffer import ReplayBuffer  # noqa: E402
from games.sgf_records import sgf_to_moves  # noqa: E402
from loop_runs import (  # noqa: E402
    TINY, TINY_ARGS, DOCUMENTED_FIELDS, TRAINING_FIELDS, SIDE_TO_MOVE_PLANE, run_main,
    checkpoint_iterations, chunk_iterations, read_checkpoint, read_chunk, metrics, split_games,
    assert_consistent)


# One iteration end to end.


def test_one_iteration_writes_config_revision_checkpoint_chunk_and_metrics(one_iteration):
    run, out, _ = one_iteration
    expected_config, _ = Config.from_args([*TINY_ARGS, "--iterations", "1"])
    assert Config.from_json((run / "config.json").read_text()) == expected_config
    assert (run / "revision.txt").read_text().startswith("revision: ")
    assert checkpoint_iterations(run) == [1] and chunk_iterations(run) == [1]

    chunk = read_chunk(run, 1)
    positions = len(chunk["value"])
    assert positions >= 64
    assert chunk["planes"].dtype == np.uint8
    assert chunk["planes"].shape == (positions, 5, 5, TINY.input_planes)
    assert set(np.unique(chunk["planes"])) <= {0, 1}
    assert chunk["policy"].shape == (positions, 26)
    assert (chunk["policy"] >= 0).all()
    np.testing.assert_allclose(chunk["policy"].sum(axis=1), 1.0,
                               atol=gamma(2 * chunk["policy"].shape[1]))
    assert chunk["surprise"].shape == (positions,) and (chunk["surprise"] >= 0).all()
    # komi 7.5: no draws, so every value target is a win or a loss, from the side to move's
    # view: it flips with the side to move within a game.
    games = split_games(chunk)
    assert set(np.unique(chunk["value"])) <= {-1.0, 1.0}
    for game in games:
        side = chunk["planes"][game, 0, 0, SIDE_TO_MOVE_PLANE].astype(np.float32) * 2 - 1
        assert (np.diff(side) != 0).all(), "players alternate"
        assert len(np.unique(chunk["value"][game] * side)) == 1, "one result per game"

    state, counters = read_checkpoint(run, 1)
    assert counters["iteration"] == 1
    assert counters["positions"] == positions and counters["games"] == len(games)
    assert counters["train_steps"] == math.ceil(positions * TINY.sample_reuse / TINY.train_batch_size)
    assert int(state["trainer.step"]) == counters["train_steps"]
    assert any(name.startswith("model.") for name in state)

    [record] = metrics(run)
    assert DOCUMENTED_FIELDS <= set(record)
    assert TRAINING_FIELDS <= set(record)  # tiny's min_replay (32) is below one iteration
    assert record["iteration"] == 1
    assert (record["positions"], record["games"]) == (positions, len(games))
    assert record["policy_surprise"] == round(float(np.mean(chunk["surprise"])), 4) > 0
    assert record["train_steps"] == counters["train_steps"]
    assert record["wall_time_s"] > 0
    assert record["selfplay_positions_per_s"] > 0 and record["nn_evals_per_s"] > 0
    assert 0 <= record["win_rate_random"] <= 1 and record["random_games"] == 4
    assert math.isfinite(record["loss_policy"]) and record["loss_policy"] > 0
    assert math.isfinite(record["loss_value"]) and record["loss_value"] >= 0
    assert "iter    1" in out  # the one-line summary


def test_backend_cpu_trains_exactly_like_the_default_auto_on_a_machine_without_a_gpu(
        one_iteration, tmp_path):
    from kernels.go_batch import _cuda_available
    if _cuda_available()[0]:
        pytest.skip("this machine has a CUDA device: auto means cuda here")
    auto_run, _, auto_err = one_iteration
    assert "rules: C/OpenMP on the CPU (backend auto)" in auto_err
    run = tmp_path / "cpu"
    code, _, err = run_main(run, "--iterations", "1", "--backend", "cpu")
    assert code == 0, err
    from architectures import net_device
    assert f"rules: C/OpenMP on the CPU (backend cpu); net: {net_device()}" in err
    weights, counters = read_checkpoint(run, 1)
    auto_weights, auto_counters = read_checkpoint(auto_run, 1)
    assert weights.keys() == auto_weights.keys()
    for name in weights:
        np.testing.assert_array_equal(weights[name], auto_weights[name], err_msg=name)
    for name, array in read_chunk(run, 1).items():
        np.testing.assert_array_equal(array, read_chunk(auto_run, 1)[name], err_msg=name)
    assert counters["games"] == auto_counters["games"]


def test_backend_cuda_without_a_device_is_refused_in_one_line_before_the_run_exists(tmp_path):
    from kernels.go_batch import _cuda_available
    if _cuda_available()[0]:
        pytest.skip("this machine has a CUDA device")
    run = tmp_path / "cuda"
    code, out, err = run_main(run, "--iterations", "1", "--backend", "cuda")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("bp_tree: backend='cuda' requested but the CUDA")
    assert not run.exists()


def test_one_iteration_writes_a_readable_sample_game_and_tensorboard_events(one_iteration):
    run, _, _ = one_iteration
    board_size, komi, moves = sgf_to_moves((run / "sgf" / "iter_000001_game_0.sgf").read_bytes())
    assert (board_size, komi) == (5, TINY.komi)
    assert len(moves) > 5
    assert [colour for colour, _ in moves[:4]] == [1, -1, 1, -1]
    assert list((run / "tensorboard").glob("events.out.tfevents.*"))


def test_losses_are_absent_until_the_replay_buffer_reaches_min_replay(tmp_path):
    run = tmp_path / "run"
    # 8 games of at most 50 moves cannot fill 1000 positions in one iteration.
    code, out, err = run_main(run, "--iterations", "1", "--min_replay", "1000")
    assert code == 0, err
    [first] = metrics(run)
    assert not TRAINING_FIELDS & set(first), "missing losses must be absent, not zero"
    assert first["train_steps"] == 0
    assert DOCUMENTED_FIELDS - TRAINING_FIELDS <= set(first)
    assert "training waits for the replay buffer" in out

    # min_replay may change on resume (it shapes neither positions nor the net).
    code, out, err = run_main(run, "--iterations", "2", "--min_replay", "32")
    assert code == 0, err
    assert "resumed" in err and "after iteration 1" in err
    first_again, second = metrics(run)
    assert first_again == first
    assert TRAINING_FIELDS <= set(second) and second["train_steps"] > 0
    assert Config.from_json((run / "config.json").read_text()).min_replay == 32
    assert_consistent(run)


def test_random_every_spaces_the_matches_against_random(tmp_path):
    run = tmp_path / "run"
    code, out, err = run_main(run, "--iterations", "2", "--random_every", "2")
    assert code == 0, err
    first, second = metrics(run)
    assert "win_rate_random" not in first and "random_games" not in first
    assert second["random_games"] == 4 and 0 <= second["win_rate_random"] <= 1
    lines = [line for line in out.splitlines() if "iter " in line]
    assert len(lines) == 2
    assert "vs random" not in lines[0] and "vs random" in lines[1]


# The replay buffer.

def test_replay_samples_are_symmetric_images_of_stored_positions():
    rng = np.random.default_rng(7)
    stored = 5
    planes = rng.integers(0, 2, (stored, 5, 5, TINY.input_planes)).astype(np.uint8)
    policy = rng.random((stored, 26)).astype(np.float32)
    policy /= policy.sum(axis=1, keepdims=True)
    value = (np.array([1, -1, 1, -1, 1]) * np.arange(1, stored + 1) / stored).astype(np.float32)
    buffer = ReplayBuffer(capacity=16, board_size=5, board_planes=TINY.board_planes)
    buffer.add(planes, policy, value)

    sampled_planes, sampled_policy, sampled_value = buffer.sample(64, np.random.default_rng(1))[:3]
    images = {}  # every (stored position, symmetry) pair: its planes, policy and value
    for k in range(8):
        for i in range(stored):
            key = (symmetries.transform_planes(planes[i:i + 1].astype(np.float32), k).tobytes(),
                   symmetries.transform_policy(policy[i:i + 1], k).tobytes(),
                   value[i:i + 1].tobytes())
            images[key] = (i, k)
    seen = set()
    for j in range(64):
        key = (sampled_planes[j:j + 1].astype(np.float32).tobytes(),
               sampled_policy[j:j + 1].astype(np.float32).tobytes(),
               sampled_value[j:j + 1].astype(np.float32).tobytes())
        assert key in images, f"sample {j} is no symmetric image of a stored position"
        seen.add(images[key])
    assert len({k for _, k in seen}) > 4 and len({i for i, _ in seen}) == stored


@pytest.mark.skipif(not Path("/usr/games/gnugo").exists() and shutil.which("gnugo") is None,
                    reason="GNU Go is not installed")
def test_rated_evaluations_log_gnugo_previous_and_a_chained_elo(tmp_path):
    run = tmp_path / "rated"
    code, _, err = run_main(run, "--iterations", "4", "--gnugo_every", "2", "--gnugo_games", "2",
                            "--previous_games", "4", "--checkpoints_to_keep", "2")
    assert code == 0, err
    lines = metrics(run)
    assert [line["iteration"] for line in lines] == [1, 2, 3, 4]
    for line in (lines[0], lines[2]):
        assert not {"win_rate_gnugo", "elo", "win_rate_previous"} & set(line)
    first, second = lines[1], lines[3]
    assert first["gnugo_level"] == 0 and first["gnugo_games"] == 2
    assert 0 <= first["win_rate_gnugo"] <= 1 and first["elo"] == 0.0
    assert "win_rate_previous" not in first  # nothing rated before it
    assert second["previous_iteration"] == 2 and second["previous_games"] == 4
    # The chained rating moves by the Elo difference of the match, a sweep clamped to half a game.
    rate = min(max(second["win_rate_previous"], 0.5 / 4), 1 - 0.5 / 4)
    assert second["elo"] == pytest.approx(400 * math.log10(rate / (1 - rate)), abs=0.06)
    # The newest two checkpoints are kept, plus the rating's reference (iteration 4 itself now).
    assert checkpoint_iterations(run) == [3, 4]
    _, counters = read_checkpoint(run, 4)
    assert counters["rated_iteration"] == 4


# CPU time, the GNU Go level, the auxiliary heads.

def test_cpu_seconds_accumulate_across_resumes_and_stay_within_the_process_time(tmp_path):
    run = tmp_path / "cpu"
    before = time.process_time()
    code, _, err = run_main(run, "--iterations", "2")
    assert code == 0, err
    code, _, err = run_main(run, "--iterations", "3")
    assert code == 0, err
    used = time.process_time()          # this process ran every iteration
    # Resumed with its iterations done, the run says so instead of exiting without a word.
    code, _, err = run_main(run, "--iterations", "3")
    assert code == 0 and "iteration 3 of 3 done" in err and len(metrics(run)) == 3
    seconds = [line["cpu_seconds"] for line in metrics(run)]
    assert 0 < seconds[0] < seconds[1] < seconds[2] <= used
    assert seconds[2] <= used - before   # both loops ran inside the test's own CPU time
    # A CPU budget already spent stops the run before another iteration.
    # (metrics round to 0.01 s: a budget just below the last figure is surely spent)
    code, _, err = run_main(run, "--max_cpu_seconds", str(seconds[2] - 0.01), "--iterations", "0")
    assert code == 0 and "CPU seconds reached" in err and len(metrics(run)) == 3
    assert [line["games"] for line in metrics(run)] == sorted({l["games"] for l in metrics(run)})


def test_gnugo_level_climbs_after_a_match_won_at_the_promotion_rate(tmp_path, monkeypatch):
    from games.match_report import MatchReport
    results = iter([(4, 1), (3, 2), (5, 0)])     # 80%, 60%, 100% wins
    levels = []

    def fake_match(config, net, level, games, simulations, seed=0, log=None):
        levels.append(level)
        wins, losses = next(results)
        return MatchReport(wins=wins, losses=losses, draws=0, player_a="net",
                           player_b=f"gnugo:{level}")

    monkeypatch.setattr("loop.evaluations.play_against_gnugo", fake_match)
    run = tmp_path / "climb"
    code, _, err = run_main(run, "--iterations", "2", "--gnugo_every", "1", "--previous_games", "2")
    assert code == 0, err
    code, _, err = run_main(run, "--iterations", "3", "--gnugo_every", "1", "--previous_games", "2")
    assert code == 0, err
    assert levels == [0, 1, 1]                       # 80% promotes, 60% does not; kept on resume
    assert [line["gnugo_level"] for line in metrics(run)] == [0, 1, 1]
    _, counters = read_checkpoint(run, 3)
    assert counters["gnugo_level"] == 2


def test_replay_ownership_samples_turn_with_their_planes():
    n = TINY.board_size
    rng = np.random.default_rng(4)
    buffer = ReplayBuffer(64, n, TINY.input_planes)
    stones = rng.integers(-1, 2, (20, n, n))
    planes = np.zeros((20, n, n, TINY.input_planes), np.uint8)
    planes[..., 0], planes[..., 1] = stones == 1, stones == -1
    policy = np.full((20, n * n + 1), 1 / (n * n + 1), np.float32)
    final = np.arange(20) % 3 != 0
    buffer.add(planes, policy, np.zeros(20, np.float32), stones.astype(np.int8),
               np.arange(20, dtype=np.float32), final)
    sample = buffer.sample(256, np.random.default_rng(2))
    # Ownership was the stones: under any symmetry it still is, point for point.
    np.testing.assert_array_equal(sample.ownership, sample.planes[..., 0] - sample.planes[..., 1])
    assert set(sample.final.tolist()) == {0.0, 1.0}
    # The score travels with its position (score i was stored with position i), scaled by N*N.
    stored = np.rint(sample.score * n * n).astype(int)
    np.testing.assert_array_equal(sample.final, final[stored].astype(np.float32))


def test_auxiliary_heads_and_playout_caps_train_end_to_end(tmp_path):
    run = tmp_path / "aux"
    code, _, err = run_main(run, "--iterations", "2", "--aux_heads", "true",
                            "--full_search_share", "0.5", "--fast_simulations", "2")
    assert code == 0, err
    records = metrics(run)
    # Only the fully searched moves were kept: about half of the moves played.
    for record, before in zip(records, [0] + [r["positions"] for r in records]):
        kept = record["positions"] - before
        assert kept == len(read_chunk(run, record["iteration"])["value"])
        assert 0.2 * record["selfplay_moves"] < kept < 0.8 * record["selfplay_moves"]
    trained = [r for r in records if "loss_policy" in r]
    assert trained and all(r["loss_ownership"] > 0 and r["loss_score"] >= 0 for r in trained)
    chunk = read_chunk(run, 1)
    assert chunk["ownership"].shape == chunk["planes"].shape[:3] and chunk["final"].any()
    code, _, err = run_main(run, "--iterations", "3", "--aux_heads", "false")  # shapes the net
    assert code == 2 and "aux_heads: run has True, command asks False" in err
