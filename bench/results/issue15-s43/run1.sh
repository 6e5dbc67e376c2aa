#!/usr/bin/env bash
# Session 43's GPU call (written then; no device was lent for the rest of session 43: for the next
# session): conv1's two new kernels, both opt-in (k_conv_short: its forward a thread a pixel
# instead of a tf32x3 or GEMM tile, FF_CUDA_SHORT_CONV=1; k_conv_wgrad_lanes: its weight gradient a
# warp a strip with no shared memory, FF_TRAIN_WGRAD_LANES=1) against the defaults in the same
# call, and what session 42 could not run (session 41's mutants, the bench, fc1's kernels, traced
# steps):
#  a. build; the mutant tree (verify/mutation/mutants.py's gpu_lin_terms_swapped, gpu_ps_gate_at_zero,
#     gpu_short_conv_bias_last, gpu_wgrad_lanes_unfused: k_lin terms k+2 / k+3 swapped; the gate
#     passing dy where the pooled value is 0; k_conv_short's bias added after the chain; the
#     warp-a-strip weight gradient's terms rounded before the add) builds beside it
#  b. ctest test_gpu_layers (short_convs_equal_chains: the kernel = the host emulation of gpu.h's
#     conv order = every GEMM tile, bit for bit), test_gpu_train, gpu_train_* (the default, switch
#     off: session 39-42's digests), tools_conv_tiles_usage
#  c. the mutants: test_gpu_layers must fail on tiles 24-31 and on the short convs, test_gpu_train
#     on the picks + gate lines and the "strips a warp each" lines
#  d. ms a step, FF_CUDA_SHORT_CONV=0 (conv1 on the tiles, the default) and 1 in turn, twice, at
#     tf32x3 and fp32: fp32's digests must be the same on both sides (the same chains), tf32x3's not
#  d'. ms a step with FF_TRAIN_WGRAD_LANES=0 and =1 (conv1's weight gradient a warp a strip, no
#     shared memory) in turn, twice, tf32x3: the digests must be the same on both sides
#  e. with FF_CUDA_SHORT_CONV=1 and FF_TRAIN_WGRAD_LANES=1: train_bench tf32x3 against PyTorch's
#     CUDA graph, traced steps, conv1 alone (ff_conv_tiles: the short kernel timed beside every
#     tile), fc1's kernels alone, train_bench fp32 (what SECONDS leaves time for, in that order)
# Usage: bash bench/results/issue15-s43/run1.sh OUTDIR [SECONDS]  (carry .deps, .ff-source-commit, .data-mid)
# MUTANTS=0: no mutant tree (a call too short for a second build).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_mnist_begin run1 560 "$@"
[ "$MUTANTS" = 1 ] && dr_mutant_tree gpu_lin_terms_swapped gpu_short_conv_bias_last gpu_ps_gate_at_zero gpu_wgrad_lanes_unfused
dr_build . fivefold test_gpu_train test_gpu_layers ff_kernel_trace ff_conv_tiles || exit 1
el a. built
ct=$(dr_left $DL); [ "$ct" -gt 170 ] && ct=170
dr_gpu_ctest "$ct" "FAIL|short conv|tile 2[4-9]|tile 3[01]|picks|a warp each|tf32x3 mnist-cnn.conv1" \
    "negative|must FAIL|vs split|vs bias|shifted|one element|GEMM tile|image/channel"
el b. done
[ "$MUTANTS" = 1 ] && dr_mutant_tests "tile 2[4-9].*FAIL|tile 3[01].*FAIL|short conv.*FAIL" "picks|a warp each"
el c. done
# ab_digests SWITCH NAME SAME PREC...: ms a step with SWITCH=0 and =1 in turn, twice (DR_TAG NAME0-rR,
# NAME1-rR), then whether the two sides' first runs gave the same digests at each precision and batch,
# against SAME ("fp32" / "tf32x3" / "fp32 tf32x3": the precisions that must give the same bits)
ab_digests() {
    local sw=$1 name=$2 same=$3 r v
    shift 3
    for r in 1 2; do
        for v in 0 1; do
            [ "$(dr_left $DL)" -gt 150 ] || break
            (export "$sw=$v" DR_TAG=$name$v-r$r && dr_mnist_steps "$@")
        done
    done
    python3 - "$out" "$name" "$same" "$@" <<'PY'
import json, os, sys
out, name, same, precs = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4:]
for p in precs:
    for b in (64, 256):
        d = []
        for v in (0, 1):
            try:
                j = json.load(open(os.path.join(out, f"step-{p}-b{b}-{name}{v}-r1.json")))
                d.append((j["loss_digest"], j["weights_digest"]))
            except Exception as e:
                d.append(str(e))
        ok = (d[0] == d[1]) == (p in same)
        print(f"d. {name} {p} b{b}: digests {'the same' if d[0] == d[1] else 'differ'} on the two sides "
              f"({'as they must' if ok else 'WRONG'})")
PY
}
# conv1's forward on k_conv_short: fp32 the same chains (the same digests), tf32x3 not
ab_digests FF_CUDA_SHORT_CONV short fp32 tf32x3 fp32
# conv1's weight gradient a warp a strip: the same bits
ab_digests FF_TRAIN_WGRAD_LANES lanes tf32x3 tf32x3
el d. done
export FF_CUDA_SHORT_CONV=1 FF_TRAIN_WGRAD_LANES=1
[ "$(dr_left $DL)" -gt 120 ] && dr_mnist_bench tf32x3
el e. bench done
for b in 64 256; do
    [ "$(dr_left $DL)" -gt 45 ] && dr_mnist_trace $b
done
for b in 64 256; do
    for p in fp32 tf32x3; do
        [ "$(dr_left $DL)" -gt 25 ] && dr_layer_tiles conv1 $b --precision $p
    done
done
for b in 64 256; do  # every linear kernel of fc1 alone: forward and data gradient
    for dg in "" --data-grad; do
        [ "$(dr_left $DL)" -gt 25 ] && dr_layer_tiles fc1 $b $dg
    done
done
[ "$(dr_left $DL)" -gt 120 ] && dr_mnist_bench fp32
el done
