#!/usr/bin/env bash
# Session 16's eighth GPU call (two GPUs, the last device seconds): one process with one
# micro-batch a step keeps that row as the reduced gradient. Bits: cuda = hybrid P = 2 on
# mlp-small at --microbatch = --batch (the new train_mlp.sh gpu case, run alone); time: the
# MLP on one GPU at --microbatch 2048, vendor (run 4: 27.80 ms a step before).
# Usage: bash bench/results/issue16-s16/run8.sh OUTDIR   (carry .deps, .ff-source-commit)
set -uo pipefail
out=${1:?usage: run8.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
b=build-gpu F=build-gpu/fivefold mpx="mpiexec --oversubscribe"
fin() { tar -C "$out" -czf /tmp/run8.tgz . 2>/dev/null; mv /tmp/run8.tgz "$out/../run8.tgz"; }
trap fin EXIT
nvidia-smi -L; cat .ff-source-commit 2>/dev/null
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
  -DFF_SOURCE_COMMIT="$(cat .ff-source-commit 2>/dev/null)" > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build $b -j 32 --target fivefold > "$out/build.log" 2>&1 || { grep -E "error|FAILED" "$out/build.log" | head -30; exit 1; }
A="--model mlp-small --train-limit 512 --test-limit 128 --batch 64 --steps 12 --log-every 0 --microbatch 64"
$F train --mode cuda $A > "$out/onemb.txt" 2>&1; echo "cuda: exit $?"
$mpx -n 2 $F train --mode hybrid $A > "$out/onemb2.txt" 2>&1; echo "hybrid P=2: exit $?"
grep -h "digest" "$out/onemb.txt" "$out/onemb2.txt"
timeout 40 $F train --model mlp --mode cuda --batch 2048 --microbatch 2048 --epochs 4 --log-every 0 --data synthetic \
  --seed 1 --backend vendor --json "$out/cuda-mlp.json" > "$out/cuda-mlp.log" 2>&1; echo "cuda mlp: exit $?"
python3 -c 'import json,statistics as s; d=json.load(open("'$out'/cuda-mlp.json")); e=d["seconds_per_epoch"]; print("cuda mlp mb2048: %.3f ms/step, weights digest %s" % (s.median(e[1:]) / (d["steps"] // d["epochs"]) * 1e3, d["weights_digest"]))'
