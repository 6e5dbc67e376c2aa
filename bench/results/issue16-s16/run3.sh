#!/usr/bin/env bash
# Session 16's third GPU call (two GPUs): the MLP's step per kernel (tools/kernel_trace.c), one GPU
# (cuda, --microbatch 2048) and direct:2 (--microbatch 1024), --backend vendor, batch 2048: what
# the 1 ms between direct:2's step and half of cuda's is made of, kernel by kernel.
# Usage: bash bench/results/issue16-s16/run3.sh OUTDIR   (carry .deps, .ff-source-commit)
set -uo pipefail
out=${1:?usage: run3.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
b=build-gpu F=build-gpu/fivefold mpx="mpiexec --oversubscribe"
t0=$(date +%s)
el() { echo "[+$(( $(date +%s) - t0 )) s] $*"; }
fin() { tar -C "$out" -czf /tmp/run3.tgz . 2>/dev/null; mv /tmp/run3.tgz "$out/../run3.tgz"; }
trap fin EXIT
nvidia-smi -L; cat .ff-source-commit 2>/dev/null
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
  -DFF_SOURCE_COMMIT="$(cat .ff-source-commit 2>/dev/null)" > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build $b -j 32 --target fivefold ff_kernel_trace > "$out/build.log" 2>&1 || { grep -E "error|FAILED" "$out/build.log" | head -30; exit 1; }
el built
T="env FF_KERNEL_TRACE_SKIP=3 LD_PRELOAD=$b/libff_kernel_trace.so"
A="--model mlp --batch 2048 --epochs 12 --log-every 0 --data synthetic --seed 1 --backend vendor"
timeout 120 $T FF_KERNEL_TRACE="$out/trace-cuda" $F train --mode cuda $A --microbatch 2048 --json "$out/cuda.json" > "$out/cuda.log" 2>&1
echo "cuda: exit $?"; grep -E "^trained|^step" "$out/cuda.log"; head -22 "$out"/trace-cuda.*.txt | cut -c1-180
timeout 120 $mpx -n 2 $T FF_KERNEL_TRACE="$out/trace-direct2" $F train --mode direct $A --microbatch 1024 --json "$out/direct2.json" > "$out/direct2.log" 2>&1
echo "direct2: exit $?"; grep -E "^trained|^step" "$out/direct2.log"
for f in "$out"/trace-direct2.*.txt; do echo "== $f"; head -30 "$f" | cut -c1-180; done
timeout 120 $mpx -n 2 $F train --mode direct $A --microbatch 1024 --json "$out/direct2-plain.json" > "$out/direct2-plain.log" 2>&1
echo "direct2 untraced: exit $?"; grep -E "^step" "$out/direct2-plain.log"
el done
