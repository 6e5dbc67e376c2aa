#!/usr/bin/env bash
# Session 35, GPU call 3 (one H200): the 14 GPU CTests that run 1's 240 s limit cut off
# (gpu_*_rows_P3/P4, the rows fault test and the gpu_train_* tests), on the tree that lands, so
# that every test labelled gpu has run this session; then the whole label's summary.
# Usage: bash bench/results/issue15-s35/run3.sh OUTDIR  (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run3 "${1:?usage: run3.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
dr_build . all || exit 1
el built
re='^(gpu_(hybrid|direct)_(alexnet|mnist)_rows_P[34]|gpu_direct_ipc_alexnet_rows_P3|gpu_hybrid_alexnet_rows_P3_fault|gpu_train_.*|test_gpu_train)$'
timeout 300 ctest --test-dir build-gpu -R "$re" -j 4 --timeout 250 --output-on-failure > "$out/ctest-gpu.log" 2>&1
echo "a. ctest: exit $?"; grep -E "Test +#|tests passed|Total Test" "$out/ctest-gpu.log"
el done
