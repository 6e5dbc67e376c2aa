#!/usr/bin/env bash
# Session 15's second GPU call (two GPUs): NCCL symmetric windows for the direct mode's exchange
# (the weights and the exchange buffers from ncclMemAlloc, registered with ncclCommWindowRegister;
# run 1's probe: on windows the exchange took 0.3 % from concurrent SGEMMs instead of 4.5 %).
#   1. correctness: train_mlp.sh gpu (windows on by default, FF_NCCL_WINDOWS=0, FF_NCCL_CTA_POLICY=zero,
#      equal and unequal shares: the same bits as cuda) and train_gpu.sh modes (MNIST-CNN)
#   2. the MLP's step A/B in one call: windows off, windows (NCCL's default CTA policy), windows +
#      zero-CTA (copy engines), each twice, interleaved
#   3. the ddp-graph peer alone (released graph before destroy_process_group), then the MLP against
#      PyTorch (graph, DDP, ddp-graph) in one train_bench invocation
# Usage: bash bench/results/issue16-s15/run2.sh OUTDIR   (carry .deps, .data, .ff-source-commit)
set -uo pipefail
out=${1:?usage: run2.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export DATA="$PWD/.data/fashion-mnist"
b=build-gpu F=build-gpu/fivefold mpx="mpiexec --oversubscribe"
t0=$(date +%s)
el() { echo "[+$(( $(date +%s) - t0 )) s] $*"; }
left() { echo $(( t0 + $1 - $(date +%s) )); }
fin() { tar -C "$out" -czf /tmp/run2.tgz . 2>/dev/null; mv /tmp/run2.tgz "$out/../run2.tgz"; }
trap fin EXIT
nvidia-smi -L; cat .ff-source-commit 2>/dev/null
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
  -DFF_SOURCE_COMMIT="$(cat .ff-source-commit 2>/dev/null)" > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build $b -j 32 --target fivefold > "$out/build.log" 2>&1 || { grep -E "error|FAILED" "$out/build.log" | head -30; exit 1; }
$F --version
el built
FIVEFOLD=$F MPIEXEC="$mpx" timeout 200 bash verify/train/train_mlp.sh gpu > "$out/train_mlp_gpu.log" 2>&1
echo "train_mlp.sh gpu: exit $?"; grep -E "windows|CTA|FAIL" "$out/train_mlp_gpu.log"; tail -1 "$out/train_mlp_gpu.log"
FIVEFOLD=$F MPIEXEC="$mpx" timeout 150 sh verify/gpu/train_gpu.sh modes > "$out/train_gpu_modes.log" 2>&1
echo "train_gpu.sh modes: exit $?"; grep -E "FAIL" "$out/train_gpu_modes.log"; tail -1 "$out/train_gpu_modes.log"
el checked
summ() { python3 - "$1" "$2" <<'PY'
import json, sys, statistics
name, path = sys.argv[1], sys.argv[2]
try: d = json.load(open(path))
except Exception as e: print(f"{name:24s} no json ({e})"); sys.exit()
spe = d['seconds_per_epoch']; steps = d['steps'] // d['epochs']
ms = statistics.median(spe[1:]) / steps * 1e3
print(f"{name:24s} {ms:8.3f} ms/step  windows {d.get('nccl_windows')}  loss {d['loss_digest']} w {d['weights_digest']}")
PY
}
mlp() {  # name ranks microbatch [env...]
  local name=$1 np=$2 mb=$3 mode=direct launch="$mpx -n $2"
  shift 3
  [ "$np" = 1 ] && mode=cuda launch=""
  timeout 60 env "$@" $launch $F train --model mlp --mode $mode --batch 2048 --epochs 4 --log-every 0 --data synthetic \
    --seed 1 --backend vendor --microbatch "$mb" --json "$out/$name.json" > "$out/$name.log" 2>&1 || echo "$name: exit $?"
  summ "$name" "$out/$name.json"
}
el "mlp timings"
mlp cuda-mb2048 1 2048 X=1
for k in a b; do
  mlp direct2-plain-$k 2 1024 FF_NCCL_WINDOWS=0
  mlp direct2-win-$k 2 1024 X=1
  mlp direct2-zero-$k 2 1024 FF_NCCL_CTA_POLICY=zero
done
el "ddp-graph alone"
PY=/opt/torch/.venv/bin/python3; [ -x $PY ] || PY=python3
timeout 100 $PY bench/peer_pytorch.py --task train --model mnist-cnn --device cuda --data "$DATA" --batch 256 --epochs 2 \
  --init fivefold --shuffle fivefold --seed 1 --ddp --graph --nproc 2 > "$out/ddpgraph-mnist.json" 2> "$out/ddpgraph-mnist.err"
echo "ddp-graph mnist b256: exit $?"; tail -c 600 "$out/ddpgraph-mnist.json"; echo; tail -5 "$out/ddpgraph-mnist.err"
l=$(left 580)
[ "$l" -gt 90 ] && timeout $l python3 bench/train_bench.py --fivefold $F --model mlp --batch 2048 --epochs 3 \
  --modes cuda,direct:2 --peers graph,ddp:2,ddp-graph:2 --ff-args "--backend vendor --microbatch 1024" \
  --mode-args "cuda=--microbatch 2048" --mpiexec "$mpx" --timeout 90 --out "$out/train-mlp.json" > "$out/train-mlp.txt" 2>&1
echo "mlp bench: exit $?"; grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/train-mlp.txt" | tail -10
el done
