#!/bin/sh
# katago_analysis.py with this checkout's Python, as one executable file: point KaTrain's
# "KataGo path" (or any program that starts KataGo's analysis engine) here. KataGo's own
# command line is accepted: analysis -model FILE|RUN -config FILE -override-config K=V,...
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/.venv/bin/python" "$here/katago_analysis.py" "$@"
