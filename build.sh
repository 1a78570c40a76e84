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
