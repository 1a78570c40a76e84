"""GoBatch.playouts: a random sensible game to the end from each slot, in C, checked move by
move against the reference rules (tests/reference_rules.py) and a plain Python eye test.

A playout draws from its slot's generator exactly as `sensible_moves` + `random_moves(legal=)`
do, so the same game stepped from Python on a byte copy of the slot (same generator state)
names the moves the C playout played; the reference rules then judge every move and score
the end, and the C playout's score must be that score."""
from __future__ import annotations

import numpy as np
import pytest

from kernels import GoBatch
from reference_rules import ReferenceGo
from test_sensible_moves import reference_eye


def reference_of(go: GoBatch, moves_before: list[int]) -> ReferenceGo:
    ref = ReferenceGo(go.board_size, komi=go.komi, superko=go.superko, max_moves=go.max_moves)
    for move in moves_before:
        ref.play(move)
    return ref


@pytest.mark.parametrize("board_size, superko", [(5, False), (7, True), (9, False)])
def test_playouts_are_sensible_games_to_the_end_under_the_reference_rules(board_size, superko):
    batch = 12
    go = GoBatch(batch, board_size, komi=5.5, superko=superko, history_length=1, seed=board_size,
                 num_slots=2 * batch)
    rng = np.random.default_rng(board_size)
    # Mid-game positions with their move lists, so the reference can replay them (ko, superko).
    prefixes = [[] for _ in range(batch)]
    lengths = rng.integers(0, 3 * board_size, batch)
    for ply in range(int(lengths.max())):
        moving = np.flatnonzero((lengths > ply) & ~go.is_over())
        if len(moving):
            moves = go.random_moves(moving)
            go.play(moves, slots=moving)
            for slot, move in zip(moving.tolist(), moves.tolist()):
                prefixes[slot].append(move)
    slots = np.arange(batch)
    copies = slots + batch
    go.copy(slots, copies)
    before = go.board(slots).copy(), go.move_count(slots).copy(), go.to_play(slots).copy()

    stepped = [[] for _ in range(batch)]
    while not go.is_over(copies).all():
        live = copies[~go.is_over(copies)]
        moves = go.random_moves(live, legal=go.sensible_moves(live))
        go.play(moves, slots=live)
        for slot, move in zip(live.tolist(), moves.tolist()):
            stepped[slot - batch].append(move)

    scores = go.playouts(slots)

    n, pass_move = board_size, board_size * board_size
    for slot in range(batch):
        ref = reference_of(go, prefixes[slot])
        for move in stepped[slot]:
            assert not ref.is_over
            legal = ref.legal_moves()
            board, colour = ref.board, ref.to_play
            useful = [p for p in range(pass_move) if legal[p]
                      and not reference_eye(board, p // n, p % n, colour)]
            if move == pass_move:
                assert not useful, f"slot {slot}: passed with {len(useful)} sensible moves"
            else:
                assert move in useful, f"slot {slot}: move {move} is not a sensible move"
            ref.play(move)
        assert ref.is_over
        assert scores[slot] == ref.score(), f"slot {slot}"
    # The slots keep their positions.
    np.testing.assert_array_equal(go.board(slots), before[0])
    np.testing.assert_array_equal(go.move_count(slots), before[1])
    np.testing.assert_array_equal(go.to_play(slots), before[2])


def test_repeated_playouts_from_one_position_draw_other_games():
    go = GoBatch(1, 7, komi=0.5, history_length=0, seed=5)
    scores = [float(go.playouts([0])[0]) for _ in range(40)]
    assert len(set(scores)) > 5
    # Random sensible play from the empty board: black moves first, neither side is favoured
    # by much; both win some.
    assert min(scores) < 0 < max(scores)


def test_a_finished_position_is_scored_as_it_stands_and_duplicates_are_refused():
    go = GoBatch(2, 5, komi=0.5)
    go.play(np.array([12, 6]))
    go.play(np.array([25, 25]))
    go.play(np.array([25, 25]))
    assert go.is_over().all() and go.board([1]).any()
    np.testing.assert_array_equal(go.playouts([1]), go.score([1]))
    with pytest.raises(ValueError, match="a slot appears twice"):
        go.playouts([0, 0])
