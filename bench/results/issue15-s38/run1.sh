#!/usr/bin/env bash
# Session 38, GPU call 1: the tree session 37 left compiled but not run (8144d7b: relu_pass and
# pool2x2_pick shared, one multiprocessor count), then where mode 2's step time goes (baseline for
# a faster pool-sparse data gradient).
#  a. test_gpu_train and the gpu_train_* digest tests
#  b. ms per step, FF_TRAIN_POOL_SPARSE=1 / 2, tf32x3, batch 64 and 256
#  c. a traced step, mode 2, batch 64 and 256 (tools/trace_step.py)
# Usage: bash bench/results/issue15-s38/run1.sh OUTDIR  (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run1 "${1:?usage: run1.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
dr_build . fivefold test_gpu_train ff_kernel_trace || exit 1
el built
timeout 220 ctest --test-dir build-gpu -R "^(test_gpu_train|gpu_train_.*)$" -j 4 --timeout 200 -V > "$out/ctest-gpu.log" 2>&1
echo "a. ctest: exit $?"; grep -E "Test +#|tests passed|Total Test" "$out/ctest-gpu.log"
grep -E "pool-sparse|POOL_SPARSE|FAIL" "$out/ctest-gpu.log" | head -30
gzip "$out/ctest-gpu.log"
el a done
F=$PWD/build-gpu/fivefold
A="--model mnist-cnn --mode cuda --data $DATA --epochs 4 --log-every 0 --precision tf32x3"
for b in 64 256; do
    for v in 1 2; do
        timeout 30 env FF_TRAIN_POOL_SPARSE=$v $F train $A --batch $b --json "$out/step-b$b-m$v.json" > "$out/step-b$b-m$v.log" 2>&1
        dr_summ "tf32x3 b$b mode $v" "$out/step-b$b-m$v.json"
    done
done
el b done
for b in 64 256; do
    timeout 40 env FF_TRAIN_POOL_SPARSE=2 FF_KERNEL_TRACE="$out/tl-m2-b$b" FF_KERNEL_TRACE_TIMELINE=30000 FF_KERNEL_TRACE_SKIP=0.3 \
        LD_PRELOAD=build-gpu/libff_kernel_trace.so $F train $A --epochs 12 --batch $b > "$out/tl-m2-b$b.log" 2>&1
    python3 tools/trace_step.py "$out"/tl-m2-b$b.*.timeline.tsv > "$out/step-m2-b$b.txt" 2>&1
    echo "c. mode 2 step b$b: exit $?"; cut -c1-120 "$out/step-m2-b$b.txt" | head -40
    gzip "$out"/tl-m2-b$b.*.timeline.tsv
done
el done
