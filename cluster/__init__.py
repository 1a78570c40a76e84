"""Self-play on a Ray cluster: actors that play, the training loop's process as the learner.
Imported by bp_tree.py only with --workers > 0 (Ray takes seconds to import); the names load on
first use (PEP 562), so `cluster.address` checks an address without importing Ray."""
import importlib

_HOMES = {"ClusterError": "address", "check_reachable": "address",
          "RaySelfPlay": "selfplay_workers", "SelfPlayWorker": "selfplay_workers"}

__all__ = sorted(_HOMES)


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module 'cluster' has no attribute {name!r}")
    return getattr(importlib.import_module(f"cluster.{_HOMES[name]}"), name)
