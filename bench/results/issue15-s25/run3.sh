#!/usr/bin/env bash
# Session 25, GPU call 3 (one H200): run 2's tree kernel kept its image stages in flight but put its
# partial sums in registers (148 registers a thread at 32 groups: slower); here the stages in
# flight with the original stack. test_gpu_train whole; train_gpu.sh modes (run 1's fp32 digests
# 2cc6f392 / c6d8228d must stay); kernel traces at batch 64 and 256; train_bench fp32 against
# PyTorch's CUDA graph. And conv2's weight gradient (k_conv_wgrad_part) with two other thread
# tiles, built with -DWG_* (train_cuda.cu: every tile gives the same bits): 8 x 8 outputs a thread
# in 64 x 64 tiles (v1) and 8 x 4 in 64 x 32 (v2), traced at batch 256, their digests compared.
# Usage: bash bench/results/issue15-s25/run3.sh OUTDIR   (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run3 "${1:?usage: run3.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
F=build-gpu/fivefold
vbuild() {  # NAME FLAGS: a copy of the tree with CMAKE_CUDA_FLAGS, fivefold only
    rm -rf /tmp/$1 && mkdir -p /tmp/$1 && tar --exclude=./build-gpu --exclude=./.git -cf - . | tar -x -C /tmp/$1
    cmake -S /tmp/$1 -B /tmp/$1/build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
        -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" "-DCMAKE_CUDA_FLAGS=$2" > "$out/build-$1.log" 2>&1 &&
        cmake --build /tmp/$1/build-gpu -j 5 --target fivefold >> "$out/build-$1.log" 2>&1 || echo "build $1 failed"
}
vbuild v1 "-DWG_BM=64 -DWG_BN=64 -DWG_TM=8 -DWG_TN=8" &
vbuild v2 "-DWG_BM=64 -DWG_BN=32 -DWG_TM=8 -DWG_TN=4" &
dr_build . fivefold test_gpu_train ff_kernel_trace || exit 1
wait
el built
export FIVEFOLD=$PWD/$F
timeout 150 build-gpu/verify/gpu/test_gpu_train > "$out/test_gpu_train.log" 2>&1
echo "test_gpu_train: exit $? (want 0)"
grep -E "backward reduced|PASSED|FAILED" "$out/test_gpu_train.log" | head -8
MPIEXEC="mpiexec --oversubscribe" timeout 200 sh verify/gpu/train_gpu.sh modes > "$out/train_gpu-modes.log" 2>&1
echo "train_gpu.sh modes: exit $?"; grep -E "digest|PASS|FAIL" "$out/train_gpu-modes.log" | head -3
el train_gpu
trace() {  # NAME BIN BATCH
    timeout 60 env FF_KERNEL_TRACE="$out/trace-$1" FF_KERNEL_TRACE_SKIP=0.3 \
        LD_PRELOAD=build-gpu/libff_kernel_trace.so $2 train --model mnist-cnn --mode cuda --data "$DATA" \
        --batch $3 --epochs 4 --log-every 0 > "$out/trace-$1.log" 2>&1
    echo "trace $1: exit $?; $(grep -o 'loss digest.*' "$out/trace-$1.log" | head -1)"
}
for bs in 64 256; do
    trace b$bs $F $bs
    head -16 "$out"/trace-b$bs.*.txt 2>/dev/null | cut -c1-150
done
for v in v1 v2; do
    trace $v-b256 /tmp/$v/build-gpu/fivefold 256
    grep -E "k_conv_wgrad_part" "$out"/trace-$v-b256.*.txt | cut -c1-120
done
el traced
timeout 150 python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
    --peers graph --timeout 100 --out "$out/mnist-fp32.json" > "$out/mnist-fp32.txt" 2>&1
echo "bench fp32: exit $?"
grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-fp32.txt" | tail -7
el done
