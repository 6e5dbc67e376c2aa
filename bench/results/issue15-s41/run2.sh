#!/usr/bin/env bash
# Session 41, GPU call 2: run1.sh cut to what fits the device time left (run 1 never got a machine):
# the two bit-checking GPU test programs (every linear tile against the CPU emulation and tile 0,
# every tile's data gradients, the pool-sparse picks + gate against the one pass), ms a step
# tf32x3 at batch 64 and 256 (digests as sessions 39-40: d03b85df / 81bc1407, 76f6ddbd /
# d2cdb73c), then train_bench tf32x3 against PyTorch's CUDA graph.
# Usage: bash bench/results/issue15-s41/run2.sh OUTDIR  (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run2 "${1:?usage: run2.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
dr_build . fivefold test_gpu_train test_gpu_layers || exit 1
el built
timeout 150 ctest --test-dir build-gpu -R "^(test_gpu_layers|test_gpu_train)$" -j 2 --timeout 140 -V > "$out/ctest-gpu.log" 2>&1
echo "a. ctest: exit $?"; grep -E "Test +#|tests passed|Total Test" "$out/ctest-gpu.log"
grep -E "FAIL|picks" "$out/ctest-gpu.log" | grep -v "negative\|must FAIL\|vs split\|vs bias\|shifted\|one element" | head -12
gzip "$out/ctest-gpu.log"
el a done
F=$PWD/build-gpu/fivefold
A="--model mnist-cnn --mode cuda --data $DATA --epochs 4 --log-every 0 --precision tf32x3"
for b in 64 256; do
    timeout 30 $F train $A --batch $b --json "$out/step-tf32x3-b$b.json" > "$out/step-tf32x3-b$b.log" 2>&1
    dr_summ "tf32x3 b$b" "$out/step-tf32x3-b$b.json"
done
el b done
timeout 90 python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
    --peers graph --ff-args "--precision tf32x3" --timeout 60 --out "$out/mnist-tf32x3.json" > "$out/mnist-tf32x3.txt" 2>&1
echo "c. bench tf32x3: exit $?"
grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-tf32x3.txt" | tail -7
el done
