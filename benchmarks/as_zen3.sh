#!/usr/bin/env bash
# Runs one command as on an AMD Zen 3 (AVX2, no AVX-512, no VNNI), on any x86-64 Linux machine,
# such as a Zen 4 whose own int8 path is the VNNI one: QEMU's user-mode emulation of an EPYC
# Milan executes the command's instructions, so ONNX Runtime's CPU-feature check picks its AVX2
# kernels (whose uint8 x int8 pair sums saturate at 16 bits, as on the real chip), and a
# private mount namespace shows it a /proc/cpuinfo without the AVX-512, AVX-VNNI and AMX
# flags, so the project's own check (architectures/quantized.py `cpu_flags`) chooses the
# AVX2 recipe too.
#
#   benchmarks/as_zen3.sh .venv/bin/python -m pytest -q -n 0 tests/test_quantized.py
#
# The command runs in the repository's root. Needs Debian's qemu-user (`apt-get install
# qemu-user`: a developer's check, not something the project runs) and root, for the mount
# namespace. The emulated process runs up to about 90x slower than natively
# (tests/test_quantized.py: 8 s natively, 766 s emulated beside a training run). Only the
# command's own process is emulated: a program it starts runs on the real CPU (with the
# edited /proc/cpuinfo), so give pytest `-n 0` and read the tests that start processes as a
# mix of the two.
# `AS_ZEN3_CHECK=1` first runs a 64x64 MatMulInteger of 255s by 127s, which the real CPU
# sums exactly and AVX2 saturates, and stops if the emulation does not saturate.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=EPYC-Milan-v1

command -v qemu-x86_64 > /dev/null || { echo "as_zen3.sh: qemu-x86_64 not found (apt-get install qemu-user)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "as_zen3.sh: needs root for its mount namespace (unshare -m)" >&2; exit 2; }
[ $# -gt 0 ] || { echo "usage: benchmarks/as_zen3.sh COMMAND [ARGUMENTS...]" >&2; exit 2; }

cpuinfo=$(mktemp /tmp/as_zen3_cpuinfo.XXXXXX)
trap 'rm -f "$cpuinfo"' EXIT
# The flags these machines' CPUs have beyond a Zen 3's: AVX-512 and its VNNI, AVX-VNNI, a
# Xeon's AMX, GFNI.
sed -E 's/ (avx512[a-z0-9_]*|avx_vnni|amx[a-z0-9_]*|gfni)//g' /proc/cpuinfo > "$cpuinfo"

# QEMU warns on stderr of each feature of the model its translator lacks (PCID, RDSEED, SHA
# and the like: none in the arithmetic the net uses).
quiet() { grep -v "TCG doesn't support requested feature" >&2 || true; }

if [ "${AS_ZEN3_CHECK:-0}" = 1 ]; then
    PY=${PYTHON:-.venv/bin/python}
    saturates=$(qemu-x86_64 -cpu "$MODEL" "$PY" -c '
import numpy as np, onnxruntime as ort
from onnx import TensorProto, helper
ones = np.full((64, 64), 127, np.int8)
graph = helper.make_graph(
    [helper.make_node("MatMulInteger", ["a", "b"], ["y"])], "sums",
    [helper.make_tensor_value_info("a", TensorProto.UINT8, [64, 64])],
    [helper.make_tensor_value_info("y", TensorProto.INT32, [64, 64])],
    [helper.make_tensor("b", TensorProto.INT8, [64, 64], ones.tobytes(), raw=True)])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
total = int(session.run(None, {"a": np.full((64, 64), 255, np.uint8)})[0][0, 0])
print("exact" if total == 64 * 255 * 127 else "saturated")' 2> >(quiet))
    if [ "$saturates" != saturated ]; then
        echo "as_zen3.sh: under $MODEL emulation ONNX Runtime's int8 sums came out $saturates, not saturated as AVX2's" >&2
        exit 1
    fi
    echo "as_zen3.sh: ONNX Runtime's int8 sums saturate as AVX2's under $MODEL emulation" >&2
fi

status=0
unshare -m bash -c 'mount --bind "$0" /proc/cpuinfo && exec qemu-x86_64 -cpu "$1" "${@:2}"' \
    "$cpuinfo" "$MODEL" "$@" 2> >(quiet) || status=$?
exit "$status"
