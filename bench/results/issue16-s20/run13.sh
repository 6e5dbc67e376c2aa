#!/usr/bin/env bash
# As run, the fused exchange was on by default (all ranks); it is now opt-in: to repeat this, export
# FF_FUSED_EXCHANGE=1 where it was left unset (FF_FUSED_EXCHANGE=0 still runs the unfused one).
# Session 20, GPU call 4 (written inline in the run call; kept here as it ran): the fused
# exchange's blocks (FF_FUSED_CTAS) at P = 2 on run 12's warm machine, its build reused.
# Usage: bash run13.sh REPO OUTDIR
set -uo pipefail
cd "$1"; . bench/device_run.sh; dr_begin run13 "$2"; F=build-gpu/fivefold
dr_mlp d2-fused-c32 $F 2 FF_FUSED_CTAS=32
dr_mlp d2-fused-c16 $F 2 FF_FUSED_CTAS=16
dr_mlp d2-plain $F 2 FF_FUSED_EXCHANGE=0
dr_mlp d2-fused-c8 $F 2 FF_FUSED_CTAS=8
