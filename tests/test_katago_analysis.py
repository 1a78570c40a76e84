"""katago_analysis.py, run as KaTrain runs it (KataGo's command line, one JSON line each way),
against the shipped model: KaTrain-shaped queries for a whole 9x9 game, a terminate, bad
queries. Every answer is checked against KataGo's protocol by `check_answer`, a validator
written from the protocol's description, and the board of every turn is rebuilt with the
reference rules (tests/reference_rules.py) to check the policy's illegal points."""
from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from float_tolerance import accumulation_depths, assert_head_close
from reference_rules import ReferenceGo, move_to_gtp
from training.nets import SHIPPED_MODEL, read_config

ROOT = Path(__file__).resolve().parents[1]
N = 9
pytestmark = pytest.mark.skipif(not SHIPPED_MODEL.is_file(), reason="the shipped model is missing")


def reference_game(moves_wanted: int, seed: int = 3) -> tuple[list, list]:
    """(KataGo moves [[player, vertex]], boards after each turn) of a game of random legal
    non-pass moves, played by the reference rules."""
    rng = np.random.default_rng(seed)
    go = ReferenceGo(N, komi=7.0)
    moves, boards, colour = [], [go.board.copy()], 1
    for _ in range(moves_wanted):
        legal = np.flatnonzero(go.legal_moves()[:N * N])
        move = int(rng.choice(legal))
        go.play(move)
        moves.append(["B" if colour == 1 else "W", move_to_gtp(move, N)])
        boards.append(go.board.copy())
        colour = -colour
    return moves, boards


def katrain_query(query_id: str, moves: list, turns: list, **extra) -> str:
    """A query as KaTrain 1.20 writes one (its field set and values)."""
    query = {"rules": "japanese", "priority": 0, "analyzeTurns": turns, "maxVisits": 24,
             "komi": 7.0, "boardXSize": N, "boardYSize": N, "includeOwnership": True,
             "includeMovesOwnership": True, "includePolicy": True, "initialStones": [],
             "initialPlayer": "B", "moves": moves,
             "overrideSettings": {"reportAnalysisWinratesAs": "BLACK", "wideRootNoise": 0.04,
                                  "maxTime": 8.0},
             "reportDuringSearchEvery": 1, "id": query_id}
    query.update(extra)
    return json.dumps(query)


def is_vertex(text: str) -> bool:
    if text == "pass":
        return True
    columns = "ABCDEFGHJ"
    return (len(text) >= 2 and text[0] in columns and text[1:].isdigit()
            and 1 <= int(text[1:]) <= N)


def check_answer(answer: dict, board: np.ndarray, to_play: str, *, visits: int | None) -> None:
    """KataGo's analysis answer, field by field (docs of KataGo's analysis engine)."""
    assert isinstance(answer["id"], str) and isinstance(answer["turnNumber"], int)
    assert answer["isDuringSearch"] is False
    root = answer["rootInfo"]
    assert 0 <= root["winrate"] <= 1 and isinstance(root["scoreLead"], float)
    assert root["currentPlayer"] == to_play and isinstance(root["visits"], int)
    if visits is not None:
        assert root["visits"] >= visits
    infos = answer["moveInfos"]
    assert infos, answer
    assert [info["order"] for info in infos] == list(range(len(infos)))
    assert sum(info["visits"] for info in infos) <= root["visits"]
    for info in infos:
        assert is_vertex(info["move"]) and info["pv"][0] == info["move"]
        assert all(is_vertex(v) for v in info["pv"])
        assert 0 <= info["winrate"] <= 1 and 0 <= info["prior"] <= 1
        assert info["scoreMean"] == info["scoreLead"]
        assert -1 <= info["utility"] <= 1
        assert len(info["ownership"]) == N * N
        if info["move"] != "pass":
            column = "ABCDEFGHJ".index(info["move"][0])
            row = N - int(info["move"][1:])
            assert board[row, column] == 0, f"{info['move']} is occupied"
    visits_order = [info["visits"] for info in infos]
    assert visits_order == sorted(visits_order, reverse=True)
    ownership = np.array(answer["ownership"]).reshape(N, N)
    assert np.all(np.abs(ownership) <= 1)
    policy = np.array(answer["policy"])
    assert policy.shape == (N * N + 1,)
    occupied = board.ravel() != 0
    assert np.all(policy[:N * N][occupied] == -1), "an occupied point has a policy"
    legal = policy >= 0
    assert abs(policy[legal].sum() - 1) < 1e-4


class Engine:
    """katago_analysis.py started with KataGo's command line, as KaTrain starts KataGo."""

    def __init__(self, *extra: str, model: Path = SHIPPED_MODEL):
        self.process = subprocess.Popen(
            [sys.executable, "katago_analysis.py", "analysis", "-model", str(model),
             "-override-config", "homeDataDir=/nonexistent,maxVisits=24", *extra],
            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, bufsize=1)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put("")

    def send(self, line: str) -> None:
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def read(self, timeout: float = 120) -> dict:
        """The next answer; fails with the engine's stderr if none comes in `timeout` s."""
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            line = ""
        assert line, f"no answer within {timeout} s: {self.stderr()}"
        return json.loads(line)

    def rest(self) -> list[dict]:
        """Every answer until the engine closes its output."""
        answers = []
        while (line := self.lines.get(timeout=120)):
            answers.append(json.loads(line))
        return answers

    def stderr(self) -> str:
        self.process.kill()
        return self.process.stderr.read()


@pytest.fixture(scope="module")
def engine():
    started = Engine()
    yield started
    if started.process.poll() is None:
        started.process.kill()


def test_a_whole_game_in_one_query_is_answered_turn_by_turn(engine):
    moves, boards = reference_game(30)
    turns = list(range(len(moves) + 1))
    engine.send(katrain_query("review", moves, turns))
    finals, warnings = {}, []
    while len(finals) < len(turns):
        answer = engine.read()
        assert answer["id"] == "review", answer
        if "warning" in answer:
            warnings.append(answer)
        elif not answer["isDuringSearch"]:
            assert answer["turnNumber"] not in finals
            finals[answer["turnNumber"]] = answer
    assert warnings and all(w["field"] == "rules" for w in warnings)
    for turn, answer in finals.items():
        check_answer(answer, boards[turn], "B" if turn % 2 == 0 else "W", visits=24)


def test_memory_follows_the_searches_not_the_visit_cap(engine):
    """64 trees reserved at the 9,756-visit cap took 5.9 GB before the first answer; the
    engine's memory now grows with what it searches: a 30-turn review at 150 visits (one
    search per turn, side by side) stays within KaTrain's laptop budget of 500 MB."""
    moves, _ = reference_game(30, seed=8)
    turns = list(range(len(moves) + 1))
    engine.send(katrain_query("memory", moves, turns, maxVisits=150))
    finals = 0
    while finals < len(turns):
        answer = engine.read()
        assert "error" not in answer, answer
        finals += "moveInfos" in answer and not answer["isDuringSearch"]
    status = Path(f"/proc/{engine.process.pid}/status").read_text()
    peak_kb = int(status.split("VmHWM:")[1].split()[0])
    assert peak_kb <= 500 * 1024, f"the engine peaked at {peak_kb / 1024:.0f} MB"


def test_win_rates_follow_the_perspective_asked_for(engine):
    moves, _ = reference_game(5)
    for name, perspective in (("black", "BLACK"), ("side", "SIDETOMOVE"), ("white", "WHITE")):
        engine.send(katrain_query(name, moves, [5], maxVisits=16, reportDuringSearchEvery=0,
                                  overrideSettings={"reportAnalysisWinratesAs": perspective}))
    found = {}
    while len(found) < 3:
        answer = engine.read()
        if "moveInfos" in answer:
            found[answer["id"]] = answer
    # White is to move at turn 5: Black's view is the other side of White's.
    black, side, white = (found[k]["rootInfo"] for k in ("black", "side", "white"))
    assert side["currentPlayer"] == "W"
    # Three searches of one position, evaluated in batches of other compositions: the same
    # numbers up to the net's round-off (a win rate is (1 + value) / 2, a lead the score head).
    assert_same_search(black, side, flipped=True)
    assert_same_search(white, side, flipped=False)
    black_best = found["black"]["moveInfos"][0]
    side_best = found["side"]["moveInfos"][0]
    assert black_best["move"] == side_best["move"]
    assert_same_search(black_best, side_best, flipped=True)


def assert_same_search(info: dict, other: dict, *, flipped: bool, shift: float = 0.0) -> None:
    """`info` reports the search `other` reports, from the other side's view if `flipped`,
    and with its score lead `shift` points higher (komi), within the shipped net's round-off
    of its value and score heads (tests/float_tolerance.py)."""
    value_depth = accumulation_depths(read_config(SHIPPED_MODEL)[0])[1]
    sign = -1.0 if flipped else 1.0
    if "winrate" in info:
        assert_head_close(2 * info["winrate"] - 1, sign * (2 * other["winrate"] - 1), value_depth,
                          tanh=True)
    assert_head_close(info["scoreLead"], sign * other["scoreLead"] + shift, value_depth)


@pytest.mark.parametrize("query, field, words", [
    ({"moves": [["B", "E5"], ["W", "E5"]]}, "moves", "Illegal move 1"),
    ({"boardXSize": 19, "boardYSize": 19}, "boardXSize", "only 9x9"),
    ({"rules": "go-moku"}, "rules", "unknown rules"),
    ({"moves": [["B", "Z9"]]}, "moves", "not a point"),
    ({"moves": [["X", "E5"]]}, "moves", "expected \"B\" or \"W\""),
    ({"analyzeTurns": [5]}, "analyzeTurns", "not in 0..0"),
    ({"komi": 7.25}, "komi", "half-integer"),
    ({"maxVisits": 0}, "maxVisits", "maxVisits"),
    ({"includeOwnership": "yes"}, "includeOwnership", "true or false"),
])
def test_bad_queries_get_an_error_and_the_engine_goes_on(engine, query, field, words):
    base = {"id": "bad", "moves": [], "rules": "chinese", "boardXSize": N, "boardYSize": N,
            "maxVisits": 8}
    engine.send(json.dumps({**base, **query}))
    answer = engine.read()
    assert answer["id"] == "bad" and answer["field"] == field and words in answer["error"]
    engine.send(json.dumps({**base, "id": "after"}))
    answer = engine.read()
    assert answer["id"] == "after" and answer["rootInfo"]["visits"] >= 8


def test_lines_that_are_not_queries(engine):
    engine.send("{not json")
    assert engine.read()["error"].startswith("could not parse JSON")
    engine.send('["a list"]')
    assert engine.read() == {"error": "a query must be a JSON object"}
    engine.send('{"id": "v", "action": "query_version"}')
    answer = engine.read()
    assert answer["action"] == "query_version" and answer["id"] == "v" and answer["version"]
    engine.send('{"id": "c", "action": "clear_cache"}')
    assert engine.read() == {"id": "c", "action": "clear_cache"}


def test_terminate_stops_a_search_in_flight_and_a_queued_one():
    moves, _ = reference_game(4)
    # One search that would take minutes, reporting as it goes, and one queued behind it
    # (same priority, later): the first takes the engine's one game.
    engine = Engine("--batch-size", "1")
    engine.send(katrain_query("long", moves, [4], maxVisits=9000, reportDuringSearchEvery=0.2,
                              overrideSettings={"maxTime": 0}, rules="chinese"))
    engine.send(katrain_query("queued", moves, [2], maxVisits=9000, komi=5.5,
                              overrideSettings={"maxTime": 0}, rules="chinese"))
    partial = engine.read()
    assert partial["id"] == "long" and partial["isDuringSearch"] is True
    # The queued one is stopped first: stopped second, it could take the freed game between
    # the two lines on a loaded machine, and then ends as an active search with no visits.
    engine.send('{"id": "stop2", "action": "terminate", "terminateId": "queued"}')
    engine.send('{"id": "stop", "action": "terminate", "terminateId": "long"}')
    answers = []
    while not (any(a.get("id") == "long" and not a["isDuringSearch"] for a in answers)
               and any(a.get("id") == "queued" for a in answers)):
        answers.append(engine.read())
    acks = [a for a in answers if a.get("action") == "terminate"]
    assert {a["id"] for a in acks} == {"stop", "stop2"}
    final = next(a for a in answers if a.get("id") == "long" and not a["isDuringSearch"])
    assert 0 < final["rootInfo"]["visits"] < 9000
    queued = next(a for a in answers if a.get("id") == "queued")
    assert queued == {"id": "queued", "isDuringSearch": False, "noResults": True,
                      "turnNumber": 2}
    engine.process.kill()


def test_the_engine_answers_what_is_queued_then_exits_at_the_end_of_input():
    moves, _ = reference_game(6)
    engine = Engine()
    engine.send(katrain_query("last", moves, [6], maxVisits=8, reportDuringSearchEvery=0,
                              rules="chinese"))
    engine.process.stdin.close()
    answers = engine.rest()
    assert engine.process.wait(timeout=120) == 0
    assert [a["rootInfo"]["visits"] >= 8 for a in answers if a["id"] == "last"] == [True]


def test_a_command_line_it_cannot_use_is_refused_in_one_line(tmp_path):
    done = subprocess.run([sys.executable, "katago_analysis.py", "analysis", "-model",
                           str(tmp_path / "missing")], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and "no run directory" in done.stderr
    assert "Traceback" not in done.stderr
    done = subprocess.run([sys.executable, "katago_analysis.py", "gtp"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "invalid choice" in done.stderr


def test_a_number_too_large_is_an_error_and_the_engine_goes_on(engine):
    base = {"moves": [], "rules": "chinese", "boardXSize": N, "boardYSize": N, "maxVisits": 8}
    engine.send(json.dumps({**base, "id": "huge", "komi": 10 ** 400}))
    answer = engine.read()
    assert answer["id"] == "huge" and "too large" in answer["error"]
    # Over Python's 4,300 digits for an int: json.loads itself refuses it.
    engine.send(json.dumps({**base, "id": "long"})[:-1] + ', "komi": ' + "9" * 5000 + "}")
    assert engine.read()["error"].startswith("could not parse JSON")
    engine.send(json.dumps({**base, "id": "fine"}))
    assert engine.read()["id"] == "fine"


def komi_answers(engine: Engine, komis, turn: int = 5) -> dict:
    """{komi: the final answer} for one position of a random game at each komi."""
    moves, _ = reference_game(turn)
    answers = {}
    for komi in komis:
        engine.send(katrain_query(f"komi{komi}", moves, [turn], maxVisits=16, komi=komi,
                                  rules="chinese", reportDuringSearchEvery=0))
        answers[komi] = engine.read()
    return answers


def test_the_shipped_net_reads_the_querys_komi(engine):
    """The shipped net has the komi plane: Black's win rate and lead fall as Black gives more,
    far more than a net that ignored komi would show (the same win rate at every komi)."""
    answers = komi_answers(engine, (0.5, 7.5, 15.5))
    winrate = [answers[k]["rootInfo"]["winrate"] for k in (0.5, 7.5, 15.5)]
    lead = [answers[k]["rootInfo"]["scoreLead"] for k in (0.5, 7.5, 15.5)]
    assert winrate[0] > winrate[1] > winrate[2] and winrate[0] - winrate[2] > 0.1, winrate
    assert lead[0] > lead[1] > lead[2], lead


def test_a_net_without_the_komi_plane_shifts_its_lead_by_the_komi(tmp_path):
    """A net that trained at one komi (no komi plane; here an untrained one of the shipped
    shape): at komi 6.5 Black leads by exactly one point more than at 7.5, and the search (no
    finished game within its reach) and its win rates are the same."""
    from training.nets import build_trainer, save_model_file
    config, _ = read_config(SHIPPED_MODEL)
    config = config.overridden(komi_input=False, komi_spread=0.0, komi_wide_share=0.0,
                               handicap_share=0.0)
    model = save_model_file(tmp_path / "no_komi.npz", config,
                            build_trainer(config).state_dict(), {"made_by": "test"})
    plain = Engine(model=model)
    try:
        answers = komi_answers(plain, (7.5, 6.5))
    finally:
        plain.process.kill()
    assert_same_search(answers[6.5]["rootInfo"], answers[7.5]["rootInfo"], flipped=False,
                       shift=1.0)
    first = {i["move"]: i for i in answers[7.5]["moveInfos"]}
    for info in answers[6.5]["moveInfos"]:
        assert_same_search({"scoreLead": info["scoreLead"]}, first[info["move"]], flipped=False,
                           shift=1.0)
