#!/usr/bin/env bash
# Session 7's one-GPU check of issue 14: the CUDA IPC rows fix (stale mappings closed) and the
# device-resident replay test, i.e. every CTest case labelled gpu, with its log.
set -uo pipefail
out=${1:?usage: run.sh OUTDIR}
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
nvidia-smi -L; cat .ff-source-commit
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build build-gpu -j 16 > "$out/build.log" 2>&1 || { grep -n "error" "$out/build.log" | head -40; exit 1; }
ctest --test-dir build-gpu -L gpu --output-on-failure --timeout 600 -j 4 > "$out/ctest-gpu.log" 2>&1
rc=$?
tail -60 "$out/ctest-gpu.log"
exit $rc
