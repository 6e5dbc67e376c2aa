#!/usr/bin/env bash
# Session 30, GPU call 3 (one H200): where the gradient lane's work goes. An experiment build
# (its two switches removed after the run): the bottom layer's weight gradient (conv1's, no data
# gradient after it) on the device's stream right after the relu backward instead of queued on the
# lane behind conv2's (FF_LANE_BOTTOM=lane: on the lane, as in runs 1-2), with its partials in the
# data region of the workspace; and the lane urgent (FF_URGENT_STREAMS=0: an ordinary stream, as in
# runs 1-2; run 2 found the device's stream above the lane slower).
#  a. gpu_train_modes, gpu_train_resume, gpu_train_tf32x3 (digests as runs 1-2)
#  b. A/B in one call: one stream, and the four lane variants; batch 64 and 256, tf32x3 and fp32,
#     twice each interleaved (ms per step, digests equal)
#  c. train_bench tf32x3 against the CUDA-graph peer for the default and for FF_URGENT_STREAMS=0
# Usage: bash bench/results/issue15-s30/run3.sh OUTDIR  (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run3 "${1:?usage: run3.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
dr_build . fivefold || exit 1
el built
timeout 100 ctest --test-dir build-gpu -R "^(gpu_train_modes|gpu_train_resume|gpu_train_tf32x3)$" \
    -j 3 --timeout 90 -V > "$out/ctest-gpu.log" 2>&1
echo "a. ctest: exit $?"; grep -E "Test +#|tests passed|Total Test" "$out/ctest-gpu.log"
grep -E "^[0-9]+: (cuda|hybrid P=2 |direct P=2 |cuda killed).*digest" "$out/ctest-gpu.log" | head -8
el a done
F=$PWD/build-gpu/fivefold
for p in tf32x3 fp32; do
    for b in 64 256; do
        for r in 1 2; do
            for v in one nopri-bl nopri urgent-bl urgent; do
                case $v in
                one) envs="FF_TRAIN_CONCURRENT_BACKWARD=0" ;;
                nopri-bl) envs="FF_URGENT_STREAMS=0 FF_LANE_BOTTOM=lane" ;;
                nopri) envs="FF_URGENT_STREAMS=0" ;;
                urgent-bl) envs="FF_LANE_BOTTOM=lane" ;;
                urgent) envs="X=1" ;;
                esac
                n=ab-$p-b$b-$v-$r
                timeout 60 env $envs $F train --model mnist-cnn --mode cuda --data "$DATA" \
                    --batch $b --epochs 4 --log-every 0 --precision $p --json "$out/$n.json" > "$out/$n.log" 2>&1
                dr_summ "$p b$b $v #$r" "$out/$n.json"
            done
        done
    done
done
el b done
for v in urgent nopri; do
    envs="X=1"; [ $v = nopri ] && envs="FF_URGENT_STREAMS=0"
    timeout 100 env $envs python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 \
        --modes cuda --peers graph --ff-args "--precision tf32x3" --timeout 80 --out "$out/mnist-tf32x3-$v.json" \
        > "$out/mnist-tf32x3-$v.txt" 2>&1
    echo "c. bench tf32x3 $v: exit $?"
    grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-tf32x3-$v.txt" | tail -7
done
el done
