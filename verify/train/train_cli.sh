#!/bin/sh
# End-to-end checks of `fivefold train` on a subset of Fashion-MNIST (CTest runs each case):
#   resume    kill after step k (test hook) + --resume = uninterrupted run, by weights and loss
#             digests; a crash inside a checkpoint write keeps the previous checkpoint usable;
#             a resume with another recipe and a corrupted checkpoint are refused (exit 2)
#   accuracy  one epoch on 4000 images reaches the asserted test accuracy
#   mpi       serial = mpi P=1,2,3,4 (mpiexec): identical weights and loss digests; a checkpoint
#             written by 2 ranks and resumed on 3 continues the same trajectory
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
    # (10 %). The same check is run on an untrained model (lr 0) and must fail there.
    acc_of() { sed -n 's/.*test accuracy \([0-9.]*\)%.*/\1/p' "$1" | tail -1; }
    "$F" train --data "$DATA" --train-limit 4000 --batch 32 --microbatch 8 --epochs 1 \
        --test-limit 1000 --log-every 25 > "$T/acc.txt" 2>&1 || { cat "$T/acc.txt"; fail "training"; }
    cat "$T/acc.txt"
    ACC=$(acc_of "$T/acc.txt")
    [ -n "$ACC" ] || fail "no test accuracy printed"
    awk -v a="$ACC" 'BEGIN { exit !(a >= 75.0) }' || fail "test accuracy $ACC% < 75%"
    echo "test accuracy $ACC% >= 75%"
    "$F" train --data "$DATA" --train-limit 32 --batch 32 --epochs 1 --lr 0 \
        --test-limit 1000 --log-every 0 > "$T/lr0.txt" 2>&1 || { cat "$T/lr0.txt"; fail "lr 0 run"; }
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
*)
    fail "unknown case '$CASE' (resume, accuracy, mpi)"
    ;;
esac
echo "PASS: $CASE"
