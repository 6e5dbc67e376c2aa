#!/usr/bin/env bash
# Session 11's multi-GPU calls (nvidia-h200-x4, else x2: G = the GPUs present). PART=A: build; the
# MLP trainer's GPU checks with a GPU per rank (NCCL between ranks, hybrid with overlapped buckets);
# the fp32 GEMM peak; the gated MLP benchmark at batch 2048, --backend vendor, fivefold cuda,
# direct:2 and direct:G against PyTorch graph, DDP:2 and DDP:G in one invocation, at the default
# micro-batch (256) and at 512. PART=B: fivefold's own kernels; the phase split of direct P=2 and
# P=G (deterministic tree and NCCL all-reduce, overlap on and off); NVML monitoring; error delivery
# under the GPU machine's Open MPI. Usage: PART=A|B bash bench/results/issue16-s11/x4.sh OUTDIR
set -uo pipefail
out=${1:?usage: PART=A|B x4.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
b=build-gpu F=build-gpu/fivefold mpx="mpiexec --oversubscribe"
G=$(nvidia-smi -L | grep -c "^GPU")
t0=$(date +%s)
el() { echo "[+$(( $(date +%s) - t0 )) s] $*"; }
nvidia-smi -L; cat .ff-source-commit 2>/dev/null
if [ ! -x $F ]; then
  cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
    -DFF_SOURCE_COMMIT="$(cat .ff-source-commit 2>/dev/null)" > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
fi
cmake --build $b -j 64 --target fivefold > "$out/build.log" 2>&1 || { grep -E "error|FAILED" "$out/build.log" | head -30; exit 1; }
el built
modes="cuda,direct:2" peers="graph,ddp:2"
[ "$G" -gt 2 ] && modes="$modes,direct:$G" peers="$peers,ddp:$G"
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
if [ "${PART:-A}" = A ]; then
  el "train_mlp.sh gpu, $G GPUs (a GPU per rank up to P=$G: NCCL)"
  FIVEFOLD=$F MPIEXEC=mpiexec timeout 200 bash verify/train/train_mlp.sh gpu > "$out/train_mlp_gpu.log" 2>&1
  echo "train_mlp.sh gpu: exit $?"; grep -vE "^\+ " "$out/train_mlp_gpu.log" | tail -14
  el "mlp, batch 2048, --backend vendor, micro-batch 256 (default): $modes against $peers"
  timeout 260 python3 bench/train_bench.py --fivefold $F --model mlp --batch 2048 --epochs 3 --modes $modes \
    --peers $peers --ff-args "--backend vendor" --mpiexec "$mpx" --timeout 90 --peak-tflops "$peak" \
    --out "$out/train-mlp-vendor.json" > "$out/train-mlp-vendor.txt" 2>&1
  echo "exit $?"; grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/train-mlp-vendor.txt" | tail -10
  el "mlp, batch 2048, --backend vendor --microbatch 512"
  timeout 90 python3 bench/train_bench.py --fivefold $F --model mlp --batch 2048 --epochs 3 --modes $modes \
    --peers none --ff-args "--backend vendor --microbatch 512" --mpiexec "$mpx" --timeout 60 --peak-tflops "$peak" \
    --out "$out/train-mlp-vendor-mb512.json" > "$out/train-mlp-vendor-mb512.txt" 2>&1
  echo "exit $?"; grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/train-mlp-vendor-mb512.txt" | tail -6
  el done; exit 0
fi
el "mlp, batch 2048, fivefold's own kernels"
timeout 120 python3 bench/train_bench.py --fivefold $F --model mlp --batch 2048 --epochs 3 --modes $modes \
  --peers none --mpiexec "$mpx" --timeout 90 --peak-tflops "$peak" --out "$out/train-mlp-own.json" \
  > "$out/train-mlp-own.txt" 2>&1
echo "exit $?"; grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/train-mlp-own.txt" | tail -6
P="--model mlp --mode direct --batch 2048 --train-limit 131072 --test-limit 2048 --log-every 16 --backend vendor"
for n in 2 $G; do
  el "phases, direct P=$n, vendor, 64 steps"
  for v in "deterministic on" "deterministic off" "allreduce on" "allreduce off"; do set -- $v
    timeout 60 $mpx -n $n $F train $P --reduce $1 --overlap $2 --json "$out/phases-p$n-$1-$2.json" > "$out/phases-p$n-$1-$2.txt" 2>&1
    echo "P=$n $1 overlap $2: exit $? $(grep -E '^phases' "$out/phases-p$n-$1-$2.txt")"
  done
  [ "$G" -gt 2 ] || break
done
el "monitoring: direct P=$G, 3 epochs"
timeout 60 $mpx -n $G $F train $P --epochs 3 --train-limit 65536 --monitor on --monitor-interval 100 \
  --json "$out/mlp-direct$G-monitor.json" > "$out/mlp-direct$G-monitor.txt" 2>&1
echo "exit $?"; grep -E "^monitor|^summary|^phases" "$out/mlp-direct$G-monitor.txt"
el "error delivery under this machine's Open MPI (rank failures exit instead of MPI_Abort)"
FIVEFOLD=$F MPIEXEC=mpiexec RUNS=3 timeout 150 sh verify/cli/test_mpi_errors.sh > "$out/mpi_errors.log" 2>&1
echo "test_mpi_errors: exit $?"; tail -3 "$out/mpi_errors.log"
el done
