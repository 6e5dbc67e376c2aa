#!/usr/bin/env bash
# Session 8's second call on two H200s (after run1.sh built build-gpu): the gated training
# benchmark, fivefold cuda and direct on two GPUs against PyTorch's graph peer (one GPU) and DDP
# (two); then AlexNet inference, hybrid and direct at P = 2 (both splits) beside cuda.
# Usage: bash bench/results/x2-s8/run2.sh OUTDIR
set -uo pipefail
out=${1:?usage: run2.sh OUTDIR}
mkdir -p "$out/json" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export DATA="$PWD/.data/fashion-mnist"
b=build-gpu
t0=$(date +%s)
el() { echo "[+$(( $(date +%s) - t0 )) s] $*"; }
[ -x $b/fivefold ] || { cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" -DFF_SOURCE_COMMIT="$(cat .ff-source-commit)" > "$out/configure.log" 2>&1 &&
  cmake --build $b -j 32 > "$out/build.log" 2>&1 || { tail -20 "$out/build.log"; exit 1; }; el built; }
mpx="mpiexec --oversubscribe"
timeout 330 python3 bench/train_bench.py --fivefold $b/fivefold --data "$DATA" --batch 64,256 --epochs 3 \
  --modes cuda,direct:2 --peers graph,ddp:2 --mpiexec "$mpx" --out "$out/train_bench.json" > "$out/train_bench.txt" 2>&1
echo "train_bench rc=$?"; tail -12 "$out/train_bench.txt"
for N in 1 32 256; do
  el "bench alexnet N=$N"
  timeout 60 $b/fivefold bench --model alexnet --mode cuda --batch $N --iters 20 --json "$out/json" 2>&1 | grep -E "^alexnet"
  for mode in hybrid direct; do
    for split in batch rows; do
      timeout 60 $mpx -n 2 $b/fivefold bench --model alexnet --mode $mode --split $split --batch $N --iters 20 \
        $([ $split = batch ] && [ $mode = direct ] && echo --peer pytorch) --json "$out/json" \
        > "$out/bench.tmp" 2>&1 || grep -E "error" "$out/bench.tmp" | head -3
      grep -E "^alexnet|phases|peer|against" "$out/bench.tmp"
    done
  done
done
rm -f "$out/bench.tmp"
tar czf "$out/json.tgz" -C "$out" json && rm -rf "$out/json"
el done
