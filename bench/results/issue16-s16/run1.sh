#!/usr/bin/env bash
# Session 16's first GPU call (two GPUs): each bucket's all-gather of the updated weights deferred
# to the next step's forward (train.c FF_DEFER_GATHER; under --backend vendor fc1 starts on the
# rank's own rows, read from its updated slice, while the others' arrive).
#   1. correctness: test_gpu_train (the row-range SGEMMs give the one-piece bits, at the full MLP's
#      fc1 too), train_mlp.sh gpu (every direct run, deferred by default, = cuda; vendor at P = 2, 3,
#      4 buckets, FF_DEFER_GATHER=0), train_gpu.sh modes (MNIST-CNN, the own kernels: no split)
#   2. the MLP's step A/B in one call: FF_DEFER_GATHER=0 and 1 at P = 2, each twice, interleaved,
#      and cuda at --microbatch 2048 (the one-GPU baseline)
#   3. time left: the MLP against PyTorch (graph, DDP, ddp-graph) in one train_bench invocation
# Usage: bash bench/results/issue16-s16/run1.sh OUTDIR   (carry .deps, .data-small, .ff-source-commit)
set -uo pipefail
out=${1:?usage: run1.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export DATA="$PWD/.data-small/fashion-mnist"
b=build-gpu F=build-gpu/fivefold mpx="mpiexec --oversubscribe"
t0=$(date +%s)
el() { echo "[+$(( $(date +%s) - t0 )) s] $*"; }
left() { echo $(( t0 + $1 - $(date +%s) )); }
fin() { tar -C "$out" -czf /tmp/run1.tgz . 2>/dev/null; mv /tmp/run1.tgz "$out/../run1.tgz"; }
trap fin EXIT
nvidia-smi -L; cat .ff-source-commit 2>/dev/null
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
  -DFF_SOURCE_COMMIT="$(cat .ff-source-commit 2>/dev/null)" > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build $b -j 32 --target fivefold test_gpu_train > "$out/build.log" 2>&1 || { grep -E "error|FAILED" "$out/build.log" | head -30; exit 1; }
$F --version
el built
timeout 120 $b/verify/gpu/test_gpu_train > "$out/test_gpu_train.log" 2>&1
echo "test_gpu_train: exit $?"; grep -E "row ranges|refused|FAIL|PASSED|FAILED" "$out/test_gpu_train.log" | head -20
FIVEFOLD=$F MPIEXEC="$mpx" timeout 240 bash verify/train/train_mlp.sh gpu > "$out/train_mlp_gpu.log" 2>&1
echo "train_mlp.sh gpu: exit $?"; grep -E "vendor|FAIL" "$out/train_mlp_gpu.log"; tail -1 "$out/train_mlp_gpu.log"
el checked
summ() { python3 - "$1" "$2" <<'PY'
import json, sys, statistics
name, path = sys.argv[1], sys.argv[2]
try: d = json.load(open(path))
except Exception as e: print(f"{name:24s} no json ({e})"); sys.exit()
spe = d['seconds_per_epoch']; steps = d['steps'] // d['epochs']
ms = statistics.median(spe[1:]) / steps * 1e3
print(f"{name:24s} {ms:8.3f} ms/step  deferred {d.get('gathers_deferred')}  windows {d.get('nccl_windows')}  loss {d['loss_digest']} w {d['weights_digest']}")
PY
}
mlp() {  # name ranks microbatch [env...]
  local name=$1 np=$2 mb=$3 mode=direct launch="$mpx -n $2"
  shift 3
  [ "$np" = 1 ] && mode=cuda launch=""
  timeout 60 env "$@" $launch $F train --model mlp --mode $mode --batch 2048 --epochs 4 --log-every 0 --data synthetic \
    --seed 1 --backend vendor --microbatch "$mb" --json "$out/$name.json" > "$out/$name.log" 2>&1 || echo "$name: exit $?"
  summ "$name" "$out/$name.json"
}
el "mlp timings"
mlp cuda-mb2048 1 2048 X=1
for k in a b; do
  mlp direct2-end-$k 2 1024 FF_DEFER_GATHER=0
  mlp direct2-defer-$k 2 1024 X=1
done
grep -h "^step" "$out"/direct2-*-a.log
el "mnist modes"
FIVEFOLD=$F MPIEXEC="$mpx" timeout 150 sh verify/gpu/train_gpu.sh modes > "$out/train_gpu_modes.log" 2>&1
echo "train_gpu.sh modes: exit $?"; grep -E "FAIL" "$out/train_gpu_modes.log"; tail -1 "$out/train_gpu_modes.log"
l=$(left 570)
[ "$l" -gt 100 ] && timeout $l python3 bench/train_bench.py --fivefold $F --model mlp --batch 2048 --epochs 3 \
  --modes cuda,direct:2 --peers graph,ddp:2,ddp-graph:2 --ff-args "--backend vendor --microbatch 1024" \
  --mode-args "cuda=--microbatch 2048" --mpiexec "$mpx" --timeout 90 --out "$out/train-mlp.json" > "$out/train-mlp.txt" 2>&1
echo "mlp bench: exit $?"; grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/train-mlp.txt" | tail -10
el done
