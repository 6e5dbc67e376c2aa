#!/usr/bin/env bash
# Session 24, GPU call 8 (one H200): the final tree: split_tf32 in the lean form only (run 6 ran
# both side by side), tools/conv_tiles.c. test_gpu_layers whole; train_gpu.sh tf32x3 (session 23's
# digests must stay); ff_conv_tiles on mnist's conv2 forward and data gradient in tf32x3.
# Usage: bash bench/results/issue15-s24/run7.sh OUTDIR   (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run7 "${1:?usage: run7.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
F=build-gpu/fivefold
dr_build . fivefold test_gpu_layers ff_conv_tiles || exit 1
el built
export FIVEFOLD=$PWD/$F
timeout 100 build-gpu/verify/gpu/test_gpu_layers > "$out/test_gpu_layers.log" 2>&1
echo "test_gpu_layers: exit $? (want 0)"; grep -E "tf32x3 .*data, N|PASSED|FAILED" "$out/test_gpu_layers.log" | head -12
el tested
MPIEXEC="mpiexec --oversubscribe" timeout 150 sh verify/gpu/train_gpu.sh tf32x3 > "$out/train_gpu-x3.log" 2>&1
echo "train_gpu.sh tf32x3: exit $?"; tail -6 "$out/train_gpu-x3.log"
el "train_gpu"
for dg in "" "--data-grad"; do
    timeout 60 build-gpu/ff_conv_tiles --layer conv2 --batch 64 --precision tf32x3 $dg --iters 100 \
        > "$out/tiles-tf32x3-b64$dg.txt" 2>&1
    echo "== conv2 tf32x3 b64 $dg: exit $?"; grep -E "tuner picks|fastest|DIFFER" "$out/tiles-tf32x3-b64$dg.txt"
done
el done
