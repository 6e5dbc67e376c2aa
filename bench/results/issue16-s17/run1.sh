#!/usr/bin/env bash
# Session 17's first GPU call (four GPUs if lent, else two): the backward in two passes under
# overlap (device.h ff_device_train_backward_data / _params; train.c exchange_order): every data
# gradient first, then the parameter gradients bucket by bucket from the bottom layer up, each
# bucket exchanged as soon as its gradients are in, so that the step waits for the top layers'
# small bucket, not fc1's 134 MB.
#   1. correctness: test_gpu_train (backward_two_pass_bits: the passes = one pass, own and vendor,
#      with the weights NaN during the parameter pass), train_mlp.sh gpu (every direct run = cuda),
#      train_gpu.sh modes (MNIST-CNN: cuda = hybrid = direct, P = 1..4, queued or not)
#   2. the MLP's step, A/B in one call: this commit (new) against the parent (old, built from the
#      same tree with ab.patch reversed), direct at P = 2 (and P = 4 where four GPUs are here), each
#      twice, interleaved, and cuda at --microbatch 2048, the one-GPU baseline
#   3. time left: the MLP against PyTorch (graph, DDP, ddp-graph) in one train_bench invocation
# Usage: bash bench/results/issue16-s17/run1.sh OUTDIR   (carry .deps, .data-small, .ff-source-commit)
set -uo pipefail
out=${1:?usage: run1.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export DATA="$PWD/.data-small/fashion-mnist"
b=build-gpu F=build-gpu/fivefold OLD=/tmp/old/build-gpu/fivefold mpx="mpiexec --oversubscribe"
t0=$(date +%s)
el() { echo "[+$(( $(date +%s) - t0 )) s] $*"; }
left() { echo $(( t0 + $1 - $(date +%s) )); }
fin() { tar -C "$out" -czf /tmp/run1.tgz . 2>/dev/null; mv /tmp/run1.tgz "$out/../run1.tgz"; }
trap fin EXIT
nvidia-smi -L; cat .ff-source-commit 2>/dev/null
ngpu=$(nvidia-smi -L | grep -c "^GPU")
cfg() { cmake -S "$1" -B "$1/$b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" -DFF_SOURCE_COMMIT="$2"; }
# the parent: the same tree with this change reversed
mkdir -p /tmp/old && tar --exclude=./build --exclude=./build-gpu --exclude=./.data-small -cf - . | tar -C /tmp/old -xf -
(cd /tmp/old && patch -R -p1 -s < "$here/ab.patch") || { echo "ab.patch does not reverse"; exit 1; }
(cfg /tmp/old parent > "$out/configure-old.log" 2>&1 && cmake --build /tmp/old/$b -j 12 --target fivefold \
  > "$out/build-old.log" 2>&1) &
cfg . "$(cat .ff-source-commit 2>/dev/null)" > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build $b -j 20 --target fivefold test_gpu_train > "$out/build.log" 2>&1 || { grep -E "error|FAILED" "$out/build.log" | head -30; exit 1; }
wait
[ -x $OLD ] || { echo "the parent did not build"; tail -20 "$out/build-old.log"; }
$F --version
el built
timeout 120 $b/verify/gpu/test_gpu_train > "$out/test_gpu_train.log" 2>&1
echo "test_gpu_train: exit $?"; grep -E "two passes|mutant \(dz|refused|FAIL|PASSED|FAILED" "$out/test_gpu_train.log" | head -20
FIVEFOLD=$F MPIEXEC="$mpx" timeout 240 bash verify/train/train_mlp.sh gpu > "$out/train_mlp_gpu.log" 2>&1
echo "train_mlp.sh gpu: exit $?"; grep -E "vendor|FAIL" "$out/train_mlp_gpu.log"; tail -1 "$out/train_mlp_gpu.log"
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
mlp() {  # name binary ranks [env...]
  local name=$1 bin=$2 np=$3 mode=direct launch="$mpx -n $3" mb=$((2048 / $3))
  shift 3
  [ "$np" = 1 ] && mode=cuda launch=""
  timeout 60 env "$@" $launch $bin train --model mlp --mode $mode --batch 2048 --epochs 4 --log-every 0 --data synthetic \
    --seed 1 --backend vendor --microbatch "$mb" --json "$out/$name.json" > "$out/$name.log" 2>&1 || echo "$name: exit $?"
  summ "$name" "$out/$name.json"
}
el "mlp timings"
mlp cuda-mb2048 $F 1 X=1
for k in a b; do
  mlp direct2-old-$k $OLD 2 X=1
  mlp direct2-new-$k $F 2 X=1
  if [ "$ngpu" -ge 4 ]; then
    mlp direct4-old-$k $OLD 4 X=1
    mlp direct4-new-$k $F 4 X=1
  fi
done
grep -h "^step" "$out"/direct*-a.log
el "mlp bench"
l=$(left 575)
peers=graph,ddp:2,ddp-graph:2 modes=cuda,direct:2 four=()
[ "$ngpu" -ge 4 ] && peers=graph,ddp:2,ddp:4 modes=cuda,direct:2,direct:4 four=(--mode-args "direct:4=--microbatch 512")
[ "$l" -gt 100 ] && timeout $l python3 bench/train_bench.py --fivefold $F --model mlp --batch 2048 --epochs 3 \
  --modes $modes --peers $peers --ff-args "--backend vendor" \
  --mode-args "cuda=--microbatch 2048" --mode-args "direct:2=--microbatch 1024" "${four[@]}" \
  --mpiexec "$mpx" --timeout 90 --out "$out/train-mlp.json" > "$out/train-mlp.txt" 2>&1
echo "mlp bench: exit $?"; grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/train-mlp.txt" | tail -14
el done
