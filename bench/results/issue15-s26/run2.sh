#!/usr/bin/env bash
# Session 26, GPU call 2 (one H200): what the split pass costs k_conv_x3_rows. A copy of the tree
# with presplit-experiment.patch (the weights and the input split into pairs by k_split_pairs in
# ff_gpu_conv2d, into buffers that grow: the PW / PX configurations 16..23 run) is built;
# test_gpu_layers there (every tf32x3 configuration, the PW / PX kernels included, the same bits);
# ff_conv_tiles tf32x3 on conv2 forward and data gradient at b64 / b256, with the split passes timed
# in each call and (FF_XR_PRESPLIT_ONCE=1) split once, the kernel alone; --stalls on the tuner's
# choice of the forward at b64 (split once).
# Usage: bash bench/results/issue15-s26/run2.sh OUTDIR   (carry .deps, .ff-source-commit)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run2 "${1:?usage: run2.sh OUTDIR}"
exp=/tmp/exp
rm -rf $exp && mkdir -p $exp && tar --exclude=./build-gpu --exclude=./build --exclude=./.deps --exclude=./.data-mid -cf - . | tar -xf - -C $exp &&
    (cd $exp && patch -p1 -s < "$here/presplit-experiment.patch") || exit 1
dr_build $exp ff_conv_tiles test_gpu_layers || exit 1
el built
timeout 200 $exp/build-gpu/verify/gpu/test_gpu_layers > "$out/test_gpu_layers-exp.log" 2>&1
echo "test_gpu_layers (experiment): exit $? (want 0)"; grep -E "tf32x3 .*(over|FAIL)|PASSED|FAILED" "$out/test_gpu_layers-exp.log" | grep -v "must FAIL" | head -12
grep -cE "tile (1[6-9]|2[0-3]) vs automatic.*PASS" "$out/test_gpu_layers-exp.log"
grep -vE "(winograd band .* vs full rows|image/channel).*(max 0|PASS)" "$out/test_gpu_layers-exp.log" > "$out/t" && mv "$out/t" "$out/test_gpu_layers-exp.log"
el tested
for once in 1 0; do
    for b in 64 256; do
        for dg in "" --data-grad; do
            f="$out/tiles-x3-b$b$dg-once$once.txt"
            FF_XR_PRESPLIT_ONCE=$once timeout 60 $exp/build-gpu/ff_conv_tiles --precision tf32x3 --batch $b $dg > "$f" 2>&1
            echo "conv_tiles tf32x3 b$b $dg split once=$once: exit $?"; grep -E "config|fastest" "$f" | tail -25
        done
    done
done
el tiles
FF_XR_PRESPLIT_ONCE=1 timeout 120 $exp/build-gpu/ff_conv_tiles --precision tf32x3 --batch 64 --stalls > "$out/stalls-x3-b64.txt" 2>&1
echo "stalls: exit $?"; head -60 "$out/stalls-x3-b64.txt"
el done
