#!/usr/bin/env bash
# Session 28, GPU call 5 (one H200, the session's last): the tree as it lands (k_conv_x3_wgp with
# its scratch falling back to k_conv_x3_wg where none can be had), checked end to end, and a mutant
# that shows the checks see the pre-split kernel.
#  a. the GPU ctests that run tf32x3 or training (test_gpu_layers, test_gpu_train, gpu_train_*,
#     gpu_kernel_trace, test_gpu_exec, train_mlp_gpu*), and train_gpu.sh tf32x3's digests
#  b. mutant: k_split_pairs keeps only the big halves (small = 0): test_gpu_layers must fail on the
#     pre-split configurations (27-35) and pass the others
#  c. train_bench tf32x3 and fp32 against the CUDA-graph peer
# Usage: bash bench/results/issue15-s28/run5.sh OUTDIR  (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run5 "${1:?usage: run5.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
rm -rf /tmp/mut && mkdir -p /tmp/mut
tar --exclude=./build-gpu --exclude=./bench/results --exclude=./.git -cf - . | tar -xf - -C /tmp/mut
sed -i 's/out\[i\] = split_pair(in\[i\]);/out[i] = make_uint2(split_pair(in[i]).x, 0u);  \/\/ MUTANT/' /tmp/mut/core/device/cuda/layers_cuda.cu
grep -c MUTANT /tmp/mut/core/device/cuda/layers_cuda.cu
dr_build . fivefold test_gpu_layers test_gpu_train test_gpu_exec ff_kernel_trace & p1=$!
dr_build /tmp/mut test_gpu_layers & p2=$!
wait $p1 || exit 1
el built main
timeout 330 ctest --test-dir build-gpu -R "^(test_gpu_layers|test_gpu_train|gpu_train_.*|gpu_kernel_trace|test_gpu_exec|train_mlp_gpu|train_mlp_gpu_full)$" \
    -j 3 --timeout 250 --output-on-failure > "$out/ctest-gpu.log" 2>&1
echo "a. ctest: exit $?"; grep -E "Test +#|tests passed|Total Test" "$out/ctest-gpu.log"
export FIVEFOLD=$PWD/build-gpu/fivefold
MPIEXEC="mpiexec --oversubscribe" timeout 200 sh verify/gpu/train_gpu.sh tf32x3 > "$out/train_gpu-tf32x3.log" 2>&1
echo "a. train_gpu.sh tf32x3: exit $?"; grep -E "digest|rror" "$out/train_gpu-tf32x3.log" | head -6
el a done
if wait $p2; then
    timeout 200 /tmp/mut/build-gpu/verify/gpu/test_gpu_layers > "$out/mutant-test_gpu_layers.log" 2>&1
    echo "b. mutant test_gpu_layers: exit $? (want non-zero)"
    echo "FAIL lines by tile:"; grep -E "tf32x3 .* tile [0-9]+ vs automatic.*FAIL" "$out/mutant-test_gpu_layers.log" | sed -E 's/.* tile ([0-9]+) vs.*/\1/' | sort -n | uniq -c | tr '\n' ' '; echo
    echo "PASS lines by tile:"; grep -E "tf32x3 .* tile [0-9]+ vs automatic.*PASS" "$out/mutant-test_gpu_layers.log" | sed -E 's/.* tile ([0-9]+) vs.*/\1/' | sort -n | uniq -c | tr '\n' ' '; echo
    grep -E "PASSED|FAILED" "$out/mutant-test_gpu_layers.log" | head -4
    grep -E "tf32x3 .* tile [0-9]+ vs automatic.*FAIL" "$out/mutant-test_gpu_layers.log" | head -3
    grep -vE "(winograd band .* vs full rows|image/channel|vs automatic).*(max 0|PASS)" "$out/mutant-test_gpu_layers.log" | head -400 > "$out/tl" && mv "$out/tl" "$out/mutant-test_gpu_layers.log"
else
    echo "b. mutant build failed"; tail -5 "$out/build-mut.log"
fi
el b done
F=$PWD/build-gpu/fivefold
for p in tf32x3 fp32; do
    timeout 150 python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
        --peers graph --ff-args "--precision $p" --timeout 100 --out "$out/mnist-$p.json" > "$out/mnist-$p.txt" 2>&1
    echo "c. bench $p: exit $?"
    grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-$p.txt" | tail -7
done
el done
