#!/usr/bin/env bash
# Session 12's first GPU call (nvidia-h200-x2): the queued exchange (comm.h, ff_comm_set_queued:
# NCCL's collectives on the GPU's streams, one host wait per 4 steps) checked and timed. Checks:
# train_gpu.sh modes (direct P=2 over NCCL queued = FF_QUEUED_COMM=0 = cuda, bit for bit),
# train_mlp.sh gpu (buckets on the side lane, --shares), a lost rank while training (direct).
# Timings: MNIST-CNN batch 64/256 cuda and direct:2 against PyTorch's graph and DDP in one
# invocation, direct:2 with the queue off (A/B); the MLP at batch 2048 likewise.
# Usage: bash bench/results/issue15-s12/run1.sh OUTDIR
set -uo pipefail
out=${1:?usage: run1.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export DATA="$PWD/.data/fashion-mnist"
b=build-gpu F=build-gpu/fivefold mpx="mpiexec --oversubscribe"
t0=$(date +%s)
el() { echo "[+$(( $(date +%s) - t0 )) s] $*"; }
fin() { tar -C "$out" -czf /tmp/s12.tgz . 2>/dev/null; mv /tmp/s12.tgz "$out/all.tgz"; }
trap fin EXIT
nvidia-smi -L; cat .ff-source-commit 2>/dev/null
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
  -DFF_SOURCE_COMMIT="$(cat .ff-source-commit 2>/dev/null)" > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build $b -j 32 --target fivefold test_gpu_train > "$out/build.log" 2>&1 || { grep -E "error|FAILED" "$out/build.log" | head -30; exit 1; }
el built
FIVEFOLD=$F MPIEXEC="$mpx" timeout 150 sh verify/gpu/train_gpu.sh modes > "$out/train_gpu_modes.log" 2>&1
echo "train_gpu.sh modes: exit $?"; grep -E "direct P=2|FAIL" "$out/train_gpu_modes.log"; tail -1 "$out/train_gpu_modes.log"
FIVEFOLD=$F MPIEXEC=mpiexec timeout 150 bash verify/train/train_mlp.sh gpu > "$out/train_mlp_gpu.log" 2>&1
echo "train_mlp.sh gpu: exit $?"; grep -E "direct P=2|FAIL" "$out/train_mlp_gpu.log"; tail -1 "$out/train_mlp_gpu.log"
FIVEFOLD=$F MPIEXEC=mpiexec TASK=train timeout 120 sh verify/cli/test_mpi_crash.sh direct > "$out/crash_train_direct.log" 2>&1
echo "crash-train direct: exit $?"; tail -4 "$out/crash_train_direct.log"
el checked
left=$(( t0 + 540 - $(date +%s) ))
[ "$left" -gt 60 ] && timeout $left python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 3 --modes cuda,direct:2 \
  --peers graph,ddp:2 --mpiexec "$mpx" --timeout 120 --out "$out/train-mnist.json" > "$out/train-mnist.txt" 2>&1
echo "mnist: exit $?"; grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/train-mnist.txt" | tail -11
el "mnist direct:2, queue off (A/B)"
left=$(( t0 + 560 - $(date +%s) ))
[ "$left" -gt 40 ] && FF_QUEUED_COMM=0 timeout $left python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 3 --modes direct:2 \
  --peers none --mpiexec "$mpx" --timeout 60 --out "$out/train-mnist-unqueued.json" > "$out/train-mnist-unqueued.txt" 2>&1
echo "mnist unqueued: exit $?"; grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/train-mnist-unqueued.txt" | tail -6
el "mlp"
left=$(( t0 + 585 - $(date +%s) ))
[ "$left" -gt 40 ] && timeout $left python3 bench/train_bench.py --fivefold $F --model mlp --batch 2048 --epochs 3 --modes cuda,direct:2 \
  --peers graph,ddp:2 --ff-args "--backend vendor --microbatch 1024" --mpiexec "$mpx" --timeout 90 --out "$out/train-mlp.json" > "$out/train-mlp.txt" 2>&1
echo "mlp: exit $?"; grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/train-mlp.txt" | tail -7
el done
