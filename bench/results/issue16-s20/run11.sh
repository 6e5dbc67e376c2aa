#!/usr/bin/env bash
# As run, the fused exchange was on by default (all ranks); it is now opt-in: to repeat this, export
# FF_FUSED_EXCHANGE=1 where it was left unset (FF_FUSED_EXCHANGE=0 still runs the unfused one).
# Session 20, GPU call 2: the fused exchange (comm.h ff_comm_fused_tree_sgd, comm_nccl_lsa.cu: one
# kernel per bucket on NCCL 2.28's device API reads the peers' rows, adds them, updates the slice
# and stores it into every rank's weights) against the three-kernel exchange (FF_FUSED_EXCHANGE=0).
#   1. mlp-small, one micro-batch per rank (where it fuses): cuda = direct P = 2 and P = 4, bit for
#      bit, fused_buckets > 0; a checkpoint written by fused P = 2 resumed by P = 4 = straight
#   2. the MLP at P = 2 (digests f96a3715 / cb6c94d0): fused against not, alternating, twice;
#      FF_FUSED_CTAS 66; P = 4 (8b7fd5ce / f714b646) fused against not
#   3. train_mlp.sh gpu (every other direct case, unchanged)
# Usage: bash bench/results/issue16-s20/run11.sh OUTDIR   (carry .deps, .ff-source-commit; ~6 min)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run11 "${1:?usage: run11.sh OUTDIR}"
F=build-gpu/fivefold mpx="mpiexec --oversubscribe"
dr_build . fivefold || exit 1
el built
S="--model mlp-small --train-limit 512 --test-limit 128 --batch 64 --steps 12 --log-every 0"
dg() { grep -E '^(weights|loss) digest:' "$1" | tr '\n' ' '; }
fb() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("fused_buckets"))' "$1" 2>/dev/null; }
timeout 60 $F train --mode cuda $S --microbatch 32 > "$out/s-cuda32.log" 2>&1
timeout 60 $F train --mode cuda $S --microbatch 16 > "$out/s-cuda16.log" 2>&1
timeout 60 $mpx -n 2 $F train --mode direct $S --microbatch 32 --json "$out/s-d2.json" > "$out/s-d2.log" 2>&1; echo "s-d2 exit $?"
timeout 60 $mpx -n 2 env FF_FUSED_EXCHANGE=0 $F train --mode direct $S --microbatch 32 --json "$out/s-d2u.json" > "$out/s-d2u.log" 2>&1
echo "cuda mb32:       $(dg "$out/s-cuda32.log")"
echo "direct P=2 fused $(fb "$out/s-d2.json"): $(dg "$out/s-d2.log")"
echo "direct P=2 unfused $(fb "$out/s-d2u.json"): $(dg "$out/s-d2u.log")"
tail -2 "$out/s-d2.log"
el small P=2
if [ "$ngpu" -ge 4 ]; then
    timeout 60 $mpx -n 4 $F train --mode direct $S --microbatch 16 --json "$out/s-d4.json" > "$out/s-d4.log" 2>&1; echo "s-d4 exit $?"
    echo "cuda mb16:       $(dg "$out/s-cuda16.log")"
    echo "direct P=4 fused $(fb "$out/s-d4.json"): $(dg "$out/s-d4.log")"
fi
timeout 60 $mpx -n 2 $F train --mode direct $S --microbatch 32 --steps 5 --checkpoint-dir "$out/ck" > "$out/s-ck.log" 2>&1
timeout 60 $mpx -n 2 $F train --mode direct $S --microbatch 32 --checkpoint-dir "$out/ck" --resume > "$out/s-res.log" 2>&1
echo "fused P=2 5 steps, resumed by P=2: $(dg "$out/s-res.log")"
el MLP
dr_mlp d2-fused-1 $F 2
dr_mlp d2-plain-1 $F 2 FF_FUSED_EXCHANGE=0
dr_mlp d2-fused-2 $F 2
dr_mlp d2-plain-2 $F 2 FF_FUSED_EXCHANGE=0
dr_mlp d2-fused-c66 $F 2 FF_FUSED_CTAS=66
echo "fused buckets (P=2): $(fb "$out/d2-fused-1.json"), unfused: $(fb "$out/d2-plain-1.json")"
grep -m1 "^step " "$out/d2-fused-1.log"
if [ "$ngpu" -ge 4 ]; then
    dr_mlp d4-fused $F 4
    dr_mlp d4-plain $F 4 FF_FUSED_EXCHANGE=0
    dr_mlp d4-fused-on $F 4 -- --overlap on
    echo "fused buckets (P=4): $(fb "$out/d4-fused.json")"
fi
timeout 60 $F train --mode cuda $DR_MLP --microbatch 2048 --json "$out/cuda.json" > "$out/cuda.log" 2>&1
dr_summ cuda "$out/cuda.json"
el "train_mlp.sh gpu"
FIVEFOLD=$F MPIEXEC="$mpx" timeout 150 bash verify/train/train_mlp.sh gpu > "$out/train_mlp_gpu.log" 2>&1
echo "train_mlp.sh gpu: exit $?"; tail -1 "$out/train_mlp_gpu.log"
el done
