#!/usr/bin/env bash
# Session 24, GPU call 7 (one H200): tools/conv_tiles.c (every conv configuration timed and
# bit-compared) on mnist's conv2 forward and data gradient, fp32 and tf32x3, batch 64 and 256, with
# tf32x3 configurations 8..15 = 0..7 splitting through split_tf32_lean (two instructions fewer,
# the same halves); test_gpu_layers' tf32x3 case over all 16; train_gpu.sh tf32x3 (session 23's
# digests must stay); train_bench with --precision tf32x3 against PyTorch's CUDA graph.
# Usage: bash bench/results/issue15-s24/run6.sh OUTDIR   (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run6 "${1:?usage: run6.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
F=build-gpu/fivefold
dr_build . fivefold test_gpu_layers ff_conv_tiles || exit 1
el built
export FIVEFOLD=$PWD/$F
FF_TEST_FILTER='conv_tf32x3*' timeout 100 build-gpu/verify/gpu/test_gpu_layers > "$out/x3-test.log" 2>&1
echo "conv_tf32x3_within_bound: exit $? (want 0)"; grep -E "data, N|PASSED|FAILED" "$out/x3-test.log" | head -12
el tested
for p in fp32 tf32x3; do
    for dg in "" "--data-grad"; do
        for bs in 64 256; do
            timeout 60 build-gpu/ff_conv_tiles --layer conv2 --batch $bs --precision $p $dg --iters 100 \
                > "$out/tiles-$p-b$bs$dg.txt" 2>&1
            echo "== conv2 $p b$bs $dg: exit $?"; grep -E "tuner picks|fastest|DIFFER" "$out/tiles-$p-b$bs$dg.txt"
        done
    done
done
el tiles
MPIEXEC="mpiexec --oversubscribe" timeout 150 sh verify/gpu/train_gpu.sh tf32x3 > "$out/train_gpu-x3.log" 2>&1
echo "train_gpu.sh tf32x3: exit $?"; tail -6 "$out/train_gpu-x3.log"
el "train_gpu"
timeout 120 python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
    --peers graph --ff-args "--precision tf32x3" --timeout 100 --out "$out/mnist-tf32x3.json" > "$out/mnist-tf32x3.txt" 2>&1
echo "bench tf32x3: exit $?"
grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-tf32x3.txt" | tail -7
el done
