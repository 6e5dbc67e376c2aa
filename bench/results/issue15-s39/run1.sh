#!/usr/bin/env bash
# Session 39, GPU call 1: two windows a thread in the sparse pool gradient and two outputs in the
# 2x2 maxpool (16-byte row loads; same bits), and the split GEMV (k_gemv with a block per split-K chunk and group of 8
# images) as a tuner candidate of the linear layers' GEMMs, for any batch. Same chains, same bits.
# And conv1's weight gradient in strips of two output rows (k_conv_wgrad_img): new bits.
#  a. test_gpu_layers (split-K linear = the CPU emulation under every forced tile, the split GEMV
#     forced at 20 images), test_gpu_train and the gpu_train_* tests (digests unchanged)
#  b. ms per step tf32x3 batch 64 and 256, and a traced step of each
#  c. train_bench tf32x3 against PyTorch's CUDA graph in the same call
#  d. where ncu exists: k_conv_wgrad_img, k_ps_wgrad, k_gemm's of one b64 step (speed of light)
# Usage: bash bench/results/issue15-s39/run1.sh OUTDIR  (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run1 "${1:?usage: run1.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
dr_build . fivefold test_gpu_train test_gpu_layers ff_kernel_trace || exit 1
el built
timeout 240 ctest --test-dir build-gpu -R "^(test_gpu_layers|test_gpu_train|gpu_train_.*)$" -j 4 --timeout 220 -V > "$out/ctest-gpu.log" 2>&1
echo "a. ctest: exit $?"; grep -E "Test +#|tests passed|Total Test" "$out/ctest-gpu.log"
grep -E "split GEMV|FAIL" "$out/ctest-gpu.log" | head -20
gzip "$out/ctest-gpu.log"
el a done
F=$PWD/build-gpu/fivefold
A="--model mnist-cnn --mode cuda --data $DATA --epochs 4 --log-every 0 --precision tf32x3"
for b in 64 256; do
    timeout 30 $F train $A --batch $b --json "$out/step-b$b.json" > "$out/step-b$b.log" 2>&1
    dr_summ "tf32x3 b$b" "$out/step-b$b.json"
done
A="--model mnist-cnn --mode cuda --data $DATA --epochs 12 --log-every 0 --precision tf32x3"
for b in 64 256; do
    timeout 40 env FF_KERNEL_TRACE="$out/tl-b$b" FF_KERNEL_TRACE_TIMELINE=30000 FF_KERNEL_TRACE_SKIP=0.3 \
        LD_PRELOAD=build-gpu/libff_kernel_trace.so $F train $A --batch $b > "$out/tl-b$b.log" 2>&1
    python3 tools/trace_step.py "$out"/tl-b$b.*.timeline.tsv > "$out/step-b$b.txt" 2>&1
    echo "b. traced step b$b: exit $?"; sed -n 1,30p "$out/step-b$b.txt"
    gzip "$out"/tl-b$b.*.timeline.tsv
done
el b done
timeout 120 python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
    --peers graph --ff-args "--precision tf32x3" --timeout 60 --out "$out/mnist-tf32x3.json" > "$out/mnist-tf32x3.txt" 2>&1
echo "c. bench tf32x3: exit $?"
grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-tf32x3.txt" | tail -7
el c done
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
if [ -n "$NCU" ]; then
    A="--model mnist-cnn --mode cuda --data $DATA --epochs 4 --log-every 0 --precision tf32x3 --batch 64"
    timeout 150 $NCU --kernel-name regex:"k_conv_wgrad_img|k_ps_wgrad|k_ps_dgrad|k_gemm|k_gemv|k_conv_x3_rows" \
        --launch-skip 2500 --launch-count 10 --section SpeedOfLight --section Occupancy --section LaunchStats \
        --section WarpStateStats $F train $A > "$out/ncu-b64.txt" 2>&1
    echo "d. ncu: exit $?"; grep -E "^  [a-z_]+.*\(|Duration|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Stall" "$out/ncu-b64.txt" | head -90
else
    echo "d. no ncu here"
fi
el done
