#!/usr/bin/env bash
# Session 32, GPU call 2 (one H200): relu1's backward in conv2's data-gradient epilogue and conv1's
# weight gradient in blocks of 8 channels (4 blocks an image).
#  a. GPU ctests of training, the layers (every conv epilogue changed), two mnist inference modes
#     and the tracer (digests as before)
#  b. timelines of a step at batch 64 and 256 (graph replays), through tools/trace_step.py
#  c. A/B in one call, tf32x3 at batch 64 and 256, twice each interleaved, one build with
#     exp-env2.patch (env switches for this part only): new, nogate (FF_EXP_NO_GATE: relu1's own
#     pass again); digests must not move
#  d. train_bench tf32x3 and fp32 against the CUDA-graph peer
# Usage: bash bench/results/issue15-s32/run2.sh OUTDIR  (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run2 "${1:?usage: run2.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
dr_build . fivefold fivefold_cli test_gpu_train test_gpu_exec test_gpu_layers ff_kernel_trace || exit 1
el built
timeout 280 ctest --test-dir build-gpu -R "^(test_gpu_train|gpu_train_.*|test_gpu_exec|test_gpu_layers|gpu_kernel_trace|tools_trace_step|gpu_hybrid_mnist_rows_P2|gpu_direct_mnist_batch_P3)$" \
    -j 4 --timeout 270 -V > "$out/ctest-gpu.log" 2>&1
echo "a. ctest: exit $?"; grep -E "Test +#|tests passed|Total Test" "$out/ctest-gpu.log"
grep -E "^[0-9]+: (cuda|hybrid P=2 |direct P=2 ).*digest|configuration . alone|PASS kernel_trace|FAIL" "$out/ctest-gpu.log" | head -12
el a done
F=$PWD/build-gpu/fivefold
A="--model mnist-cnn --mode cuda --data $DATA --epochs 4 --log-every 0 --precision tf32x3"
for b in 64 256; do
    timeout 40 env FF_KERNEL_TRACE="$out/tl-b$b" FF_KERNEL_TRACE_TIMELINE=30000 FF_KERNEL_TRACE_SKIP=0.3 \
        LD_PRELOAD=build-gpu/libff_kernel_trace.so $F train $A --batch $b > "$out/tl-b$b.log" 2>&1
    python3 tools/trace_step.py "$out"/tl-b$b.*.timeline.tsv > "$out/step-b$b.txt" 2>&1
    echo "b. step b$b: exit $?"; cut -c1-110 "$out/step-b$b.txt"
    gzip "$out"/tl-b$b.*.timeline.tsv
done
el b done
git apply "$here/exp-env2.patch" || { echo "patch does not apply"; exit 1; }
cmake --build build-gpu --target fivefold > "$out/build-patch.log" 2>&1 || { echo "c. patched build failed"; exit 1; }
for b in 64 256; do
    for r in 1 2; do
        for v in nogate new; do
            envs="X=1"
            [ $v = nogate ] && envs="FF_EXP_NO_GATE=1"
            n=ab-b$b-$v-$r
            timeout 40 env $envs $F train $A --batch $b --json "$out/$n.json" > "$out/$n.log" 2>&1
            dr_summ "b$b $v #$r" "$out/$n.json"
        done
    done
done
for j in "$out"/ab-b64-*.json; do grep -q '"loss_digest": *"a1afe801dd367dad"' "$j" && grep -q '"weights_digest": *"f5c1bb3e67fbb81a"' "$j" || echo "c. $j: digests moved"; done
for j in "$out"/ab-b256-*.json; do grep -q '"loss_digest": *"ce1eb0186245a1c3"' "$j" && grep -q '"weights_digest": *"70e8b6618a4c1cf6"' "$j" || echo "c. $j: digests moved"; done
git apply -R "$here/exp-env2.patch"
cmake --build build-gpu --target fivefold > "$out/build-unpatch.log" 2>&1 || { echo "c. rebuild failed"; exit 1; }
el c done
for p in tf32x3 fp32; do
    timeout 100 python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
        --peers graph --ff-args "--precision $p" --timeout 80 --out "$out/mnist-$p.json" > "$out/mnist-$p.txt" 2>&1
    echo "d. bench $p: exit $?"
    grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-$p.txt" | tail -7
done
el done
