#!/usr/bin/env bash
# Session 9, first call on two H200s (nvidia-h200-x2): build; every CTest case labelled gpu (the
# direct P = 2 cases over NCCL, a GPU per rank). New since session 8: --backend vendor training
# per micro-batch group (cuda = hybrid = direct, shares), the dyadic-block exchange, gradient
# buckets overlapped with the backward (train_mlp_gpu: buckets of one layer, overlap on/off).
# Usage: bash bench/results/issue16-s9/call1.sh OUTDIR
set -uo pipefail
out=${1:?usage: call1.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export DATA="$PWD/.data/fm10k"  # the first 10 000 Fashion-MNIST images (the carry limit)
b=build-gpu
t0=$(date +%s)
el() { echo "[+$(( $(date +%s) - t0 )) s] $*"; }
nvidia-smi -L; cat .ff-source-commit
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
  -DFF_SOURCE_COMMIT="$(cat .ff-source-commit 2>/dev/null)" > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build $b -j 32 > "$out/build.log" 2>&1 || { grep -E "error|FAILED" "$out/build.log" | head -30; exit 1; }
el built
timeout 470 ctest --test-dir $b -L gpu -j 4 --timeout 400 --output-on-failure > "$out/ctest-gpu.log" 2>&1
echo "ctest exit $?"; grep -E "tests passed|\(Failed\)|Skipped\)|Timeout" "$out/ctest-gpu.log"
grep -E "^(cuda|hybrid|direct|vendor|FAIL)" "$out/ctest-gpu.log" | head -40
grep -B2 -A20 "^FAIL" "$out/ctest-gpu.log" | head -60
el done
