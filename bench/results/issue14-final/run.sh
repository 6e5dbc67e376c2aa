#!/usr/bin/env bash
# Issue 14's last GPU call (one H200, or two when nvidia-h200-x2 is lent): build, the direct and
# hybrid GPU tests that changed last (CUDA IPC buffer ids, MPI polling, NCCL where 2 GPUs), the
# crash test, and the benchmarks hybrid vs direct (both splits, P = 2, N = 1, 32, 256) beside cuda.
# Usage: bash bench/results/issue14-final/run.sh OUTDIR
set -uo pipefail
out=${1:?usage: run.sh OUTDIR}
mkdir -p "$out/json" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
b=build-gpu
t0=$(date +%s)
el() { echo "[+$(( $(date +%s) - t0 )) s] $*"; }
nvidia-smi -L
ngpu=$(nvidia-smi -L | grep -c '^GPU')
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
  -DFF_SOURCE_COMMIT="$(cat .ff-source-commit 2>/dev/null)" > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build $b -j 32 > "$out/build.log" 2>&1 || { grep -E "error|FAILED" "$out/build.log" | head -30; exit 1; }
el built
mpx="mpiexec --oversubscribe"
tests="gpu_direct_.*rows|gpu_direct_ipc|gpu_direct_alexnet_batch_P2|gpu_hybrid_alexnet_rows_P2|test_gpu_decomp|halo_fuzz_gpu$"
[ "$ngpu" -ge 2 ] && tests="$tests|gpu_direct_nccl|gpu_direct_.*_P2"
timeout 200 ctest --test-dir $b -R "$tests" -j 3 --timeout 150 --output-on-failure > "$out/ctest-gpu.log" 2>&1
echo "ctest exit $?"; grep -E "tests passed|Passed|Failed|Skipped|\*\*\*" "$out/ctest-gpu.log" | tail -40
grep -B2 -A12 "^FAIL\|error" "$out/ctest-gpu.log" | head -60
el "a stopped rank ends the job (hybrid)"
FIVEFOLD=$b/fivefold MPIEXEC=mpiexec timeout 120 sh verify/cli/test_mpi_crash.sh hybrid > "$out/crash-hybrid.log" 2>&1
echo "exit $?"; grep -E "^PASS  [abc]|^FAIL" -A4 "$out/crash-hybrid.log" | grep -v "^      fivefold: rank" | head -30
[ "$ngpu" -ge 2 ] && { el "NCCL send/recv"; timeout 90 $mpx -n 2 $b/verify/gpu/ff_nccl_p2p 4 16 64 2>&1 | grep JSON | tee "$out/nccl-p2p.jsonl"; }
for N in 1 32 256; do
  el "bench alexnet N=$N"
  timeout 120 $b/fivefold bench --model alexnet --mode cuda --batch $N --iters 20 --json "$out/json" 2>&1 | grep -E "^alexnet|device-resident"
  for mode in hybrid direct; do
    for split in batch rows; do
      timeout 150 $mpx -n 2 $b/fivefold bench --model alexnet --mode $mode --split $split --batch $N --iters 20 \
        $([ $split = batch ] && [ "$ngpu" -ge 2 ] && [ $mode = direct ] && echo --peer pytorch) --json "$out/json" \
        > "$out/bench.tmp" 2>&1 || grep -E "error" "$out/bench.tmp" | head -3
      grep -E "^alexnet|device-resident|phases|peer|against" "$out/bench.tmp"
    done
  done
done
rm -f "$out/bench.tmp"
[ "$ngpu" -ge 2 ] && python3 bench/halo_bandwidth.py --nccl "$out/nccl-p2p.jsonl" "$out"/json/*-rows-*.json
tar czf "$out/json.tgz" -C "$out" json && rm -rf "$out/json"   # one file: the reply brings back ~10
el done
