#!/usr/bin/env bash
# Train: build what is missing, then run the training loop (bp_tree.py), restarting it if it
# crashes; it resumes from its last complete checkpoint by itself. Arguments are passed to
# bp_tree.py (e.g. --run NAME --preset tiny). Exit codes that a restart cannot cure stop it
# (see bp_tree.py): 0 finished, 2 refused (bad arguments, an incompatible run), 3 the run is
# owned by another trainer, 4 a file-system fault, 5 damaged data, 130/143 interrupted. It
# also gives up after MAX_FUTILE consecutive crashes that completed no iteration.
# Without --preset a new run is 9x9 (the `9x9` preset, models/README.md); a resumed run keeps
# its config.json whatever the preset.
set -uo pipefail
cd "$(dirname "$0")"
case " $* " in
    *" --preset "*|*" --preset="*) ;;
    *) set -- --preset 9x9 "$@" ;;
esac
./build.sh || exit 1
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}
MAX_FUTILE=3
PYTHON=.venv/bin/python
DELAY=${RUN_SH_RESTART_DELAY:-5}   # seconds between restarts
futile=0
while true; do
    before=$("$PYTHON" bp_tree.py --progress "$@") || exit $?
    "$PYTHON" bp_tree.py "$@"
    status=$?
    case $status in
        0|2|3|4|5|130|143) exit $status ;;
    esac
    after=$("$PYTHON" bp_tree.py --progress "$@") || exit $?
    if [ "$after" = "$before" ]; then
        futile=$((futile + 1))
    else
        futile=0
    fi
    if [ "$futile" -ge "$MAX_FUTILE" ]; then
        echo "run.sh: bp_tree.py crashed $futile times in a row without completing an iteration (last status $status); giving up" >&2
        exit 1
    fi
    echo "run.sh: bp_tree.py exited with status $status; restarting in $DELAY s (Ctrl-C to stop)" >&2
    sleep "$DELAY" || exit 130
done
