#!/usr/bin/env bash
# Session 29, GPU call 6 (one H200): no copy nodes in a training step. The gather reads the step's
# sample indices and the loss kernel writes the losses in the trainer's pinned host slots through
# their mapped addresses (ff_device_host_mapped); FF_TRAIN_HOST_COPIES=1 restores the two copies.
#  a. GPU ctests of training (test_gpu_train, gpu_train_*, test_gpu_exec, train_mlp_gpu),
#     train_gpu.sh modes (fp32 2cc6f392 / c6d8228d) and tf32x3 (a6481d10 / 99d4ce06)
#  b. A/B in one call: mapped against FF_TRAIN_HOST_COPIES=1, batch 64 and 256, tf32x3, twice each
#     interleaved (ms per step, digests equal); a trace at batch 64 (no memcpy rows per step)
#  c. train_bench tf32x3 against the CUDA-graph peer
# Usage: bash bench/results/issue15-s29/run6.sh OUTDIR  (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run6 "${1:?usage: run6.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
dr_build . fivefold test_gpu_train test_gpu_exec ff_kernel_trace || exit 1
el built
timeout 150 ctest --test-dir build-gpu -R "^(test_gpu_train|gpu_train_.*|test_gpu_exec|train_mlp_gpu)$" \
    -j 3 --timeout 120 --output-on-failure > "$out/ctest-gpu.log" 2>&1
echo "a. ctest: exit $?"; grep -E "Test +#|tests passed|Total Test" "$out/ctest-gpu.log"
export FIVEFOLD=$PWD/build-gpu/fivefold
for c in modes tf32x3; do
    MPIEXEC="mpiexec --oversubscribe" timeout 120 sh verify/gpu/train_gpu.sh $c > "$out/train_gpu-$c.log" 2>&1
    echo "a. train_gpu.sh $c: exit $?"; grep -E "digest|rror" "$out/train_gpu-$c.log" | head -5
done
el a done
F=$PWD/build-gpu/fivefold
for b in 64 256; do
    for r in 1 2; do
        for v in 0 1; do
            timeout 60 env FF_TRAIN_HOST_COPIES=$v $F train --model mnist-cnn --mode cuda --data "$DATA" --batch $b \
                --epochs 4 --log-every 0 --precision tf32x3 --json "$out/ab-b$b-copies$v-$r.json" > "$out/ab-b$b-copies$v-$r.log" 2>&1
            dr_summ "b$b copies=$v #$r" "$out/ab-b$b-copies$v-$r.json"
        done
    done
done
timeout 60 env FF_KERNEL_TRACE="$out/trace-b64" FF_KERNEL_TRACE_SKIP=0.3 \
    LD_PRELOAD=build-gpu/libff_kernel_trace.so $F train --model mnist-cnn --mode cuda --data "$DATA" \
    --batch 64 --epochs 3 --log-every 0 --precision tf32x3 > "$out/trace-b64.log" 2>&1
echo "b. trace b64: exit $?"; grep -E "memcpy|k_gather|k_sgd4|k_softmax" "$out"/trace-b64.*.txt | cut -c1-100
el b done
timeout 150 python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
    --peers graph --ff-args "--precision tf32x3" --timeout 100 --out "$out/mnist-tf32x3.json" > "$out/mnist-tf32x3.txt" 2>&1
echo "c. bench tf32x3: exit $?"
grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-tf32x3.txt" | tail -7
el done
