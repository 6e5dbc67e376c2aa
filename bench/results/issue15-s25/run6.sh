#!/usr/bin/env bash
# Session 25, GPU call 6 (one H200): conv2's weight gradient (k_conv_wgrad_part, 4 x 4 outputs a
# thread in 64 x 32 tiles, 128 threads) against other thread tiles, each a build with train_cuda.cu's
# WG_* macros (every tile gives the same bits: the digests of ff_conv_tiles --weight-grad must be
# equal): v1 8 x 4 in 64 x 32 (64 threads), v2 8 x 8 in 64 x 64 (64 threads), v3 8 x 4 in 64 x 64
# (128 threads), v4 4 x 4 in 64 x 32 with 32-deep stages. Batch 64 and 256, and --stalls of the
# fastest at 64.
# Usage: bash bench/results/issue15-s25/run6.sh OUTDIR   (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run6 "${1:?usage: run6.sh OUTDIR}"
vbuild() {  # NAME FLAGS: a copy of the tree with CMAKE_CUDA_FLAGS, ff_conv_tiles only
    rm -rf /tmp/$1 && mkdir -p /tmp/$1 && tar --exclude=./build-gpu --exclude=./.git -cf - . | tar -x -C /tmp/$1
    cmake -S /tmp/$1 -B /tmp/$1/build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
        -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" "-DCMAKE_CUDA_FLAGS=$2" > "$out/build-$1.log" 2>&1 &&
        cmake --build /tmp/$1/build-gpu -j 4 --target ff_conv_tiles >> "$out/build-$1.log" 2>&1 || echo "build $1 failed"
}
W="-DWG_BQ=16 -DWG_ST=4"
vbuild v1 "-DWG_BM=64 -DWG_BN=32 -DWG_TM=8 -DWG_TN=4 $W" &
vbuild v2 "-DWG_BM=64 -DWG_BN=64 -DWG_TM=8 -DWG_TN=8 $W" &
vbuild v3 "-DWG_BM=64 -DWG_BN=64 -DWG_TM=8 -DWG_TN=4 $W" &
vbuild v4 "-DWG_BM=64 -DWG_BN=32 -DWG_TM=4 -DWG_TN=4 -DWG_BQ=32 -DWG_ST=3" &
dr_build . ff_conv_tiles || exit 1
wait
el built
for bs in 64 256; do
    for v in main v1 v2 v3 v4; do
        T=/tmp/$v/build-gpu/ff_conv_tiles; [ $v = main ] && T=build-gpu/ff_conv_tiles
        [ -x $T ] || { echo "$v: no binary"; continue; }
        r=$(timeout 60 $T --layer conv2 --batch $bs --weight-grad --iters 50 2>&1 | grep -E "TFLOP/s")
        echo "b$bs $v: $r"
    done
done
el timed
