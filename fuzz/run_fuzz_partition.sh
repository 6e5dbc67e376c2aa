#!/bin/sh
# Builds the libFuzzer partition target with clang (CI's main compiler is gcc) and runs it for a
# fixed number of inputs. Usage: run_fuzz_partition.sh CLANG SOURCE_DIR OUTPUT_BINARY [RUNS]
# Exit 0: every input passed. Exit 1: a finding (crash, sanitizer report, timeout, out of memory:
# the input is saved next to OUTPUT_BINARY and the command that replays it is printed), or the
# target did not compile. Exit 77 (CTest: skipped) only when this clang has no libFuzzer runtime.
# libFuzzer's own default exit code for a finding is 77 too, which CTest would count as skipped:
# it is set to 1 below, and any 77 from the run is turned into 1 as well.
set -u
clang=$1 src=$2 bin=$3 runs=${4:-20000}
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n){(void)d;(void)n;return 0;}\n' >"$probe/p.c"
if ! "$clang" -fsanitize=fuzzer "$probe/p.c" -o "$probe/p" 2>/dev/null; then
    echo "fuzz_partition: $clang has no libFuzzer runtime: skipped"
    exit 77
fi
if ! "$clang" -std=c11 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    -Wall -Wextra -Werror -ffp-contract=off -D_GNU_SOURCE -I"$src/core/include" \
    "$src/fuzz/fuzz_partition.c" "$src/core/decomp/partition.c" "$src/core/model/model.c" "$src/core/base/status.c" \
    -o "$bin"; then
    echo "fuzz_partition: the target did not compile with $clang (see above)"
    exit 1
fi
# Findings go next to the binary (not into the test's working directory), one file per input.
artifacts="$bin.findings/"
mkdir -p "$artifacts" || exit 1
"$bin" -runs="$runs" -seed=1 -max_len=256 -print_final_stats=1 -error_exitcode=1 -timeout_exitcode=1 \
    -artifact_prefix="$artifacts"
rc=$?
if [ $rc -ne 0 ]; then
    [ $rc -eq 77 ] && rc=1
    echo "fuzz_partition: FAILED (exit $rc): a finding in the partition math."
    for f in "$artifacts"*; do
        [ -f "$f" ] && echo "reproduce: $bin $f"
    done
    exit $rc
fi
exit 0
