#!/usr/bin/env bash
# The two-GPU MLP benchmark this session could not run (no two-GPU machine was lent and 313 device
# seconds were left): for nvidia-h200-x2. The fp32 GEMM peak measured on the machine (TF32 off);
# the gated MLP benchmark at batch 2048, fivefold cuda and direct:2 (NCCL) with --backend vendor
# and with fivefold's own kernels, against PyTorch eager, graph and DDP on two GPUs, all in one
# invocation; the phase split (compute, exposed and total exchange, update) of direct P=2 with the
# deterministic tree and with NCCL's all-reduce, overlap on and off; NVML monitoring and its plot.
# First the MLP trainer's GPU checks on two GPUs (train_mlp.sh gpu: NCCL between the ranks).
# Usage: bash bench/results/issue16-s9/x2-bench.sh OUTDIR   (about 8 minutes after the build; a
# call may run 10: X2_BENCH=0 runs only the checks, X2_CHECK=0 only the benchmark, in two calls).
# On nvidia-h200-x4 the same script measures direct:4 against ddp:4 (G = the GPUs present).
set -uo pipefail
out=${1:?usage: x2-bench.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
b=build-gpu F=build-gpu/fivefold mpx="mpiexec --oversubscribe"
G=$(nvidia-smi -L | grep -c "^GPU")  # direct:G and ddp:G over every GPU (x2: 2; x4: 4)
t0=$(date +%s)
el() { echo "[+$(( $(date +%s) - t0 )) s] $*"; }
nvidia-smi -L; cat .ff-source-commit 2>/dev/null
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
  > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build $b -j 32 --target fivefold > "$out/build.log" 2>&1 || { grep -E "error|FAILED" "$out/build.log" | head -30; exit 1; }
el built
if [ "${X2_CHECK:-1}" != 0 ]; then
  el "train_mlp.sh gpu on two GPUs (NCCL between ranks; hybrid with overlapped buckets never ran on a GPU)"
  FIVEFOLD=$F MPIEXEC=mpiexec timeout 200 bash verify/train/train_mlp.sh gpu > "$out/train_mlp_gpu.log" 2>&1
  echo "train_mlp.sh gpu: exit $?"; grep -vE "^\+ " "$out/train_mlp_gpu.log" | tail -12
fi
[ "${X2_BENCH:-1}" != 0 ] || { el done; exit 0; }
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
el "mlp, batch 2048, --backend vendor, against PyTorch eager, graph and DDP"
timeout 240 python3 bench/train_bench.py --fivefold $F --model mlp --batch 2048 --epochs 3 --modes cuda,direct:$G \
  --peers graph,eager,ddp:$G --ff-args "--backend vendor" --mpiexec "$mpx" --timeout 90 --peak-tflops "$peak" \
  --out "$out/train-mlp-vendor.json" > "$out/train-mlp-vendor.txt" 2>&1
echo "exit $?"; grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/train-mlp-vendor.txt" | tail -8
el "mlp, batch 2048, fivefold's own kernels"
timeout 120 python3 bench/train_bench.py --fivefold $F --model mlp --batch 2048 --epochs 3 --modes cuda,direct:$G \
  --peers none --mpiexec "$mpx" --timeout 90 --peak-tflops "$peak" --out "$out/train-mlp-own.json" \
  > "$out/train-mlp-own.txt" 2>&1
echo "exit $?"; grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/train-mlp-own.txt" | tail -5
el "phases, direct P=$G, vendor, 64 steps"
P="--model mlp --mode direct --batch 2048 --train-limit 131072 --test-limit 2048 --log-every 16 --backend vendor"
for v in "deterministic on" "deterministic off" "allreduce on" "allreduce off"; do set -- $v
  timeout 60 $mpx -n $G $F train $P --reduce $1 --overlap $2 --json "$out/phases-$1-$2.json" > "$out/phases-$1-$2.txt" 2>&1
  echo "$1 overlap $2: exit $? $(grep -E '^phases' "$out/phases-$1-$2.txt")"
done
el "monitoring: direct P=$G, 3 epochs"
timeout 60 $mpx -n $G $F train $P --epochs 3 --train-limit 65536 --monitor on --monitor-interval 100 \
  --json "$out/mlp-direct$G-monitor.json" > "$out/mlp-direct$G-monitor.txt" 2>&1
echo "exit $?"; grep -E "^monitor|^summary|^phases" "$out/mlp-direct$G-monitor.txt"
el done
