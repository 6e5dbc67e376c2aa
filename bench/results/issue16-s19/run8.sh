#!/usr/bin/env bash
# Session 19, GPU call 4 (four GPUs, what device time is left): run 7's train_gpu.sh modes found no
# data on the machine (it needs .data-small carried), so MNIST-CNN cuda = hybrid = direct under
# --overlap auto first; then the two-GPU step with smaller buckets, whose last (exposed) exchange is
# smaller: the default (4 buckets), --bucket-mb 4, 2, 1 (one bucket per layer: the last is fc6's
# 2 MB), alternating, twice; direct:4 (auto: steps) with --bucket-mb 1 against its default; cuda.
# Usage: bash bench/results/issue16-s19/run8.sh OUTDIR   (carry .deps, .data-small, .ff-source-commit; ~5 min)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
export DATA="$PWD/.data-small/fashion-mnist"
dr_begin run8 "${1:?usage: run8.sh OUTDIR}"
F=build-gpu/fivefold mpx="mpiexec --oversubscribe"
dr_build . fivefold || exit 1
el built
FIVEFOLD=$F MPIEXEC="$mpx" timeout 90 sh verify/gpu/train_gpu.sh modes > "$out/train_gpu_modes.log" 2>&1
echo "train_gpu.sh modes: exit $?"; grep -E "direct P=4|FAIL" "$out/train_gpu_modes.log"; tail -1 "$out/train_gpu_modes.log"
el "P=2 buckets"
timeout 60 $F train --mode cuda $DR_MLP --microbatch 2048 --json "$out/cuda.json" > "$out/cuda.log" 2>&1
dr_summ cuda "$out/cuda.json"
for i in 1 2; do
    for mb in def 4 2 1; do
        [ "$(dr_left 400)" -gt 20 ] || break 2
        if [ $mb = def ]; then dr_mlp "d2-$mb-$i" $F 2; else dr_mlp "d2-b$mb-$i" $F 2 -- --bucket-mb $mb; fi
    done
done
el "P=4"
if [ "$ngpu" -ge 4 ] && [ "$(dr_left 430)" -gt 20 ]; then
    dr_mlp d4-def $F 4
    dr_mlp d4-b1 $F 4 -- --bucket-mb 1
fi
el done
