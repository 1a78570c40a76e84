"""Self-play on a Ray cluster: actors that play, the training loop's process as the learner.
Imported by bp_tree.py only with --workers > 0 (Ray takes seconds to import)."""
from cluster.selfplay_workers import ClusterError, RaySelfPlay, SelfPlayWorker

__all__ = ["ClusterError", "RaySelfPlay", "SelfPlayWorker"]
