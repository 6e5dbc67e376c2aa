#!/usr/bin/env bash
# Session 24, GPU call 1 (one H200): session 23's last host-only refactor (run_gemm and run_x3
# choosing through one choose_cfg) on a GPU (the GPU unit tests and the training cases); the
# inference bench with --precision tf32x3 against its peer; and per-kernel traces of mnist-cnn's
# forward at batch 64 and 256 with direct and Winograd convolutions (what Winograd would save in
# training's forward and data gradient).
# Usage: bash bench/results/issue15-s24/run1.sh OUTDIR   (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run1 "${1:?usage: run1.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
F=build-gpu/fivefold
dr_build . fivefold fivefold_cli test_gpu_layers test_gpu_exec test_gpu_train ff_kernel_trace || exit 1
el built
timeout 200 ctest --test-dir build-gpu -R '^(test_gpu_layers|test_gpu_exec|test_gpu_train|gpu_train_(modes|cpu|golden|tf32x3))$' \
    -j 2 --output-on-failure --timeout 200 > "$out/ctest.log" 2>&1
echo "ctest: exit $?"
grep -E "Test +#|tests passed|tests failed" "$out/ctest.log" | tail -12
el tested
for conv in "direct" "winograd --winograd-m 2" "winograd --winograd-m 4"; do
    tag=$(echo "$conv" | tr -d ' -' )
    for bs in 64 256; do
        timeout 60 env FF_KERNEL_TRACE="$out/trace-$tag-b$bs" FF_KERNEL_TRACE_SKIP=0 \
            LD_PRELOAD=build-gpu/libff_kernel_trace.so $F bench --model mnist-cnn --mode cuda --batch $bs \
            --iters 400 --conv $conv > "$out/bench-$tag-b$bs.log" 2>&1
        echo "== $conv batch $bs: exit $? $(grep -m1 -i median "$out/bench-$tag-b$bs.log")"
        head -12 "$out"/trace-$tag-b$bs.*.txt 2>/dev/null | cut -c1-150
    done
done
el traced
timeout 150 $F bench --model mnist-cnn --mode cuda --conv direct --precision tf32x3 --batch 64,256 --iters 50 \
    --peer pytorch --json "$out/x3-peer" > "$out/x3-peer.log" 2>&1
echo "bench tf32x3 --peer: exit $?"; tail -20 "$out/x3-peer.log"
el done
