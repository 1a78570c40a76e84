"""A small pure-Python MCTS, one dict-based tree per game, written to be obviously correct.

It follows the conventions documented in py_util/mcts.py and repeats the C search's arithmetic
in the same order (PUCT score ``q + (c_puct * sqrt(N)) * prior / (1 + n)``, ties to the higher
prior then the lower action, priors rounded to float32, values summed in double), so the tests
can demand the same visit counts and Q values. Unlike the C search it scores every edge.
It also hands out node ids the same way (lowest free id first, free list rebuilt on reuse), so
the same driver code runs both searches. It is slow on purpose: no arrays, no cleverness.
"""
from __future__ import annotations

import math

import numpy as np

from py_util.mcts import Leaves, RootStatistics

NEW, EXPANDED, TERMINAL, NO_ROOM = "new", "expanded", "terminal", "no_room"


def as_float32(value: float) -> float:
    return float(np.float32(value))


class Edge:
    def __init__(self, prior: float):
        self.prior = prior          # float32 value, after masking, renormalising and noise
        self.visits = 0
        self.value_sum = 0.0        # view of the player choosing the edge
        self.values: list[float] = []   # every value backed up through the edge, that view
        self.child: Node | None = None
        self.tried = False          # has had a child (kept when reuse trims the child)


class Node:
    def __init__(self, node_id: int, parent: Node | None, action: int | None):
        self.id = node_id
        self.parent = parent
        self.action = action        # action leading here from the parent
        self.state = NEW
        self.visits = 0             # own evaluation + simulations through the node
        self.value_sum = 0.0        # view of the player to move at the node
        self.pending = 0            # selections in flight (virtual visits)
        self.edges: dict[int, Edge] = {}   # legal action -> edge, ascending actions
        self.tried: list[int] = []         # actions in the order they first got a child
        self.terminal_value = 0.0


class GameTree:
    def __init__(self, max_nodes: int):
        self.max_nodes = max_nodes
        self.root = Node(0, None, None)
        self.free = list(range(max_nodes - 1, 0, -1))   # pop() gives the lowest id
        self.edges_used = 0
        self.simulations = 0
        self.pending_leaves = 0
        self.full = False
        self.overflows = 0
        self.collisions = 0
        self.nodes = {0: self.root}


class ReferenceMCTS:
    def __init__(self, batch_size: int, num_actions: int, num_simulations: int, *,
                 reuse_budget: int | None = None, c_puct: float = 1.25,
                 fpu_reduction: float = 0.25, virtual_loss: float = 1.0,
                 edges_per_node: int | None = None, num_threads: int = 0, seed: int = 0,
                 forced_playouts: float = 0.0):
        self.batch_size = batch_size
        self.num_actions = num_actions
        self.num_simulations = num_simulations
        self.reuse_budget = num_simulations if reuse_budget is None else reuse_budget
        self.max_nodes = max(2, 1 + num_simulations + self.reuse_budget)
        edges_per_node = num_actions if edges_per_node is None else edges_per_node
        self.max_edges = max(num_actions, self.max_nodes * edges_per_node)
        self.c_puct = c_puct
        self.fpu_reduction = fpu_reduction
        self.virtual_loss = virtual_loss
        self.forced_playouts = forced_playouts
        self.trees = [GameTree(self.max_nodes) for _ in range(batch_size)]

    def _games(self, games) -> list[int]:
        if games is None:
            return list(range(self.batch_size))
        games = np.asarray(games)
        if games.dtype == np.bool_:
            return [int(g) for g in np.flatnonzero(games)]
        return sorted(set(int(g) for g in games))

    # ------------------------------------------------------------------ the search itself

    def _forced_action(self, node: Node):
        """KataGo's forced playouts at a root: among children that have had a node, one whose
        visits (in flight included) n satisfy n^2 < k * P * (children's visits), the highest
        prior first, then the lower action; None if there is none."""
        children = node.visits - 1 + node.pending - 1
        best_action, best_key = None, None
        for action, edge in node.edges.items():
            if not edge.tried:
                continue
            n = edge.visits + (edge.child.pending if edge.child is not None else 0)
            if n * n < self.forced_playouts * edge.prior * children:
                key = (edge.prior, -action)
                if best_key is None or key > best_key:
                    best_action, best_key = action, key
        return best_action

    def _score_edges(self, node: Node) -> int:
        if node.parent is None and self.forced_playouts > 0:
            forced = self._forced_action(node)
            if forced is not None:
                return forced
        in_flight = node.pending - 1
        parent_q = node.value_sum / node.visits
        fpu = min(1.0, max(-1.0, parent_q - self.fpu_reduction))
        factor = self.c_puct * math.sqrt(node.visits + in_flight)
        best_action, best_key = None, None
        for action, edge in node.edges.items():
            virtual = edge.child.pending if edge.child is not None else 0
            n = edge.visits + virtual
            q = (edge.value_sum - self.virtual_loss * virtual) / n if n > 0 else fpu
            score = q + factor * edge.prior / (1 + n)
            key = (score, edge.prior, -action)
            if best_key is None or key > best_key:
                best_action, best_key = action, key
        return best_action

    def _backup(self, node: Node, value: float, in_flight: int) -> None:
        while True:
            node.visits += 1
            node.value_sum += value
            node.pending -= in_flight
            if node.parent is None:
                return
            edge = node.parent.edges[node.action]
            value = -value
            edge.visits += 1
            edge.value_sum += value
            edge.values.append(value)
            node = node.parent

    def _release(self, node: Node | None) -> None:
        while node is not None:
            node.pending -= 1
            node = node.parent

    def _mark_full(self, tree: GameTree) -> None:
        if not tree.full:
            tree.overflows += 1
        tree.full = True

    def _select_game(self, g: int, wanted: int, limit: int, found: list,
                     root_action: int = -1) -> None:
        tree = self.trees[g]
        if tree.root.state != EXPANDED:
            return
        for _ in range(wanted):
            if tree.full or tree.simulations >= limit:
                return
            node = tree.root
            node.pending += 1
            while True:
                if node.state == TERMINAL:
                    self._backup(node, node.terminal_value, 1)
                    tree.simulations += 1
                    break
                if node.state != EXPANDED:
                    if node.pending > 1:
                        self._release(node)
                        tree.collisions += 1
                        break
                    found.append((g, node.parent.id, node.action, node.id))
                    tree.simulations += 1
                    tree.pending_leaves += 1
                    break
                if node.parent is None and root_action >= 0:
                    action = root_action
                else:
                    action = self._score_edges(node)
                edge = node.edges[action]
                if edge.child is None:
                    if not tree.free:
                        self._release(node)
                        self._mark_full(tree)
                        return
                    child = Node(tree.free.pop(), node, action)
                    tree.nodes[child.id] = child
                    edge.child = child
                    if not edge.tried:
                        edge.tried = True
                        node.tried.append(action)
                edge.child.pending += 1
                node = edge.child

    def select(self, num_leaves_per_game: int = 1, games=None,
               simulation_limit: int | None = None, root_actions=None) -> Leaves:
        limit = self.num_simulations if simulation_limit is None else simulation_limit
        found: list[tuple[int, int, int, int]] = []
        for g in self._games(games):
            assert self.trees[g].pending_leaves == 0
            assert self.trees[g].root.state in (EXPANDED, TERMINAL)
            root_action = -1 if root_actions is None else int(root_actions[g])
            assert root_action == -1 or root_action in self.trees[g].root.edges
            self._select_game(g, num_leaves_per_game, limit, found, root_action)
        columns = np.array(found, dtype=np.int64).reshape(len(found), 4)
        return Leaves(*(columns[:, i].copy() for i in range(4)))

    def _expand(self, tree: GameTree, node: Node, priors, legal, value: float, terminal: bool,
                in_flight: int) -> None:
        if terminal:
            node.state = TERMINAL
            node.terminal_value = as_float32(value)
        else:
            actions = [a for a in range(self.num_actions) if legal[a]]
            total = 0.0
            for a in actions:
                total += float(priors[a])
            if tree.edges_used + len(actions) > self.max_edges:
                node.state = NO_ROOM
                self._mark_full(tree)
            else:
                uniform = not (total > 0 and math.isfinite(total))
                for a in actions:
                    prior = 1.0 / len(actions) if uniform else float(priors[a]) / total
                    node.edges[a] = Edge(as_float32(prior))
                tree.edges_used += len(actions)
                node.state = EXPANDED
        self._backup(node, float(value), in_flight)

    def expand_and_backup(self, game, node, priors, legal, values, terminal=None) -> None:
        terminal = np.zeros(len(game), dtype=bool) if terminal is None else terminal
        for i in range(len(game)):
            tree = self.trees[int(game[i])]
            leaf = tree.nodes[int(node[i])]
            assert leaf.pending == 1 and leaf.state in (NEW, NO_ROOM)
            self._expand(tree, leaf, priors[i], legal[i], float(values[i]), bool(terminal[i]), 1)
            tree.pending_leaves -= 1

    def expand_roots(self, priors, legal, values, terminal=None, games=None) -> None:
        terminal = np.zeros(self.batch_size, dtype=bool) if terminal is None else terminal
        for g in self._games(games):
            tree = self.trees[g]
            assert tree.root.state in (NEW, NO_ROOM)
            self._expand(tree, tree.root, priors[g], legal[g], float(values[g]),
                         bool(terminal[g]), 0)

    def run(self, evaluate, num_leaves_per_game: int = 1, games=None,
            simulation_limit: int | None = None, root_actions=None) -> int:
        evaluated = 0
        while not self.done(games, simulation_limit):
            leaves = self.select(num_leaves_per_game, games, simulation_limit,
                                 None if root_actions is None else root_actions())
            if len(leaves.game):
                priors, legal, values, terminal = evaluate(leaves)
                self.expand_and_backup(leaves.game, leaves.node, priors, legal, values, terminal)
                evaluated += len(leaves.game)
        return evaluated

    def done(self, games=None, simulation_limit: int | None = None) -> bool:
        limit = self.num_simulations if simulation_limit is None else simulation_limit
        for g in self._games(games):
            tree = self.trees[g]
            if tree.root.state == TERMINAL:
                continue
            if tree.root.state != EXPANDED or not (tree.full or tree.simulations >= limit):
                return False
        return True

    # ---------------------------------------------------------------- moves and games

    def mix_root_noise(self, noise, fraction: float, games=None) -> None:
        for g in self._games(games):
            for action, edge in self.trees[g].root.edges.items():
                edge.prior = as_float32((1.0 - fraction) * edge.prior
                                        + fraction * float(noise[g][action]))

    def _reset_game(self, g: int) -> None:
        tree = self.trees[g]
        overflows, collisions = tree.overflows, tree.collisions
        self.trees[g] = GameTree(self.max_nodes)
        self.trees[g].overflows, self.trees[g].collisions = overflows, collisions

    def reset(self, games=None) -> None:
        for g in self._games(games):
            self._reset_game(g)

    def advance(self, actions, games=None) -> None:
        for g in self._games(games):
            tree = self.trees[g]
            action = int(actions[g])
            child = None
            if tree.root.state == EXPANDED:
                child = tree.root.edges[action].child
            if child is None:
                self._reset_game(g)
                continue
            # Keep the child's subtree breadth-first (children in the order first tried) up to
            # the budget; a trimmed edge keeps its statistics and loses its child.
            kept, head = [child], 0
            while head < len(kept):
                node = kept[head]
                head += 1
                for action in node.tried:
                    edge = node.edges[action]
                    grandchild = edge.child
                    if grandchild is None:
                        continue
                    if len(kept) < 1 + self.reuse_budget:
                        kept.append(grandchild)
                    else:
                        edge.child = None
            tree.nodes = {node.id: node for node in kept}
            tree.free = [i for i in range(self.max_nodes - 1, -1, -1) if i not in tree.nodes]
            tree.edges_used = sum(len(node.edges) for node in kept)
            child.parent, child.action = None, None
            tree.root = child
            tree.simulations = 0
            tree.full = False

    def choose_actions(self, temperature: float = 0.0, games=None, lcb: bool = False) -> np.ndarray:
        """Greedy only: most visits, then higher prior, then lower action. With `lcb`: among
        edges with at least 2 visits and a tenth of the most visited edge's, the highest
        mean less 1.96 standard errors (the values' sample variance, at least 0.01), from
        each edge's list of backed-up values."""
        assert temperature == 0
        actions = np.full(self.batch_size, -1, dtype=np.int64)
        for g in self._games(games):
            edges = self.trees[g].root.edges
            actions[g] = max(edges, key=lambda a: (edges[a].visits, edges[a].prior, -a))
            if not lcb:
                continue
            most = max(edge.visits for edge in edges.values())
            bounds = {}
            for action, edge in edges.items():
                n = len(edge.values)
                if n >= 2 and n >= 0.1 * most:
                    mean = sum(edge.values) / n
                    sample = sum((v - mean) ** 2 for v in edge.values) / (n - 1)
                    bounds[action] = mean - 1.96 * math.sqrt(max(sample, 0.01) / n)
            if bounds:
                actions[g] = max(bounds, key=lambda a: (bounds[a], -a))
        return actions

    # ----------------------------------------------------------------------- read access

    def root_statistics(self) -> RootStatistics:
        legal = np.zeros((self.batch_size, self.num_actions), dtype=bool)
        for g, tree in enumerate(self.trees):
            legal[g, list(tree.root.edges)] = True
        return RootStatistics(self.root_visits(), self.root_q(), self.root_priors(), legal,
                              self.root_variance())

    def root_visits(self) -> np.ndarray:
        visits = np.zeros((self.batch_size, self.num_actions), dtype=np.int64)
        for g, tree in enumerate(self.trees):
            for action, edge in tree.root.edges.items():
                visits[g, action] = edge.visits
        return visits

    def root_q(self) -> np.ndarray:
        q = np.zeros((self.batch_size, self.num_actions), dtype=np.float64)
        for g, tree in enumerate(self.trees):
            for action, edge in tree.root.edges.items():
                if edge.visits:
                    q[g, action] = edge.value_sum / edge.visits
        return q

    def root_variance(self) -> np.ndarray:
        """The population variance of the values backed up through each root edge, from the
        values themselves (each edge keeps the list)."""
        variance = np.zeros((self.batch_size, self.num_actions), dtype=np.float64)
        for g, tree in enumerate(self.trees):
            for action, edge in tree.root.edges.items():
                if edge.values:
                    variance[g, action] = np.var(edge.values)
        return variance

    def root_priors(self) -> np.ndarray:
        priors = np.zeros((self.batch_size, self.num_actions), dtype=np.float64)
        for g, tree in enumerate(self.trees):
            for action, edge in tree.root.edges.items():
                priors[g, action] = edge.prior
        return priors

    @property
    def root_nodes(self) -> np.ndarray:
        return np.array([tree.root.id for tree in self.trees], dtype=np.int64)

    @property
    def simulations(self) -> np.ndarray:
        return np.array([tree.simulations for tree in self.trees], dtype=np.int64)

    @property
    def needs_root_expansion(self) -> np.ndarray:
        return np.array([tree.root.state in (NEW, NO_ROOM) for tree in self.trees])

    @property
    def terminal_roots(self) -> np.ndarray:
        return np.array([tree.root.state == TERMINAL for tree in self.trees])

    @property
    def overflow_counts(self) -> np.ndarray:
        return np.array([tree.overflows for tree in self.trees], dtype=np.int64)

    @property
    def collision_counts(self) -> np.ndarray:
        return np.array([tree.collisions for tree in self.trees], dtype=np.int64)
