#!/usr/bin/env bash
# Session 26, GPU call 6 (one H200): k_conv_x3 and k_conv_x3_rows with their bias start, k-chunk
# products and epilogue in shared helpers (x3_acc_init, x3_mma_chunk, x3_store). The SASS differs
# (register allocation), the operations do not: test_gpu_layers (every tf32x3 configuration the
# same bits, within the bound) and train_gpu.sh tf32x3 (1a99b90b / 5f0807ee must stay).
# Usage: bash bench/results/issue15-s26/run6.sh OUTDIR   (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run6 "${1:?usage: run6.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
dr_build . fivefold test_gpu_layers || exit 1
el built
export FIVEFOLD=$PWD/build-gpu/fivefold
timeout 150 build-gpu/verify/gpu/test_gpu_layers > "$out/test_gpu_layers.log" 2>&1
echo "test_gpu_layers: exit $? (want 0)"; grep -E "tf32x3 .*(over|FAIL)|PASSED|FAILED" "$out/test_gpu_layers.log" | grep -v "must FAIL" | head -12
grep -cE "tf32x3 .* tile [0-9]+ vs automatic.*PASS" "$out/test_gpu_layers.log"
grep -vE "(winograd band .* vs full rows|image/channel).*(max 0|PASS)" "$out/test_gpu_layers.log" > "$out/t" && mv "$out/t" "$out/test_gpu_layers.log"
MPIEXEC="mpiexec --oversubscribe" timeout 200 sh verify/gpu/train_gpu.sh tf32x3 > "$out/train_gpu-tf32x3.log" 2>&1
echo "train_gpu.sh tf32x3: exit $?"; grep -E "digest|PASS|FAIL" "$out/train_gpu-tf32x3.log" | head -3
el done
