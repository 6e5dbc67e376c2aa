#!/usr/bin/env bash
# Session 25, GPU call 5 (one H200): conv configurations that fit whole waves (k_gemm CFG_21..23 and
# k_conv_x3 X3CFG_8..9: 5 or 6 blocks a multiprocessor, registers capped by __launch_bounds__).
# test_gpu_layers whole (every configuration's bits against the others); ff_conv_tiles on conv2's
# forward and data gradient at batch 64 and 256, fp32 and tf32x3, and --stalls once (the not-issued
# twins reported apart since run 4); conv_stalls.sh; train_gpu.sh modes and tf32x3 (run 1's digests
# must stay: 2cc6f392 / c6d8228d, 1a99b90b / 5f0807ee); train_bench fp32 and tf32x3 against the
# CUDA-graph peer.
# Usage: bash bench/results/issue15-s25/run5.sh OUTDIR   (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run5 "${1:?usage: run5.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
F=build-gpu/fivefold T=build-gpu/ff_conv_tiles
dr_build . fivefold test_gpu_layers ff_conv_tiles || exit 1
el built
export FIVEFOLD=$PWD/$F
timeout 150 build-gpu/verify/gpu/test_gpu_layers > "$out/test_gpu_layers.log" 2>&1
echo "test_gpu_layers: exit $? (want 0)"; grep -E "PASSED|FAILED" "$out/test_gpu_layers.log" | head -3
el tested
for p in fp32 tf32x3; do
    for bs in 64 256; do
        for dg in "" "--data-grad"; do
            f="$out/tiles-$p-b$bs$dg.txt"
            timeout 60 $T --layer conv2 --batch $bs --precision $p $dg --iters 50 > "$f" 2>&1
            echo "== $p b$bs $dg: exit $?; $(grep -E "fastest" "$f")"
            grep -E "config (21|22|23|8|9|6|7|17|2):" "$f" | head -5
        done
    done
done
el tiles
timeout 60 $T --layer conv2 --batch 64 --iters 20 --stalls > "$out/stalls-b64.txt" 2>&1
echo "stalls b64: exit $?"; sed -n '/^kernel/,/top instr/p' "$out/stalls-b64.txt" | head -14
timeout 100 sh verify/gpu/conv_stalls.sh $T > "$out/conv_stalls.log" 2>&1
echo "conv_stalls.sh: exit $? (want 0)"; tail -3 "$out/conv_stalls.log"
el stalls
for c in modes tf32x3; do
    MPIEXEC="mpiexec --oversubscribe" timeout 200 sh verify/gpu/train_gpu.sh $c > "$out/train_gpu-$c.log" 2>&1
    echo "train_gpu.sh $c: exit $?"; grep -E "digest|PASS|FAIL" "$out/train_gpu-$c.log" | head -3
done
el train_gpu
for p in fp32 tf32x3; do
    timeout 150 python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
        --peers graph --ff-args "--precision $p" --timeout 100 --out "$out/mnist-$p.json" > "$out/mnist-$p.txt" 2>&1
    echo "bench $p: exit $?"
    grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-$p.txt" | tail -7
done
el done
