#!/usr/bin/env bash
# For session 18's first GPU call (NOT RUN in session 17: no device time was left). Two GPUs, or
# four where lent.
#   1. the final code against PyTorch in one invocation: train_bench with cuda, direct:2 (and
#      direct:4), PyTorch's graph, DDP:2 (and DDP:4). Session 17's figures after the capped update
#      (run 5) had no PyTorch beside them, and P = 4 was not measured after it.
#   2. x-inplace.patch (timing, and the bits: the weights digest must stay f96a3715 / cb6c94d0 at
#      P = 2): the update writes the weights in place and NCCL's all-gather sends from there,
#      instead of through the separate send slice (480 MB less traffic a step at P = 2). A/B with
#      FF_X_INPLACE=0/1, each twice, interleaved.
# Usage: bash bench/results/issue16-s17/next.sh OUTDIR   (carry .deps, .ff-source-commit)
set -uo pipefail
out=${1:?usage: next.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
b=build-gpu F=build-gpu/fivefold X=/tmp/x/build-gpu/fivefold mpx="mpiexec --oversubscribe"
t0=$(date +%s)
el() { echo "[+$(( $(date +%s) - t0 )) s] $*"; }
left() { echo $(( t0 + $1 - $(date +%s) )); }
fin() { tar -C "$out" -czf /tmp/next.tgz . 2>/dev/null; mv /tmp/next.tgz "$out/../next.tgz"; }
trap fin EXIT
nvidia-smi -L; cat .ff-source-commit 2>/dev/null
ngpu=$(nvidia-smi -L | grep -c "^GPU")
cfg() { cmake -S "$1" -B "$1/$b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" -DFF_SOURCE_COMMIT="$2"; }
mkdir -p /tmp/x && tar --exclude=./build --exclude=./build-gpu -cf - . | tar -C /tmp/x -xf -
(cd /tmp/x && patch -p1 -s < "$here/x-inplace.patch") || { echo "x-inplace.patch does not apply"; exit 1; }
(cfg /tmp/x x-inplace > "$out/configure-x.log" 2>&1 && cmake --build /tmp/x/$b -j 14 --target fivefold \
  > "$out/build-x.log" 2>&1) &
cfg . "$(cat .ff-source-commit 2>/dev/null)" > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build $b -j 16 --target fivefold > "$out/build.log" 2>&1 || { grep -E "error|FAILED" "$out/build.log" | head -30; exit 1; }
wait
$F --version
el built
summ() { python3 - "$1" "$2" <<'PY'
import json, sys, statistics
name, path = sys.argv[1], sys.argv[2]
try: d = json.load(open(path))
except Exception as e: print(f"{name:22s} no json ({e})"); sys.exit()
spe = d['seconds_per_epoch']; steps = d['steps'] // d['epochs']
ms = statistics.median(spe[1:]) / steps * 1e3
print(f"{name:22s} {ms:8.3f} ms/step  loss {d['loss_digest']} w {d['weights_digest']}")
PY
}
A="--model mlp --batch 2048 --epochs 4 --log-every 0 --data synthetic --seed 1 --backend vendor"
dp() {  # name binary ranks [env...]
  local name=$1 bin=$2 np=$3; shift 3
  timeout 60 env X=1 "$@" $mpx -n $np $bin train --mode direct $A --microbatch $((2048 / np)) \
    --json "$out/$name.json" > "$out/$name.log" 2>&1 || echo "$name: exit $?"
  summ "$name" "$out/$name.json"
}
if [ -x $X ]; then
  for k in a b; do
    dp direct2-main-$k $F 2
    dp direct2-inplace-$k $X 2 FF_X_INPLACE=1
    if [ "$ngpu" -ge 4 ]; then
      dp direct4-main-$k $F 4
      dp direct4-inplace-$k $X 4 FF_X_INPLACE=1
    fi
  done
else
  echo "the x-inplace tree did not build"; grep -E "error" "$out/build-x.log" | head
fi
el "mlp bench"
l=$(left 575)
peers=graph,ddp:2 modes=cuda,direct:2 four=()
[ "$ngpu" -ge 4 ] && peers=graph,ddp:2,ddp:4 modes=cuda,direct:2,direct:4 four=(--mode-args "direct:4=--microbatch 512")
[ "$l" -gt 100 ] && timeout $l python3 bench/train_bench.py --fivefold $F --model mlp --batch 2048 --epochs 3 \
  --modes $modes --peers $peers --ff-args "--backend vendor" \
  --mode-args "cuda=--microbatch 2048" --mode-args "direct:2=--microbatch 1024" "${four[@]}" \
  --mpiexec "$mpx" --timeout 90 --out "$out/train-mlp.json" > "$out/train-mlp.txt" 2>&1
echo "mlp bench: exit $?"; grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/train-mlp.txt" | tail -14
el done
