#!/usr/bin/env bash
# NOT RUN in session 18 (its device time was spent): the next session's first GPU call (two GPUs,
# or four). --overlap steps (the next step's forward bucket by bucket beside the last buckets'
# exchange, steps eager), which run 4 priced at up to 0.2 ms of the two-GPU step (the last bucket's
# exchange, left out: 14.26 against 14.45 ms). In order of what matters most if the time runs out:
#   1. the bits: mlp-small, cuda against direct P = 2 --shares 3,1 and P = 4 --shares 1,2,3,4 with
#      one bucket per layer and --overlap steps (digests equal)
#   2. the MLP at P = 2: --overlap steps against on (default), the digests f96a3715/cb6c94d0
#   3. test_gpu_train (the forward in two ranges of layers equals the one call)
#   4. the MLP at P = 4, steps against on (8b7fd5ce/f714b646)
#   5. train_mlp.sh gpu (its --overlap steps cases among the rest), then train_bench with direct
#      under --overlap steps against PyTorch in one invocation (drop that option from the mode
#      arguments if step 2 shows it slower)
# Usage: bash bench/results/issue16-s18/run5.sh OUTDIR   (carry .deps, .ff-source-commit; 4 GPUs: about 8 min)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run5 "${1:?usage: run5.sh OUTDIR}"
F=build-gpu/fivefold mpx="mpiexec --oversubscribe"
dr_build . fivefold test_gpu_train || exit 1
el built
S="--model mlp-small --batch 256 --microbatch 32 --steps 12 --log-every 0 --data synthetic --seed 3"
dg() { grep -E '^(weights|loss) digest:' "$1" | tr '\n' ' '; }
timeout 30 $F train --mode cuda $S > "$out/small-cuda.txt" 2>&1
echo "small cuda: $(dg "$out/small-cuda.txt")"
timeout 30 $mpx -n 2 $F train --mode direct $S --shares 3,1 --bucket-mb=0.05 --overlap steps --json "$out/small-d2.json" > "$out/small-d2.txt" 2>&1
echo "small direct P=2 --shares 3,1 --overlap steps: $(dg "$out/small-d2.txt") $(grep -o '"overlap_steps": [a-z]*' "$out/small-d2.json")"
[ "$ngpu" -ge 4 ] && { timeout 30 $mpx -n 4 $F train --mode direct $S --shares 1,2,3,4 --bucket-mb=0.05 --overlap steps > "$out/small-d4.txt" 2>&1
    echo "small direct P=4 --shares 1,2,3,4 --overlap steps: $(dg "$out/small-d4.txt")"; }
el "mlp P=2"
dr_mlp direct2-steps $F 2 -- --overlap steps
dr_mlp direct2-on $F 2
el test_gpu_train
timeout 40 build-gpu/verify/gpu/test_gpu_train > "$out/test_gpu_train.log" 2>&1
echo "test_gpu_train: exit $?"; grep -E "\[0, [0-9]+\] \+|FAIL|PASSED|FAILED" "$out/test_gpu_train.log" | head -6
if [ "$ngpu" -ge 4 ]; then
    dr_mlp direct4-steps $F 4 -- --overlap steps
    dr_mlp direct4-on $F 4
fi
el "train_mlp.sh gpu"
FIVEFOLD=$F MPIEXEC="mpiexec --oversubscribe" timeout 150 bash verify/train/train_mlp.sh gpu > "$out/train_mlp_gpu.log" 2>&1
echo "train_mlp.sh gpu: exit $?"; grep -E "steps|FAIL" "$out/train_mlp_gpu.log"; tail -1 "$out/train_mlp_gpu.log"
el "mlp bench"
l=$(dr_left 570)
peers=graph,ddp:2 modes=cuda,direct:2 four=()
[ "$ngpu" -ge 4 ] && peers=graph,ddp:2,ddp:4 modes=cuda,direct:2,direct:4 four=(--mode-args "direct:4=--microbatch 512 --overlap steps")
[ "$l" -gt 100 ] && timeout "$l" python3 bench/train_bench.py --fivefold $F --model mlp --batch 2048 --epochs 3 \
    --modes $modes --peers $peers --ff-args "--backend vendor" \
    --mode-args "cuda=--microbatch 2048" --mode-args "direct:2=--microbatch 1024 --overlap steps" "${four[@]}" \
    --mpiexec "mpiexec --oversubscribe" --timeout 90 --out "$out/train-mlp.json" > "$out/train-mlp.txt" 2>&1
echo "mlp bench: exit $? ($l s were left)"
grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/train-mlp.txt" | tail -14
el done
