#!/usr/bin/env bash
# Session 14's fifth GPU call (nvidia-h200-x4): main's code, the MLP's gated benchmark on four GPUs
# in one invocation (--backend vendor, batch 2048, micro-batch 512: one per rank at P = 4): cuda
# and direct:4 against PyTorch's CUDA graph and DDP on 4 GPUs; then the phase split of direct on 2
# and 4 GPUs (--overlap off, FF_QUEUED_COMM=0: compute, then the exchange with host waits).
# Usage: bash bench/results/issue16-s14/run5.sh OUTDIR
set -uo pipefail
out=${1:?usage: run5.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
b=build-gpu F=build-gpu/fivefold mpx="mpiexec --oversubscribe"
G=$(nvidia-smi -L | grep -c "^GPU")
t0=$(date +%s)
el() { echo "[+$(( $(date +%s) - t0 )) s] $*"; }
left() { echo $(( t0 + $1 - $(date +%s) )); }
fin() { tar -C "$out" -czf /tmp/s14.tgz . 2>/dev/null; mv /tmp/s14.tgz "$out/../run5.tgz"; }
trap fin EXIT
nvidia-smi -L; cat .ff-source-commit 2>/dev/null
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
  -DFF_SOURCE_COMMIT="$(cat .ff-source-commit 2>/dev/null)" > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build $b -j 32 --target fivefold > "$out/build.log" 2>&1 || { grep -E "error|FAILED" "$out/build.log" | head -30; exit 1; }
el built
l=$(left 190)
timeout $l python3 bench/train_bench.py --fivefold $F --model mlp --batch 2048 --epochs 3 --modes cuda,direct:$G \
  --peers graph,ddp:$G --ff-args "--backend vendor --microbatch $((2048 / G))" --mpiexec "$mpx" --timeout 90 \
  --out "$out/train-mlp-x$G.json" > "$out/train-mlp-x$G.txt" 2>&1
echo "mlp x$G: exit $?"; grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/train-mlp-x$G.txt" | tail -10
el "phase split"
for P in 2 $G; do
  [ "$(left 250)" -gt 15 ] || break
  FF_QUEUED_COMM=0 timeout 40 $mpx -n $P $F train --model mlp --mode direct --batch 2048 --epochs 3 --log-every 0 \
    --data synthetic --seed 1 --backend vendor --microbatch $((2048 / P)) --overlap off --json "$out/split$P.json" \
    > "$out/split$P.log" 2>&1 || echo "split$P: exit $?"
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[2], {k: round(v, 3) for k, v in d["phases_ms_per_step"].items() if isinstance(v, float)})' \
    "$out/split$P.json" "direct:$P overlap off, host waits:"
done
el done
