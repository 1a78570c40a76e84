"""Playout values in the search (Config.rollout_lambda) and the net-free pure MCTS player.

- λ = 0 is the search as it was: no playout is ever played, and whole games match the
  reference search (tests/reference_mcts.py) visit for visit.
- A leaf's value is (1 - λ) v + λ z: checked on a position whose every playout has a known
  result (black owns the board with two eyes; neither side has a sensible move, so both pass).
- `mcts:SIMS` plays through the match loop (evaluate.py) and the GTP engine without a run.
"""
from __future__ import annotations

import numpy as np
import pytest

import evaluate
import gtp_engine
from games.match_players import make_player
from games.search import SearchingGames
from kernels import GoBatch, coords
from py_util import BatchedMCTS
from reference_mcts import ReferenceMCTS
from reference_rules import board_from_ascii
from test_search_go import play_to_the_end, stand_in_net
from training.config import Config


def test_lambda_zero_plays_no_playout_and_matches_the_reference_search(monkeypatch):
    def refuse(self, slots=None):
        raise AssertionError("a playout was played with rollout_lambda 0")
    monkeypatch.setattr(GoBatch, "playouts", refuse)
    config = Config(board_size=5, simulations=12, rollout_lambda=0.0)
    histories = []
    for make in (BatchedMCTS, ReferenceMCTS):
        search = make(4, 26, 12, c_puct=config.c_puct, fpu_reduction=config.fpu_reduction)
        driver = SearchingGames(config, 4, stand_in_net(26, 3), seed=3, search=search)
        history = []
        play_to_the_end(driver, greedy_after=0,
                        check=lambda active: history.append(search.root_visits().copy()))
        histories.append(history)
    assert len(histories[0]) == len(histories[1])
    for c_visits, r_visits in zip(*histories):
        np.testing.assert_array_equal(c_visits, r_visits)


SETTLED = """
    X X X X X
    X . X X X
    X X X X X
    X X X . X
    X X X X X
"""


@pytest.mark.parametrize("mix", [0.0, 0.25, 0.5, 1.0])
def test_leaf_value_is_the_mix_of_net_value_and_playout_result(mix):
    net_value = 0.3

    def evaluator(planes):
        k = len(planes)
        return np.full((k, 26), 1 / 26, np.float32), np.full(k, net_value, np.float32)

    driver = SearchingGames(Config(board_size=5, komi=0.5, rollout_lambda=mix), 2, evaluator)
    stones = board_from_ascii(SETTLED)
    driver.go.set_board(np.stack([stones, stones]), np.array([1, -1]), slots=np.array([0, 1]))
    _, _, values, terminal = driver.evaluate_slots(np.array([0, 1]))
    assert not terminal.any()
    # Every playout: white has no legal point, black fills no eye, both pass; black wins by
    # 24.5, which is +1 for black to move and -1 for white to move.
    expected = [(1 - mix) * net_value + mix * 1.0, (1 - mix) * net_value - mix * 1.0]
    np.testing.assert_allclose(values, expected, rtol=0, atol=1e-6)


def test_rollout_lambda_outside_zero_to_one_is_refused():
    with pytest.raises(ValueError, match="rollout_lambda must be in"):
        Config(rollout_lambda=1.5).validate()


def test_pure_mcts_beats_random_through_evaluate(capsys):
    assert evaluate.main(["--black", "mcts:64", "--white", "random", "--board-size", "7",
                          "--games", "6"]) == 0
    output = capsys.readouterr().out
    wins = int(output.split("A wins ")[1].split(",")[0])
    # 64 playouts per move against uniformly random moves: a random player wins a 7x7 game
    # against it very rarely.
    assert wins >= 5, output


def test_a_bad_mcts_spec_is_refused():
    with pytest.raises(ValueError, match="mcts:SIMS"):
        make_player(Config(), "mcts:0", "x", 2, 8)
    with pytest.raises(SystemExit):
        evaluate.parse_args(["--black", "mcts:lots", "--white", "random"])


def test_gtp_engine_plays_pure_mcts_without_a_run():
    engine = gtp_engine.load_engine(gtp_engine.parse_args(
        ["--player", "mcts:40", "--board-size", "5", "--komi", "0.5"]))
    handlers = engine.handlers()
    assert handlers["boardsize"](["5"]) == ""
    handlers["clear_board"]([])
    vertex = handlers["genmove"](["b"])
    go = GoBatch(1, 5)
    move = coords.from_gtp(vertex, 5)
    assert go.sensible_moves()[0, move]
    with pytest.raises(SystemExit):
        gtp_engine.parse_args(["--player", "mcts:40", "--run", "x"])
