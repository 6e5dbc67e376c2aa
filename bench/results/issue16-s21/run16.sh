#!/usr/bin/env bash
# Session 21, GPU call 2 (four GPUs): run 15 found a SIGSTOPped rank leaving mlp-small's direct
# job (fused exchange, one micro-batch per rank) running past 30 s, with no message. Here:
#   1. the same stop by hand, with debug-abort.patch applied to this call's copy only (stderr
#      lines on nccl_wait's slow waits and abort paths): rank 0's threads (wchan, and gdb's
#      backtrace where there is a gdb), the GPUs' utilisation, 12 s after the stop; fused, then
#      FF_FUSED_EXCHANGE=0 (is it the fused kernel?)
#   2. the MLP at P = 2 and 4, fused (default) against FF_FUSED_EXCHANGE=0, alternating, and cuda
#   3. train_bench: the MLP with the defaults (fused) against PyTorch's graph and DDP:2 / DDP:4
# Usage: bash bench/results/issue16-s21/run16.sh OUTDIR   (carry .deps, .ff-source-commit; ~6 min)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run16 "${1:?usage: run16.sh OUTDIR}"
F=build-gpu/fivefold
git apply bench/results/issue16-s21/debug-abort.patch && echo "debug-abort.patch applied"
dr_build . fivefold || exit 1
el built
command -v gdb && echo "gdb present" || echo "no gdb"
rank_pid() {  # rank_pid R: the fivefold process of rank R
    for p in $(pgrep -f "$F train"); do
        tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1" && echo $p && return
    done
}
stop_case() {  # stop_case NAME [VAR=VALUE ...]
    local name=$1
    shift
    env "$@" mpiexec --oversubscribe -n 2 $F train --mode direct --model mlp-small --data synthetic --train-limit 512 \
        --test-limit 64 --batch 64 --microbatch 32 --epochs 100000 --log-every 0 --comm-timeout 3 --verbose \
        > "$out/$name.log" 2>&1 &
    local job=$!
    sleep 6
    local r0 r1
    r0=$(rank_pid 0) r1=$(rank_pid 1)
    echo "$name: ranks $r0 $r1"
    kill -STOP "$r1"
    local t0=$(date +%s.%N)
    sleep 12
    if kill -0 $job 2>/dev/null; then
        echo "$name: still running 12 s after the stop"
        for t in /proc/$r0/task/*; do echo "  task $(basename $t): $(cat $t/comm) $(cat $t/wchan 2>/dev/null) $(awk '{print $3}' $t/stat)"; done
        nvidia-smi --query-gpu=index,utilization.gpu --format=csv,noheader | tr '\n' ' '; echo
        command -v gdb > /dev/null && timeout 30 gdb -batch -p "$r0" -ex "thread apply all bt 25" > "$out/$name-gdb.txt" 2>&1 &&
            grep -E "^#|^Thread" "$out/$name-gdb.txt" | head -120
    else
        echo "$name: ended in under 12 s"
    fi
    kill -CONT "$r1" 2>/dev/null
    kill -9 $(pgrep -f "$F train") $job 2>/dev/null
    wait $job 2>/dev/null
    grep -v "^epoch" "$out/$name.log" | cut -c1-400 | head -30
    el "$name done"
}
stop_case stop-fused
stop_case stop-unfused FF_FUSED_EXCHANGE=0
timeout 40 $F train --mode cuda $DR_MLP --microbatch 2048 --json "$out/cuda.json" > "$out/cuda.log" 2>&1
dr_summ cuda "$out/cuda.json"
for i in 1 2; do
    dr_mlp d2-fused-$i $F 2
    dr_mlp d2-unfused-$i $F 2 FF_FUSED_EXCHANGE=0
done
if [ "$ngpu" -ge 4 ]; then
    for i in 1 2; do
        dr_mlp d4-fused-$i $F 4
        dr_mlp d4-unfused-$i $F 4 FF_FUSED_EXCHANGE=0
    done
fi
grep -h "^fused exchange" "$out"/d2-fused-1.log "$out"/d4-fused-1.log 2>/dev/null
el timed
[ "$(dr_left 590)" -gt 200 ] && dr_mlp_bench 190
el done
