#!/usr/bin/env bash
# For session 18's first GPU call (NOT RUN in session 17: no device time was left). Two GPUs, or
# four where lent.
#   1. x-inplace.patch (timing, and the bits: the weights digest must stay cb6c94d0 at P = 2 and
#      f714b646 at P = 4): the update writes the weights in place and NCCL's all-gather sends from
#      there, instead of through the separate send slice (480 MB less traffic a step at P = 2).
#      A/B against this commit, each twice, interleaved.
#   2. the final code against PyTorch in one invocation: train_bench with cuda, direct:2 (and
#      direct:4), PyTorch's graph, DDP:2 (and DDP:4). Session 17's figures after the capped update
#      (run 5) had no PyTorch beside them, and P = 4 was not measured after it.
# Usage: bash bench/results/issue16-s17/next.sh OUTDIR   (carry .deps, .ff-source-commit)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin next "${1:?usage: next.sh OUTDIR}"
F=build-gpu/fivefold X=/tmp/x/build-gpu/fivefold mpx="mpiexec --oversubscribe"
mkdir -p /tmp/x && tar --exclude=./build --exclude=./build-gpu -cf - . | tar -C /tmp/x -xf -
(cd /tmp/x && patch -p1 -s < "$here/x-inplace.patch") || { echo "x-inplace.patch does not apply"; exit 1; }
dr_build /tmp/x fivefold &
dr_build . fivefold || exit 1
wait
$F --version
el built
A="--model mlp --batch 2048 --epochs 4 --log-every 0 --data synthetic --seed 1 --backend vendor"
dp() {  # name binary ranks [env...]
    local name=$1 bin=$2 np=$3
    shift 3
    timeout 60 env X=1 "$@" $mpx -n "$np" "$bin" train --mode direct $A --microbatch $((2048 / np)) \
        --json "$out/$name.json" > "$out/$name.log" 2>&1 || echo "$name: exit $?"
    dr_summ "$name" "$out/$name.json"
}
if [ -x $X ]; then
    for k in a b; do
        dp direct2-main-$k $F 2
        dp direct2-inplace-$k $X 2 FF_X_INPLACE=1
        if [ "$ngpu" -ge 4 ]; then
            dp direct4-main-$k $F 4
            dp direct4-inplace-$k $X 4 FF_X_INPLACE=1
        fi
    done
fi
el "mlp bench"
l=$(dr_left 575)
peers=graph,ddp:2 modes=cuda,direct:2 four=()
[ "$ngpu" -ge 4 ] && peers=graph,ddp:2,ddp:4 modes=cuda,direct:2,direct:4 four=(--mode-args "direct:4=--microbatch 512")
[ "$l" -gt 100 ] && timeout "$l" python3 bench/train_bench.py --fivefold $F --model mlp --batch 2048 --epochs 3 \
    --modes $modes --peers $peers --ff-args "--backend vendor" \
    --mode-args "cuda=--microbatch 2048" --mode-args "direct:2=--microbatch 1024" "${four[@]}" \
    --mpiexec "$mpx" --timeout 90 --out "$out/train-mlp.json" > "$out/train-mlp.txt" 2>&1
echo "mlp bench: exit $?"
grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/train-mlp.txt" | tail -14
el done
