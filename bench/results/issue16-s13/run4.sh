#!/usr/bin/env bash
# Session 13's fourth GPU call (nvidia-h100-x4; no Nsight Systems on these machines, so no profile):
# how much of direct:4's step is the exchange running beside the backward, and how much the
# compute alone? --overlap off (the exchange after the backward) with host waits
# (FF_QUEUED_COMM=0) splits compute from exchange with nothing running beside the GEMMs; four
# independent cuda processes of batch 512, one per GPU at once, show the GPUs' speed with all four
# busy (power, clocks). The full MLP, --backend vendor, 4 epochs of 16 steps.
# Usage: bash bench/results/issue16-s13/run4.sh OUTDIR
set -uo pipefail
out=${1:?usage: run4.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export DATA="$PWD/.data/fashion-mnist"
t0=$(date +%s)
el() { echo "[+$(( $(date +%s) - t0 )) s] $*"; }
left() { echo $(( t0 + $1 - $(date +%s) )); }
fin() { tar -C "$out" -czf /tmp/s13.tgz . 2>/dev/null; mv /tmp/s13.tgz "$out/../run4.tgz"; }
trap fin EXIT
nvidia-smi -L; cat .ff-source-commit 2>/dev/null
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
  -DFF_SOURCE_COMMIT="$(cat .ff-source-commit 2>/dev/null)" > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build build-gpu -j 64 --target fivefold > "$out/build.log" 2>&1 || { grep -E "error|FAILED" "$out/build.log" | head -30; exit 1; }
A=$PWD/build-gpu/fivefold
el built
# one line per run: ms/step (median epoch 2..4 / steps), phases, digests
summ() { python3 - "$1" "$2" <<'PY'
import json, sys, statistics
name, path = sys.argv[1], sys.argv[2]
try: d = json.load(open(path))
except Exception as e: print(f"{name:34s} no json ({e})"); sys.exit()
spe = d['seconds_per_epoch']; steps = d['steps'] // d['epochs']
ms = statistics.median(spe[1:]) / steps * 1e3
ph = d.get('phases_ms_per_step', {})
phs = " ".join(f"{k}={v:.3f}" for k, v in ph.items() if k != 'steps' and isinstance(v, float))
print(f"{name:34s} {ms:8.3f} ms/step  {str(d.get('transport')):24s} loss {d['loss_digest']} w {d['weights_digest']}  {phs}")
PY
}
mlp() {  # name binary ranks microbatch 'fivefold flags' [VAR=value ...]
  local name=$1 bin=$2 np=$3 mb=$4 flags=$5; shift 5
  [ "$(left 540)" -gt 20 ] || { echo "$name: skipped (time)"; return; }
  local mode=direct launch="mpiexec --oversubscribe -n $np"
  [ "$np" = 1 ] && mode=cuda launch=""
  env "$@" timeout 60 $launch "$bin" train --model mlp --mode $mode --batch 2048 --epochs 4 --log-every 0 --data synthetic \
    --seed 1 --backend vendor --microbatch "$mb" $flags --json "$out/$name.json" > "$out/$name.log" 2>&1 || echo "$name: exit $?"
  summ "$name" "$out/$name.json"
}
el "mlp timings"
mlp direct4 $A 4 512 "" X=1
mlp direct4-overlapoff-unqueued $A 4 512 "--overlap off" FF_QUEUED_COMM=0
mlp direct4-overlapoff $A 4 512 "--overlap off" X=1
mlp direct4-unqueued $A 4 512 "" FF_QUEUED_COMM=0
mlp direct2-overlapoff-unqueued $A 2 1024 "--overlap off" FF_QUEUED_COMM=0
mlp direct2-unqueued $A 2 1024 "" FF_QUEUED_COMM=0
mlp cuda-mb512 $A 1 512 "" X=1
el "four cuda processes at once, batch 512 each"
for g in 0 1 2 3; do
  CUDA_VISIBLE_DEVICES=$g timeout 60 $A train --model mlp --mode cuda --batch 512 --epochs 4 --log-every 0 --data synthetic \
    --seed 1 --backend vendor --microbatch 512 --json "$out/cuda-b512-gpu$g.json" > "$out/cuda-b512-gpu$g.log" 2>&1 &
done
wait
for g in 0 1 2 3; do summ "cuda b512 alone on GPU $g" "$out/cuda-b512-gpu$g.json"; done
CUDA_VISIBLE_DEVICES=0 timeout 60 $A train --model mlp --mode cuda --batch 512 --epochs 4 --log-every 0 --data synthetic \
    --seed 1 --backend vendor --microbatch 512 --json "$out/cuda-b512-one.json" > "$out/cuda-b512-one.log" 2>&1
summ "cuda b512, the only process" "$out/cuda-b512-one.json"
el done
