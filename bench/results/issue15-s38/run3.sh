#!/usr/bin/env bash
# Session 38, GPU call 3: run 2's row strips were no faster (too few warps: one per row pair and
# image). Now the output channels split into NW contiguous parts, a warp each, the parts added in
# order (FF_PS_DGRAD=7/8/9: NW = 2/4/8; a block per image, row pair, 13 columns). Other sums, so
# other bits: the final loss and accuracy beside variant 0's, ms per step, the traced kernel.
# Usage: bash bench/results/issue15-s38/run3.sh OUTDIR  (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run3 "${1:?usage: run3.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
dr_build . fivefold ff_kernel_trace || exit 1
el built
F=$PWD/build-gpu/fivefold
A="--model mnist-cnn --mode cuda --data $DATA --epochs 4 --log-every 0 --precision tf32x3"
for b in 64 256; do
    for v in 0 7 8 9; do
        timeout 30 env FF_TRAIN_POOL_SPARSE=2 FF_PS_DGRAD=$v $F train $A --batch $b --json "$out/step-b$b-v$v.json" > "$out/step-b$b-v$v.log" 2>&1
        dr_summ "b$b variant $v" "$out/step-b$b-v$v.json"
        python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('   final loss', d['final_loss'], 'accuracy', d['test_accuracy'])" "$out/step-b$b-v$v.json"
    done
done
el a done
for b in 64 256; do
    for v in 0 7 8 9; do
        timeout 40 env FF_TRAIN_POOL_SPARSE=2 FF_PS_DGRAD=$v FF_KERNEL_TRACE="$out/tl-v$v-b$b" FF_KERNEL_TRACE_TIMELINE=30000 FF_KERNEL_TRACE_SKIP=0.3 \
            LD_PRELOAD=build-gpu/libff_kernel_trace.so $F train $A --epochs 12 --batch $b > "$out/tl-v$v-b$b.log" 2>&1
        python3 tools/trace_step.py "$out"/tl-v$v-b$b.*.timeline.tsv > "$out/step-v$v-b$b.txt" 2>&1
        echo "b$b variant $v: $(head -1 "$out/step-v$v-b$b.txt" | cut -c1-60)"
        grep -E '^ +[0-9.]+ us +.*(k_ps_dgrad|k_ps_wgrad|k_conv_wgrad_img)' "$out/step-v$v-b$b.txt"
        rm -f "$out"/tl-v$v-b$b.*.timeline.tsv
    done
done
el done
