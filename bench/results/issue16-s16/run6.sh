#!/usr/bin/env bash
# Session 16's sixth GPU call (two GPUs): one process's step with the backward and its micro-batch
# tree in one device op (ff_device_train_backward_reduced: the own linear kernels sum the groups in
# the fixed tree as they go, no row per group written and read back).
# Run 5 found the first fused kernel (one thread per input and four rows, all groups in turn) slower
# than rows + tree; this one tiles 32 rows x 64 inputs per block, the images through shared memory.
#   1. bits: test_gpu_train (fused = rows + tree at 1, 4, 7, 13 groups), train_gpu.sh modes (cuda,
#      now fused, = hybrid and direct, which keep the rows)
#   2. the pieces bench at batch 64 and 256: backward + tree against the fused op, in one process
#   3. MNIST-CNN against PyTorch in one train_bench invocation: cuda against the graph peer (direct:2
#      keeps the rows: run 5 has it), batch 64 and 256, 3 epochs of Fashion-MNIST
# Usage: bash bench/results/issue16-s16/run6.sh OUTDIR   (carry .deps, .data, .ff-source-commit)
set -uo pipefail
out=${1:?usage: run6.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export DATA="$PWD/.data/fashion-mnist"
b=build-gpu F=build-gpu/fivefold mpx="mpiexec --oversubscribe"
t0=$(date +%s)
el() { echo "[+$(( $(date +%s) - t0 )) s] $*"; }
left() { echo $(( t0 + $1 - $(date +%s) )); }
fin() { tar -C "$out" -czf /tmp/run6.tgz . 2>/dev/null; mv /tmp/run6.tgz "$out/../run6.tgz"; }
trap fin EXIT
nvidia-smi -L; cat .ff-source-commit 2>/dev/null
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
  -DFF_SOURCE_COMMIT="$(cat .ff-source-commit 2>/dev/null)" > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build $b -j 32 --target fivefold test_gpu_train ff_gpu_train_bench > "$out/build.log" 2>&1 || { grep -E "error|FAILED" "$out/build.log" | head -30; exit 1; }
el built
timeout 120 $b/verify/gpu/test_gpu_train > "$out/test_gpu_train.log" 2>&1
echo "test_gpu_train: exit $?"; grep -E "backward reduced|mutant|refused|FAIL|PASSED|FAILED" "$out/test_gpu_train.log" | head -20
timeout 60 $b/verify/gpu/ff_gpu_train_bench 64 256 > "$out/pieces.txt" 2>&1; echo "pieces: exit $?"; grep -v '^{' "$out/pieces.txt"
FIVEFOLD=$F MPIEXEC="$mpx" timeout 150 sh verify/gpu/train_gpu.sh modes > "$out/train_gpu_modes.log" 2>&1
echo "train_gpu.sh modes: exit $?"; grep -E "FAIL|digest" "$out/train_gpu_modes.log" | head -12; tail -1 "$out/train_gpu_modes.log"
el checked
l=$(left 560)
[ "$l" -gt 120 ] && timeout $l python3 bench/train_bench.py --fivefold $F --model mnist-cnn --data "$DATA" --batch 64,256 \
  --epochs 3 --modes cuda --peers graph --mpiexec "$mpx" --timeout 120 \
  --out "$out/train-mnist.json" > "$out/train-mnist.txt" 2>&1
echo "mnist bench: exit $?"; grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/train-mnist.txt" | tail -16
el done
