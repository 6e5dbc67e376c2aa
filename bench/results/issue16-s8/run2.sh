#!/usr/bin/env bash
# Issue 16, second call on two H200s: the vendor (cuBLAS) training path's tests; the fp32 GEMM
# peak measured on this machine (PyTorch, TF32 off); the gated MLP benchmark at batch 2048 against
# PyTorch eager, graph and DDP on two GPUs (fivefold's own kernels, then --backend vendor); the
# fast all-reduce option's phases; the monitoring plot.
# Usage: bash bench/results/issue16-s8/run2.sh OUTDIR
set -uo pipefail
out=${1:?usage: run2.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
b=build-gpu F=build-gpu/fivefold mpx="mpiexec --oversubscribe"
t0=$(date +%s)
el() { echo "[+$(( $(date +%s) - t0 )) s] $*"; }
cat .ff-source-commit
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
  -DFF_SOURCE_COMMIT="$(cat .ff-source-commit 2>/dev/null)" > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build $b -j 32 > "$out/build.log" 2>&1 || { grep -E "error|FAILED" "$out/build.log" | head -30; exit 1; }
el built
timeout 120 ctest --test-dir $b -R "train_mlp_gpu$" --timeout 110 --output-on-failure > "$out/ctest.log" 2>&1
echo "ctest exit $?"; grep -E "tests passed|^vendor|^cuda|^direct|^hybrid|FAIL" "$out/ctest.log" | head -12
peak=$(python3 - <<'PY'
import torch
torch.backends.cuda.matmul.allow_tf32 = False
a = torch.randn(8192, 8192, device="cuda"); b = torch.randn(8192, 8192, device="cuda")
for _ in range(3): a @ b
torch.cuda.synchronize()
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
s.record()
for _ in range(20): a @ b
e.record(); torch.cuda.synchronize()
print(f"{2 * 8192**3 * 20 / (s.elapsed_time(e) / 1e3) / 1e12:.1f}")
PY
)
echo "fp32 GEMM peak (torch 8192^3, TF32 off): $peak TFLOP/s"
el "mlp, batch 2048: fivefold's own kernels and PyTorch"
timeout 300 python3 bench/train_bench.py --fivefold $F --model mlp --batch 2048 --epochs 3 --modes cuda,direct:2 \
  --peers graph,eager,ddp:2 --mpiexec "$mpx" --timeout 90 --peak-tflops "$peak" --out "$out/train-mlp.json" \
  > "$out/train-mlp.txt" 2>&1
echo "train_bench exit $?"; grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/train-mlp.txt" | tail -14
el "mlp, batch 2048: --backend vendor (cuBLAS)"
timeout 150 python3 bench/train_bench.py --fivefold $F --model mlp --batch 2048 --epochs 3 --modes cuda,direct:2 \
  --peers none --ff-args "--backend vendor" --mpiexec "$mpx" --timeout 90 --peak-tflops "$peak" \
  --out "$out/train-mlp-vendor.json" > "$out/train-mlp-vendor.txt" 2>&1
echo "train_bench exit $?"; grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/train-mlp-vendor.txt" | tail -8
el "phases: direct P=2, vendor, deterministic and all-reduce (64 steps)"
for r in deterministic allreduce; do
  timeout 90 $mpx -n 2 $F train --model mlp --mode direct --batch 2048 --train-limit 131072 --test-limit 2048 \
    --log-every 16 --backend vendor --reduce $r --json "$out/mlp-direct2-vendor-$r.json" > "$out/mlp-direct2-vendor-$r.txt" 2>&1
  echo "$r: exit $?"; grep -E "phases|^summary|monitor:" "$out/mlp-direct2-vendor-$r.txt"
done
timeout 60 $F train --model mlp --mode cuda --batch 2048 --train-limit 131072 --test-limit 2048 --log-every 16 \
  --backend vendor --json "$out/mlp-cuda-vendor.json" > "$out/mlp-cuda-vendor.txt" 2>&1
echo "cuda vendor: exit $?"; grep -E "^summary|monitor:|step 64/64" "$out/mlp-cuda-vendor.txt"
el done
