#!/usr/bin/env bash
# Session 22, GPU call 3 (four H100s): the GPU CTest cases calls 1 and 2 did not reach (the fault
# cases and gpu_train_*), ci/gpu's crash-train-mlp-direct step, then bench/train_bench.py on the
# MLP (cuda, direct:2, direct:4 against PyTorch's graph and DDP in one invocation).
# Usage: bash bench/results/issue16-s22/run3.sh OUTDIR   (carry .deps, .ff-source-commit, .data-small)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run3 "${1:?usage: run3.sh OUTDIR}"
export DATA="$PWD/.data-small/fashion-mnist"
F=build-gpu/fivefold
dr_build . all || exit 1
el built
timeout 200 ctest --test-dir build-gpu -L gpu -R '_fault|gpu_train_' -j 3 --output-on-failure --timeout 190 \
    > "$out/ctest-rest.log" 2>&1
echo "ctest: exit $?"
grep -E "Test +#|tests passed|tests failed" "$out/ctest-rest.log" | tail -12
el ctest
FF_GPU_STEPS='^crash-train-mlp-direct$' timeout 90 bash ci/gpu "$out/ci" > "$out/ci-crash.log" 2>&1
echo "ci/gpu crash-train-mlp-direct: exit $?"; grep -E "^=== crash|ended|PASS|FAIL" "$out/ci-crash.log" | tail -8
el crash
dr_mlp_bench "$(dr_left 520)"
el done
