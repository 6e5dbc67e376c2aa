#!/usr/bin/env bash
# Session 24, GPU call 6 (one H200): k_conv_x3 with its tensor-core products issued in three passes
# over the accumulators instead of three dependent products at a time (the same order per
# accumulator): its bits (test_gpu_layers; train_gpu.sh tf32x3 must give session 23's digests), the
# training trace, and train_bench against PyTorch's CUDA graph in the same call.
# Usage: bash bench/results/issue15-s24/run5.sh OUTDIR   (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run5 "${1:?usage: run5.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
F=build-gpu/fivefold
dr_build . fivefold test_gpu_layers ff_kernel_trace || exit 1
el built
export FIVEFOLD=$PWD/$F
timeout 100 build-gpu/verify/gpu/test_gpu_layers > "$out/test_gpu_layers.log" 2>&1
echo "test_gpu_layers: exit $? (want 0)"; grep -E "data, N|PASSED|FAILED|differ|mismatch" "$out/test_gpu_layers.log" | head -30
el tested
for bs in 64 256; do
    timeout 60 env FF_KERNEL_TRACE="$out/trace-tf32x3-b$bs" FF_KERNEL_TRACE_SKIP=0.3 \
        LD_PRELOAD=build-gpu/libff_kernel_trace.so $F train --model mnist-cnn --mode cuda --data "$DATA" \
        --batch $bs --epochs 4 --log-every 0 --precision tf32x3 > "$out/trace-tf32x3-b$bs.log" 2>&1
    echo "== tf32x3 batch $bs: exit $?"
    head -12 "$out"/trace-tf32x3-b$bs.*.txt 2>/dev/null | cut -c1-160
done
el traced
MPIEXEC="mpiexec --oversubscribe" timeout 150 sh verify/gpu/train_gpu.sh tf32x3 > "$out/train_gpu-x3.log" 2>&1
echo "train_gpu.sh tf32x3: exit $?"; tail -6 "$out/train_gpu-x3.log"
el "train_gpu"
for p in tf32x3 fp32; do
    timeout 120 python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
        --peers graph --ff-args "--precision $p" --timeout 100 --out "$out/mnist-$p.json" > "$out/mnist-$p.txt" 2>&1
    echo "bench $p: exit $?"
    grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-$p.txt" | tail -7
done
el done
