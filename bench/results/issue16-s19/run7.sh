#!/usr/bin/env bash
# Session 19, GPU call 3 (four GPUs): --overlap auto (the default since this commit) end to end.
#   1. train_mlp.sh gpu (auto never overlaps steps for mlp-small) and gpu_full (the full MLP at
#      P = 3: auto overlaps steps, --overlap on does not, both give cuda's bits)
#   2. train_gpu.sh modes (MNIST-CNN cuda = hybrid = direct, P = 1..4; auto keeps its graphs)
#   3. train_bench: the MLP, cuda / direct:2 / direct:4 with their defaults against PyTorch's graph,
#      DDP:2 and DDP:4 in one invocation
#   4. if time is left: direct:2 (graphs) with --bucket-mb 4 against the default (run 6 found 4 MiB
#      buckets 0.08 ms faster in eager steps), then per-kernel traces of direct:4 auto and on
# Usage: bash bench/results/issue16-s19/run7.sh OUTDIR   (carry .deps, .ff-source-commit; ~9 min)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run7 "${1:?usage: run7.sh OUTDIR}"
F=build-gpu/fivefold mpx="mpiexec --oversubscribe"
dr_build . fivefold ff_kernel_trace || exit 1
el built
for c in gpu gpu_full; do
    FIVEFOLD=$F MPIEXEC="$mpx" timeout 150 bash verify/train/train_mlp.sh $c > "$out/train_mlp_$c.log" 2>&1
    echo "train_mlp.sh $c: exit $?"; grep -E "overlap|FAIL|fewer" "$out/train_mlp_$c.log" | tail -4; tail -1 "$out/train_mlp_$c.log"
    el "train_mlp.sh $c done"
done
FIVEFOLD=$F MPIEXEC="$mpx" timeout 90 sh verify/gpu/train_gpu.sh modes > "$out/train_gpu_modes.log" 2>&1
echo "train_gpu.sh modes: exit $?"; grep -E "FAIL" "$out/train_gpu_modes.log"; tail -1 "$out/train_gpu_modes.log"
el "mlp bench"
peers=graph,ddp:2 modes=cuda,direct:2 four=()
[ "$ngpu" -ge 4 ] && peers=graph,ddp:2,ddp:4 modes=cuda,direct:2,direct:4 four=(--mode-args "direct:4=--microbatch 512")
timeout 200 python3 bench/train_bench.py --fivefold $F --model mlp --batch 2048 --epochs 3 \
    --modes $modes --peers $peers --ff-args "--backend vendor" \
    --mode-args "cuda=--microbatch 2048" --mode-args "direct:2=--microbatch 1024" "${four[@]}" \
    --mpiexec "$mpx" --timeout 90 --out "$out/train-mlp.json" > "$out/train-mlp.txt" 2>&1
echo "mlp bench: exit $?"
grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/train-mlp.txt" | tail -14
el "P=2 buckets"
for i in 1 2; do
    [ "$(dr_left 480)" -gt 30 ] || break
    dr_mlp "d2-on-$i" $F 2
    dr_mlp "d2-on-b4-$i" $F 2 -- --bucket-mb 4
done
[ "$(dr_left 500)" -gt 30 ] && dr_mlp d2-on-b8 $F 2 -- --bucket-mb 8
el traces
if [ "$ngpu" -ge 4 ] && [ "$(dr_left 540)" -gt 30 ]; then
    for ov in auto on; do
        timeout 40 $mpx -n 4 env FF_KERNEL_TRACE="$out/trace-d4-$ov" FF_KERNEL_TRACE_SKIP=2 \
            LD_PRELOAD=build-gpu/libff_kernel_trace.so $F train --mode direct $DR_MLP --epochs 2 --microbatch 512 \
            --overlap $ov > "$out/trace-d4-$ov.log" 2>&1
        f=$(ls "$out"/trace-d4-$ov.*.txt 2>/dev/null | head -1)
        [ -n "$f" ] && { echo "== $ov"; head -14 "$f" | cut -c1-150; }
    done
fi
el done
