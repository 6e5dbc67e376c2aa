#!/usr/bin/env bash
# Prepared in session 14 for the next GPU call; NOT RUN (no device time was left). On a machine of
# two or more GPUs, main's code:
#   1. ce_probe.cu (run6.sh): does NCCL's zero-CTA policy keep concurrent SGEMMs at full speed?
#   2. MNIST-CNN, batch 64 and 256: cuda and direct:2 against PyTorch's graph, eager DDP:2 and the
#      new ddp-graph:2 (each rank's whole step in one CUDA graph), one invocation: do issue 15's
#      two-GPU goals (5x / 2x over DDP) hold against the stronger peer?
#   3. The MLP, batch 2048, vendor: cuda at its fastest micro-batch (--mode-args) beside direct:2 at
#      one micro-batch per rank, against the graph, DDP:2 and ddp-graph:2.
# Usage: bash bench/results/issue16-s14/next.sh OUTDIR   (carry .deps, .data, .ff-source-commit)
set -uo pipefail
out=${1:?usage: next.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export DATA="$PWD/.data/fashion-mnist"
b=build-gpu F=build-gpu/fivefold mpx="mpiexec --oversubscribe"
t0=$(date +%s)
el() { echo "[+$(( $(date +%s) - t0 )) s] $*"; }
left() { echo $(( t0 + $1 - $(date +%s) )); }
fin() { tar -C "$out" -czf /tmp/next.tgz . 2>/dev/null; mv /tmp/next.tgz "$out/../next.tgz"; }
trap fin EXIT
nvidia-smi -L; cat .ff-source-commit 2>/dev/null
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
  -DFF_SOURCE_COMMIT="$(cat .ff-source-commit 2>/dev/null)" > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build $b -j 32 --target fivefold > "$out/build.log" 2>&1 & pb=$!
bash "$here/run6.sh" "$out/probe" 2>&1 | tail -8
wait $pb || { grep -E "error|FAILED" "$out/build.log" | head -30; exit 1; }
el built
l=$(left 330)
timeout $l python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 3 --modes cuda,direct:2 \
  --peers graph,ddp:2,ddp-graph:2 --mpiexec "$mpx" --timeout 120 --out "$out/train-mnist.json" > "$out/train-mnist.txt" 2>&1
echo "mnist: exit $?"; grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/train-mnist.txt" | tail -14
l=$(left 560)
[ "$l" -gt 60 ] && timeout $l python3 bench/train_bench.py --fivefold $F --model mlp --batch 2048 --epochs 3 \
  --modes cuda,direct:2 --peers graph,ddp:2,ddp-graph:2 --ff-args "--backend vendor --microbatch 1024" \
  --mode-args "cuda=--microbatch 2048" --mpiexec "$mpx" --timeout 90 --out "$out/train-mlp.json" > "$out/train-mlp.txt" 2>&1
echo "mlp: exit $?"; grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/train-mlp.txt" | tail -10
el done
