#!/usr/bin/env bash
# Session 37, GPU call 5 (the same warm H100 as run 4, its build-gpu): train_bench with
# FF_TRAIN_POOL_SPARSE=2 (both gradients pool-sparse) against PyTorch's CUDA graph. The command
# as it ran (one line in the call):
. bench/device_run.sh; mkdir -p $OUT/r5; F=$PWD/build-gpu/fivefold; D=$PWD/.data-mid/fashion-mnist; nvidia-smi -L; cat .ff-source-commit; for p in tf32x3 fp32; do FF_TRAIN_POOL_SPARSE=2 timeout 100 python3 bench/train_bench.py --fivefold $F --data $D --batch 64,256 --epochs 4 --modes cuda --peers graph --ff-args "--precision $p" --timeout 60 --out $OUT/r5/mnist-sparse2-$p.json > $OUT/r5/mnist-sparse2-$p.txt 2>&1; echo "bench $p (FF_TRAIN_POOL_SPARSE=2): exit $?"; grep -vE "^train_bench: (fivefold|pytorch|gate)" $OUT/r5/mnist-sparse2-$p.txt | tail -7; done 2>&1 | tee $OUT/run5.log
