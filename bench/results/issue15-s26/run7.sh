#!/usr/bin/env bash
# Session 26, GPU call 7 (one H200): PC sampling of the tf32x3 kernels as the tuner now picks them,
# for the next session: conv2's forward (k_conv_x3_rows, configuration 17) and data gradient
# (k_conv_x3, configuration 2) at batch 64, the forward at 256.
# Usage: bash bench/results/issue15-s26/run7.sh OUTDIR   (carry .deps, .ff-source-commit)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run7 "${1:?usage: run7.sh OUTDIR}"
dr_build . ff_conv_tiles || exit 1
el built
for args in "--batch 64" "--batch 64 --data-grad" "--batch 256"; do
    f="$out/stalls-x3-$(echo $args | tr -d ' -').txt"
    timeout 60 build-gpu/ff_conv_tiles --precision tf32x3 $args --iters 20 --stalls > "$f" 2>&1
    echo "stalls tf32x3 $args: exit $?"; grep -E "fastest" "$f"; sed -n '/^kernel /,/top instructions/p' "$f" | head -16
done
el done
