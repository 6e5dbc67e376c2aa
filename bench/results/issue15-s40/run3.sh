#!/usr/bin/env bash
# Session 40, GPU call 3: run 2 timed the data gradient's dense gather (every cell of a window,
# fmas only) at 51.5 / 190.8 us against the switch's 53.7 / 202.9 at batch 64 / 256 (same bits);
# the gather is now the default and the switch the test hook's. This checks the tree that lands:
# (the switch and the gather share one psd_part since; compiled to the same instruction mix)
#  a. test_gpu_layers, test_gpu_train, the gpu_train_* tests (digests as sessions 39 and 40),
#     ff_conv_tiles' usage and stalls tests
#  b. ff_conv_tiles --pool-sparse, batch 64 (with --stalls) and 256
#  c. ms per step tf32x3 and fp32, batch 64 and 256, traced steps
#  d. train_bench tf32x3 then fp32 against PyTorch's CUDA graph in the same call
# Usage: bash bench/results/issue15-s40/run3.sh OUTDIR  (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run3 "${1:?usage: run3.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
dr_build . fivefold test_gpu_train test_gpu_layers ff_kernel_trace ff_conv_tiles || exit 1
el built
timeout 240 ctest --test-dir build-gpu -R "^(test_gpu_layers|test_gpu_train|gpu_train_.*|tools_conv_tiles_usage|gpu_conv_stalls)$" -j 4 --timeout 220 -V > "$out/ctest-gpu.log" 2>&1
echo "a. ctest: exit $?"; grep -E "Test +#|tests passed|Total Test" "$out/ctest-gpu.log"
grep -E "pool-sparse dx|pool-sparse dw|FAIL" "$out/ctest-gpu.log" | grep -v "negative\|must FAIL\|vs split\|vs bias\|shifted\|one element" | head -30
gzip "$out/ctest-gpu.log"
el a done
for b in 64 256; do
    st=""; [ $b = 64 ] && st=--stalls
    timeout 60 build-gpu/ff_conv_tiles --pool-sparse --batch $b --iters 100 $st > "$out/ps-tiles-b$b.txt" 2>&1
    echo "b. ff_conv_tiles --pool-sparse b$b: exit $?"; grep -E "^  [a-z]|pool-sparse" "$out/ps-tiles-b$b.txt" | head -14
done
el b done
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
    echo "c. traced step b$b: exit $?"; sed -n 1,32p "$out/step-b$b.txt"
    gzip "$out"/tl-b$b.*.timeline.tsv
done
el c done
for p in tf32x3 fp32; do
    timeout 120 python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
        --peers graph --ff-args "--precision $p" --timeout 60 --out "$out/mnist-$p.json" > "$out/mnist-$p.txt" 2>&1
    echo "d. bench $p: exit $?"
    grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-$p.txt" | tail -7
done
el done
