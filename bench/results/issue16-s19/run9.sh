#!/usr/bin/env bash
# NOT RUN in session 19 (its device time was spent): the next session's first GPU call (four GPUs,
# or two). The commit after run 8 made 2 MiB the direct mode's default bucket; run 8 timed it only
# as --bucket-mb 2, and train_mlp.sh gpu_full's check of the six buckets has not run on a GPU.
#   1. train_mlp.sh gpu_full (the full MLP at P = 3: auto overlaps steps, on does not, six buckets,
#      both equal cuda) and gpu
#   2. train_bench: the MLP with every mode's defaults (direct:2 now in 2 MiB buckets) against
#      PyTorch's graph, DDP:2 and DDP:4 in one invocation; draw it here afterwards with
#      python3 bench/plot_train_bench.py OUTDIR/train-mlp.json
# Usage: bash bench/results/issue16-s19/run9.sh OUTDIR   (carry .deps, .ff-source-commit; ~7 min)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run9 "${1:?usage: run9.sh OUTDIR}"
F=build-gpu/fivefold mpx="mpiexec --oversubscribe"
dr_build . fivefold || exit 1
el built
for c in gpu_full gpu; do
    FIVEFOLD=$F MPIEXEC="$mpx" timeout 150 bash verify/train/train_mlp.sh $c > "$out/train_mlp_$c.log" 2>&1
    echo "train_mlp.sh $c: exit $?"; grep -E "buckets|FAIL|fewer" "$out/train_mlp_$c.log" | tail -3; tail -1 "$out/train_mlp_$c.log"
    el "train_mlp.sh $c done"
done
dr_mlp_bench 200
el done
