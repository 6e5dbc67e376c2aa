#!/usr/bin/env bash
# Session 24, GPU call 9 (one H200): four more tf32x3 configurations with more warps a block
# (X3CFG_8..11): their bits (test_gpu_layers' tf32x3 case over all 12; train_gpu.sh tf32x3 must
# keep session 23's digests) and their times against the others (ff_conv_tiles on mnist's conv2
# forward and data gradient at batch 64 and 256).
# Usage: bash bench/results/issue15-s24/run8.sh OUTDIR   (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run8 "${1:?usage: run8.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
F=build-gpu/fivefold
dr_build . fivefold test_gpu_layers ff_conv_tiles || exit 1
el built
export FIVEFOLD=$PWD/$F
FF_TEST_FILTER='conv_tf32x3*' timeout 60 build-gpu/verify/gpu/test_gpu_layers > "$out/x3-test.log" 2>&1
echo "conv_tf32x3_within_bound: exit $? (want 0)"; grep -E "PASSED|FAILED" "$out/x3-test.log" | head -4
for dg in "" "--data-grad"; do
    for bs in 64 256; do
        timeout 40 build-gpu/ff_conv_tiles --layer conv2 --batch $bs --precision tf32x3 $dg --iters 60 \
            > "$out/tiles-tf32x3-b$bs$dg.txt" 2>&1
        echo "== conv2 tf32x3 b$bs $dg: exit $?"; grep -E "config (8|9|10|11)|fastest|DIFFER" "$out/tiles-tf32x3-b$bs$dg.txt"
    done
done
el tiles
MPIEXEC="mpiexec --oversubscribe" timeout 60 sh verify/gpu/train_gpu.sh tf32x3 > "$out/train_gpu-x3.log" 2>&1
echo "train_gpu.sh tf32x3: exit $?"; tail -6 "$out/train_gpu-x3.log"
el done
