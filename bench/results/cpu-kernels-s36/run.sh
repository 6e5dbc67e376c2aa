#!/usr/bin/env bash
# Session 36's CPU measurements (this project's 2-core development machine, shared): the CPU
# kernels before (OLD: a build of 4de4946, the tree before the session) and after (NEW), interleaved
# in each round, then `fivefold bench --peer pytorch` (PyTorch measured in the same invocation) and
# CPU training against PyTorch's. Usage: run.sh OLD_FIVEFOLD NEW_FIVEFOLD OUT_DIR [ROUNDS]
set -u
MPIEXEC=${MPIEXEC:-mpiexec}  # the launcher of the MPI the build links (mpiexec.mpich where Open MPI is installed too)
old=$1 new=$2 out=$3 rounds=${4:-3}
mkdir -p "$out"
py=${FF_PYTHON:-/usr/bin/python3}
infer_ms() {  # infer_ms BINARY ARGS...: the median forward time in ms
    "$@" --iters 20 2>&1 | sed -n 's/^time: \([0-9.]*\) ms median.*/\1/p'
}
for r in $(seq 1 "$rounds"); do
    d="$out/round$r"
    mkdir -p "$d"
    {
        echo "# round $r $(date -u +%FT%TZ): config, old ms, new ms (fivefold infer --iters 20, median)"
        for cfg in "alexnet serial 1" "mnist-cnn serial 1" "mnist-cnn serial 16" "mnist-cnn serial 64"; do
            set -- $cfg
            o=$(infer_ms "$old" infer --model "$1" --mode "$2" --batch "$3")
            n=$(infer_ms "$new" infer --model "$1" --mode "$2" --batch "$3")
            echo "$1 $2 N=$3 $o $n"
        done
        for split in batch rows; do
            o=$(infer_ms $MPIEXEC -n 2 "$old" infer --model mnist-cnn --mode mpi --split $split --batch 64)
            n=$(infer_ms $MPIEXEC -n 2 "$new" infer --model mnist-cnn --mode mpi --split $split --batch 64)
            echo "mnist-cnn mpi-$split-P2 N=64 $o $n"
        done
        echo "# training: mnist-cnn, 60 steps of batch 64 from Fashion-MNIST: samples/s old, new, PyTorch 1 thread"
        o=$("$old" train --mode serial --steps 60 --batch 64 --log-every 1000 2>&1 | sed -n 's/^trained .*(\([0-9.]*\) samples\/s).*/\1/p')
        n=$("$new" train --mode serial --steps 60 --batch 64 --log-every 1000 2>&1 | sed -n 's/^trained .*(\([0-9.]*\) samples\/s).*/\1/p')
        t=$("$py" "$(dirname "$0")/../../peer_pytorch.py" --task train --model mnist-cnn --data /usr/share/datasets/fashion-mnist --steps 60 --batch 64 \
            --device cpu --threads 1 --train-limit 3840 --test-limit 100 2>/dev/null |
            "$py" -c 'import json,sys; print("%.1f" % json.loads(sys.stdin.read())["samples_per_s"])')
        echo "train serial B=64 $o $n torch-1t $t"
    } | tee "$d/ab.txt"
    "$new" bench --model alexnet --mode serial --batch 1 --iters 20 --peer pytorch --json "$d/" >"$d/bench.log" 2>&1
    "$new" bench --model mnist-cnn --mode serial --batch 1,16,64 --iters 20 --peer pytorch --json "$d/" >>"$d/bench.log" 2>&1
    for split in batch rows; do
        $MPIEXEC -n 2 "$new" bench --model mnist-cnn --mode mpi --split $split --batch 64 --iters 20 --peer pytorch \
            --json "$d/" >>"$d/bench.log" 2>&1
    done
    grep -E "^(alexnet|mnist-cnn) |speedup" "$d/bench.log"
done
