#!/usr/bin/env bash
# Session 26, GPU call 5 (one H200): the tree as it lands, through its CTest GPU tests that train
# (the linear tree kernel is in every one-process step; k_conv_x3_rows in tf32x3's): gpu_train_*
# (modes, resume, cpu, oom, golden, tf32x3), gpu_kernel_trace, test_gpu_train, test_gpu_exec,
# train_mlp_gpu and train_mlp_gpu_full. (test_gpu_layers and the digests ran in run 4 on this
# tree less nothing: run 4 also had two k_gemm configurations taken out since.)
# Usage: bash bench/results/issue15-s26/run5.sh OUTDIR   (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run5 "${1:?usage: run5.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
dr_build . fivefold test_gpu_train test_gpu_exec ff_kernel_trace || exit 1
el built
timeout 420 ctest --test-dir build-gpu -R "^(gpu_train_.*|gpu_kernel_trace|test_gpu_train|test_gpu_exec|train_mlp_gpu|train_mlp_gpu_full)$" \
    -j 2 --timeout 300 --output-on-failure > "$out/ctest-gpu.log" 2>&1
echo "ctest: exit $?"; grep -E "Test +#|tests passed|Total Test" "$out/ctest-gpu.log"
el done
