#!/usr/bin/env bash
# Session 28, GPU call 6 (one H200): the pre-split kernel's fallback, tested. test_gpu_layers now
# checks that no pre-split launch fell back while its scratch was there (so the "tile 27-35 vs
# automatic" lines really ran k_conv_x3_wgp), and that with the scratch withheld
# (ff_gpu_debug_split_scratch_off, as inside a capture) every one of them falls back to
# k_conv_x3_wg on the 3 x 3 stride-1 layers with the same bits. Mutant: the hook ignored (the
# scratch is always found) must fail the new count check.
# Usage: bash bench/results/issue15-s28/run6.sh OUTDIR  (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run6 "${1:?usage: run6.sh OUTDIR}"
rm -rf /tmp/mut && mkdir -p /tmp/mut
tar --exclude=./build-gpu --exclude=./bench/results --exclude=./.git -cf - . | tar -xf - -C /tmp/mut
sed -i 's/    if (g_split_scratch_off) return FF_OK;/    \/\/ MUTANT: the hook ignored/' /tmp/mut/core/device/cuda/layers_cuda.cu
grep -c MUTANT /tmp/mut/core/device/cuda/layers_cuda.cu
dr_build . test_gpu_layers & p1=$!
dr_build /tmp/mut test_gpu_layers & p2=$!
wait $p1 || exit 1
el built main
timeout 120 build-gpu/verify/gpu/test_gpu_layers > "$out/test_gpu_layers.log" 2>&1
echo "a. test_gpu_layers: exit $? (want 0)"; grep -E "PASSED|FAILED|fell back|without scratch.*FAIL" "$out/test_gpu_layers.log" | head -12
grep -cE "tf32x3 .* tile [0-9]+ without scratch vs automatic.*PASS" "$out/test_gpu_layers.log"
grep -vE "(winograd band .* vs full rows|image/channel|vs automatic).*(max 0|PASS)" "$out/test_gpu_layers.log" | head -300 > "$out/tl"; mv "$out/tl" "$out/test_gpu_layers.log"
el a done
wait $p2 || { echo "mutant build failed"; exit 1; }
timeout 120 /tmp/mut/build-gpu/verify/gpu/test_gpu_layers > "$out/mutant-test_gpu_layers.log" 2>&1
echo "b. mutant test_gpu_layers: exit $? (want non-zero)"; grep -E "PASSED|FAILED|fell back" "$out/mutant-test_gpu_layers.log" | head -12
grep -vE "(winograd band .* vs full rows|image/channel|vs automatic).*(max 0|PASS)" "$out/mutant-test_gpu_layers.log" | head -300 > "$out/tl"; mv "$out/tl" "$out/mutant-test_gpu_layers.log"
el done
