#!/usr/bin/env bash
# NOT RUN in session 21 (its device time was spent): the next session's P = 4 questions, on four
# GPUs, each variant twice, alternating, fivefold alone (~4 min):
#   - the fused exchange's blocks at P = 4 (FF_FUSED_CTAS 8 / 16 / 32; 16 was chosen at P = 2,
#     where each element reads one peer's row, at P = 4 it reads three)
#   - 2 MiB buckets (the default) against 16 MiB under --overlap auto (steps), the question run 9
#     left open
#   - --overlap on (the exchange within the step) against auto, now that the exchange is one kernel
# Usage: bash bench/results/issue16-s21/next-run21.sh OUTDIR   (carry .deps, .ff-source-commit)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run21 "${1:?usage: next-run21.sh OUTDIR}"
F=build-gpu/fivefold
dr_build . fivefold || exit 1
el built
[ "$ngpu" -ge 4 ] || { echo "needs four GPUs, has $ngpu"; exit 1; }
timeout 40 $F train --mode cuda $DR_MLP --microbatch 2048 --json "$out/cuda.json" > "$out/cuda.log" 2>&1
dr_summ cuda "$out/cuda.json"
for i in 1 2; do
    dr_mlp d4-c16-$i $F 4
    dr_mlp d4-c8-$i $F 4 FF_FUSED_CTAS=8
    dr_mlp d4-c32-$i $F 4 FF_FUSED_CTAS=32
    dr_mlp d4-b16-$i $F 4 -- --bucket-mb 16
    dr_mlp d4-on-$i $F 4 -- --overlap on
done
el done
