#!/usr/bin/env bash
# Session 15's last GPU call (review fixes: a failed window registration is an error and frees its
# memory; the trainer's take_window): train_mlp.sh gpu on main's final code.
# Usage: bash bench/results/issue16-s15/run5.sh OUTDIR   (carry .deps, .ff-source-commit)
set -uo pipefail
out=${1:?usage: run5.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
nvidia-smi -L; cat .ff-source-commit
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
  -DFF_SOURCE_COMMIT="$(cat .ff-source-commit)" > "$out/configure.log" 2>&1 &&
  cmake --build build-gpu -j 32 --target fivefold > "$out/build.log" 2>&1 || { tail -20 "$out/build.log"; exit 1; }
FIVEFOLD=build-gpu/fivefold MPIEXEC="mpiexec --oversubscribe" timeout 110 bash verify/train/train_mlp.sh gpu > "$out/train_mlp_gpu.log" 2>&1
echo "train_mlp.sh gpu: exit $?"; grep -E "windows|resumed|CTA|FAIL" "$out/train_mlp_gpu.log"; tail -1 "$out/train_mlp_gpu.log"
