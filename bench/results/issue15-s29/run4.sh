#!/usr/bin/env bash
# Session 29, GPU call 4 (one H200): run 3's k_conv_wgrad_bias_img took 16 us at batch 64 and 61 at
# 256 (each chain's shared-memory load waited for before its add): now 16 values are loaded before
# they are added; k_relu_bwd moves float4s where its buffers are aligned. Tentative rule 7 / 11.
#  a. test_gpu_train (weight-gradient configurations, fallbacks, relu bits aligned and not),
#     train_gpu.sh modes (fp32 2cc6f392 / c6d8228d) and tf32x3 (a6481d10 / 99d4ce06)
#  b. ff_conv_tiles --weight-grad tf32x3 at batch 64 and 256
#  c. traces at 64 and 256; train_bench tf32x3 and fp32 against the CUDA-graph peer
# Usage: bash bench/results/issue15-s29/run4.sh OUTDIR  (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run4 "${1:?usage: run4.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
dr_build . fivefold test_gpu_train ff_conv_tiles ff_kernel_trace || exit 1
el built
timeout 200 build-gpu/verify/gpu/test_gpu_train > "$out/test_gpu_train.log" 2>&1
echo "a. test_gpu_train: exit $? (want 0)"; grep -E "PASSED|FAILED|ERROR|fell back|relu backward" "$out/test_gpu_train.log" | head -10
export FIVEFOLD=$PWD/build-gpu/fivefold
for c in modes tf32x3; do
    MPIEXEC="mpiexec --oversubscribe" timeout 200 sh verify/gpu/train_gpu.sh $c > "$out/train_gpu-$c.log" 2>&1
    echo "a. train_gpu.sh $c: exit $?"; grep -E "digest|rror" "$out/train_gpu-$c.log" | head -5
done
el a done
for b in 64 256; do
    timeout 60 build-gpu/ff_conv_tiles --weight-grad --precision tf32x3 --batch $b > "$out/wgrad-b$b.txt" 2>&1
    echo "b. wgrad tf32x3 b$b: exit $?"; grep -E "us " "$out/wgrad-b$b.txt" | head -14 | tr -s ' ' | cut -c1-10 | paste -sd'|'
done
el b done
F=$PWD/build-gpu/fivefold
for b in 64 256; do
    timeout 60 env FF_KERNEL_TRACE="$out/trace-b$b" FF_KERNEL_TRACE_SKIP=0.3 \
        LD_PRELOAD=build-gpu/libff_kernel_trace.so $F train --model mnist-cnn --mode cuda --data "$DATA" \
        --batch $b --epochs 3 --log-every 0 --precision tf32x3 > "$out/trace-b$b.log" 2>&1
    echo "c. trace b$b tf32x3: exit $?"
    grep -E "wgrad|split|relu_bwd" "$out"/trace-b$b.*.txt | cut -c1-110
done
for p in tf32x3 fp32; do
    timeout 150 python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
        --peers graph --ff-args "--precision $p" --timeout 100 --out "$out/mnist-$p.json" > "$out/mnist-$p.txt" 2>&1
    echo "c. bench $p: exit $?"
    grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-$p.txt" | tail -7
done
el done
