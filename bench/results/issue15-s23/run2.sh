#!/usr/bin/env bash
# Session 23, GPU call 2 (two H200s): --precision tf32x3 (convs on tensor cores, each factor split
# into two TF32 halves). (1) test_gpu_layers' conv_tf32x3_within_bound, and a mutant that leaves
# out w_small x_big shown failing it; (2) verify with tf32x3 (inference, its bound); (3) MNIST-CNN
# training against PyTorch's CUDA graph (and ddp-graph on two GPUs) in one train_bench invocation
# each for tf32x3 and fp32, on the first 16384 Fashion-MNIST images; (4) train_gpu.sh tf32x3
# (bits equal across modes, losses close to fp32's); (5) a kernel trace of a tf32x3 step.
# Usage: bash bench/results/issue15-s23/run2.sh OUTDIR   (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run2 "${1:?usage: run2.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
F=build-gpu/fivefold
rm -rf /tmp/mut && mkdir -p /tmp/mut && tar --exclude=./build-gpu --exclude=./.git -cf - . | tar -x -C /tmp/mut
sed -i 's|^ *mma_tf32(acc\[mi\]\[ni\], al\[mi\], bb\[ni\]);|/* MUTANT: w_small x_big left out */|' \
    /tmp/mut/core/device/cuda/layers_cuda.cu
grep -c MUTANT /tmp/mut/core/device/cuda/layers_cuda.cu
dr_build /tmp/mut test_gpu_layers > "$out/mut-build.txt" 2>&1 &
dr_build . fivefold test_gpu_layers ff_kernel_trace
wait
cat "$out/mut-build.txt"
el built
export FIVEFOLD=$PWD/$F
FF_TEST_FILTER='conv_tf32x3*' timeout 100 build-gpu/verify/gpu/test_gpu_layers > "$out/x3-test.log" 2>&1
echo "conv_tf32x3_within_bound: exit $? (want 0)"; grep -E "tf32x3|PASSED|FAILED" "$out/x3-test.log" | head -24
FF_TEST_FILTER='conv_tf32x3*' timeout 100 /tmp/mut/build-gpu/verify/gpu/test_gpu_layers > "$out/x3-mutant.log" 2>&1
echo "the same with the mutant: exit $? (want non-zero)"; grep -E "tf32x3 .*data|PASSED|FAILED" "$out/x3-mutant.log" | head -10
el unit
for m in mnist-cnn alexnet; do
    timeout 60 $F verify --mode cuda --conv direct --precision tf32x3 --model $m > "$out/verify-x3-$m.log" 2>&1
    echo "verify tf32x3 $m: exit $?"; grep -E "digest class|passed, .* failed" "$out/verify-x3-$m.log" | tail -2
done
el verified
bench() {  # bench NAME LIMIT ARGS...
    local name=$1 lim=$2
    shift 2
    timeout "$lim" python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 \
        --mpiexec "mpiexec --oversubscribe" --timeout 100 --out "$out/$name.json" "$@" > "$out/$name.txt" 2>&1
    echo "$name: exit $?"
    grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/$name.txt" | tail -12
}
bench mnist-x3 240 --modes cuda,direct:2 --peers graph,ddp-graph:2 --ff-args "--precision tf32x3"
el "bench x3"
bench mnist-fp32 150 --modes cuda --peers graph
el "bench fp32"
left=$(dr_left 520)
[ "$left" -gt 40 ] && DATA="$DATA" MPIEXEC="mpiexec --oversubscribe" timeout "$left" sh verify/gpu/train_gpu.sh tf32x3 \
    > "$out/train_gpu-x3.log" 2>&1
echo "train_gpu.sh tf32x3: exit $?"; tail -14 "$out/train_gpu-x3.log"
left=$(dr_left 570)
[ "$left" -gt 25 ] && timeout "$left" env FF_KERNEL_TRACE="$out/trace-x3-b64" FF_KERNEL_TRACE_SKIP=1 \
    LD_PRELOAD=build-gpu/libff_kernel_trace.so $F train --model mnist-cnn --mode cuda --data "$DATA" --batch 64 \
    --epochs 3 --train-limit 8192 --log-every 0 --precision tf32x3 > "$out/trace-x3-b64.log" 2>&1
head -16 "$out"/trace-x3-b64.*.txt 2>/dev/null | cut -c1-150
el done
