#!/usr/bin/env bash
# Session 41, GPU call 1: the linear layers' tiles (k_lin, tiles 24-31), which the tuner now times
# beside the GEMM tiles and the split GEMV for mnist's fc1 forward (session 40: the split GEMV 19.5 us
# at batch 64, a GEMM tile 39.9 at 256) and its data gradient (13.2 / 34.3 us). The same chains:
#  a. test_gpu_layers (three linear tiles forced against the CPU emulation, every tile against tile
#     0), test_gpu_train (every tile's data gradients byte for byte), the gpu_train_* tests (digests
#     as sessions 39-40: tf32x3 d03b85df / 81bc1407 b64, 76f6ddbd / d2cdb73c b256)
#  a2. ff_conv_tiles --layer fc1 (new: linear layers), forward and --data-grad, batch 64 and 256
#  b. ms per step tf32x3 and fp32, batch 64 and 256, and traced steps (which kernel the tuner took)
#  c. train_bench tf32x3 then fp32 against PyTorch's CUDA graph in the same call
#  d. mutants: k_lin with terms k + 2 and k + 3 of each chain swapped must fail test_gpu_layers; the
#     gate passing dy where the pooled value is 0 (>= for >) must fail test_gpu_train's picks + gate
# And the pool-sparse gradient in two halves: the picks on the gradient lane at the start of the
# backward (beside fc2's and fc1's), the stream only gating dy (k_ps_gate) where k_ps_gradient2
# ran (14.8 / 29.4 us at batch 64 / 256 in session 40): test_gpu_train compares the halves' bytes.
# Usage: bash bench/results/issue15-s41/run1.sh OUTDIR [SECONDS]  (carry .deps, .ff-source-commit,
# .data-mid); SECONDS (default 540): the parts after the tf32x3 bench run only while that leaves room.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run1 "${1:?usage: run1.sh OUTDIR [SECONDS]}"
DL=${2:-540}
export DATA="$PWD/.data-mid/fashion-mnist"
dr_build . fivefold test_gpu_train test_gpu_layers ff_kernel_trace ff_conv_tiles || exit 1
el built
timeout 240 ctest --test-dir build-gpu -R "^(test_gpu_layers|test_gpu_train|gpu_train_.*|tools_conv_tiles_usage)$" -j 4 --timeout 220 -V > "$out/ctest-gpu.log" 2>&1
echo "a. ctest: exit $?"; grep -E "Test +#|tests passed|Total Test" "$out/ctest-gpu.log"
grep -E "FAIL|tile 2[4-9]|tile 3[01]" "$out/ctest-gpu.log" | grep -v "negative\|must FAIL\|vs split\|vs bias\|shifted\|one element" | head -20
gzip "$out/ctest-gpu.log"
el a done
F=$PWD/build-gpu/fivefold
for p in tf32x3 fp32; do
    A="--model mnist-cnn --mode cuda --data $DATA --epochs 4 --log-every 0 --precision $p"
    for b in 64 256; do
        timeout 30 $F train $A --batch $b --json "$out/step-$p-b$b.json" > "$out/step-$p-b$b.log" 2>&1
        dr_summ "$p b$b" "$out/step-$p-b$b.json"
    done
done
el b done
for p in tf32x3 fp32; do
    timeout 120 python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
        --peers graph --ff-args "--precision $p" --timeout 60 --out "$out/mnist-$p.json" > "$out/mnist-$p.txt" 2>&1
    echo "c. bench $p: exit $?"
    grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-$p.txt" | tail -7
    [ "$(dr_left $DL)" -gt 150 ] || break
done
el c done
A="--model mnist-cnn --mode cuda --data $DATA --epochs 12 --log-every 0 --precision tf32x3"
for b in 64 256; do
    [ "$(dr_left $DL)" -gt 60 ] || break
    timeout 40 env FF_KERNEL_TRACE="$out/tl-b$b" FF_KERNEL_TRACE_TIMELINE=30000 FF_KERNEL_TRACE_SKIP=0.3 \
        LD_PRELOAD=build-gpu/libff_kernel_trace.so $F train $A --batch $b > "$out/tl-b$b.log" 2>&1
    python3 tools/trace_step.py "$out"/tl-b$b.*.timeline.tsv > "$out/step-b$b.txt" 2>&1
    echo "b. traced step b$b: exit $?"; sed -n 1,32p "$out/step-b$b.txt"
    rm -f "$out"/tl-b$b.*.timeline.tsv
done
el b2 done
for b in 64 256; do  # every linear kernel of fc1 alone: forward and data gradient
    [ "$(dr_left $DL)" -gt 40 ] || break
    for dg in "" --data-grad; do
        f="$out/lin-fc1$dg-b$b.txt"
        timeout 60 build-gpu/ff_conv_tiles --layer fc1 $dg --batch $b --iters 100 > "$f" 2>&1
        echo "a2. ff_conv_tiles --layer fc1 $dg b$b: exit $?"; grep -E "tuner picks|fastest|config 2[0-9]|config 3[01]|config  3|DIFFER" "$f" | head -14
    done
done
el a2 done
if [ "$(dr_left $DL)" -gt 170 ]; then
    rm -rf /tmp/mut && mkdir /tmp/mut && tar -C . --exclude=./build-gpu --exclude=./.data-mid --exclude=./bench/results -cf - . | tar -C /tmp/mut -xf -
    python3 - /tmp/mut/core/device/cuda/layers_cuda.cu <<'PY'
import sys
p = sys.argv[1]; s = open(p).read()
z = "for (int j = 0; j < TN; j++) acc[i][j] = __fmaf_rn(a[i].z, x[j].z, acc[i][j]);"
w = "for (int j = 0; j < TN; j++) acc[i][j] = __fmaf_rn(a[i].w, x[j].w, acc[i][j]);"
assert s.count(z) == 1 and s.count(w) == 1
s = s.replace(z, "@Z@").replace(w, z).replace("@Z@", w)
open(p, "w").write(s)
PY
    python3 - /tmp/mut/core/device/cuda/pool_sparse.cu <<'PY'
import sys
p = sys.argv[1]; s = open(p).read()
g = "G[t] = !(pooled[t] > 0.0f) ? 0.0f : __fadd_rn(0.0f, dy[t]);"
assert s.count(g) == 1
s = s.replace(g, g.replace("> 0.0f", ">= 0.0f"))
open(p, "w").write(s)
PY
    dr_build /tmp/mut test_gpu_layers test_gpu_train && (cd /tmp/mut/build-gpu && timeout 100 ./verify/gpu/test_gpu_layers > "$out/mutant.log" 2>&1)
    echo "d. mutant (k_lin terms k+2, k+3 swapped): test_gpu_layers exit $? (must be nonzero)"
    grep -E "tile 2[4-9].*FAIL|tile 3[01].*FAIL|FAILED|PASSED" "$out/mutant.log" | head -8
    (cd /tmp/mut/build-gpu && timeout 100 ./verify/gpu/test_gpu_train > "$out/mutant-train.log" 2>&1)
    echo "d. mutants: test_gpu_train exit $? (must be nonzero); picks + gate lines:"
    grep -E "picks" "$out/mutant-train.log" | head -6
fi
el done
