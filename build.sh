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

# System packages, installed with apt when we can (root with apt), like CI and containers:
#   gnugo            GNU Go, the evaluation opponent (matches, GTP tests); /usr/games/gnugo
#   xvfb, xdotool    an X server and X input for the GUI's real-display test
#   libgl1, libglx-mesa0, libgl1-mesa-dri
#                    OpenGL with Mesa's software renderer, what SDL meets on a desktop
#                    without a GPU driver (the set-up where the GUI once crashed)
# Without root or apt, say what is missing; the tests that need it are skipped.
deb_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "ok installed"; }
missing=()
[ -x /usr/games/gnugo ] || command -v gnugo >/dev/null 2>&1 || missing+=(gnugo)
command -v Xvfb >/dev/null 2>&1 || missing+=(xvfb)
command -v xdotool >/dev/null 2>&1 || missing+=(xdotool)
if command -v dpkg-query >/dev/null 2>&1; then
    for package in libgl1 libglx-mesa0 libgl1-mesa-dri; do
        deb_installed "$package" || missing+=("$package")
    done
fi
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "build.sh: installing ${missing[*]} (Debian packages)"
        export DEBIAN_FRONTEND=noninteractive
        { apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1 ||
          { apt-get update -qq >/dev/null 2>&1 &&
            apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1; }; } ||
            echo "build.sh: could not install ${missing[*]}; GNU Go matches and the GUI's" \
                 "real-display test will be skipped" >&2
    else
        echo "build.sh: not installed: ${missing[*]} (e.g. 'sudo apt-get install ${missing[*]}');" \
             "GNU Go matches and the GUI's real-display test are skipped without them" >&2
    fi
fi

# Jupyter refuses to start as root unless told; as root (containers, CI) this checkout's
# environment tells it, so the README's notebook command works there too. (Only the file in
# .venv; the server still listens on localhost with a token.)
jupyter_conf=.venv/etc/jupyter/jupyter_server_config.json
if [ "$(id -u)" = 0 ] && [ ! -f "$jupyter_conf" ]; then
    mkdir -p "$(dirname "$jupyter_conf")"
    echo '{"ServerApp": {"allow_root": true}}' > "$jupyter_conf"
    echo "build.sh: running as root: $jupyter_conf lets Jupyter run as root"
fi

# setuptools rebuilds an extension only when its sources or `depends` changed.
.venv/bin/python setup.py --quiet build_ext --inplace
