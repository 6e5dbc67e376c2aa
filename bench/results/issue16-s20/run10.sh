#!/usr/bin/env bash
# Session 20, GPU call 1, after run9.sh (issue16-s19) in the same command on the same machine: how
# many SMs NCCL's kernels take at P = 2. Session 17 found each part of the exchange (the
# all-to-all's send/recv on 32 CTAs, the update, the all-gather on 9) costing about 0.4 ms of a
# step it runs beside; 1.9x needs 0.04 ms less. Variants, alternating, twice: the default,
# NCCL_MAX_CTAS=16 and 8 (fewer SMs for the exchange, if it still fits beside the parameter pass),
# NCCL's CTA policy "efficiency". With four GPUs, P = 4 with NCCL_MAX_CTAS=16 against its default.
# Usage: bash bench/results/issue16-s20/run10.sh OUTDIR   (carry .deps, .ff-source-commit; ~3 min)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run10 "${1:?usage: run10.sh OUTDIR}"
F=build-gpu/fivefold
dr_build . fivefold || exit 1
el built
timeout 60 $F train --mode cuda $DR_MLP --microbatch 2048 --json "$out/cuda.json" > "$out/cuda.log" 2>&1
dr_summ cuda "$out/cuda.json"
for i in 1 2; do
    for v in def c16 c8 eff; do
        [ "$(dr_left 200)" -gt 20 ] || break 2
        case $v in
        def) dr_mlp "d2-$v-$i" $F 2 ;;
        c16) dr_mlp "d2-$v-$i" $F 2 NCCL_MAX_CTAS=16 ;;
        c8) dr_mlp "d2-$v-$i" $F 2 NCCL_MAX_CTAS=8 ;;
        eff) dr_mlp "d2-$v-$i" $F 2 FF_NCCL_CTA_POLICY=efficiency ;;
        esac
    done
done
if [ "$ngpu" -ge 4 ] && [ "$(dr_left 240)" -gt 20 ]; then
    dr_mlp d4-def $F 4
    dr_mlp d4-c16 $F 4 NCCL_MAX_CTAS=16
fi
el done
