#!/bin/sh
# `fivefold verify --model mlp-small` (issue 16): the inference golden's rows (digests recorded for
# the cpu class) and the training golden's rows (isolation, synthetic data, step 1, trajectory)
# pass; under mpiexec the training runs on the mpi trainer across the ranks and its step-1, loss and
# final rows carry the same digests as serial's (the trainer's bits do not depend on the rank
# count); a tampered copy of either golden fails.
#   FIVEFOLD=... [MPIEXEC=...] [H5POKE=...] FF_SOURCE_DIR=... sh test_mlp_small_verify.sh serial|mpi P|tamper
set -u
fail() {
    echo "FAIL: $*"
    exit 1
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The serial run: every row passes, inference digests are compared with the recorded ones (=rec),
# and every kind of training row is there.
serial() {
    "$FIVEFOLD" verify --model mlp-small --mode serial >"$tmp/serial" 2>&1
    rc=$?
    [ $rc -eq 0 ] || fail "serial exited $rc: $(tail -n 5 "$tmp/serial")"
    tail -n 1 "$tmp/serial" | grep -Eq '^[1-9][0-9]* passed, 0 failed$' || fail "summary: $(tail -n 1 "$tmp/serial")"
    for row in 'serial fc1\(in=256,out=512,N=32' 'serial softmax\(classes=32' 'serial end-to-end-logits\(fc6' \
        'train weights' 'train iso fc1 dw\(N=8,rows\)' 'train iso relu5 dx' 'train iso softmax-xent' \
        'train data\(synthetic' 'train step1 fc6 b\(B=64,M=8\)' 'train loss trajectory\(K=10,B=64,M=8\)' \
        'train final fc1 w\(B=64,M=8,rows\)'; do
        grep -Eq "^mlp-small $row.* PASS" "$tmp/serial" || fail "no passing row '$row'"
    done
    n=$(grep -Ec '^mlp-small serial (fc|relu|softmax|end-to-end).*=rec ' "$tmp/serial")
    [ "$n" -eq 14 ] || fail "$n inference rows compared with the recorded cpu digests, expected 14"
}

# "case digest" of the step-1, loss and final rows, without the mode tag.
train_digests() {
    sed -nE 's/^mlp-small train(\[[^]]*\])? ((step1|loss|final) [^ ]+( [^ ]+)?) +train-[a-z0-9]+ .* digest=([0-9a-f]{16}).*/\2 \5/p' "$1"
}

case "${1:-}" in
serial)
    serial
    "$FIVEFOLD" verify --model mlp >"$tmp/o" 2>&1
    rc=$?
    [ $rc -eq 2 ] || fail "verify --model mlp exited $rc, expected 2 (no golden for the full model)"
    grep -q "mlp-small" "$tmp/o" || fail "verify --model mlp does not point to mlp-small: $(cat "$tmp/o")"
    ;;
mpi)
    P=$2
    serial
    train_digests "$tmp/serial" >"$tmp/want"
    [ "$(wc -l <"$tmp/want")" -eq 25 ] || fail "$(wc -l <"$tmp/want") step1/loss/final rows in serial, expected 25"
    for split in batch rows; do
        $MPIEXEC -n "$P" "$FIVEFOLD" verify --model mlp-small --mode mpi --split $split >"$tmp/mpi" 2>&1
        rc=$?
        [ $rc -eq 0 ] || fail "mpi P=$P split=$split exited $rc: $(tail -n 5 "$tmp/mpi")"
        tail -n 1 "$tmp/mpi" | grep -Eq '^[1-9][0-9]* passed, 0 failed$' || fail "mpi summary: $(tail -n 1 "$tmp/mpi")"
        grep -q "^mlp-small train\[mpi,P=$P\] final fc6 w" "$tmp/mpi" || fail "no training rows of the mpi trainer"
        n=$(grep -Ec "^mlp-small mpi (fc|relu|softmax|end-to-end).*=rec " "$tmp/mpi")
        [ "$n" -eq 14 ] || fail "mpi P=$P split=$split: $n rows equal to the recorded cpu digests, expected 14"
        train_digests "$tmp/mpi" >"$tmp/got"
        cmp -s "$tmp/want" "$tmp/got" || fail "mpi P=$P split=$split training digests differ from serial: $(diff "$tmp/want" "$tmp/got" | head -n 6)"
    done
    ;;
tamper)
    g="$FF_SOURCE_DIR/golden/data"
    # A flipped bit in a copy of the training golden's stored features: refused unless trusted (not
    # in the manifest); trusted, the data row fails (exit 4).
    cp "$g/train-mlp-small.h5" "$tmp/t.h5"
    "$H5POKE" "$tmp/t.h5" data/features 1000 flip || fail "h5poke"
    "$FIVEFOLD" verify --model mlp-small --filter 'train' --train-golden "$tmp/t.h5" >"$tmp/o" 2>&1
    rc=$?
    [ $rc -eq 2 ] || fail "unlisted training golden exited $rc, expected 2"
    grep -q "not listed" "$tmp/o" || fail "no 'not listed' message: $(cat "$tmp/o")"
    "$FIVEFOLD" verify --model mlp-small --filter 'train' --train-golden "$tmp/t.h5" --trust >"$tmp/o" 2>&1
    rc=$?
    [ $rc -eq 4 ] || fail "flipped feature exited $rc, expected 4"
    grep -Eq '^mlp-small train data\(.* FAIL' "$tmp/o" || fail "data row not FAIL"
    [ "$(grep -c ' FAIL' "$tmp/o")" -eq 1 ] || fail "other rows failed too: $(grep ' FAIL' "$tmp/o")"
    # A wrong isolation gradient: that layer's rows fail.
    cp "$g/train-mlp-small.h5" "$tmp/t2.h5"
    "$H5POKE" "$tmp/t2.h5" isolation/fc2/dy 5 0.5 || fail "h5poke"
    "$FIVEFOLD" verify --model mlp-small --filter 'train' --train-golden "$tmp/t2.h5" --trust >"$tmp/o" 2>&1
    rc=$?
    [ $rc -eq 4 ] || fail "changed dy exited $rc, expected 4"
    grep -Eq '^mlp-small train iso fc2 dx\(N=8\).* FAIL' "$tmp/o" || fail "iso fc2 dx row not FAIL"
    # A flipped bit in a copy of the inference golden: its recorded tensor digest refuses it (exit 2).
    cp "$g/mlp-small.h5" "$tmp/i.h5"
    "$H5POKE" "$tmp/i.h5" layers/fc3/out_f32 7 flip || fail "h5poke"
    "$FIVEFOLD" verify --model mlp-small --golden "$tmp/i.h5" --trust >"$tmp/o" 2>&1
    rc=$?
    [ $rc -eq 2 ] || fail "flipped inference golden exited $rc, expected 2"
    grep -q "layers/fc3/out_f32' has digest" "$tmp/o" || fail "no digest message: $(cat "$tmp/o")"
    # The committed training golden through --train-golden passes (the option itself works).
    "$FIVEFOLD" verify --model mlp-small --filter 'train' --train-golden "$g/train-mlp-small.h5" >/dev/null 2>&1 ||
        fail "the committed training golden through --train-golden failed"
    ;;
*)
    fail "usage: $0 serial|mpi P|tamper"
    ;;
esac
echo "ok"
