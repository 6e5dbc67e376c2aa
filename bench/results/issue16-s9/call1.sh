#!/usr/bin/env bash
# Session 9's only GPU call (the session had 313 device seconds left, and no two-GPU machine was
# lent): one GPU, the fivefold binary only, then the MLP trainer's GPU checks (train_mlp.sh gpu:
# mlp-small cuda = hybrid = direct at P = 2..4 with shares; one bucket per layer exchanged during
# the backward, overlap on and off; --backend vendor per micro-batch group, cuda = direct P=2
# --shares 3,1 = hybrid P=3; the allreduce option with overlap), then test_gpu_train if time is left.
# On one GPU direct runs over CUDA IPC, not NCCL. Usage: bash bench/results/issue16-s9/call1.sh OUTDIR
set -uo pipefail
out=${1:?usage: call1.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
b=build-gpu
t0=$(date +%s)
el() { echo "[+$(( $(date +%s) - t0 )) s] $*"; }
nvidia-smi -L; cat .ff-source-commit
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
  -DFF_SOURCE_COMMIT="$(cat .ff-source-commit 2>/dev/null)" > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build $b -j 16 --target fivefold > "$out/build.log" 2>&1 || { grep -E "error|FAILED" "$out/build.log" | head -30; exit 1; }
el built
FIVEFOLD=$b/fivefold MPIEXEC=mpiexec timeout 150 bash verify/train/train_mlp.sh gpu > "$out/train_mlp_gpu.log" 2>&1
echo "train_mlp.sh gpu: exit $?"; grep -vE "^\+ " "$out/train_mlp_gpu.log" | tail -25
el "test_gpu_train"
cmake --build $b -j 16 --target test_gpu_train >> "$out/build.log" 2>&1 && timeout 60 $b/verify/gpu/test_gpu_train > "$out/test_gpu_train.log" 2>&1
echo "test_gpu_train: exit $?"; tail -5 "$out/test_gpu_train.log"
el done
