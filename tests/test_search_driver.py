"""The Go search driver: moves the tree has no edge for (an opponent's eye-filling move)
start a fresh search whose root slot holds the game's position."""
import numpy as np

from games.search import SearchingGames
from training.config import Config


def planes_evaluator(num_actions: int):
    """A deterministic stand-in net: priors and value are fixed functions of the planes."""
    weights = np.random.default_rng(0).normal(size=(10_000,)).astype(np.float32)

    def evaluate(planes):
        flat = planes.reshape(len(planes), -1)
        logits = np.stack([flat @ np.roll(weights[:flat.shape[1]], action)
                           for action in range(num_actions)], axis=1)
        policy = np.exp(logits - logits.max(axis=1, keepdims=True))
        values = np.tanh(flat @ weights[-flat.shape[1]:] / 10)
        return (policy / policy.sum(axis=1, keepdims=True)).astype(np.float32), values.astype(np.float32)
    return evaluate


def make(board_size=5, games=6, simulations=12):
    config = Config(board_size=board_size, komi=7.5, history=1, simulations=simulations)
    return SearchingGames(config, games, planes_evaluator(board_size ** 2 + 1), seed=4)


def test_a_move_outside_the_tree_starts_a_fresh_search():
    driver = make(games=2)
    driver.think()
    # Black B5 and A4 make A5 (flat 0) a black eye; filling it is never searched.
    for move in (1, 24, 5, 23):
        moves = np.array([move, move])
        driver.go.play(moves)
        driver.search.reset()
    driver.think()
    assert not driver.search.root_statistics().legal[:, 0].any()  # filling the eye at A5
    driver.play(np.array([0, 0]))
    assert driver.search.needs_root_expansion.all()
    np.testing.assert_array_equal(driver.go.board()[:, 0, 0], [1, 1])
    driver.think()
    roots = driver.node_slots(np.arange(2), driver.search.root_nodes)
    np.testing.assert_array_equal(driver.go.board(roots), driver.go.board())
