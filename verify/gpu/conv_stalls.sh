#!/bin/sh
# ff_conv_tiles --stalls (tools/pc_stalls.c: CUPTI PC sampling) end to end on a GPU: mnist's conv2
# forward and its weight gradient, 5 launches each under sampling. Each must exit 0 and report the
# kernel that ran (the tuner's k_gemm / k_conv_wgrad_part) with samples > 0, whose stall-reason
# lines add up to 90..100.5 % of its samples (lines under 0.5 % are left out), and at least one
# hottest instruction (a SASS offset). Exit 77 (CTest: skipped, never passed) without a GPU.
# Usage: conv_stalls.sh PATH/TO/ff_conv_tiles
tool=${1:?usage: conv_stalls.sh ff_conv_tiles}
T=$(mktemp -d /tmp/ff_conv_stalls.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() {
    echo "FAIL: $*"
    exit 1
}
check() {  # check NAME KERNEL ARGS...: run, then the report's checks for KERNEL
    name=$1 kernel=$2
    shift 2
    "$tool" --iters 5 --stalls "$@" >"$T/$name.txt" 2>&1
    rc=$?
    if [ $rc -ne 0 ] && grep -q "no GPU" "$T/$name.txt"; then
        echo "SKIP: no GPU here ($(tail -1 "$T/$name.txt"))"
        exit 77
    fi
    [ $rc -eq 0 ] || fail "$name: exit $rc: $(tail -3 "$T/$name.txt")"
    awk -v k="$kernel" '
        /^kernel / {
            on = !found && index($0, k) > 0
            if (on && match($0, /: [0-9]+ samples \(/)) { n = substr($0, RSTART + 2, RLENGTH - 12) + 0; found = 1 }
            next
        }
        on && /^  [a-z_]+ +[0-9]+ +[0-9.]+%( +[0-9]+ \([0-9.]+%\))?$/ { share += $3 + 0 }
        on && /^    0x[0-9a-f]+ / { pcs++ }
        END {
            if (!found) { print "no kernel line for " k; exit 1 }
            if (n <= 0) { print k ": no samples"; exit 1 }
            if (share < 90 || share > 100.5) { print k ": stall reasons add up to " share " %"; exit 1 }
            if (pcs < 1) { print k ": no hottest instruction listed"; exit 1 }
            printf "%s: %d samples, reasons %.1f %%, %d instructions listed\n", k, n, share, pcs
        }' "$T/$name.txt" || fail "$name: $(grep -E '^PC sampling|^kernel' "$T/$name.txt" | head -4)"
}
check forward "k_gemm" --layer conv2 --batch 64
check weight-grad "k_conv_wgrad_part" --layer conv2 --batch 64 --weight-grad
echo "PASS ff_conv_tiles --stalls"
