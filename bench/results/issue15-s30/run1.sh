#!/usr/bin/env bash
# Session 30, GPU call 1 (one H200): the gradient lane. A one-pass backward runs each layer's
# parameter gradients on a second stream, forked once the layer's output gradient is there and
# joined at the end, so conv2's weight gradient runs beside its data gradient (and fc1's beside
# the pooling and relu backward); FF_TRAIN_CONCURRENT_BACKWARD=0 keeps one stream.
#  a. GPU ctests of training (test_gpu_train, gpu_train_*, test_gpu_exec, train_mlp_gpu),
#     with train_gpu.sh modes (session 29: fp32 2cc6f392 / c6d8228d) and tf32x3 (a6481d10 / 99d4ce06)
#  b. A/B in one call: lane against FF_TRAIN_CONCURRENT_BACKWARD=0, batch 64 and 256, tf32x3 and
#     fp32, twice each interleaved (ms per step, digests equal)
#  c. mutants: the lane reading the ping-pong buffers (lane-pingpong.patch: its digests should
#     differ from the lane's) and the stream not joining the lane (lane-nojoin.patch: the capture fails)
#  d. train_bench tf32x3 and fp32 against the CUDA-graph peer
# Usage: bash bench/results/issue15-s30/run1.sh OUTDIR  (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run1 "${1:?usage: run1.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
dr_build . fivefold test_gpu_train test_gpu_exec || exit 1
el built
timeout 200 ctest --test-dir build-gpu -R "^(test_gpu_train|gpu_train_.*|test_gpu_exec|train_mlp_gpu)$" \
    -j 4 --timeout 190 -V > "$out/ctest-gpu.log" 2>&1
echo "a. ctest: exit $?"; grep -E "Test +#|tests passed|Total Test" "$out/ctest-gpu.log"
grep -E "^[0-9]+: (cuda|hybrid P=2|direct P=2|direct P=3).*digest" "$out/ctest-gpu.log" | head -12
export FIVEFOLD=$PWD/build-gpu/fivefold
el a done
F=$PWD/build-gpu/fivefold
for p in tf32x3 fp32; do
    for b in 64 256; do
        for r in 1 2; do
            for v in 0 1; do
                n=ab-$p-b$b-lane$v-$r
                timeout 60 env FF_TRAIN_CONCURRENT_BACKWARD=$v $F train --model mnist-cnn --mode cuda --data "$DATA" \
                    --batch $b --epochs 4 --log-every 0 --precision $p --json "$out/$n.json" > "$out/$n.log" 2>&1
                dr_summ "$p b$b lane=$v #$r" "$out/$n.json"
            done
        done
    done
done
el b done
for m in pingpong nojoin; do
    if git apply "$here/lane-$m.patch"; then
        cmake --build build-gpu --target fivefold > "$out/build-mutant-$m.log" 2>&1 || echo "c. mutant $m build failed"
        for b in 64 256; do
            timeout 60 $F train --model mnist-cnn --mode cuda --data "$DATA" --batch $b --epochs 4 --log-every 0 \
                --precision tf32x3 --json "$out/mutant-$m-b$b.json" > "$out/mutant-$m-b$b.log" 2>&1
            echo "c. mutant $m b$b: exit $? $(grep -E 'rror' "$out/mutant-$m-b$b.log" | head -1)"
            dr_summ "mutant $m tf32x3 b$b" "$out/mutant-$m-b$b.json"
        done
        git apply -R "$here/lane-$m.patch"
    else
        echo "c. mutant patch $m does not apply"
    fi
done
cmake --build build-gpu --target fivefold > "$out/build-unmutant.log" 2>&1 || echo "c. rebuild failed"
el c done
for p in tf32x3 fp32; do
    timeout 100 python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
        --peers graph --ff-args "--precision $p" --timeout 80 --out "$out/mnist-$p.json" > "$out/mnist-$p.txt" 2>&1
    echo "d. bench $p: exit $?"
    grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-$p.txt" | tail -7
done
el done
