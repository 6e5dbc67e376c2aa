#!/usr/bin/env bash
# Session 29, GPU call 7 (one H200, the session's last device time): conv1's weight gradient
# (k_conv_wgrad_img, 16 us at batch 64, its time the latency of a shared-memory load a term)
# stages each column's taps in position order, so both rows of a chain are read four positions a
# load. The same chains.
#  a. test_gpu_train (conv_wgrad_image_kernel_bits: against the tiled kernel, Q % 4 == 0 and not),
#     gpu_train_resume, gpu_kernel_trace; train_gpu.sh modes (fp32 2cc6f392 / c6d8228d) and tf32x3
#     (a6481d10 / 99d4ce06)
#  b. a trace at batch 64; train_bench tf32x3 and fp32 against the CUDA-graph peer
# Usage: bash bench/results/issue15-s29/run7.sh OUTDIR  (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run7 "${1:?usage: run7.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
dr_build . fivefold test_gpu_train ff_kernel_trace || exit 1
el built
timeout 60 ctest --test-dir build-gpu -R "^(test_gpu_train|gpu_train_resume|gpu_kernel_trace)$" -j 3 --timeout 50 \
    --output-on-failure > "$out/ctest-gpu.log" 2>&1
echo "a. ctest: exit $?"; grep -E "Test +#|tests passed" "$out/ctest-gpu.log"
build-gpu/verify/gpu/test_gpu_train 2>&1 | grep -E "per image = tiled|PASSED|FAILED" | head -8
export FIVEFOLD=$PWD/build-gpu/fivefold
for c in modes tf32x3; do
    MPIEXEC="mpiexec --oversubscribe" timeout 60 sh verify/gpu/train_gpu.sh $c > "$out/train_gpu-$c.log" 2>&1
    echo "a. train_gpu.sh $c: exit $?"; grep -E "digest|rror" "$out/train_gpu-$c.log" | head -3
done
el a done
F=$PWD/build-gpu/fivefold
timeout 30 env FF_KERNEL_TRACE="$out/trace-b64" FF_KERNEL_TRACE_SKIP=0.3 \
    LD_PRELOAD=build-gpu/libff_kernel_trace.so $F train --model mnist-cnn --mode cuda --data "$DATA" \
    --batch 64 --epochs 2 --log-every 0 --precision tf32x3 > "$out/trace-b64.log" 2>&1
echo "b. trace b64: exit $?"; grep -E "k_conv_wgrad_img" "$out"/trace-b64.*.txt | cut -c1-100
for p in tf32x3 fp32; do
    timeout 70 python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
        --peers graph --ff-args "--precision $p" --timeout 60 --out "$out/mnist-$p.json" > "$out/mnist-$p.txt" 2>&1
    echo "b. bench $p: exit $?"
    grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-$p.txt" | tail -7
done
el done
