#!/usr/bin/env bash
# Session 17's second GPU call (four GPUs): where the MLP's P = 2 and P = 4 steps lose against the
# one-GPU step, now that the two-pass backward (run 1) took the exchange's tail off the step and
# gained only 0.02 / 0.08 ms.
#   1. the compute floors: cuda (one GPU, no exchange) at --batch 1024 --microbatch 1024 and at
#      --batch 512 --microbatch 512, each rank's share at P = 2 and 4, beside --batch 2048 mb2048
#   2. the phase split of direct:2 and direct:4 (--overlap off, FF_QUEUED_COMM=0: the compute, then
#      the exchange with host waits, then the update)
#   3. direct:4 with --bucket-mb 4, 64 and 256 beside the default (a quarter of the model)
#   4. per-kernel GPU time (tools/kernel_trace.c) of cuda at batch 512 and of direct:4, rank 0
# With fewer than four GPUs the P = 4 runs are left out and the bucket sizes are tried at P = 2.
# Usage: bash bench/results/issue16-s17/run2.sh OUTDIR   (carry .deps, .ff-source-commit)
set -uo pipefail
out=${1:?usage: run2.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
b=build-gpu F=build-gpu/fivefold mpx="mpiexec --oversubscribe"
t0=$(date +%s)
el() { echo "[+$(( $(date +%s) - t0 )) s] $*"; }
fin() { tar -C "$out" -czf /tmp/run2.tgz . 2>/dev/null; mv /tmp/run2.tgz "$out/../run2.tgz"; }
trap fin EXIT
nvidia-smi -L; cat .ff-source-commit 2>/dev/null
ngpu=$(nvidia-smi -L | grep -c "^GPU"); P=$(( ngpu >= 4 ? 4 : 2 ))
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
  -DFF_SOURCE_COMMIT="$(cat .ff-source-commit 2>/dev/null)" > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build $b -j 32 --target fivefold ff_kernel_trace > "$out/build.log" 2>&1 || { grep -E "error|FAILED" "$out/build.log" | head -30; exit 1; }
el built
summ() { python3 - "$1" "$2" <<'PY'
import json, sys, statistics
name, path = sys.argv[1], sys.argv[2]
try: d = json.load(open(path))
except Exception as e: print(f"{name:22s} no json ({e})"); sys.exit()
spe = d['seconds_per_epoch']; steps = d['steps'] // d['epochs']
ms = statistics.median(spe[1:]) / steps * 1e3
ph = d.get('phases_ms_per_step') or {}
phs = " ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in ph.items()) if isinstance(ph, dict) else ph
print(f"{name:22s} {ms:8.3f} ms/step  buckets {d.get('buckets')}  w {d['weights_digest']}  [{phs}]")
PY
}
A="--model mlp --epochs 4 --log-every 0 --data synthetic --seed 1 --backend vendor"
one() {  # name batch [env...]
  local name=$1 B=$2; shift 2
  timeout 60 env "$@" $F train --mode cuda $A --batch $B --microbatch $B --json "$out/$name.json" > "$out/$name.log" 2>&1 || echo "$name: exit $?"
  summ "$name" "$out/$name.json"
}
dp() {  # name ranks [fivefold flags...] -- [env...]
  local name=$1 np=$2; shift 2
  local flags=() envs=(X=1)
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do flags+=("$1"); shift; done
  [ $# -gt 0 ] && shift && envs+=("$@")
  timeout 60 env "${envs[@]}" $mpx -n $np $F train --mode direct $A --batch 2048 --microbatch $((2048 / np)) "${flags[@]}" \
    --json "$out/$name.json" > "$out/$name.log" 2>&1 || echo "$name: exit $?"
  summ "$name" "$out/$name.json"
}
el "floors"
one cuda-b2048 2048
one cuda-b1024 1024
one cuda-b512 512
dp direct2 2
[ $P = 4 ] && dp direct4 4
el "phase split"
dp direct2-split 2 --overlap off -- FF_QUEUED_COMM=0
[ $P = 4 ] && dp direct4-split 4 --overlap off -- FF_QUEUED_COMM=0
el "buckets"
for k in a b; do
  dp direct$P-bk4-$k $P --bucket-mb 4
  dp direct$P-bkdef-$k $P
  dp direct$P-bk64-$k $P --bucket-mb 64
  dp direct$P-bk256-$k $P --bucket-mb 256
done
el "traces"
timeout 60 env FF_KERNEL_TRACE="$out/trace-cuda512" FF_KERNEL_TRACE_SKIP=2 LD_PRELOAD=$b/libff_kernel_trace.so \
  $F train --mode cuda $A --batch 512 --microbatch 512 > "$out/trace-cuda512.log" 2>&1
timeout 60 env FF_KERNEL_TRACE="$out/trace-cuda2048" FF_KERNEL_TRACE_SKIP=2 LD_PRELOAD=$b/libff_kernel_trace.so \
  $F train --mode cuda $A --batch 2048 --microbatch 2048 > "$out/trace-cuda2048.log" 2>&1
timeout 60 $mpx -n $P env FF_KERNEL_TRACE="$out/trace-direct$P" FF_KERNEL_TRACE_SKIP=2 LD_PRELOAD=$b/libff_kernel_trace.so \
  $F train --mode direct $A --batch 2048 --microbatch $((2048 / P)) > "$out/trace-direct$P.log" 2>&1
timeout 60 env FF_KERNEL_TRACE="$out/trace-cuda1024" FF_KERNEL_TRACE_SKIP=2 LD_PRELOAD=$b/libff_kernel_trace.so \
  $F train --mode cuda $A --batch 1024 --microbatch 1024 > "$out/trace-cuda1024.log" 2>&1
for f in "$out"/trace-cuda512.*.txt "$out"/trace-cuda1024.*.txt "$out"/trace-cuda2048.*.txt $(ls "$out"/trace-direct$P.*.txt | head -1); do
  echo "== $f"; head -22 "$f" | cut -c1-170
done
el done
