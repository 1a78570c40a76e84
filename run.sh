#!/usr/bin/env bash
# Train: build what is missing, then run the training loop (bp_tree.py), restarting it if it
# ever crashes; it resumes from its last complete checkpoint by itself. Arguments are passed
# to bp_tree.py (e.g. --run NAME --preset tiny). Exit codes that mean "stop" are respected:
# 0 finished, 2 refused (bad arguments or an incompatible run), 130/143 interrupted.
set -uo pipefail
cd "$(dirname "$0")"
./build.sh || exit 1
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}
while true; do
    .venv/bin/python bp_tree.py "$@"
    status=$?
    case $status in
        0|2|130|143) exit $status ;;
    esac
    echo "run.sh: bp_tree.py exited with status $status; restarting in 5 s (Ctrl-C to stop)" >&2
    sleep 5 || exit 130
done
