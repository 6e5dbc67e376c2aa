#!/usr/bin/env bash
# Session 11's last GPU call: the GPU training checks not rerun by final.sh, with the final code
# (register tree kernel, sharded update, urgent streams): train_gpu.sh resume, cpu, oom and golden
# (MNIST-CNN), the full-size MLP layers against the CPU, a direct-mode inference through NCCL,
# and a lost rank while training in hybrid and direct. Usage: bash .../checks.sh OUTDIR
set -uo pipefail
out=${1:?usage: checks.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export DATA="$PWD/.data/fashion-mnist"
b=build-gpu F=build-gpu/fivefold mpx="mpiexec --oversubscribe"
t0=$(date +%s)
el() { echo "[+$(( $(date +%s) - t0 )) s] $*"; }
fin() { tar -C "$out" -czf /tmp/s11-checks.tgz . 2>/dev/null; mv /tmp/s11-checks.tgz "$out/all.tgz"; }
nvidia-smi -L; cat .ff-source-commit 2>/dev/null
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
  > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build $b -j 32 --target fivefold > "$out/build.log" 2>&1 || { grep -E "error|FAILED" "$out/build.log" | head -30; exit 1; }
el built
for c in resume cpu oom golden; do
  FIVEFOLD=$F MPIEXEC="$mpx" timeout 100 sh verify/gpu/train_gpu.sh $c > "$out/train_gpu_$c.log" 2>&1
  echo "train_gpu.sh $c: exit $?"; tail -1 "$out/train_gpu_$c.log"
done
el "mlp full-size layers"
FIVEFOLD=$F MPIEXEC=mpiexec timeout 100 bash verify/train/train_mlp.sh gpu_full > "$out/train_mlp_gpu_full.log" 2>&1
echo "train_mlp.sh gpu_full: exit $?"; tail -1 "$out/train_mlp_gpu_full.log"
timeout 60 $mpx -n 2 $F verify --mode direct --model mnist-cnn > "$out/verify_direct.log" 2>&1
echo "verify direct P=2 (NCCL): exit $?"; tail -2 "$out/verify_direct.log"
for mode in hybrid direct; do
  FIVEFOLD=$F MPIEXEC=mpiexec TASK=train timeout 90 sh verify/cli/test_mpi_crash.sh $mode > "$out/crash_train_$mode.log" 2>&1
  echo "crash train $mode: exit $?"; tail -2 "$out/crash_train_$mode.log"
done
fin
el done
