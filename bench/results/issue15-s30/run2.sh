#!/usr/bin/env bash
# Session 30, GPU call 2 (one H200): the gradient lane after run 1's resume failure (its stream,
# events and kept gradients are now made by every one-pass backward, eager ones too), and the
# lane at the lowest priority under the device's stream one level above it (FF_URGENT_STREAMS=0:
# no priorities).
#  a. GPU ctests of training (test_gpu_train, gpu_train_*, test_gpu_exec, train_mlp_gpu,
#     gpu_kernel_trace) with train_gpu.sh modes (fp32 2cc6f392 / c6d8228d) and tf32x3 (a6481d10 /
#     99d4ce06), resume included
#  b. A/B in one call: one stream (FF_TRAIN_CONCURRENT_BACKWARD=0), the lane without priorities
#     (FF_URGENT_STREAMS=0) and the lane below the device's stream (the default); batch 64 and 256,
#     tf32x3 and fp32, twice each interleaved (ms per step, digests equal)
#  c. a kernel trace at batch 64 (tf32x3, the default)
#  d. train_bench tf32x3 and fp32 against the CUDA-graph peer
# Usage: bash bench/results/issue15-s30/run2.sh OUTDIR  (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run2 "${1:?usage: run2.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
dr_build . fivefold test_gpu_train test_gpu_exec ff_kernel_trace || exit 1
el built
timeout 200 ctest --test-dir build-gpu -R "^(test_gpu_train|gpu_train_.*|test_gpu_exec|train_mlp_gpu|gpu_kernel_trace)$" \
    -j 4 --timeout 190 -V > "$out/ctest-gpu.log" 2>&1
echo "a. ctest: exit $?"; grep -E "Test +#|tests passed|Total Test" "$out/ctest-gpu.log"
grep -E "^[0-9]+: (cuda|hybrid P=2|direct P=2|direct P=3|uninterrupted|hybrid P=2 for).*digest" "$out/ctest-gpu.log" | head -14
el a done
F=$PWD/build-gpu/fivefold
for p in tf32x3 fp32; do
    for b in 64 256; do
        for r in 1 2; do
            for v in one nopri lane; do
                case $v in
                one) envs="FF_TRAIN_CONCURRENT_BACKWARD=0" ;;
                nopri) envs="FF_URGENT_STREAMS=0" ;;
                lane) envs="X=1" ;;
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
timeout 30 env FF_KERNEL_TRACE="$out/trace-b64" FF_KERNEL_TRACE_SKIP=0.3 \
    LD_PRELOAD=build-gpu/libff_kernel_trace.so $F train --model mnist-cnn --mode cuda --data "$DATA" \
    --batch 64 --epochs 4 --log-every 0 --precision tf32x3 > "$out/trace-b64.log" 2>&1
echo "c. trace b64: exit $?"; head -12 "$out"/trace-b64.*.txt | cut -c1-110
el c done
for p in tf32x3 fp32; do
    timeout 100 python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
        --peers graph --ff-args "--precision $p" --timeout 80 --out "$out/mnist-$p.json" > "$out/mnist-$p.txt" 2>&1
    echo "d. bench $p: exit $?"
    grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-$p.txt" | tail -7
done
el done
