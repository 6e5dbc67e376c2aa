#!/usr/bin/env bash
# Session 27, GPU call 3 (one H200): tf32x3 convs on Hopper's warpgroup MMA (k_conv_x3_wg,
# configurations 19..24; the build now targets sm_90a). The probe (wgmma_probe.cu) showed the same
# bits as mma.sync's order at three times the rate.
#  a. test_gpu_layers: every tf32x3 configuration (25) the automatic choice's bits, within the bound
#  b. a mutant (the first two products of each chunk swapped): test_gpu_layers must FAIL
#  c. ff_conv_tiles tf32x3 conv2 forward / data gradient, b64 and b256 (which configuration wins)
#  d. train_gpu.sh tf32x3: the digests of run 2 (a6481d10 / 99d4ce06) must stay, cuda = hybrid = direct
#  e. test_gpu_train; trace b64 tf32x3; train_bench tf32x3 and fp32 against the CUDA-graph peer
# Usage: bash bench/results/issue15-s27/run3.sh OUTDIR   (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run3 "${1:?usage: run3.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
F=build-gpu/fivefold
rm -rf /tmp/mut && mkdir -p /tmp/mut && tar -c --exclude=./build-gpu --exclude=./build --exclude=./.deps . | tar -x -C /tmp/mut
python3 - /tmp/mut/core/device/cuda/layers_cuda.cu <<'PY'
import sys
p = sys.argv[1]; s = open(p).read()
a = "wgmma_tf32<NT>(d[mt], ab[set][mt], small);  // x_big w_small"
b = "wgmma_tf32<NT>(d[mt], al[set][mt], big);    // x_small w_big"
assert a in s and b in s
s = s.replace(a, "@@A@@").replace(b, a + "  // MUTANT").replace("@@A@@", b)
open(p, "w").write(s)
PY
grep -c MUTANT /tmp/mut/core/device/cuda/layers_cuda.cu
dr_build . fivefold test_gpu_layers test_gpu_train ff_conv_tiles ff_kernel_trace & p1=$!
dr_build /tmp/mut test_gpu_layers & p2=$!
wait $p1 || exit 1
el built main
grep -E "C75|warning" "$out/build-main.log" | head -5
timeout 200 build-gpu/verify/gpu/test_gpu_layers > "$out/test_gpu_layers.log" 2>&1
rc_layers=$?
echo "a. test_gpu_layers: exit $rc_layers (want 0)"; grep -E "tf32x3 .*(over|FAIL)|PASSED|FAILED" "$out/test_gpu_layers.log" | grep -v "must FAIL" | head -14
grep -cE "tf32x3 .* tile [0-9]+ vs automatic.*PASS" "$out/test_gpu_layers.log"
grep -E "tf32x3 .* tile (19|2[0-4]) vs automatic" "$out/test_gpu_layers.log" | head -8
grep -vE "(winograd band .* vs full rows|image/channel).*(max 0|PASS)" "$out/test_gpu_layers.log" > "$out/t" && mv "$out/t" "$out/test_gpu_layers.log"
el a done
wait $p2 && {
    timeout 200 /tmp/mut/build-gpu/verify/gpu/test_gpu_layers > "$out/mutant-test_gpu_layers.log" 2>&1
    echo "b. mutant test_gpu_layers: exit $? (want non-zero)"; grep -E "tile (19|2[0-4]) vs automatic.*FAIL|FAILED" "$out/mutant-test_gpu_layers.log" | head -8
    grep -cE "tile (19|2[0-4]) vs automatic.*FAIL" "$out/mutant-test_gpu_layers.log"
    grep -vE "(winograd band .* vs full rows|image/channel).*(max 0|PASS)" "$out/mutant-test_gpu_layers.log" | head -400 > "$out/t" && mv "$out/t" "$out/mutant-test_gpu_layers.log"
}
el b done
for b in 64 256; do
    for dg in "" --data-grad; do
        timeout 60 build-gpu/ff_conv_tiles --precision tf32x3 --batch $b $dg > "$out/tiles-b$b$dg.txt" 2>&1
        echo "c. tiles tf32x3 b$b $dg: exit $?"; grep -E "config (1[7-9]|2[0-4]):|fastest" "$out/tiles-b$b$dg.txt"
    done
done
el c done
[ $rc_layers = 0 ] || exit 1
export FIVEFOLD=$PWD/$F
MPIEXEC="mpiexec --oversubscribe" timeout 200 sh verify/gpu/train_gpu.sh tf32x3 > "$out/train_gpu-tf32x3.log" 2>&1
echo "d. train_gpu.sh tf32x3: exit $?"; grep -E "digest|vs fp32|PASS|FAIL" "$out/train_gpu-tf32x3.log" | head -5
el d done
timeout 200 build-gpu/verify/gpu/test_gpu_train > "$out/test_gpu_train.log" 2>&1
echo "e. test_gpu_train: exit $? (want 0)"; grep -E "PASSED|FAILED" "$out/test_gpu_train.log" | head -3
timeout 60 env FF_KERNEL_TRACE="$out/trace-b64" FF_KERNEL_TRACE_SKIP=0.3 \
    LD_PRELOAD=build-gpu/libff_kernel_trace.so $F train --model mnist-cnn --mode cuda --data "$DATA" \
    --batch 64 --epochs 4 --log-every 0 --precision tf32x3 > "$out/trace-b64.log" 2>&1
echo "e. trace b64 tf32x3: exit $?"
head -12 "$out"/trace-b64.*.txt | cut -c1-150
for p in tf32x3 fp32; do
    timeout 150 python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
        --peers graph --ff-args "--precision $p" --timeout 100 --out "$out/mnist-$p.json" > "$out/mnist-$p.txt" 2>&1
    echo "e. bench $p: exit $?"
    grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-$p.txt" | tail -7
done
el done
