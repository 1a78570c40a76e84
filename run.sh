#!/usr/bin/env bash
# The training entry point: builds what is missing, then runs the training loop.
# The loop itself (bp_tree.py: self-play -> replay buffer -> train -> checkpoint, resuming
# after a crash) is the next milestone; until it lands this script sets everything up and
# says so, so the README's first command already prepares a machine.
set -euo pipefail
cd "$(dirname "$0")"
./build.sh
if [ ! -f bp_tree.py ]; then
    echo "run.sh: set-up complete. The training loop (bp_tree.py) is not in this revision yet;" >&2
    echo "run.sh: see README.md 'Status' for what works today." >&2
    exit 0
fi
exec .venv/bin/python bp_tree.py "$@"
