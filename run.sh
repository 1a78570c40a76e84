#!/usr/bin/env bash
# Train: build what is missing, then run the training loop (bp_tree.py), restarting it if it
# crashes; it resumes from its last complete checkpoint by itself. Arguments are passed to
# bp_tree.py (e.g. --run NAME --preset tiny). Exit codes that a restart cannot cure stop it
# (see bp_tree.py): 0 finished, 2 refused (bad arguments, an incompatible run), 3 the run is
# owned by another trainer, 4 a file-system fault, 5 damaged data, 129/130/143 stopped by
# SIGHUP/SIGINT/SIGTERM. It also gives up after MAX_FUTILE consecutive crashes that completed
# no iteration. SIGTERM, SIGINT and SIGHUP sent to run.sh (a service manager, `timeout`, a
# closed terminal, Ctrl-C) go on to the trainer, and run.sh exits with its status once it has
# stopped: no trainer is left running without it.
# Without --preset a new run is 9x9 (the `9x9` preset, docs/LINEAGE.md); a resumed run keeps
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
trainer=0
# Bash runs a trap only between commands, so the trainer runs in the background and run.sh
# waits for it: a signal then reaches the trap at once. (A background job of a script starts
# with SIGINT ignored; bp_tree.py installs its own handler.)
stop() {
    if [ "$trainer" -ne 0 ]; then
        kill -s "$1" "$trainer" 2>/dev/null
        wait "$trainer"
        exit $?
    fi
    exit $((128 + $2))
}
trap 'stop HUP 1' HUP
trap 'stop INT 2' INT
trap 'stop TERM 15' TERM
while true; do
    before=$("$PYTHON" bp_tree.py --progress "$@") || exit $?
    "$PYTHON" bp_tree.py "$@" &
    trainer=$!
    wait "$trainer"
    status=$?
    trainer=0
    case $status in
        0|2|3|4|5|129|130|143) exit $status ;;
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
