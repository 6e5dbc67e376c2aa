#!/usr/bin/env bash
# Session 23, GPU call 7 (one H200): four more fp32 GEMM tile configurations with taller thread
# tiles (CFG_17..20: 8 x 4 and 8 x 8 per thread, fewer shared-memory reads per FMA), which the
# tuner may pick for mnist's convs; every configuration gives the same bits, so (1)
# test_gpu_layers' tiles_give_identical_bits over all 21, (2) the commit before
# (tall-tiles.patch reversed) and this one, each twice at batch 64 and 256, digests equal, (3)
# which kernels the step runs now, (4) train_bench cuda against PyTorch's graph.
# Usage: bash bench/results/issue15-s23/run7.sh OUTDIR   (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run7 "${1:?usage: run7.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
F=build-gpu/fivefold B=/tmp/base/build-gpu/fivefold
rm -rf /tmp/base && mkdir -p /tmp/base && tar --exclude=./build-gpu --exclude=./.git -cf - . | tar -x -C /tmp/base
(cd /tmp/base && patch -s -R -p1 < "$here/tall-tiles.patch") || { echo "patch failed"; exit 1; }
dr_build /tmp/base fivefold > "$out/base-build.txt" 2>&1 &
dr_build . fivefold test_gpu_layers ff_kernel_trace
wait
cat "$out/base-build.txt"
el built
export FIVEFOLD=$PWD/$F
FF_TEST_FILTER='tiles_give_identical_bits' timeout 120 build-gpu/verify/gpu/test_gpu_layers > "$out/tiles-test.log" 2>&1
echo "tiles_give_identical_bits: exit $? (want 0)"; grep -cE "PASS$" "$out/tiles-test.log"; grep -E "FAIL|PASSED|FAILED" "$out/tiles-test.log" | head -5
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
for bs in 64 256; do
    timeout 60 env FF_KERNEL_TRACE="$out/trace-new-b$bs" FF_KERNEL_TRACE_SKIP=0.3 LD_PRELOAD=build-gpu/libff_kernel_trace.so \
        $F train --model mnist-cnn --mode cuda --data "$DATA" --batch $bs --epochs 4 --log-every 0 > /dev/null 2>&1
    head -9 "$out"/trace-new-b$bs.*.txt | cut -c1-150
done
el traced
timeout 120 python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
    --peers graph --timeout 100 --out "$out/mnist-fp32.json" > "$out/mnist-fp32.txt" 2>&1
echo "bench: exit $?"; grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-fp32.txt" | tail -7
el done
