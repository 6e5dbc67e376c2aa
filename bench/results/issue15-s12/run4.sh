#!/usr/bin/env bash
# Session 12's fourth GPU call (nvidia-h200-x4, or the x4 H100s that come): graphs instantiated
# with each node's own priority (the captured side lane and NCCL's kernels stay urgent), and the
# direct mode's automatic bucket size (a quarter of a small model: MNIST-CNN's fc1 gradient goes
# during conv2's backward). Check: train_gpu.sh modes (cuda = hybrid = direct bits at P = 1..4).
# Timings with PyTorch in the same invocation: MNIST-CNN, the MLP on four and on two GPUs.
# Usage: bash bench/results/issue15-s12/run4.sh OUTDIR
set -uo pipefail
out=${1:?usage: run4.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export DATA="$PWD/.data/fashion-mnist"
b=build-gpu F=build-gpu/fivefold mpx="mpiexec --oversubscribe"
t0=$(date +%s)
el() { echo "[+$(( $(date +%s) - t0 )) s] $*"; }
left() { echo $(( t0 + $1 - $(date +%s) )); }
fin() { tar -C "$out" -czf /tmp/s12.tgz . 2>/dev/null; mv /tmp/s12.tgz "$out/all.tgz"; }
trap fin EXIT
nvidia-smi -L; cat .ff-source-commit 2>/dev/null
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
  -DFF_SOURCE_COMMIT="$(cat .ff-source-commit 2>/dev/null)" > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build $b -j 64 --target fivefold > "$out/build.log" 2>&1 || { grep -E "error|FAILED" "$out/build.log" | head -30; exit 1; }
el built
FIVEFOLD=$F MPIEXEC="$mpx" timeout 120 sh verify/gpu/train_gpu.sh modes > "$out/train_gpu_modes.log" 2>&1
echo "train_gpu.sh modes: exit $?"; grep -E "^direct|FAIL" "$out/train_gpu_modes.log"; tail -1 "$out/train_gpu_modes.log"
el checked
tb() {  # name seconds-budget-end train_bench-args...
  local name=$1 end=$2; shift 2
  local l=$(left $end)
  [ "$l" -gt 30 ] || { echo "$name: skipped (time)"; return; }
  timeout $l python3 bench/train_bench.py --fivefold $F --mpiexec "$mpx" --epochs 3 --out "$out/$name.json" "$@" > "$out/$name.txt" 2>&1
  echo "$name: exit $?"; grep -vE "^train_bench: (fivefold|pytorch|gate)|^written" "$out/$name.txt" | tail -9
}
el "mnist against PyTorch"
tb train-mnist 230 --data "$DATA" --batch 64,256 --modes cuda,direct:2 --peers graph,ddp:2 --timeout 120
el "mlp on four GPUs"
tb train-mlp-x4 335 --model mlp --batch 2048 --modes cuda,direct:4 --peers graph,ddp:4 --timeout 90 \
  --ff-args "--backend vendor --microbatch 512"
tb train-mlp-x2 395 --model mlp --batch 2048 --modes direct:2 --peers ddp:2 --timeout 80 \
  --ff-args "--backend vendor --microbatch 1024"
el done
