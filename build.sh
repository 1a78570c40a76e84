#!/usr/bin/env bash
# One-shot setup: a virtual environment in .venv, the Python dependencies, and the C
# extensions compiled in place. Safe to rerun: each step is skipped when already current.
#   ./build.sh          CPU set-up (what CI and laptops use)
#   ./build.sh --cuda   also installs CuPy for the GPU back end
set -euo pipefail
cd "$(dirname "$0")"

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    echo "build.sh: creating .venv with $($PYTHON --version)"
    "$PYTHON" -m venv .venv
fi

install_requirements() {
    local file=$1 stamp=".venv/.stamp-$1"
    local digest
    digest=$(sha256sum "$file" | cut -d' ' -f1)
    if [ "$(cat "$stamp" 2>/dev/null)" != "$digest" ]; then
        echo "build.sh: installing $file"
        .venv/bin/python -m pip install --quiet --disable-pip-version-check -r "$file"
        echo "$digest" > "$stamp"
    fi
}

install_requirements requirements.txt
if [ "${1:-}" = "--cuda" ]; then
    install_requirements requirements-cuda.txt
fi

# GNU Go is the evaluation opponent (matches, GTP tests). Debian installs it as
# /usr/games/gnugo; install it when we can (root with apt), otherwise say how.
if [ ! -x /usr/games/gnugo ] && ! command -v gnugo >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "build.sh: installing GNU Go (Debian package gnugo)"
        { apt-get install -y -qq gnugo >/dev/null 2>&1 ||
          { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq gnugo >/dev/null 2>&1; }; } ||
            echo "build.sh: could not install gnugo; GNU Go matches will be skipped" >&2
    else
        echo "build.sh: GNU Go not found; install it (e.g. 'sudo apt-get install gnugo') for GNU Go matches" >&2
    fi
fi

# setuptools rebuilds an extension only when its sources or `depends` changed.
.venv/bin/python setup.py --quiet build_ext --inplace
