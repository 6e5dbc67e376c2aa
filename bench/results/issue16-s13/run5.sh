#!/usr/bin/env bash
# Session 13's fifth GPU call (nvidia-h100-x4). Run 4 showed direct:4's exchange alone (--overlap
# off, host waits) takes 5.5 ms for the MLP's 480 MB (4.6 ms on two GPUs): about 130 GB/s, while the
# backward alone runs at full speed. Here: what NCCL reaches on this machine through PyTorch
# (nccl_probe.py: all-to-all, all-gather, reduce-scatter, all-reduce), NCCL's own account of its
# P2P channels (NCCL_DEBUG=INFO), and NCCL settings that change how send/recv move data
# (copy engines: NCCL_P2P_USE_CUDA_MEMCPY; chunk size; P2P channel count), each timed with the
# exchange alone and in the default step.
# Usage: bash bench/results/issue16-s13/run5.sh OUTDIR
set -uo pipefail
out=${1:?usage: run5.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export DATA="$PWD/.data/fashion-mnist"
t0=$(date +%s)
el() { echo "[+$(( $(date +%s) - t0 )) s] $*"; }
left() { echo $(( t0 + $1 - $(date +%s) )); }
fin() { tar -C "$out" -czf /tmp/s13.tgz . 2>/dev/null; mv /tmp/s13.tgz "$out/../run5.tgz"; }
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
    --seed 1 --backend vendor --microbatch "$mb" $flags --json "$out/${name// /_}.json" > "$out/${name// /_}.log" 2>&1 || echo "$name: exit $?"
  summ "$name" "$out/${name// /_}.json"
}
el "nccl through pytorch"
for p in 2 4; do timeout 100 python3 -m torch.distributed.run --standalone --nproc_per_node $p bench/results/issue16-s13/nccl_probe.py 2>"$out/probe$p.err" | tee "$out/probe$p.txt"; done
el "nccl's p2p set-up"
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,P2P,GRAPH,TUNING timeout 60 mpiexec --oversubscribe -n 2 $A train --model mlp --mode direct --batch 2048 \
  --steps 2 --log-every 0 --data synthetic --seed 1 --backend vendor --microbatch 1024 > "$out/nccl-info.log" 2>&1
grep -E "^vm[^ ]* \[0\]" "$out/nccl-info.log" | grep -iE "version|channel|p2p|nvls|ring|tree|CE|via" | head -25
el "mlp timings"
for v in X=1 NCCL_P2P_USE_CUDA_MEMCPY=1 NCCL_P2P_NVL_CHUNKSIZE=2097152 NCCL_MIN_P2P_NCHANNELS=32; do
  mlp "direct2 alone $v" $A 2 1024 "--overlap off" FF_QUEUED_COMM=0 $v
  mlp "direct2 $v" $A 2 1024 "" $v
  mlp "direct4 alone $v" $A 4 512 "--overlap off" FF_QUEUED_COMM=0 $v
  mlp "direct4 $v" $A 4 512 "" $v
done
el done
