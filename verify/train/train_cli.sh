#!/bin/sh
# End-to-end checks of `fivefold train` on a subset of Fashion-MNIST (CTest runs each case):
#   resume    kill after step k (test hook) + --resume = uninterrupted run, by weights and loss
#             digests; a crash inside a checkpoint write keeps the previous checkpoint usable;
#             a resume with another recipe and a corrupted checkpoint are refused (exit 2)
#   accuracy  one epoch on 4000 images reaches the asserted test accuracy
#   mpi       serial = mpi P=1,2,3,4 (mpiexec): identical weights and loss digests; a checkpoint
#             written by 2 ranks and resumed on 3 continues the same trajectory
#   bad_data  a test set of 64x64 images (train set 28x28) and a test label of 200 are refused
#             (exit 2, naming the file), never a heap overflow or a silent miss; --lr inf,
#             --momentum 5 are refused naming the flag
#   run_checks  --epochs 9223372036854775807 --steps 2 is refused (it overflowed and "trained 0
#             steps"); a --checkpoint-dir that is a regular file is refused before any step; a
#             stale checkpoint.h5.tmp.<pid> of a dead process is removed, a live one's kept; a
#             checkpoint of another data set (its step does not fit this run's epochs) is refused
# Usage: train_cli.sh CASE   (env FIVEFOLD = the binary, MPIEXEC = mpiexec, DATA = data folder)
# Exit 77 (CTest: skipped, not passed) when the data set is not installed.
set -u
CASE=$1
F=${FIVEFOLD:?set FIVEFOLD to the fivefold binary}
DATA=${DATA:-/usr/share/datasets/fashion-mnist}
MPIEXEC=${MPIEXEC:-mpiexec}
if [ ! -r "$DATA/train-images-idx3-ubyte.gz" ] && [ ! -r "$DATA/train-images-idx3-ubyte" ]; then
    echo "SKIP: no Fashion-MNIST at $DATA (apt-get install dataset-fashion-mnist)"
    exit 77
fi
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
T=$(mktemp -d /tmp/ff_train_cli.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
digests() { grep -E '^(weights|loss) digest:' "$1" | tr '\n' ' '; }
# IDX files written here (values < 256): idx_images FILE N ROWS COLS (zero pixels),
# idx_labels FILE LABEL...
be32() { printf "\\000\\000\\000\\$(printf %03o "$1")"; }
idx_images() { { printf '\000\000\010\003'; be32 "$2"; be32 "$3"; be32 "$4"; head -c $(($2 * $3 * $4)) /dev/zero; } > "$1"; }
idx_labels() {
    f=$1
    shift
    { printf '\000\000\010\001'; be32 $#; for l; do printf "\\$(printf %03o "$l")"; done; } > "$f"
}
# refused NAME RC PATTERN...: the run whose output is $T/NAME.txt exited 2 (not a crash, not 0) and
# printed every PATTERN (fixed strings).
refused() {
    name=$1
    rc=$2
    shift 2
    [ "$rc" -eq 2 ] || { cat "$T/$name.txt"; fail "$name: exit $rc, expected 2"; }
    for p; do grep -qF -- "$p" "$T/$name.txt" || { cat "$T/$name.txt"; fail "$name: no '$p' in the output"; }; done
    echo "$name: exit 2: $(tail -1 "$T/$name.txt")"
}

case "$CASE" in
resume)
    # 2 epochs of 12 steps (384 images, batch 32), stop after 20: the kill and the resume cross
    # the epoch boundary (new shuffle, test evaluation).
    A="--data $DATA --train-limit 384 --batch 32 --microbatch 8 --epochs 2 --steps 20 --test-limit 200 --log-every 0"
    "$F" train $A > "$T/full.txt" 2>&1 || { cat "$T/full.txt"; fail "uninterrupted run"; }
    REF=$(digests "$T/full.txt")
    echo "uninterrupted: $REF"
    [ -n "$REF" ] || fail "no digests printed"

    FF_TEST_KILL_AFTER_STEP=15 "$F" train $A --checkpoint-dir "$T/ck" --checkpoint-every 4 > "$T/killed.txt" 2>&1
    rc=$?
    [ $rc -eq 137 ] || { cat "$T/killed.txt"; fail "kill hook: exit $rc, expected 137 (SIGKILL)"; }
    "$F" train $A --checkpoint-dir "$T/ck" --checkpoint-every 4 --resume > "$T/resumed.txt" 2>&1 \
        || { cat "$T/resumed.txt"; fail "resume"; }
    grep '^resumed from' "$T/resumed.txt"
    GOT=$(digests "$T/resumed.txt")
    echo "killed at 15 + resumed: $GOT"
    [ "$GOT" = "$REF" ] || fail "resumed run differs from the uninterrupted one"

    # A crash inside a checkpoint write: the previous checkpoint still loads and the run completes.
    "$F" train $A --steps 8 --checkpoint-dir "$T/ck2" > "$T/a.txt" 2>&1 || { cat "$T/a.txt"; fail "8 steps"; }
    FF_TEST_CRASH_IN_CHECKPOINT_WRITE=1 "$F" train $A --checkpoint-dir "$T/ck2" --resume > "$T/b.txt" 2>&1
    rc=$?
    grep -q 'killing the process in the middle of writing' "$T/b.txt" && [ $rc -eq 137 ] \
        || { cat "$T/b.txt"; fail "crash hook: exit $rc"; }
    "$F" train $A --checkpoint-dir "$T/ck2" --resume > "$T/c.txt" 2>&1 || { cat "$T/c.txt"; fail "resume after crash"; }
    grep -q '^resumed from .* step 8,' "$T/c.txt" || { cat "$T/c.txt"; fail "did not resume from step 8"; }
    GOT=$(digests "$T/c.txt")
    echo "crash in write + resumed: $GOT"
    [ "$GOT" = "$REF" ] || fail "run resumed after a crashed write differs"

    # Another recipe cannot continue this checkpoint.
    "$F" train $A --lr 0.02 --checkpoint-dir "$T/ck2" --resume > "$T/d.txt" 2>&1
    rc=$?
    [ $rc -eq 2 ] && grep -q 'lr 0.01' "$T/d.txt" || { cat "$T/d.txt"; fail "different lr accepted (exit $rc)"; }
    # A corrupted checkpoint is refused, never used.
    SIZE=$(wc -c < "$T/ck2/checkpoint.h5")
    OFF=$((SIZE / 2))
    B=$(od -An -tu1 -j $OFF -N1 "$T/ck2/checkpoint.h5" | tr -d ' ')
    printf "\\$(printf %03o $(((B + 1) % 256)))" | dd of="$T/ck2/checkpoint.h5" bs=1 seek=$OFF conv=notrunc 2>/dev/null
    "$F" train $A --checkpoint-dir "$T/ck2" --resume > "$T/e.txt" 2>&1
    rc=$?
    [ $rc -eq 2 ] && grep -q 'refused' "$T/e.txt" || { cat "$T/e.txt"; fail "corrupted checkpoint: exit $rc"; }
    sed -n 's/^/  /p' "$T/e.txt"
    ;;
accuracy)
    # One epoch on the first 4000 training images (125 steps of 32), tested on 1000 test images.
    # Measured: 82.4 % (serial, generator seed 1, this commit). Asserted: >= 75 %, far above chance
    # (10 %). The same check is run on an untrained model (one step at lr 1e-6; lr 0 is refused)
    # and must fail there.
    acc_of() { sed -n 's/.*test accuracy \([0-9.]*\)%.*/\1/p' "$1" | tail -1; }
    "$F" train --data "$DATA" --train-limit 4000 --batch 32 --microbatch 8 --epochs 1 \
        --test-limit 1000 --log-every 25 > "$T/acc.txt" 2>&1 || { cat "$T/acc.txt"; fail "training"; }
    cat "$T/acc.txt"
    ACC=$(acc_of "$T/acc.txt")
    [ -n "$ACC" ] || fail "no test accuracy printed"
    awk -v a="$ACC" 'BEGIN { exit !(a >= 75.0) }' || fail "test accuracy $ACC% < 75%"
    echo "test accuracy $ACC% >= 75%"
    "$F" train --data "$DATA" --train-limit 32 --batch 32 --epochs 1 --lr 1e-6 \
        --test-limit 1000 --log-every 0 > "$T/lr0.txt" 2>&1 || { cat "$T/lr0.txt"; fail "lr 1e-6 run"; }
    ACC0=$(acc_of "$T/lr0.txt")
    awk -v a="$ACC0" 'BEGIN { exit !(a < 75.0) }' || fail "untrained model passes the accuracy check ($ACC0%)"
    echo "negative control: untrained model $ACC0% < 75% (the check can fail)"
    ;;
mpi)
    A="--data $DATA --train-limit 256 --batch 32 --microbatch 4 --steps 4 --test-limit 64 --log-every 1"
    "$F" train $A > "$T/serial.txt" 2>&1 || { cat "$T/serial.txt"; fail "serial"; }
    REF=$(digests "$T/serial.txt")
    echo "serial: $REF"
    for P in 1 2 3 4; do
        $MPIEXEC -n $P "$F" train --mode mpi $A > "$T/mpi$P.txt" 2>&1 || { cat "$T/mpi$P.txt"; fail "mpi P=$P"; }
        GOT=$(digests "$T/mpi$P.txt")
        echo "mpi P=$P: $GOT"
        [ "$GOT" = "$REF" ] || { diff "$T/serial.txt" "$T/mpi$P.txt"; fail "mpi P=$P differs from serial"; }
    done
    # A checkpoint written by 2 ranks, resumed on 3: still the serial trajectory.
    $MPIEXEC -n 2 "$F" train --mode mpi $A --steps 2 --checkpoint-dir "$T/ck" > "$T/p2.txt" 2>&1 \
        || { cat "$T/p2.txt"; fail "mpi P=2, 2 steps"; }
    $MPIEXEC -n 3 "$F" train --mode mpi $A --checkpoint-dir "$T/ck" --resume > "$T/p3.txt" 2>&1 \
        || { cat "$T/p3.txt"; fail "mpi P=3 resume"; }
    GOT=$(digests "$T/p3.txt")
    echo "mpi P=2 for 2 steps, resumed on P=3: $GOT"
    [ "$GOT" = "$REF" ] || fail "P=2 checkpoint resumed on P=3 differs from serial"
    ;;
bad_data)
    for d in d64 dlab; do
        mkdir "$T/$d"
        ln -s "$DATA"/train-images-idx3-ubyte* "$DATA"/train-labels-idx1-ubyte* "$T/$d/"
    done
    idx_images "$T/d64/t10k-images-idx3-ubyte" 4 64 64
    idx_labels "$T/d64/t10k-labels-idx1-ubyte" 1 2 3 4
    idx_images "$T/dlab/t10k-images-idx3-ubyte" 4 28 28
    idx_labels "$T/dlab/t10k-labels-idx1-ubyte" 1 200 3 4
    A="--train-limit 64 --batch 32 --steps 2 --log-every 0"
    # It used to write 64x64 normalised images into 28x28 slots (heap-buffer overflow).
    "$F" train --data "$T/d64" $A > "$T/d64.txt" 2>&1
    refused d64 $? "t10k-images-idx3-ubyte" "64x64" "28x28"
    # It used to count the 200 as one more wrong prediction.
    "$F" train --data "$T/dlab" $A > "$T/dlab.txt" 2>&1
    refused dlab $? "t10k-labels-idx1-ubyte" "label 200"
    ! grep -q 'test accuracy' "$T/dlab.txt" || fail "an accuracy was reported for a test set with label 200"
    # Control: the same folder with valid test labels trains and reports an accuracy.
    idx_labels "$T/dlab/t10k-labels-idx1-ubyte" 1 2 3 4
    "$F" train --data "$T/dlab" $A > "$T/good.txt" 2>&1 || { cat "$T/good.txt"; fail "control run"; }
    grep -q 'test accuracy' "$T/good.txt" || { cat "$T/good.txt"; fail "control: no accuracy"; }
    "$F" train --data "$DATA" $A --lr inf > "$T/lr.txt" 2>&1
    refused lr $? "--lr" "inf"
    "$F" train --data "$DATA" $A --momentum 5 > "$T/mom.txt" 2>&1
    refused mom $? "--momentum" "5"
    ;;
run_checks)
    A="--data $DATA --train-limit 64 --batch 32 --log-every 0 --test-limit 16"
    "$F" train $A --epochs 9223372036854775807 --steps 2 > "$T/epochs.txt" 2>&1
    refused epochs $? "--epochs" "9223372036854775807"
    ! grep -q '^trained' "$T/epochs.txt" || fail "--epochs overflow: trained anyway"
    : > "$T/plain"
    "$F" train $A --steps 2 --checkpoint-dir "$T/plain" > "$T/plain.txt" 2>&1
    refused plain $? "$T/plain" "not a directory"
    ! grep -q 'test accuracy\|^trained' "$T/plain.txt" || fail "a regular-file --checkpoint-dir was found only after training"
    # Stale temporary files: a dead writer's is removed, a live process's (this shell's) is kept.
    mkdir "$T/ck"
    sh -c 'exit 0' &
    DEAD=$!
    wait $DEAD
    : > "$T/ck/checkpoint.h5.tmp.$DEAD"
    : > "$T/ck/checkpoint.h5.tmp.$$"
    "$F" train $A --epochs 2 --steps 3 --checkpoint-dir "$T/ck" > "$T/stale.txt" 2>&1 || { cat "$T/stale.txt"; fail "stale run"; }
    [ ! -e "$T/ck/checkpoint.h5.tmp.$DEAD" ] || fail "stale checkpoint.h5.tmp.$DEAD (dead pid) not removed"
    [ -e "$T/ck/checkpoint.h5.tmp.$$" ] || fail "checkpoint.h5.tmp.$$ of a live process was removed"
    echo "stale temporary file of dead pid $DEAD removed, live pid $$ kept"
    grep -q '(step 3)' "$T/stale.txt" || { cat "$T/stale.txt"; fail "no checkpoint at step 3"; }
    # That checkpoint: step 3 = epoch 1, step 1 of 2 steps per epoch (64 images / batch 32). The
    # same recipe on a folder of 20 training images has 1 step per epoch: step_in_epoch 1 would
    # index past that epoch's data order, and step 3 != 1 x 1 + 1. Refused, before any step.
    mkdir "$T/small"
    ln -s "$DATA"/t10k-* "$T/small/"
    idx_images "$T/small/train-images-idx3-ubyte" 20 28 28
    idx_labels "$T/small/train-labels-idx1-ubyte" 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9
    "$F" train --data "$T/small" --train-limit 64 --batch 32 --log-every 0 --test-limit 16 --epochs 2 \
        --steps 4 --checkpoint-dir "$T/ck" --resume > "$T/small.txt" 2>&1
    refused small $? "step_in_epoch 1" "1 steps per epoch"
    ! grep -q '^trained' "$T/small.txt" || fail "a checkpoint of another data set was continued"
    ;;
*)
    fail "unknown case '$CASE' (resume, accuracy, mpi, bad_data, run_checks)"
    ;;
esac
echo "PASS: $CASE"
