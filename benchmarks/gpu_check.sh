#!/usr/bin/env bash
# The GPU check, in one call on a machine with an NVIDIA GPU and CuPy (TensorFlow not needed):
# builds the C extensions, runs the GPU tests (the net's forward pass on the GPU against the
# CPU's, self-play over the CUDA rules with the net on the GPU, one round trip per search step,
# CUDA and CPU rules recording the same self-play), then times self-play of the shipped net on
# the CUDA path at several batches and on the same machine's CPU back end (every core, ONNX
# Runtime). Logs go to $OUT (default /tmp/gpu_check); benchmarks/README.md holds the figures.
#   benchmarks/gpu_check.sh            PYTHON=python3 by default
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu_check}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
started=$(date +%s)
stage() { echo "=== $1 (at $(( $(date +%s) - started )) s)"; }

stage "device"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/device.txt"
nproc | sed 's/^/CPU cores: /' | tee -a "$OUT/device.txt"
"$PY" -c "import cupy, numpy; print('CuPy', cupy.__version__, 'NumPy', numpy.__version__)" | tee -a "$OUT/device.txt"

stage "build"
"$PY" setup.py --quiet build_ext --inplace 2>&1 | grep -v "^$" | tail -5

stage "GPU tests"
timeout 240 "$PY" -m pytest -q -s -n 0 -p no:cacheprovider tests/test_array_net.py \
    "tests/test_cuda_kernels.py::test_self_play_is_the_same_on_both_back_ends" \
    "tests/test_cuda_kernels.py::test_cpu_and_cuda_agree_on_random_games" \
    tests/test_gumbel.py 2>&1 | tee "$OUT/tests.log" | grep -v "^$" | tail -25

stage "self-play on the CUDA path, net in float16"
timeout 200 "$PY" benchmarks/bench_selfplay.py --model models/9x9.npz --backend cuda --net array \
    --precision float16 --batches 1024,4096,8192,16384 --moves 2 --repeats 2 2>&1 | tee "$OUT/bench_cuda.log"

stage "self-play on the CUDA path, net in float32"
timeout 60 "$PY" benchmarks/bench_selfplay.py --model models/9x9.npz --backend cuda --net array \
    --precision float32 --batches 4096 --moves 2 --repeats 2 2>&1 | tee "$OUT/bench_cuda_fp32.log"

stage "self-play on the CPU back end, every core"
timeout 120 "$PY" benchmarks/bench_selfplay.py --model models/9x9.npz --backend cpu \
    --net onnxruntime --batches 256,1024 --moves 1 --repeats 2 2>&1 | tee "$OUT/bench_cpu.log"
stage "done"
