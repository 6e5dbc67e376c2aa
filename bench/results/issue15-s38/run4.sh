#!/usr/bin/env bash
# Session 38, GPU call 4: the tree that lands. k_ps_dgrad is now run 3's variant 8 (a block per
# image, row pair and 13 columns; 4 warps, each a quarter of the output channels, added in order)
# and FF_TRAIN_POOL_SPARSE=2 the default.
#  a. test_gpu_train (the host model of the new order, bit for bit) and the gpu_train_* tests
#  b. ms per step, the default (2) and =1, tf32x3 and fp32, batch 64 and 256; traced default steps
#  c. train_bench, the default, tf32x3 then fp32, against PyTorch's CUDA graph in the same call
#  d. three mutants of the new kernel, one at a time in a copy: each must fail pool_sparse_backward_bits
# Usage: bash bench/results/issue15-s38/run4.sh OUTDIR  (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run4 "${1:?usage: run4.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
dr_build . fivefold test_gpu_train ff_kernel_trace || exit 1
el built
timeout 220 ctest --test-dir build-gpu -R "^(test_gpu_train|gpu_train_.*)$" -j 4 --timeout 200 -V > "$out/ctest-gpu.log" 2>&1
echo "a. ctest: exit $?"; grep -E "Test +#|tests passed|Total Test" "$out/ctest-gpu.log"
grep -E "pool-sparse|POOL_SPARSE|against the|direct P=2: the same|FAIL" "$out/ctest-gpu.log" | head -30
gzip "$out/ctest-gpu.log"
el a done
F=$PWD/build-gpu/fivefold
for p in tf32x3 fp32; do
    A="--model mnist-cnn --mode cuda --data $DATA --epochs 4 --log-every 0 --precision $p"
    for b in 64 256; do
        for v in default 1; do
            e=; [ $v = 1 ] && e=FF_TRAIN_POOL_SPARSE=1
            timeout 30 env $e $F train $A --batch $b --json "$out/step-$p-b$b-$v.json" > "$out/step-$p-b$b-$v.log" 2>&1
            dr_summ "$p b$b $v" "$out/step-$p-b$b-$v.json"
        done
    done
done
A="--model mnist-cnn --mode cuda --data $DATA --epochs 12 --log-every 0 --precision tf32x3"
for b in 64 256; do
    timeout 40 env FF_KERNEL_TRACE="$out/tl-b$b" FF_KERNEL_TRACE_TIMELINE=30000 FF_KERNEL_TRACE_SKIP=0.3 \
        LD_PRELOAD=build-gpu/libff_kernel_trace.so $F train $A --batch $b > "$out/tl-b$b.log" 2>&1
    python3 tools/trace_step.py "$out"/tl-b$b.*.timeline.tsv > "$out/step-b$b.txt" 2>&1
    echo "b. traced default step b$b: exit $?"; head -1 "$out/step-b$b.txt"; grep -A4 "^step .*GPU busy" "$out/step-b$b.txt"
    gzip "$out"/tl-b$b.*.timeline.tsv
done
el b done
for p in tf32x3 fp32; do
    timeout 120 python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
        --peers graph --ff-args "--precision $p" --timeout 60 --out "$out/mnist-$p.json" > "$out/mnist-$p.txt" 2>&1
    echo "c. bench $p: exit $?"
    grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-$p.txt" | tail -7
done
el c done
m=/tmp/mutant && rm -rf $m && mkdir -p $m && tar --exclude=./build-gpu --exclude=./.deps --exclude=./.data-mid -cf - . | tar -xf - -C $m
cp core/device/cuda/pool_sparse.cu /tmp/pool_sparse.orig.cu
mutate() {  # NAME SED: one mutant of pool_sparse.cu, built in the copy, against pool_sparse_backward_bits
    cp /tmp/pool_sparse.orig.cu $m/core/device/cuda/pool_sparse.cu
    sed -i "$2" $m/core/device/cuda/pool_sparse.cu
    if cmp -s /tmp/pool_sparse.orig.cu $m/core/device/cuda/pool_sparse.cu; then echo "d. mutant $1: the edit did not apply"; return; fi
    dr_build $m test_gpu_train || return
    FF_TEST_FILTER="*pool_sparse*" timeout 60 $m/build-gpu/verify/gpu/test_gpu_train > "$out/mutant-$1.log" 2>&1
    echo "d. mutant $1: pool_sparse_backward_bits exit $? (non-zero expected)"
    grep -E "pool-sparse d.*(FAIL|PASS)" "$out/mutant-$1.log" | head -6
}
mutate pick 's/case 1: taps(0, 1); break;/case 1: taps(1, 0); break;/'
mutate parts 's/const int KS = (g.K + PSD_PARTS - 1) \/ PSD_PARTS,/const int KS = (g.K + PSD_PARTS - 1) \/ PSD_PARTS + 1,/'
mutate odd 's/lx = 2 \* jj - 2 - ODD + qx + s;/lx = 2 * jj - 2 + ODD + qx + s;/'
el done
