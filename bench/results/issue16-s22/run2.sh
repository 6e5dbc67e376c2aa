#!/usr/bin/env bash
# Session 22, GPU call 2 (four H100s): the warp-per-image softmax against the thread-per-image one
# (softmax-warp.patch reversed on a copy), the MLP as the issue times it: cuda, direct:2 and
# direct:4, each pair alternating, digests compared (the change must not move a bit); then the GPU
# CTest cases call 1 (ci/gpu's ctest step, cut off by the call's limit) did not reach.
# Usage: bash bench/results/issue16-s22/run2.sh OUTDIR   (carry .deps, .ff-source-commit, .data-small)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run2 "${1:?usage: run2.sh OUTDIR}"
export DATA="$PWD/.data-small/fashion-mnist"
F=build-gpu/fivefold B=/tmp/base/build-gpu/fivefold
rm -rf /tmp/base && mkdir -p /tmp/base && tar --exclude=./build-gpu --exclude=./.git -cf - . | tar -x -C /tmp/base
(cd /tmp/base && patch -s -R -p1 < "$here/softmax-warp.patch") || { echo "patch failed"; exit 1; }
dr_build /tmp/base fivefold > "$out/base-build.txt" 2>&1 &
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" -DFF_SOURCE_COMMIT="$(cat .ff-source-commit)" > "$out/build.log" 2>&1 &&
    cmake --build build-gpu -j 40 >> "$out/build.log" 2>&1 || { echo "build failed"; grep -E "error|FAILED" "$out/build.log" | head; }
wait
cat "$out/base-build.txt"
el built
[ -x "$B" ] || { echo "no base binary"; exit 1; }
cuda() {  # cuda NAME BIN
    timeout 60 "$2" train --mode cuda $DR_MLP --microbatch 2048 --json "$out/$1.json" > "$out/$1.log" 2>&1 || echo "$1: exit $?"
    dr_summ "$1" "$out/$1.json"
}
for i in 1 2; do
    cuda cuda-new-$i $F
    cuda cuda-base-$i $B
    dr_mlp d4-new-$i $F 4
    dr_mlp d4-base-$i $B 4
    dr_mlp d2-new-$i $F 2
    dr_mlp d2-base-$i $B 2
done
el timed
# The softmax's share of a direct:4 step, kernel by kernel, both kernels.
if [ -f build-gpu/libff_kernel_trace.so ]; then
    for b in new base; do
        bin=$F; [ $b = base ] && bin=$B
        timeout 40 mpiexec --oversubscribe -n 4 env FF_KERNEL_TRACE="$out/trace-d4-$b" FF_KERNEL_TRACE_SKIP=2 \
            LD_PRELOAD=build-gpu/libff_kernel_trace.so $bin train --mode direct $DR_MLP --epochs 2 --microbatch 512 \
            > "$out/trace-d4-$b.log" 2>&1
        f=$(ls "$out"/trace-d4-$b.*.txt 2>/dev/null | head -1)
        [ -n "$f" ] && { echo "== $b"; head -2 "$f" | cut -c1-150; grep softmax "$f" | cut -c1-150; }
    done
fi
el traced
left=$(dr_left 545)
todo='gpu_(hybrid|direct)_(alexnet|mnist)_(batch|rows)_P[34]|gpu_direct_mnist_batch_P2|gpu_(hybrid|direct)_(alexnet|mnist)_rows_P2|gpu_direct_(nccl|ipc)_|_fault|gpu_train_'
echo "ctest, $left s left"
[ "$left" -gt 30 ] && timeout "$left" ctest --test-dir build-gpu -L gpu -R "$todo" -j 2 --output-on-failure --timeout 300 \
    > "$out/ctest-rest.log" 2>&1
echo "ctest: exit $?"
grep -E "Test +#|tests passed|tests failed" "$out/ctest-rest.log" | tail -40
el done
