#!/usr/bin/env bash
# Session 25, GPU call 7 (one H200): the session's final tree. test_gpu_train, test_gpu_layers and
# the CTest gpu_conv_stalls; kernel traces of training at batch 64 and 256 (where the step goes now).
# Usage: bash bench/results/issue15-s25/run7.sh OUTDIR   (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run7 "${1:?usage: run7.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
F=build-gpu/fivefold
dr_build . fivefold test_gpu_train test_gpu_layers ff_conv_tiles ff_kernel_trace || exit 1
el built
export FIVEFOLD=$PWD/$F
(cd build-gpu && timeout 300 ctest -R "^(test_gpu_train|test_gpu_layers|gpu_conv_stalls|tools_conv_tiles_usage)$" \
    --output-on-failure > "$out/ctest.log" 2>&1)
echo "ctest: exit $?"; grep -E "tests passed|Passed|Failed|Skipped" "$out/ctest.log" | head -6
el tested
for bs in 64 256; do
    timeout 60 env FF_KERNEL_TRACE="$out/trace-b$bs" FF_KERNEL_TRACE_SKIP=0.3 \
        LD_PRELOAD=build-gpu/libff_kernel_trace.so $F train --model mnist-cnn --mode cuda --data "$DATA" \
        --batch $bs --epochs 4 --log-every 0 > "$out/trace-b$bs.log" 2>&1
    echo "trace b$bs: exit $?; $(grep -o 'loss digest.*' "$out/trace-b$bs.log" | head -1)"
    head -24 "$out"/trace-b$bs.*.txt 2>/dev/null | cut -c1-140
done
el done
