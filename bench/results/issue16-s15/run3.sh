#!/usr/bin/env bash
# Session 15's third GPU call: (1) with the exchange on NCCL symmetric windows (run 2), does
# starting it sooner pay now? Session 14's fc1 gradient blocks and deferred data gradients
# (blocks-windows.patch: its reverted code, af23068^, on this commit) against main, each twice,
# interleaved, on 2 GPUs (and 4 where the machine has them); the digests must be main's. (2)
# MNIST-CNN against PyTorch's strongest two-GPU peer, ddp-graph, in one train_bench invocation.
# Usage: bash bench/results/issue16-s15/run3.sh OUTDIR   (carry .deps, .data, .ff-source-commit)
set -uo pipefail
out=${1:?usage: run3.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export DATA="$PWD/.data/fashion-mnist"
F=build-gpu/fivefold FB=/tmp/bl/build/fivefold mpx="mpiexec --oversubscribe"
t0=$(date +%s)
el() { echo "[+$(( $(date +%s) - t0 )) s] $*"; }
left() { echo $(( t0 + $1 - $(date +%s) )); }
fin() { tar -C "$out" -czf /tmp/run3.tgz . 2>/dev/null; mv /tmp/run3.tgz "$out/../run3.tgz"; }
trap fin EXIT
nvidia-smi -L; cat .ff-source-commit 2>/dev/null
G=$(nvidia-smi -L | grep -c "^GPU")
cfg() { cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" -DFF_SOURCE_COMMIT="$(cat .ff-source-commit 2>/dev/null)$3" > "$out/configure$3.log" 2>&1 &&
  cmake --build "$2" -j 16 --target fivefold > "$out/build$3.log" 2>&1 || { grep -E "error|FAILED" "$out/build$3.log" | head; exit 1; }; }
rm -rf /tmp/bl && mkdir /tmp/bl && tar --exclude=./build-gpu --exclude=./.data --exclude=./.git -cf - . | tar -C /tmp/bl -xf - &&
  (cd /tmp/bl && { git apply "$here/blocks-windows.patch" 2>/dev/null || patch -p1 -s < "$here/blocks-windows.patch"; }) ||
  { echo "patch failed"; exit 1; }
cfg . build-gpu "" & p1=$!
cfg /tmp/bl /tmp/bl/build "+blocks" & p2=$!
wait $p1 && wait $p2 || exit 1
el "built (main and main + blocks)"
summ() { python3 - "$1" "$2" <<'PY'
import json, sys, statistics
name, path = sys.argv[1], sys.argv[2]
try: d = json.load(open(path))
except Exception as e: print(f"{name:24s} no json ({e})"); sys.exit()
spe = d['seconds_per_epoch']; steps = d['steps'] // d['epochs']
ms = statistics.median(spe[1:]) / steps * 1e3
print(f"{name:24s} {ms:8.3f} ms/step  buckets {d.get('buckets')} windows {d.get('nccl_windows')}  loss {d['loss_digest']} w {d['weights_digest']}")
PY
}
mlp() {  # name binary ranks microbatch [env...]
  local name=$1 bin=$2 np=$3 mb=$4
  shift 4
  timeout 60 env "$@" $mpx -n $np $bin train --model mlp --mode direct --batch 2048 --epochs 4 --log-every 0 \
    --data synthetic --seed 1 --backend vendor --microbatch "$mb" --json "$out/$name.json" > "$out/$name.log" 2>&1 ||
    echo "$name: exit $?"
  summ "$name" "$out/$name.json"
}
for k in a b; do
  mlp main2-$k $F 2 1024 X=1
  mlp blocks2-$k $FB 2 1024 X=1
  mlp blocksonly2-$k $FB 2 1024 FF_DEFER_DATA=0
  if [ "$G" -ge 4 ]; then
    mlp main4-$k $F 4 512 X=1
    mlp blocks4-$k $FB 4 512 X=1
    mlp main4-plain-$k $F 4 512 FF_NCCL_WINDOWS=0
  fi
done
el "mnist"
l=$(left 540)
[ "$l" -gt 100 ] && timeout $l python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 3 \
  --modes cuda,direct:2 --peers graph,ddp:2,ddp-graph:2 --mpiexec "$mpx" --timeout 120 --out "$out/train-mnist.json" \
  > "$out/train-mnist.txt" 2>&1
echo "mnist: exit $?"; grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/train-mnist.txt" | tail -16
el done
