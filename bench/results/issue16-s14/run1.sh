#!/usr/bin/env bash
# Session 14's first GPU call: the GPU checks of session 13's last commits, which had run only
# through the compiler (ff_device_tree_sgd's section of test_gpu_train, the register tree shared by
# the two kernels), then train_gpu.sh modes and train_mlp.sh gpu, and the full MLP's step on one
# and two GPUs as this session's baseline.
# Usage: bash bench/results/issue16-s14/run1.sh OUTDIR
set -uo pipefail
out=${1:?usage: run1.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export DATA="$PWD/.data/fashion-mnist"
b=build-gpu F=build-gpu/fivefold mpx="mpiexec --oversubscribe"
t0=$(date +%s)
el() { echo "[+$(( $(date +%s) - t0 )) s] $*"; }
fin() { tar -C "$out" -czf /tmp/s14.tgz . 2>/dev/null; mv /tmp/s14.tgz "$out/../run1.tgz"; }
trap fin EXIT
nvidia-smi -L; cat .ff-source-commit 2>/dev/null
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
  -DFF_SOURCE_COMMIT="$(cat .ff-source-commit 2>/dev/null)" > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build $b -j 32 --target fivefold test_gpu_train > "$out/build.log" 2>&1 || { grep -E "error|FAILED" "$out/build.log" | head -30; exit 1; }
el built
timeout 120 $b/verify/gpu/test_gpu_train > "$out/test_gpu_train.log" 2>&1
echo "test_gpu_train: exit $?"; grep -E "PASSED|FAILED|tree_sgd" "$out/test_gpu_train.log" | head -20
FIVEFOLD=$F MPIEXEC="$mpx" timeout 120 sh verify/gpu/train_gpu.sh modes > "$out/train_gpu_modes.log" 2>&1
echo "train_gpu.sh modes: exit $?"; grep -E "FAIL" "$out/train_gpu_modes.log"; tail -1 "$out/train_gpu_modes.log"
FIVEFOLD=$F MPIEXEC="$mpx" timeout 150 bash verify/train/train_mlp.sh gpu > "$out/train_mlp_gpu.log" 2>&1
echo "train_mlp.sh gpu: exit $?"; tail -2 "$out/train_mlp_gpu.log"
summ() { python3 - "$1" "$2" <<'PY'
import json, sys, statistics
name, path = sys.argv[1], sys.argv[2]
try: d = json.load(open(path))
except Exception as e: print(f"{name:24s} no json ({e})"); sys.exit()
spe = d['seconds_per_epoch']; steps = d['steps'] // d['epochs']
ms = statistics.median(spe[1:]) / steps * 1e3
print(f"{name:24s} {ms:8.3f} ms/step  loss {d['loss_digest']} w {d['weights_digest']}")
PY
}
mlp() {  # name ranks microbatch
  local name=$1 np=$2 mb=$3 mode=direct launch="$mpx -n $2"
  [ "$np" = 1 ] && mode=cuda launch=""
  timeout 60 $launch $F train --model mlp --mode $mode --batch 2048 --epochs 4 --log-every 0 --data synthetic \
    --seed 1 --backend vendor --microbatch "$mb" --json "$out/$name.json" > "$out/$name.log" 2>&1 || echo "$name: exit $?"
  summ "$name" "$out/$name.json"
}
el "mlp timings"
mlp cuda-mb2048 1 2048
mlp cuda-mb1024 1 1024
mlp direct2 2 1024
mlp direct2-b 2 1024
el done
