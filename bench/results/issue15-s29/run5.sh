#!/usr/bin/env bash
# Session 29, GPU call 5 (one H200): memory-bound passes that were not bound by memory. The maxpool
# forward and its tiled backward index in 32 bits where everything fits (a 64-bit division cost
# dozens of instructions an element); the SGD update moves float4s (train_rules.cuh's loop, as the
# fused tree update does) where its buffers are aligned. The same bits.
#  a. the GPU ctests that run these (test_gpu_layers, test_gpu_train, gpu_train_*, test_gpu_exec,
#     gpu_kernel_trace, train_mlp_gpu*), train_gpu.sh modes (fp32 2cc6f392 / c6d8228d) and tf32x3
#     (a6481d10 / 99d4ce06)
#  b. traces at batch 64 and 256 (tf32x3); train_bench tf32x3 and fp32 against the CUDA-graph peer
# Usage: bash bench/results/issue15-s29/run5.sh OUTDIR  (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run5 "${1:?usage: run5.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
dr_build . fivefold test_gpu_layers test_gpu_train test_gpu_exec ff_kernel_trace || exit 1
el built
timeout 250 ctest --test-dir build-gpu -R "^(test_gpu_layers|test_gpu_train|gpu_train_.*|gpu_kernel_trace|test_gpu_exec|train_mlp_gpu|train_mlp_gpu_full)$" \
    -j 3 --timeout 200 --output-on-failure > "$out/ctest-gpu.log" 2>&1
echo "a. ctest: exit $?"; grep -E "Test +#|tests passed|Total Test" "$out/ctest-gpu.log"
grep -E "^ +(sgd|relu|maxpool).*(PASS|FAIL)" "$out/ctest-gpu.log" | head -12
export FIVEFOLD=$PWD/build-gpu/fivefold
for c in modes tf32x3; do
    MPIEXEC="mpiexec --oversubscribe" timeout 200 sh verify/gpu/train_gpu.sh $c > "$out/train_gpu-$c.log" 2>&1
    echo "a. train_gpu.sh $c: exit $?"; grep -E "digest|rror" "$out/train_gpu-$c.log" | head -5
done
grep -vE "(winograd band .* vs full rows|image/channel|vs automatic).*(max 0|PASS)" "$out/ctest-gpu.log" > "$out/tl"; mv "$out/tl" "$out/ctest-gpu.log"
el a done
F=$PWD/build-gpu/fivefold
for b in 64 256; do
    timeout 60 env FF_KERNEL_TRACE="$out/trace-b$b" FF_KERNEL_TRACE_SKIP=0.3 \
        LD_PRELOAD=build-gpu/libff_kernel_trace.so $F train --model mnist-cnn --mode cuda --data "$DATA" \
        --batch $b --epochs 3 --log-every 0 --precision tf32x3 > "$out/trace-b$b.log" 2>&1
    echo "b. trace b$b tf32x3: exit $?"
    grep -E "maxpool|sgd|relu_bwd" "$out"/trace-b$b.*.txt | cut -c1-110
done
for p in tf32x3 fp32; do
    timeout 150 python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
        --peers graph --ff-args "--precision $p" --timeout 100 --out "$out/mnist-$p.json" > "$out/mnist-$p.txt" 2>&1
    echo "b. bench $p: exit $?"
    grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-$p.txt" | tail -7
done
el done
