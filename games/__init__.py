"""Playing games: `search` wires the rules engine (kernels/), the tree search (py_util/) and
an evaluator into batched searching games (`device_step` makes each search step one round
trip on the CUDA back end); `selfplay` plays the training games; `matches`
plays two players against each other (a net, GNU Go, a random player: `match_players`) in one
game loop (`match_runner`) and reports it (`match_report`), and `ratings` turns results into
intervals and Elo; `move_choice` picks the engine's move for GTP and the GUI; `gnugo` talks to GNU Go; `sgf_records` reads
and writes game records.

Imports kernels/, py_util/ and training/ (the config); never the front ends or bp_tree.py.
"""
