#!/bin/sh
# Training in the GPU modes (issue 15), end to end through `fivefold train` on a subset of
# Fashion-MNIST. CTest runs each case (labels gpu, train; mpi where ranks are launched):
#   modes   cuda's loss and weights digests equal hybrid's and direct's (auto transport: CUDA IPC
#           on one GPU, NCCL with a GPU per rank) at P = 1, 2, 3, 4, and direct over CUDA IPC at
#           P = 3, bit for bit: the deterministic micro-batch reduction does not depend on P. A
#           run with another --microbatch (another reduction tree) must differ: the comparison can
#           fail. Graph replays (the default) equal eager steps (FF_TRAIN_GRAPHS=0), the gradient
#           lane (the default) a backward on one stream (FF_TRAIN_CONCURRENT_BACKWARD=0), and, with
#           NCCL, so do the queued exchange's variants (host waits, uncaptured, --overlap steps).
#           The dense pool backward (FF_TRAIN_POOL_SPARSE=0) and only the weight gradient
#           pool-sparse (=1) must give other bits than the default (=2, both gradients pool-sparse:
#           gpu.h), every step's loss within 1e-4 relative of it; =1 gives the same bits in direct
#           P = 2 as in cuda.
#   resume  a cuda run killed after step 5 (test hook) and resumed equals the uninterrupted one;
#           a checkpoint written by hybrid P = 2 after 3 steps, resumed by direct P = 3, too.
#   cpu     cuda against serial: the GPU sums with fma chains where the CPU multiplies then adds
#           (gpu.h), so the bits differ; every step's loss must agree within 1e-4 relative, and
#           the test accuracy after the run within 1 point. A run with another --lr must fall
#           outside that tolerance (the check can fail).
#   oom     a batch whose buffers exceed the GPU's memory (2^20 images: about 150 GB for conv2's
#           output alone) is refused before anything is allocated, exit 1, once: "--batch B needs
#           about X GiB of GPU memory for training (Y GiB free of Z GiB ...): the largest that fits
#           is --batch K"; a batch of 64 (control) trains, and so does the named batch K.
#   tf32x3  --precision tf32x3: cuda = hybrid = direct (P = 2, 3, 4), unlike fp32's bits, every
#           step's loss within 2e-3 relative of fp32's and the accuracy within 1 point.
#   golden  `fivefold verify --mode cuda --model mnist-cnn` passes, including the training
#           golden's step-1 gradient, loss trajectory and final weights computed on the GPU.
# Usage: train_gpu.sh CASE   (env FIVEFOLD = the binary, MPIEXEC = mpiexec [and flags], DATA)
# Exit 77 (CTest: skipped, never passed) without a GPU or without the data set.
set -u
CASE=$1
F=${FIVEFOLD:?set FIVEFOLD to the fivefold binary}
DATA=${DATA:-/usr/share/datasets/fashion-mnist}
MPIEXEC=${MPIEXEC:-mpiexec}
if [ ! -r "$DATA/train-images-idx3-ubyte.gz" ] && [ ! -r "$DATA/train-images-idx3-ubyte" ]; then
    echo "SKIP: no Fashion-MNIST at $DATA (apt-get install dataset-fashion-mnist)"
    exit 77
fi
T=$(mktemp -d /tmp/ff_train_gpu.XXXXXX)
trap 'rm -rf "$T"' EXIT
"$F" infer --model mnist-cnn --batch 1 --mode cuda >"$T/probe.txt" 2>&1
if [ $? -eq 77 ]; then
    echo "SKIP: no GPU here ($(tail -1 "$T/probe.txt"))"
    exit 77
fi
fail() {
    echo "FAIL: $*"
    exit 1
}
digests() { grep -E '^(weights|loss) digest:' "$1" | tr '\n' ' '; }
# run NAME [mpiexec -n P] fivefold train ARGS: output in $T/NAME.txt, the case fails on a non-zero exit
run() {
    name=$1
    shift
    "$@" >"$T/$name.txt" 2>&1 || {
        cat "$T/$name.txt"
        fail "$name: exit $? ($*)"
    }
}
# close FILE_A FILE_B [REL]: every step's loss within REL (1e-4) relative, the last accuracy within 1 point.
close() {
    grep -o 'loss [0-9.eE+-]*' "$1" | awk '{print $2}' >"$T/la"
    grep -o 'loss [0-9.eE+-]*' "$2" | awk '{print $2}' >"$T/lb"
    [ -s "$T/la" ] && [ "$(wc -l <"$T/la")" = "$(wc -l <"$T/lb")" ] || return 1
    paste "$T/la" "$T/lb" | awk -v tol="${3:-1e-4}" '{ d = $1 - $2; if (d < 0) d = -d; r = d / ($2 > 0 ? $2 : 1);
        if (r > worst) worst = r } END { printf "worst relative loss difference %.2e over %d steps", worst, NR;
        exit !(worst <= tol) }' || return 1
    a=$(grep -o 'test accuracy [0-9.]*' "$1" | tail -1 | awk '{print $3}')
    b=$(grep -o 'test accuracy [0-9.]*' "$2" | tail -1 | awk '{print $3}')
    printf ", accuracy %s%% vs %s%%" "$a" "$b"
    awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= 1) }'
}
# 300 images, batch 48 (micro-batches of 8: 6 per step, uneven over 4 ranks), 2 epochs of 7 steps
# (the last one short), cut at 12 steps: crosses the epoch boundary (a new shuffle, an evaluation).
A="--data $DATA --train-limit 300 --batch 48 --microbatch 8 --epochs 2 --steps 12 --test-limit 200 --log-every 1"

case "$CASE" in
modes)
    A0="$A --log-every 0"  # no progress lines: steps run in chunks (several queued per wait)
    run cuda "$F" train --mode cuda $A0
    REF=$(digests "$T/cuda.txt")
    echo "cuda: $REF"
    [ -n "$REF" ] || fail "cuda printed no digests"
    # Steps replayed as CUDA graphs, several queued per wait (the default) against every launch
    # eager and one wait per step (FF_TRAIN_GRAPHS=0): the same kernels, the same bits.
    run eager env FF_TRAIN_GRAPHS=0 "$F" train --mode cuda $A0
    GOT=$(digests "$T/eager.txt")
    echo "cuda, eager steps: $GOT"
    [ "$GOT" = "$REF" ] || fail "eager steps differ from graph replays"
    # The weight gradients on the gradient lane beside the data gradients (the default) against
    # the whole backward on one stream: the same kernels on the same buffers, the same bits.
    run onestream env FF_TRAIN_CONCURRENT_BACKWARD=0 "$F" train --mode cuda $A0
    GOT=$(digests "$T/onestream.txt")
    echo "cuda, backward on one stream: $GOT"
    [ "$GOT" = "$REF" ] || fail "the backward on one stream differs from the gradient lane's"
    for P in 1 2 3 4; do
        for mode in hybrid direct; do
            run "$mode$P" $MPIEXEC -n $P "$F" train --mode $mode $A0
            GOT=$(digests "$T/$mode$P.txt")
            echo "$mode P=$P ($(grep -o 'transport [^,]*' "$T/$mode$P.txt" | head -1)): $GOT"
            [ "$GOT" = "$REF" ] || fail "$mode P=$P differs from cuda"
        done
    done
    # with a GPU per rank, direct P = 2 is NCCL with the exchange queued on the GPU and captured in
    # the step's graph (one launch per step, one host wait per 4 steps); FF_CAPTURE_EXCHANGE=0
    # enqueues it call by call, FF_QUEUED_COMM=0 waits on the host around each collective: the
    # same bits
    if grep -q 'transport nccl' "$T/direct2.txt"; then
        grep -q 'queued on the GPU' "$T/direct2.txt" || fail "direct P=2 over NCCL did not queue its exchange"
        run unqueued env FF_QUEUED_COMM=0 $MPIEXEC -n 2 "$F" train --mode direct $A0
        grep -q 'queued on the GPU' "$T/unqueued.txt" && fail "FF_QUEUED_COMM=0 still queued the exchange"
        echo "direct P=2, FF_QUEUED_COMM=0 (host waits): $(digests "$T/unqueued.txt")"
        [ "$(digests "$T/unqueued.txt")" = "$REF" ] || fail "direct P=2 with host waits differs from cuda"
        run uncaptured env FF_CAPTURE_EXCHANGE=0 $MPIEXEC -n 2 "$F" train --mode direct $A0
        echo "direct P=2, FF_CAPTURE_EXCHANGE=0 (the exchange outside the step's graph): $(digests "$T/uncaptured.txt")"
        [ "$(digests "$T/uncaptured.txt")" = "$REF" ] || fail "direct P=2 with the exchange uncaptured differs from cuda"
        # --overlap steps: each step's exchange left running, the next forward bucket by bucket
        # after each bucket's weights are in (steps eager): the same bits
        run steps $MPIEXEC -n 2 "$F" train --mode direct $A0 --overlap steps
        echo "direct P=2, --overlap steps: $(digests "$T/steps.txt")"
        [ "$(digests "$T/steps.txt")" = "$REF" ] || fail "direct P=2 with --overlap steps differs from cuda"
    else
        echo "direct P=2 did not use NCCL (one GPU): the queued exchange is checked where each rank has a GPU"
    fi
    run ipc3 $MPIEXEC -n 3 "$F" train --mode direct --transport ipc $A0
    GOT=$(digests "$T/ipc3.txt")
    echo "direct P=3 (transport ipc): $GOT"
    [ "$GOT" = "$REF" ] || fail "direct over CUDA IPC, P=3, differs from cuda"
    # The dense kernels in place of the pool-sparse backward (FF_TRAIN_POOL_SPARSE=0): other chains,
    # so other bits (the sparse path ran), every step's loss within 1e-4 relative of the default's.
    run dense env FF_TRAIN_POOL_SPARSE=0 "$F" train --mode cuda $A
    run sparse "$F" train --mode cuda $A
    GOT=$(digests "$T/dense.txt")
    echo "cuda, FF_TRAIN_POOL_SPARSE=0 (dense pool backward): $GOT"
    [ "$GOT" != "$(digests "$T/sparse.txt")" ] || fail "the dense pool backward gave the pool-sparse path's bits"
    msg=$(close "$T/dense.txt" "$T/sparse.txt") || fail "dense and pool-sparse runs disagree: $msg"
    echo "  against the pool-sparse path: $msg"
    # The default is =2 (both gradients pool-sparse): naming it gives its bits.
    run sparse2 env FF_TRAIN_POOL_SPARSE=2 "$F" train --mode cuda $A
    [ "$(digests "$T/sparse2.txt")" = "$(digests "$T/sparse.txt")" ] || fail "FF_TRAIN_POOL_SPARSE=2 is not the default"
    # FF_TRAIN_POOL_SPARSE=1: only the weight gradient pool-sparse (the data gradient on the dense
    # kernels): other bits again, as close, and the same in direct P = 2 as in cuda.
    run sparse1 env FF_TRAIN_POOL_SPARSE=1 "$F" train --mode cuda $A
    GOT=$(digests "$T/sparse1.txt")
    echo "cuda, FF_TRAIN_POOL_SPARSE=1 (the weight gradient pool-sparse): $GOT"
    [ "$GOT" != "$(digests "$T/sparse.txt")" ] || fail "FF_TRAIN_POOL_SPARSE=1 gave the default's bits"
    [ "$GOT" != "$(digests "$T/dense.txt")" ] || fail "FF_TRAIN_POOL_SPARSE=1 gave the dense kernels' bits"
    msg=$(close "$T/sparse1.txt" "$T/sparse.txt") || fail "FF_TRAIN_POOL_SPARSE=1 and the default disagree: $msg"
    echo "  against the default: $msg"
    run sparse1p2 env FF_TRAIN_POOL_SPARSE=1 $MPIEXEC -n 2 "$F" train --mode direct $A
    [ "$(digests "$T/sparse1p2.txt")" = "$GOT" ] || fail "FF_TRAIN_POOL_SPARSE=1: direct P=2 differs from cuda"
    echo "  direct P=2: the same digests"
    run mb4 "$F" train --mode cuda $A0 --microbatch 4
    GOT=$(digests "$T/mb4.txt")
    echo "control, cuda --microbatch 4: $GOT"
    [ "$GOT" != "$REF" ] || fail "another reduction tree gave the same digests: the comparison cannot fail"
    ;;
resume)
    run full "$F" train --mode cuda $A
    REF=$(digests "$T/full.txt")
    echo "uninterrupted: $REF"
    FF_TEST_KILL_AFTER_STEP=5 "$F" train --mode cuda $A --checkpoint-dir "$T/ck" --checkpoint-every 1 \
        >"$T/killed.txt" 2>&1
    rc=$?
    [ $rc -ne 0 ] || fail "the kill hook did not stop the run"
    run resumed "$F" train --mode cuda $A --checkpoint-dir "$T/ck" --resume
    GOT=$(digests "$T/resumed.txt")
    echo "cuda killed after step 5 (exit $rc), resumed: $GOT"
    [ "$GOT" = "$REF" ] || fail "the resumed cuda run differs from the uninterrupted one"
    run p2 $MPIEXEC -n 2 "$F" train --mode hybrid $A --steps 3 --checkpoint-dir "$T/ck2"
    run p3 $MPIEXEC -n 3 "$F" train --mode direct $A --checkpoint-dir "$T/ck2" --resume
    GOT=$(digests "$T/p3.txt")
    echo "hybrid P=2 for 3 steps, resumed by direct P=3: $GOT"
    [ "$GOT" = "$REF" ] || fail "hybrid P=2 checkpoint resumed on direct P=3 differs from cuda"
    ;;
cpu)
    run cuda "$F" train --mode cuda $A
    run serial "$F" train --mode serial $A
    run other "$F" train --mode serial $A --lr 0.0101
    msg=$(close "$T/cuda.txt" "$T/serial.txt") || fail "cuda vs serial: $msg"
    echo "cuda vs serial: $msg"
    [ "$(digests "$T/cuda.txt")" != "$(digests "$T/serial.txt")" ] || echo "note: cuda's digests equal serial's"
    if msg=$(close "$T/other.txt" "$T/serial.txt"); then fail "control (--lr 0.0101) passed the check: $msg"; fi
    echo "control, serial --lr 0.0101 vs serial: outside the tolerance as it must be ($msg)"
    ;;
oom)
    "$F" train --mode cuda --data "$DATA" --train-limit 64 --batch 1048576 --microbatch 1024 --steps 1 \
        --log-every 0 >"$T/oom.txt" 2>&1
    rc=$?
    cat "$T/oom.txt"
    [ $rc -eq 1 ] || fail "oom: exit $rc, expected 1"
    grep -qE "needs about [0-9.]+ GiB of GPU memory for training \([0-9.]+ GiB free of [0-9.]+ GiB.*the largest that fits is --batch [0-9]+" "$T/oom.txt" \
        || fail "oom: the message does not say what is needed, what is free and the largest batch that fits"
    [ "$(grep -c 'GiB of GPU memory' "$T/oom.txt")" -eq 1 ] || fail "oom: the message is not printed exactly once"
    ! grep -q '^epoch\|loss digest' "$T/oom.txt" || fail "oom: a step ran"
    run fits "$F" train --mode cuda --data "$DATA" --train-limit 64 --batch 64 --steps 1 --log-every 0
    grep -q '^weights digest' "$T/fits.txt" || fail "control: no digest"
    # the batch the message names must really fit: its buffers are allocated (one short step runs)
    K=$(sed -n 's/.*the largest that fits is --batch \([0-9]*\).*/\1/p' "$T/oom.txt")
    run largest "$F" train --mode cuda --data "$DATA" --train-limit 64 --batch "$K" --microbatch 1024 --steps 1 \
        --log-every 0
    grep -q '^weights digest' "$T/largest.txt" || fail "the named largest batch $K did not train"
    ;;
tf32x3)
    # --precision tf32x3 (convs on tensor cores, fp32-class): its own bits, equal across cuda,
    # hybrid and direct at P = 2 and 4 and over CUDA IPC at P = 3 (the kernel's bits do not
    # depend on the tile, the batch or the rank); different from fp32's, yet every step's loss
    # within 2e-3 relative of the fp32 run and the accuracy within 1 point (its convs err by up to
    # 2^-20 of sum|w x| where fp32's chains err by about 2^-23: session 23 measured 7.7e-4 over the
    # 13 steps, where cuda and serial in fp32 stay within 1e-4). Controls: another micro-batch
    # differs; --lr 0.012 (+20 %) falls outside the tolerance.
    A0="$A --log-every 0"
    run x3 "$F" train --mode cuda $A0 --precision tf32x3
    REF=$(digests "$T/x3.txt")
    echo "cuda tf32x3: $REF"
    [ -n "$REF" ] || fail "cuda tf32x3 printed no digests"
    for run_ in "hybrid 2" "direct 2" "hybrid 4" "direct 4"; do
        set -- $run_
        run "x3$1$2" $MPIEXEC -n $2 "$F" train --mode $1 $A0 --precision tf32x3
        GOT=$(digests "$T/x3$1$2.txt")
        echo "$1 P=$2 tf32x3: $GOT"
        [ "$GOT" = "$REF" ] || fail "$1 P=$2 with tf32x3 differs from cuda"
    done
    run x3ipc3 $MPIEXEC -n 3 "$F" train --mode direct --transport ipc $A0 --precision tf32x3
    [ "$(digests "$T/x3ipc3.txt")" = "$REF" ] || fail "direct P=3 (ipc) with tf32x3 differs from cuda"
    run x3mb4 "$F" train --mode cuda $A0 --precision tf32x3 --microbatch 4
    [ "$(digests "$T/x3mb4.txt")" != "$REF" ] || fail "control: another micro-batch gave the same digests"
    run fp32 "$F" train --mode cuda $A
    run x3log "$F" train --mode cuda $A --precision tf32x3
    [ "$(digests "$T/fp32.txt")" != "$REF" ] || fail "tf32x3 gave fp32's digests: the tensor-core convs did not run"
    msg=$(close "$T/x3log.txt" "$T/fp32.txt" 2e-3) || fail "tf32x3 vs fp32: $msg"
    echo "tf32x3 vs fp32: $msg"
    run other "$F" train --mode cuda $A --precision tf32x3 --lr 0.012
    if msg=$(close "$T/other.txt" "$T/fp32.txt" 2e-3); then fail "control (--lr 0.012) passed the check: $msg"; fi
    echo "control, tf32x3 --lr 0.012 vs fp32: outside the tolerance as it must be"
    ;;
golden)
    run verify "$F" verify --mode cuda --model mnist-cnn
    grep -E 'mnist-cnn train\[cuda\]' "$T/verify.txt" | head -20
    n=$(grep -cE 'mnist-cnn train\[cuda\]' "$T/verify.txt")
    [ "$n" -ge 10 ] || fail "only $n training rows computed on the GPU"
    grep -E '^[0-9]+ passed, 0 failed' "$T/verify.txt" || fail "verify: $(grep -E '^[0-9]+ passed' "$T/verify.txt")"
    ;;
*)
    fail "unknown case '$CASE' (modes, resume, cpu, oom, golden, tf32x3)"
    ;;
esac
echo "PASS $CASE"
