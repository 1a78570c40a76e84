"""The search's node slots grow with its trees: GoBatch.add_slots gives exactly the slots a pool
built that big would have had, and NodeSlots keeps every live node in a slot of its own, holds
pages only for what the trees hold, and keeps each position through growth (checked against a
dictionary of live nodes)."""
import numpy as np

from games.node_slots import NodeSlots
from kernels import GoBatch


def test_added_slots_are_those_of_a_pool_built_that_big():
    go = GoBatch(3, 5, komi=6.5, seed=9, history_length=2)
    go.play(np.array([12, 7, 24]))
    go.komi = 2.5
    go.set_komi(np.array([1.0, 0.5, -3.0]))
    kept = go.save(np.arange(3)).data
    go.add_slots(4)
    go.add_slots(2)
    assert go.num_slots == 9
    built = GoBatch(3, 5, komi=2.5, seed=9, history_length=2, num_slots=9)
    new = np.arange(3, 9)
    np.testing.assert_array_equal(go.save(new).data, built.save(new).data)
    np.testing.assert_array_equal(go.save(np.arange(3)).data, kept)
    # Their random generators run as the bigger pool's would.
    np.testing.assert_array_equal(go.playouts(new), built.playouts(new))


def test_node_slots_against_a_dictionary_of_live_nodes():
    games, max_nodes, page = 5, 300, 16
    go = GoBatch(games, 5, history_length=1, seed=3)
    slots = NodeSlots(go, games, max_nodes, page=page)
    rng = np.random.default_rng(7)
    live: dict[tuple[int, int], int] = {}       # (game, node) -> slot
    marks: dict[tuple[int, int], float] = {}    # (game, node) -> komi written into its slot
    peak_pages = 0
    for step in range(300):
        if rng.random() < 0.15:
            released = rng.random(games) < 0.4
            slots.release(released)
            for key in [key for key in live if released[key[0]]]:
                del live[key], marks[key]
            continue
        # A search's nodes: mostly the lowest ids of a game, sometimes far ones.
        count = int(rng.integers(1, 40))
        game = rng.integers(0, games, count)
        node = np.where(rng.random(count) < 0.9, rng.integers(0, 60, count),
                        rng.integers(0, max_nodes, count))
        got = slots.slots(game, node)
        for g, i, s in zip(game.tolist(), node.tolist(), got.tolist()):
            assert live.setdefault((g, i), s) == s, "a live node moved"
        fresh = [key for key in zip(game.tolist(), node.tolist()) if key not in marks]
        fresh = list(dict.fromkeys(fresh))
        if fresh:
            values = rng.integers(-50, 50, len(fresh)).astype(float)
            go.set_komi(values, np.array([live[key] for key in fresh]))
            marks.update(zip(fresh, values.tolist()))
        used = np.array(list(live.values()))
        assert len(set(used.tolist())) == len(used), "two live nodes share a slot"
        assert used.min() >= games and used.max() < go.num_slots
        # Every position written is still there, whatever grew since.
        keys = list(marks)
        np.testing.assert_array_equal(go.komi_of(np.array([live[key] for key in keys])),
                                      [marks[key] for key in keys])
        pages = len({(g, i // page) for g, i in live})
        assert slots.pages_in_use == pages
        peak_pages = max(peak_pages, pages)
        assert slots.pages_in_pool <= 1.5 * peak_pages + 1
        assert (go.num_slots - games) % page == 0
    assert go.num_slots <= games + games * -(-max_nodes // page) * page
