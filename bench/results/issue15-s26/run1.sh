#!/usr/bin/env bash
# Session 26, GPU call 1 (one H200). Two same-bits changes, never run on a GPU before:
# (a) the linear weight gradient in the tree keeps its stack of partial sums in shared memory (a
#     binary counter of levels) and prefetches the next stage of images: no local memory;
# (b) k_conv_x3_rows, tf32x3 convs of 3 x 3 stride 1 with the taps taken from staged, pre-split
#     input rows (configurations 10..15 of the tf32x3 conv).
# Checks: test_gpu_train (linear_tree_kernel_bits, backward_reduced_bits, ...), test_gpu_layers
# (every tf32x3 configuration the same bits, bound, bands); ff_conv_tiles tf32x3 on conv2 forward
# and data gradient, b64 / b256; train_gpu.sh modes and tf32x3 (digests 2cc6f392 / c6d8228d and
# 1a99b90b / 5f0807ee must stay); a kernel trace at b64 (fc1's tree); train_bench fp32 and tf32x3.
# Usage: bash bench/results/issue15-s26/run1.sh OUTDIR   (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run1 "${1:?usage: run1.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
F=build-gpu/fivefold
dr_build . fivefold test_gpu_train test_gpu_layers ff_conv_tiles ff_kernel_trace || exit 1
el built
export FIVEFOLD=$PWD/$F
timeout 150 build-gpu/verify/gpu/test_gpu_train > "$out/test_gpu_train.log" 2>&1
echo "test_gpu_train: exit $? (want 0)"; grep -E "linear dw|backward reduced|PASSED|FAILED" "$out/test_gpu_train.log" | head -24
timeout 150 build-gpu/verify/gpu/test_gpu_layers > "$out/test_gpu_layers.log" 2>&1
echo "test_gpu_layers: exit $? (want 0)"; grep -E "tf32x3 .*(over|FAIL)|PASSED|FAILED" "$out/test_gpu_layers.log" | head -12
grep -cE "tile 1[0-5] vs automatic.*PASS" "$out/test_gpu_layers.log"
el tested
for b in 64 256; do
    for dg in "" --data-grad; do
        timeout 60 build-gpu/ff_conv_tiles --precision tf32x3 --batch $b $dg > "$out/tiles-x3-b$b$dg.txt" 2>&1
        echo "conv_tiles tf32x3 b$b $dg: exit $?"; cat "$out/tiles-x3-b$b$dg.txt" | tail -20
    done
done
el tiles
for c in modes tf32x3; do
    MPIEXEC="mpiexec --oversubscribe" timeout 200 sh verify/gpu/train_gpu.sh $c > "$out/train_gpu-$c.log" 2>&1
    echo "train_gpu.sh $c: exit $?"; grep -E "digest|PASS|FAIL" "$out/train_gpu-$c.log" | head -3
done
el checked
timeout 60 env FF_KERNEL_TRACE="$out/trace-b64" FF_KERNEL_TRACE_SKIP=0.3 \
    LD_PRELOAD=build-gpu/libff_kernel_trace.so $F train --model mnist-cnn --mode cuda --data "$DATA" \
    --batch 64 --epochs 4 --log-every 0 --precision tf32x3 > "$out/trace-b64.log" 2>&1
echo "trace b64 tf32x3: exit $?; $(grep -o 'loss digest.*' "$out/trace-b64.log" | head -1)"
head -24 "$out"/trace-b64.*.txt | cut -c1-150
for p in fp32 tf32x3; do
    timeout 150 python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
        --peers graph --ff-args "--precision $p" --timeout 100 --out "$out/mnist-$p.json" > "$out/mnist-$p.txt" 2>&1
    echo "bench $p: exit $?"
    grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-$p.txt" | tail -7
done
el done
