#!/usr/bin/env bash
# Session 29, GPU call 1 (one H200): session 28's last commit (074048d, x3_tap_table shared by the
# three staged-rows conv kernels) never ran on a GPU.
#  a. test_gpu_layers (288 "tile N vs automatic" PASS lines, 72 "without scratch", 9 of 9 fell back
#     on the 3 x 3 layers), test_gpu_train, train_gpu.sh tf32x3 (digests a6481d10 / 99d4ce06)
#  b. the tf32x3 weight gradient's configurations at batch 64 and 256 (the next kernel's baseline)
# Usage: bash bench/results/issue15-s29/run1.sh OUTDIR  (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run1 "${1:?usage: run1.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
dr_build . fivefold test_gpu_layers test_gpu_train ff_conv_tiles || exit 1
el built
timeout 200 build-gpu/verify/gpu/test_gpu_layers > "$out/test_gpu_layers.log" 2>&1
echo "a. test_gpu_layers: exit $? (want 0)"; grep -E "PASSED|FAILED|ERROR|fell back" "$out/test_gpu_layers.log" | head -12
echo "tile-vs-automatic PASS lines: $(grep -cE "tf32x3 .* tile [0-9]+ vs automatic.*PASS" "$out/test_gpu_layers.log") (want 288)," \
    "without scratch: $(grep -cE "tf32x3 .* tile [0-9]+ without scratch vs automatic.*PASS" "$out/test_gpu_layers.log") (want 72)"
grep -vE "(winograd band .* vs full rows|image/channel|vs automatic).*(max 0|PASS)" "$out/test_gpu_layers.log" > "$out/tl"; mv "$out/tl" "$out/test_gpu_layers.log"
timeout 200 build-gpu/verify/gpu/test_gpu_train > "$out/test_gpu_train.log" 2>&1
echo "a. test_gpu_train: exit $? (want 0)"; grep -E "PASSED|FAILED|ERROR" "$out/test_gpu_train.log" | head -6
export FIVEFOLD=$PWD/build-gpu/fivefold
MPIEXEC="mpiexec --oversubscribe" timeout 200 sh verify/gpu/train_gpu.sh tf32x3 > "$out/train_gpu-tf32x3.log" 2>&1
echo "a. train_gpu.sh tf32x3: exit $?"; grep -E "digest|rror" "$out/train_gpu-tf32x3.log" | head -6
el a done
for b in 64 256; do
    timeout 60 build-gpu/ff_conv_tiles --weight-grad --precision tf32x3 --batch $b > "$out/wgrad-b$b.txt" 2>&1
    echo "b. wgrad tf32x3 b$b: exit $?"; grep -E "us " "$out/wgrad-b$b.txt" | head -10
done
el done
