"""A game between a human and the net, without any drawing: what the GUI's buttons and keys do.

The game is one `SearchingGames` (one board, its search tree, the net as evaluator). The net
thinks in a background thread so the window never freezes; the thread only reads the position
and grows the search tree, and hands back an `Analysis` (policy or visit counts, value, chosen
move). Every change to the game itself (a move, undo, a new game) happens on the caller's
thread, after stopping the thread, in `GameSession` methods; drawing reads `session.view`, a
snapshot refreshed after each change, never the engine.

The net's move is `games/move_choice.py`'s, as GTP's genmove picks it, except that the net
never passes back on a settled board after the human's pass: it passes when its search (or
policy) prefers the pass, with sensible moves only when nothing else is left.

The net's territory estimate (a net with ownership and score heads) is asked for on the
caller's thread, one net call per position: the planes are taken with each snapshot, while no
thread searches, and the net (a `NetProcess`) serves one call at a time.

Undo restores a `GoBatch.save()` snapshot taken before each move and empties the search tree.
Black moves first and colours alternate, so move i was Black's when i is even; in a handicap
game (the handicap stones set up, White first) White's.
"""
from __future__ import annotations

import dataclasses
import math
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from games import analysis as search_analysis
from games.handicap import fixed_handicap_vertices
from games.move_choice import policy_move, search_in_chunks, search_move
from games.search import SearchingGames
from games.sgf_records import game_to_sgf, result_text
from games.territory import area_counts, area_ownership
from kernels import coords
from training.run_directory import atomic_write_bytes

BLACK, WHITE = 1, -1
GAME = np.zeros(1, np.int64)      # the session's one game: slot 0 of the engine
MOVE, ANALYSE = "move", "analyse"
TOP_MOVES = 3                     # the search's best moves the panel lists


def colour_name(colour: int) -> str:
    return "Black" if colour == BLACK else "White"


@dataclass(frozen=True)
class Analysis:
    """What the net thinks of one position."""
    move_number: int              # the position after this many moves of the game
    to_play: int                  # side to move there, +1 / -1
    priors: np.ndarray            # float32 (A,): the net's policy over the moves it considers
    visits: np.ndarray | None     # int32 (A,): search visits per move; None without search
    value: float                  # in [-1, 1], from the view of the side to move
    simulations: int              # search simulations run for this move so far (0: policy)
    target_simulations: int
    move: int | None = None       # the chosen move, once the thinking is finished
    candidates: tuple = ()        # games.analysis.Candidate: the search's best moves, best first

    @property
    def finished(self) -> bool:
        return self.move is not None

    @property
    def black_win_chance(self) -> float:
        """The value turned into Black's winning chance, 0..1."""
        return (1.0 + self.value * self.to_play) / 2.0

    def heat(self) -> np.ndarray:
        """float (A,) in [0, 1]: visit counts (policy without search) relative to the largest."""
        weights = (self.visits.astype(np.float64) if self.visits is not None and self.visits.sum()
                   else self.priors.astype(np.float64))
        top = weights.max()
        return weights / top if top > 0 else weights


@dataclass(frozen=True)
class GameView:
    """A snapshot of the game for drawing (N = board size, A = N*N + 1)."""
    board: np.ndarray             # int8 (N, N): +1 black, -1 white, 0 empty; row 0 at the top
    to_play: int
    captures: tuple[int, int]     # stones captured by Black, by White
    legal: np.ndarray             # bool (A,): the side to move's legal moves, pass last
    moves: tuple[int, ...]
    over: bool
    resigned_by: int = 0          # the colour that resigned, 0 if none
    result: str | None = None     # SGF RE value ("B+3.5", "W+R") once the game is over
    score: float | None = None    # area score, Black - White - komi, of a game ended by passes
    areas: tuple[int, int] | None = None     # (Black's area, White's area) of that position
    ownership: np.ndarray | None = None      # int8 (N, N): who owns each point at the end

    @property
    def last_move(self) -> int | None:
        return self.moves[-1] if self.moves else None


@dataclass(frozen=True)
class Territory:
    """The net's estimate for one position of the game, from Black's view."""
    position: int                 # the session's position counter when it was computed
    ownership: np.ndarray         # float32 (N, N) in [-1, 1]: +1 Black will own the point
    black_lead: float             # expected final area margin for Black, komi included


class _Thinker(threading.Thread):
    """Analyses the game's current position in the background: the policy alone
    (`simulations == 0`), or a search grown `chunk` simulations at a time so that progress
    shows and a cancel takes effect within one chunk."""

    def __init__(self, driver: SearchingGames, purpose: str, move_number: int,
                 simulations: int, chunk: int):
        super().__init__(name=f"net-{purpose}", daemon=True)
        self.driver = driver
        self.purpose = purpose
        self.move_number = move_number
        self.simulations = simulations
        self.chunk = chunk
        self.cancelled = threading.Event()
        self.analysis: Analysis | None = None   # replaced, never mutated, as the search grows
        self.error: BaseException | None = None

    def run(self):
        try:
            if self.simulations == 0:
                self._policy()
            else:
                self._search()
        except BaseException as error:  # handed to the GUI thread, which raises it
            self.error = error

    def _policy(self):
        driver = self.driver
        policy, legal, values, _ = driver.evaluate_slots(GAME)
        priors = np.where(legal[0], policy[0], 0.0).astype(np.float32)
        total = priors.sum()
        priors = priors / total if total > 0 else legal[0] / legal[0].sum()
        self.analysis = Analysis(self.move_number, int(driver.go.to_play(GAME)[0]), priors, None,
                                 float(values[0]), 0, 0, move=policy_move(priors, legal[0]))

    def _search(self):
        driver = self.driver
        to_play = int(driver.go.to_play(GAME)[0])
        if self.cancelled.is_set():
            return
        for stats in search_in_chunks(driver, self.simulations, self.chunk):
            self.analysis = Analysis(self.move_number, to_play, stats.priors[0].copy(),
                                     stats.visits[0].copy(), float(driver.root_values()[0]),
                                     int(driver.search.simulations[0]), self.simulations,
                                     candidates=tuple(search_analysis.candidates(
                                         driver, 0, max_moves=TOP_MOVES)))
            if self.cancelled.is_set():
                return
        self.analysis = dataclasses.replace(self.analysis, move=search_move(driver, stats))


class GameSession:
    """The human plays `human_colour`, the net the other colour.

    simulations: the net's search per move; 0 = its policy alone (fast, greedy).
    search_simulations: what `toggle_search` switches to (at most the driver's own budget).
    ownership: the net's auxiliary heads, planes (k, N, N, C) -> (ownership (k, N, N), score
    (k,)) from the side to move's view (`CompiledNet.ownership`); None for a net without them.
    """

    def __init__(self, driver: SearchingGames, *, simulations: int, human_colour: int = BLACK,
                 search_simulations: int | None = None, chunk: int = 8, net_name: str = "net",
                 ownership=None):
        if human_colour not in (BLACK, WHITE):
            raise ValueError(f"human_colour must be +1 (black) or -1 (white), got {human_colour!r}")
        budget = driver.settings.simulations
        if not 0 <= simulations <= budget:
            raise ValueError(f"simulations must be in 0..{budget} (the driver's search budget)")
        self.driver = driver
        self.go = driver.go
        self.board_size = driver.board_size
        self.simulations = simulations
        self.search_simulations = min(search_simulations or budget, budget)
        self.human_colour = human_colour
        self.chunk = max(1, chunk)
        self.net_name = net_name
        self.show_overlay = False
        self._ownership = ownership
        self.show_territory = False
        self.territory: Territory | None = None
        self._position = 0                  # counts the snapshots, one per change of position
        self.moves: list[int] = []
        self._history: list = []            # GoBatch snapshot before each move
        self.handicap = 0                   # this game's handicap stones (White moves first)
        self.resigned_by = 0
        self.message = ""
        self.analysis: Analysis | None = None
        self._thinker: _Thinker | None = None
        self._refresh()

    # What the GUI asks.

    @property
    def net_colour(self) -> int:
        return -self.human_colour

    @property
    def over(self) -> bool:
        return self.view.over

    @property
    def net_to_move(self) -> bool:
        return not self.over and self.view.to_play == self.net_colour

    @property
    def thinking(self) -> bool:
        """The net is working on its own move (not merely analysing the human's position)."""
        return self._thinker is not None and self._thinker.purpose == MOVE

    @property
    def busy(self) -> bool:
        return self._thinker is not None

    def current_analysis(self) -> Analysis | None:
        """The newest analysis of the position on the board, finished or growing."""
        analysis = self.analysis
        if analysis is None or analysis.move_number != len(self.moves):
            return None
        return analysis

    def mode_text(self) -> str:
        return (f"search, {self.simulations} simulations" if self.simulations
                else "policy only, no search")

    # The turn of the clock: call often (every frame).

    def step(self) -> None:
        """Take what the thinking thread produced; play the net's move when it has chosen;
        start thinking when it is the net's turn (or the heatmap wants the human's position)."""
        self._update_territory()
        thinker = self._thinker
        if thinker is not None:
            if thinker.analysis is not None:
                self.analysis = thinker.analysis
            if thinker.is_alive():
                return
            self._thinker = None
            if thinker.error is not None:
                raise RuntimeError("the net failed while thinking") from thinker.error
            if thinker.purpose == MOVE and self.analysis is not None and self.analysis.finished:
                self._net_plays(self.analysis.move)
        self._start_thinking()

    def wait(self, timeout: float = 30.0) -> None:
        """Step until the net has nothing left to do (for tests and scripts)."""
        deadline = time.monotonic() + timeout
        while True:
            self.step()
            if self._thinker is None:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"the net is still thinking after {timeout} s")
            self._thinker.join(0.01)

    def _start_thinking(self) -> None:
        if self._thinker is not None or self.over:
            return
        if self.net_to_move:
            purpose = MOVE
        elif self.show_overlay and not self._analysed():
            purpose = ANALYSE
        else:
            return
        self._thinker = _Thinker(self.driver, purpose, len(self.moves), self.simulations, self.chunk)
        self._thinker.start()

    def _analysed(self) -> bool:
        analysis = self.current_analysis()
        return (analysis is not None and analysis.finished
                and analysis.target_simulations == self.simulations)

    def _stop_thinking(self) -> None:
        thinker, self._thinker = self._thinker, None
        if thinker is not None:
            thinker.cancelled.set()
            thinker.join()
            if thinker.error is not None:
                raise RuntimeError("the net failed while thinking") from thinker.error

    def close(self) -> None:
        self._stop_thinking()

    # The human's commands. Each returns whether it changed anything and sets `message`.

    def play(self, move: int) -> bool:
        """The human plays `move` (a flat index; N*N is pass)."""
        if self.over:
            self.message = "The game is over: N starts a new game, U takes moves back."
            return False
        if self.view.to_play != self.human_colour:
            self.message = "Wait: the net is thinking."
            return False
        vertex = coords.to_gtp(move, self.board_size)
        point = coords.from_flat(move, self.board_size)
        if point is not None and self.view.board[point] != 0:
            self.message = f"{vertex} is illegal: the point is occupied."
            return False
        self._stop_thinking()
        try:
            self._play(move)
        except ValueError as error:
            reason = str(error).split("is illegal: ", 1)[-1]
            self.message = f"{vertex} is illegal: {reason}."
            return False
        if self.over:
            self.message = self._result_message()
        elif move == self.go.pass_move:
            self.message = "You pass."
        else:
            self.message = ""
        return True

    def human_pass(self) -> bool:
        return self.play(self.go.pass_move)

    def undo(self) -> bool:
        """Take back the human's last move and the net's reply (a resignation first)."""
        self._stop_thinking()
        if self.resigned_by:
            self.resigned_by = 0
            self._refresh()
            self.message = "Resignation taken back."
            return True
        human_turns = [i for i in range(len(self.moves)) if self._mover(i) == self.human_colour]
        if not human_turns:
            self.message = "Nothing to undo."
            return False
        first = human_turns[-1]
        taken = len(self.moves) - first
        self.go.restore(self._history[first])
        self.driver.reset_search()
        del self._history[first:], self.moves[first:]
        self.analysis = None
        self._refresh()
        self.message = f"Took back {taken} move{'s' if taken > 1 else ''}."
        return True

    def resign(self) -> bool:
        if self.over:
            self.message = "The game is already over."
            return False
        self._stop_thinking()
        self.resigned_by = self.human_colour
        self._refresh()
        self.message = f"You resign: {self.view.result}. U takes it back, N starts a new game."
        return True

    def new_game(self, handicap: int | None = None) -> bool:
        """A new game, with `handicap` black stones from now on when given (0: none): at
        GTP's fixed points, and White moves first."""
        if handicap is not None:
            if handicap and fixed_handicap_vertices(self.board_size, handicap) is None:
                self.message = (f"No handicap of {handicap} stones on "
                                f"{self.board_size}x{self.board_size}.")
                return False
            self.handicap = handicap
        self._stop_thinking()
        self.driver.new_games()
        if self.handicap_points:
            stones = np.zeros(self.board_size ** 2, np.int8)
            stones[list(self.handicap_points)] = BLACK
            self.go.set_board(stones.reshape(1, self.board_size, self.board_size),
                              np.array([WHITE]), slots=GAME)
        self.moves.clear()
        self._history.clear()
        self.resigned_by = 0
        self.analysis = None
        self._refresh()
        self.message = f"New game: you play {colour_name(self.human_colour)}."
        if self.handicap:
            vertices = " ".join(fixed_handicap_vertices(self.board_size, self.handicap))
            self.message = (f"New game, handicap {self.handicap} ({vertices}), "
                            f"White first: you play {colour_name(self.human_colour)}.")
        return True

    @property
    def handicap_points(self) -> tuple:
        """The flat points of this game's handicap stones (GTP's fixed ones), () for none."""
        vertices = fixed_handicap_vertices(self.board_size, self.handicap) or []
        return tuple(coords.from_gtp(vertex, self.board_size) for vertex in vertices)

    def next_handicap(self) -> bool:
        """A new game with the next handicap: none, 2, 3, 4 stones, then none again."""
        following = {0: 2, 2: 3, 3: 4}.get(self.handicap, 0)
        if following and fixed_handicap_vertices(self.board_size, following) is None:
            following = 0
        return self.new_game(following)

    def swap_colours(self) -> bool:
        self._stop_thinking()
        self.human_colour = -self.human_colour
        self.message = (f"You now play {colour_name(self.human_colour)}, "
                        f"the net {colour_name(self.net_colour)}.")
        return True

    def toggle_overlay(self) -> bool:
        self.show_overlay = not self.show_overlay
        what = "search visits" if self.simulations else "policy"
        self.message = f"Heatmap of the net's {what}: {'on' if self.show_overlay else 'off'}."
        return True

    def toggle_territory(self) -> bool:
        if self._ownership is None:
            self.message = ("This net has no ownership head (it was trained without "
                            "--aux-heads true): no territory estimate.")
            return False
        self.show_territory = not self.show_territory
        self.message = f"The net's territory estimate: {'on' if self.show_territory else 'off'}."
        self._update_territory()
        return True

    def _update_territory(self) -> None:
        """Ask the net for the current position's estimate if it is shown and not yet known."""
        if (not self.show_territory or self.view.over
                or (self.territory is not None and self.territory.position == self._position)):
            return
        ownership, score = self._ownership(self._planes)
        black = self.view.to_play       # the heads speak for the side to move
        self.territory = Territory(self._position, (ownership[0] * black).astype(np.float32),
                                   float(score[0]) * black)

    def toggle_search(self) -> bool:
        self._stop_thinking()
        self.simulations = 0 if self.simulations else self.search_simulations
        self.analysis = None
        self.message = f"The net now plays by {self.mode_text()}."
        return True

    def save_sgf(self, directory: Path) -> Path:
        directory = Path(directory)
        names = {self.human_colour: "human", self.net_colour: self.net_name}
        data = game_to_sgf(self.board_size, self.go.komi, self.moves, self.view.result or "?",
                           black=names[BLACK], white=names[WHITE],
                           comment=f"played in play_network_gui.py against {self.net_name} "
                                   f"({self.mode_text()})",
                           handicap=self.handicap_points)
        stamp = time.strftime("%Y%m%d_%H%M%S")
        path = directory / f"game_{stamp}.sgf"
        suffix = 1
        while path.exists():
            suffix += 1
            path = directory / f"game_{stamp}_{suffix}.sgf"
        atomic_write_bytes(path, data)
        self.message = f"Saved {path}"
        return path

    # Inside.

    def _mover(self, index: int) -> int:
        first = WHITE if self.handicap_points else BLACK
        return first if index % 2 == 0 else -first

    def _play(self, move: int) -> None:
        state = self.go.save()
        self.driver.play(np.array([move], np.int64))   # raises ValueError, changing nothing
        self._history.append(state)
        self.moves.append(int(move))
        self._refresh()

    def _net_plays(self, move: int) -> None:
        self._play(move)
        vertex = coords.to_gtp(move, self.board_size)
        if self.over:
            passes = "The net passes too. " if move == self.go.pass_move else ""
            self.message = passes + self._result_message()
        elif move == self.go.pass_move:
            self.message = "The net passes: pass too (P) to end the game and count."
        else:
            self.message = f"The net played {vertex}."

    def _result_message(self) -> str:
        view = self.view
        if view.resigned_by:
            return f"{colour_name(view.resigned_by)} resigned: {view.result}."
        black, white = view.areas
        return (f"Game over: {view.result}. Area: Black {black}, White {white} "
                f"+ komi {self.go.komi:g}.")

    def _refresh(self) -> None:
        """A new snapshot; only ever called while no thread is searching."""
        self.view = self._make_view()
        self._position += 1
        self._planes = self.go.features(self.driver.history, GAME)

    def _make_view(self) -> GameView:
        go = self.go
        board = go.board(GAME)[0].copy()
        captures = go.captures(GAME)[0]
        view = GameView(board=board, to_play=int(go.to_play(GAME)[0]),
                        captures=(int(captures[0]), int(captures[1])),
                        legal=go.legal_moves(GAME)[0].copy(), moves=tuple(self.moves),
                        over=bool(go.is_over(GAME)[0]) or bool(self.resigned_by),
                        resigned_by=self.resigned_by)
        if self.resigned_by:
            return dataclasses.replace(view, result=result_text(-self.resigned_by, math.nan, True))
        if view.over:
            score = float(go.score(GAME)[0])
            return dataclasses.replace(view, score=score, areas=area_counts(board),
                                       ownership=area_ownership(board),
                                       result=result_text(float(np.sign(score)), score, False))
        return view
