#!/usr/bin/env bash
# Session 35, GPU call 4 (one H200): the tree that lands after review, which keeps the 2x2 pool
# backward (k_maxpool_bwd_2x2) and takes relu1's gate in conv1's weight gradient out again (at most
# 1 % a step in run 2 with both, within the runs' spread, for an API and a special case):
#  a. test_gpu_train and the six gpu_train_* digest tests
#  b. a tf32x3 step's time at batch 64 and 256 (the digests must not move)
#  c. train_bench tf32x3, then fp32, against PyTorch's CUDA graph, while the time left allows
# Usage: bash bench/results/issue15-s35/run4.sh OUTDIR  (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run4 "${1:?usage: run4.sh OUTDIR}"
LIMIT=${RUN_LIMIT:-370}
export DATA="$PWD/.data-mid/fashion-mnist"
dr_build . fivefold test_gpu_train || exit 1
el built
timeout 120 ctest --test-dir build-gpu -R "^(test_gpu_train|gpu_train_.*)$" -j 4 --timeout 110 -V > "$out/ctest-gpu.log" 2>&1
echo "a. ctest: exit $?"; grep -E "Test +#|tests passed|Total Test" "$out/ctest-gpu.log"
grep -E "^[0-9]+: (cuda|hybrid P=2 |direct P=2 |hybrid P=2 for).*digest|maxpool|FAIL" "$out/ctest-gpu.log" | head -30
gzip "$out/ctest-gpu.log"
el a done
F=$PWD/build-gpu/fivefold
A="--model mnist-cnn --mode cuda --data $DATA --epochs 4 --log-every 0 --precision tf32x3"
for b in 64 256; do
    timeout 30 $F train $A --batch $b --json "$out/step-b$b.json" > "$out/step-b$b.log" 2>&1
    dr_summ "b$b" "$out/step-b$b.json"
done
grep -q '"loss_digest": *"a1afe801dd367dad"' "$out/step-b64.json" && grep -q '"weights_digest": *"f5c1bb3e67fbb81a"' "$out/step-b64.json" || echo "b. b64: digests moved"
grep -q '"loss_digest": *"ce1eb0186245a1c3"' "$out/step-b256.json" && grep -q '"weights_digest": *"70e8b6618a4c1cf6"' "$out/step-b256.json" || echo "b. b256: digests moved"
el b done
for p in tf32x3 fp32; do
    left=$(dr_left "$LIMIT")
    [ "$left" -gt 45 ] || { echo "c. bench $p: not run ($left s left)"; continue; }
    timeout $((left - 5)) python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
        --peers graph --ff-args "--precision $p" --timeout 60 --out "$out/mnist-$p.json" > "$out/mnist-$p.txt" 2>&1
    echo "c. bench $p: exit $?"
    grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-$p.txt" | tail -7
done
el done
