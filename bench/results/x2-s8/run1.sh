#!/usr/bin/env bash
# Session 8's first call on two H200s (nvidia-h200-x2), issues 14 and 15: build; every CTest case
# labelled gpu (with two GPUs the direct P = 2 cases run over NCCL, a GPU per rank, and
# gpu_train_modes compares cuda with direct over NCCL at P = 2); NCCL send/recv bandwidth; a lost
# rank in hybrid and direct, inference and training.
# Usage: bash bench/results/x2-s8/run1.sh OUTDIR
set -uo pipefail
out=${1:?usage: run1.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export DATA="$PWD/.data/fashion-mnist"
b=build-gpu
t0=$(date +%s)
el() { echo "[+$(( $(date +%s) - t0 )) s] $*"; }
nvidia-smi -L; nvidia-smi topo -m | head -4; cat .ff-source-commit
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
  -DFF_SOURCE_COMMIT="$(cat .ff-source-commit 2>/dev/null)" > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build $b -j 32 > "$out/build.log" 2>&1 || { grep -E "error|FAILED" "$out/build.log" | head -30; exit 1; }
el built
timeout 60 mpiexec --oversubscribe -n 2 $b/verify/gpu/ff_nccl_p2p 4 16 64 256 2>&1 | grep JSON | tee "$out/nccl-p2p.jsonl"
el "ctest -L gpu"
timeout 400 ctest --test-dir $b -L gpu -j 4 --timeout 300 --output-on-failure > "$out/ctest-gpu.log" 2>&1
echo "ctest exit $?"; grep -E "tests passed|\(Failed\)|Skipped\)|Timeout" "$out/ctest-gpu.log"
grep -B2 -A15 "^FAIL" "$out/ctest-gpu.log" | head -60
el "lost rank"
for m in hybrid direct; do
  FIVEFOLD=$b/fivefold MPIEXEC=mpiexec RANKS=2 timeout 100 sh verify/cli/test_mpi_crash.sh $m > "$out/crash-$m.log" 2>&1
  echo "crash infer $m exit $?"; grep -E "^PASS|^FAIL" "$out/crash-$m.log" | head
done
FIVEFOLD=$b/fivefold MPIEXEC=mpiexec RANKS=2 TASK=train MODEL=mnist-cnn timeout 60 sh verify/cli/test_mpi_crash.sh direct > "$out/crash-train-direct.log" 2>&1
echo "crash train direct exit $?"; grep -E "^PASS|^FAIL" "$out/crash-train-direct.log" | head
el done
