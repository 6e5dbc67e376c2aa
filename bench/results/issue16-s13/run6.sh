#!/usr/bin/env bash
# Session 13's sixth GPU call (nvidia-h100-x4): the fused finishing tree and update
# (ff_device_tree_sgd: one pass where the tree, the SGD step and a copy of the slice were three).
# Checks on the new build: train_gpu.sh modes and train_mlp.sh gpu (cuda = hybrid = direct bits,
# vendor included). Timings, "before" (the previous commit, from .ff-before.tar.gz) against
# "after" (this tree) in the same call: the full MLP on two and four GPUs; digests must agree.
# Usage: bash bench/results/issue16-s13/run6.sh OUTDIR
set -uo pipefail
out=${1:?usage: run6.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export DATA="$PWD/.data/fashion-mnist"
t0=$(date +%s)
el() { echo "[+$(( $(date +%s) - t0 )) s] $*"; }
left() { echo $(( t0 + $1 - $(date +%s) )); }
fin() { tar -C "$out" -czf /tmp/s13.tgz . 2>/dev/null; mv /tmp/s13.tgz "$out/../run6.tgz"; }
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
print(f"{name:34s} {ms:8.3f} ms/step  {str(d.get('transport')):24s} loss {d['loss_digest']} w {d['weights_digest']}  {phs}")
PY
}
mlp() {  # name binary ranks microbatch [VAR=value ...]
  local name=$1 bin=$2 np=$3 mb=$4; shift 4
  [ "$(left 300)" -gt 15 ] || { echo "$name: skipped (time)"; return; }
  local mode=direct launch="mpiexec --oversubscribe -n $np"
  [ "$np" = 1 ] && mode=cuda launch=""
  env "$@" timeout 60 $launch "$bin" train --model mlp --mode $mode --batch 2048 --epochs 4 --log-every 0 --data synthetic \
    --seed 1 --backend vendor --microbatch "$mb" --json "$out/$name.json" > "$out/$name.log" 2>&1 || echo "$name: exit $?"
  summ "$name" "$out/$name.json"
}
el "checks"
FIVEFOLD=$A MPIEXEC="mpiexec --oversubscribe" timeout 100 sh verify/gpu/train_gpu.sh modes > "$out/train_gpu_modes.log" 2>&1
echo "train_gpu.sh modes: exit $?"; grep -E "^direct|FAIL" "$out/train_gpu_modes.log"; tail -1 "$out/train_gpu_modes.log"
FIVEFOLD=$A MPIEXEC="mpiexec --oversubscribe" timeout 100 sh verify/train/train_mlp.sh gpu > "$out/train_mlp_gpu.log" 2>&1
echo "train_mlp.sh gpu: exit $?"; tail -3 "$out/train_mlp_gpu.log"
el "mlp timings"
mlp after-direct2 $A 2 1024 X=1
mlp before-direct2 $B 2 1024 X=1
mlp after-direct4 $A 4 512 X=1
mlp before-direct4 $B 4 512 X=1
mlp after-direct2-b $A 2 1024 X=1
mlp before-direct2-b $B 2 1024 X=1
mlp after-direct4-b $A 4 512 X=1
mlp before-direct4-b $B 4 512 X=1
mlp after-direct4-alone $A 4 512 FF_QUEUED_COMM=0
mlp cuda-mb1024 $A 1 1024 X=1
el done
