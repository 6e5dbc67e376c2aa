#!/usr/bin/env bash
# Session 32, GPU call 4 (one H200): the tree that lands. conv1's weight gradient in groups of 32
# output channels (one block an image for mnist: run 3's 'one' variant, now the constant), the test
# layer of 40 channels (groups 32 + 8).
#  a. GPU ctests of training and the tracer (digests as before)
#  b. ms per step, tf32x3 at batch 64 and 256, twice each; digests must not move
#  c. train_bench tf32x3 and fp32 against the CUDA-graph peer (the README's figures)
# Usage: bash bench/results/issue15-s32/run4.sh OUTDIR  (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run4 "${1:?usage: run4.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
dr_build . fivefold test_gpu_train test_gpu_exec ff_kernel_trace || exit 1
el built
timeout 170 ctest --test-dir build-gpu -R "^(test_gpu_train|gpu_train_.*|test_gpu_exec|gpu_kernel_trace|tools_trace_step)$" \
    -j 4 --timeout 160 -V > "$out/ctest-gpu.log" 2>&1
echo "a. ctest: exit $?"; grep -E "Test +#|tests passed|Total Test" "$out/ctest-gpu.log"
grep -E "^[0-9]+: (cuda|hybrid P=2 |direct P=2 ).*digest|per image = tiled|PASS kernel_trace|FAIL" "$out/ctest-gpu.log" | head -16
gzip "$out/ctest-gpu.log"
el a done
F=$PWD/build-gpu/fivefold
A="--model mnist-cnn --mode cuda --data $DATA --epochs 4 --log-every 0 --precision tf32x3"
for b in 64 256; do
    for r in 1 2; do
        n=step-b$b-$r
        timeout 40 $F train $A --batch $b --json "$out/$n.json" > "$out/$n.log" 2>&1
        dr_summ "b$b #$r" "$out/$n.json"
    done
done
for j in "$out"/step-b64-*.json; do grep -q '"loss_digest": *"a1afe801dd367dad"' "$j" && grep -q '"weights_digest": *"f5c1bb3e67fbb81a"' "$j" || echo "b. $j: digests moved"; done
for j in "$out"/step-b256-*.json; do grep -q '"loss_digest": *"ce1eb0186245a1c3"' "$j" && grep -q '"weights_digest": *"70e8b6618a4c1cf6"' "$j" || echo "b. $j: digests moved"; done
el b done
for p in tf32x3 fp32; do
    timeout 100 python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
        --peers graph --ff-args "--precision $p" --timeout 80 --out "$out/mnist-$p.json" > "$out/mnist-$p.txt" 2>&1
    echo "c. bench $p: exit $?"
    grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-$p.txt" | tail -7
done
el done
