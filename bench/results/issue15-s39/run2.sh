#!/usr/bin/env bash
# Session 39, GPU call 2: run 1's tree plus two fixes of what its trace showed.
#  - the split GEMV as k_gemv_split: a thread per weight row and 4 images (run 1's k_gemv, a thread
#    an output, was shared-memory bound: 19.2 us for fc1 at batch 64); the same chains, same bits
#  - conv1's strips summed per image by their own kernel (k_conv_wgrad_strip_sum) before the group
#    sums (run 1: 9.1 us in 10 blocks); the same order, so run 1's digests
#  a. test_gpu_layers, test_gpu_train and the gpu_train_* tests
#  b. ms per step tf32x3 and fp32, batch 64 and 256 (tf32x3 digests must equal run 1's), traced steps
#  c. train_bench tf32x3 then fp32 against PyTorch's CUDA graph in the same call
# Usage: bash bench/results/issue15-s39/run2.sh OUTDIR  (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run2 "${1:?usage: run2.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
dr_build . fivefold test_gpu_train test_gpu_layers ff_kernel_trace || exit 1
el built
timeout 240 ctest --test-dir build-gpu -R "^(test_gpu_layers|test_gpu_train|gpu_train_.*)$" -j 4 --timeout 220 -V > "$out/ctest-gpu.log" 2>&1
echo "a. ctest: exit $?"; grep -E "Test +#|tests passed|Total Test" "$out/ctest-gpu.log"
grep -E "strips|tile 3 \(ran|FAIL" "$out/ctest-gpu.log" | grep -v "negative\|must FAIL\|vs split\|vs bias\|shifted\|one element" | head -20
gzip "$out/ctest-gpu.log"
el a done
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
    echo "b. traced step b$b: exit $?"; sed -n 1,30p "$out/step-b$b.txt"
    gzip "$out"/tl-b$b.*.timeline.tsv
done
el b done
for p in tf32x3 fp32; do
    timeout 120 python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
        --peers graph --ff-args "--precision $p" --timeout 60 --out "$out/mnist-$p.json" > "$out/mnist-$p.txt" 2>&1
    echo "c. bench $p: exit $?"
    grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-$p.txt" | tail -7
done
el done
