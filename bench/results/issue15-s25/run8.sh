#!/usr/bin/env bash
# Session 25, GPU call 8 (one H200): linear layers under 64 K weights (mnist's fc2, mlp-small's
# last three) take rows and the tree in the reduced backward instead of the in-kernel tree, whose
# one or two blocks walked every image (the same bits: backward_reduced_bits; digests must stay
# 2cc6f392 / c6d8228d, 1a99b90b / 5f0807ee). test_gpu_train; train_gpu.sh modes and tf32x3;
# train_mlp.sh gpu (cuda = hybrid = direct for mlp-small); a kernel trace at batch 64; train_bench
# fp32 against the CUDA-graph peer.
# Usage: bash bench/results/issue15-s25/run8.sh OUTDIR   (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run8 "${1:?usage: run8.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
F=build-gpu/fivefold
dr_build . fivefold test_gpu_train ff_kernel_trace || exit 1
el built
export FIVEFOLD=$PWD/$F
timeout 150 build-gpu/verify/gpu/test_gpu_train > "$out/test_gpu_train.log" 2>&1
echo "test_gpu_train: exit $? (want 0)"; grep -E "backward reduced|PASSED|FAILED" "$out/test_gpu_train.log" | head -6
for c in modes tf32x3; do
    MPIEXEC="mpiexec --oversubscribe" timeout 200 sh verify/gpu/train_gpu.sh $c > "$out/train_gpu-$c.log" 2>&1
    echo "train_gpu.sh $c: exit $?"; grep -E "digest|PASS|FAIL" "$out/train_gpu-$c.log" | head -2
done
MPIEXEC="mpiexec --oversubscribe" timeout 200 sh verify/train/train_mlp.sh gpu > "$out/train_mlp-gpu.log" 2>&1
echo "train_mlp.sh gpu: exit $?"; tail -3 "$out/train_mlp-gpu.log"
el checked
timeout 60 env FF_KERNEL_TRACE="$out/trace-b64" FF_KERNEL_TRACE_SKIP=0.3 \
    LD_PRELOAD=build-gpu/libff_kernel_trace.so $F train --model mnist-cnn --mode cuda --data "$DATA" \
    --batch 64 --epochs 4 --log-every 0 > "$out/trace-b64.log" 2>&1
echo "trace b64: exit $?; $(grep -o 'loss digest.*' "$out/trace-b64.log" | head -1)"
grep -E "linear_bwd|tree_reg|conv_wgrad_sum" "$out"/trace-b64.*.txt | cut -c1-140
timeout 150 python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
    --peers graph --timeout 100 --out "$out/mnist-fp32.json" > "$out/mnist-fp32.txt" 2>&1
echo "bench fp32: exit $?"
grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-fp32.txt" | tail -7
el done
