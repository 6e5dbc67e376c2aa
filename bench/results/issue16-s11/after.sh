#!/usr/bin/env bash
# Session 11's second GPU call, after the changes that the first call's figures pointed to (a
# tree kernel that reads each row once, the SGD step by slices with the weights all-gathered, a
# one-micro-batch rank sending its row as it is): the GPU checks again (test_gpu_train: the tree
# against the cpu device's for 1..1024 rows, in place and into a buffer; train_gpu.sh modes and
# resume: MNIST-CNN cuda = hybrid = direct at P = 1..4 with NCCL and a checkpoint across modes;
# train_mlp.sh gpu), then the MLP at batch 2048 with one micro-batch per rank (--microbatch 1024
# for direct:2, 512 for direct:4) against PyTorch DDP in the same invocations, and MNIST-CNN's
# two-GPU figures (issue 15). Usage: bash bench/results/issue16-s11/after.sh OUTDIR
set -uo pipefail
out=${1:?usage: after.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export DATA="$PWD/.data/fashion-mnist"
b=build-gpu F=build-gpu/fivefold mpx="mpiexec --oversubscribe"
G=$(nvidia-smi -L | grep -c "^GPU")
t0=$(date +%s)
el() { echo "[+$(( $(date +%s) - t0 )) s] $*"; }
fin() { tar -C "$out" -czf /tmp/s11-after.tgz . 2>/dev/null; mv /tmp/s11-after.tgz "$out/all.tgz"; }  # one file back
nvidia-smi -L; cat .ff-source-commit 2>/dev/null
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
  -DFF_SOURCE_COMMIT="$(cat .ff-source-commit 2>/dev/null)" > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build $b -j 64 --target fivefold test_gpu_train > "$out/build.log" 2>&1 || { grep -E "error|FAILED" "$out/build.log" | head -30; exit 1; }
el built
timeout 90 $b/verify/gpu/test_gpu_train > "$out/test_gpu_train.log" 2>&1
echo "test_gpu_train: exit $?"; grep -E "PASSED|FAILED|tree_reduce 1024" "$out/test_gpu_train.log" | head -5
for c in modes resume; do
  FIVEFOLD=$F MPIEXEC="$mpx" timeout 150 sh verify/gpu/train_gpu.sh $c > "$out/train_gpu_$c.log" 2>&1
  echo "train_gpu.sh $c: exit $?"; tail -3 "$out/train_gpu_$c.log"
done
el "train_mlp.sh gpu"
FIVEFOLD=$F MPIEXEC=mpiexec timeout 200 bash verify/train/train_mlp.sh gpu > "$out/train_mlp_gpu.log" 2>&1
echo "train_mlp.sh gpu: exit $?"; grep -vE "^\+ " "$out/train_mlp_gpu.log" | tail -4
bench() {  # name modes peers ff-args
  timeout 200 python3 bench/train_bench.py --fivefold $F --model mlp --batch 2048 --epochs 3 --modes "$2" \
    --peers "$3" --ff-args "$4" --mpiexec "$mpx" --timeout 90 --out "$out/$1.json" > "$out/$1.txt" 2>&1
  echo "$1: exit $?"; grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/$1.txt" | tail -9
}
el "mlp --microbatch 1024 (one per rank at P=2)"
bench train-mlp-vendor-mb1024 cuda,direct:2 graph,ddp:2 "--backend vendor --microbatch 1024"
if [ "$G" -ge 4 ]; then
  el "mlp --microbatch 512 (one per rank at P=4)"
  bench train-mlp-vendor-mb512 cuda,direct:2,direct:4 ddp:4 "--backend vendor --microbatch 512"
fi
el "mlp, default micro-batch (256)"
bench train-mlp-vendor-mb256 cuda,direct:2 none "--backend vendor"
el "mnist-cnn, batch 64 and 256, direct:2 against DDP (issue 15)"
left=$(( t0 + 565 - $(date +%s) ))
[ "$left" -gt 30 ] && timeout $left python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 3 --modes cuda,direct:2 \
  --peers graph,ddp:2 --mpiexec "$mpx" --timeout 120 --out "$out/train-mnist.json" > "$out/train-mnist.txt" 2>&1
echo "exit $?"; grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/train-mnist.txt" | tail -9
fin
el done
