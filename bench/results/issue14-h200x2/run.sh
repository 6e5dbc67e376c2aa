#!/usr/bin/env bash
# Issue 14 on the two-GPU machine (nvidia-h200-x2): build, the GPU tests (hybrid and direct against
# cuda, both splits), NCCL's own send/recv bandwidth, and the benchmarks with their PyTorch peers.
# Usage: bash bench/results/issue14-h200x2/run.sh OUTDIR [tests|bench|all]
set -uo pipefail
out=${1:?usage: run.sh OUTDIR [tests|bench|all]}
what=${2:-all}
mkdir -p "$out/json" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0
b=build-gpu
t0=$(date +%s)
el() { echo "[+$(( $(date +%s) - t0 )) s] $*"; }
nvidia-smi -L; nvidia-smi topo -m 2>/dev/null | head -5
if [ ! -x $b/fivefold ]; then
  cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" -DFF_SOURCE_COMMIT="$(cat .ff-source-commit 2>/dev/null)" > "$out/configure.log" 2>&1 \
    || { tail -30 "$out/configure.log"; exit 1; }
fi
cmake --build $b -j 32 > "$out/build.log" 2>&1 || { grep -E "error|FAILED" "$out/build.log" | head -30; exit 1; }
el built
mpx="mpiexec --oversubscribe"
ngpu=$(nvidia-smi -L | grep -c '^GPU')
modes="direct hybrid"
[ -n "${FF_MODES:-}" ] && modes=$FF_MODES
if [ "$what" != bench ]; then
  el "GPU tests (both GPUs)"
  timeout 330 ctest --test-dir $b -L gpu -j 3 --timeout 300 --output-on-failure ${FF_CTEST_ARGS:-} > "$out/ctest-gpu.log" 2>&1
  grep -E "tests passed|Passed|Failed|Skipped|\*\*\*" "$out/ctest-gpu.log" | tail -80
  [ "$ngpu" -ge 2 ] && el "hybrid on one shared GPU (CUDA_VISIBLE_DEVICES=0)" && CUDA_VISIBLE_DEVICES=0 timeout 200 ctest --test-dir $b -R "gpu_hybrid_.*_P(3|4)|gpu_direct_.*_P2$" -j 3 --timeout 150 \
    --output-on-failure > "$out/ctest-shared.log" 2>&1
  [ "$ngpu" -ge 2 ] && grep -E "tests passed|Passed|Failed|Skipped|\*\*\*" "$out/ctest-shared.log" | tail -30
  el "direct --transport nccl on one GPU with 2 ranks must be refused clearly"
  CUDA_VISIBLE_DEVICES=0 timeout 60 $mpx -n 2 $b/fivefold infer --mode direct --transport nccl --model mnist-cnn --batch 2 2>&1 | grep -v "^ \|^--\|^$" | head -3
  el "transport mpi on a non-CUDA-aware MPI must be refused naming the library"
  timeout 60 $mpx -n 2 $b/fivefold infer --mode direct --transport mpi --model mnist-cnn --batch 2 2>&1 | grep -v "^ \|^--\|^$" | head -3
  for mode in hybrid direct; do
    el "a lost rank ends the job ($mode)"
    FIVEFOLD=$b/fivefold MPIEXEC=mpiexec timeout 200 sh verify/cli/test_mpi_crash.sh $mode > "$out/crash-$mode.log" 2>&1
    echo "exit $?"; grep -E "PASS|FAIL|SKIP" "$out/crash-$mode.log" | head -20
  done
fi
if [ "$what" != tests ]; then
  el "NCCL send/recv reference"
  [ "$ngpu" -ge 2 ] && timeout 120 $mpx -n 2 $b/verify/gpu/ff_nccl_p2p 1 4 16 64 256 2>&1 | tee "$out/nccl-p2p.log" | grep JSON
  for N in 32 256; do
    el "bench alexnet N=$N"
    timeout 200 $b/fivefold bench --model alexnet --mode cuda --batch $N --iters 20 --peer pytorch --json "$out/json" 2>&1 | grep -vE "^\s*$" | tail -6
    for mode in $modes; do
      for split in batch rows; do
        timeout 200 $mpx -n 2 $b/fivefold bench --model alexnet --mode $mode --split $split --batch $N --iters 20 \
          $([ $split = batch ] && [ "$ngpu" -ge 2 ] && echo --peer pytorch) $([ $mode = direct ] && echo "${FF_DIRECT_FLAGS:-}") --json "$out/json" 2>&1 | grep -vE "^\s*$" | tail -7
      done
    done
  done
fi
tar czf "$out/json.tgz" -C "$out" json && rm -rf "$out/json"   # one file: the reply brings back ~10
el done
