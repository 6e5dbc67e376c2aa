#!/usr/bin/env bash
# Session 25, GPU call 1 (one H200): conv1's weight gradient a block per image (k_conv_wgrad_img)
# and the relu fused into the conv/linear before it in the training forward. test_gpu_train whole;
# two mutants in one copy (the new kernel's bias chain skips its first position; the forward
# never fuses) shown failing the tests that guard them; train_gpu.sh tf32x3 (session 23's digests
# 1a99b90b / 5f0807ee must stay) and modes; kernel traces at batch 64 and 256; train_bench (fp32
# and tf32x3) against PyTorch's CUDA graph.
# Usage: bash bench/results/issue15-s25/run1.sh OUTDIR   (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run1 "${1:?usage: run1.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
F=build-gpu/fivefold
rm -rf /tmp/mut && mkdir -p /tmp/mut
tar --exclude=./build-gpu --exclude=./.git -cf - . | tar -x -C /tmp/mut
sed -i 's|for (int q = 0; q < g.Q; q++) acc = __fadd_rn(acc, dk\[q\]);|for (int q = 1; q < g.Q; q++) acc = __fadd_rn(acc, dk[q]); /* MUTANT */|' \
    /tmp/mut/core/device/cuda/train_cuda.cu
sed -i 's|const bool fuse = (L->op == FF_OP_CONV2D|const bool fuse = false /* MUTANT */ \&\& (L->op == FF_OP_CONV2D|' /tmp/mut/core/device/cuda/device_cuda.c
echo "mutants: $(grep -c MUTANT /tmp/mut/core/device/cuda/train_cuda.cu) + $(grep -c MUTANT /tmp/mut/core/device/cuda/device_cuda.c) (want 1 + 1)"
dr_build /tmp/mut test_gpu_train > "$out/mut-build.txt" 2>&1 &
dr_build . fivefold test_gpu_train ff_kernel_trace || exit 1
wait
cat "$out/mut-build.txt"
el built
export FIVEFOLD=$PWD/$F
timeout 150 build-gpu/verify/gpu/test_gpu_train > "$out/test_gpu_train.log" 2>&1
echo "test_gpu_train: exit $? (want 0)"
grep -E "per image = tiled|fused with|3x3/2 pad 1 dw|PASSED|FAILED" "$out/test_gpu_train.log" | head -12
for t in conv_wgrad_image_kernel_bits train_forward_equals_run; do
    FF_TEST_FILTER=$t timeout 100 /tmp/mut/build-gpu/verify/gpu/test_gpu_train > "$out/mutant-$t.log" 2>&1
    echo "mutant, $t: exit $? (want non-zero)"; grep -E "FAIL|PASSED" "$out/mutant-$t.log" | head -4
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
