#!/usr/bin/env bash
# Session 28, GPU call 3 (one H200): k_conv_x3_wgp with three stage buffers (configurations 33-35),
# and PC sampling of what bounds the pre-split conv and the weight gradient now.
#  a. test_gpu_layers (36 configurations: 288 PASS lines), train_gpu.sh tf32x3 (a6481d10 / 99d4ce06)
#  b. ff_conv_tiles tf32x3: forward and data gradient at b64 and b256
#  c. stalls: data gradient b64, forward b256, weight gradient b64
#  d. train_bench tf32x3 against the CUDA-graph peer
# Usage: bash bench/results/issue15-s28/run3.sh OUTDIR  (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run3 "${1:?usage: run3.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
dr_build . fivefold test_gpu_layers ff_conv_tiles || exit 1
el built
timeout 200 build-gpu/verify/gpu/test_gpu_layers > "$out/test_gpu_layers.log" 2>&1
echo "a. test_gpu_layers: exit $? (want 0)"; grep -E "tf32x3 .*(over|FAIL)|PASSED|FAILED|rror" "$out/test_gpu_layers.log" | grep -v "must FAIL" | head -12
grep -cE "tf32x3 .* tile [0-9]+ vs automatic.*PASS" "$out/test_gpu_layers.log"
grep -vE "(winograd band .* vs full rows|image/channel).*(max 0|PASS)" "$out/test_gpu_layers.log" > "$out/tl" && mv "$out/tl" "$out/test_gpu_layers.log"
export FIVEFOLD=$PWD/build-gpu/fivefold
MPIEXEC="mpiexec --oversubscribe" timeout 200 sh verify/gpu/train_gpu.sh tf32x3 > "$out/train_gpu-tf32x3.log" 2>&1
echo "a. train_gpu.sh tf32x3: exit $?"; grep -E "digest|rror" "$out/train_gpu-tf32x3.log" | head -6
el a done
for b in 64 256; do
    for dg in "" --data-grad; do
        timeout 60 build-gpu/ff_conv_tiles --precision tf32x3 --batch $b $dg > "$out/tiles-b$b$dg.txt" 2>&1
        echo "b. tiles tf32x3 b$b $dg: exit $?"; grep -E "config (17|2[3-9]|3[0-5]):|fastest|rror" "$out/tiles-b$b$dg.txt"
    done
done
el b done
timeout 60 build-gpu/ff_conv_tiles --precision tf32x3 --batch 64 --data-grad --iters 20 --stalls > "$out/stalls-dgrad-b64.txt" 2>&1
echo "c. stalls dgrad b64: exit $?"; grep -A14 "^kernel .*k_conv_x3_wgp" "$out/stalls-dgrad-b64.txt" | head -18
timeout 60 build-gpu/ff_conv_tiles --precision tf32x3 --batch 256 --iters 20 --stalls > "$out/stalls-fwd-b256.txt" 2>&1
echo "c. stalls fwd b256: exit $?"; grep -A14 "^kernel .*k_conv_x3_wgp" "$out/stalls-fwd-b256.txt" | head -18
timeout 60 build-gpu/ff_conv_tiles --precision tf32x3 --batch 64 --weight-grad --iters 20 --stalls > "$out/stalls-wgrad-b64.txt" 2>&1
echo "c. stalls wgrad b64: exit $?"; grep -A14 "^kernel .*k_conv_wgrad_x3" "$out/stalls-wgrad-b64.txt" | head -18
el c done
F=$PWD/build-gpu/fivefold
timeout 150 python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
    --peers graph --ff-args "--precision tf32x3" --timeout 100 --out "$out/mnist-tf32x3.json" > "$out/mnist-tf32x3.txt" 2>&1
echo "d. bench tf32x3: exit $?"
grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-tf32x3.txt" | tail -7
el done
