#!/usr/bin/env bash
# Session 27, GPU call 6 (one H200, the last 290 s of the session's device time): k_conv_x3_wg with
# the next stage's split overlapping this stage's products (configurations 27, 28).
#  a. test_gpu_layers: 29 tf32x3 configurations the automatic choice's bits
#  b. ff_conv_tiles tf32x3 forward / data gradient at b64 and b256
#  c. train_gpu.sh tf32x3 (a6481d10 / 99d4ce06 must stay); train_bench tf32x3 against the graph peer
# The kernel change was reverted after this run (slower); it is overlap-split.patch, against the
# commit after it. Usage: bash bench/results/issue15-s27/run6.sh OUTDIR   (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run6 "${1:?usage: run6.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
dr_build . fivefold test_gpu_layers ff_conv_tiles || exit 1
el built
timeout 100 build-gpu/verify/gpu/test_gpu_layers > "$out/test_gpu_layers.log" 2>&1
rc=$?
echo "a. test_gpu_layers: exit $rc (want 0)"; grep -E "tf32x3 .*(over|FAIL)|PASSED|FAILED" "$out/test_gpu_layers.log" | grep -v "must FAIL" | head -6
grep -cE "tf32x3 .* tile [0-9]+ vs automatic.*PASS" "$out/test_gpu_layers.log"
grep -E "tf32x3 .* tile 2[78] vs automatic" "$out/test_gpu_layers.log" | head -8
grep -vE "(winograd band .* vs full rows|image/channel).*(max 0|PASS)" "$out/test_gpu_layers.log" | head -600 > "$out/tl"; mv "$out/tl" "$out/test_gpu_layers.log"
el a done
[ $rc = 0 ] || exit 1
for b in 64 256; do
    for dg in "" --data-grad; do
        timeout 30 build-gpu/ff_conv_tiles --precision tf32x3 --batch $b $dg --iters 20 > "$out/tiles-b$b$dg.txt" 2>&1
        echo "b. tiles tf32x3 b$b $dg: exit $?"; grep -E "config (19|2[5-8]):|fastest" "$out/tiles-b$b$dg.txt"
    done
done
el b done
export FIVEFOLD=$PWD/build-gpu/fivefold
MPIEXEC="mpiexec --oversubscribe" timeout 60 sh verify/gpu/train_gpu.sh tf32x3 > "$out/train_gpu-tf32x3.log" 2>&1
echo "c. train_gpu.sh tf32x3: exit $?"; grep -E "digest|PASS|FAIL" "$out/train_gpu-tf32x3.log" | head -3
timeout 100 python3 bench/train_bench.py --fivefold $FIVEFOLD --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
    --peers graph --ff-args "--precision tf32x3" --timeout 60 --out "$out/mnist-tf32x3.json" > "$out/mnist-tf32x3.txt" 2>&1
echo "c. bench tf32x3: exit $?"
grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-tf32x3.txt" | tail -7
el done
