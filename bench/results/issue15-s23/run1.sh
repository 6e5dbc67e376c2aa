#!/usr/bin/env bash
# Session 23, GPU call 1 (two H200s): what session 22 left unrun. The shared softmax formulas
# (commit 7bd6329, compiled and PTX-compared only) through test_gpu_train, and a mutant of them
# (lane 0 sums the exps right to left) shown failing it; then ci/gpu's verify and crash steps.
# Usage: bash bench/results/issue15-s23/run1.sh OUTDIR   (carry .deps, .ff-source-commit, .data-small)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run1 "${1:?usage: run1.sh OUTDIR}"
export DATA="$PWD/.data-small/fashion-mnist"
rm -rf /tmp/mut && mkdir -p /tmp/mut && tar --exclude=./build-gpu --exclude=./.git -cf - . | tar -x -C /tmp/mut
old='for (long long c = 0; c < classes; c++) sum = __fadd_rn(sum, ds\[c\]);  // loads run ahead'
new='for (long long c = classes - 1; c >= 0; c--) sum = __fadd_rn(sum, ds[c]);  // MUTANT: right to left'
sed -i "s|$old|$new|" /tmp/mut/core/device/cuda/train_cuda.cu
grep -c MUTANT /tmp/mut/core/device/cuda/train_cuda.cu
dr_build /tmp/mut test_gpu_train > "$out/mut-build.txt" 2>&1 &
dr_build . fivefold test_gpu_train
wait
cat "$out/mut-build.txt"
el built
FIVEFOLD=$PWD/build-gpu/fivefold timeout 200 build-gpu/verify/gpu/test_gpu_train > "$out/test_gpu_train.log" 2>&1
echo "test_gpu_train: exit $? (want 0)"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|softmax" "$out/test_gpu_train.log" | head
FIVEFOLD=$PWD/build-gpu/fivefold timeout 200 /tmp/mut/build-gpu/verify/gpu/test_gpu_train > "$out/test_gpu_train-mutant.log" 2>&1
echo "test_gpu_train with the mutant: exit $? (want non-zero)"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|softmax" "$out/test_gpu_train-mutant.log" | head
el tested
FF_GPU_STEPS='^(verify-|crash-)' timeout 400 bash ci/gpu "$out/ci" > "$out/ci.log" 2>&1
echo "ci/gpu verify and crash steps: exit $?"
grep -E "^=== .*: exit|^ci/gpu" "$out/ci.log" | tail -60
el done
