#!/usr/bin/env bash
# Session 16's second GPU call (one GPU): where MNIST-CNN's training step spends its GPU time, per
# kernel (tools/kernel_trace.c through CUPTI: the machines have no Nsight Systems), for issue 15's
# "say what bounds each configuration": cuda at batch 64 and 256 on the small Fashion-MNIST
# (3 epochs of 100 and 25 steps; the first 2 s left out), and the pieces bench.
# Usage: bash bench/results/issue16-s16/run2.sh OUTDIR   (carry .deps, .data-small, .ff-source-commit)
set -uo pipefail
out=${1:?usage: run2.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export DATA="$PWD/.data-small/fashion-mnist"
b=build-gpu F=build-gpu/fivefold
t0=$(date +%s)
el() { echo "[+$(( $(date +%s) - t0 )) s] $*"; }
fin() { tar -C "$out" -czf /tmp/run2.tgz . 2>/dev/null; mv /tmp/run2.tgz "$out/../run2.tgz"; }
trap fin EXIT
nvidia-smi -L; cat .ff-source-commit 2>/dev/null
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
  -DFF_SOURCE_COMMIT="$(cat .ff-source-commit 2>/dev/null)" > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build $b -j 32 --target fivefold ff_kernel_trace ff_gpu_train_bench > "$out/build.log" 2>&1 || { grep -E "error|FAILED" "$out/build.log" | head -30; exit 1; }
el built
for bs in 64 256; do
  lim=$(( bs * 100 ))
  [ $bs = 256 ] && lim=6400
  timeout 120 env FF_KERNEL_TRACE="$out/trace-b$bs" FF_KERNEL_TRACE_SKIP=2 LD_PRELOAD=$b/libff_kernel_trace.so \
    $F train --model mnist-cnn --mode cuda --data "$DATA" --train-limit $lim --test-limit 1000 --batch $bs --epochs 3 \
    --log-every 0 --seed 1 --json "$out/train-b$bs.json" > "$out/train-b$bs.log" 2>&1
  echo "batch $bs: exit $?"; grep -E "^trained|epoch" "$out/train-b$bs.log" | tail -3
  head -25 "$out"/trace-b$bs.*.txt
  # the same run untraced: the tracer's cost on the step
  timeout 120 $F train --model mnist-cnn --mode cuda --data "$DATA" --train-limit $lim --test-limit 1000 --batch $bs \
    --epochs 3 --log-every 0 --seed 1 --json "$out/plain-b$bs.json" > "$out/plain-b$bs.log" 2>&1
  python3 -c 'import json,sys
for p in sys.argv[1:]:
    d = json.load(open(p)); print(p.split("/")[-1], "s/epoch", d["seconds_per_epoch"], "digest", d["weights_digest"])' \
    "$out/train-b$bs.json" "$out/plain-b$bs.json"
done
el "pieces"
timeout 120 $b/verify/gpu/ff_gpu_train_bench 64 256 > "$out/pieces.txt" 2>&1; echo "pieces: exit $?"; cat "$out/pieces.txt" | tail -20
el done
