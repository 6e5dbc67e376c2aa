#!/bin/sh
# tools/kernel_trace.c end to end (CTest: gpu_kernel_trace, label gpu): 40 steps of mlp-small
# training in the cuda mode under the tracer must leave a table with one line per kernel, in
# which the softmax cross-entropy kernel (one launch per step) counts 40 launches and the table's
# GPU time is positive; without FF_KERNEL_TRACE the library writes nothing; a FF_KERNEL_TRACE
# path that cannot be written is reported on stderr and the run still succeeds; a bad
# FF_KERNEL_TRACE_SKIP (not seconds >= 0) is reported, naming it, and makes no table.
# FF_KERNEL_TRACE_TIMELINE=N writes the first N records, in order of their start, each ending at or
# after it starts; in it the linear layers' weight gradients run on a stream of their own (the
# gradient lane) beside the softmax's in eager steps, and on its stream with
# FF_TRAIN_CONCURRENT_BACKWARD=0; a bad
# N is reported, naming it, and makes no table.
# Usage: kernel_trace.sh   (env FIVEFOLD = the binary, TRACE_LIB = libff_kernel_trace.so, PYTHON =
# a python3 for tools/trace_step.py, optional)
# Exit 77 (CTest: skipped, never passed) without a GPU.
set -u
F=${FIVEFOLD:?set FIVEFOLD to the fivefold binary}
L=${TRACE_LIB:?set TRACE_LIB to libff_kernel_trace.so}
T=$(mktemp -d /tmp/ff_kernel_trace.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() {
    echo "FAIL: $*"
    exit 1
}
# A bad FF_KERNEL_TRACE_SKIP is reported, naming it, and no table is made; the program still runs.
# (Checked before CUPTI is asked, so also without a GPU.)
for bad in abc -1 2x nan; do
    FF_KERNEL_TRACE="$T/skip" FF_KERNEL_TRACE_SKIP=$bad LD_PRELOAD="$L" "$F" --version >"$T/log-skip.txt" 2>&1 ||
        fail "FF_KERNEL_TRACE_SKIP=$bad failed the program: exit $?"
    grep -q "kernel_trace: FF_KERNEL_TRACE_SKIP '$bad': expected seconds" "$T/log-skip.txt" ||
        fail "FF_KERNEL_TRACE_SKIP=$bad was not reported: $(cat "$T/log-skip.txt")"
done
[ -z "$(ls "$T" | grep '^skip\.')" ] || fail "a table was written with a bad FF_KERNEL_TRACE_SKIP"
for bad in abc 0 -3 5000000; do
    FF_KERNEL_TRACE="$T/tl" FF_KERNEL_TRACE_TIMELINE=$bad LD_PRELOAD="$L" "$F" --version >"$T/log-tl.txt" 2>&1 ||
        fail "FF_KERNEL_TRACE_TIMELINE=$bad failed the program: exit $?"
    grep -q "kernel_trace: FF_KERNEL_TRACE_TIMELINE '$bad': expected records to keep" "$T/log-tl.txt" ||
        fail "FF_KERNEL_TRACE_TIMELINE=$bad was not reported: $(cat "$T/log-tl.txt")"
done
[ -z "$(ls "$T" | grep '^tl\.')" ] || fail "a table was written with a bad FF_KERNEL_TRACE_TIMELINE"
"$F" infer --model mlp-small --batch 1 --mode cuda >"$T/probe.txt" 2>&1
[ $? -eq 77 ] && { echo "SKIP: no GPU here ($(tail -1 "$T/probe.txt"); the bad FF_KERNEL_TRACE_SKIP checks passed)"; exit 77; }
A="--model mlp-small --mode cuda --train-limit 2560 --test-limit 64 --batch 64 --steps 40 --log-every 0"
FF_KERNEL_TRACE="$T/tr" LD_PRELOAD="$L" "$F" train $A >"$T/run.txt" 2>&1 || { cat "$T/run.txt"; fail "traced run: exit $?"; }
set -- "$T"/tr.*.txt
[ -r "$1" ] || fail "no table written (expected $T/tr.<pid>.txt)"
head -8 "$1"
N=$(awk '/k_softmax_xent/ { print $1 }' "$1")
[ "$N" = 40 ] || fail "k_softmax_xent: '$N' launches in the table, expected 40 (one per step)"
awk 'NR == 1 { if ($5 + 0 <= 0) exit 1 }' "$1" || fail "the table's GPU time is not positive: $(head -1 "$1")"
# The timeline: N records after the header, ordered, each ending at or after its start; the lane.
# lane_streams FILE: "<streams of the linear weight gradients other than the softmax's> <records>"
lane_streams() {
    awk -F'\t' 'NR == 1 { next }
        { n++; if ($1 + 0 < last) bad = 1; last = $1 + 0; if ($2 + 0 < $1 + 0) bad = 1 }
        $7 ~ /^k_softmax_xent/ { sm = $3 } $7 ~ /^k_linear_bwd_weights/ { lw[$3] = 1 }
        END { if (bad) { print "unordered"; exit } k = 0; for (s in lw) if (s != sm) k++; print k, n }' "$1"
}
# (N above the run's records: the first 600 are the tuner's and the first step's, all on one stream)
FF_KERNEL_TRACE="$T/tl" FF_KERNEL_TRACE_TIMELINE=100000 FF_TRAIN_GRAPHS=0 LD_PRELOAD="$L" "$F" train $A >"$T/tl.txt" 2>&1 ||
    fail "timeline run: exit $?"
set -- "$T"/tl.*.timeline.tsv
[ -r "$1" ] || fail "no timeline written (expected $T/tl.<pid>.timeline.tsv)"
NREC=$(awk 'NR == 1 { print $3 }' "${1%.timeline.tsv}.txt")
R=$(lane_streams "$1")
[ "$R" = "1 $NREC" ] ||
    fail "timeline: '$R' (expected '1 $NREC': the weight gradients on one lane beside the softmax's stream, every record of the table in start order)"
# tools/trace_step.py reads it: a step between two softmax launches, with its records
if [ -n "${PYTHON:-}" ]; then
    "$PYTHON" "$(dirname "$0")/../../tools/trace_step.py" "$1" --marker k_softmax_xent >"$T/step.txt" 2>&1 ||
        fail "trace_step.py on the timeline: exit $?: $(cat "$T/step.txt")"
    grep -q "whole ones" "$T/step.txt" && grep -q "k_linear_bwd_weights" "$T/step.txt" ||
        fail "trace_step.py: no step with the weight gradients: $(head -5 "$T/step.txt")"
fi
rm -f "$T"/tl.*
FF_KERNEL_TRACE="$T/tl" FF_KERNEL_TRACE_TIMELINE=600 FF_TRAIN_GRAPHS=0 FF_TRAIN_CONCURRENT_BACKWARD=0 LD_PRELOAD="$L" "$F" train $A \
    >"$T/tl1.txt" 2>&1 || fail "timeline run on one stream: exit $?"
set -- "$T"/tl.*.timeline.tsv
R=$(lane_streams "$1")
[ "$R" = "0 600" ] || fail "timeline on one stream: '$R' (expected '0 600': every weight gradient on the softmax's stream, the first 600 records kept)"
set -- "$T"/tr.*.txt
LD_PRELOAD="$L" "$F" train $A >"$T/plain.txt" 2>&1 || fail "untraced run with the library loaded: exit $?"
[ "$(ls "$T" | grep -c '^tr\.')" = 1 ] || fail "a table was written without FF_KERNEL_TRACE"
FF_KERNEL_TRACE=/nonexistent/dir/tr LD_PRELOAD="$L" "$F" train $A >"$T/bad.txt" 2>&1 ||
    fail "an unwritable FF_KERNEL_TRACE failed the run: exit $?"
grep -q "kernel_trace: cannot write /nonexistent/dir/tr" "$T/bad.txt" || fail "an unwritable path was not reported"
echo "PASS kernel_trace: 40 launches of k_softmax_xent in 40 steps, $(awk 'NR == 1 { print $5 }' "$1") ms of GPU time; the timeline shows the lane"

