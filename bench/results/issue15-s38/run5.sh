#!/usr/bin/env bash
# Session 38, GPU call 5: the landed tree (k_ps_dgrad in quarters, FF_TRAIN_POOL_SPARSE=2 the
# default) on the issue's card, an H200 if one comes.
#  a. test_gpu_train and the gpu_train_* tests
#  b. ms per step, FF_TRAIN_POOL_SPARSE = default (2) / 1 / 0, tf32x3, batch 64 and 256
#  c. train_bench, the default, tf32x3 then fp32, against PyTorch's CUDA graph in the same call
# Usage: bash bench/results/issue15-s38/run5.sh OUTDIR  (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run5 "${1:?usage: run5.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
dr_build . fivefold test_gpu_train || exit 1
el built
timeout 220 ctest --test-dir build-gpu -R "^(test_gpu_train|gpu_train_.*)$" -j 4 --timeout 200 -V > "$out/ctest-gpu.log" 2>&1
echo "a. ctest: exit $?"; grep -E "Test +#|tests passed|Total Test" "$out/ctest-gpu.log"
gzip "$out/ctest-gpu.log"
el a done
F=$PWD/build-gpu/fivefold
A="--model mnist-cnn --mode cuda --data $DATA --epochs 4 --log-every 0 --precision tf32x3"
for b in 64 256; do
    for v in default 1 0; do
        e=; [ $v != default ] && e=FF_TRAIN_POOL_SPARSE=$v
        timeout 30 env $e $F train $A --batch $b --json "$out/step-b$b-$v.json" > "$out/step-b$b-$v.log" 2>&1
        dr_summ "tf32x3 b$b $v" "$out/step-b$b-$v.json"
    done
done
el b done
for p in tf32x3 fp32; do
    timeout 120 python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
        --peers graph --ff-args "--precision $p" --timeout 60 --out "$out/mnist-$p.json" > "$out/mnist-$p.txt" 2>&1
    echo "c. bench $p: exit $?"
    grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-$p.txt" | tail -7
done
el done
