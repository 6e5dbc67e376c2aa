#!/usr/bin/env bash
# Session 17's fifth GPU call (two GPUs, the session's last device time): the update of a rank's
# slice as run 4 found it fastest, now on this commit: k_tree_sgd4 (float4, four chunks in flight
# per thread, one block per multiprocessor) wherever the arrays are 16-byte aligned.
#   1. test_gpu_train (tree_reduce_sgd_gather_bits: the aligned kernel against the cpu device at 1 to
#      13 rows, in place and apart, 600003 floats), train_mlp.sh gpu (every direct run = cuda)
#   2. the MLP's step: cuda at --microbatch 2048 and direct:2 at 1024, twice
#   3. time left: train_gpu.sh modes (MNIST-CNN: cuda = hybrid = direct)
# Usage: bash bench/results/issue16-s17/run5.sh OUTDIR   (carry .deps, .data-small, .ff-source-commit)
set -uo pipefail
out=${1:?usage: run5.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export DATA="$PWD/.data-small/fashion-mnist"
b=build-gpu F=build-gpu/fivefold mpx="mpiexec --oversubscribe"
t0=$(date +%s)
el() { echo "[+$(( $(date +%s) - t0 )) s] $*"; }
left() { echo $(( t0 + $1 - $(date +%s) )); }
fin() { tar -C "$out" -czf /tmp/run5.tgz . 2>/dev/null; mv /tmp/run5.tgz "$out/../run5.tgz"; }
trap fin EXIT
nvidia-smi -L; cat .ff-source-commit 2>/dev/null
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
  -DFF_SOURCE_COMMIT="$(cat .ff-source-commit 2>/dev/null)" > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build $b -j 32 --target fivefold test_gpu_train > "$out/build.log" 2>&1 || { grep -E "error|FAILED" "$out/build.log" | head -30; exit 1; }
el built
timeout 60 $b/verify/gpu/test_gpu_train > "$out/test_gpu_train.log" 2>&1
echo "test_gpu_train: exit $?"; grep -E "tree_sgd.*600004|FAIL|PASSED|FAILED" "$out/test_gpu_train.log" | head -24
el "train_mlp.sh gpu"
FIVEFOLD=$F MPIEXEC="$mpx" timeout 110 bash verify/train/train_mlp.sh gpu > "$out/train_mlp_gpu.log" 2>&1
echo "train_mlp.sh gpu: exit $?"; grep -E "vendor|FAIL" "$out/train_mlp_gpu.log"; tail -1 "$out/train_mlp_gpu.log"
el timings
summ() { python3 - "$1" "$2" <<'PY'
import json, sys, statistics
name, path = sys.argv[1], sys.argv[2]
try: d = json.load(open(path))
except Exception as e: print(f"{name:22s} no json ({e})"); sys.exit()
spe = d['seconds_per_epoch']; steps = d['steps'] // d['epochs']
ms = statistics.median(spe[1:]) / steps * 1e3
print(f"{name:22s} {ms:8.3f} ms/step  loss {d['loss_digest']} w {d['weights_digest']}")
PY
}
A="--model mlp --batch 2048 --epochs 4 --log-every 0 --data synthetic --seed 1 --backend vendor"
timeout 40 $F train --mode cuda $A --microbatch 2048 --json "$out/cuda-mb2048.json" > "$out/cuda-mb2048.log" 2>&1
summ cuda-mb2048 "$out/cuda-mb2048.json"
for k in a b; do
  timeout 40 $mpx -n 2 $F train --mode direct $A --microbatch 1024 --json "$out/direct2-$k.json" > "$out/direct2-$k.log" 2>&1
  summ direct2-$k "$out/direct2-$k.json"
done
l=$(left 235)
el "modes ($l s left)"
[ "$l" -gt 40 ] && { FIVEFOLD=$F MPIEXEC="$mpx" timeout $l sh verify/gpu/train_gpu.sh modes > "$out/train_gpu_modes.log" 2>&1
  echo "train_gpu.sh modes: exit $?"; grep -E "FAIL" "$out/train_gpu_modes.log"; tail -1 "$out/train_gpu_modes.log"; }
el done
