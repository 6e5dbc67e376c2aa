#!/usr/bin/env bash
# As run, the fused exchange was on by default (all ranks); it is now opt-in: to repeat this, export
# FF_FUSED_EXCHANGE=1 where it was left unset (FF_FUSED_EXCHANGE=0 still runs the unfused one).
# Session 20, GPU call 3 (what device time is left): run 11 found every direct run failing once
# the fused exchange's device communicator was set up (ncclDevCommCreate with the first window;
# heap corruption after a failed set-up was destroyed). With that fixed: NCCL's warning for the
# set-up (NCCL_DEBUG=WARN) on mlp-small P = 2, one micro-batch per rank; if it runs, its digests
# against cuda's (635f0255 / a1e42ffe in run 11) and the MLP at P = 2 fused against not.
# Usage: bash bench/results/issue16-s20/run12.sh OUTDIR   (carry .deps, .ff-source-commit; ~4 min)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run12 "${1:?usage: run12.sh OUTDIR}"
F=build-gpu/fivefold mpx="mpiexec --oversubscribe"
dr_build . fivefold || exit 1
el built
S="--model mlp-small --train-limit 512 --test-limit 128 --batch 64 --steps 12 --log-every 0"
dg() { grep -E '^(weights|loss) digest:' "$1" | tr '\n' ' '; }
fb() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("fused_buckets"))' "$1" 2>/dev/null; }
timeout 40 $mpx -n 2 env NCCL_DEBUG=WARN $F train --mode direct $S --microbatch 32 --json "$out/s-d2.json" > "$out/s-d2.log" 2>&1
rc=$?
echo "s-d2 exit $rc, fused buckets $(fb "$out/s-d2.json"): $(dg "$out/s-d2.log")"
grep -iE "warn|error|fused|fail" "$out/s-d2.log" | sort | uniq -c | head -20
el small
if [ $rc -eq 0 ]; then
    timeout 40 $mpx -n 2 env FF_FUSED_EXCHANGE=0 $F train --mode direct $S --microbatch 32 > "$out/s-d2u.log" 2>&1
    echo "unfused: $(dg "$out/s-d2u.log")"
    dr_mlp d2-fused-1 $F 2
    dr_mlp d2-plain-1 $F 2 FF_FUSED_EXCHANGE=0
    dr_mlp d2-fused-2 $F 2
    dr_mlp d2-plain-2 $F 2 FF_FUSED_EXCHANGE=0
    echo "fused buckets (P=2): $(fb "$out/d2-fused-1.json")"
fi
el done
