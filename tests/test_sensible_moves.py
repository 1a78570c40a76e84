"""sensible_moves: legal moves minus filling one's own eye, pass only when nothing else is
left; known positions plus random positions against a plain Python eye test. Then how a player
picks its move among them (games/move_choice.py): the net alone, the search, passing back on a
settled board, the clock."""
import numpy as np
import pytest

from games.move_choice import Clock, MoveChooser, preferred_move, search_in_chunks
from games.search import SearchingGames
from kernels import GoBatch
from reference_rules import board_from_ascii, gtp_to_move
from training.config import Config


def sensible(ascii_board: str, to_play: int):
    stones = board_from_ascii(ascii_board)
    games = GoBatch(1, len(stones))
    games.set_board(stones[None], np.array([to_play]))
    return games.sensible_moves()[0], games.legal_moves()[0]


def test_corner_edge_and_centre_eyes_are_not_filled():
    board = """
        . X . X .
        X X X X X
        . . X . X
        . . X X X
        . . . . .
    """
    mask, legal = sensible(board, 1)
    for eye in ("A5", "C5", "E5", "D3"):
        assert legal[gtp_to_move(eye, 5)] and not mask[gtp_to_move(eye, 5)], eye
    assert mask[gtp_to_move("A1", 5)] and not mask[25]
    # White may play inside black's eyes where legal (it is not White's eye); these are suicide.
    mask, legal = sensible(board, -1)
    assert not legal[gtp_to_move("A5", 5)] and not mask[gtp_to_move("A5", 5)]


def test_false_eyes_are_filled_but_one_bad_diagonal_in_the_centre_is_still_an_eye():
    board = """
        . . . . .
        . O X O .
        . X . X .
        . . X . .
        . . . . .
    """
    mask, _ = sensible(board, 1)
    assert mask[gtp_to_move("C3", 5)]  # B2-ish diagonals: two white stones make it false
    board = """
        . . . . .
        . O X . .
        . X . X .
        . . X . .
        . . . . .
    """
    mask, _ = sensible(board, 1)
    assert not mask[gtp_to_move("C3", 5)]
    edge = """
        . . . . .
        . . . . .
        . . . . .
        O X . . .
        . . X . .
    """
    mask, _ = sensible(edge.replace(". . X . .", "X . X . ."), 1)
    assert mask[gtp_to_move("B1", 5)]  # an opponent diagonal on the edge: a false eye


def test_pass_only_when_nothing_sensible_is_left_and_on_finished_boards():
    board = """
        . X . X
        X X X X
        X . X X
        X X . X
    """
    mask, legal = sensible(board, 1)
    assert not mask[:16].any() and mask[16]
    assert legal[:16].any()
    games = GoBatch(1, 4)
    games.play(np.array([16]))
    games.play(np.array([16]))
    mask = games.sensible_moves()[0]
    assert not mask[:16].any() and mask[16]


def reference_eye(board: np.ndarray, row: int, col: int, colour: int) -> bool:
    n = len(board)
    if board[row, col] != 0:
        return False
    for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
        r, c = row + dr, col + dc
        if 0 <= r < n and 0 <= c < n and board[r, c] != colour:
            return False
    on_edge = row in (0, n - 1) or col in (0, n - 1)
    bad = sum(1 for dr in (-1, 1) for dc in (-1, 1)
              if 0 <= row + dr < n and 0 <= col + dc < n and board[row + dr, col + dc] == -colour)
    return bad == 0 if on_edge else bad <= 1


@pytest.mark.parametrize("board_size", [2, 3, 5, 7, 9])
def test_random_positions_agree_with_a_plain_eye_test(board_size):
    rng = np.random.default_rng(board_size)
    batch = 32
    games = GoBatch(batch, board_size, seed=board_size)
    for ply in range(3 * board_size * board_size):
        mask = games.sensible_moves()
        legal = games.legal_moves()
        boards, sides, over = games.board(), games.to_play(), games.is_over()
        for index in range(batch):
            expected = legal[index].copy()
            for point in np.flatnonzero(expected[:-1]):
                if reference_eye(boards[index], *divmod(point, board_size), sides[index]):
                    expected[point] = False
            expected[-1] = not expected[:-1].any()
            np.testing.assert_array_equal(mask[index], expected, err_msg=f"board {index} ply {ply}")
        moves = games.random_moves(include_pass=rng.random() < 0.1)
        games.play(moves)
        if over.any():
            games.reset(over)


# How a player picks its move (games/move_choice.py), on 5x5 positions.

GAME = np.zeros(1, np.int64)
PASS = 25
# Black's wall on B splits off A (Black's), White's on C keeps D-E: every empty point touches
# one colour only. Black 10, White 15: W+5.5 at komi 0.5.
SETTLED = """
    . X O . .
    . X O . .
    . X O . .
    . X O . .
    . X O . .
"""
# White wins the count (Black 5, White 15: W+10.5), but column B touches both colours: not
# settled.
NEUTRAL = SETTLED.replace(". X O", "X . O")


def uniform_net(planes):
    actions = planes.shape[1] * planes.shape[2] + 1
    return (np.full((len(planes), actions), 1 / actions, np.float32),
            np.zeros(len(planes), np.float32))


def chooser(ascii_board: str, to_play: int, evaluator=uniform_net, use_search=True):
    config = Config(board_size=5, komi=0.5, history=1, simulations=16)
    driver = SearchingGames(config, 1, evaluator, seed=0, num_threads=1)
    driver.go.set_board(board_from_ascii(ascii_board)[None], np.array([to_play]), slots=GAME)
    return MoveChooser(driver, GAME, 16, use_search=use_search)


def test_a_move_excluded_gives_way_to_the_next_and_pass_comes_last():
    preferences = np.array([0.9, 0.1, -1.0, -1.0])     # action 3 is pass
    assert preferred_move(preferences) == 0
    assert preferred_move(preferences, lambda move: move == 0) == 1
    assert preferred_move(preferences, lambda move: move < 2) == 3


def test_the_net_alone_plays_its_highest_prior_but_never_fills_its_own_eye():
    def fond_of_a5(planes):   # A5, Black's own eye, first; then C3
        policy, values = uniform_net(planes)
        policy[:, gtp_to_move("A5", 5)], policy[:, gtp_to_move("C3", 5)] = 0.5, 0.3
        return policy, values
    board = """
        . X . . .
        X X . . .
        . . . . .
        . . . . .
        . . . . .
    """
    choice = chooser(board, 1, fond_of_a5, use_search=False).choose(1, opponent_passed=False)
    assert choice.move == gtp_to_move("C3", 5)
    assert choice.comment == "win rate 50.0%, net alone"


def test_passing_back_needs_the_opponents_pass_a_winning_count_and_a_settled_board():
    player = chooser(SETTLED, -1)
    assert player.score() == -5.5 and player.settled(-1)
    choice = player.choose(-1, opponent_passed=True)
    assert (choice.move, choice.value) == (PASS, None)
    assert choice.comment == "the opponent passed; settled, and wins by area"
    assert player.choose(-1, opponent_passed=False).move != PASS
    assert player.choose(-1, opponent_passed=True, cleanup=True).move != PASS
    assert chooser(SETTLED, 1).choose(1, opponent_passed=True).move != PASS   # Black loses
    unsettled = chooser(NEUTRAL, -1)
    assert unsettled.score() == -10.5 and not unsettled.settled(-1)
    assert unsettled.choose(-1, opponent_passed=True).move != PASS


def test_a_search_in_chunks_shows_each_chunk_and_stops_at_the_simulations():
    player = chooser(NEUTRAL, -1)
    visits = [int(stats.visits[0].sum()) for stats in search_in_chunks(player.driver, 16, 4)]
    assert visits == [4, 8, 12, 16]
    assert len(list(search_in_chunks(player.driver, 16, 4))) == 1     # nothing left to search
    assert player.driver.search.simulations[0] == 16


def test_the_clock_gives_each_move_a_share_of_the_time_left():
    assert Clock().budget(1, 81) is None                                   # no time_settings
    assert Clock(0, 1, 0, active=True).budget(1, 81) is None               # byo-yomi, no stones
    assert Clock(60, 0, 0, active=True).budget(1, 81) == pytest.approx(0.8 * 60 / 27 - 0.05)
    assert Clock(60, 0, 0, active=True).budget(1, 9) == pytest.approx(0.8 * 60 / 8 - 0.05)
    clock = Clock(60, 30, 5, active=True, left={1: (10, 2), -1: (0, 0)})
    assert clock.budget(1, 81) == pytest.approx(0.8 * 10 / 2 - 0.05)       # stones to play
    assert clock.budget(-1, 81) == pytest.approx(0.8 * 30 / 5 - 0.05)      # into byo-yomi
