#!/usr/bin/env bash
# Session 36: CPU training speed, fivefold before (OLD) and after (NEW) against PyTorch's eager
# training on the same number of threads, mnist-cnn on Fashion-MNIST, 60 steps of batch 64 (the
# peer: the same 60 steps on the first 3840 images). The serial trainer computes a step's
# micro-batches on OpenMP threads (every core unless OMP_NUM_THREADS says otherwise), and mpi gives
# each rank its share of the cores: serial:1t (OMP_NUM_THREADS=1) is compared with PyTorch on one
# thread, serial (2 threads here) and mpi:2 (2 ranks of one thread) with PyTorch on two.
# Usage: train.sh OLD NEW [ROUNDS]
set -u
MPIEXEC=${MPIEXEC:-mpiexec}  # the launcher of the MPI the build links (mpiexec.mpich where Open MPI is installed too)
old=$1 new=$2 rounds=${3:-2}
py=${FF_PYTHON:-/usr/bin/python3}
data=/usr/share/datasets/fashion-mnist
rate() { sed -n 's/^trained .*(\([0-9.]*\) samples\/s).*/\1/p'; }
torch_rate() {  # torch_rate THREADS
    "$py" "$(dirname "$0")/../../peer_pytorch.py" --task train --model mnist-cnn --data $data --steps 60 --batch 64 \
        --device cpu --threads "$1" --train-limit 3840 --test-limit 100 2>/dev/null |
        "$py" -c 'import json,sys; print("%.1f" % json.loads(sys.stdin.read())["samples_per_s"])'
}
echo "# samples/s: config old new pytorch-eager"
for r in $(seq 1 "$rounds"); do
    o=$(OMP_NUM_THREADS=1 "$old" train --mode serial --steps 60 --batch 64 --log-every 1000 2>&1 | rate)
    n=$(OMP_NUM_THREADS=1 "$new" train --mode serial --steps 60 --batch 64 --log-every 1000 2>&1 | rate)
    echo "round $r serial:1t $o $n 1t:$(torch_rate 1)"
    o=$("$old" train --mode serial --steps 60 --batch 64 --log-every 1000 2>&1 | rate)
    n=$("$new" train --mode serial --steps 60 --batch 64 --log-every 1000 2>&1 | rate)
    echo "round $r serial:$(nproc)t $o $n $(nproc)t:$(torch_rate "$(nproc)")"
    o=$($MPIEXEC -n 2 "$old" train --mode mpi --steps 60 --batch 64 --log-every 1000 2>&1 | rate)
    n=$($MPIEXEC -n 2 "$new" train --mode mpi --steps 60 --batch 64 --log-every 1000 2>&1 | rate)
    echo "round $r mpi:2 $o $n 2t:$(torch_rate 2)"
done
