#!/usr/bin/env bash
# Session 31, GPU call 3 (one H200): the tree that lands. Run 2 showed relu1's gate inside conv1's
# weight gradient slower (its gradient read through registers: 48.9 against 18.7 us a launch at
# batch 64), so it is reverted (relu-gate-in-wgrad.patch keeps it); the lane's weight-gradient
# choice stays; gpu_kernel_trace's timeline check keeps every record (run 2: the first 600 were the
# tuner's, all on one stream).
#  a. GPU ctests of training and the tracer
#  b. train_bench tf32x3 and fp32 against the CUDA-graph peer
# Usage: bash bench/results/issue15-s31/run3.sh OUTDIR  (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run3 "${1:?usage: run3.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
dr_build . fivefold test_gpu_train test_gpu_exec ff_kernel_trace || exit 1
el built
timeout 170 ctest --test-dir build-gpu -R "^(test_gpu_train|gpu_train_.*|test_gpu_exec|gpu_kernel_trace|tools_trace_step)$" \
    -j 4 --timeout 160 -V > "$out/ctest-gpu.log" 2>&1
echo "a. ctest: exit $?"; grep -E "Test +#|tests passed|Total Test" "$out/ctest-gpu.log"
grep -E "^[0-9]+: (cuda|hybrid P=2 |direct P=2 ).*digest|configuration . alone|PASS kernel_trace|FAIL" "$out/ctest-gpu.log" | head -12
el a done
F=$PWD/build-gpu/fivefold
for p in tf32x3 fp32; do
    timeout 100 python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
        --peers graph --ff-args "--precision $p" --timeout 80 --out "$out/mnist-$p.json" > "$out/mnist-$p.txt" 2>&1
    echo "b. bench $p: exit $?"
    grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-$p.txt" | tail -7
done
el done
