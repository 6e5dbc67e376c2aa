#!/usr/bin/env bash
# Session 21, GPU call 6 (what device time is left, ~300 s): the update loop shared by k_tree_sgd4
# and the fused exchange (train_rules.cuh tree_sgd_chunks, duplicates' D1 of session 20). The bits
# must not move: mlp-small cuda = direct fused (default) = direct FF_FUSED_EXCHANGE=0 with one
# micro-batch per rank at P = 2 and 4 (run 19: 529b2510… / 7ddae9cd… and e49404bd… / ea417499…),
# and cuda = direct at the default micro-batch (8 rows a tree); then the MLP's step at P = 2, fused
# and not, once each (run 16 on other H100s: 14.31-14.33 and 14.57-14.60 ms).
# Usage: bash bench/results/issue16-s21/run20.sh OUTDIR   (carry .deps, .ff-source-commit)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run20 "${1:?usage: run20.sh OUTDIR}"
F=build-gpu/fivefold mpx="mpiexec --oversubscribe"
dr_build . fivefold || exit 1
el built
A="--model mlp-small --data synthetic --train-limit 512 --test-limit 128 --steps 12 --log-every 0"
dg() { grep -E '^(loss|weights) digest:' "$1" | awk '{print $3}' | tr '\n' ' '; }
for p in 2 4; do
    mb=$((96 / p / 8 * 8))
    timeout 30 $F train --mode cuda $A --batch $((p * mb)) --microbatch $mb > "$out/c$p.log" 2>&1
    timeout 30 $mpx -n $p $F train --mode direct $A --batch $((p * mb)) --microbatch $mb > "$out/f$p.log" 2>&1
    timeout 30 env FF_FUSED_EXCHANGE=0 $mpx -n $p $F train --mode direct $A --batch $((p * mb)) --microbatch $mb \
        > "$out/u$p.log" 2>&1
    echo "P=$p mb=$mb: cuda $(dg "$out/c$p.log")| fused $(dg "$out/f$p.log")| unfused $(dg "$out/u$p.log")"
    grep -h "^fused exchange" "$out/f$p.log"
done
timeout 30 $F train --mode cuda $A --batch 64 > "$out/c8.log" 2>&1
timeout 30 $mpx -n 2 $F train --mode direct $A --batch 64 > "$out/d8.log" 2>&1
echo "default micro-batch (8): cuda $(dg "$out/c8.log")| direct P=2 $(dg "$out/d8.log")"
el small
dr_mlp d2-fused $F 2
dr_mlp d2-unfused $F 2 FF_FUSED_EXCHANGE=0
el done
