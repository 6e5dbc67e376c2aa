#!/usr/bin/env bash
# Session 14's third GPU call (nvidia-h200-x4, else x2: G = the GPUs present): each bucket's
# bottom data gradient deferred past the bucket's fence (its exchange starts while that data
# gradient runs; the all-gather waits for it), on top of run 2's fc1 blocks. Checks on the new
# build: test_gpu_train, train_gpu.sh modes, train_mlp.sh gpu. Timings, "before" (7f8abbf: no
# blocks, no deferral, from .ff-before.tar.gz) against "after" (this tree: both; FF_DEFER_DATA=0:
# blocks only; FF_BUCKET_BLOCKS=0: deferral only) in the same call, each run twice: the full MLP,
# --backend vendor, batch 2048, direct on 2 and G GPUs, cuda on one; then the gated benchmark
# against PyTorch's CUDA graph and DDP in one invocation, as time allows.
# Usage: bash bench/results/issue16-s14/run3.sh OUTDIR
set -uo pipefail
out=${1:?usage: run3.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export DATA="$PWD/.data/fashion-mnist"; [ -d "$DATA" ] || DATA="$PWD/.data-small/fashion-mnist"  # the first 4096 training images
G=$(nvidia-smi -L | grep -c "^GPU")
mpx="mpiexec --oversubscribe"
t0=$(date +%s)
el() { echo "[+$(( $(date +%s) - t0 )) s] $*"; }
left() { echo $(( t0 + $1 - $(date +%s) )); }
fin() { tar -C "$out" -czf /tmp/s14.tgz . 2>/dev/null; mv /tmp/s14.tgz "$out/../run3.tgz"; }
trap fin EXIT
nvidia-smi -L; cat .ff-source-commit 2>/dev/null
mkdir -p /tmp/before && tar -C /tmp/before -xzf .ff-before.tar.gz
cfg() { cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
  -DFF_SOURCE_COMMIT="$3" > "$out/configure-$4.log" 2>&1 && cmake --build "$2" -j 32 --target fivefold $5 > "$out/build-$4.log" 2>&1; }
cfg . build-gpu "$(cat .ff-source-commit 2>/dev/null)" after test_gpu_train & pa=$!
cfg /tmp/before /tmp/build-before "before" before "" & pb=$!
wait $pa || { grep -E "error|FAILED" "$out/build-after.log" | head -30; exit 1; }
wait $pb || { grep -E "error|FAILED" "$out/build-before.log" | head -30; exit 1; }
A=$PWD/build-gpu/fivefold B=/tmp/build-before/fivefold
el built
timeout 120 build-gpu/verify/gpu/test_gpu_train > "$out/test_gpu_train.log" 2>&1
echo "test_gpu_train: exit $?"; grep -E "FAILED|mlp-small|PASSED" "$out/test_gpu_train.log" | head -8
FIVEFOLD=$A MPIEXEC="$mpx" timeout 120 sh verify/gpu/train_gpu.sh modes > "$out/train_gpu_modes.log" 2>&1
echo "train_gpu.sh modes: exit $?"; grep -E "FAIL" "$out/train_gpu_modes.log"; tail -1 "$out/train_gpu_modes.log"
FIVEFOLD=$A MPIEXEC="$mpx" timeout 150 bash verify/train/train_mlp.sh gpu > "$out/train_mlp_gpu.log" 2>&1
echo "train_mlp.sh gpu: exit $?"; tail -2 "$out/train_mlp_gpu.log"
summ() { python3 - "$1" "$2" <<'PY'
import json, sys, statistics
name, path = sys.argv[1], sys.argv[2]
try: d = json.load(open(path))
except Exception as e: print(f"{name:24s} no json ({e})"); sys.exit()
spe = d['seconds_per_epoch']; steps = d['steps'] // d['epochs']
ms = statistics.median(spe[1:]) / steps * 1e3
ph = d.get('phases_ms_per_step', {})
phs = " ".join(f"{k}={v:.2f}" for k, v in ph.items() if k in ('compute', 'exchange', 'step') and isinstance(v, float))
print(f"{name:24s} {ms:8.3f} ms/step  loss {d['loss_digest']} w {d['weights_digest']} buckets {d.get('buckets')} {phs}")
PY
}
mlp() {  # name binary ranks microbatch [VAR=value]
  local name=$1 bin=$2 np=$3 mb=$4 mode=direct launch="$mpx -n $3"
  [ "$(left 420)" -gt 15 ] || { echo "$name: skipped (time)"; return; }
  [ "$np" = 1 ] && mode=cuda launch=""
  env ${5:-X=1} timeout 60 $launch "$bin" train --model mlp --mode $mode --batch 2048 --epochs 4 --log-every 0 --data synthetic \
    --seed 1 --backend vendor --microbatch "$mb" --json "$out/$name.json" > "$out/$name.log" 2>&1 || echo "$name: exit $?"
  summ "$name" "$out/$name.json"
}
el "mlp timings (G = $G)"
for r in a b; do
  mlp after-direct2-$r $A 2 1024
  mlp before-direct2-$r $B 2 1024
  mlp blocksonly-direct2-$r $A 2 1024 FF_DEFER_DATA=0
  mlp deferonly-direct2-$r $A 2 1024 FF_BUCKET_BLOCKS=0
  [ "$G" -ge 4 ] && mlp after-direct4-$r $A 4 512
  [ "$G" -ge 4 ] && mlp before-direct4-$r $B 4 512
  [ "$G" -ge 4 ] && mlp blocksonly-direct4-$r $A 4 512 FF_DEFER_DATA=0
  [ "$G" -ge 4 ] && mlp deferonly-direct4-$r $A 4 512 FF_BUCKET_BLOCKS=0
done
mlp after-cuda-mb1024 $A 1 1024
mlp after-cuda-mb2048 $A 1 2048
el "gated benchmark against PyTorch"
modes="cuda,direct:2" peers="graph,ddp:2"  # --microbatch 1024 suits P <= 2 (direct:4's figure: above)
[ "$G" -ge 4 ] && peers="$peers,ddp:$G"
lb=$(left 570)
[ "$lb" -gt 60 ] && timeout $lb python3 bench/train_bench.py --fivefold $A --model mlp --batch 2048 --epochs 3 --modes "$modes" \
  --peers "$peers" --ff-args "--backend vendor --microbatch 1024" --mpiexec "$mpx" --timeout 90 --out "$out/train-mlp.json" \
  > "$out/train-mlp.txt" 2>&1
echo "bench: exit $?"; grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/train-mlp.txt" | tail -12
el done
