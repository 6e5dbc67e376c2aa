#!/usr/bin/env bash
# Session 25, GPU call 2 (one H200): the linear weight gradient's one-pass tree kernel with its
# image stages in flight (cp.async) and its partial sums in registers, and the maxpool backward
# fused with the relu below it. test_gpu_train whole; three mutants in one copy (the forward never
# fuses; the fused pool passes a zero pick; the tree kernel's chains run images descending) each
# shown failing the test that guards it; train_gpu.sh tf32x3 and modes (digests of run 1 must
# stay: tf32x3 1a99b90b / 5f0807ee, fp32 2cc6f392 / c6d8228d); kernel traces at batch 64 and 256;
# train_bench (fp32 and tf32x3) against PyTorch's CUDA graph.
# Usage: bash bench/results/issue15-s25/run2.sh OUTDIR   (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run2 "${1:?usage: run2.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
F=build-gpu/fivefold
rm -rf /tmp/mut && mkdir -p /tmp/mut
tar --exclude=./build-gpu --exclude=./.git -cf - . | tar -x -C /tmp/mut
sed -i 's/(L->op == FF_OP_CONV2D || L->op == FF_OP_LINEAR) \&\& l < last/false \&\& l < last \/* MUTANT *\//' \
    /tmp/mut/core/device/cuda/device_cuda.c
sed -i 's/relu \&\& !(bv > 0.0f)/relu \&\& bv < 0.0f \/* MUTANT *\//; s/for (int ss = 0; ss < ns; ss++) {/for (int ss = ns - 1; ss >= 0; ss--) { \/* MUTANT *\//' \
    /tmp/mut/core/device/cuda/train_cuda.cu
echo "mutants: $(grep -c MUTANT /tmp/mut/core/device/cuda/device_cuda.c) + $(grep -c MUTANT /tmp/mut/core/device/cuda/train_cuda.cu) (want 1 + 2)"
dr_build /tmp/mut test_gpu_train > "$out/mut-build.txt" 2>&1 &
dr_build . fivefold test_gpu_train ff_kernel_trace || exit 1
wait
cat "$out/mut-build.txt"
el built
export FIVEFOLD=$PWD/$F
timeout 150 build-gpu/verify/gpu/test_gpu_train > "$out/test_gpu_train.log" 2>&1
echo "test_gpu_train: exit $? (want 0)"
grep -E "per image = tiled|fused with|in one pass|reduced|PASSED|FAILED" "$out/test_gpu_train.log" | head -12
for t in train_forward_equals_run relu_maxpool_backward_bits backward_reduced_bits; do
    FF_TEST_FILTER=$t timeout 100 /tmp/mut/build-gpu/verify/gpu/test_gpu_train > "$out/mutant-$t.log" 2>&1
    echo "mutant, $t: exit $? (want non-zero)"; grep -E "FAIL|PASSED" "$out/mutant-$t.log" | head -5
done
el tested
for c in tf32x3 modes; do
    MPIEXEC="mpiexec --oversubscribe" timeout 200 sh verify/gpu/train_gpu.sh $c > "$out/train_gpu-$c.log" 2>&1
    echo "train_gpu.sh $c: exit $?"; grep -E "digest|PASS|FAIL" "$out/train_gpu-$c.log" | head -6
done
el train_gpu
for bs in 64 256; do
    timeout 60 env FF_KERNEL_TRACE="$out/trace-b$bs" FF_KERNEL_TRACE_SKIP=0.3 \
        LD_PRELOAD=build-gpu/libff_kernel_trace.so $F train --model mnist-cnn --mode cuda --data "$DATA" \
        --batch $bs --epochs 4 --log-every 0 > "$out/trace-b$bs.log" 2>&1
    echo "trace b$bs: exit $?"; head -14 "$out"/trace-b$bs.*.txt 2>/dev/null | cut -c1-150
done
el traced
for p in fp32 tf32x3; do
    timeout 150 python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
        --peers graph --ff-args "--precision $p" --timeout 100 --out "$out/mnist-$p.json" > "$out/mnist-$p.txt" 2>&1
    echo "bench $p: exit $?"
    grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-$p.txt" | tail -7
done
el done
