#!/usr/bin/env bash
# Session 26, GPU call 4 (one H200): the tree as it stands. The linear tree (run 1), k_conv_x3_rows
# as run 1 ran it with configurations 16..18 added (192 / 288 pixels a block), k_gemm
# configurations 24 and 25 (128-term k stages, for fc1's thin split-K GEMM). test_gpu_train,
# test_gpu_layers (every configuration the same bits); ff_conv_tiles tf32x3 conv2 forward and data
# gradient at b64 / b256; train_gpu.sh modes and tf32x3 (digests 2cc6f392 / c6d8228d and 1a99b90b /
# 5f0807ee must stay); train_mlp.sh gpu; kernel traces at b64 (fp32 and tf32x3); train_bench fp32
# and tf32x3 against the CUDA-graph peer.
# Usage: bash bench/results/issue15-s26/run4.sh OUTDIR   (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run4 "${1:?usage: run4.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
F=build-gpu/fivefold
dr_build . fivefold test_gpu_train test_gpu_layers ff_conv_tiles ff_kernel_trace || exit 1
el built
export FIVEFOLD=$PWD/$F
timeout 150 build-gpu/verify/gpu/test_gpu_train > "$out/test_gpu_train.log" 2>&1
echo "test_gpu_train: exit $? (want 0)"; grep -E "linear dw|backward reduced|PASSED|FAILED" "$out/test_gpu_train.log" | head -24
timeout 150 build-gpu/verify/gpu/test_gpu_layers > "$out/test_gpu_layers.log" 2>&1
echo "test_gpu_layers: exit $? (want 0)"; grep -E "tf32x3 .*(over|FAIL)|PASSED|FAILED" "$out/test_gpu_layers.log" | head -12
grep -cE "tile 1[0-8] vs automatic.*PASS" "$out/test_gpu_layers.log"
grep -vE "(winograd band .* vs full rows|image/channel).*(max 0|PASS)" "$out/test_gpu_layers.log" > "$out/t" && mv "$out/t" "$out/test_gpu_layers.log"
el tested
for b in 64 256; do
    for dg in "" --data-grad; do
        timeout 60 build-gpu/ff_conv_tiles --precision tf32x3 --batch $b $dg > "$out/tiles-x3-b$b$dg.txt" 2>&1
        echo "conv_tiles tf32x3 b$b $dg: exit $?"; grep -E "config 1[0-8]|fastest" "$out/tiles-x3-b$b$dg.txt"
    done
done
el tiles
for c in modes tf32x3; do
    MPIEXEC="mpiexec --oversubscribe" timeout 200 sh verify/gpu/train_gpu.sh $c > "$out/train_gpu-$c.log" 2>&1
    echo "train_gpu.sh $c: exit $?"; grep -E "digest|PASS|FAIL" "$out/train_gpu-$c.log" | head -3
done
MPIEXEC="mpiexec --oversubscribe" timeout 200 sh verify/train/train_mlp.sh gpu > "$out/train_mlp-gpu.log" 2>&1
echo "train_mlp.sh gpu: exit $?"; tail -3 "$out/train_mlp-gpu.log"
el checked
timeout 60 env FF_KERNEL_TRACE="$out/trace-fp32-b64" FF_KERNEL_TRACE_SKIP=0.3 \
    LD_PRELOAD=build-gpu/libff_kernel_trace.so $F train --model mnist-cnn --mode cuda --data "$DATA" \
    --batch 64 --epochs 4 --log-every 0 > "$out/trace-fp32-b64.log" 2>&1
echo "trace b64 fp32: exit $?; $(grep -o 'loss digest.*' "$out/trace-fp32-b64.log" | head -1)"
head -14 "$out"/trace-fp32-b64.*.txt | cut -c1-150
timeout 60 env FF_KERNEL_TRACE="$out/trace-b64" FF_KERNEL_TRACE_SKIP=0.3 \
    LD_PRELOAD=build-gpu/libff_kernel_trace.so $F train --model mnist-cnn --mode cuda --data "$DATA" \
    --batch 64 --epochs 4 --log-every 0 --precision tf32x3 > "$out/trace-b64.log" 2>&1
echo "trace b64 tf32x3: exit $?; $(grep -o 'loss digest.*' "$out/trace-b64.log" | head -1)"
head -24 "$out"/trace-b64.*.txt | cut -c1-150
for p in fp32 tf32x3; do
    timeout 150 python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
        --peers graph --ff-args "--precision $p" --timeout 100 --out "$out/mnist-$p.json" > "$out/mnist-$p.txt" 2>&1
    echo "bench $p: exit $?"
    grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-$p.txt" | tail -7
done
el done
