#!/usr/bin/env bash
# Issue 16, first call on two H200s: build; the GPU tests that changed (synthetic kernel bits,
# the memory check, mlp-small cuda = hybrid = direct with shares, the full mlp against the CPU
# reference, the mlp-small golden in cuda/hybrid/direct); a lost rank under NCCL (named now);
# the full 120 M-parameter MLP at batch 2048 on one GPU and on two (direct, NCCL), with NVML
# monitoring, --shares 3,1 bits, the memory refusal, and the monitoring plot.
# Usage: bash bench/results/issue16-s8/run1.sh OUTDIR
set -uo pipefail
out=${1:?usage: run1.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export DATA="$PWD/.data/fm10k"  # the first 10 000 training images (the carry limit)
b=build-gpu F=build-gpu/fivefold mpx="mpiexec --oversubscribe"
t0=$(date +%s)
el() { echo "[+$(( $(date +%s) - t0 )) s] $*"; }
nvidia-smi -L; cat .ff-source-commit
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
  -DFF_SOURCE_COMMIT="$(cat .ff-source-commit 2>/dev/null)" > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build $b -j 32 > "$out/build.log" 2>&1 || { grep -E "error|FAILED" "$out/build.log" | head -30; exit 1; }
el built
timeout 200 ctest --test-dir $b -R "test_gpu_train|gpu_train_oom|train_mlp_gpu|train_mlp_gpu_full" -j 2 --timeout 180 \
  --output-on-failure > "$out/ctest.log" 2>&1
echo "ctest exit $?"; grep -E "tests passed|Passed|Failed|Skipped" "$out/ctest.log"
grep -E "^(cuda|hybrid|direct|serial|FAIL|  synthetic|largest|oom)" "$out/ctest.log" | head -30
el "mlp-small golden in the GPU modes"
for m in "cuda 1" "hybrid 2" "direct 2"; do set -- $m
  if [ "$2" = 1 ]; then timeout 60 $F verify --model mlp-small --mode $1 > "$out/verify-$1.txt" 2>&1
  else timeout 60 $mpx -n $2 $F verify --model mlp-small --mode $1 > "$out/verify-$1.txt" 2>&1; fi
  echo "verify mlp-small $1 P=$2: exit $? $(grep -E '^[0-9]+ passed' "$out/verify-$1.txt")"
done
el "lost rank while training, direct over NCCL"
FIVEFOLD=$F MPIEXEC=mpiexec RANKS=2 TASK=train timeout 60 sh verify/cli/test_mpi_crash.sh direct > "$out/crash-train-direct.log" 2>&1
echo "exit $?"; grep -E "^PASS|^FAIL" "$out/crash-train-direct.log"
el "full mlp, batch 2048: cuda"
M="--model mlp --batch 2048 --log-every 10 --test-limit 2048"
timeout 120 $F train --mode cuda $M --steps 40 --json "$out/mlp-cuda.json" > "$out/mlp-cuda.txt" 2>&1
echo "exit $?"; grep -vE "^epoch 1/1 step [0-9]+/16 \(total [12]0/" "$out/mlp-cuda.txt" | tail -12
el "full mlp, batch 2048: direct on 2 GPUs (NCCL)"
timeout 120 $mpx -n 2 $F train --mode direct $M --steps 40 --json "$out/mlp-direct2.json" > "$out/mlp-direct2.txt" 2>&1
echo "exit $?"; tail -12 "$out/mlp-direct2.txt"
timeout 120 $mpx -n 2 $F train --mode direct $M --steps 40 --reduce allreduce --json "$out/mlp-direct2-allreduce.json" \
  > "$out/mlp-direct2-allreduce.txt" 2>&1
echo "allreduce exit $?"; grep -E "phases|trained|summary" "$out/mlp-direct2-allreduce.txt"
el "shares 3,1 and the equal split: same bits (6 steps)"
for sh in "" "--shares 3,1"; do
  timeout 90 $mpx -n 2 $F train --mode direct $M --steps 6 --log-every 0 $sh > "$out/mlp-shares.txt" 2>&1
  echo "direct P=2 ${sh:-equal}: exit $? $(grep -E '^(loss|weights) digest' "$out/mlp-shares.txt" | tr '\n' ' ') $(grep phases "$out/mlp-shares.txt")"
done
timeout 60 $F train --mode cuda $M --steps 6 --log-every 0 > "$out/mlp-cuda6.txt" 2>&1
echo "cuda 6 steps: $(grep -E '^(loss|weights) digest' "$out/mlp-cuda6.txt" | tr '\n' ' ')"
el "a batch that does not fit"
timeout 60 $F train --mode cuda --model mlp --batch 1000000 --steps 1 > "$out/mlp-oom.txt" 2>&1
echo "exit $?"; tail -1 "$out/mlp-oom.txt"
python3 bench/plot_train.py "$out/mlp-direct2.json" --out "$out/mlp-direct2.png" 2>&1 | tail -4
el done
