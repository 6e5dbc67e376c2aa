#!/usr/bin/env bash
# Session 26, GPU call 3 (one H200): the mma of k_conv_x3 and k_conv_x3_rows product by product
# over all tiles, and k_conv_x3_rows' one pipeline (run 2's configuration 22 race fixed). The tree
# as committed: test_gpu_layers, train_gpu.sh tf32x3 (digests 1a99b90b / 5f0807ee must stay),
# ff_conv_tiles tf32x3 forward and data gradient at b64 / b256. The copy with
# presplit-experiment.patch: test_gpu_layers (PW / PX configurations), ff_conv_tiles split once
# (the kernel alone) and --stalls on the tuner's forward at b64.
# Usage: bash bench/results/issue15-s26/run3.sh OUTDIR   (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run3 "${1:?usage: run3.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
exp=/tmp/exp
rm -rf $exp && mkdir -p $exp && tar --exclude=./build-gpu --exclude=./build --exclude=./.deps --exclude=./.data-mid -cf - . | tar -xf - -C $exp &&
    (cd $exp && patch -p1 -s < "$here/presplit-experiment.patch") || exit 1
dr_build . fivefold ff_conv_tiles test_gpu_layers || exit 1
dr_build $exp ff_conv_tiles test_gpu_layers || exit 1
el built
export FIVEFOLD=$PWD/build-gpu/fivefold
for t in . $exp; do
    n=$(basename $(cd $t && pwd))
    timeout 200 $t/build-gpu/verify/gpu/test_gpu_layers > "$out/test_gpu_layers-$n.log" 2>&1
    echo "test_gpu_layers ($n): exit $? (want 0)"; grep -E "tf32x3 .*(over|FAIL)|PASSED|FAILED" "$out/test_gpu_layers-$n.log" | grep -v "must FAIL" | head -12
    grep -vE "(winograd band .* vs full rows|image/channel).*(max 0|PASS)" "$out/test_gpu_layers-$n.log" > "$out/t" && mv "$out/t" "$out/test_gpu_layers-$n.log"
done
MPIEXEC="mpiexec --oversubscribe" timeout 200 sh verify/gpu/train_gpu.sh tf32x3 > "$out/train_gpu-tf32x3.log" 2>&1
echo "train_gpu.sh tf32x3: exit $?"; grep -E "digest|PASS|FAIL" "$out/train_gpu-tf32x3.log" | head -3
el tested
for t in . $exp; do
    n=$(basename $(cd $t && pwd))
    for b in 64 256; do
        for dg in "" --data-grad; do
            f="$out/tiles-x3-$n-b$b$dg.txt"
            FF_XR_PRESPLIT_ONCE=1 timeout 60 $t/build-gpu/ff_conv_tiles --precision tf32x3 --batch $b $dg > "$f" 2>&1
            echo "conv_tiles tf32x3 $n b$b $dg: exit $?"; grep -E "config|fastest" "$f" | tail -25
        done
    done
done
el tiles
FF_XR_PRESPLIT_ONCE=1 timeout 120 $exp/build-gpu/ff_conv_tiles --precision tf32x3 --batch 64 --stalls > "$out/stalls-x3-b64.txt" 2>&1
echo "stalls: exit $?"; sed -n '/PC samples/,$p' "$out/stalls-x3-b64.txt" | head -40
el done
