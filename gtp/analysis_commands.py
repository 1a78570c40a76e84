"""GTP's analysis commands over one `GoEngine`'s game: Leela Zero's `lz-analyze` and KataGo's
`kata-analyze`, which share one streaming loop growing the position's search until the next
command, and GoGui's analysis commands (the policy and visit heatmaps, the principal
variation, the value). What they report (candidates, principal variations, the net's heads)
is found by games/analysis.py, as for the GUI's panel and the KataGo analysis engine.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from games import analysis
from gtp.arguments import COLOUR_NAMES, COLOURS, NATURAL, parse_colour
from gtp.protocol import GtpError, Stream

DEFAULT_ANALYSIS_INTERVAL = 100   # centiseconds, when lz-analyze is given none


@dataclass
class _AnalyzeRequest:
    colour: int
    interval: int = DEFAULT_ANALYSIS_INTERVAL   # centiseconds
    min_moves: int = 0
    max_moves: int | None = None
    ownership: bool = False


class AnalysisCommands:
    """The analysis commands of `engine` (a GoEngine): they search its position, never
    change its game."""

    def __init__(self, engine):
        self.engine = engine
        self.driver = engine.driver

    def handlers(self) -> dict:
        return {
            "lz-analyze": self.cmd_lz_analyze,
            "kata-analyze": self.cmd_kata_analyze,
            "gogui-analyze_commands": self.cmd_gogui_analyze_commands,
            "bgz-policy_heatmap": self.cmd_policy_heatmap,
            "bgz-visit_heatmap": self.cmd_visit_heatmap,
            "bgz-principal_variation": self.cmd_principal_variation,
            "bgz-value": self.cmd_value,
        }

    def cmd_lz_analyze(self, args):
        request = self._parse_analyze(args)
        return self._analysis_stream(request, lambda heads: self.analysis_line(
            request.min_moves, request.max_moves))

    def cmd_kata_analyze(self, args):
        """KataGo's analysis (docs/GTP_Extensions.md of KataGo): float win rates and priors,
        `utility` (the search's Q), and with a net that has the auxiliary heads `scoreMean`
        and `scoreLead` per move and, with `ownership true`, the net's ownership of the root
        position after the moves. Without those heads the moves come without scores, and
        `ownership true` is refused."""
        request = self._parse_analyze(args, kata=True)
        if request.ownership and not self.engine.has_ownership:
            raise GtpError("this net has no ownership head (it was trained without "
                           "--aux-heads true)")
        return self._analysis_stream(request, lambda heads: self.kata_analysis_line(
            request.min_moves, request.max_moves, request.ownership, heads))

    def _parse_analyze(self, args, kata: bool = False) -> _AnalyzeRequest:
        """[colour] [interval] [interval N] [minmoves N] [maxmoves N] (kata-analyze also
        [ownership true|false]); interval in centiseconds (0: no periodic output)."""
        words = list(args)
        request = _AnalyzeRequest(colour=self.engine.record.next_colour())
        if words and words[0].lower() in COLOURS:
            request.colour = COLOURS[words.pop(0).lower()]
        if words and NATURAL.fullmatch(words[0]):
            request.interval = int(words.pop(0))
        while words:
            key = words.pop(0)
            if kata and key == "ownership" and words and words[0] in ("true", "false"):
                request.ownership = words.pop(0) == "true"
                continue
            if key not in ("interval", "minmoves", "maxmoves") or not words \
                    or not NATURAL.fullmatch(words[0]):
                raise GtpError("cannot parse analyze tags")
            value = int(words.pop(0))
            if key == "interval":
                request.interval = value
            elif key == "minmoves":
                request.min_moves = value
            else:
                request.max_moves = value
        return request

    def _analysis_stream(self, request: _AnalyzeRequest, report) -> Stream:
        return Stream(lambda write, interrupted: self._analyze(
            request.colour, request.interval, report, write, interrupted))

    def _analyze(self, colour, interval_cs, report, write, interrupted):
        """Grow the search of `colour`'s position until the next input, writing `report()`
        every interval: the one loop of lz-analyze and kata-analyze. The search stops when the
        root's visits reach the analysis cap (`tree_simulations`, gtp/README.md); a report
        is written only when the search grew since the last one, so once the cap is reached
        nothing more is sent (the lines would repeat) until the next command."""
        engine = self.engine
        engine.prepare(colour)
        net_komi = engine.config.komi if engine.options.net_komi is None \
            else engine.options.net_komi
        heads = (analysis.Heads(self.driver, 0, analysis.komi_shift(
            colour, net_komi, engine.go.komi, engine.config.komi_input))
                 if engine.has_ownership else None)
        interval = interval_cs / 100
        next_report = time.monotonic() + interval
        reported = None           # root visits at the last line written
        while not interrupted():
            if not analysis.grow(self.driver, np.ones(1, bool), engine.tree_simulations):
                time.sleep(0.01)   # the cap is reached (or the game is over): wait for input
            if interval > 0 and time.monotonic() >= next_report:
                visits = analysis.root_visits(self.driver)
                line = report(heads) if visits != reported else ""
                if line:
                    write(line)
                    reported = visits
                next_report = time.monotonic() + interval

    def analysis_line(self, min_moves: int = 0, max_moves: int | None = None) -> str:
        """One Leela Zero `info` line for the searched root: a block per move, most visited
        first, `info move V visits N winrate W prior P lcb L order K pv V V ...`, win rates
        and priors as integers in 0..10000 from the mover's view."""
        vertex = self.engine.vertex
        return " ".join(
            f"info move {vertex(c.action)} visits {c.visits} "
            f"winrate {_permyriad(c.winrate)} prior {_permyriad(c.prior)} "
            f"lcb {_permyriad(c.lcb)} order {c.order} pv {self._pv(c)}"
            for c in analysis.candidates(self.driver, 0, min_moves, max_moves))

    def kata_analysis_line(self, min_moves: int = 0, max_moves: int | None = None,
                           ownership: bool = False, heads: analysis.Heads | None = None) -> str:
        """One KataGo `kata-analyze` line: per move `info move V visits N utility U winrate W
        [scoreMean S scoreLead S] prior P lcb L order K pv V V ...` (floats, the mover's
        view: utility is the search's Q in [-1, 1], win rate, prior and LCB in [0, 1]), then
        with `ownership` the word `ownership` and N*N floats in [-1, 1], the net's expected
        final owner of every point of the root position from the mover's view (+1: the
        mover's), row by row from the top left (A19 on 19x19) to the bottom right.
        `heads` (a net with ownership and score heads) caches the net's estimates: a move's
        score is the net's score of the position after it (the tree averages no scores), an
        unvisited move's the root's, in points for the mover, komi included."""
        found = analysis.candidates(self.driver, 0, min_moves, max_moves)
        if not found:
            return ""
        blocks = []
        if heads is not None:
            heads.prefetch([c.action for c in found if c.visits])
        for c in found:
            score = ""
            if heads is not None:
                lead = heads.move_score(c.action if c.visits else None)
                score = f"scoreMean {lead:.6g} scoreLead {lead:.6g} "
            blocks.append(f"info move {self.engine.vertex(c.action)} visits {c.visits} "
                          f"utility {c.value:.6g} winrate {c.winrate:.6g} {score}"
                          f"prior {c.prior:.6g} lcb {max(0.0, c.lcb):.6g} order {c.order} "
                          f"pv {self._pv(c)}")
        line = " ".join(blocks)
        if ownership:
            values = heads.root_ownership().ravel()
            line += " ownership " + " ".join(f"{v:.6g}" for v in values)
        return line

    def _pv(self, candidate: analysis.Candidate) -> str:
        return " ".join(self.engine.vertex(a) for a in candidate.pv)

    def cmd_gogui_analyze_commands(self, args):
        return "\n".join([
            "dboard/Policy heatmap/bgz-policy_heatmap",
            "dboard/Visit heatmap/bgz-visit_heatmap",
            "var/Principal variation/bgz-principal_variation",
            "string/Value/bgz-value",
            "string/Net/bgz-net",
        ])

    def _analysis_colour(self, args) -> int:
        if len(args) > 1:
            raise GtpError("syntax error")
        return parse_colour(args[0]) if args else self.engine.record.next_colour()

    def _searched(self, args):
        colour = self._analysis_colour(args)
        self.engine.prepare(colour)
        return colour, self.engine.chooser.search(colour, self.engine.options.simulations)

    def cmd_policy_heatmap(self, args):
        """The net's move probabilities (legal moves), scaled so the largest is 1."""
        self.engine.prepare(self._analysis_colour(args))
        policy, legal, _, _ = self.driver.evaluate_slots(self.engine.replayer.slots)
        return self._dboard(np.where(legal[0], policy[0], 0.0))

    def cmd_visit_heatmap(self, args):
        """Search visits per point, scaled so the most visited is 1."""
        _, stats = self._searched(args)
        return self._dboard(stats.visits[0].astype(np.float64))

    def cmd_principal_variation(self, args):
        self._searched(args)
        return " ".join(self.engine.vertex(a) for a in analysis.principal_variation(self.driver))

    def cmd_value(self, args):
        colour, stats = self._searched(args)
        _, _, values, _ = self.driver.evaluate_slots(self.engine.replayer.slots)
        search_winrate = (1 + float(self.driver.root_values()[0])) / 2
        return (f"{COLOUR_NAMES[colour]} to move: win rate {search_winrate:.1%} after "
                f"{int(stats.visits[0].sum())} visits, net alone {(1 + float(values[0])) / 2:.1%}")

    def _dboard(self, values: np.ndarray) -> str:
        n = self.engine.board_size
        points = values[:n * n].reshape(n, n)
        top = points.max()
        scaled = points / top if top > 0 else points
        return "\n" + "\n".join(" ".join(f"{v:.3f}" for v in row) for row in scaled)


def _permyriad(fraction: float) -> int:
    return int(round(10000 * min(1.0, max(0.0, fraction))))
