#!/usr/bin/env bash
# Session 29, GPU call 2 (one H200): k_conv_wgrad_x3wgp, the tf32x3 weight gradient on operands
# split before it (configurations 6-11), with a tentative automatic rule (7 at batch 64, 11 at 256).
#  a. test_gpu_train (every configuration the same bits; none fell back with a scratch, all without),
#     train_gpu.sh tf32x3 (digests a6481d10 / 99d4ce06 unchanged)
#  b. mutant: k_split_dytiles drops the small halves: test_gpu_train must fail on 6-11 only
#  c. ff_conv_tiles --weight-grad tf32x3 at batch 64 and 256 (every configuration); trace b64;
#     train_bench tf32x3 against the CUDA-graph peer
# Usage: bash bench/results/issue15-s29/run2.sh OUTDIR  (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run2 "${1:?usage: run2.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
rm -rf /tmp/mut && mkdir -p /tmp/mut
tar --exclude=./build-gpu --exclude=./bench/results --exclude=./.git -cf - . | tar -xf - -C /tmp/mut
sed -i 's/out\[at\] = __uint_as_float(hi), out\[at + WX_BM \* 8\] = __uint_as_float(lo);/out[at] = __uint_as_float(hi), out[at + WX_BM * 8] = 0.0f;  \/\/ MUTANT/' /tmp/mut/core/device/cuda/train_cuda.cu
grep -c MUTANT /tmp/mut/core/device/cuda/train_cuda.cu
dr_build . fivefold test_gpu_train ff_conv_tiles ff_kernel_trace & p1=$!
dr_build /tmp/mut test_gpu_train & p2=$!
wait $p1 || exit 1
el built main
timeout 200 build-gpu/verify/gpu/test_gpu_train > "$out/test_gpu_train.log" 2>&1
echo "a. test_gpu_train: exit $? (want 0)"; grep -E "PASSED|FAILED|ERROR|fell back" "$out/test_gpu_train.log" | head -12
grep -E "configuration [0-9]+.*FAIL" "$out/test_gpu_train.log" | head -5
export FIVEFOLD=$PWD/build-gpu/fivefold
MPIEXEC="mpiexec --oversubscribe" timeout 200 sh verify/gpu/train_gpu.sh tf32x3 > "$out/train_gpu-tf32x3.log" 2>&1
echo "a. train_gpu.sh tf32x3: exit $?"; grep -E "digest|rror" "$out/train_gpu-tf32x3.log" | head -6
el a done
for b in 64 256; do
    timeout 60 build-gpu/ff_conv_tiles --weight-grad --precision tf32x3 --batch $b > "$out/wgrad-b$b.txt" 2>&1
    echo "c. wgrad tf32x3 b$b: exit $?"; grep -E "us " "$out/wgrad-b$b.txt" | head -14
done
el c1 done
if wait $p2; then
    timeout 200 /tmp/mut/build-gpu/verify/gpu/test_gpu_train > "$out/mutant-test_gpu_train.log" 2>&1
    echo "b. mutant test_gpu_train: exit $? (want non-zero)"
    echo "FAIL lines by configuration:"; grep -E "configuration [0-9]+ .*FAIL" "$out/mutant-test_gpu_train.log" | sed -E 's/.*configuration ([0-9]+) .*/\1/' | sort -n | uniq -c | tr '\n' ' '; echo
    echo "PASS lines by configuration:"; grep -E "configuration [0-9]+ .*PASS" "$out/mutant-test_gpu_train.log" | sed -E 's/.*configuration ([0-9]+) .*/\1/' | sort -n | uniq -c | tr '\n' ' '; echo
    grep -E "PASSED|FAILED" "$out/mutant-test_gpu_train.log" | head -4
else
    echo "b. mutant build failed"; tail -5 "$out/build-mut.log"
fi
el b done
F=$PWD/build-gpu/fivefold
timeout 60 env FF_KERNEL_TRACE="$out/trace-b64" FF_KERNEL_TRACE_SKIP=0.3 \
    LD_PRELOAD=build-gpu/libff_kernel_trace.so $F train --model mnist-cnn --mode cuda --data "$DATA" \
    --batch 64 --epochs 4 --log-every 0 --precision tf32x3 > "$out/trace-b64.log" 2>&1
echo "c. trace b64 tf32x3: exit $?"
head -24 "$out"/trace-b64.*.txt | cut -c1-150
timeout 150 python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
    --peers graph --ff-args "--precision tf32x3" --timeout 100 --out "$out/mnist-tf32x3.json" > "$out/mnist-tf32x3.txt" 2>&1
echo "c. bench tf32x3: exit $?"
grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-tf32x3.txt" | tail -7
el done
