"""Matches (games/matches.py, match_players.py, match_runner.py, match_report.py, gnugo.py;
evaluate.py).

Against GNU Go: a short match of a tiny net (bp_tree, preset tiny: 5x5, one block of 8 filters,
one iteration) at level 0 played to the end, every result checked by replaying the game into a
fresh GoBatch and into a fresh GNU Go driven here through raw GTP (not through gnugo.py); the
dead-stone cleanup rule on a position where it changes the winner; a GNU Go process killed in
mid-game costing that game only. Without GNU Go, the statistics against published or
constructed answers: Wilson intervals from Newcombe (1998), Bradley-Terry ratings recovered
from games simulated with known strengths. The command line end to end.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from games import gnugo, match_players, match_report, match_runner, matches  # noqa: E402
from training.config import Config  # noqa: E402
from kernels import GoBatch, coords  # noqa: E402
from games.sgf_records import sgf_to_moves  # noqa: E402

PROJECT_ROOT = Path(__file__).resolve().parent.parent
GNUGO = "/usr/games/gnugo"
needs_gnugo = pytest.mark.skipif(not Path(GNUGO).exists(),
                                 reason="GNU Go is not installed (/usr/games/gnugo)")
N = 5
PASS = N * N


# ---------------------------------------------------------------- fixtures and helpers

@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    import bp_tree
    run = tmp_path_factory.mktemp("matches") / "tiny run"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert bp_tree.main(["--run", str(run), "--preset", "tiny", "--iterations", "1"]) == 0
    return run


@pytest.fixture(scope="module")
def tiny_net(tiny_run):
    """(config, net) of the tiny run's newest checkpoint, opened as every front end opens it."""
    from training.nets import open_net
    opened = open_net(tiny_run, batch_size=4)
    return opened.config, opened.net


def replayed_score(record: match_report.PlayedGame, config: Config) -> tuple[float, np.ndarray]:
    """(area score, final board) of a record's moves replayed into a fresh GoBatch; a cleanup
    phase resumes from the stones (the board is over after the two passes)."""
    go = GoBatch(1, config.board_size, komi=config.komi, superko=config.superko)
    cleanup = record.cleanup_start if record.cleanup_start is not None else len(record.moves)
    for move in record.moves[:cleanup]:
        go.play(np.array([move]))
    if record.cleanup_start is not None:
        assert go.is_over()[0] and record.moves[cleanup - 2:cleanup] == [PASS, PASS]
        go.set_board(go.board(), go.to_play())
        for move in record.moves[cleanup:]:
            go.play(np.array([move]))
    assert go.is_over()[0], "the game was not played to its end"
    return float(go.score()[0]), go.board()[0]


def gnugo_final_score(moves: list[int], komi: float) -> float:
    """final_score of a fresh GNU Go (default level) given the moves through raw GTP."""
    colours = ["black", "white"]
    lines = [f"boardsize {N}", "clear_board", f"komi {komi}"]
    lines += [f"play {colours[i % 2]} {coords.to_gtp(m, N)}" for i, m in enumerate(moves)]
    lines += ["final_score", "quit"]
    output = subprocess.run([GNUGO, "--mode", "gtp", "--chinese-rules", "--komi", str(komi)],
                            input="\n".join(lines) + "\n", capture_output=True, text=True,
                            timeout=60).stdout
    responses = [chunk.strip() for chunk in output.split("\n\n") if chunk.strip()]
    assert all(r.startswith("=") for r in responses), responses
    text = responses[-2][1:].strip()       # the last one answers quit
    return 0.0 if text == "0" else (1 if text[0] == "B" else -1) * float(text[2:])


class Scripted(match_players.Player):
    """Plays the first legal move of its wish list, else passes."""

    def __init__(self, wishes, name="scripted"):
        self.wishes, self.name = wishes, name

    def finish_moves(self, arbiter, slots):
        legal = arbiter.legal_moves(slots)
        return np.array([next((m for m in self.wishes if row[m]), PASS) for row in legal])


class AlwaysCentre(match_players.Player):
    name = "always-centre"

    def finish_moves(self, arbiter, slots):
        return np.full(len(slots), 12)


class KomiRecorder(Scripted):
    """A scripted player that keeps the komi each of its games was started with."""

    def __init__(self, wishes, name="komi-recorder"):
        super().__init__(wishes, name)
        self.komis = {}

    def new_games(self, slots, game_indices, komis):
        self.komis.update(zip(game_indices.tolist(), komis.tolist()))


def test_giving_points_sets_each_games_komi_for_both_players_the_score_and_the_sgf():
    from tests.reference_rules import ReferenceGo
    config = Config(board_size=N, komi=7.5)
    first_free = KomiRecorder(list(range(PASS)), name="first-free")
    last_free = KomiRecorder(list(range(PASS - 1, -1, -1)), name="last-free")
    report = match_runner.play_match(config, first_free, last_free, 6, parallel=4, seed=2, give=4.5)
    assert report.give == 4.5 and "A gives 4.5 points of komi" in report.summary()
    for record in report.records:
        komi = 12.0 if record.a_colour == 1 else 3.0       # A gives 4.5 either way
        assert record.komi == komi
        assert first_free.komis[record.index] == last_free.komis[record.index] == komi
        reference = ReferenceGo(N, komi=komi)
        for move in record.moves:
            reference.play(move)
        assert record.score == reference.score()
        assert record.result == np.sign(reference.score()) * record.a_colour
        assert sgf_to_moves(record.sgf)[1] == komi
    for bad in (0.3, float("nan"), N * N + 1):
        with pytest.raises(ValueError, match="give must be a multiple of 0.5"):
            match_runner.play_match(config, first_free, last_free, 2, parallel=2, give=bad)


def test_a_net_player_searches_at_its_games_komi(tiny_net):
    config, net = tiny_net
    player = match_players.NetPlayer(config, net, batch_size=3, simulations=2)
    player.new_games(np.array([0, 2]), np.array([0, 1]), np.array([16.5, -1.5]))
    assert player.driver.go.komi_of(np.array([0, 2])).tolist() == [16.5, -1.5]
    player.finish_moves(None, np.array([0, 2]))
    # Every tree node copies its game's position, komi included.
    stats = player.driver.search.root_statistics()
    searched = [player.driver.node_slots(g, np.arange(player.driver.search.max_nodes))
                for g in (0, 2)]
    assert stats.visits[[0, 2]].sum() > 0
    for game, slots in zip((0, 2), searched):
        used = player.driver.go.komi_of(slots[:3])
        assert set(used.tolist()) == {16.5 if game == 0 else -1.5}


# ---------------------------------------------------------------- the command line

def test_cli_random_against_random_end_to_end(tmp_path):
    result = subprocess.run(
        [sys.executable, "evaluate.py", "--black", "random", "--white", "random",
         "--board-size", "5", "--games", "6", "--sgf", str(tmp_path)],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "A = A random, B = B random: 6 games (A black in 3, white in 3)" in result.stdout
    line = next(l for l in result.stdout.splitlines() if l.startswith("A wins"))
    wins, losses, draws = (int(w) for w in line.replace(",", "").replace(":", "").split()[2:7:2])
    assert wins + losses + draws == 6
    assert "95% Wilson interval" in line
    written = sorted(tmp_path.glob("*.sgf"))
    assert len(written) == 6
    size, komi, moves = sgf_to_moves(written[0].read_bytes())
    assert (size, komi) == (5, 7.5) and moves[0][0] == 1


def test_cli_refuses_bad_arguments():
    import evaluate
    for argv in (["--black", "random"], ["--rating"], ["--black", "random", "--white", "random",
                                                        "--games", "0"],
                 ["--run", "r", "--rating", "--give", "3"]):
        with pytest.raises(SystemExit) as stopped, contextlib.redirect_stderr(io.StringIO()):
            evaluate.parse_args(argv)
        assert stopped.value.code == 2
    # --follow plays the run's newest checkpoint against a fixed opponent.
    follow = ["--black", "ckpt:latest", "--white", "random", "--follow"]
    for argv, message in (
            (follow, "--follow needs --run"),
            (["--run", "r", *follow[:1], "ckpt:3", *follow[2:]], "--black ckpt:latest"),
            (["--run", "r", *follow[:3], "ckpt:2", "--follow"], "must not be a checkpoint"),
            (["--run", "r", "--rating", "--follow"], "leave out --rating"),
            (["--run", "r", *follow, "--sgf", "games"], "--sgf is for one match")):
        err = io.StringIO()
        with pytest.raises(SystemExit) as stopped, contextlib.redirect_stderr(err):
            evaluate.parse_args(argv)
        assert stopped.value.code == 2 and message in err.getvalue(), (argv, err.getvalue())


# ---------------------------------------------------------------- against GNU Go

@needs_gnugo
def test_match_against_gnugo_level_0_runs_to_the_end_and_agrees_with_gnugo(tiny_net):
    config, net = tiny_net
    report = matches.play_against_gnugo(config, net, level=0, games=4, simulations=4, seed=3,
                                        parallel=4)
    assert report.games == 4 and report.not_played == 0
    assert report.player_a == "net" and report.player_b == "gnugo:0"
    assert [r.a_colour for r in report.records] == [1, -1, 1, -1]
    finished = [r for r in report.records if not r.resigned and not r.capped]
    for record in report.records:
        if record.resigned:
            assert record.resigned == record.a_colour * -1 and record.result == 1
            continue
        score, _ = replayed_score(record, config)
        assert record.score == score
        assert record.result == np.sign(score) * record.a_colour
        size, komi, sgf_moves = sgf_to_moves(record.sgf)
        assert [move for _, move in sgf_moves] == record.moves
    # Our score against GNU Go's own verdict, asked here without gnugo.py.
    assert report.checked == len(finished) >= 1
    for record in finished:
        assert record.gnugo_score == gnugo_final_score(record.moves, config.komi) == record.score
    assert report.disagreements == 0
    assert report.wins + report.losses + report.draws == 4


@needs_gnugo
def test_gnugo_plays_judges_and_referees_each_game_at_its_given_komi():
    config = Config(board_size=N, komi=7.5)
    gnugo = match_players.GnuGoPlayer(config, 0, 4, seed=2)
    try:
        started = []
        original = gnugo._start
        gnugo._start = lambda slot, game, komi: started.append((game, komi)) or \
            original(slot, game, komi)
        report = match_runner.play_match(config, match_players.RandomPlayer(), gnugo, 4,
                                         parallel=4, seed=4, give=-6)
    finally:
        gnugo.close()
    assert report.not_played == 0
    # Random (A) takes 6 points: komi 1.5 when it is black, 13.5 when white.
    assert sorted(started) == [(0, 1.5), (1, 13.5), (2, 1.5), (3, 13.5)]
    finished = [r for r in report.records if not r.resigned and not r.capped]
    assert finished
    for record in finished:
        assert record.komi == (1.5 if record.a_colour == 1 else 13.5)
        assert record.gnugo_score == gnugo_final_score(record.moves, record.komi) == record.score


@needs_gnugo
def test_a_game_ended_by_the_move_cap_is_scored_as_it_stands_without_cleanup():
    # A cleanup phase restarts from the stones alone and so drops a live simple-ko ban that
    # GNU Go still holds when no passes ended the game: a net then retook a ko in a triple-ko
    # cycle and GNU Go refused the move (a level-5 match on 9x9). Capped games are not cleaned.
    config = Config(board_size=N, komi=2.5, max_moves=6)
    gnugo = match_players.GnuGoPlayer(config, 0, 4, seed=1)
    try:
        report = match_runner.play_match(config, gnugo, match_players.RandomPlayer(), 4,
                                         parallel=4, random_openings=0)
    finally:
        gnugo.close()
    capped = [record for record in report.records if record.capped]
    assert capped and report.not_played == 0
    assert all(record.cleanup_start is None for record in capped)


@needs_gnugo
def test_dead_stones_left_by_passing_are_cleaned_up_before_scoring():
    # GNU Go (black) passes with a dead white stone on the board; Tromp-Taylor would count it
    # alive and hand white the game (2 - 1 - 2.5 = -1.5). The cleanup phase removes it.
    config = Config(board_size=N, komi=2.5)
    gnugo = match_players.GnuGoPlayer(config, 0, 1, seed=1)
    try:
        report = match_runner.play_match(config, gnugo, Scripted([12, 7]), 1, parallel=1,
                                         random_openings=0)
    finally:
        gnugo.close()
    [record] = report.records
    assert record.cleanup_start is not None
    go = GoBatch(1, N, komi=config.komi)
    for move in record.moves[:record.cleanup_start]:
        go.play(np.array([move]))
    assert go.is_over()[0] and go.score()[0] < 0, "without cleanup white would win"
    score, board = replayed_score(record, config)
    assert not (board == -1).any()
    assert record.score == score == N * N - config.komi and record.result == 1
    assert record.gnugo_score == record.score


@needs_gnugo
def test_a_dying_gnugo_process_costs_only_its_game(tiny_net):
    config, net = tiny_net
    messages = []

    class Killed(match_players.GnuGoPlayer):
        def _genmove(self, slot, colour, moves, cleanup):
            if self.games[slot] == 1 and len(moves) >= 3 and self.processes[slot] is not None:
                os.kill(self.processes[slot].pid, signal.SIGKILL)
            return super()._genmove(slot, colour, moves, cleanup)

    player = match_players.NetPlayer(config, net, 2, 2, seed=0)
    opponent = Killed(config, 0, 2, seed=0, log=messages.append)
    try:
        report = match_runner.play_match(config, player, opponent, 3, parallel=2,
                                         log=messages.append)
    finally:
        opponent.close()
    assert report.not_played == 1 and report.games == 2
    assert [r.index for r in report.records] == [0, 2]
    assert any("game 1" in m and "not counted" in m for m in messages), messages


@needs_gnugo
def test_closing_gnugo_players_with_moves_in_flight_ends_them_at_once():
    # What a stop mid-match does (SIGTERM to evaluate.py or the trainer): the player is closed
    # while its threads wait for GNU Go's moves. Level 10 among 60 scattered 19x19 stones
    # thinks for seconds; closing must not wait for those moves, nor leave a thread waiting on
    # a stream closed under it (it waited its whole 300 s timeout), nor leave a process behind.
    messages = []
    config = Config(board_size=19, backend="cpu")
    player = match_players.GnuGoPlayer(config, 10, 4, seed=0, path=GNUGO, log=messages.append)
    slots = np.arange(4)
    player.new_games(slots, slots, np.full(4, 7.5))
    pids = [process.pid for process in player.processes]
    for move in np.random.default_rng(1).choice(19 * 19, 60, replace=False):
        player.observe(slots, np.full(4, move))

    class Black:
        @staticmethod
        def to_play(slots):
            return np.ones(len(slots), np.int64)

    player.begin_moves(Black, slots)
    time.sleep(0.5)
    assert not any(future.done() for future in player.pending.values())
    started = time.monotonic()
    player.close()
    assert time.monotonic() - started < 5
    for pid in pids:
        with pytest.raises(ProcessLookupError):   # killed and reaped, not left running
            os.kill(pid, 0)
    assert not messages, messages     # a stop is not a game lost to GNU Go


@needs_gnugo
def test_an_illegal_move_drops_the_game_and_missing_gnugo_is_a_clear_error(tiny_net):
    config = Config(board_size=N)
    messages = []
    opponent = match_players.GnuGoPlayer(config, 0, 2)
    try:
        report = match_runner.play_match(config, AlwaysCentre(), opponent, 2, parallel=2,
                                         log=messages.append)
    finally:
        opponent.close()
    assert report.not_played == 2 and report.games == 0
    assert all("illegal" in m for m in messages[:2])
    with pytest.raises(gnugo.GnuGoNotFound):
        matches.play_against_gnugo(tiny_net[0], tiny_net[1], level=0, games=2, simulations=2,
                                   gnugo_path="/nonexistent/gnugo")


def test_games_start_from_shared_random_openings_with_colours_swapped():
    first_free = Scripted(list(range(PASS)), name="first-free")
    last_free = Scripted(list(range(PASS - 1, -1, -1)), name="last-free")
    report = match_runner.play_match(Config(board_size=N), first_free, last_free, 8, parallel=3,
                                     seed=5)
    again = match_runner.play_match(Config(board_size=N), first_free, last_free, 8, parallel=8,
                                    seed=5)
    other = match_runner.play_match(Config(board_size=N), first_free, last_free, 8, parallel=3,
                                    seed=6)
    records = report.records
    assert [r.a_colour for r in records] == [1, -1] * 4
    openings = [tuple(r.moves[:2]) for r in records]
    for k in range(4):
        assert openings[2 * k] == openings[2 * k + 1]
        # Two non-pass moves on distinct points, then the scripted players take over: black's
        # (the third move) is its first free point from its end of the board.
        a, b = openings[2 * k]
        assert a != b and PASS not in (a, b)
        mover = first_free if records[2 * k].a_colour == 1 else last_free
        expected = min(set(range(PASS)) - {a, b}) if mover is first_free else \
            max(set(range(PASS)) - {a, b})
        assert records[2 * k].moves[2] == expected
    assert len(set(openings)) == 4                      # four openings, each played twice
    assert report.distinct_games == 8                   # swapped colours: other sequences
    # The openings depend on the seed only, not on how many games run at once.
    assert [r.moves for r in again.records] == [r.moves for r in records]
    assert [tuple(r.moves[:2]) for r in other.records] != openings
    scripted = match_runner.play_match(Config(board_size=N), first_free, last_free, 2, parallel=2,
                                       random_openings=0)
    assert [r.moves[:2] for r in scripted.records] == [[0, PASS - 1], [PASS - 1, 0]]


def test_checkpoint_against_checkpoint_searches_each_side_with_its_own_net(tiny_net):
    config, net = tiny_net
    calls = {"a": 0, "b": 0}

    def counting(name):
        def evaluate(planes):
            calls[name] += len(planes)
            return net(planes)
        return evaluate

    report = matches.checkpoint_vs_checkpoint(config, counting("a"), counting("b"), games=4,
                                              simulations=3, seed=1)
    assert report.games == 4 and report.not_played == 0
    assert calls["a"] > 0 and calls["b"] > 0
    for record in report.records:
        score, _ = replayed_score(record, config)
        assert record.result == np.sign(score) * record.a_colour
        assert record.gnugo_score is None           # no GNU Go in the match, no referee


@needs_gnugo
def test_cli_checkpoint_against_gnugo_and_rating(tiny_run, tmp_path):
    import evaluate
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = evaluate.main(["--run", str(tiny_run), "--black", "ckpt:latest", "--white",
                              "gnugo:0", "--games", "2", "--sims", "2"])
    assert code == 0
    text = out.getvalue()
    assert "A = ckpt:1, B = gnugo:0: 2 games (A black in 1, white in 1)" in text
    assert "0 scores differ" in text
    output = tmp_path / "elo.jsonl"
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = evaluate.main(["--run", str(tiny_run), "--rating", "--games", "4", "--sims", "2",
                              "--output", str(output)])
    assert code == 0
    assert "ckpt:1 vs random" in out.getvalue() or "random vs ckpt:1" in out.getvalue()
    assert output.read_text().startswith('{"iteration": 1, "elo": ')


def test_cli_plays_an_exported_model_file(tiny_run, tmp_path):
    import evaluate
    import export_model
    model = tmp_path / "tiny.npz"
    with contextlib.redirect_stdout(io.StringIO()):
        assert export_model.main(["--run", str(tiny_run), "--output", str(model)]) == 0
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = evaluate.main(["--black", f"model:{model}", "--white", "random", "--games", "4",
                              "--sims", "2"])
    assert code == 0
    text = out.getvalue()
    assert text.startswith("5x5, komi 7.5")               # the model's config sets the game
    assert "A = model:tiny.npz, B = random: 4 games (A black in 2, white in 2)" in text
    with pytest.raises(SystemExit, match="9x9"), contextlib.redirect_stderr(io.StringIO()):
        evaluate.main(["--black", f"model:{model}", "--white", "random", "--board-size", "9"])
    # Without --sims a model plays at its play budget, as in the GTP engine and the GUI.
    budgeted = tmp_path / "budgeted.npz"
    with contextlib.redirect_stdout(io.StringIO()):
        assert export_model.main(["--run", str(tiny_run), "--output", str(budgeted),
                                  "--play-simulations", "3"]) == 0
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert evaluate.main(["--black", f"model:{budgeted}", "--white", "random",
                              "--games", "2"]) == 0
    assert "3 simulations per net move" in out.getvalue()


def test_cli_plays_two_models_with_different_input_planes(tiny_run, tmp_path):
    # Nets of different runs see different planes (history, extra features): each must get
    # its own, the game's rules being shared. This crashed with a shape error before.
    import bp_tree
    import evaluate
    import export_model
    other_run = tmp_path / "planes"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert bp_tree.main(["--run", str(other_run), "--preset", "tiny", "--iterations", "1",
                             "--extra_features", "true", "--history", "2"]) == 0
    models = []
    for run, name in ((tiny_run, "plain.npz"), (other_run, "planes.npz")):
        models.append(tmp_path / name)
        with contextlib.redirect_stdout(io.StringIO()):
            assert export_model.main(["--run", str(run), "--output", str(models[-1])]) == 0
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = evaluate.main(["--black", f"model:{models[0]}", "--white", f"model:{models[1]}",
                              "--games", "4", "--sims", "4"])
    assert code == 0
    assert "A = model:plain.npz, B = model:planes.npz: 4 games" in out.getvalue()


# ---------------------------------------------------------------- --follow beside a trainer

def follow_lines(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def test_follow_plays_each_newer_checkpoint_until_the_trainer_stops(tmp_path):
    # A real trainer and a real follower, as two processes: the follower waits for the first
    # checkpoint, plays whichever is newest when a match ends, and stops only after the
    # trainer's last checkpoint has played. The last line's match is checked against the same
    # match played afterwards by a plain evaluate.py, and each line's positions against the
    # run's metrics. Then, the trainer gone, a follower plays the newest checkpoint alone.
    run, output = tmp_path / "run", tmp_path / "follow.jsonl"
    iterations = 6
    follow = [sys.executable, "evaluate.py", "--run", str(run), "--black", "ckpt:latest",
              "--white", "random", "--games", "4", "--sims", "3", "--seed", "5", "--follow",
              "--inference", "float32"]
    with open(tmp_path / "trainer.err", "w") as trainer_err:
        trainer = subprocess.Popen(
            [sys.executable, "bp_tree.py", "--run", str(run), "--preset", "tiny",
             "--iterations", str(iterations), "--gnugo-every", "0", "--checkpoints-to-keep",
             str(iterations)],
            cwd=PROJECT_ROOT, stdout=subprocess.DEVNULL, stderr=trainer_err)
        try:
            for _ in range(600):      # the follower starts once the trainer holds the run
                if (run / "trainer.lock").exists():
                    break
                assert trainer.poll() is None, (tmp_path / "trainer.err").read_text()
                time.sleep(0.05)
            follower = subprocess.run(follow + ["--output", str(output)], cwd=PROJECT_ROOT,
                                      capture_output=True, text=True, timeout=300)
        finally:
            trainer.wait(timeout=300)
    assert trainer.returncode == 0, (tmp_path / "trainer.err").read_text()
    assert follower.returncode == 0, follower.stderr
    lines = follow_lines(follower.stdout)
    assert [json.loads(line) for line in output.read_text().splitlines()] == lines
    played = [line["iteration"] for line in lines]
    assert played == sorted(set(played)) and played[-1] == iterations, played
    assert f"no checkpoint after {iterations} is left to play" in follower.stderr
    metrics = {record["iteration"]: record for record in
               map(json.loads, (run / "metrics.jsonl").read_text().splitlines())}
    for line in lines:
        assert line["positions"] == metrics[line["iteration"]]["positions"]
        assert line["wins"] + line["losses"] + line["draws"] == line["games"] == 4
    plain = subprocess.run(
        [sys.executable, "evaluate.py", "--run", str(run), "--black", f"ckpt:{iterations}",
         "--white", "random", "--games", "4", "--sims", "3", "--seed", "5", "--inference",
         "float32"], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)
    assert plain.returncode == 0, plain.stderr
    last = lines[-1]
    assert f"A wins {last['wins']}, loses {last['losses']}, draws {last['draws']}" in plain.stdout
    after = subprocess.run(follow, cwd=PROJECT_ROOT, capture_output=True, text=True,
                           timeout=120)
    assert after.returncode == 0, after.stderr
    assert follow_lines(after.stdout) == [last]


def test_a_follower_passes_over_a_damaged_newest_checkpoint_to_the_one_before(tmp_path):
    # The trainer has stopped and its last checkpoint is damaged: the follower names it, plays
    # the checkpoint before it (the same match as a plain evaluate.py of that checkpoint), and
    # ends. With every checkpoint damaged it says so in a line and exits 1.
    import bp_tree
    run = tmp_path / "run"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert bp_tree.main(["--run", str(run), "--preset", "tiny", "--iterations", "2",
                             "--gnugo-every", "0", "--random-every", "0"]) == 0
    checkpoints = sorted((run / "checkpoints").glob("ckpt_*.npz"))
    assert [path.name for path in checkpoints] == ["ckpt_000001.npz", "ckpt_000002.npz"]
    newest = checkpoints[-1].read_bytes()
    checkpoints[-1].write_bytes(newest[:len(newest) // 2])
    match = ["--run", str(run), "--white", "random", "--games", "4", "--sims", "3", "--seed",
             "5", "--inference", "float32"]
    follower = subprocess.run(
        [sys.executable, "evaluate.py", "--black", "ckpt:latest", "--follow", *match],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)
    assert follower.returncode == 0, follower.stderr
    assert "evaluate: checkpoint 2 cannot play" in follower.stderr
    assert follower.stderr.splitlines()[-1].endswith("no checkpoint after 1 is left to play")
    [line] = follow_lines(follower.stdout)
    assert line["iteration"] == 1 and line["games"] == 4
    plain = subprocess.run([sys.executable, "evaluate.py", "--black", "ckpt:1", *match],
                           cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)
    assert plain.returncode == 0, plain.stderr
    assert (f"A wins {line['wins']}, loses {line['losses']}, draws {line['draws']}"
            in plain.stdout)
    checkpoints[0].write_bytes(b"not a checkpoint")
    nothing = subprocess.run(
        [sys.executable, "evaluate.py", "--black", "ckpt:latest", "--follow", *match],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)
    assert nothing.returncode == 1 and not follow_lines(nothing.stdout)
    assert nothing.stderr.splitlines()[-1] == (
        f"evaluate: no readable checkpoint in {run / 'checkpoints'}"), nothing.stderr


def test_a_follower_with_average_last_plays_the_mean_export_model_writes(tmp_path):
    # --average-last N: each followed match is the mean of the checkpoint and the N-1 before
    # it, fewer at a run's start. The match must be the one a plain evaluate.py plays with the
    # model file export_model.py --average-last writes of the same checkpoints.
    import bp_tree
    import evaluate
    import export_model
    run = tmp_path / "run"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert bp_tree.main(["--run", str(run), "--preset", "tiny", "--iterations", "3",
                             "--gnugo-every", "0", "--random-every", "0",
                             "--checkpoints-to-keep", "3"]) == 0
    match = ["--white", "random", "--games", "6", "--sims", "4", "--seed", "7",
             "--inference", "float32"]
    for asked, averaged in ((2, [2, 3]), (5, [1, 2, 3])):
        follower = subprocess.run(
            [sys.executable, "evaluate.py", "--run", str(run), "--black", "ckpt:latest",
             "--follow", "--average-last", str(asked), *match],
            cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)
        assert follower.returncode == 0, follower.stderr
        assert f"A = mean of ckpt:{averaged[0]}-3" in follower.stdout, follower.stdout
        [line] = follow_lines(follower.stdout)
        assert line["iteration"] == 3 and line["averaged"] == averaged, line
        model = tmp_path / f"mean{asked}.npz"
        with contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            assert export_model.main(["--run", str(run), "--output", str(model),
                                      "--average-last", str(len(averaged))]) == 0
        plain = io.StringIO()
        with contextlib.redirect_stdout(plain), contextlib.redirect_stderr(io.StringIO()):
            assert evaluate.main(["--run", str(run), "--black", f"model:{model}", *match]) == 0
        assert (f"A wins {line['wins']}, loses {line['losses']}, draws {line['draws']}"
                in plain.getvalue()), (line, plain.getvalue())
    with pytest.raises(SystemExit), contextlib.redirect_stderr(io.StringIO()) as err:
        evaluate.parse_args(["--run", str(run), "--black", "ckpt:latest", "--average-last",
                             "2", *match])
    assert "--average-last is for --follow" in err.getvalue()


def test_a_follower_whose_checkpoints_all_fail_to_open_says_so_and_exits_1(tiny_run):
    # A checkpoint can vanish or break after the follower read the run's config (the trainer
    # keeps its last few): then every one it tries cannot play. The net's opening is made to
    # fail in the follower's own process, as it would for a checkpoint removed in between.
    script = (
        "import sys\n"
        "from games import players\n"
        "def removed(self, iteration):\n"
        "    raise players.SetupError(f'checkpoint {iteration} was removed')\n"
        "players.Checkpoints.net = removed\n"
        "import evaluate\n"
        "sys.exit(evaluate.main(sys.argv[1:]))\n")
    follower = subprocess.run(
        [sys.executable, "-c", script, "--run", str(tiny_run), "--black", "ckpt:latest",
         "--white", "random", "--games", "2", "--sims", "3", "--follow", "--inference",
         "float32"],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)
    assert follower.returncode == 1 and not follow_lines(follower.stdout), follower.stderr
    assert "evaluate: checkpoint 1 cannot play (checkpoint 1 was removed)" in follower.stderr
    assert follower.stderr.splitlines()[-1] == (
        f"evaluate: {tiny_run}'s trainer has stopped, and none of its checkpoints could be "
        f"opened"), follower.stderr


def test_a_stopped_follower_drops_the_match_in_flight_and_writes_no_line(tiny_run, tmp_path):
    # A bad --give is refused before any game, in a line, as a single match refuses it.
    refused = subprocess.run(
        [sys.executable, "evaluate.py", "--run", str(tiny_run), "--black", "ckpt:latest",
         "--white", "random", "--follow", "--give", "0.3"],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 1 and refused.stderr.splitlines()[-1].startswith(
        "evaluate: --give: give must be a multiple of 0.5"), refused.stderr
    output = tmp_path / "follow.jsonl"
    follower = subprocess.Popen(
        [sys.executable, "evaluate.py", "--run", str(tiny_run), "--black", "ckpt:latest",
         "--white", "random", "--games", "2000", "--sims", "50", "--follow", "--inference",
         "float32", "--output", str(output)],
        cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    header = follower.stdout.readline()      # the match's line: it is playing
    assert "2000 games" in header, header + follower.stderr.read()
    follower.send_signal(signal.SIGTERM)
    stdout, stderr = follower.communicate(timeout=120)
    assert follower.returncode == 128 + signal.SIGTERM, stderr
    assert stderr.splitlines()[-1] == ("evaluate: stopped by SIGTERM during the match of "
                                       "checkpoint 1, which is dropped")
    assert not follow_lines(stdout) and not output.exists()


def test_a_stop_signal_lost_on_its_way_up_still_stops_the_next_match():
    # A Stopped raised at an arbitrary point can be lost (Cython's module set-up ignores
    # errors while registering its types: a follower's SIGTERM vanished in an import of
    # numpy.random and its match played on for 45 s). The match loop checks for a stop at
    # every move, so a lost one still stops it.
    script = """if True:
        import os, signal, sys
        from games import matches
        from training.config import Config
        from training.stopping import Stopped, stop_on_signals
        stop_on_signals()
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):    # the handler raises here
                pass
        except Stopped:
            pass                     # lost on its way up
        config = Config(board_size=5, backend="cpu").validate()
        try:
            matches.play_pair(config, "random", "random", 4, 0)
        except Stopped as stop:
            print("stopped by", stop.signum)
            sys.exit(0)
        print("played on")
    """
    result = subprocess.run([sys.executable, "-c", script], cwd=PROJECT_ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == f"stopped by {signal.SIGTERM}", (
        result.stdout + result.stderr)
