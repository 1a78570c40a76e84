"""Batched Go rules: `GoBatch` over a CPU (C, OpenMP) or CUDA back end sharing go_rules.h."""
from .go_batch import GoBatch, GoState

__all__ = ["GoBatch", "GoState"]
