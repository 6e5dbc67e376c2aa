#!/usr/bin/env bash
# Session 11's third GPU call (nvidia-h200-x2; H100s came): the tree kernel chosen by measurement
# (tree_kernels.cu: in place, run-time stack, registers), the GPU checks again with the register
# kernel and the urgent streams (the side lane and NCCL's stream at the highest priority), the MLP
# at batch 2048 with one micro-batch per rank, urgent streams on and off (FF_URGENT_STREAMS=0),
# against PyTorch's graph and DDP in the same invocation, and MNIST-CNN's two-GPU figures.
# Usage: bash bench/results/issue16-s11/final.sh OUTDIR
set -uo pipefail
out=${1:?usage: final.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export DATA="$PWD/.data/fashion-mnist"
b=build-gpu F=build-gpu/fivefold mpx="mpiexec --oversubscribe"
t0=$(date +%s)
el() { echo "[+$(( $(date +%s) - t0 )) s] $*"; }
fin() { tar -C "$out" -czf /tmp/s11-final.tgz . 2>/dev/null; mv /tmp/s11-final.tgz "$out/all.tgz"; }
nvidia-smi -L; cat .ff-source-commit 2>/dev/null
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
  -DFF_SOURCE_COMMIT="$(cat .ff-source-commit 2>/dev/null)" > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build $b -j 32 --target fivefold test_gpu_train > "$out/build.log" 2>&1 || { grep -E "error|FAILED" "$out/build.log" | head -30; exit 1; }
nvcc -O3 -arch=sm_90 bench/results/issue16-s11/tree_kernels.cu -o /tmp/tree_kernels && /tmp/tree_kernels | tee "$out/tree_kernels.txt"
el built
timeout 90 $b/verify/gpu/test_gpu_train > "$out/test_gpu_train.log" 2>&1
echo "test_gpu_train: exit $?"; grep -E "PASSED|FAILED|tree_reduce 32 |tree_reduce 100 " "$out/test_gpu_train.log" | head -6
FIVEFOLD=$F MPIEXEC="$mpx" timeout 120 sh verify/gpu/train_gpu.sh modes > "$out/train_gpu_modes.log" 2>&1
echo "train_gpu.sh modes: exit $?"; tail -1 "$out/train_gpu_modes.log"
FIVEFOLD=$F MPIEXEC=mpiexec timeout 150 bash verify/train/train_mlp.sh gpu > "$out/train_mlp_gpu.log" 2>&1
echo "train_mlp.sh gpu: exit $?"; tail -1 "$out/train_mlp_gpu.log"
bench() {  # name modes peers ff-args [env]
  env ${5:-FF_X=1} timeout 200 python3 bench/train_bench.py --fivefold $F --model mlp --batch 2048 --epochs 3 --modes "$2" \
    --peers "$3" --ff-args "$4" --mpiexec "$mpx" --timeout 90 --out "$out/$1.json" > "$out/$1.txt" 2>&1
  echo "$1: exit $?"; grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/$1.txt" | tail -7
}
el "mlp --microbatch 1024, urgent streams off (A/B)"
bench train-mlp-mb1024-plain direct:2 none "--backend vendor --microbatch 1024" FF_URGENT_STREAMS=0
el "mlp --microbatch 1024 against PyTorch graph and DDP"
bench train-mlp-mb1024 cuda,direct:2 graph,ddp:2 "--backend vendor --microbatch 1024"
el "mnist-cnn, batch 64 and 256, direct:2 against DDP (issue 15)"
left=$(( t0 + 560 - $(date +%s) ))
[ "$left" -gt 30 ] && timeout $left python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 3 --modes cuda,direct:2 \
  --peers graph,ddp:2 --mpiexec "$mpx" --timeout 120 --out "$out/train-mnist.json" > "$out/train-mnist.txt" 2>&1
echo "exit $?"; grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/train-mnist.txt" | tail -11
fin
el done
