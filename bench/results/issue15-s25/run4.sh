#!/usr/bin/env bash
# Session 25, GPU call 4 (one H200): PC sampling (tools/pc_stalls.c through ff_conv_tiles --stalls)
# of mnist's conv2 kernels: forward, data gradient and weight gradient at batch 64 and 256, the
# forward also in tf32x3; the CTest script verify/gpu/conv_stalls.sh, and a mutant of pc_stalls.c
# (samples not counted) shown failing it. The final tree's training kernels: test_gpu_train whole,
# train_gpu.sh modes (run 1's fp32 digests 2cc6f392 / c6d8228d must stay).
# Usage: bash bench/results/issue15-s25/run4.sh OUTDIR   (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run4 "${1:?usage: run4.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
F=build-gpu/fivefold
rm -rf /tmp/mut && mkdir -p /tmp/mut
tar --exclude=./build-gpu --exclude=./.git -cf - . | tar -x -C /tmp/mut
sed -i 's|k->total += n, p->total += n;|(void)n; /* MUTANT */|' /tmp/mut/tools/pc_stalls.c
echo "mutants: $(grep -c MUTANT /tmp/mut/tools/pc_stalls.c) (want 1)"
dr_build /tmp/mut ff_conv_tiles > "$out/mut-build.txt" 2>&1 &
dr_build . fivefold test_gpu_train ff_conv_tiles || exit 1
wait
cat "$out/mut-build.txt"
el built
T=build-gpu/ff_conv_tiles
timeout 100 sh verify/gpu/conv_stalls.sh $T > "$out/conv_stalls.log" 2>&1
echo "conv_stalls.sh: exit $? (want 0)"; tail -3 "$out/conv_stalls.log"
timeout 100 sh verify/gpu/conv_stalls.sh /tmp/mut/build-gpu/ff_conv_tiles > "$out/conv_stalls-mutant.log" 2>&1
echo "conv_stalls.sh with the mutant: exit $? (want 1)"; tail -2 "$out/conv_stalls-mutant.log"
el stalls-test
for bs in 64 256; do
    for what in "" "--data-grad" "--weight-grad"; do
        f="$out/stalls-b$bs${what}.txt"
        timeout 90 $T --layer conv2 --batch $bs --iters 20 --stalls $what > "$f" 2>&1
        echo "== conv2 b$bs $what: exit $?"
        grep -E "tuner picks|fastest|weight gradient|^  +[0-9.]+ us|^PC sampling|^kernel|^  [a-z_]+ +[0-9]+ +[0-9.]+%" "$f" | grep -v "^  config" | head -14 | cut -c1-150
    done
done
timeout 90 $T --layer conv2 --batch 64 --iters 20 --stalls --precision tf32x3 > "$out/stalls-b64-x3.txt" 2>&1
echo "== conv2 b64 tf32x3: exit $?"
grep -E "fastest|^PC sampling|^kernel|^  [a-z_]+ +[0-9]+ +[0-9.]+%" "$out/stalls-b64-x3.txt" | head -12 | cut -c1-150
el sampled
timeout 150 build-gpu/verify/gpu/test_gpu_train > "$out/test_gpu_train.log" 2>&1
echo "test_gpu_train: exit $? (want 0)"; grep -E "PASSED|FAILED" "$out/test_gpu_train.log" | head -3
MPIEXEC="mpiexec --oversubscribe" timeout 200 sh verify/gpu/train_gpu.sh modes > "$out/train_gpu-modes.log" 2>&1
echo "train_gpu.sh modes: exit $?"; grep -E "digest|PASS|FAIL" "$out/train_gpu-modes.log" | head -3
el done
