#!/usr/bin/env bash
# Session 30, NOT RUN (no machine could be started, then too little device time was left): the
# next session's first measurement. Does another tf32x3 weight-
# gradient configuration share the GPU better with conv2's data gradient beside it on the lane?
# The tree of run 4 with wgrad-cfg-env.patch (FF_WGRAD_X3_CFG=k forces configuration k, which
# gives the same bits as every other: test_gpu_train conv_wgrad_tf32x3_within_bound). Each
# configuration at batch 64 and 256 with the lane, the automatic choice with and without it
# (twice); ms per step and digests (which must not move).
# Usage: bash bench/results/issue15-s30/run5.sh OUTDIR  (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run5 "${1:?usage: run5.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
git apply "$here/wgrad-cfg-env.patch" || { echo "patch does not apply"; exit 1; }
dr_build . fivefold || exit 1
el built
F=$PWD/build-gpu/fivefold
for b in 64 256; do
    for v in one auto 0 1 2 3 4 5 one auto; do
        case $v in
        one) envs="FF_TRAIN_CONCURRENT_BACKWARD=0" ;;
        auto) envs="X=1" ;;
        *) envs="FF_WGRAD_X3_CFG=$v" ;;
        esac
        n=cfg-b$b-$v
        timeout 40 env $envs $F train --model mnist-cnn --mode cuda --data "$DATA" --batch $b --epochs 4 \
            --log-every 0 --precision tf32x3 --json "$out/$n.json" > "$out/$n.log" 2>&1
        dr_summ "b$b wgrad $v" "$out/$n.json"
    done
done
git apply -R "$here/wgrad-cfg-env.patch"
el done
