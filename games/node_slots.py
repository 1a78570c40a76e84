"""Where each search-tree node keeps its position: slots of a GoBatch pool, taken in pages as
the trees grow and handed back when a tree is emptied.

Layout. Slots 0..B-1 are the games' current positions. Every further slot belongs to a page
of PAGE consecutive slots. `table[g, p]` is the first slot of the page holding nodes
p * PAGE .. p * PAGE + PAGE - 1 of game g's tree, or -1 while that game has no such page; so
node i of game g is in slot table[g, i // PAGE] + i % PAGE. Invariants: a page belongs to at
most one (game, page number) at a time; a page is either in the table or on the free list;
the pool holds B slots plus whole pages only.

Why pages: the tree (py_util/mcts.c) hands out the lowest free node id first, so a game's
node ids stay below the number of nodes it holds, and its pages follow what it searches. A
pool sized for every tree's visit cap (B * (1 + max_nodes) slots, 5.4 kB each on 9x9) held
3.4 GB for the analysis engine's 64 trees of 9,757 nodes before it answered a query.

A page taken back (`release`) keeps its old positions: every node slot is written (a copy
from the game's position or from the parent's) before anything reads it.
"""
from __future__ import annotations

import numpy as np

from kernels import GoBatch

PAGE = 64          # nodes per page: few pages to look up per leaf batch, little slack per tree
GROWTH = 0.5       # the pool grows by at least half its pages, so copies add up to O(final size)


class NodeSlots:
    """The node-to-slot map of `num_games` trees of at most `max_nodes` nodes each, over
    `go`'s pool (whose first `num_games` slots are the games' positions)."""

    def __init__(self, go: GoBatch, num_games: int, max_nodes: int, page: int = PAGE):
        if go.num_slots != num_games:
            raise ValueError(f"the pool must start with the {num_games} games' slots only, "
                             f"got {go.num_slots}")
        self.go = go
        self.num_games = num_games
        self.page = page
        self.pages_per_game = -(-max_nodes // page)
        self.table = np.full((num_games, self.pages_per_game), -1, np.int64)
        self._free: list[int] = []       # first slots of pages no game holds

    @property
    def pages_in_use(self) -> int:
        return int((self.table >= 0).sum())

    @property
    def pages_in_pool(self) -> int:
        return (self.go.num_slots - self.num_games) // self.page

    def slots(self, game, node) -> np.ndarray:
        """int64 slot of each (game, node) pair (arrays or numbers, broadcast), giving the
        games the pages they lack."""
        game, node = np.broadcast_arrays(np.asarray(game, np.int64), np.asarray(node, np.int64))
        page = node // self.page
        first = self.table[game, page]
        missing = first < 0
        if missing.any():
            self._assign(np.unique(game[missing] * self.pages_per_game + page[missing]))
            first = self.table[game, page]
        return first + node % self.page

    def release(self, games) -> None:
        """Hand back every page of the chosen games (bool mask (B,) or indices): their trees
        were emptied."""
        rows = self.table[games]
        self._free.extend(rows[rows >= 0].tolist())
        self.table[games] = -1

    def _assign(self, keys: np.ndarray) -> None:
        """Give a free page to each flat table index in `keys`, growing the pool if short."""
        short = len(keys) - len(self._free)
        if short > 0:
            self._grow(short)
        taken = self._free[len(self._free) - len(keys):]
        del self._free[len(self._free) - len(keys):]
        self.table.flat[keys] = taken

    def _grow(self, pages: int) -> None:
        most = self.num_games * self.pages_per_game - self.pages_in_pool
        pages = min(most, max(pages, int(np.ceil(GROWTH * self.pages_in_pool))))
        first = self.go.num_slots
        self.go.add_slots(pages * self.page)
        # Lowest slots on top: pages are taken from the end of the list.
        self._free[:0] = range(first + (pages - 1) * self.page, first - 1, -self.page)
