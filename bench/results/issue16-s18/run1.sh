#!/usr/bin/env bash
# Session 18's first GPU call (two GPUs, or four where lent): the own row read in place and the
# in-place update and all-gather (this commit), against its parent built in the same call.
#   1. checks on this commit: test_gpu_train (tree_sgd with an own row: its place NaN, against the
#      cpu device; and the compile-only review commits of session 17), train_mlp.sh gpu (every
#      direct and hybrid run = cuda), train_gpu.sh modes (MNIST-CNN cuda = hybrid = direct)
#   2. the MLP at P = 2 (and 4): parent and this commit, twice each, interleaved; the digests must
#      stay f96a3715/cb6c94d0 (P = 2) and 8b7fd5ce/f714b646 (P = 4)
#   3. NCCL's SM share while the GEMMs run (timing only, this commit): NCCL_MAX_CTAS 8 and 16,
#      NCCL_MAX_P2P_NCHANNELS 8, FF_NCCL_CTA_POLICY=efficiency
#   4. the final code against PyTorch in one invocation (train_bench: cuda, direct:2 [, direct:4],
#      PyTorch's CUDA graph and DDP)
# Usage: bash bench/results/issue16-s18/run1.sh OUTDIR   (carry .deps, .data-small, .ff-source-commit)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run1 "${1:?usage: run1.sh OUTDIR}"
export DATA="$PWD/.data-small/fashion-mnist"
F=build-gpu/fivefold OLD=/tmp/x/build-gpu/fivefold mpx="mpiexec --oversubscribe"
mkdir -p /tmp/x && tar --exclude=./build --exclude=./build-gpu -cf - . | tar -C /tmp/x -xf -
(cd /tmp/x && patch -R -p1 -s < "$here/this.patch") || { echo "this.patch does not reverse"; exit 1; }
dr_build /tmp/x fivefold &
dr_build . fivefold test_gpu_train || exit 1
wait
el built
timeout 90 build-gpu/verify/gpu/test_gpu_train > "$out/test_gpu_train.log" 2>&1
echo "test_gpu_train: exit $?"; grep -E "own row [0-9]|FAIL|PASSED|FAILED" "$out/test_gpu_train.log" | head -12
el "train_mlp.sh gpu"
FIVEFOLD=$F MPIEXEC="$mpx" timeout 120 bash verify/train/train_mlp.sh gpu > "$out/train_mlp_gpu.log" 2>&1
echo "train_mlp.sh gpu: exit $?"; grep -E "vendor|FAIL" "$out/train_mlp_gpu.log"; tail -1 "$out/train_mlp_gpu.log"
el "train_gpu.sh modes"
FIVEFOLD=$F MPIEXEC="$mpx" timeout 90 sh verify/gpu/train_gpu.sh modes > "$out/train_gpu_modes.log" 2>&1
echo "train_gpu.sh modes: exit $?"; grep -E "FAIL" "$out/train_gpu_modes.log"; tail -1 "$out/train_gpu_modes.log"
el "mlp timings"
A="--model mlp --batch 2048 --epochs 4 --log-every 0 --data synthetic --seed 1 --backend vendor"
dp() {  # name binary ranks [env...]
    local name=$1 bin=$2 np=$3
    shift 3
    timeout 60 env X=1 "$@" $mpx -n "$np" "$bin" train --mode direct $A --microbatch $((2048 / np)) \
        --json "$out/$name.json" > "$out/$name.log" 2>&1 || echo "$name: exit $?"
    dr_summ "$name" "$out/$name.json"
}
for k in a b; do
    dp direct2-parent-$k $OLD 2
    dp direct2-this-$k $F 2
    if [ "$ngpu" -ge 4 ]; then
        dp direct4-parent-$k $OLD 4
        dp direct4-this-$k $F 4
    fi
done
dp direct2-maxctas8 $F 2 NCCL_MAX_CTAS=8
dp direct2-maxctas16 $F 2 NCCL_MAX_CTAS=16
dp direct2-p2pch8 $F 2 NCCL_MAX_P2P_NCHANNELS=8
dp direct2-efficiency $F 2 FF_NCCL_CTA_POLICY=efficiency
el "mlp bench"
l=$(dr_left 570)
peers=graph,ddp:2 modes=cuda,direct:2 four=()
[ "$ngpu" -ge 4 ] && peers=graph,ddp:2,ddp:4 modes=cuda,direct:2,direct:4 four=(--mode-args "direct:4=--microbatch 512")
[ "$l" -gt 100 ] && timeout "$l" python3 bench/train_bench.py --fivefold $F --model mlp --batch 2048 --epochs 3 \
    --modes $modes --peers $peers --ff-args "--backend vendor" \
    --mode-args "cuda=--microbatch 2048" --mode-args "direct:2=--microbatch 1024" "${four[@]}" \
    --mpiexec "$mpx" --timeout 90 --out "$out/train-mlp.json" > "$out/train-mlp.txt" 2>&1
echo "mlp bench: exit $? ($l s were left)"
grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/train-mlp.txt" | tail -14
el done
