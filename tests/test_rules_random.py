"""Seeded random games: the engine (a whole batch at once) against reference_rules.py (one game
at a time), compared after every move: board, legal mask, captures, side to move, move count,
score and game end. Moves are biased toward captures (and so ko fights), passes (so two-pass
endings happen) and, now and then, an illegal move that must be refused for the whole batch.
Along the way copy_play, copy, save/restore, features and random_moves are checked too.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from kernels import GoBatch
from reference_rules import ReferenceGo, board_from_ascii, board_to_ascii, move_to_gtp

HISTORY = 3


class Mismatch(AssertionError):
    pass


class Match:
    """One engine batch and its reference games, played in lockstep."""

    def __init__(self, board_size, batch, seed, superko=False, max_moves=None, komi=7.5,
                 pass_rate=None):
        self.n = board_size
        self.pass_rate = 1.0 / board_size ** 2 if pass_rate is None else pass_rate
        self.batch = batch
        self.rng = np.random.default_rng(seed)
        self.engine = GoBatch(batch_size=batch, board_size=board_size, komi=komi, backend="cpu",
                              superko=superko, max_moves=max_moves, history_length=HISTORY,
                              num_slots=2 * batch, seed=seed)
        self.rules = dict(komi=komi, superko=superko, max_moves=max_moves)
        self.refs = [ReferenceGo(board_size, **self.rules) for _ in range(batch)]
        self.label = (f"{board_size}x{board_size} seed={seed} superko={superko} "
                      f"max_moves={max_moves} komi={komi}")
        self.counts = dict.fromkeys(
            ["moves", "illegal", "copy_play", "copy", "restore", "set_board", "reset", "features",
             "random_moves", "two-pass ends", "ko bans", "superko bans"], 0)


    def where(self, game, refs=None):
        """A failure report: the game's moves (a reproduction) and the reference board."""
        ref = (refs or self.refs)[game]
        moves = " ".join(move_to_gtp(m, self.n) for m in ref.moves)
        return (f"[{self.label}] game {game} after moves {moves or '(none)'}\n"
                f"reference board ({'black' if ref.to_play == 1 else 'white'} to move):\n"
                f"{board_to_ascii(ref.board)}")

    def compare(self, refs=None, slots=None, what="position"):
        """Every observable of the engine slots against the reference games."""
        refs = refs or self.refs
        e = self.engine
        got = {
            "board": e.board(slots),
            "legal": e.legal_moves(slots),
            "captures": e.captures(slots),
            "to_play": e.to_play(slots),
            "move_count": e.move_count(slots),
            "score": e.score(slots),
            "is_over": e.is_over(slots),
        }
        want = {
            "board": np.stack([r.board for r in refs]),
            "legal": np.stack([r.legal_moves() for r in refs]),
            "captures": np.array([r.captures for r in refs]),
            "to_play": np.array([r.to_play for r in refs]),
            "move_count": np.array([r.move_count for r in refs]),
            "score": np.array([r.score() for r in refs]),
            "is_over": np.array([r.is_over for r in refs]),
        }
        for key in want:
            if got[key].shape != want[key].shape or not np.array_equal(got[key], want[key]):
                bad = [i for i in range(len(refs))
                       if not np.array_equal(got[key][i], want[key][i])]
                i = bad[0]
                detail = ""
                if key == "legal":
                    diff = np.flatnonzero(got[key][i] != want[key][i])
                    detail = "; differing moves: " + ", ".join(
                        f"{move_to_gtp(m, self.n)} engine={bool(got[key][i][m])} "
                        f"reference={bool(want[key][i][m])} "
                        f"({refs[i].illegal_reason(int(m))})" for m in diff)
                elif key == "board":
                    detail = f"\nengine board:\n{board_to_ascii(got[key][i])}"
                else:
                    detail = f": engine {got[key][i]!r}, reference {want[key][i]!r}"
                raise Mismatch(f"{what}: {key} differs in {len(bad)} game(s); first:\n"
                               f"{self.where(i, refs)}{detail}")


    def choose(self, game):
        """A legal move for one game, biased toward captures and passes."""
        ref = self.refs[game]
        rng = self.rng
        if ref.is_over:
            return ref.pass_move
        if ref.passes == 1 and rng.random() < 3 * self.pass_rate:
            return ref.pass_move           # answer a pass: a two-pass ending
        if rng.random() < self.pass_rate:
            return ref.pass_move
        captures = ref.capturing_moves()
        if captures and rng.random() < 0.6:
            return int(rng.choice(captures))
        points = np.flatnonzero(ref.legal_moves()[:-1])
        if len(points) == 0:
            return ref.pass_move
        return int(rng.choice(points))

    def illegal_move(self, game):
        """An illegal move for one game, each kind (occupied, suicide, ko, superko, game over)
        about equally often; None if there is none."""
        ref = self.refs[game]
        if ref.is_over:
            return int(self.rng.integers(ref.pass_move))
        reasons = {}
        for p, reason in enumerate(ref.illegal_reasons()):
            if reason is not None:
                reasons.setdefault(reason, []).append(p)
        kinds = sorted(reasons)
        if not kinds:
            return None
        kind = kinds[int(self.rng.integers(len(kinds)))]  # each kind present equally often
        return int(self.rng.choice(reasons[kind]))


    def play(self, moves):
        self.engine.play(np.asarray(moves, dtype=np.int64))
        for ref, move in zip(self.refs, moves):
            was_over = ref.is_over
            if ref.ko_point is not None:
                self.counts["ko bans"] += 1
            if ref.superko and not ref.is_over and "superko" in ref.illegal_reasons():
                self.counts["superko bans"] += 1
            ref.play(move)
            if not was_over:
                self.counts["moves"] += 1
                if ref.is_over and ref.passes >= 2:
                    self.counts["two-pass ends"] += 1
        self.compare(what="after play")

    def try_illegal(self):
        game = int(self.rng.integers(self.batch))
        bad = self.illegal_move(game)
        if bad is None:
            return
        kind = self.refs[game].illegal_reason(bad) or "?"
        moves = [self.choose(i) for i in range(self.batch)]
        moves[game] = bad
        with pytest.raises(ValueError) as caught:
            self.engine.play(np.asarray(moves, dtype=np.int64))
        message = str(caught.value)
        gtp = move_to_gtp(bad, self.n)
        assert re.search(rf"\bboard {game}\b", message) and re.search(rf"\b{gtp}\b", message), (
            f"message {message!r} should name board {game} and {gtp}")
        self.counts["illegal"] += 1
        # all or nothing: no board of the batch changed
        self.compare(what=f"after a refused illegal {gtp} ({kind}) on board {game}")

    def check_copy_play(self):
        """Expand positions into scratch slots, some sources several times (as a search expands
        several children of one node): sources unchanged, each destination = reference copy."""
        src = self.rng.integers(self.batch, size=self.batch)
        dst = np.arange(self.batch) + self.batch
        copies = [self.refs[i].copy() for i in src]
        moves = [self.choose(int(i)) for i in src]
        self.engine.copy_play(src, dst, np.asarray(moves, dtype=np.int64))
        for copy, move in zip(copies, moves):
            copy.play(move)
        self.compare(copies, dst, "copy_play destination")
        self.compare(what="copy_play source")
        self.counts["copy_play"] += 1

    def check_copy(self):
        src = np.arange(self.batch)
        dst = self.rng.permutation(self.batch) + self.batch
        self.engine.copy(src, dst)
        order = np.argsort(dst)
        self.compare([self.refs[i] for i in order], np.sort(dst), "copy destination")
        # the copy keeps playing like the original (history, ko, superko set and all)
        copies = [self.refs[i].copy() for i in order]
        moves = [self.choose(int(i)) for i in order]
        self.engine.play(np.asarray(moves, dtype=np.int64), slots=np.sort(dst))
        for copy, move in zip(copies, moves):
            copy.play(move)
        self.compare(copies, np.sort(dst), "play in copied slots")
        self.check_features(copies, np.sort(dst))
        self.counts["copy"] += 1

    def check_set_board(self):
        """Load the current boards, with a random side to move, as fresh games in scratch slots."""
        dst = np.arange(self.batch) + self.batch
        stones = np.stack([ref.board for ref in self.refs])
        sides = self.rng.choice(np.array([1, -1], dtype=np.int8), size=self.batch)
        self.engine.set_board(stones, sides, slots=dst)
        loaded = []
        for board, side in zip(stones, sides):
            fresh = ReferenceGo(self.n, **self.rules)
            fresh.set_board(board, int(side))
            loaded.append(fresh)
        self.compare(loaded, dst, "set_board of the current boards")
        self.check_features(loaded, dst)
        self.counts["set_board"] += 1

    def check_reset(self):
        """Reset a random half of the batch mid-game: history, ko and superko start afresh."""
        mask = self.rng.random(self.batch) < 0.5
        self.engine.reset(mask)
        for i in np.flatnonzero(mask):
            self.refs[i] = ReferenceGo(self.n, **self.rules)
        self.compare(what="after reset")
        self.counts["reset"] += 1

    def check_features(self, refs=None, slots=None):
        refs = refs or self.refs
        history = int(self.rng.integers(HISTORY + 1))
        got = self.engine.features(history=history, slots=slots)
        want = np.stack([r.features(history) for r in refs])
        assert got.dtype == np.float32 and got.shape == want.shape, (got.dtype, got.shape)
        if not np.array_equal(got, want):
            game = next(i for i in range(len(refs)) if not np.array_equal(got[i], want[i]))
            channels = [c for c in range(want.shape[-1])
                        if not np.array_equal(got[game, :, :, c], want[game, :, :, c])]
            raise Mismatch(f"features(history={history}) differ in channels {channels}:\n"
                           f"{self.where(game, refs)}")
        self.counts["features"] += 1

    def check_random_moves(self):
        include_pass = bool(self.rng.integers(2))
        drawn = self.engine.random_moves(include_pass=include_pass)
        assert drawn.shape == (self.batch,)
        for i, (ref, move) in enumerate(zip(self.refs, drawn)):
            legal = ref.legal_moves()
            assert legal[move], f"random_moves drew illegal {move_to_gtp(move, self.n)}:\n" \
                                f"{self.where(i)}"
            if not include_pass and legal[:-1].any():
                assert move != ref.pass_move, f"random_moves drew pass:\n{self.where(i)}"
        self.counts["random_moves"] += 1
        return [int(m) for m in drawn]

    def run(self):
        """Play every game to its end; returns the counters."""
        self.compare(what="start")
        saved = None
        step = 0
        while not all(ref.is_over for ref in self.refs):
            step += 1
            rng = self.rng
            if step == 2 or rng.random() < 0.25:
                self.try_illegal()
            if step == 10:
                self.check_reset()
            if rng.random() < 0.03:
                self.check_copy_play()
            if rng.random() < 0.02:
                self.check_copy()
            if rng.random() < 0.02:
                self.check_set_board()
            if step == 1 or rng.random() < 0.2:
                self.check_features()
            if saved is None and rng.random() < 0.03:
                saved = (self.engine.save(), [r.copy() for r in self.refs], step)
            elif saved is not None and step - saved[2] >= 3 and rng.random() < 0.3:
                state, self.refs, _ = saved
                scratch = np.arange(self.batch) + self.batch
                self.engine.restore(state, slots=scratch)  # into other slots...
                self.compare(slots=scratch, what="after restore into other slots")
                self.engine.restore(state)                 # ...and back into its own
                self.compare(what="after restore")
                self.check_features()
                self.counts["restore"] += 1
                saved = None
                continue
            if step == 1 or rng.random() < 0.15:
                moves = self.check_random_moves()
            else:
                moves = [self.choose(i) for i in range(self.batch)]
            self.play(moves)
        self.check_features()
        return self.counts


# board size, batch, seeds, superko, max_moves: about 2,100 games in all. Every kind of case
# keeps its seeds; the batches are as large as the batching needs (several games per engine
# thread and slot reuse), not larger: each game is checked against the slow reference.
CASES = [
    (2, 64, [41], False, None),
    (2, 64, [42], True, None),
    (3, 64, [43], False, None),
    (3, 64, [44], True, None),
    (4, 64, [45], False, None),
    (4, 64, [46], True, None),
    (5, 96, [1, 2, 3, 4, 5, 6], False, None),
    (5, 96, [7, 8, 9], True, None),
    (5, 96, [10], False, 12),
    (5, 96, [17], True, 30),
    (7, 64, [11, 12, 13, 14, 15], False, None),
    (7, 64, [18, 19, 20], True, None),
    (7, 64, [16], False, 20),
    (9, 32, [21, 22, 24], False, None),
    (9, 32, [23], True, None),
    (19, 4, [31], False, None),
    (19, 2, [32], True, None),
]
PARAMS = [pytest.param(n, b, s, k, m, id=f"{n}x{n}-B{b}-seed{s}{'-superko' if k else ''}"
                       f"{f'-max{m}' if m else ''}")
          for n, b, seeds, k, m in CASES for s in seeds]


@pytest.mark.parametrize("board_size, batch, seed, superko, max_moves", PARAMS)
def test_random_games_agree_with_reference(board_size, batch, seed, superko, max_moves):
    match = Match(board_size, batch, seed, superko=superko, max_moves=max_moves,
                  komi=[7.5, 0.5, 6.0][seed % 3])
    counts = match.run()
    # the bias really produced the interesting cases (not a test of the engine but of the test)
    assert counts["illegal"] > 0 and counts["features"] > 0 and counts["random_moves"] > 0
    if max_moves is None and 4 <= board_size < 19:
        assert counts["two-pass ends"] > 0 and counts["ko bans"] > 0
    if superko and board_size <= 7:
        assert counts["superko bans"] > 0


@pytest.mark.parametrize("board_size, max_moves", [(3, 200), (4, 300)])
def test_long_superko_games_on_small_boards(board_size, max_moves):
    """Hundreds of moves on a tiny board: the superko history must hold every position."""
    match = Match(board_size, 16, seed=board_size, superko=True, max_moves=max_moves,
                  pass_rate=0.0)
    counts = match.run()
    assert max(ref.move_count for ref in match.refs) > 4 * board_size ** 2
    assert counts["superko bans"] > 10


UNIFORM_POSITION = """
    . . . O .
    . . . O O
    . X . . .
    . . . . .
    . . . . ."""


def test_random_moves_are_legal_and_roughly_uniform():
    stones = board_from_ascii(UNIFORM_POSITION)
    ref = ReferenceGo(5)
    ref.set_board(stones, 1)
    legal = ref.legal_moves()[:-1]
    # black to move: four points occupied, E5 is suicide (white's eye), 20 points legal
    assert legal.sum() == 20 and not legal[4]
    batch = 1000
    engine = GoBatch(batch_size=batch, board_size=5, seed=12345)
    engine.set_board(np.repeat(stones[None], batch, axis=0), np.ones(batch, dtype=np.int8))
    counts = np.zeros(26, dtype=np.int64)
    rounds = 20
    for _ in range(rounds):
        drawn = engine.random_moves()
        assert drawn.dtype == np.int64 and drawn.shape == (batch,)
        counts += np.bincount(drawn, minlength=26)
    assert counts[:-1][~legal].sum() == 0 and counts[-1] == 0, "illegal move or pass drawn"
    observed = counts[:-1][legal]
    expected = batch * rounds / legal.sum()
    chi2 = float(((observed - expected) ** 2 / expected).sum())
    dof = int(legal.sum()) - 1
    # mean dof, sd sqrt(2 dof): a bound of dof + 10 sd is loose but catches real bias
    assert chi2 < dof + 10 * np.sqrt(2 * dof), (chi2, observed)
    # with include_pass, pass is one more candidate
    with_pass = np.concatenate([engine.random_moves(include_pass=True) for _ in range(5)])
    assert ref.legal_moves()[with_pass].all()
    assert 0 < np.count_nonzero(with_pass == 25) < len(with_pass) / 5


def test_random_moves_pass_when_nothing_else_is_legal():
    engine = GoBatch(batch_size=2, board_size=2, seed=3)
    # black to move: the one empty point would fill black's last liberty (suicide)
    stones = np.array([[[1, 1], [1, 0]]] * 2, dtype=np.int8)
    engine.set_board(stones, np.array([1, 1], dtype=np.int8))
    for include_pass in (False, True):
        assert np.array_equal(engine.random_moves(include_pass=include_pass), [4, 4])
    engine.reset()
    engine.play(np.array([4, 4]))
    engine.play(np.array([4, 4]))     # both games over
    assert engine.is_over().all()
    assert np.array_equal(engine.random_moves(), [4, 4])


def test_random_moves_follow_the_seed():
    def draws(seed):
        engine = GoBatch(batch_size=64, board_size=9, seed=seed)
        return np.concatenate([engine.random_moves() for _ in range(3)])

    assert np.array_equal(draws(7), draws(7))
    assert not np.array_equal(draws(7), draws(8))


def test_random_move_games_against_reference():
    """Whole games chosen by random_moves alone, the way self-play drives the engine."""
    batch, n = 64, 7
    engine = GoBatch(batch_size=batch, board_size=n, seed=99)
    refs = [ReferenceGo(n) for _ in range(batch)]
    while not all(r.is_over for r in refs):
        moves = engine.random_moves(include_pass=True)
        for i, (ref, move) in enumerate(zip(refs, moves)):
            assert ref.legal_moves()[move], (i, move_to_gtp(move, n), board_to_ascii(ref.board))
            ref.play(move)
        engine.play(moves)
        assert np.array_equal(engine.board(), np.stack([r.board for r in refs]))
    assert np.array_equal(engine.score(), [r.score() for r in refs])
    assert np.array_equal(engine.captures(), [r.captures for r in refs])
