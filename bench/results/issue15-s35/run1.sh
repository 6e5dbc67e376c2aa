#!/usr/bin/env bash
# Session 35, GPU call 1 (one H200): the tree as it landed after session 34, whose changes (the
# lost-peer ending in core/cli/common.c and comm_mpi.c, ff_digest_f32_piece in the golden weight
# check) never ran on a GPU: every CTest labelled gpu, ci/gpu's verify and crash steps (hybrid and
# direct, P = 2 and 3, one GPU shared), then a tf32x3 step's time at batch 64 and 256 (the digests
# must not move).
# Usage: bash bench/results/issue15-s35/run1.sh OUTDIR  (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run1 "${1:?usage: run1.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
dr_build . all || exit 1
el built
timeout 240 ctest --test-dir build-gpu -L gpu -j 4 --timeout 200 --output-on-failure > "$out/ctest-gpu.log" 2>&1
echo "a. ctest -L gpu: exit $?"; grep -E "tests passed|Total Test|\*\*\*|Failed|Not Run" "$out/ctest-gpu.log" | head -20
el a done
FF_GPU_STEPS='^(verify-|crash-)' timeout 300 bash ci/gpu "$out/ci" > "$out/ci.log" 2>&1
echo "b. ci/gpu verify and crash steps: exit $?"
grep -E "^=== .*: exit [^0]|^ci/gpu|FAILED" "$out/ci.log" | tail -30
grep -E "^rank [0-9]+: ended rank" "$out/ci/crash.log" | head -4
el b done
F=$PWD/build-gpu/fivefold
A="--model mnist-cnn --mode cuda --data $DATA --epochs 4 --log-every 0 --precision tf32x3"
for b in 64 256; do
    n=step-b$b
    timeout 30 $F train $A --batch $b --json "$out/$n.json" > "$out/$n.log" 2>&1
    dr_summ "b$b" "$out/$n.json"
done
grep -q '"loss_digest": *"a1afe801dd367dad"' "$out/step-b64.json" && grep -q '"weights_digest": *"f5c1bb3e67fbb81a"' "$out/step-b64.json" || echo "c. b64: digests moved"
grep -q '"loss_digest": *"ce1eb0186245a1c3"' "$out/step-b256.json" && grep -q '"weights_digest": *"70e8b6618a4c1cf6"' "$out/step-b256.json" || echo "c. b256: digests moved"
el done
