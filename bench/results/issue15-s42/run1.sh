#!/usr/bin/env bash
# Session 42, GPU call 1: session 41's GPU code (never run on a GPU: k_lin linear tiles, the
# pool-sparse gradient in two halves, ff_conv_tiles --layer fc1), checks first and then speed, for a
# session that may get one short call:
#  a. build; the mutant tree (k_lin terms k+2 / k+3 swapped; the gate passing dy where the pooled
#     value is 0) builds beside it
#  b. ctest test_gpu_layers, test_gpu_train, gpu_train_* (digests as sessions 39-41), tools_conv_tiles_usage
#  c. the mutants: test_gpu_layers must fail on tiles 24-31, test_gpu_train on the picks + gate lines
#  d. ms per step tf32x3 b64 / b256 (digests: d03b85df / 81bc1407, 76f6ddbd / d2cdb73c)
#  e. train_bench tf32x3 against PyTorch's CUDA graph; then, while time is left, fp32, fc1's
#     kernels alone (ff_conv_tiles --layer fc1), traced steps
# Usage: bash bench/results/issue15-s42/run1.sh OUTDIR [SECONDS]  (carry .deps, .ff-source-commit, .data-mid)
# MUTANTS=0: no mutant tree (a call too short for a second build); the tests then get what time is left.
# (It ran in session 42 as committed in ba6185b, with MUTANTS=0 and SECONDS 170; since then its steps,
# bench, kernel timings and traces call bench/device_run.sh's dr_mnist_* and dr_layer_tiles, and its
# tests and mutants dr_gpu_ctest, dr_mutant_tree and dr_mutant_tests: the same two mutants, by their
# names in verify/mutation/mutants.py since session 43.)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_mnist_begin run1 480 "$@"
[ "$MUTANTS" = 1 ] && dr_mutant_tree gpu_lin_terms_swapped gpu_ps_gate_at_zero
dr_build . fivefold test_gpu_train test_gpu_layers ff_kernel_trace ff_conv_tiles || exit 1
el a. built
ct=$(dr_left $DL); [ "$ct" -gt 200 ] && ct=200
dr_gpu_ctest "$ct" "FAIL|tile 2[4-9]|tile 3[01]|picks" "negative|must FAIL|vs split|vs bias|shifted|one element"
el b. done
[ "$MUTANTS" = 1 ] && dr_mutant_tests "tile 2[4-9].*FAIL|tile 3[01].*FAIL" "picks"
el c. done
dr_mnist_steps tf32x3 fp32
el d. done
for p in tf32x3 fp32; do
    [ "$(dr_left $DL)" -gt 75 ] || break
    dr_mnist_bench $p
done
el e. bench done
for b in 64 256; do  # every linear kernel of fc1 alone: forward and data gradient
    for dg in "" --data-grad; do
        [ "$(dr_left $DL)" -gt 25 ] && dr_layer_tiles fc1 $b $dg
    done
done
for b in 64 256; do
    [ "$(dr_left $DL)" -gt 45 ] && dr_mnist_trace $b
done
el done
