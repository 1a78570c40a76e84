"""The GTP engine's analysis (gtp/, games/analysis.py): the LCB move choice, lz-analyze,
kata-analyze and the GoGui analyze commands.

The LCB choice is checked against bounds computed by hand from the root's statistics; the
streamed info lines against Leela Zero's and KataGo's formats (KataGo's
docs/GTP_Extensions.md) and the search they report; kata-analyze's ownership and scores
against the Keras model's own heads on planes from a fresh rules engine, within the round-off
of float_tolerance.py; GoGui's principal variation against the independent reference rules;
the analysis cap against gtp/README.md. Transcripts (gtp_sessions.py) of the tiny run's net
(`tiny_run`, `loaded`: conftest.py), of a tiny run with the ownership and score heads
(`aux_run`, conftest.py too), and of a stand-in net.
"""
from __future__ import annotations

import contextlib
import io
import math
import os
import re
import time

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from float_tolerance import (accumulation_depths, assert_head_close, model_shape,  # noqa: E402
                             trunk_depth)
from games import analysis  # noqa: E402
from gtp_sessions import N, PASS, Transcript, uniform_net  # noqa: E402
from kernels import GoBatch, coords  # noqa: E402
from reference_rules import ReferenceGo, gtp_to_move, move_to_gtp  # noqa: E402

INFO_BLOCK = re.compile(r"info move (?P<move>\S+) visits (?P<visits>\d+) winrate (?P<winrate>\d+) "
                        r"prior (?P<prior>\d+) lcb (?P<lcb>\d+) order (?P<order>\d+) "
                        r"pv (?P<pv>(?:\S+)(?: (?!info )\S+)*)")


# ---------------------------------------------------------------- analysis

def analysis_blocks(line: str) -> list[dict]:
    blocks = [match.groupdict() for match in INFO_BLOCK.finditer(line)]
    assert " ".join(f"info move {b['move']} visits {b['visits']} winrate {b['winrate']} "
                    f"prior {b['prior']} lcb {b['lcb']} order {b['order']} pv {b['pv']}"
                    for b in blocks) == line, f"not Leela Zero info blocks: {line!r}"
    return blocks


def check_analysis(line: str, board: np.ndarray) -> list[dict]:
    blocks = analysis_blocks(line)
    assert blocks
    assert [int(b["order"]) for b in blocks] == list(range(len(blocks)))
    visits = [int(b["visits"]) for b in blocks]
    assert visits == sorted(visits, reverse=True) and visits[0] > 0
    for block in blocks:
        assert 0 <= int(block["winrate"]) <= 10000 and 0 <= int(block["prior"]) <= 10000
        assert int(block["lcb"]) <= int(block["winrate"])
        pv = block["pv"].split()
        assert pv[0] == block["move"]
        move = coords.from_gtp(block["move"], N)
        assert move == PASS or board.ravel()[move] == 0
    return blocks


def test_lcb_flag_makes_the_engine_play_the_best_lower_confidence_bound(tiny_run, loaded):
    import gtp_engine
    with contextlib.redirect_stderr(io.StringIO()):
        engine = gtp_engine.load_engine(gtp_engine.parse_args(["--run", str(tiny_run),
                                                              "--lcb-move-choice", "true"]))
    assert engine.config.lcb_move_choice and not loaded[0].lcb_move_choice
    config, net = loaded
    differed = 0
    for opening in ("c3", "b2", "d4", "a1", "e5", "b4"):
        for lcb in (False, True):
            gtp = Transcript((config.overridden(lcb_move_choice=lcb), net), simulations=200)
            gtp.ok(f"play b {opening}")
            move = gtp.ok("reg_genmove w")
            stats = gtp.engine.driver.search.root_statistics()
            visits, q, variance = stats.visits[0], stats.q[0], stats.variance[0]
            # By hand: among moves with 2 visits and a tenth of the most, the highest mean
            # less 1.96 standard errors (sample variance, at least 0.01).
            bounds = {a: q[a] - 1.96 * math.sqrt(
                          max(variance[a] * visits[a] / (visits[a] - 1), 0.01) / visits[a])
                      for a in range(len(visits))
                      if visits[a] >= 2 and visits[a] >= 0.1 * visits.max()}
            most_visited = int(np.argmax(visits))
            best = max(bounds, key=bounds.get) if lcb else most_visited
            assert move.upper() == move_to_gtp(best, config.board_size)
            differed += best != most_visited
            # Analysis lists the moves in the order play prefers them.
            assert analysis.candidates(gtp.engine.driver)[0].action == best
    assert differed, "no position where the bound chose another move: the test shows nothing"


def test_lz_analyze_format_min_and_max_moves_and_errors(loaded):
    # A cap far above what three lines reach: once there, no more lines would come.
    gtp = Transcript(loaded, analysis_simulations=5000)
    gtp.ok("play b C3")
    gtp.output.seek(0), gtp.output.truncate()
    started = time.monotonic()

    def stop():   # the "next command" arrives after three info lines
        return gtp.output.getvalue().count("\ninfo move ") >= 3 or time.monotonic() - started > 30

    gtp.server.execute("7 lz-analyze w 1 minmoves 30", interrupted=stop)
    output = gtp.output.getvalue()
    head, *lines, closing = output.split("\n")[:-1]
    assert head == "=7" and closing == "" and output.endswith("\n\n")
    assert len(lines) >= 3
    board = gtp.board()
    blocks = check_analysis(lines[-1], board)
    stats = gtp.engine.driver.search.root_statistics()
    assert len(blocks) == int(stats.legal[0].sum()) == N * N - 1, \
        "minmoves 30 lists every move the search considers (pass is not, with 24 points free)"
    assert sum(int(b["visits"]) for b in blocks) == int(stats.visits[0].sum())

    gtp.output.seek(0), gtp.output.truncate()
    started = time.monotonic()
    gtp.server.execute("lz-analyze 1 maxmoves 2", interrupted=stop)
    body = gtp.output.getvalue().split("\n")[1:-2]
    assert body and all(len(analysis_blocks(line)) <= 2 for line in body)
    assert gtp.error("lz-analyze 1 avoid b C4 1") == "cannot parse analyze tags"
    assert gtp.error("lz-analyze w x") == "cannot parse analyze tags"
    # Analysis does not change the game.
    assert gtp.board().sum() == 1 and "white to move" in gtp.ok("showboard")


def test_gogui_analyze_commands_all_run(loaded):
    gtp = Transcript(loaded)
    gtp.ok("play b C3")
    commands = gtp.ok("gogui-analyze_commands").split("\n")
    kinds = {line.split("/")[0] for line in commands}
    assert {"dboard"} <= kinds and len(commands) >= 2
    labels = " ".join(line.split("/")[1].lower() for line in commands)
    assert "policy" in labels and "visit" in labels
    boards = {}
    for line in commands:
        kind, _, command = line.split("/")
        body = gtp.ok(command)
        if kind == "dboard":
            values = np.array([[float(v) for v in row.split()]
                               for row in body.strip().split("\n")])
            assert values.shape == (N, N) and values.min() >= 0 and values.max() == 1.0
            assert values[2, 2] == 0, "C3 is occupied: no policy or visits there"
            boards[command] = values
        elif kind == "var":
            # A principal variation: moves legal one after the other from the position (by
            # the independent reference rules), white first, starting with the most visited
            # move of the search the visit heatmap showed (the same tree: both searched it
            # to the same simulation count).
            variation = body.split()
            assert variation, "the search made visits: the variation has a move"
            game = ReferenceGo(N)
            game.play(gtp_to_move("C3", N))
            for vertex_text in variation:
                move = gtp_to_move(vertex_text, N)
                assert game.legal_moves()[move], f"{vertex_text} in {body!r} is illegal"
                game.play(move)
            first = gtp_to_move(variation[0], N)
            assert first < PASS and boards["bgz-visit_heatmap"].flat[first] == 1.0
        elif command == "bgz-value":
            assert re.fullmatch(r"white to move: win rate \d+\.\d% after \d+ visits, "
                                r"net alone \d+\.\d%", body), body
        else:
            assert command == "bgz-net" and body == gtp.ok("bgz-net") == "a net"
    assert set(boards) == {"bgz-policy_heatmap", "bgz-visit_heatmap"}
    assert gtp.board().sum() == 1


# KataGo's kata-analyze fields (its docs/GTP_Extensions.md): floats, the mover's view.
KATA_BLOCK = re.compile(
    r"info move (?P<move>\S+) visits (?P<visits>\d+) utility (?P<utility>\S+) "
    r"winrate (?P<winrate>\S+) (?:scoreMean (?P<mean>\S+) scoreLead (?P<lead>\S+) )?"
    r"prior (?P<prior>\S+) lcb (?P<lcb>\S+) order (?P<order>\d+) "
    r"pv (?P<pv>(?:\S+)(?: (?!info |ownership )\S+)*)")


def streamed_lines(gtp, command: str, count: int = 2) -> list[str]:
    """The lines a streaming analysis command wrote before a "next command" arrived after
    `count` lines, or after a line and a second without another (the search reached its
    analysis cap: lines would repeat, so none is sent); checks the response's framing."""
    gtp.output.seek(0), gtp.output.truncate()
    started = time.monotonic()
    seen = {"lines": 0, "at": started}

    def stop():
        lines = gtp.output.getvalue().count("\ninfo move ")
        if lines != seen["lines"]:
            seen.update(lines=lines, at=time.monotonic())
        return lines >= count or (lines and time.monotonic() - seen["at"] > 1) \
            or time.monotonic() - started > 30

    gtp.server.execute(command, interrupted=stop)
    output = gtp.output.getvalue()
    head, *lines, closing = output.split("\n")[:-1]
    assert head == "=" and closing == "" and lines, output[-200:]
    return lines


def kata_line(line: str, board_size: int) -> tuple[list[dict], np.ndarray | None]:
    """(info blocks, ownership or None) of one kata-analyze line; fails on anything else."""
    info, _, ownership = line.partition(" ownership ")
    blocks = [match.groupdict() for match in KATA_BLOCK.finditer(info)]
    assert blocks and " ".join(match.group(0) for match in KATA_BLOCK.finditer(info)) == info, \
        f"not KataGo info blocks: {info!r}"
    for block in blocks:
        winrate, utility = float(block["winrate"]), float(block["utility"])
        assert 0 <= winrate <= 1 and 0 <= float(block["prior"]) <= 1
        assert abs(winrate - (1 + utility) / 2) < 1e-5
        assert 0 <= float(block["lcb"]) <= winrate + 1e-6
        assert block["pv"].split()[0] == block["move"]
    values = None
    if ownership:
        values = np.array([float(v) for v in ownership.split(" ")])
        assert values.shape == (board_size * board_size,) and np.abs(values).max() <= 1
    return blocks, values


def reference_planes(config, moves: list[str]) -> np.ndarray:
    """Input planes of the position after `moves` (alternating from black), built by a fresh
    rules engine."""
    go = GoBatch(1, N, komi=config.komi, history_length=config.history)
    for move in moves:
        go.play(np.array([coords.from_gtp(move, N)]))
    return go.features(config.history)


def test_kata_analyze_ownership_and_scores_are_the_nets_in_katagos_order(aux_run):
    import gtp_engine
    with contextlib.redirect_stderr(io.StringIO()):
        engine = gtp_engine.load_engine(gtp_engine.parse_args(["--run", str(aux_run)]))
    net = engine.evaluator
    assert net.has_aux_heads
    # 16 simulations at most: fewer than the 22 legal moves, so minmoves lists unvisited ones.
    gtp = Transcript((engine.config, net), analysis_simulations=16)
    moves = ["A5", "D2", "B5"]     # top left corner, lower right: no symmetry maps it to itself
    for colour, move in zip("bwb", moves):
        gtp.ok(f"play {colour} {move}")
    lines = streamed_lines(gtp, "kata-analyze 1 ownership true minmoves 30")
    blocks, ownership = kata_line(lines[-1], N)
    assert len(blocks) == 22 and ownership is not None
    assert [int(b["order"]) for b in blocks] == list(range(len(blocks)))

    # The reference: the Keras model's own heads on planes of the same position (white to
    # move), from a fresh rules engine. KataGo's order starts at A5 (the top left) and goes
    # row by row; the planes put row 0 at the top, as their stones show.
    planes = reference_planes(engine.config, moves)
    white, black = planes[0, ..., 0], planes[0, ..., 1]       # own (white) and opponent
    assert black[0, 0] == black[0, 1] == 1 and white[3, 3] == 1 and planes[0, ..., :2].sum() == 3
    from training.nets import read_weights
    model = read_weights(aux_run).trainer.model     # the Keras model: the reference
    outputs = model(planes, training=False)
    expected = np.tanh(np.asarray(outputs[2])[0])
    for symmetric in (np.flipud(expected), np.fliplr(expected), expected.T):
        assert np.abs(symmetric - expected).max() > 1e-3, "the position must tell orders apart"
    # The engine's ONNX graph against Keras: round-off of the trunk and the 1x1 convolution.
    shape = model_shape(model)
    ownership_depth = trunk_depth(shape) + shape.filters
    assert_head_close(ownership, expected.ravel(), ownership_depth, tanh=True)
    letters = "ABCDE"
    by_vertex = np.zeros((N, N))
    for index, value in enumerate(ownership):
        vertex = f"{letters[index % N]}{N - index // N}"     # KataGo: A5 B5 ... E5 A4 ... E1
        by_vertex[N - int(vertex[1:]), letters.index(vertex[0])] = value
    assert_head_close(by_vertex, expected, ownership_depth, tanh=True)

    # Scores: a searched move's is the negated score of the position after it (the opponent's
    # view there), in points; an unvisited move's the root's.
    root_lead = float(np.asarray(outputs[3])[0, 0]) * N * N
    score_depth = accumulation_depths(shape)[1]
    for block in blocks:
        lead = float(block["lead"])
        assert block["mean"] == block["lead"]
        if int(block["visits"]) == 0:
            assert_head_close(lead, root_lead, score_depth)
            continue
        after = reference_planes(engine.config, moves + [block["move"]])
        score = np.asarray(model(after, training=False)[3])[0, 0] * N * N
        assert_head_close(lead, -score, score_depth)
    assert any(int(b["visits"]) == 0 for b in blocks), "minmoves lists unvisited moves"

    # Without `ownership true` there is no ownership; analysis changes nothing in the game.
    assert all(kata_line(line, N)[1] is None
               for line in streamed_lines(gtp, "kata-analyze b interval 1 maxmoves 2"))
    assert gtp.board()[0, :2].tolist() == [1, 1] and "white to move" in gtp.ok("showboard")


def test_kata_analyze_of_a_net_without_aux_heads(loaded):
    gtp = Transcript(loaded)
    gtp.ok("play b C3")
    for line in streamed_lines(gtp, "kata-analyze w 1"):
        blocks, ownership = kata_line(line, N)
        assert ownership is None and all(b["lead"] is None for b in blocks)
    assert gtp.error("kata-analyze 1 ownership true") == \
        "this net has no ownership head (it was trained without --aux-heads true)"
    assert gtp.error("kata-analyze 1 ownership yes") == "cannot parse analyze tags"
    assert gtp.error("lz-analyze 1 ownership true") == "cannot parse analyze tags"
    assert "kata-analyze" in gtp.ok("list_commands").split("\n")


def analysis_until_quiet(gtp, command: str, cap: int, quiet: float = 0.5,
                         limit: float = 120) -> list[int]:
    """The total visits of every info line `command` streams, the "next command" arriving
    `quiet` seconds after a line reports `cap` visits (or when a line repeats the one before,
    or after `limit` seconds)."""
    gtp.output.seek(0), gtp.output.truncate()
    started = time.monotonic()
    seen = {"lines": [], "capped_at": None, "read": None}

    def stop():
        text = gtp.output.getvalue()
        if seen["read"] is None and "\n" in text:
            seen["read"] = text.index("\n") + 1          # past the "=" line
        end = text.rfind("\n") + 1
        if seen["read"] is not None and end > seen["read"]:
            # Only the lines completed since the last look: the output grows to megabytes.
            for line in text[seen["read"]:end - 1].split("\n"):
                seen["lines"].append(line)
                total = sum(int(v) for v in re.findall(r" visits (\d+)", line))
                if total >= cap and seen["capped_at"] is None:
                    seen["capped_at"] = time.monotonic()
            seen["read"] = end
        lines = seen["lines"]
        repeated = len(lines) >= 2 and lines[-1] == lines[-2]
        capped = seen["capped_at"] is not None and time.monotonic() - seen["capped_at"] > quiet
        return repeated or capped or time.monotonic() - started > limit

    gtp.server.execute(command, interrupted=stop)
    head, *lines, closing = gtp.output.getvalue().split("\n")[:-1]
    assert head == "=" and closing == ""
    assert all(line.startswith("info move ") for line in lines)
    return [sum(int(v) for v in re.findall(r" visits (\d+)", line)) for line in lines]


@pytest.mark.long
def test_analysis_searches_up_to_the_documented_cap_then_sends_nothing_more():
    """Lizzie's analysis stopped at 2,439 visits on 9x9 (the tree's old size) while the same
    info line came 10 times a second. gtp/README.md: analysis grows a position's search to
    min(10,000, 800,000 // (N*N + 1)) visits (9,756 on 9x9) unless --analysis-sims says
    otherwise; once there, no more lines until the next command."""
    import dataclasses

    from training.config import PRESETS
    nine = dataclasses.replace(PRESETS["tiny"], board_size=9)
    gtp = Transcript((nine, uniform_net), simulations=8, analysis_simulations=None)
    totals = analysis_until_quiet(gtp, "lz-analyze b 5", cap=9_756)
    assert totals[-1] == 9_756 > 2_439
    assert all(a < b for a, b in zip(totals, totals[1:])), \
        f"lines must grow, none may repeat: {totals[-5:]}"


def test_kata_analysis_stops_at_analysis_sims_and_sends_no_repeated_lines(loaded):
    gtp = Transcript(loaded, analysis_simulations=40)
    gtp.ok("play b C3")
    totals = analysis_until_quiet(gtp, "kata-analyze w 2 minmoves 30", cap=40)
    assert totals[-1] == 40
    assert all(a < b for a, b in zip(totals, totals[1:])), totals
    # A new request on the same position sends its (unchanged) state once, then nothing.
    assert analysis_until_quiet(gtp, "lz-analyze w 2", cap=40) == [40]
