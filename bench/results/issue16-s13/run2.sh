#!/usr/bin/env bash
# Session 13's second GPU call (nvidia-h100-x4): is the MLP's step on several GPUs slowed by NCCL's
# kernels taking SMs from the GEMMs? A/B on one build (this tree): NCCL (default), NCCL with
# NCCL_CTA_POLICY=1 (efficiency), the CUDA IPC transport (copy engines, host-synchronised per
# bucket), and --reduce allreduce; FF_QUEUED_COMM=0 for the phase split. Digests must agree
# across transports. The full MLP, --backend vendor, 4 epochs of 16 steps.
# Usage: bash bench/results/issue16-s13/run2.sh OUTDIR
set -uo pipefail
out=${1:?usage: run2.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export DATA="$PWD/.data/fashion-mnist"
t0=$(date +%s)
el() { echo "[+$(( $(date +%s) - t0 )) s] $*"; }
left() { echo $(( t0 + $1 - $(date +%s) )); }
fin() { tar -C "$out" -czf /tmp/s13.tgz . 2>/dev/null; mv /tmp/s13.tgz "$out/../run2.tgz"; }
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
mlp direct4-ipc $A 4 512 "--transport ipc" X=1
mlp direct4-ctapolicy1 $A 4 512 "" NCCL_CTA_POLICY=1
mlp direct4-allreduce $A 4 512 "--reduce allreduce" X=1
mlp direct4-unqueued $A 4 512 "" FF_QUEUED_COMM=0
mlp direct2 $A 2 1024 "" X=1
mlp direct2-ipc $A 2 1024 "--transport ipc" X=1
mlp direct2-ctapolicy1 $A 2 1024 "" NCCL_CTA_POLICY=1
mlp direct2-allreduce $A 2 1024 "--reduce allreduce" X=1
mlp cuda-mb512 $A 1 512 "" X=1
mlp cuda-mb1024 $A 1 1024 "" X=1
mlp cuda-mb2048 $A 1 2048 "" X=1
el "checks"
[ "$(left 540)" -gt 60 ] && { FIVEFOLD=$A MPIEXEC="mpiexec --oversubscribe" timeout $(left 540) sh verify/train/train_mlp.sh gpu > "$out/train_mlp_gpu.log" 2>&1
  echo "train_mlp.sh gpu: exit $?"; tail -3 "$out/train_mlp_gpu.log"; }
el done
