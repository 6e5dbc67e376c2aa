#!/usr/bin/env bash
# Session 37, GPU call 3 (an H100, as runs 1 and 2): run 2's branch-free weight gradient still took
# 106 us at batch 64: its copy of the image into shared memory waited on each load (a division and
# one load per element). Now a warp copies a channel at a time, four loads in flight a lane, into rows
# of an odd stride (no transpose); the sparse data gradient loads the next channel's weights early.
#  a. test_gpu_train and the gpu_train_* digest tests
#  b. ms per step, FF_TRAIN_POOL_SPARSE=0 / 1 / 2 interleaved, tf32x3 and fp32
#  c. a traced step at batch 64 and 256 (tools/trace_step.py), modes 1 and 2
#  d. train_bench tf32x3, then fp32, against PyTorch's CUDA graph, while the time left allows
# Usage: bash bench/results/issue15-s37/run3.sh OUTDIR  (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run3 "${1:?usage: run1.sh OUTDIR}"
LIMIT=${RUN_LIMIT:-560}
export DATA="$PWD/.data-mid/fashion-mnist"
dr_build . fivefold test_gpu_train ff_kernel_trace || exit 1
el built
timeout 200 ctest --test-dir build-gpu -R "^(test_gpu_train|gpu_train_.*)$" -j 4 --timeout 190 -V > "$out/ctest-gpu.log" 2>&1
echo "a. ctest: exit $?"; grep -E "Test +#|tests passed|Total Test" "$out/ctest-gpu.log"
grep -E "pool-sparse|dense pool|POOL_SPARSE|against the pool|FAIL|conv2\.[wb]" "$out/ctest-gpu.log" | head -40
gzip "$out/ctest-gpu.log"
el a done
F=$PWD/build-gpu/fivefold
for p in tf32x3 fp32; do
    A="--model mnist-cnn --mode cuda --data $DATA --epochs 4 --log-every 0 --precision $p"
    for b in 64 256; do
        for rep in 1 2; do
            for v in 0 1 2; do
                timeout 30 env FF_TRAIN_POOL_SPARSE=$v $F train $A --batch $b --json "$out/step-$p-b$b-m$v-$rep.json" > "$out/step-$p-b$b-m$v-$rep.log" 2>&1
                dr_summ "$p b$b mode $v #$rep" "$out/step-$p-b$b-m$v-$rep.json"
            done
        done
    done
done
el b done
A="--model mnist-cnn --mode cuda --data $DATA --epochs 4 --log-every 0 --precision tf32x3"
for v in 1 2; do
    for b in 64 256; do
        timeout 40 env FF_TRAIN_POOL_SPARSE=$v FF_KERNEL_TRACE="$out/tl-m$v-b$b" FF_KERNEL_TRACE_TIMELINE=30000 FF_KERNEL_TRACE_SKIP=0.3 \
            LD_PRELOAD=build-gpu/libff_kernel_trace.so $F train $A --epochs 12 --batch $b > "$out/tl-m$v-b$b.log" 2>&1
        python3 tools/trace_step.py "$out"/tl-m$v-b$b.*.timeline.tsv > "$out/step-m$v-b$b.txt" 2>&1
        echo "c. mode $v step b$b: exit $?"; cut -c1-120 "$out/step-m$v-b$b.txt" | head -36
        gzip "$out"/tl-m$v-b$b.*.timeline.tsv
    done
done
el c done
for p in tf32x3 fp32; do
    left=$(dr_left "$LIMIT")
    [ "$left" -gt 60 ] || { echo "d. bench $p: not run ($left s left)"; continue; }
    timeout $((left - 5)) python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
        --peers graph --ff-args "--precision $p" --timeout 60 --out "$out/mnist-$p.json" > "$out/mnist-$p.txt" 2>&1
    echo "d. bench $p: exit $?"
    grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-$p.txt" | tail -7
done
el done
