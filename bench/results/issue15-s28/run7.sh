#!/usr/bin/env bash
# Session 28, GPU call 7 (one H200, what was left of the device time): run 6 found that the
# fallback of configurations 29, 32 and 35 launched k_conv_x3_wg shapes whose shared-memory limit
# was never raised (the launch failed); the fallback now runs k_conv_x3_wg's configuration 19 or 24
# (64 or 32 channels). test_gpu_layers again.
# Usage: bash bench/results/issue15-s28/run7.sh OUTDIR  (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run7 "${1:?usage: run7.sh OUTDIR}"
dr_build . test_gpu_layers || exit 1
el built
timeout 100 build-gpu/verify/gpu/test_gpu_layers > "$out/test_gpu_layers.log" 2>&1
echo "a. test_gpu_layers: exit $? (want 0)"; grep -E "PASSED|FAILED|ERROR|fell back" "$out/test_gpu_layers.log" | head -16
grep -cE "tf32x3 .* tile [0-9]+ without scratch vs automatic.*PASS" "$out/test_gpu_layers.log"
grep -vE "(winograd band .* vs full rows|image/channel|vs automatic).*(max 0|PASS)" "$out/test_gpu_layers.log" > "$out/tl"; mv "$out/tl" "$out/test_gpu_layers.log"
el done
