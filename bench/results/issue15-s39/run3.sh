#!/usr/bin/env bash
# Session 39, GPU call 3: the tree that lands. Run 2's k_gemv_split (a thread a row and 4 images)
# lost the tuner's vote to the GEMM tiles (128 blocks: too few in flight), so the split GEMV is
# run 1's k_gemv with blocks per chunk and image group again (19.2 us for fc1 at batch 64 against
# the GEMM's 21); conv1's strips as run 2 (their own sum kernel).
#  a. test_gpu_layers, test_gpu_train and the gpu_train_* tests
#  b. ms per step tf32x3 batch 64 and 256 (run 1's and 2's digests)
#  c. train_bench tf32x3 then fp32 against PyTorch's CUDA graph in the same call
# Usage: bash bench/results/issue15-s39/run3.sh OUTDIR  (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run3 "${1:?usage: run3.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
dr_build . fivefold test_gpu_train test_gpu_layers || exit 1
el built
timeout 200 ctest --test-dir build-gpu -R "^(test_gpu_layers|test_gpu_train|gpu_train_.*)$" -j 4 --timeout 180 -V > "$out/ctest-gpu.log" 2>&1
echo "a. ctest: exit $?"; grep -E "Test +#|tests passed|Total Test" "$out/ctest-gpu.log"
gzip "$out/ctest-gpu.log"
el a done
F=$PWD/build-gpu/fivefold
A="--model mnist-cnn --mode cuda --data $DATA --epochs 4 --log-every 0 --precision tf32x3"
for b in 64 256; do
    timeout 30 $F train $A --batch $b --json "$out/step-b$b.json" > "$out/step-b$b.log" 2>&1
    dr_summ "tf32x3 b$b" "$out/step-b$b.json"
done
el b done
for p in tf32x3 fp32; do
    timeout 100 python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
        --peers graph --ff-args "--precision $p" --timeout 60 --out "$out/mnist-$p.json" > "$out/mnist-$p.txt" 2>&1
    echo "c. bench $p: exit $?"
    grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-$p.txt" | tail -7
done
el done
