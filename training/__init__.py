"""What a training run is made of: its typed configuration (`config`), its directory on disk
(`run_directory`: checkpoints, replay chunks, metrics, atomic writes), the replay buffer and
the board symmetries it samples under, and `nets`, the one way to turn a run's checkpoint or a
model file into a net that plays. The loop's learning side is here too (`learner`, `passes`,
`schedule_following`, `checkpointing`); the entry script bp_tree.py wires it to the games
(`loop/`).

This package imports `kernels/` (the board size and plane constants, the back ends' names)
and `architectures/` (lazily where TensorFlow is needed; `array_net` for a net's shape without
it); `games/`, `gtp/`, `gui/` and the entry scripts build on it. training/README.md says more.
"""
