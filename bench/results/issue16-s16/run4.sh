#!/usr/bin/env bash
# Session 16's fourth GPU call (two GPUs): run 3's trace showed direct:2's GEMMs 0.7 ms per step
# slower than half of cuda's, with NCCL's kernels (1.9 ms a step) and the fused tree + update
# (0.74 ms) beside them on the side lane. A/B of fewer multiprocessors for those, each twice,
# interleaved, the MLP at batch 2048 (vendor, micro-batch 1024): NCCL's efficiency CTA policy,
# NCCL_MAX_CTAS=8 and 16, the update kernel capped at 32 and 132 blocks (FF_TREE_SGD_BLOCKS), the
# side lane at normal priority (FF_URGENT_STREAMS=0); then base traced with each kernel's grid.
# Usage: bash bench/results/issue16-s16/run4.sh OUTDIR   (carry .deps, .ff-source-commit)
set -uo pipefail
out=${1:?usage: run4.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
b=build-gpu F=build-gpu/fivefold mpx="mpiexec --oversubscribe"
t0=$(date +%s)
el() { echo "[+$(( $(date +%s) - t0 )) s] $*"; }
fin() { tar -C "$out" -czf /tmp/run4.tgz . 2>/dev/null; mv /tmp/run4.tgz "$out/../run4.tgz"; }
trap fin EXIT
nvidia-smi -L; cat .ff-source-commit 2>/dev/null
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
  -DFF_SOURCE_COMMIT="$(cat .ff-source-commit 2>/dev/null)" > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build $b -j 32 --target fivefold ff_kernel_trace > "$out/build.log" 2>&1 || { grep -E "error|FAILED" "$out/build.log" | head -30; exit 1; }
el built
summ() { python3 - "$1" "$2" <<'PY'
import json, sys, statistics
name, path = sys.argv[1], sys.argv[2]
try: d = json.load(open(path))
except Exception as e: print(f"{name:16s} no json ({e})"); sys.exit()
spe = d['seconds_per_epoch']; steps = d['steps'] // d['epochs']
ms = statistics.median(spe[1:]) / steps * 1e3
print(f"{name:16s} {ms:8.3f} ms/step  loss {d['loss_digest']} w {d['weights_digest']}")
PY
}
A="--model mlp --batch 2048 --epochs 6 --log-every 0 --data synthetic --seed 1 --backend vendor"
mlp() {  # name [env...]
  local name=$1; shift
  timeout 60 env "$@" $mpx -n 2 $F train --mode direct $A --microbatch 1024 --json "$out/$name.json" > "$out/$name.log" 2>&1 || echo "$name: exit $?"
  summ "$name" "$out/$name.json"
}
timeout 60 $F train --mode cuda $A --microbatch 2048 --json "$out/cuda.json" > "$out/cuda.log" 2>&1; summ cuda "$out/cuda.json"
for k in a b; do
  mlp base-$k X=1
  mlp eff-$k FF_NCCL_CTA_POLICY=efficiency
  mlp mc8-$k NCCL_MAX_CTAS=8
  mlp mc16-$k NCCL_MAX_CTAS=16
  mlp tb32-$k FF_TREE_SGD_BLOCKS=32
  mlp tb132-$k FF_TREE_SGD_BLOCKS=132
  mlp nourg-$k FF_URGENT_STREAMS=0
done
el traced
timeout 60 $mpx -n 2 env FF_KERNEL_TRACE="$out/trace-base" FF_KERNEL_TRACE_SKIP=2 LD_PRELOAD=$b/libff_kernel_trace.so \
  $F train --mode direct $A --microbatch 1024 > "$out/trace-base.log" 2>&1
head -16 "$out"/trace-base.*.txt | cut -c1-150
timeout 60 $mpx -n 2 env FF_KERNEL_TRACE="$out/trace-mc8" FF_KERNEL_TRACE_SKIP=2 NCCL_MAX_CTAS=8 LD_PRELOAD=$b/libff_kernel_trace.so \
  $F train --mode direct $A --microbatch 1024 > "$out/trace-mc8.log" 2>&1
head -16 "$out"/trace-mc8.*.txt | cut -c1-150 | grep -E "nccl|tree|calls"
el done
