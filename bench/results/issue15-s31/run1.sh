#!/usr/bin/env bash
# Session 31, GPU call 1 (one H200): the landed tree (79b3dac, compiled but never GPU-run in
# session 30) and session 30's unrun run 5.
#  a. GPU ctests of training on the landed tree (digests as session 30's run 4)
#  b. kernel traces of a tf32x3 step with the gradient lane, batch 64 and 256 (where the time goes now)
#  c. session 30's run 5: every tf32x3 weight-gradient configuration beside the lane
#     (../issue15-s30/wgrad-cfg-env.patch, applied for this part only), batch 64 and 256
# Usage: bash bench/results/issue15-s31/run1.sh OUTDIR  (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run1 "${1:?usage: run1.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
dr_build . fivefold test_gpu_train test_gpu_exec ff_kernel_trace || exit 1
el built
timeout 170 ctest --test-dir build-gpu -R "^(test_gpu_train|gpu_train_.*|test_gpu_exec|train_mlp_gpu|gpu_kernel_trace)$" \
    -j 4 --timeout 160 -V > "$out/ctest-gpu.log" 2>&1
echo "a. ctest: exit $?"; grep -E "Test +#|tests passed|Total Test" "$out/ctest-gpu.log"
grep -E "^[0-9]+: (cuda|hybrid P=2 |direct P=2 ).*digest" "$out/ctest-gpu.log" | head -6
el a done
F=$PWD/build-gpu/fivefold
for b in 64 256; do
    timeout 40 env FF_KERNEL_TRACE="$out/trace-b$b" FF_KERNEL_TRACE_SKIP=0.3 \
        LD_PRELOAD=build-gpu/libff_kernel_trace.so $F train --model mnist-cnn --mode cuda --data "$DATA" \
        --batch $b --epochs 4 --log-every 0 --precision tf32x3 > "$out/trace-b$b.log" 2>&1
    echo "b. trace b$b: exit $?"; head -24 "$out"/trace-b$b.*.txt | cut -c1-120
done
el b done
git apply "$here/../issue15-s30/wgrad-cfg-env.patch" || { echo "patch does not apply"; exit 1; }
cmake --build build-gpu --target fivefold > "$out/build-patch.log" 2>&1 || { echo "c. patched build failed"; exit 1; }
el c built
for b in 64 256; do
    for v in one auto 0 1 2 3 4 5 one auto; do
        case $v in
        one) envs="FF_TRAIN_CONCURRENT_BACKWARD=0" ;;
        auto) envs="X=1" ;;
        *) envs="FF_WGRAD_X3_CFG=$v" ;;
        esac
        n=cfg-b$b-$v
        timeout 40 env $envs $F train --model mnist-cnn --mode cuda --data "$DATA" --batch $b --epochs 4 \
            --log-every 0 --precision tf32x3 --json "$out/$n.json" > "$out/$n.log" 2>&1
        dr_summ "b$b wgrad $v" "$out/$n.json"
    done
done
git apply -R "$here/../issue15-s30/wgrad-cfg-env.patch"
el done
