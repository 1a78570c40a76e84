"""What a training run is made of: its typed configuration (`config`), its directory on disk
(`run_directory`: checkpoints, replay chunks, metrics, atomic writes), the replay buffer and
the board symmetries it samples under, and `nets`, the one way to turn a run's checkpoint or a
model file into a net that plays. The loop that drives a run is the entry script bp_tree.py.

This package imports `architectures/` (lazily, for TensorFlow) and nothing else of the
project; `games/`, `gtp/`, `gui/` and the entry scripts build on it.
"""
