#!/usr/bin/env bash
# Session 19, GPU call 2 (four GPUs): why --overlap steps gained 0.68 ms at P = 4 but lost 0.11 ms
# at P = 2 in run 5 (bench/results/issue16-s18/run5/, 4x H100). The step with graphs (default),
# every step eager (FF_TRAIN_GRAPHS=0) and --overlap steps at P = 2 and P = 4, each twice, then
# --overlap steps with other bucket sizes and NCCL CTA settings; cuda for the scaling's base.
# Usage: bash bench/results/issue16-s19/run6.sh OUTDIR   (carry .deps, .ff-source-commit; ~5 min)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run6 "${1:?usage: run6.sh OUTDIR}"
F=build-gpu/fivefold
dr_build . fivefold || exit 1
el built
timeout 60 $F train --mode cuda $DR_MLP --microbatch 2048 --json "$out/cuda.json" > "$out/cuda.log" 2>&1
dr_summ cuda "$out/cuda.json"
for np in 2 4; do
    [ "$np" -gt "$ngpu" ] && continue
    el "P=$np"
    for i in 1 2; do
        dr_mlp "d$np-on-$i" $F $np
        dr_mlp "d$np-eager-$i" $F $np FF_TRAIN_GRAPHS=0
        dr_mlp "d$np-steps-$i" $F $np -- --overlap steps
    done
    for mb in 4 8 32; do dr_mlp "d$np-steps-b$mb" $F $np -- --overlap steps --bucket-mb $mb; done
    dr_mlp "d$np-eager-b4" $F $np FF_TRAIN_GRAPHS=0 -- --bucket-mb 4
done
if [ "$ngpu" -ge 4 ]; then
    el "P=4 NCCL settings"
    dr_mlp d4-steps-ctas16 $F 4 NCCL_MAX_CTAS=16 -- --overlap steps
    dr_mlp d4-steps-eff $F 4 FF_NCCL_CTA_POLICY=efficiency -- --overlap steps
    dr_mlp d4-on-ctas16 $F 4 NCCL_MAX_CTAS=16
fi
el done
