#!/usr/bin/env bash
# Session 7's third GPU run for issue 15, one GPU: build; the per-piece step timings
# (ff_gpu_train_bench); the GPU training tests; the gated training benchmark against PyTorch's graph
# and eager peers (bench/train_bench.py: 3 epochs, batch 64 and 256, same initial weights and order).
set -uo pipefail
out=${1:?usage: run3.sh OUTDIR}
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export DATA="$PWD/.data/fashion-mnist"
nvidia-smi -L; cat .ff-source-commit
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build build-gpu -j 16 > "$out/build.log" 2>&1 || { grep -n "error" "$out/build.log" | head -40; exit 1; }
build-gpu/verify/gpu/ff_gpu_train_bench 64 256 2>&1 | tee "$out/pieces.txt"
timeout 240 ctest --test-dir build-gpu -R "train" -L gpu --output-on-failure --timeout 200 > "$out/ctest-train.log" 2>&1
echo "ctest rc=$?"; grep -E "tests passed|Failed|Passed|Skipped" "$out/ctest-train.log"
grep -E "PASS|FAIL" "$out/ctest-train.log" | grep -v "^\[" | head -40
timeout 280 python3 bench/train_bench.py --fivefold build-gpu/fivefold --data "$DATA" --batch 64,256 --epochs 3 \
  --modes cuda --peers graph,eager --out "$out/train_bench.json" > "$out/train_bench.txt" 2>&1
echo "train_bench rc=$?"; tail -30 "$out/train_bench.txt"
# then every other GPU test (inference in cuda, hybrid, direct at P = 1..4, halo fuzzers): nothing
# the training work touched has changed them
timeout 330 ctest --test-dir build-gpu -L gpu -E "train" -j 4 --timeout 300 > "$out/ctest-gpu-rest.log" 2>&1
echo "ctest (rest of gpu) rc=$?"; grep -E "tests passed|\(Failed\)|Skipped\)" "$out/ctest-gpu-rest.log"
