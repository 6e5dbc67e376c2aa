#!/usr/bin/env bash
# Session 31, GPU call 2 (one H200): the weight gradient's kernel chosen for the lane
# (ff_gpu_set_wgrad_beside: configuration 3 beside the data gradient, run 1's sweep), relu1's gate
# applied inside conv1's weight gradient (ff_gpu_conv2d_backward_weights_gated) and the kernel
# timeline (FF_KERNEL_TRACE_TIMELINE, tools/trace_step.py).
#  a. GPU ctests of training (test_gpu_train with conv_wgrad_beside_choice, gpu_kernel_trace with
#     the timeline checks, gpu_train_*: digests as before)
#  b. A/B in one call, batch 64 and 256 tf32x3, twice each interleaved, one build with exp-env.patch
#     (env switches for this part only): new (both), nogate (FF_EXP_NO_GATE: relu1's own pass),
#     old (also FF_WGRAD_X3_CFG=1 at batch 64: session 30's tree); digests must not move
#  c. timelines of a step at batch 64 and 256 (graph replays) and at batch 64 eager, through
#     tools/trace_step.py
#  d. train_bench tf32x3 and fp32 against the CUDA-graph peer
# Usage: bash bench/results/issue15-s31/run2.sh OUTDIR  (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run2 "${1:?usage: run2.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
dr_build . fivefold test_gpu_train test_gpu_exec ff_kernel_trace || exit 1
el built
timeout 170 ctest --test-dir build-gpu -R "^(test_gpu_train|gpu_train_.*|test_gpu_exec|train_mlp_gpu|gpu_kernel_trace|tools_trace_step)$" \
    -j 4 --timeout 160 -V > "$out/ctest-gpu.log" 2>&1
echo "a. ctest: exit $?"; grep -E "Test +#|tests passed|Total Test" "$out/ctest-gpu.log"
grep -E "^[0-9]+: (cuda|hybrid P=2 |direct P=2 ).*digest|configuration . alone|PASS kernel_trace|FAIL" "$out/ctest-gpu.log" | head -12
el a done
F=$PWD/build-gpu/fivefold
T="timeout 40 env"
A="--model mnist-cnn --mode cuda --data $DATA --epochs 4 --log-every 0 --precision tf32x3"
for b in 64 256; do
    timeout 40 env FF_KERNEL_TRACE="$out/tl-b$b" FF_KERNEL_TRACE_TIMELINE=30000 FF_KERNEL_TRACE_SKIP=0.3 \
        LD_PRELOAD=build-gpu/libff_kernel_trace.so $F train $A --batch $b > "$out/tl-b$b.log" 2>&1
    python3 tools/trace_step.py "$out"/tl-b$b.*.timeline.tsv > "$out/step-b$b.txt" 2>&1
    echo "c. step b$b: exit $?"; cat "$out/step-b$b.txt" | cut -c1-110
done
timeout 60 env FF_KERNEL_TRACE="$out/tl-eager-b64" FF_KERNEL_TRACE_TIMELINE=30000 FF_KERNEL_TRACE_SKIP=0.3 \
    FF_TRAIN_GRAPHS=0 LD_PRELOAD=build-gpu/libff_kernel_trace.so $F train $A --batch 64 > "$out/tl-eager-b64.log" 2>&1
python3 tools/trace_step.py "$out"/tl-eager-b64.*.timeline.tsv > "$out/step-eager-b64.txt" 2>&1
echo "c. step eager b64: exit $?"; tail -12 "$out/step-eager-b64.txt" | cut -c1-110
el c done
git apply "$here/exp-env.patch" || { echo "patch does not apply"; exit 1; }
cmake --build build-gpu --target fivefold > "$out/build-patch.log" 2>&1 || { echo "b. patched build failed"; exit 1; }
for b in 64 256; do
    for r in 1 2; do
        for v in old nogate new; do
            envs="X=1"
            [ $v = nogate ] && envs="FF_EXP_NO_GATE=1"
            [ $v = old ] && envs="FF_EXP_NO_GATE=1" && [ $b = 64 ] && envs="FF_EXP_NO_GATE=1 FF_WGRAD_X3_CFG=1"
            n=ab-b$b-$v-$r
            $T $envs $F train $A --batch $b --json "$out/$n.json" > "$out/$n.log" 2>&1
            dr_summ "b$b $v #$r" "$out/$n.json"
        done
    done
done
for j in "$out"/ab-b64-*.json; do grep -q '"loss_digest": *"a1afe801dd367dad"' "$j" && grep -q '"weights_digest": *"f5c1bb3e67fbb81a"' "$j" || echo "b. $j: digests moved"; done
for j in "$out"/ab-b256-*.json; do grep -q '"loss_digest": *"ce1eb0186245a1c3"' "$j" && grep -q '"weights_digest": *"70e8b6618a4c1cf6"' "$j" || echo "b. $j: digests moved"; done
git apply -R "$here/exp-env.patch"
cmake --build build-gpu --target fivefold > "$out/build-unpatch.log" 2>&1 || { echo "b. rebuild failed"; exit 1; }
el b done
for p in tf32x3 fp32; do
    timeout 100 python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
        --peers graph --ff-args "--precision $p" --timeout 80 --out "$out/mnist-$p.json" > "$out/mnist-$p.txt" 2>&1
    echo "d. bench $p: exit $?"
    grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-$p.txt" | tail -7
done
el done
