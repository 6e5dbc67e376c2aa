#!/usr/bin/env bash
# Session 37, GPU call 6: two mutants of pool_sparse.cu in one build, against test_gpu_train's
# pool-sparse checks. Mutant A (weight kernel): the pick's row and column bits swapped (q & 1 for
# the row, q >> 1 for the column). Mutant B (data kernel): pick 1 taken as (1, 0) instead of (0, 1).
# Expected: pool_sparse_backward_bits FAILs its dw/db lines (A) and its dx lines (B), and
# train_backward_within_bound finds conv2.w outside its bound; the test exits non-zero.
# Usage: bash bench/results/issue15-s37/run6.sh OUTDIR  (carry .deps, .ff-source-commit)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run6 "${1:?usage: run6.sh OUTDIR}"
m=/tmp/mutant && rm -rf $m && mkdir -p $m && tar --exclude=./build-gpu --exclude=./.deps --exclude=./.data-mid -cf - . | tar -xf - -C $m
sed -i 's/so\[at\] = (2 \* py + (q >> 1)) \* W + 2 \* px + (q & 1);/so[at] = (2 * py + (q \& 1)) * W + 2 * px + (q >> 1);/' $m/core/device/cuda/pool_sparse.cu
sed -i 's/case 1: ps_taps(acc, wv, gv, i, j, 0, 1); break;/case 1: ps_taps(acc, wv, gv, i, j, 1, 0); break;/' $m/core/device/cuda/pool_sparse.cu
diff <(cat core/device/cuda/pool_sparse.cu) $m/core/device/cuda/pool_sparse.cu
dr_build $m test_gpu_train || exit 1
el built
FF_TEST_FILTER="*pool_sparse*" timeout 60 $m/build-gpu/verify/gpu/test_gpu_train > "$out/mutants.log" 2>&1
echo "pool_sparse_backward_bits under both mutants: exit $? (non-zero expected)"
grep -E "pool-sparse.*(FAIL|PASS)" "$out/mutants.log"
FF_TEST_FILTER="*train_backward_within_bound*" timeout 60 $m/build-gpu/verify/gpu/test_gpu_train > "$out/mutants-bound.log" 2>&1
echo "train_backward_within_bound under both mutants: exit $? (non-zero expected)"
grep -E "conv2|FAIL" "$out/mutants-bound.log" | head -8
el done
