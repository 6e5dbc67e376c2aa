#!/usr/bin/env bash
# Session 27, GPU call 5 (one H200, the session's last): k_conv_x3_wg with A read two k-chunks
# ahead (configurations 25, 26) and the weight gradient's measured rule (commit SAFE, run 4's
# kernels). If the tree's checks fail, the benchmark runs SAFE's build instead.
#  a. test_gpu_layers (27 tf32x3 configurations the same bits), test_gpu_train, train_gpu.sh
#     tf32x3 (digests a6481d10 / 99d4ce06 must stay)
#  b. ff_conv_tiles tf32x3 forward / data gradient / weight gradient at b64 and b256
#  c. trace b64 tf32x3; train_bench tf32x3 and fp32 against the CUDA-graph peer
# Usage: bash bench/results/issue15-s27/run5.sh OUTDIR SAFE   (carry .deps with .deps/safe.tar.xz = git archive SAFE without bench/results and golden/data, xz,
#        .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run5 "${1:?usage: run5.sh OUTDIR SAFE}"
safe=${2:?usage: run5.sh OUTDIR SAFE}
export DATA="$PWD/.data-mid/fashion-mnist"
rm -rf /tmp/safe && mkdir -p /tmp/safe && tar -xJf .deps/safe.tar.xz -C /tmp/safe || echo "no .deps/safe.tar.xz: SAFE not built"
dr_build . fivefold test_gpu_layers test_gpu_train ff_conv_tiles ff_kernel_trace & p1=$!
[ -f /tmp/safe/CMakeLists.txt ] && { dr_build /tmp/safe fivefold & p2=$!; }
wait $p1 || exit 1
el built main
timeout 200 build-gpu/verify/gpu/test_gpu_layers > "$out/test_gpu_layers.log" 2>&1
rc1=$?
echo "a. test_gpu_layers: exit $rc1 (want 0)"; grep -E "tf32x3 .*(over|FAIL)|PASSED|FAILED" "$out/test_gpu_layers.log" | grep -v "must FAIL" | head -12
grep -cE "tf32x3 .* tile [0-9]+ vs automatic.*PASS" "$out/test_gpu_layers.log"
grep -E "tf32x3 .* tile 2[56] vs automatic" "$out/test_gpu_layers.log" | head -4
grep -vE "(winograd band .* vs full rows|image/channel).*(max 0|PASS)" "$out/test_gpu_layers.log" > "$out/tl" && mv "$out/tl" "$out/test_gpu_layers.log"
timeout 200 build-gpu/verify/gpu/test_gpu_train > "$out/test_gpu_train.log" 2>&1
rc2=$?
echo "a. test_gpu_train: exit $rc2 (want 0)"; grep -E "PASSED|FAILED" "$out/test_gpu_train.log" | head -3
export FIVEFOLD=$PWD/build-gpu/fivefold
MPIEXEC="mpiexec --oversubscribe" timeout 200 sh verify/gpu/train_gpu.sh tf32x3 > "$out/train_gpu-tf32x3.log" 2>&1
rc3=$?
echo "a. train_gpu.sh tf32x3: exit $rc3"; grep -E "digest|vs fp32|PASS|FAIL" "$out/train_gpu-tf32x3.log" | head -5
el a done
F=$PWD/build-gpu/fivefold
if [ $rc1 != 0 ] || [ $rc2 != 0 ] || [ $rc3 != 0 ]; then
    echo "checks failed: the benchmark runs SAFE ($safe)"
    wait $p2 && F=/tmp/safe/build-gpu/fivefold || exit 1
else
    for b in 64 256; do
        for dg in "" --data-grad; do
            timeout 60 build-gpu/ff_conv_tiles --precision tf32x3 --batch $b $dg > "$out/tiles-b$b$dg.txt" 2>&1
            echo "b. tiles tf32x3 b$b $dg: exit $?"; grep -E "config (1[7-9]|2[0-6]):|fastest" "$out/tiles-b$b$dg.txt"
        done
        timeout 60 build-gpu/ff_conv_tiles --weight-grad --precision tf32x3 --batch $b > "$out/wgrad-b$b.txt" 2>&1
        echo "b. wgrad tf32x3 b$b: exit $?"; grep -E "us " "$out/wgrad-b$b.txt" | head -1
    done
fi
el b done
timeout 60 env FF_KERNEL_TRACE="$out/trace-b64" FF_KERNEL_TRACE_SKIP=0.3 \
    LD_PRELOAD=build-gpu/libff_kernel_trace.so $F train --model mnist-cnn --mode cuda --data "$DATA" \
    --batch 64 --epochs 4 --log-every 0 --precision tf32x3 > "$out/trace-b64.log" 2>&1
echo "c. trace b64 tf32x3 ($F): exit $?"
head -12 "$out"/trace-b64.*.txt | cut -c1-150
for p in tf32x3 fp32; do
    timeout 150 python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
        --peers graph --ff-args "--precision $p" --timeout 100 --out "$out/mnist-$p.json" > "$out/mnist-$p.txt" 2>&1
    echo "c. bench $p: exit $?"
    grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-$p.txt" | tail -7
done
el done
