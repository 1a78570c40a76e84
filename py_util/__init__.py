"""Search: batched AlphaZero MCTS over preallocated per-game tree buffers (C extension)."""
from .mcts import BatchedMCTS, Evaluation, Leaves, NodeEdges, NodeInfo, RootStatistics, NO_NODE

__all__ = ["BatchedMCTS", "Evaluation", "Leaves", "NodeEdges", "NodeInfo", "RootStatistics",
           "NO_NODE"]
