#!/usr/bin/env bash
# Session 13's first GPU call (nvidia-h100-x4): where the MLP's step on two and four GPUs loses
# against perfect scaling, and whether the deferred data gradient (device_cuda.c train_backward: a
# part's last data gradient runs after the bucket's fence) helps. Two builds of the same script:
# "before" (the previous commit, from .ff-before.tar.gz) and "after" (this tree). Checks: the
# GPU training scripts on the new build; the same digests before and after (the deferral moves
# launches, not sums). Timings: the full MLP, --backend vendor, 4 epochs of 16 steps; NCCL's CTA
# cap (NCCL_MAX_CTAS) as an A/B; FF_QUEUED_COMM=0 for the phase split.
# Usage: bash bench/results/issue16-s13/run1.sh OUTDIR
set -uo pipefail
out=${1:?usage: run1.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export DATA="$PWD/.data/fashion-mnist"
t0=$(date +%s)
el() { echo "[+$(( $(date +%s) - t0 )) s] $*"; }
left() { echo $(( t0 + $1 - $(date +%s) )); }
fin() { tar -C "$out" -czf /tmp/s13.tgz . 2>/dev/null; mv /tmp/s13.tgz "$out/all.tgz"; }
trap fin EXIT
nvidia-smi -L; cat .ff-source-commit 2>/dev/null
mkdir -p /tmp/before && tar -C /tmp/before -xzf .ff-before.tar.gz
cfg() { cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
  -DFF_SOURCE_COMMIT="$3" > "$out/configure-$4.log" 2>&1 && cmake --build "$2" -j 32 --target fivefold > "$out/build-$4.log" 2>&1; }
cfg . build-gpu "$(cat .ff-source-commit 2>/dev/null)" after & pa=$!
cfg /tmp/before /tmp/build-before "before" before & pb=$!
wait $pa || { grep -E "error|FAILED" "$out/build-after.log" | head -30; exit 1; }
wait $pb || { grep -E "error|FAILED" "$out/build-before.log" | head -30; exit 1; }
A=$PWD/build-gpu/fivefold B=/tmp/build-before/fivefold
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
print(f"{name:34s} {ms:8.3f} ms/step  {d['transport']:24s} loss {d['loss_digest']} w {d['weights_digest']}  {phs}")
PY
}
mlp() {  # name binary ranks microbatch [VAR=value ...]
  local name=$1 bin=$2 np=$3 mb=$4; shift 4
  [ "$(left 540)" -gt 20 ] || { echo "$name: skipped (time)"; return; }
  local mode=direct launch="mpiexec --oversubscribe -n $np"
  [ "$np" = 1 ] && mode=cuda launch=""
  env "$@" timeout 60 $launch "$bin" train --model mlp --mode $mode --batch 2048 --epochs 4 --log-every 0 --data synthetic \
    --seed 1 --backend vendor --microbatch "$mb" --json "$out/$name.json" > "$out/$name.log" 2>&1 || echo "$name: exit $?"
  summ "$name" "$out/$name.json"
}
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING timeout 60 mpiexec --oversubscribe -n 4 $A train --model mlp --mode direct --batch 2048 \
  --steps 4 --log-every 0 --data synthetic --seed 1 --backend vendor --microbatch 512 > "$out/nccl-info.log" 2>&1
grep -m3 -E "NCCL version|nChannels|CTAs" "$out/nccl-info.log"
el "mlp timings"
mlp after-direct4 $A 4 512 X=1
mlp before-direct4 $B 4 512 X=1
mlp after-direct4-cta8 $A 4 512 NCCL_MAX_CTAS=8
mlp after-direct4-cta16 $A 4 512 NCCL_MAX_CTAS=16
mlp after-direct4-unqueued $A 4 512 FF_QUEUED_COMM=0
mlp before-direct4-unqueued $B 4 512 FF_QUEUED_COMM=0
mlp after-direct2 $A 2 1024 X=1
mlp before-direct2 $B 2 1024 X=1
mlp after-direct2-cta8 $A 2 1024 NCCL_MAX_CTAS=8
mlp after-direct2-unqueued $A 2 1024 FF_QUEUED_COMM=0
mlp after-cuda-mb512 $A 1 512 X=1
mlp before-cuda-mb512 $B 1 512 X=1
mlp after-cuda-mb1024 $A 1 1024 X=1
mlp after-cuda-mb2048 $A 1 2048 X=1
el "checks"
[ "$(left 540)" -gt 120 ] && { FIVEFOLD=$A MPIEXEC="mpiexec --oversubscribe" timeout 110 sh verify/gpu/train_gpu.sh modes > "$out/train_gpu_modes.log" 2>&1
  echo "train_gpu.sh modes: exit $?"; grep -E "^direct|FAIL" "$out/train_gpu_modes.log"; tail -1 "$out/train_gpu_modes.log"; }
[ "$(left 540)" -gt 60 ] && { FIVEFOLD=$A MPIEXEC="mpiexec --oversubscribe" timeout $(left 540) sh verify/train/train_mlp.sh gpu > "$out/train_mlp_gpu.log" 2>&1
  echo "train_mlp.sh gpu: exit $?"; tail -3 "$out/train_mlp_gpu.log"; }
el done
