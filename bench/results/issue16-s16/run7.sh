#!/usr/bin/env bash
# Session 16's last GPU call (two GPUs), on the final code: the tracer's own test
# (verify/gpu/kernel_trace.sh) and train_mlp.sh gpu (the MLP trainer's cases: cuda, now with its
# micro-batches summed in the tree as the own linear kernels compute them, = hybrid and direct,
# which keep the rows, at every rank count and share).
# Usage: bash bench/results/issue16-s16/run7.sh OUTDIR   (carry .deps, .ff-source-commit)
set -uo pipefail
out=${1:?usage: run7.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
b=build-gpu F=build-gpu/fivefold mpx="mpiexec --oversubscribe"
t0=$(date +%s)
el() { echo "[+$(( $(date +%s) - t0 )) s] $*"; }
fin() { tar -C "$out" -czf /tmp/run7.tgz . 2>/dev/null; mv /tmp/run7.tgz "$out/../run7.tgz"; }
trap fin EXIT
nvidia-smi -L; cat .ff-source-commit 2>/dev/null
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
  -DFF_SOURCE_COMMIT="$(cat .ff-source-commit 2>/dev/null)" > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build $b -j 32 --target fivefold ff_kernel_trace > "$out/build.log" 2>&1 || { grep -E "error|FAILED" "$out/build.log" | head -30; exit 1; }
el built
FIVEFOLD=$F TRACE_LIB=$b/libff_kernel_trace.so timeout 100 sh verify/gpu/kernel_trace.sh > "$out/kernel_trace.log" 2>&1
echo "kernel_trace.sh: exit $?"; cat "$out/kernel_trace.log" | tail -12
FIVEFOLD=$F MPIEXEC="$mpx" timeout 240 bash verify/train/train_mlp.sh gpu > "$out/train_mlp_gpu.log" 2>&1
echo "train_mlp.sh gpu: exit $?"; grep -E "^cuda|vendor|FAIL" "$out/train_mlp_gpu.log"; tail -1 "$out/train_mlp_gpu.log"
el done
