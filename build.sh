#!/usr/bin/env bash
# One-shot setup: a virtual environment in .venv, the Python dependencies, and the C
# extensions compiled in place. Safe to rerun: each step is skipped when already current.
#   ./build.sh              CPU set-up (what CI and laptops use)
#   ./build.sh --cuda       GPU set-up: TensorFlow with its CUDA libraries instead of
#                           tensorflow-cpu, and the CuPy wheel for the driver's CUDA major
#                           version (from nvidia-smi); ./build.sh --cuda 12|13 names it.
# A .venv set up for the GPU stays so: a later plain ./build.sh keeps the GPU packages.
set -euo pipefail
cd "$(dirname "$0")"

CUDA_MAJOR=""
if [ "${1:-}" = "--cuda" ]; then
    CUDA_MAJOR=${2:-}
    if [ -z "$CUDA_MAJOR" ]; then
        if ! command -v nvidia-smi >/dev/null 2>&1; then
            echo "build.sh: --cuda needs nvidia-smi to find the driver's CUDA version; name it: ./build.sh --cuda 12|13" >&2
            exit 2
        fi
        CUDA_MAJOR=$(nvidia-smi | sed -n 's/.*CUDA Version: *\([0-9]*\)\..*/\1/p' | head -n 1)
    fi
    if [ "$CUDA_MAJOR" != 12 ] && [ "$CUDA_MAJOR" != 13 ]; then
        echo "build.sh: the driver's CUDA major version must be 12 or 13, got '${CUDA_MAJOR}' (./build.sh --cuda 12|13)" >&2
        exit 2
    fi
elif [ -n "${1:-}" ]; then
    echo "build.sh: unknown argument '$1' (use no argument, or --cuda [12|13])" >&2
    exit 2
fi

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    echo "build.sh: creating .venv with $($PYTHON --version)"
    "$PYTHON" -m venv .venv
fi

install_requirements() {
    local file=$1 stamp
    stamp=".venv/.stamp-$(basename "$1")"
    local digest
    digest=$(sha256sum "$file" | cut -d' ' -f1)
    if [ "$(cat "$stamp" 2>/dev/null)" != "$digest" ]; then
        echo "build.sh: installing $file"
        .venv/bin/python -m pip install --quiet --disable-pip-version-check -r "$file"
        echo "$digest" > "$stamp"
    fi
}

if [ -z "$CUDA_MAJOR" ] && [ -f .venv/.cuda-major ]; then
    CUDA_MAJOR=$(cat .venv/.cuda-major)
    echo "build.sh: this .venv is a GPU set-up (CUDA $CUDA_MAJOR); keeping it so"
fi
if [ -z "$CUDA_MAJOR" ]; then
    install_requirements requirements.txt
else
    # tensorflow-cpu and tensorflow[and-cuda] install the same package: never both.
    grep -v '^tensorflow-cpu' requirements.txt > .venv/requirements-gpu-base.txt
    if .venv/bin/python -m pip show --quiet tensorflow-cpu >/dev/null 2>&1; then
        echo "build.sh: replacing tensorflow-cpu by the CUDA build of TensorFlow"
        .venv/bin/python -m pip uninstall --quiet --yes tensorflow-cpu
        rm -f .venv/.stamp-requirements.txt
    fi
    install_requirements .venv/requirements-gpu-base.txt
    install_requirements "requirements-cuda$CUDA_MAJOR.txt"
    echo "$CUDA_MAJOR" > .venv/.cuda-major
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
