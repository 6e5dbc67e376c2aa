#!/usr/bin/env bash
# Session 32, GPU call 3 (one H200): the tree that lands (the bottom layer's weight gradient on the
# stream, session 32 run 1) with conv1's weight gradient in groups of 8 channels whose taps are made
# in shared memory from the image.
#  a. GPU ctests of training and the tracer (digests as before)
#  b. timelines of a step at batch 64 and 256 (graph replays), through tools/trace_step.py
#  c. A/B in one call, tf32x3 at batch 64 and 256, twice each interleaved, one build with
#     exp-env3.patch (env switches for the rest of the call): new (groups of 8), one
#     (FF_EXP_WGRAD_IMG_KG=32: one block an image); digests must not move
#  d. train_bench tf32x3 and fp32 against the CUDA-graph peer (the patched build without its
#     switch runs the landed code), and tf32x3 with one block an image
# Usage: bash bench/results/issue15-s32/run3.sh OUTDIR  (carry .deps, .ff-source-commit, .data-mid)
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
grep -E "^[0-9]+: (cuda|hybrid P=2 |direct P=2 ).*digest|configuration . alone|per image = tiled|PASS kernel_trace|FAIL" "$out/ctest-gpu.log" | head -16
el a done
F=$PWD/build-gpu/fivefold
A="--model mnist-cnn --mode cuda --data $DATA --epochs 4 --log-every 0 --precision tf32x3"
for b in 64 256; do
    timeout 40 env FF_KERNEL_TRACE="$out/tl-b$b" FF_KERNEL_TRACE_TIMELINE=30000 FF_KERNEL_TRACE_SKIP=0.3 \
        LD_PRELOAD=build-gpu/libff_kernel_trace.so $F train $A --batch $b > "$out/tl-b$b.log" 2>&1
    python3 tools/trace_step.py "$out"/tl-b$b.*.timeline.tsv > "$out/step-b$b.txt" 2>&1
    echo "b. step b$b: exit $?"; cut -c1-110 "$out/step-b$b.txt" | grep -E "step|k_conv_wgrad_img|k_relu_bwd|k_conv_x3_wg"
    gzip "$out"/tl-b$b.*.timeline.tsv
done
el b done
git apply "$here/exp-env3.patch" || { echo "patch does not apply"; exit 1; }
cmake --build build-gpu --target fivefold > "$out/build-patch.log" 2>&1 || { echo "c. patched build failed"; exit 1; }
for b in 64 256; do
    for r in 1 2; do
        for v in one new; do
            envs="X=1"
            [ $v = one ] && envs="FF_EXP_WGRAD_IMG_KG=32"
            n=ab-b$b-$v-$r
            timeout 40 env $envs $F train $A --batch $b --json "$out/$n.json" > "$out/$n.log" 2>&1
            dr_summ "b$b $v #$r" "$out/$n.json"
        done
    done
done
for j in "$out"/ab-b64-*.json; do grep -q '"loss_digest": *"a1afe801dd367dad"' "$j" && grep -q '"weights_digest": *"f5c1bb3e67fbb81a"' "$j" || echo "c. $j: digests moved"; done
for j in "$out"/ab-b256-*.json; do grep -q '"loss_digest": *"ce1eb0186245a1c3"' "$j" && grep -q '"weights_digest": *"70e8b6618a4c1cf6"' "$j" || echo "c. $j: digests moved"; done
el c done
for v in tf32x3 fp32 tf32x3-kg32; do
    p=${v%-kg32} envs="X=1"
    [ $v = tf32x3-kg32 ] && envs="FF_EXP_WGRAD_IMG_KG=32"
    timeout 100 env $envs python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
        --peers graph --ff-args "--precision $p" --timeout 80 --out "$out/mnist-$v.json" > "$out/mnist-$v.txt" 2>&1
    echo "d. bench $v: exit $?"
    grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-$v.txt" | tail -7
done
git apply -R "$here/exp-env3.patch"
gzip "$out/ctest-gpu.log"
el done
