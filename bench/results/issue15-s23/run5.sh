#!/usr/bin/env bash
# Session 23, GPU calls 5 and 6 (one H200): the weight gradient of layers with few columns (mnist's conv1,
# C*R*S = 9) a thread per chain (k_conv_wgrad_chain) instead of one tiled block per image: the
# unit test (chain = tiled, bit for bit) and a mutant of the kernel (the bias chain skips its first
# position) shown failing it; the same training run on the commit before (base) and this one, each
# twice, digests compared (they must be equal), kernel traces of both at batch 64; train_gpu.sh
# modes; train_bench cuda against PyTorch's graph.
# Call 5 ran the first version (chains reading global memory: bits equal, 75 us, slower); call 6
# the block-per-image version staging dy and x in shared memory (the same script).
# Usage: bash bench/results/issue15-s23/run5.sh OUTDIR   (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run5 "${1:?usage: run5.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
F=build-gpu/fivefold B=/tmp/base/build-gpu/fivefold
rm -rf /tmp/base /tmp/mut && mkdir -p /tmp/base /tmp/mut
tar --exclude=./build-gpu --exclude=./.git -cf - . | tar -x -C /tmp/base
tar --exclude=./build-gpu --exclude=./.git -cf - . | tar -x -C /tmp/mut
(cd /tmp/base && patch -s -R -p1 < "$here/wgrad-chain.patch") || { echo "patch failed"; exit 1; }
sed -i 's|for (int q = 0; q < g.Q; q++) acc = __fadd_rn(acc, dyk\[q\]);|for (int q = 1; q < g.Q; q++) acc = __fadd_rn(acc, dyk[q]); /* MUTANT */|' \
    /tmp/mut/core/device/cuda/train_cuda.cu
grep -c MUTANT /tmp/mut/core/device/cuda/train_cuda.cu
dr_build /tmp/base fivefold > "$out/base-build.txt" 2>&1 &
dr_build /tmp/mut test_gpu_train > "$out/mut-build.txt" 2>&1 &
dr_build . fivefold test_gpu_train ff_kernel_trace
wait
cat "$out/base-build.txt" "$out/mut-build.txt"
el built
export FIVEFOLD=$PWD/$F
FF_TEST_FILTER='conv_*' timeout 100 build-gpu/verify/gpu/test_gpu_train > "$out/wgrad-test.log" 2>&1
echo "conv_* tests: exit $? (want 0)"; grep -E "chain vs tiled|conv 3x3|PASSED|FAILED" "$out/wgrad-test.log" | head
FF_TEST_FILTER='conv_wgrad*' timeout 100 /tmp/mut/build-gpu/verify/gpu/test_gpu_train > "$out/wgrad-mutant.log" 2>&1
echo "with the mutant: exit $? (want non-zero)"; grep -E "chain vs tiled|PASSED|FAILED" "$out/wgrad-mutant.log" | head -4
for i in 1 2; do
    for v in new base; do
        bin=$F; [ $v = base ] && bin=$B
        for bs in 64 256; do
            timeout 60 $bin train --model mnist-cnn --mode cuda --data "$DATA" --batch $bs --epochs 4 --log-every 0 \
                --json "$out/$v-b$bs-$i.json" > "$out/$v-b$bs-$i.log" 2>&1 || echo "$v b$bs: exit $?"
            python3 - "$v b$bs #$i" "$out/$v-b$bs-$i.json" <<'PY'
import json, sys, statistics
d = json.load(open(sys.argv[2])); spe = d["seconds_per_epoch"]
print(f"{sys.argv[1]:14s} {statistics.median(spe[1:]):.4f} s/epoch  loss {d['loss_digest']} w {d['weights_digest']}")
PY
        done
    done
done
el timed
timeout 60 env FF_KERNEL_TRACE="$out/trace-new-b64" FF_KERNEL_TRACE_SKIP=0.3 LD_PRELOAD=build-gpu/libff_kernel_trace.so \
    $F train --model mnist-cnn --mode cuda --data "$DATA" --batch 64 --epochs 4 --log-every 0 > /dev/null 2>&1
head -14 "$out"/trace-new-b64.*.txt | cut -c1-150
el traced
MPIEXEC="mpiexec --oversubscribe" timeout 200 sh verify/gpu/train_gpu.sh modes > "$out/train_gpu-modes.log" 2>&1
echo "train_gpu.sh modes: exit $?"; tail -4 "$out/train_gpu-modes.log"
el modes
timeout 120 python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
    --peers graph --timeout 100 --out "$out/mnist-fp32.json" > "$out/mnist-fp32.txt" 2>&1
echo "bench: exit $?"; grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-fp32.txt" | tail -7
el done
