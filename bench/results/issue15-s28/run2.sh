#!/usr/bin/env bash
# Session 28, GPU call 2 (one H200): k_conv_x3_wgp (configurations 27-32), the warpgroup conv with
# its operands split before it runs (k_split_pairs, k_split_wtiles), and k_conv_x3_wg's stage
# products / epilogue as shared functions.
#  a. test_gpu_layers (33 tf32x3 configurations the same bits: 264 "tile N vs automatic" PASS lines),
#     test_gpu_train, train_gpu.sh tf32x3 (digests a6481d10 / 99d4ce06 must stay)
#  b. ff_conv_tiles tf32x3: forward and data gradient at b64 and b256
#  c. trace b64 tf32x3; train_bench tf32x3 against the CUDA-graph peer
# Usage: bash bench/results/issue15-s28/run2.sh OUTDIR  (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run2 "${1:?usage: run2.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
dr_build . fivefold test_gpu_layers test_gpu_train ff_conv_tiles ff_kernel_trace || exit 1
el built
timeout 200 build-gpu/verify/gpu/test_gpu_layers > "$out/test_gpu_layers.log" 2>&1
rc1=$?
echo "a. test_gpu_layers: exit $rc1 (want 0)"; grep -E "tf32x3 .*(over|FAIL)|PASSED|FAILED|ERROR|rror" "$out/test_gpu_layers.log" | grep -v "must FAIL" | head -12
grep -cE "tf32x3 .* tile [0-9]+ vs automatic.*PASS" "$out/test_gpu_layers.log"
grep -E "tf32x3 .* tile (2[7-9]|3[0-2]) vs automatic" "$out/test_gpu_layers.log" | head -6
grep -vE "(winograd band .* vs full rows|image/channel).*(max 0|PASS)" "$out/test_gpu_layers.log" > "$out/tl" && mv "$out/tl" "$out/test_gpu_layers.log"
for b in 64 256; do
    for dg in "" --data-grad; do
        timeout 60 build-gpu/ff_conv_tiles --precision tf32x3 --batch $b $dg > "$out/tiles-b$b$dg.txt" 2>&1
        echo "b. tiles tf32x3 b$b $dg: exit $?"; grep -E "config (19|2[0-9]|3[0-2]):|fastest|rror" "$out/tiles-b$b$dg.txt"
    done
done
el b done
timeout 200 build-gpu/verify/gpu/test_gpu_train > "$out/test_gpu_train.log" 2>&1
echo "a. test_gpu_train: exit $? (want 0)"; grep -E "PASSED|FAILED" "$out/test_gpu_train.log" | head -3
export FIVEFOLD=$PWD/build-gpu/fivefold
MPIEXEC="mpiexec --oversubscribe" timeout 200 sh verify/gpu/train_gpu.sh tf32x3 > "$out/train_gpu-tf32x3.log" 2>&1
echo "a. train_gpu.sh tf32x3: exit $?"; grep -E "digest|vs fp32|PASS|FAIL|rror" "$out/train_gpu-tf32x3.log" | head -6
el a done
F=$PWD/build-gpu/fivefold
timeout 60 env FF_KERNEL_TRACE="$out/trace-b64" FF_KERNEL_TRACE_SKIP=0.3 \
    LD_PRELOAD=build-gpu/libff_kernel_trace.so $F train --model mnist-cnn --mode cuda --data "$DATA" \
    --batch 64 --epochs 4 --log-every 0 --precision tf32x3 > "$out/trace-b64.log" 2>&1
echo "c. trace b64 tf32x3: exit $?"
head -30 "$out"/trace-b64.*.txt | cut -c1-150
timeout 150 python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
    --peers graph --ff-args "--precision tf32x3" --timeout 100 --out "$out/mnist-tf32x3.json" > "$out/mnist-tf32x3.txt" 2>&1
echo "c. bench tf32x3: exit $?"
grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-tf32x3.txt" | tail -7
el done
