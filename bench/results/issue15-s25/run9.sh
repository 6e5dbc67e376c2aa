#!/usr/bin/env bash
# Session 25, GPU call 9 (one H200): a conv's data gradient through the relu below it in one kernel
# (mnist's conv2 over relu1: the GEMM epilogue masks by the relu's output; gpu.h
# ff_gpu_conv2d_masked). test_gpu_train whole (masked = unmasked then relu backward, bit for bit:
# fast path, direct kernel, tf32x3); a mutant mask rule (only negatives masked) shown failing it;
# train_gpu.sh modes (digests 2cc6f392 / c6d8228d must stay);
# train_bench fp32 against the CUDA-graph peer.
# Usage: bash bench/results/issue15-s25/run9.sh OUTDIR   (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run9 "${1:?usage: run9.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
F=build-gpu/fivefold
rm -rf /tmp/mut && mkdir -p /tmp/mut
tar --exclude=./build-gpu --exclude=./.git -cf - . | tar -x -C /tmp/mut
sed -i 's|return mask \&\& !(mask\[o\] > 0.0f) ? 0.0f : r;|return mask \&\& mask[o] < 0.0f ? 0.0f : r; /* MUTANT */|' /tmp/mut/core/device/cuda/layers_cuda.cu
echo "mutants: $(grep -c MUTANT /tmp/mut/core/device/cuda/layers_cuda.cu) (want 1)"
dr_build /tmp/mut test_gpu_train > "$out/mut-build.txt" 2>&1 &
dr_build . fivefold test_gpu_train || exit 1
wait
cat "$out/mut-build.txt"
el built
export FIVEFOLD=$PWD/$F
timeout 100 build-gpu/verify/gpu/test_gpu_train > "$out/test_gpu_train.log" 2>&1
echo "test_gpu_train: exit $? (want 0)"; grep -E "through the relu|PASSED|FAILED" "$out/test_gpu_train.log" | head -12
FF_TEST_FILTER=data_gradients_fast_paths timeout 100 /tmp/mut/build-gpu/verify/gpu/test_gpu_train > "$out/mutant.log" 2>&1
echo "mutant: exit $? (want non-zero)"; grep -E "through the relu.*FAIL|PASSED|FAILED" "$out/mutant.log" | head -4
for c in modes; do
    MPIEXEC="mpiexec --oversubscribe" timeout 100 sh verify/gpu/train_gpu.sh $c > "$out/train_gpu-$c.log" 2>&1
    echo "train_gpu.sh $c: exit $?"; grep -E "digest|PASS|FAIL" "$out/train_gpu-$c.log" | head -2
done
el checked
timeout 75 python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
    --peers graph --timeout 60 --out "$out/mnist-fp32.json" > "$out/mnist-fp32.txt" 2>&1
echo "bench fp32: exit $?"
grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-fp32.txt" | tail -7
el done
