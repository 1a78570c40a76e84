"""The training loop's phases that play games: its matches (`evaluations`) and what each
iteration reports (`iteration_report`). bp_tree.py wires them to the learner of training/;
loop/README.md says what this package may import."""
