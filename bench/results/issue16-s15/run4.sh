#!/usr/bin/env bash
# Session 15's last GPU call: the GPU training tests with the exchange on NCCL windows (main's
# code): train_mlp.sh gpu (now with a checkpoint written from windows and resumed), test_gpu_train,
# gpu_train_resume / _cpu / _oom / _golden, and a lost rank while training in the direct mode
# (windows freed after the communicator is aborted).
# Usage: bash bench/results/issue16-s15/run4.sh OUTDIR   (carry .deps, .data, .ff-source-commit)
set -uo pipefail
out=${1:?usage: run4.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export DATA="$PWD/.data/fashion-mnist"
b=build-gpu F=build-gpu/fivefold mpx="mpiexec --oversubscribe"
t0=$(date +%s)
el() { echo "[+$(( $(date +%s) - t0 )) s] $*"; }
fin() { tar -C "$out" -czf /tmp/run4.tgz . 2>/dev/null; mv /tmp/run4.tgz "$out/../run4.tgz"; }
trap fin EXIT
nvidia-smi -L; cat .ff-source-commit 2>/dev/null
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
  -DFF_SOURCE_COMMIT="$(cat .ff-source-commit 2>/dev/null)" > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build $b -j 32 --target fivefold test_gpu_train > "$out/build.log" 2>&1 || { grep -E "error|FAILED" "$out/build.log" | head -30; exit 1; }
el built
FIVEFOLD=$F MPIEXEC="$mpx" timeout 150 bash verify/train/train_mlp.sh gpu > "$out/train_mlp_gpu.log" 2>&1
echo "train_mlp.sh gpu: exit $?"; grep -E "windows|resumed|FAIL" "$out/train_mlp_gpu.log"; tail -1 "$out/train_mlp_gpu.log"
el "ctest"
timeout 150 ctest --test-dir $b -R "test_gpu_train|gpu_train_(resume|cpu|oom|golden)" --output-on-failure > "$out/ctest.log" 2>&1
echo "ctest: exit $?"; grep -E "tests passed|Passed|Failed|\*\*\*" "$out/ctest.log" | tail -8
for mode in direct; do
  FIVEFOLD=$F MPIEXEC=mpiexec TASK=train timeout 60 sh verify/cli/test_mpi_crash.sh $mode > "$out/crash-train-$mode.log" 2>&1
  echo "crash-train-$mode: exit $?"; grep -E "ended|lost|PASS|FAIL" "$out/crash-train-$mode.log" | head -6
done
el done
