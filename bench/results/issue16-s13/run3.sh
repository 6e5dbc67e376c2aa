#!/usr/bin/env bash
# Session 13's third GPU call (nvidia-h100-x4): a profile of the MLP's step, to see where direct:4
# loses against a quarter of one GPU's step (9.7 ms against 7.4 ms). Nsight Systems traces rank 0 of
# direct:4 (micro-batch 512) and cuda (micro-batch 512) over 2 epochs of 16 steps; profile_summary.py
# sums each kernel class per step (GEMMs, NCCL, the rest), the time the GPU is busy, and how long
# the GEMMs ran while an NCCL kernel ran beside them.
# Usage: bash bench/results/issue16-s13/run3.sh OUTDIR
set -uo pipefail
out=${1:?usage: run3.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
t0=$(date +%s)
el() { echo "[+$(( $(date +%s) - t0 )) s] $*"; }
fin() { tar -C "$out" -czf /tmp/s13.tgz . 2>/dev/null; mv /tmp/s13.tgz "$out/../run3.tgz"; }
trap fin EXIT
nvidia-smi -L; cat .ff-source-commit 2>/dev/null
NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys /usr/local/cuda/nsight-systems*/bin/nsys 2>/dev/null | head -1)
echo "nsys: ${NSYS:-none}"; [ -n "$NSYS" ] && "$NSYS" --version
[ -n "$NSYS" ] || exit 0
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
  -DFF_SOURCE_COMMIT="$(cat .ff-source-commit 2>/dev/null)" > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build build-gpu -j 64 --target fivefold > "$out/build.log" 2>&1 || { grep -E "error|FAILED" "$out/build.log" | head -30; exit 1; }
A=$PWD/build-gpu/fivefold
el built
args="train --model mlp --batch 2048 --epochs 2 --log-every 0 --data synthetic --seed 1 --backend vendor --microbatch 512"
mkdir -p /tmp/prof
timeout 120 mpiexec --oversubscribe -n 4 sh -c "r=\${OMPI_COMM_WORLD_RANK:-\${PMI_RANK:-0}}; if [ \$r = 0 ]; then exec $NSYS profile -q -t cuda,nvtx -o /tmp/prof/direct4 -f true $A $args --mode direct; else exec $A $args --mode direct; fi" > "$out/direct4.log" 2>&1
echo "direct4 profile: exit $?"
timeout 120 "$NSYS" profile -q -t cuda,nvtx -o /tmp/prof/cuda -f true $A $args --mode cuda > "$out/cuda.log" 2>&1
echo "cuda profile: exit $?"
el profiled
for p in direct4 cuda; do
  "$NSYS" stats -q -r cuda_gpu_trace -f csv -o /tmp/prof/$p /tmp/prof/$p.nsys-rep > /dev/null 2>&1
  ls /tmp/prof/ | grep "^$p" | tr '\n' ' '; echo
  f=$(ls /tmp/prof/${p}_cuda_gpu_trace.csv 2>/dev/null | head -1)
  [ -n "$f" ] && gzip -c "$f" > "$out/$p-trace.csv.gz" && python3 "$here/profile_summary.py" "$f" 32 | tee "$out/$p-summary.txt"
done
el done
