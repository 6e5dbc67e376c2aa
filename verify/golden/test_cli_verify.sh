#!/bin/sh
# fivefold verify's exit codes and output shape: 0 when every check passes (the last line is
# "N passed, 0 failed"), 4 when an injected fault makes a check fail, 2 for a refused golden or bad usage.
set -u
fail() { echo "FAIL: $*"; exit 1; }
out=$("$FIVEFOLD" verify --model mnist-cnn); rc=$?
[ $rc -eq 0 ] || fail "clean run exited $rc"
echo "$out" | tail -n 1 | grep -Eq '^[1-9][0-9]* passed, 0 failed$' || fail "last line: $(echo "$out" | tail -n 1)"
echo "$out" | grep -c ' PASS' | grep -Eq '^(1[3-9]|[2-9][0-9])$' || fail "fewer than 13 PASS rows"
echo "$out" | grep -q 'conv2(K=64,R=3,s=1,p=0,N=16,P=1,split=none)' || fail "case string missing"

out=$("$FIVEFOLD" verify --model mnist-cnn --inject-fault relu2); rc=$?
[ $rc -eq 4 ] || fail "--inject-fault relu2 exited $rc, expected 4"
echo "$out" | grep -E 'relu2\(.*FAIL' >/dev/null || fail "relu2 row not FAIL"
echo "$out" | tail -n 1 | grep -Eq '^[0-9]+ passed, [1-9][0-9]* failed$' || fail "summary: $(echo "$out" | tail -n 1)"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$FF_SOURCE_DIR/golden/data/mnist-cnn.h5" "$tmp/unlisted.h5"
"$FIVEFOLD" verify --model mnist-cnn --golden "$tmp/unlisted.h5" >"$tmp/o" 2>&1; rc=$?
[ $rc -eq 2 ] || fail "unlisted golden exited $rc, expected 2"
grep -q "not listed" "$tmp/o" || fail "no 'not listed' message: $(cat "$tmp/o")"
"$FIVEFOLD" verify --model mnist-cnn --golden "$tmp/unlisted.h5" --trust --filter fc --json "$tmp/r.json" >/dev/null; rc=$?
[ $rc -eq 0 ] || fail "--trust exited $rc"
grep -q '"failed": 0' "$tmp/r.json" || fail "json"
"$FIVEFOLD" verify --model mnist-cnn --filter 'nothing-matches-this' >/dev/null 2>&1; rc=$?
[ $rc -eq 2 ] || fail "empty filter exited $rc, expected 2"
"$FIVEFOLD" verify --model mnist-cnn --bogus >/dev/null 2>&1; rc=$?
[ $rc -eq 2 ] || fail "bad option exited $rc, expected 2"
echo "ok"
