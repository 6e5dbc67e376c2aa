#!/usr/bin/env bash
# Session 28, GPU call 4 (one H200): k_gemm's fragments four k steps ahead for threads of few chains
# (mnist fc1's split-K forward), and the tf32x3 weight gradient with 72-column blocks
# (configurations 2 and 3; the warpgroup ones are now 4-7).
#  a. test_gpu_layers, test_gpu_train (every weight-gradient configuration the same bits),
#     train_gpu.sh modes (fp32: 2cc6f392 / c6d8228d) and tf32x3 (a6481d10 / 99d4ce06)
#  b. ff_conv_tiles --weight-grad tf32x3 at b64 and b256; conv1's weight gradient stalls (fp32 chains)
#  c. trace b64 tf32x3; train_bench tf32x3 and fp32 against the CUDA-graph peer
# Usage: bash bench/results/issue15-s28/run4.sh OUTDIR  (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run4 "${1:?usage: run4.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
dr_build . fivefold test_gpu_layers test_gpu_train ff_conv_tiles ff_kernel_trace || exit 1
el built
timeout 200 build-gpu/verify/gpu/test_gpu_layers > "$out/test_gpu_layers.log" 2>&1
echo "a. test_gpu_layers: exit $? (want 0)"; grep -E "PASSED|FAILED|rror" "$out/test_gpu_layers.log" | head -5
grep -vE "(winograd band .* vs full rows|image/channel).*(max 0|PASS)" "$out/test_gpu_layers.log" > "$out/tl" && mv "$out/tl" "$out/test_gpu_layers.log"
timeout 200 build-gpu/verify/gpu/test_gpu_train > "$out/test_gpu_train.log" 2>&1
echo "a. test_gpu_train: exit $? (want 0)"; grep -E "PASSED|FAILED|configuration [0-9]" "$out/test_gpu_train.log" | head -12
export FIVEFOLD=$PWD/build-gpu/fivefold
for c in modes tf32x3; do
    MPIEXEC="mpiexec --oversubscribe" timeout 200 sh verify/gpu/train_gpu.sh $c > "$out/train_gpu-$c.log" 2>&1
    echo "a. train_gpu.sh $c: exit $?"; grep -E "digest|rror" "$out/train_gpu-$c.log" | head -4
done
el a done
for b in 64 256; do
    timeout 60 build-gpu/ff_conv_tiles --weight-grad --precision tf32x3 --batch $b > "$out/wgrad-b$b.txt" 2>&1
    echo "b. wgrad tf32x3 b$b: exit $?"; grep -E "us " "$out/wgrad-b$b.txt" | head -10
done
timeout 60 build-gpu/ff_conv_tiles --weight-grad --layer conv1 --batch 64 --iters 20 --stalls > "$out/stalls-wgrad-conv1-b64.txt" 2>&1
echo "b. stalls conv1 wgrad b64: exit $?"; grep -E "us |^kernel" "$out/stalls-wgrad-conv1-b64.txt" | head -4
grep -A24 "^kernel .*k_conv_wgrad_img" "$out/stalls-wgrad-conv1-b64.txt" | head -28
el b done
F=$PWD/build-gpu/fivefold
timeout 60 env FF_KERNEL_TRACE="$out/trace-b64" FF_KERNEL_TRACE_SKIP=0.3 \
    LD_PRELOAD=build-gpu/libff_kernel_trace.so $F train --model mnist-cnn --mode cuda --data "$DATA" \
    --batch 64 --epochs 4 --log-every 0 --precision tf32x3 > "$out/trace-b64.log" 2>&1
echo "c. trace b64 tf32x3: exit $?"
head -16 "$out"/trace-b64.*.txt | cut -c1-150
for p in tf32x3 fp32; do
    timeout 150 python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
        --peers graph --ff-args "--precision $p" --timeout 100 --out "$out/mnist-$p.json" > "$out/mnist-$p.txt" 2>&1
    echo "c. bench $p: exit $?"
    grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-$p.txt" | tail -7
done
el done
