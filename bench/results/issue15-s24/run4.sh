#!/usr/bin/env bash
# Session 24, GPU call 4 (one H200): the final tree (k_conv_x3_rows reverted; test_gpu_layers' tf32x3
# case gains a band of output rows, compared with the whole in every configuration): test_gpu_layers
# whole; then a mutant that ignores the band's first output row in the conv tiles' loads
# (ConvTileLoads: oh = pix / Wo) must fail the tf32x3 case on its band check.
# Usage: bash bench/results/issue15-s24/run4.sh OUTDIR   (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run4 "${1:?usage: run4.sh OUTDIR}"
dr_build . test_gpu_layers || exit 1
el built
timeout 100 build-gpu/verify/gpu/test_gpu_layers > "$out/test_gpu_layers.log" 2>&1
echo "test_gpu_layers: exit $? (want 0)"; grep -E "PASSED|FAILED" "$out/test_gpu_layers.log" | head
el tested
sed -i 's|const int oh = g.out_lo + pix / g.Wo, ow = pix % g.Wo;|const int oh = pix / g.Wo, ow = pix % g.Wo;|' \
    core/device/cuda/layers_cuda.cu
grep -c "const int oh = pix / g.Wo, ow" core/device/cuda/layers_cuda.cu
dr_build . test_gpu_layers || exit 1
el "mutant built"
FF_TEST_FILTER='conv_tf32x3*' timeout 100 build-gpu/verify/gpu/test_gpu_layers > "$out/mutant.log" 2>&1
echo "mutant conv_tf32x3_within_bound: exit $? (want non-zero)"
grep -c "rows .* tile" "$out/mutant.log"; grep -E "rows .* tile|PASSED|FAILED" "$out/mutant.log" | head -6
el done
