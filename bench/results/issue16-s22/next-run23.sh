#!/usr/bin/env bash
# NOT RUN in session 22 (its device time went to the GPU suite): the next session's first call on
# four GPUs (~9 min): ci/gpu's steps session 22 did not run (the verify sweeps, the lost-rank
# steps of inference and MNIST training), then session 21's P = 4 questions
# (../issue16-s21/next-run21.sh: the fused exchange's blocks, 2 vs 16 MiB buckets, --overlap on).
# Usage: bash bench/results/issue16-s22/next-run23.sh OUTDIR   (carry .deps, .ff-source-commit, .data-small)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
out=${1:?usage: next-run23.sh OUTDIR}
mkdir -p "$out"
DATA="$PWD/.data-small/fashion-mnist" FF_GPU_STEPS='^(verify-|crash-)' timeout 330 bash ci/gpu "$out/ci" \
    > "$out/ci.log" 2>&1
echo "ci/gpu verify and crash steps: exit $?"
tail -4 "$out/ci.log"
timeout 250 bash bench/results/issue16-s21/next-run21.sh "$out/p4"
