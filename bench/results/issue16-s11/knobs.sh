#!/usr/bin/env bash
# Session 11's last, short GPU call (265 device seconds were left): two questions about the MLP's
# direct:2 step (batch 2048, --microbatch 1024, --backend vendor) that need no code change. (1) Do
# fewer NCCL CTAs (NCCL_MAX_CTAS / NCCL_MAX_NCHANNELS) take less from the backward's GEMMs than
# they cost the exchange? (2) What does NVML monitoring cost the step at P = 2: the same run with
# --monitor on and off, epoch times compared (not only the sampler thread's own time).
# Usage: bash bench/results/issue16-s11/knobs.sh OUTDIR
set -uo pipefail
out=${1:?usage: knobs.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
b=build-gpu F=build-gpu/fivefold
t0=$(date +%s)
el() { echo "[+$(( $(date +%s) - t0 )) s] $*"; }
nvidia-smi -L; cat .ff-source-commit 2>/dev/null
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DBUILD_TESTING=OFF > "$out/configure.log" 2>&1 &&
  cmake --build $b -j 32 --target fivefold > "$out/build.log" 2>&1 || { tail -20 "$out/build.log"; exit 1; }
el built
A="train --model mlp --mode direct --batch 2048 --microbatch 1024 --backend vendor --train-limit 65536 --test-limit 2048 --log-every 0"
run() {  # name env... : one direct:2 run, its summary and phase lines
  local name=$1; shift
  env "$@" timeout 60 mpiexec --oversubscribe -n 2 $F $A --epochs 3 --json "$out/$name.json" > "$out/$name.txt" 2>&1
  echo "$name: exit $? | $(grep -E '^summary' "$out/$name.txt" | sed 's/.*accuracy [^,]*, //') | $(grep -E '^phases' "$out/$name.txt" | sed 's/.*steps): //')"
}
run ctas-default X=1
run ctas-16 NCCL_MAX_CTAS=16 NCCL_MAX_NCHANNELS=16
run ctas-8 NCCL_MAX_CTAS=8 NCCL_MAX_NCHANNELS=8
run ctas-4 NCCL_MAX_CTAS=4 NCCL_MAX_NCHANNELS=4
A="$A --monitor on --monitor-interval 100"
run monitor-on X=1
grep -E "^monitor" "$out/monitor-on.txt"
A="${A% --monitor on --monitor-interval 100}"
run monitor-off X=1
python3 - "$out" <<'PY'
import json, sys
d = sys.argv[1]
for n in ("ctas-default", "ctas-16", "ctas-8", "ctas-4", "monitor-on", "monitor-off"):
    try:
        j = json.load(open(f"{d}/{n}.json"))
        e = j["seconds_per_epoch"][1:]
        print(f"{n:14s} s/epoch (epochs 2..) {', '.join(f'{x:.4f}' for x in e)}  ms/step {1000 * sum(e) / len(e) / 32:.2f}")
    except Exception as ex:
        print(n, "no JSON:", ex)
PY
el done
