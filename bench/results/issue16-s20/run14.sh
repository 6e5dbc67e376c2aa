#!/usr/bin/env bash
# As run, the fused exchange was on by default (all ranks); it is now opt-in: to repeat this, export
# FF_FUSED_EXCHANGE=1 where it was left unset (FF_FUSED_EXCHANGE=0 still runs the unfused one).
# Session 20, GPU call 5 (written inline in the run call; kept here as it ran): cuda beside the
# fused exchange at 16 and 12 blocks and the three-kernel exchange, on the same warm machine.
# Usage: bash run14.sh REPO OUTDIR
set -uo pipefail
cd "$1"; . bench/device_run.sh; dr_begin run14 "$2"; F=build-gpu/fivefold
timeout 40 $F train --mode cuda $DR_MLP --microbatch 2048 --json "$out/cuda.json" > "$out/cuda.log" 2>&1
dr_summ cuda "$out/cuda.json"
dr_mlp d2-fused-c16-1 $F 2 FF_FUSED_CTAS=16
dr_mlp d2-plain $F 2 FF_FUSED_EXCHANGE=0
dr_mlp d2-fused-c12 $F 2 FF_FUSED_CTAS=12
dr_mlp d2-fused-c16-2 $F 2 FF_FUSED_CTAS=16
