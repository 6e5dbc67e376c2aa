#!/usr/bin/env bash
# Session 27, GPU call 1 (one H200): what session 26 left unrun, and its epilogue patch.
#  a. the tree as committed: test_gpu_layers (run_x3 now offers the tuner k_conv_x3_rows'
#     configurations only where that kernel applies) and train_gpu.sh tf32x3 (1a99b90b / 5f0807ee)
#  b. a mutant of k_linear_bwd_weights_tree (its final fold from the highest level down instead
#     of from the lowest up): test_gpu_train's linear_tree_kernel_bits must FAIL
#  c. next-epilogue.patch (tf32x3 epilogue through shared memory): test_gpu_layers, train_gpu.sh
#     tf32x3 (same digests), ff_conv_tiles tf32x3 conv2 forward / data gradient at b64 and b256
#     against (a)'s in the same run
#  d. kernel trace of a b256 tf32x3 step (the batch-256 breakdown)
# Usage: bash bench/results/issue15-s27/run1.sh OUTDIR   (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run1 "${1:?usage: run1.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
for t in mut epi; do
    rm -rf "/tmp/$t" && mkdir -p "/tmp/$t" && tar -c --exclude=./build-gpu --exclude=./build --exclude=./.deps . | tar -x -C "/tmp/$t"
done
(cd /tmp/epi && patch -p1 -s < "$here/next-epilogue.patch") || { echo "epilogue patch failed"; exit 1; }
sed -i 's/for (int i = 0; (done >> i) != 0; i++) {/for (int i = 31; i >= 0; i--) {  \/\/ MUTANT/' /tmp/mut/core/device/cuda/train_cuda.cu
grep -c MUTANT /tmp/mut/core/device/cuda/train_cuda.cu
dr_build . fivefold test_gpu_train test_gpu_layers ff_conv_tiles ff_kernel_trace & p1=$!
dr_build /tmp/mut test_gpu_train & p2=$!
dr_build /tmp/epi fivefold test_gpu_layers ff_conv_tiles & p3=$!
wait $p1 || exit 1
el built main
timeout 150 build-gpu/verify/gpu/test_gpu_layers > "$out/test_gpu_layers.log" 2>&1
echo "a. test_gpu_layers: exit $? (want 0)"; grep -E "tf32x3 .*(over|FAIL)|PASSED|FAILED" "$out/test_gpu_layers.log" | grep -v "must FAIL" | head -12
grep -cE "tf32x3 .* tile [0-9]+ vs automatic.*PASS" "$out/test_gpu_layers.log"
grep -vE "(winograd band .* vs full rows|image/channel).*(max 0|PASS)" "$out/test_gpu_layers.log" > "$out/t" && mv "$out/t" "$out/test_gpu_layers.log"
FIVEFOLD=$PWD/build-gpu/fivefold MPIEXEC="mpiexec --oversubscribe" timeout 200 sh verify/gpu/train_gpu.sh tf32x3 > "$out/train_gpu-tf32x3.log" 2>&1
echo "a. train_gpu.sh tf32x3: exit $?"; grep -E "digest|PASS|FAIL" "$out/train_gpu-tf32x3.log" | head -3
el a done
wait $p2 && {
    timeout 150 /tmp/mut/build-gpu/verify/gpu/test_gpu_train > "$out/mutant-test_gpu_train.log" 2>&1
    echo "b. mutant test_gpu_train: exit $? (want non-zero)"; grep -E "linear dw|tree kernel|PASSED|FAILED" "$out/mutant-test_gpu_train.log" | head -24
}
el b done
wait $p3 && {
    timeout 150 /tmp/epi/build-gpu/verify/gpu/test_gpu_layers > "$out/epi-test_gpu_layers.log" 2>&1
    echo "c. epilogue test_gpu_layers: exit $? (want 0)"; grep -E "tf32x3 .*(over|FAIL)|PASSED|FAILED" "$out/epi-test_gpu_layers.log" | grep -v "must FAIL" | head -12
    grep -cE "tf32x3 .* tile [0-9]+ vs automatic.*PASS" "$out/epi-test_gpu_layers.log"
    grep -vE "(winograd band .* vs full rows|image/channel).*(max 0|PASS)" "$out/epi-test_gpu_layers.log" > "$out/t" && mv "$out/t" "$out/epi-test_gpu_layers.log"
    (cd /tmp/epi && FIVEFOLD=/tmp/epi/build-gpu/fivefold MPIEXEC="mpiexec --oversubscribe" timeout 200 sh verify/gpu/train_gpu.sh tf32x3) > "$out/epi-train_gpu-tf32x3.log" 2>&1
    echo "c. epilogue train_gpu.sh tf32x3: exit $?"; grep -E "digest|PASS|FAIL" "$out/epi-train_gpu-tf32x3.log" | head -3
    for b in 64 256; do
        for dg in "" --data-grad; do
            for t in main epi; do
                bin=build-gpu/ff_conv_tiles; [ $t = epi ] && bin=/tmp/epi/build-gpu/ff_conv_tiles
                timeout 60 $bin --precision tf32x3 --batch $b $dg > "$out/tiles-$t-b$b$dg.txt" 2>&1
                echo "c. tiles $t tf32x3 b$b $dg: exit $?"; grep -E "fastest" "$out/tiles-$t-b$b$dg.txt"
            done
        done
    done
}
el c done
timeout 60 env FF_KERNEL_TRACE="$out/trace-b256" FF_KERNEL_TRACE_SKIP=0.3 \
    LD_PRELOAD=build-gpu/libff_kernel_trace.so build-gpu/fivefold train --model mnist-cnn --mode cuda --data "$DATA" \
    --batch 256 --epochs 4 --log-every 0 --precision tf32x3 > "$out/trace-b256.log" 2>&1
echo "d. trace b256 tf32x3: exit $?"
head -30 "$out"/trace-b256.*.txt | cut -c1-160
el done
