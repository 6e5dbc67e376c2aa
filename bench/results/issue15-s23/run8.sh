#!/usr/bin/env bash
# Session 23, GPU call 8 (one H200): the GPU unit tests and the training cases on the session's
# final GPU code (the k_gemm load refactor, tf32x3, the tuner's new configurations):
# test_gpu_layers, test_gpu_exec, test_gpu_train, gpu_train_{modes,cpu,golden,tf32x3}.
# Usage: bash bench/results/issue15-s23/run8.sh OUTDIR   (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run8 "${1:?usage: run8.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
dr_build . fivefold fivefold_cli test_gpu_layers test_gpu_exec test_gpu_train || exit 1
el built
timeout 200 ctest --test-dir build-gpu -R '^(test_gpu_layers|test_gpu_exec|test_gpu_train|gpu_train_(modes|cpu|golden|tf32x3))$' \
    -j 2 --output-on-failure --timeout 200 > "$out/ctest.log" 2>&1
echo "ctest: exit $?"
grep -E "Test +#|tests passed|tests failed" "$out/ctest.log" | tail -12
el done
