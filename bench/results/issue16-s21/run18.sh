#!/usr/bin/env bash
# Session 21, GPU call 4: run 17 showed the long runs do not stall by themselves (run 16's "stall"
# was the SIGSTOP); but after the stop, rank 0 neither reached the deadline nor printed, its main
# thread in a futex. Here the stop again with debug-hang.patch: 10 s after SIGSTOP of rank 1,
# SIGUSR1 prints rank 0's main-thread stack; fused, then FF_FUSED_EXCHANGE=0, then MNIST.
# Usage: bash bench/results/issue16-s21/run18.sh OUTDIR   (carry .deps, .ff-source-commit, .data-small)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run18 "${1:?usage: run18.sh OUTDIR}"
F=build-gpu/fivefold
git apply bench/results/issue16-s21/debug-hang.patch && echo "debug-hang.patch applied"
dr_build . fivefold || exit 1
el built
rank_pid() {
    for p in $(pgrep -f "$F train"); do
        tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1" && echo $p && return
    done
}
stop_case() {  # stop_case NAME [VAR=VALUE ...] -- ARGS
    local name=$1 envs=()
    shift
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    env X=1 "${envs[@]}" mpiexec --oversubscribe -n 2 $F train --mode direct "$@" --log-every 0 --comm-timeout 3 --verbose \
        > "$out/$name.log" 2>&1 &
    local job=$!
    local i=0
    while [ $i -lt 100 ] && ! grep -q "^epoch 20/" "$out/$name.log"; do sleep 0.1; i=$((i + 1)); done
    local r0=$(rank_pid 0) r1=$(rank_pid 1)
    kill -STOP "$r1"
    echo "$name: stopped rank 1 ($r1) at $(grep -c '^epoch' "$out/$name.log") epochs"
    i=0
    while kill -0 $job 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    if kill -0 $job 2>/dev/null; then
        echo "$name: still running 10 s after the stop"
        kill -USR1 "$r0"
        sleep 1
        for t in /proc/$r0/task/*; do echo "  task $(basename $t): $(cat $t/comm) $(cat $t/wchan 2>/dev/null)"; done | sort -k3 | uniq -c -f2
    else
        wait $job
        echo "$name: ended, exit $?"
    fi
    kill -CONT "$r1" 2>/dev/null
    kill -9 $(pgrep -f "$F train") 2>/dev/null
    wait $job 2>/dev/null
    grep -v "^epoch" "$out/$name.log" | grep -E "^\[dbg|error|rank 1" | cut -c1-300 | head -12
    grep -E "^\S+\(" "$out/$name.log" | while read -r fr; do
        case "$fr" in
        *fivefold\(+0x*) a=$(echo "$fr" | sed 's/.*(+\(0x[0-9a-f]*\)).*/\1/'); echo "    $(addr2line -f -C -e $F $a | head -1)" ;;
        *) echo "    $fr" | cut -c1-120 ;;
        esac
    done | head -40
    el "$name done"
}
M="--model mlp-small --data synthetic --train-limit 512 --test-limit 64 --batch 64 --microbatch 32 --epochs 100000"
stop_case fused -- $M
stop_case unfused FF_FUSED_EXCHANGE=0 -- $M
stop_case mnist -- --data $PWD/.data-small/fashion-mnist --train-limit 512 --test-limit 64 --batch 64 --epochs 100000
el done
