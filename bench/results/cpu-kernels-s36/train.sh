#!/usr/bin/env bash
# Session 36: CPU training speed, fivefold before (OLD) and after (NEW) against PyTorch's eager
# training on the same threads (1 for serial, 2 for mpi P=2), mnist-cnn on Fashion-MNIST, 60 steps
# of batch 64 (the peer: the same 60 steps on the first 3840 images). Usage: train.sh OLD NEW [ROUNDS]
set -u
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
    o=$("$old" train --mode serial --steps 60 --batch 64 --log-every 1000 2>&1 | rate)
    n=$("$new" train --mode serial --steps 60 --batch 64 --log-every 1000 2>&1 | rate)
    echo "round $r serial $o $n 1t:$(torch_rate 1)"
    o=$(mpiexec -n 2 "$old" train --mode mpi --steps 60 --batch 64 --log-every 1000 2>&1 | rate)
    n=$(mpiexec -n 2 "$new" train --mode mpi --steps 60 --batch 64 --log-every 1000 2>&1 | rate)
    echo "round $r mpi:2 $o $n 2t:$(torch_rate 2)"
done
