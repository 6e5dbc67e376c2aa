#!/usr/bin/env bash
# Session 27, GPU call 2 (one H200): the tf32x3 conv weight gradient on tensor cores
# (train_cuda.cu k_conv_wgrad_x3, the shared tf32x3 pieces moved to tf32x3.cuh).
#  a. test_gpu_train (conv_wgrad_tf32x3_within_bound: bound vs float64, db = fp32's, configurations
#     equal, image alone = in batch) and test_gpu_layers (the header move: every tf32x3
#     configuration the same bits, within the bound)
#  b. a mutant (the weight gradient's A_small replaced by A_big: plain-TF32 cross term): the new
#     test must FAIL
#  c. ff_conv_tiles --weight-grad fp32 / tf32x3 at b64 and b256 (each configuration timed)
#  d. train_gpu.sh tf32x3 (new digests, cuda = hybrid = direct) and modes (fp32 2cc6f392 / c6d8228d)
#  e. kernel trace b64 tf32x3; train_bench fp32 and tf32x3 against the CUDA-graph peer
# Usage: bash bench/results/issue15-s27/run2.sh OUTDIR   (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run2 "${1:?usage: run2.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
F=build-gpu/fivefold
rm -rf /tmp/mut && mkdir -p /tmp/mut && tar -c --exclude=./build-gpu --exclude=./build --exclude=./.deps . | tar -x -C /tmp/mut
sed -i 's/x3_mma_chunk(acc, ab, al, bb, bl);/x3_mma_chunk(acc, ab, ab, bb, bl);  \/\/ MUTANT/' /tmp/mut/core/device/cuda/train_cuda.cu
grep -c MUTANT /tmp/mut/core/device/cuda/train_cuda.cu
dr_build . fivefold test_gpu_train test_gpu_layers ff_conv_tiles ff_kernel_trace & p1=$!
dr_build /tmp/mut test_gpu_train & p2=$!
wait $p1 || exit 1
el built main
timeout 200 build-gpu/verify/gpu/test_gpu_train > "$out/test_gpu_train.log" 2>&1
rc_train=$?
echo "a. test_gpu_train: exit $rc_train (want 0)"; grep -E "tf32x3 conv dw|PASSED|FAILED" "$out/test_gpu_train.log" | grep -v " PASS$" | head -30
grep -E "tf32x3 conv dw .*data:" "$out/test_gpu_train.log"
timeout 150 build-gpu/verify/gpu/test_gpu_layers > "$out/test_gpu_layers.log" 2>&1
echo "a. test_gpu_layers: exit $? (want 0)"; grep -E "PASSED|FAILED" "$out/test_gpu_layers.log" | head -4
grep -cE "tf32x3 .* tile [0-9]+ vs automatic.*PASS" "$out/test_gpu_layers.log"
grep -vE "(winograd band .* vs full rows|image/channel).*(max 0|PASS)" "$out/test_gpu_layers.log" > "$out/t" && mv "$out/t" "$out/test_gpu_layers.log"
el a done
wait $p2 && {
    timeout 200 /tmp/mut/build-gpu/verify/gpu/test_gpu_train > "$out/mutant-test_gpu_train.log" 2>&1
    echo "b. mutant test_gpu_train: exit $? (want non-zero)"; grep -E "tf32x3 conv dw .*data:|FAILED" "$out/mutant-test_gpu_train.log" | head -12
}
el b done
for b in 64 256; do
    for p in fp32 tf32x3; do
        timeout 60 build-gpu/ff_conv_tiles --weight-grad --precision $p --batch $b > "$out/wgrad-$p-b$b.txt" 2>&1
        echo "c. wgrad $p b$b: exit $?"; grep -E "us " "$out/wgrad-$p-b$b.txt"
    done
done
el c done
export FIVEFOLD=$PWD/$F
for c in tf32x3 modes; do
    MPIEXEC="mpiexec --oversubscribe" timeout 200 sh verify/gpu/train_gpu.sh $c > "$out/train_gpu-$c.log" 2>&1
    echo "d. train_gpu.sh $c: exit $?"; grep -E "digest|vs fp32|PASS|FAIL" "$out/train_gpu-$c.log" | head -4
done
el d done
[ $rc_train = 0 ] || exit 1
timeout 60 env FF_KERNEL_TRACE="$out/trace-b64" FF_KERNEL_TRACE_SKIP=0.3 \
    LD_PRELOAD=build-gpu/libff_kernel_trace.so $F train --model mnist-cnn --mode cuda --data "$DATA" \
    --batch 64 --epochs 4 --log-every 0 --precision tf32x3 > "$out/trace-b64.log" 2>&1
echo "e. trace b64 tf32x3: exit $?"
head -16 "$out"/trace-b64.*.txt | cut -c1-150
for p in tf32x3 fp32; do
    timeout 150 python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
        --peers graph --ff-args "--precision $p" --timeout 100 --out "$out/mnist-$p.json" > "$out/mnist-$p.txt" 2>&1
    echo "e. bench $p: exit $?"
    grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-$p.txt" | tail -7
done
el done
