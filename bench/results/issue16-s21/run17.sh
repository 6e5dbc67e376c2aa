#!/usr/bin/env bash
# Session 21, GPU call 3: run 16 found mlp-small's direct job at P = 2 stopping by itself after
# ~1000 epochs (8 steps each), fused or not, before any rank was stopped; rank 0's main thread in
# a futex, the deadline never firing. Which part? Long runs, each allowed 25 s (a hang: SIGUSR1
# prints each rank's main-thread stack through debug-hang.patch, applied to this copy only, then
# the job is killed):
#   fused / unfused / uncaptured exchange / host waits / plain memory, 3000 epochs of 8 steps;
#   64-step epochs (is it the epoch count or the step count); MNIST direct; cuda and hybrid.
# Usage: bash bench/results/issue16-s21/run17.sh OUTDIR   (carry .deps, .ff-source-commit, .data-small)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run17 "${1:?usage: run17.sh OUTDIR}"
F=build-gpu/fivefold
git apply bench/results/issue16-s21/debug-hang.patch && echo "debug-hang.patch applied"
dr_build . fivefold || exit 1
el built
S="--model mlp-small --data synthetic --test-limit 64 --batch 64 --microbatch 32 --log-every 0 --comm-timeout 3"
long() {  # long NAME NP MODE [VAR=VALUE ...] -- ARGS...
    local name=$1 np=$2 mode=$3 envs=()
    shift 3
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    local t0=$(date +%s.%N)
    env X=1 "${envs[@]}" mpiexec --oversubscribe -n $np $F train --mode $mode "$@" > "$out/$name.log" 2>&1 &
    local job=$! i=0
    while kill -0 $job 2>/dev/null && [ $i -lt 250 ]; do sleep 0.1; i=$((i + 1)); done
    local last=$(grep "^epoch" "$out/$name.log" | tail -1 | cut -d: -f1)
    if kill -0 $job 2>/dev/null; then
        echo "$name: HUNG (still running after 25 s; last: $last)"
        for p in $(pgrep -f "$F train"); do kill -USR1 $p; done
        sleep 1.5
        kill -9 $(pgrep -f "$F train") 2>/dev/null
        wait $job 2>/dev/null
        grep "^\[dbg" "$out/$name.log" | sort | uniq -c | head
        # our frames by name (PIE offsets), the libraries' as printed
        grep -E "^\S+\(" "$out/$name.log" | while read -r fr; do
            case "$fr" in
            *fivefold\(+0x*) a=$(echo "$fr" | sed 's/.*(+\(0x[0-9a-f]*\)).*/\1/'); echo "    $(addr2line -f -C -e $F $a | head -1)" ;;
            *) echo "    $fr" | cut -c1-120 ;;
            esac
        done | head -60
    else
        wait $job
        echo "$name: exit $? in $(awk -v a=$t0 -v b=$(date +%s.%N) 'BEGIN{printf "%.1f", b-a}') s; last: $last"
        grep "^\[dbg" "$out/$name.log" | sort | uniq -c | head -5
    fi
}
long fused 2 direct -- $S --train-limit 512 --epochs 3000
long unfused 2 direct FF_FUSED_EXCHANGE=0 -- $S --train-limit 512 --epochs 3000
long uncaptured 2 direct FF_CAPTURE_EXCHANGE=0 -- $S --train-limit 512 --epochs 3000
long hostwaits 2 direct FF_QUEUED_COMM=0 -- $S --train-limit 512 --epochs 3000
long plainmem 2 direct FF_NCCL_WINDOWS=0 -- $S --train-limit 512 --epochs 3000
long longepochs 2 direct -- $S --train-limit 4096 --epochs 300
long cuda 1 cuda -- $S --train-limit 512 --epochs 3000
long hybrid 2 hybrid -- $S --train-limit 512 --epochs 1500
long mnist 2 direct -- --data $PWD/.data-small/fashion-mnist --train-limit 4096 --test-limit 64 --batch 64 --epochs 200 --log-every 0 --comm-timeout 3
el done
