#!/usr/bin/env bash
# Session 14's fourth GPU call (nvidia-h200-x2, or whatever two-or-more-GPU machine comes): the
# code on main after run 3's revert, gated benchmarks against PyTorch in one invocation each: the
# MLP (--backend vendor, batch 2048, micro-batch 1024) cuda and direct:2 against the CUDA graph and
# DDP on 2 GPUs; MNIST-CNN (issue 15) at batch 64 and 256, cuda and direct:2 against the graph,
# eager and DDP on 2 GPUs.
# Usage: bash bench/results/issue16-s14/run4.sh OUTDIR
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
fin() { tar -C "$out" -czf /tmp/s14.tgz . 2>/dev/null; mv /tmp/s14.tgz "$out/../run4.tgz"; }
trap fin EXIT
nvidia-smi -L; cat .ff-source-commit 2>/dev/null
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
  -DFF_SOURCE_COMMIT="$(cat .ff-source-commit 2>/dev/null)" > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build $b -j 32 --target fivefold > "$out/build.log" 2>&1 || { grep -E "error|FAILED" "$out/build.log" | head -30; exit 1; }
el built
l=$(left 200)
timeout $l python3 bench/train_bench.py --fivefold $F --model mlp --batch 2048 --epochs 3 --modes cuda,direct:2 \
  --peers graph,ddp:2 --ff-args "--backend vendor --microbatch 1024" --mpiexec "$mpx" --timeout 90 --out "$out/train-mlp.json" \
  > "$out/train-mlp.txt" 2>&1
echo "mlp: exit $?"; grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/train-mlp.txt" | tail -10
el "mnist-cnn"
l=$(left 520)
[ "$l" -gt 60 ] && timeout $l python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 3 --modes cuda,direct:2 \
  --peers graph,eager,ddp:2 --mpiexec "$mpx" --timeout 120 --out "$out/train-mnist.json" > "$out/train-mnist.txt" 2>&1
echo "mnist: exit $?"; grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/train-mnist.txt" | tail -16
el done
