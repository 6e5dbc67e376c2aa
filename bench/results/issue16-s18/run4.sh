#!/usr/bin/env bash
# Session 18's fourth GPU call (timing only): how much of the two-GPU step is the tail, the
# exchange of the last bucket (fc4..fc6, 44 MB) after the last parameter gradients, which nothing
# overlaps. x-tail.patch: FF_X_SKIP_LAST=n leaves out the exchange of the last n buckets,
# FF_X_SKIP_FIRST=n of the first n (fc1 first: bottom-up order); the bits change where one is left
# out. Also the step with every launch eager (FF_TRAIN_GRAPHS=0), which the next lever (the next
# step's forward waiting per bucket instead of joining the whole exchange) may need.
# Usage: bash bench/results/issue16-s18/run4.sh OUTDIR   (carry .deps, .ff-source-commit)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run4 "${1:?usage: run4.sh OUTDIR}"
X=/tmp/x/build-gpu/fivefold mpx="mpiexec --oversubscribe"
mkdir -p /tmp/x && tar --exclude=./build --exclude=./build-gpu -cf - . | tar -C /tmp/x -xf -
(cd /tmp/x && patch -p1 -s < "$here/x-tail.patch") || { echo "x-tail.patch does not apply"; exit 1; }
dr_build /tmp/x fivefold || exit 1
el built
A="--model mlp --batch 2048 --epochs 4 --log-every 0 --data synthetic --seed 1 --backend vendor"
dp() {  # name ranks [env...]
    local name=$1 np=$2
    shift 2
    timeout 60 env X=1 "$@" $mpx -n "$np" "$X" train --mode direct $A --microbatch $((2048 / np)) \
        --json "$out/$name.json" > "$out/$name.log" 2>&1 || echo "$name: exit $?"
    dr_summ "$name" "$out/$name.json"
}
for k in a b; do
    dp direct2-$k 2
    dp direct2-skiplast1-$k 2 FF_X_SKIP_LAST=1
    dp direct2-skiplast2-$k 2 FF_X_SKIP_LAST=2
    dp direct2-skipfirst1-$k 2 FF_X_SKIP_FIRST=1
    dp direct2-eager-$k 2 FF_TRAIN_GRAPHS=0
    if [ "$ngpu" -ge 4 ]; then
        dp direct4-$k 4
        dp direct4-skiplast1-$k 4 FF_X_SKIP_LAST=1
    fi
done
el done
