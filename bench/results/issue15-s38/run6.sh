#!/usr/bin/env bash
# Session 38, GPU call 6: the pool-sparse weight gradient reading each window's 4x4 footprint once
# into registers (8 new loads a window, its left half carried over) and choosing the pick's 3x3
# by a switch per output channel (FF_PS_WGRAD=1/2/3: 4/8/2 output channels a warp; 0 = k_ps_wgrad's
# 9 loads per window and channel). The same sums in the same order: the digests must not move.
#  a. test_gpu_train's pool-sparse tests (the host model, bit for bit) under each variant
#  b. ms per step and digests, default mode and =1, batch 64 and 256; traced steps
# Usage: bash bench/results/issue15-s38/run6.sh OUTDIR  (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run6 "${1:?usage: run6.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
dr_build . fivefold test_gpu_train ff_kernel_trace || exit 1
el built
for v in 0 1 2 3; do
    FF_PS_WGRAD=$v FF_TEST_FILTER="*pool_sparse*" timeout 60 build-gpu/verify/gpu/test_gpu_train > "$out/bits-v$v.log" 2>&1
    echo "a. variant $v: pool_sparse_backward_bits exit $? ($(grep -c 'PASS' "$out/bits-v$v.log") PASS, $(grep -c 'FAIL' "$out/bits-v$v.log") FAIL)"
done
F=$PWD/build-gpu/fivefold
A="--model mnist-cnn --mode cuda --data $DATA --epochs 4 --log-every 0 --precision tf32x3"
for b in 64 256; do
    for v in 0 1 2 3; do
        for m in default 1; do
            e=; [ $m = 1 ] && e=FF_TRAIN_POOL_SPARSE=1
            timeout 30 env $e FF_PS_WGRAD=$v $F train $A --batch $b --json "$out/step-b$b-v$v-$m.json" > "$out/step-b$b-v$v-$m.log" 2>&1
            dr_summ "b$b variant $v $m" "$out/step-b$b-v$v-$m.json"
        done
    done
done
el b done
for b in 64 256; do
    for v in 0 1 2 3; do
        timeout 40 env FF_PS_WGRAD=$v FF_KERNEL_TRACE="$out/tl-v$v-b$b" FF_KERNEL_TRACE_TIMELINE=30000 FF_KERNEL_TRACE_SKIP=0.3 \
            LD_PRELOAD=build-gpu/libff_kernel_trace.so $F train $A --epochs 12 --batch $b > "$out/tl-v$v-b$b.log" 2>&1
        python3 tools/trace_step.py "$out"/tl-v$v-b$b.*.timeline.tsv > "$out/step-v$v-b$b.txt" 2>&1
        echo "b$b variant $v: $(head -1 "$out/step-v$v-b$b.txt" | cut -c1-60)"
        grep -E '^ +[0-9.]+ us +.*(k_ps_dgrad|k_ps_wgrad|k_conv_wgrad_img)' "$out/step-v$v-b$b.txt"
        rm -f "$out"/tl-v$v-b$b.*.timeline.tsv
    done
done
el done
