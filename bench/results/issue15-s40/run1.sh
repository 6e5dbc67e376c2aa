#!/usr/bin/env bash
# Session 40, GPU call 1: conv2's two pool-sparse gradients rewritten for images as wide as their
# windows reach (mnist's conv2), same chains so the same bits:
#  - k_ps_dgrad_rows: tiles of 4 rows x the whole width (a pick's taps at compile-time places for
#    whole windows) instead of 2 x 13 strips
#  - k_ps_wgrad_rows: a warp walks each window row holding the window's 4 x 4 input patch in
#    registers (8 shared-memory loads a window, shared by its output channels) instead of 9 loads a
#    tap and channel
#  a. test_gpu_layers, test_gpu_train (row kernels = general kernels = host model, bit for bit) and
#     the gpu_train_* tests; this also checks session 39's landed tree as a whole
#  b. ms per step tf32x3 and fp32, batch 64 and 256 (digests must equal session 39's), traced steps
#  c. train_bench tf32x3 then fp32 against PyTorch's CUDA graph in the same call
#  d. ff_conv_tiles --pool-sparse at batch 64 and 256: every kernel of both gradients timed alone
#     (strips, row tiles of 2 and 4; 9 loads a tap or the patch walk, 2 or 4 channels a warp), same
#     bits checked; PC samples of the automatic ones at 64
#  e. where ncu exists: the two row kernels of one b64 step (speed of light, warp states)
# Usage: bash bench/results/issue15-s40/run1.sh OUTDIR  (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run1 "${1:?usage: run1.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
dr_build . fivefold test_gpu_train test_gpu_layers ff_kernel_trace ff_conv_tiles || exit 1
el built
timeout 240 ctest --test-dir build-gpu -R "^(test_gpu_layers|test_gpu_train|gpu_train_.*)$" -j 4 --timeout 220 -V > "$out/ctest-gpu.log" 2>&1
echo "a. ctest: exit $?"; grep -E "Test +#|tests passed|Total Test" "$out/ctest-gpu.log"
grep -E "row kernels|pool-sparse dx|pool-sparse dw|FAIL" "$out/ctest-gpu.log" | grep -v "negative\|must FAIL\|vs split\|vs bias\|shifted\|one element" | head -30
gzip "$out/ctest-gpu.log"
el a done
for b in 64 256; do
    st=""; [ $b = 64 ] && st=--stalls
    timeout 60 build-gpu/ff_conv_tiles --pool-sparse --batch $b --iters 100 $st > "$out/ps-tiles-b$b.txt" 2>&1
    echo "d. ff_conv_tiles --pool-sparse b$b: exit $?"; grep -E "^  [a-z]|pool-sparse" "$out/ps-tiles-b$b.txt" | head -12
done
el d done
F=$PWD/build-gpu/fivefold
for p in tf32x3 fp32; do
    A="--model mnist-cnn --mode cuda --data $DATA --epochs 4 --log-every 0 --precision $p"
    for b in 64 256; do
        timeout 30 $F train $A --batch $b --json "$out/step-$p-b$b.json" > "$out/step-$p-b$b.log" 2>&1
        dr_summ "$p b$b" "$out/step-$p-b$b.json"
    done
done
A="--model mnist-cnn --mode cuda --data $DATA --epochs 12 --log-every 0 --precision tf32x3"
for b in 64 256; do
    timeout 40 env FF_KERNEL_TRACE="$out/tl-b$b" FF_KERNEL_TRACE_TIMELINE=30000 FF_KERNEL_TRACE_SKIP=0.3 \
        LD_PRELOAD=build-gpu/libff_kernel_trace.so $F train $A --batch $b > "$out/tl-b$b.log" 2>&1
    python3 tools/trace_step.py "$out"/tl-b$b.*.timeline.tsv > "$out/step-b$b.txt" 2>&1
    echo "b. traced step b$b: exit $?"; sed -n 1,32p "$out/step-b$b.txt"
    gzip "$out"/tl-b$b.*.timeline.tsv
done
el b done
for p in tf32x3 fp32; do
    timeout 120 python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
        --peers graph --ff-args "--precision $p" --timeout 60 --out "$out/mnist-$p.json" > "$out/mnist-$p.txt" 2>&1
    echo "c. bench $p: exit $?"
    grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-$p.txt" | tail -7
done
el c done
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
if [ -n "$NCU" ] && [ "$(dr_left 540)" -gt 90 ]; then
    A="--model mnist-cnn --mode cuda --data $DATA --epochs 2 --log-every 0 --precision tf32x3 --batch 64"
    timeout $(($(dr_left 560) - 10)) $NCU --kernel-name regex:"k_ps_dgrad_rows|k_ps_wgrad_rows" \
        --launch-skip 400 --launch-count 4 --section SpeedOfLight --section Occupancy --section LaunchStats \
        --section WarpStateStats --section MemoryWorkloadAnalysis $F train $A > "$out/ncu-b64.txt" 2>&1
    echo "e. ncu: exit $?"; grep -E "^  [a-z_]+.*\(|Duration|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Warp Cycles Per Issued" "$out/ncu-b64.txt" | head -40
else
    echo "e. no ncu here or no time"
fi
el done
