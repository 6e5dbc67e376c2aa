#!/usr/bin/env bash
# Session 37, GPU call 4 (an H100): the tree that lands: gpu_train_modes (FF_TRAIN_POOL_SPARSE=2
# checked against the default and across P) and test_gpu_train.
# Usage: bash bench/results/issue15-s37/run4.sh OUTDIR  (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run4 "${1:?usage: run4.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
dr_build . fivefold test_gpu_train || exit 1
el built
timeout 150 ctest --test-dir build-gpu -R "^(test_gpu_train|gpu_train_modes)$" -j 2 --timeout 140 -V > "$out/ctest-gpu.log" 2>&1
echo "a. ctest: exit $?"; grep -E "Test +#|tests passed|Total Test" "$out/ctest-gpu.log"
grep -E "POOL_SPARSE|against the|direct P=2: the same|FAIL" "$out/ctest-gpu.log" | head -20
gzip "$out/ctest-gpu.log"
el done
