#!/usr/bin/env bash
# Session 21, GPU call 1 (four GPUs, or two): the fused exchange on by default, its barrier waits
# abortable (comm_nccl_lsa.cu wait_or_abort, the host's abort word set before ncclCommAbort).
#   1. a lost rank under the fused exchange: test_mpi_crash.sh TASK=train-mlp (mlp-small, one
#      micro-batch per rank, EXPECT_FUSED=1: buckets did fuse) at P = 2 and, with four GPUs, 4:
#      kill -9 and SIGSTOP --comm-timeout 3 of rank 1 must end the job within 10 s naming rank 1
#   2. train_mlp.sh gpu: fused (default) = unfused (FF_FUSED_EXCHANGE=0) = cuda at P = 2..4, a
#      fused checkpoint resumes, and everything it checked before
#   3. TASK=train test_mpi_crash.sh direct (MNIST: the device communicator is set up, nothing fuses)
# Usage: bash bench/results/issue16-s21/run15.sh OUTDIR   (carry .deps, .ff-source-commit; ~6 min)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin "${RUN_NAME:-run15}" "${1:?usage: run15.sh OUTDIR}"   # run19.sh: RUN_NAME=run19
F=build-gpu/fivefold mpx="mpiexec --oversubscribe"
dr_build . fivefold || exit 1
el built
for P in 2 4; do
    [ "$P" -le "$ngpu" ] || continue
    FIVEFOLD=$F MPIEXEC=mpiexec TASK=train-mlp RANKS=$P EXPECT_FUSED=1 timeout 120 sh verify/cli/test_mpi_crash.sh direct \
        > "$out/crash-mlp-P$P.log" 2>&1
    echo "crash train-mlp P=$P: exit $?"; cat "$out/crash-mlp-P$P.log" | cut -c1-400
    el "crash P=$P done"
done
FIVEFOLD=$F MPIEXEC="$mpx" timeout 240 bash verify/train/train_mlp.sh gpu > "$out/train_mlp_gpu.log" 2>&1
echo "train_mlp.sh gpu: exit $?"; grep -E "micro-batch per rank|FAIL" "$out/train_mlp_gpu.log"; tail -1 "$out/train_mlp_gpu.log"
el "train_mlp.sh gpu done"
if [ "$(dr_left 540)" -gt 60 ] && [ -d .data-small/fashion-mnist ]; then
    FIVEFOLD=$F MPIEXEC=mpiexec TASK=train DATA=$PWD/.data-small/fashion-mnist RANKS=2 timeout 60 sh verify/cli/test_mpi_crash.sh direct \
        > "$out/crash-mnist.log" 2>&1
    echo "crash train (mnist) P=2: exit $?"; cut -c1-300 "$out/crash-mnist.log"
fi
el done
