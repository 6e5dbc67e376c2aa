#!/usr/bin/env bash
# Session 33, GPU call 1 (one H200; this session was lent 432 s of device time, so one call that
# must fit in about 300 s): session 32's run 4 again, whose results were lost with that session
# (fetched, never committed). The tree that lands: conv1's weight gradient in groups of 32 output
# channels, its taps in shared memory; the bottom layer's weight gradient on the stream.
#  a. GPU ctests of training and the tracer (digests as before)
#  b. ms per step, tf32x3 at batch 64 and 256; digests must not move
#  c. train_bench tf32x3, then fp32, against the CUDA-graph peer (the README's figures), each only
#     while the time left allows it
# Usage: bash bench/results/issue15-s33/run1.sh OUTDIR  (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run1 "${1:?usage: run1.sh OUTDIR}"
LIMIT=${RUN_LIMIT:-290}
export DATA="$PWD/.data-mid/fashion-mnist"
dr_build . fivefold test_gpu_train test_gpu_exec ff_kernel_trace || exit 1
el built
timeout 120 ctest --test-dir build-gpu -R "^(test_gpu_train|gpu_train_.*|test_gpu_exec|gpu_kernel_trace|tools_trace_step)$" \
    -j 4 --timeout 110 -V > "$out/ctest-gpu.log" 2>&1
echo "a. ctest: exit $?"; grep -E "Test +#|tests passed|Total Test" "$out/ctest-gpu.log"
grep -E "^[0-9]+: (cuda|hybrid P=2 |direct P=2 ).*digest|per image = tiled|PASS kernel_trace|FAIL" "$out/ctest-gpu.log" | head -16
gzip "$out/ctest-gpu.log"
el a done
F=$PWD/build-gpu/fivefold
A="--model mnist-cnn --mode cuda --data $DATA --epochs 4 --log-every 0 --precision tf32x3"
for b in 64 256; do
    n=step-b$b
    timeout 30 $F train $A --batch $b --json "$out/$n.json" > "$out/$n.log" 2>&1
    dr_summ "b$b" "$out/$n.json"
done
grep -q '"loss_digest": *"a1afe801dd367dad"' "$out/step-b64.json" && grep -q '"weights_digest": *"f5c1bb3e67fbb81a"' "$out/step-b64.json" || echo "b. b64: digests moved"
grep -q '"loss_digest": *"ce1eb0186245a1c3"' "$out/step-b256.json" && grep -q '"weights_digest": *"70e8b6618a4c1cf6"' "$out/step-b256.json" || echo "b. b256: digests moved"
el b done
for p in tf32x3 fp32; do
    left=$(dr_left "$LIMIT")
    [ "$left" -gt 50 ] || { echo "c. bench $p: not run ($left s left)"; continue; }
    timeout $((left - 5)) python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
        --peers graph --ff-args "--precision $p" --timeout 60 --out "$out/mnist-$p.json" > "$out/mnist-$p.txt" 2>&1
    echo "c. bench $p: exit $?"
    grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-$p.txt" | tail -7
done
el done
