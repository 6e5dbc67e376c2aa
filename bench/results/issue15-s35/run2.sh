#!/usr/bin/env bash
# Session 35, GPU call 2 (one H200): relu1's backward folded into conv1's weight gradient
# (ff_gpu_conv2d_backward_weights_gated) and the 2x2 max-pool backward in float2s
# (k_maxpool_bwd_2x2), both meant to give the same bits.
#  a. the new tree's GPU training tests (test_gpu_train's new cases, every gpu_train_* digest test)
#  b. two mutants, each shown to fail test_gpu_train: the gate's float4 path leaving one lane
#     ungated; the 2x2 pick taking the later of a tie (>= for >)
#  c. ms per step, interleaved, the landed code (this tree with relu-gate-pool2x2.patch reversed)
#     against the new, tf32x3 twice and fp32 once at batch 64 and 256; the digests must not move
#  d. the new tree's step timelines (FF_KERNEL_TRACE_TIMELINE + tools/trace_step.py)
#  e. train_bench tf32x3 and fp32 against PyTorch's CUDA graph, while the time left allows
# Usage: bash bench/results/issue15-s35/run2.sh OUTDIR  (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run2 "${1:?usage: run2.sh OUTDIR}"
LIMIT=${RUN_LIMIT:-560}
export DATA="$PWD/.data-mid/fashion-mnist"
copy() { rm -rf "$1" && mkdir -p "$1" && tar --exclude=./build-gpu --exclude=./.git -cf - . | tar -x -C "$1"; }
copy /tmp/base && (cd /tmp/base && git apply -R "$here/relu-gate-pool2x2.patch") || { echo "base: patch does not reverse"; exit 1; }
copy /tmp/mgate && sed -i 's|relu_pass(y4.w, d4.w));|d4.w); /* MUTANT: one lane ungated */|' /tmp/mgate/core/device/cuda/train_cuda.cu
copy /tmp/mpool && sed -i 's#if (b.y > bv || isnan(b.y)) best = 3#if (b.y >= bv || isnan(b.y)) best = 3 /* MUTANT */#' /tmp/mpool/core/device/cuda/train_cuda.cu
grep -c MUTANT /tmp/mgate/core/device/cuda/train_cuda.cu /tmp/mpool/core/device/cuda/train_cuda.cu
dr_build /tmp/base fivefold > "$out/build-base.txt" 2>&1 &
dr_build . fivefold test_gpu_train test_gpu_exec ff_kernel_trace || exit 1
wait; cat "$out/build-base.txt"
el built
(nice -n 19 bash -c ". bench/device_run.sh; out=$out; dr_build /tmp/mgate test_gpu_train; dr_build /tmp/mpool test_gpu_train" \
    > "$out/build-mutants.txt" 2>&1) &
mpid=$!
timeout 200 ctest --test-dir build-gpu -R "^(test_gpu_train|gpu_train_.*|test_gpu_exec|gpu_kernel_trace|tools_trace_step)$" \
    -j 4 --timeout 190 -V > "$out/ctest-gpu.log" 2>&1
echo "a. ctest: exit $?"; grep -E "Test +#|tests passed|Total Test" "$out/ctest-gpu.log"
grep -E "^[0-9]+: (cuda|hybrid P=2 |direct P=2 |hybrid P=2 for).*digest|relu folded in|differ from the ungated|maxpool|FAIL" "$out/ctest-gpu.log" | head -40
gzip "$out/ctest-gpu.log"
el a done
wait $mpid; cat "$out/build-mutants.txt"
for m in mgate mpool; do
    timeout 120 /tmp/$m/build-gpu/verify/gpu/test_gpu_train > "$out/mutant-$m.log" 2>&1
    echo "b. test_gpu_train with mutant $m: exit $? (want non-zero)"
    grep -E "FAIL|differ" "$out/mutant-$m.log" | head -6
done
el b done
A="--model mnist-cnn --mode cuda --data $DATA --epochs 4 --log-every 0"
for b in 64 256; do
    for r in 1 2 3; do
        p=tf32x3; [ $r = 3 ] && p=fp32
        for v in base new; do
            F=$PWD/build-gpu/fivefold; [ $v = base ] && F=/tmp/base/build-gpu/fivefold
            n=ab-b$b-$p-$v-$r
            timeout 40 $F train $A --precision $p --batch $b --json "$out/$n.json" > "$out/$n.log" 2>&1
            dr_summ "b$b $p $v #$r" "$out/$n.json"
        done
    done
done
for j in "$out"/ab-b64-tf32x3-*.json; do grep -q '"loss_digest": *"a1afe801dd367dad"' "$j" && grep -q '"weights_digest": *"f5c1bb3e67fbb81a"' "$j" || echo "c. $j: digests moved"; done
for j in "$out"/ab-b256-tf32x3-*.json; do grep -q '"loss_digest": *"ce1eb0186245a1c3"' "$j" && grep -q '"weights_digest": *"70e8b6618a4c1cf6"' "$j" || echo "c. $j: digests moved"; done
for b in 64 256; do
    python3 - "$out/ab-b$b-fp32-base-3.json" "$out/ab-b$b-fp32-new-3.json" <<'PY' || echo "c. b$b fp32: digests differ between base and new"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
k = lambda d: [v for key, v in sorted(d.items()) if key.endswith("digest")]
sys.exit(0 if k(a) == k(b) and k(a) else 1)
PY
done
el c done
F=$PWD/build-gpu/fivefold
for b in 64 256; do
    timeout 40 env FF_KERNEL_TRACE="$out/tl-b$b" FF_KERNEL_TRACE_TIMELINE=30000 FF_KERNEL_TRACE_SKIP=0.3 \
        LD_PRELOAD=build-gpu/libff_kernel_trace.so $F train $A --precision tf32x3 --batch $b > "$out/tl-b$b.log" 2>&1
    python3 tools/trace_step.py "$out"/tl-b$b.*.timeline.tsv > "$out/step-b$b.txt" 2>&1
    echo "d. step b$b: exit $?"; cut -c1-110 "$out/step-b$b.txt" | grep -E "step|k_conv_wgrad_img|k_relu_bwd|k_maxpool_bwd"
    gzip "$out"/tl-b$b.*.timeline.tsv
done
el d done
for p in tf32x3 fp32; do
    left=$(dr_left "$LIMIT")
    [ "$left" -gt 45 ] || { echo "e. bench $p: not run ($left s left)"; continue; }
    timeout $((left - 5)) python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
        --peers graph --ff-args "--precision $p" --timeout 60 --out "$out/mnist-$p.json" > "$out/mnist-$p.txt" 2>&1
    echo "e. bench $p: exit $?"
    grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-$p.txt" | tail -7
done
el done
