#!/usr/bin/env bash
# Session 29, GPU call 3 (one H200): run 2's pre-split weight gradient with its two helpers
# rewritten (run 2: k_conv_wgrad_bias_img 33 us, a thread a chain reading rows across a warp;
# k_split_dytiles 18 us, scattered 16-byte writes): the bias chains from rows staged in shared
# memory, the dy tiles a float4 quad a thread. The tentative rule still picks 7 (b64) / 11 (b256).
#  a. test_gpu_train (every configuration the same bits; fallbacks), train_gpu.sh tf32x3 digests
#  b. ff_conv_tiles --weight-grad tf32x3 at batch 64 and 256; stalls of the automatic choice at 64
#  c. per-kernel traces at batch 64 and 256
# Usage: bash bench/results/issue15-s29/run3.sh OUTDIR  (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run3 "${1:?usage: run3.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
dr_build . fivefold test_gpu_train ff_conv_tiles ff_kernel_trace || exit 1
el built
timeout 200 build-gpu/verify/gpu/test_gpu_train > "$out/test_gpu_train.log" 2>&1
echo "a. test_gpu_train: exit $? (want 0)"; grep -E "PASSED|FAILED|ERROR|fell back" "$out/test_gpu_train.log" | head -8
export FIVEFOLD=$PWD/build-gpu/fivefold
MPIEXEC="mpiexec --oversubscribe" timeout 200 sh verify/gpu/train_gpu.sh tf32x3 > "$out/train_gpu-tf32x3.log" 2>&1
echo "a. train_gpu.sh tf32x3: exit $?"; grep -E "digest|rror" "$out/train_gpu-tf32x3.log" | head -6
el a done
for b in 64 256; do
    timeout 60 build-gpu/ff_conv_tiles --weight-grad --precision tf32x3 --batch $b > "$out/wgrad-b$b.txt" 2>&1
    echo "b. wgrad tf32x3 b$b: exit $?"; grep -E "us " "$out/wgrad-b$b.txt" | head -14 | tr -s ' ' | cut -c1-40 | paste -sd'|'
done
timeout 60 build-gpu/ff_conv_tiles --weight-grad --precision tf32x3 --batch 64 --iters 20 --stalls > "$out/stalls-wgrad-b64.txt" 2>&1
echo "b. stalls: exit $?"; grep -A22 "^kernel .*x3wgp" "$out/stalls-wgrad-b64.txt" | head -26
el b done
F=$PWD/build-gpu/fivefold
for b in 64 256; do
    timeout 60 env FF_KERNEL_TRACE="$out/trace-b$b" FF_KERNEL_TRACE_SKIP=0.3 \
        LD_PRELOAD=build-gpu/libff_kernel_trace.so $F train --model mnist-cnn --mode cuda --data "$DATA" \
        --batch $b --epochs 3 --log-every 0 --precision tf32x3 > "$out/trace-b$b.log" 2>&1
    echo "c. trace b$b tf32x3: exit $?"
    head -30 "$out"/trace-b$b.*.txt | cut -c1-110
done
el done
