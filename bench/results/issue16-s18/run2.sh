#!/usr/bin/env bash
# Session 18's second GPU call: the fused update keeps no sum (ff_trainer_sync adds the rows again
# before it gathers the gradient), against its parent (run 1's commit) built in the same call; and
# NCCL's CTA cap swept (run 1: NCCL_MAX_CTAS=16 14.451 ms against 14.516, one run each).
#   1. checks on this commit: test_gpu_train (tree_sgd without keeping the sum: the rows untouched),
#      train_mlp.sh gpu (every direct and hybrid run = cuda; checkpoints from the sharded state),
#      train_gpu.sh modes and resume (MNIST-CNN; resume reads a checkpoint written by hybrid P = 2)
#   2. the MLP at P = 2 (and 4): parent and this commit, twice each, interleaved; the digests must
#      stay f96a3715/cb6c94d0 (P = 2) and 8b7fd5ce/f714b646 (P = 4)
#   3. this commit with NCCL_MAX_CTAS 12, 16, 20, 24 (twice each; timing only, the bits must not move)
# Usage: bash bench/results/issue16-s18/run2.sh OUTDIR   (carry .deps, .data-small, .ff-source-commit)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run2 "${1:?usage: run2.sh OUTDIR}"
export DATA="$PWD/.data-small/fashion-mnist"
F=build-gpu/fivefold OLD=/tmp/x/build-gpu/fivefold mpx="mpiexec --oversubscribe"
mkdir -p /tmp/x && tar --exclude=./build --exclude=./build-gpu -cf - . | tar -C /tmp/x -xf -
(cd /tmp/x && patch -R -p1 -s < "$here/run2.patch") || { echo "run2.patch does not reverse"; exit 1; }
dr_build /tmp/x fivefold &
dr_build . fivefold test_gpu_train || exit 1
wait
el built
timeout 90 build-gpu/verify/gpu/test_gpu_train > "$out/test_gpu_train.log" 2>&1
echo "test_gpu_train: exit $?"; grep -E "not kept|FAIL|PASSED|FAILED" "$out/test_gpu_train.log" | head -12
el "train_mlp.sh gpu"
FIVEFOLD=$F MPIEXEC="$mpx" timeout 150 bash verify/train/train_mlp.sh gpu > "$out/train_mlp_gpu.log" 2>&1
echo "train_mlp.sh gpu: exit $?"; grep -E "vendor|windows|FAIL" "$out/train_mlp_gpu.log"; tail -1 "$out/train_mlp_gpu.log"
for c in modes resume; do
    el "train_gpu.sh $c"
    FIVEFOLD=$F MPIEXEC="$mpx" timeout 90 sh verify/gpu/train_gpu.sh $c > "$out/train_gpu_$c.log" 2>&1
    echo "train_gpu.sh $c: exit $?"; grep -E "FAIL" "$out/train_gpu_$c.log"; tail -1 "$out/train_gpu_$c.log"
done
el "mlp timings"
A="--model mlp --batch 2048 --epochs 4 --log-every 0 --data synthetic --seed 1 --backend vendor"
dp() {  # name binary ranks [env...]
    local name=$1 bin=$2 np=$3
    shift 3
    timeout 60 env X=1 "$@" $mpx -n "$np" "$bin" train --mode direct $A --microbatch $((2048 / np)) \
        --json "$out/$name.json" > "$out/$name.log" 2>&1 || echo "$name: exit $?"
    dr_summ "$name" "$out/$name.json"
}
for k in a b; do
    dp direct2-parent-$k $OLD 2
    dp direct2-this-$k $F 2
    for c in 12 16 20 24; do dp direct2-maxctas$c-$k $F 2 NCCL_MAX_CTAS=$c; done
    if [ "$ngpu" -ge 4 ]; then
        dp direct4-parent-$k $OLD 4
        dp direct4-this-$k $F 4
        dp direct4-maxctas16-$k $F 4 NCCL_MAX_CTAS=16
    fi
done
el done
