#!/usr/bin/env bash
# Session 18's third GPU call: the final code against PyTorch in one invocation (train_bench: cuda,
# direct:2 and, with four GPUs, direct:4; PyTorch's CUDA graph and DDP), and one question of run 1:
# at P = 4 the own row read in place was 0.07 ms slower than its parent. x-noown.patch
# (FF_X_NO_OWN=1) sends the own block to itself again, which brings back NCCL's all-to-all on
# windows (equal counts) in place of grouped send/recv: this commit with and without, P = 2 and 4,
# twice each, interleaved (timing; the digests must not move).
# Usage: bash bench/results/issue16-s18/run3.sh OUTDIR   (carry .deps, .ff-source-commit)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run3 "${1:?usage: run3.sh OUTDIR}"
F=build-gpu/fivefold X=/tmp/x/build-gpu/fivefold mpx="mpiexec --oversubscribe"
mkdir -p /tmp/x && tar --exclude=./build --exclude=./build-gpu -cf - . | tar -C /tmp/x -xf -
(cd /tmp/x && patch -p1 -s < "$here/x-noown.patch") || { echo "x-noown.patch does not apply"; exit 1; }
dr_build /tmp/x fivefold &
dr_build . fivefold || exit 1
wait
$F --version | head -2
el built
A="--model mlp --batch 2048 --epochs 4 --log-every 0 --data synthetic --seed 1 --backend vendor"
dp() {  # name binary ranks [env...]
    local name=$1 bin=$2 np=$3
    shift 3
    timeout 60 env X=1 "$@" $mpx -n "$np" "$bin" train --mode direct $A --microbatch $((2048 / np)) \
        --json "$out/$name.json" > "$out/$name.log" 2>&1 || echo "$name: exit $?"
    dr_summ "$name" "$out/$name.json"
}
for k in a b; do
    dp direct2-this-$k $F 2
    [ -x $X ] && dp direct2-noown-$k $X 2 FF_X_NO_OWN=1
    if [ "$ngpu" -ge 4 ]; then
        dp direct4-this-$k $F 4
        [ -x $X ] && dp direct4-noown-$k $X 4 FF_X_NO_OWN=1
    fi
done
el "mlp bench"
l=$(dr_left 560)
peers=graph,ddp:2 modes=cuda,direct:2 four=()
[ "$ngpu" -ge 4 ] && peers=graph,ddp:2,ddp:4 modes=cuda,direct:2,direct:4 four=(--mode-args "direct:4=--microbatch 512")
[ "$l" -gt 100 ] && timeout "$l" python3 bench/train_bench.py --fivefold $F --model mlp --batch 2048 --epochs 3 \
    --modes $modes --peers $peers --ff-args "--backend vendor" \
    --mode-args "cuda=--microbatch 2048" --mode-args "direct:2=--microbatch 1024" "${four[@]}" \
    --mpiexec "$mpx" --timeout 90 --out "$out/train-mlp.json" > "$out/train-mlp.txt" 2>&1
echo "mlp bench: exit $? ($l s were left)"
grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/train-mlp.txt" | tail -14
el done
