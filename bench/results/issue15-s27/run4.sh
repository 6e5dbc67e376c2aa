#!/usr/bin/env bash
# Session 27, GPU call 4 (one H200): the tf32x3 conv weight gradient on the warpgroup MMA
# (k_conv_wgrad_x3wg, weight-gradient configurations 2..5, the automatic choice now 2).
#  a. test_gpu_train (conv_wgrad_tf32x3_within_bound: every configuration, mma.sync and wgmma,
#     the same bits, within the bound, db = fp32's)
#  b. a mutant (the first two products of each chunk swapped in k_conv_wgrad_x3wg): must FAIL
#  c. ff_conv_tiles --weight-grad tf32x3 at b64 / b256 (every configuration)
#  d. train_gpu.sh tf32x3 (digests a6481d10 / 99d4ce06 must stay); the GPU training ctests
#  e. PC sampling of k_conv_x3_wg (forward b256: the tuner's 19; data gradient b64: 23)
#  f. trace b64 tf32x3; train_bench tf32x3 and fp32 against the CUDA-graph peer
# Usage: bash bench/results/issue15-s27/run4.sh OUTDIR   (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run4 "${1:?usage: run4.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
F=build-gpu/fivefold
rm -rf /tmp/mut && mkdir -p /tmp/mut && tar -c --exclude=./build-gpu --exclude=./build --exclude=./.deps . | tar -x -C /tmp/mut
python3 - /tmp/mut/core/device/cuda/train_cuda.cu <<'PY'
import sys
p = sys.argv[1]; s = open(p).read()
a = "wgmma_tf32<NT>(d[mt], ab[set][mt], small);  // x_big dy_small"
b = "wgmma_tf32<NT>(d[mt], al[set][mt], big);    // x_small dy_big"
assert a in s and b in s
s = s.replace(a, "@@A@@").replace(b, a + "  // MUTANT").replace("@@A@@", b)
open(p, "w").write(s)
PY
grep -c MUTANT /tmp/mut/core/device/cuda/train_cuda.cu
dr_build . fivefold test_gpu_train test_gpu_exec ff_conv_tiles ff_kernel_trace & p1=$!
dr_build /tmp/mut test_gpu_train & p2=$!
wait $p1 || exit 1
el built main
grep -E "C75|warning" "$out/build-main.log" | head -5
timeout 200 build-gpu/verify/gpu/test_gpu_train > "$out/test_gpu_train.log" 2>&1
rc_train=$?
echo "a. test_gpu_train: exit $rc_train (want 0)"; grep -E "tf32x3 conv dw .*data:|configuration [0-9] = automatic.*FAIL|PASSED|FAILED" "$out/test_gpu_train.log" | head -14
grep -cE "tf32x3 conv dw .* configuration [0-9] = automatic .*PASS" "$out/test_gpu_train.log"
el a done
wait $p2 && {
    timeout 200 /tmp/mut/build-gpu/verify/gpu/test_gpu_train > "$out/mutant-test_gpu_train.log" 2>&1
    echo "b. mutant test_gpu_train: exit $? (want non-zero)"; grep -E "configuration [0-9] = automatic.*FAIL|FAILED" "$out/mutant-test_gpu_train.log" | head -8
}
el b done
for b in 64 256; do
    timeout 60 build-gpu/ff_conv_tiles --weight-grad --precision tf32x3 --batch $b > "$out/wgrad-b$b.txt" 2>&1
    echo "c. wgrad tf32x3 b$b: exit $?"; grep -E "configuration|automatic|us " "$out/wgrad-b$b.txt"
done
el c done
[ $rc_train = 0 ] || exit 1
export FIVEFOLD=$PWD/$F
MPIEXEC="mpiexec --oversubscribe" timeout 200 sh verify/gpu/train_gpu.sh tf32x3 > "$out/train_gpu-tf32x3.log" 2>&1
echo "d. train_gpu.sh tf32x3: exit $?"; grep -E "digest|vs fp32|PASS|FAIL" "$out/train_gpu-tf32x3.log" | head -5
timeout 300 ctest --test-dir build-gpu -R "^(gpu_train_.*|gpu_kernel_trace|test_gpu_exec|train_mlp_gpu|train_mlp_gpu_full)$" \
    -j 2 --timeout 250 --output-on-failure > "$out/ctest-gpu.log" 2>&1
echo "d. ctest: exit $?"; grep -E "Test +#|tests passed|Total Test" "$out/ctest-gpu.log"
el d done
timeout 60 build-gpu/ff_conv_tiles --precision tf32x3 --batch 256 --iters 20 --stalls > "$out/stalls-fwd-b256.txt" 2>&1
echo "e. stalls fwd b256: exit $?"; grep -A12 "k_conv_x3_wg" "$out/stalls-fwd-b256.txt" | head -16
timeout 60 build-gpu/ff_conv_tiles --precision tf32x3 --batch 64 --data-grad --iters 20 --stalls > "$out/stalls-dgrad-b64.txt" 2>&1
echo "e. stalls dgrad b64: exit $?"; grep -A12 "k_conv_x3_wg" "$out/stalls-dgrad-b64.txt" | head -16
el e done
timeout 60 env FF_KERNEL_TRACE="$out/trace-b64" FF_KERNEL_TRACE_SKIP=0.3 \
    LD_PRELOAD=build-gpu/libff_kernel_trace.so $F train --model mnist-cnn --mode cuda --data "$DATA" \
    --batch 64 --epochs 4 --log-every 0 --precision tf32x3 > "$out/trace-b64.log" 2>&1
echo "f. trace b64 tf32x3: exit $?"
head -12 "$out"/trace-b64.*.txt | cut -c1-150
for p in tf32x3 fp32; do
    timeout 150 python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
        --peers graph --ff-args "--precision $p" --timeout 100 --out "$out/mnist-$p.json" > "$out/mnist-$p.txt" 2>&1
    echo "f. bench $p: exit $?"
    grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-$p.txt" | tail -7
done
el done
