#!/bin/sh
# Builds the libFuzzer partition target with clang (CI's main compiler is gcc) and runs it for a
# fixed number of inputs. Usage: run_fuzz_partition.sh CLANG SOURCE_DIR OUTPUT_BINARY [RUNS]
# Exit 77 (CTest: skipped) when this clang has no libFuzzer runtime.
set -eu
clang=$1 src=$2 bin=$3 runs=${4:-20000}
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n){(void)d;(void)n;return 0;}\n' > "$probe/p.c"
if ! "$clang" -fsanitize=fuzzer "$probe/p.c" -o "$probe/p" 2>/dev/null; then
  echo "fuzz_partition: $clang has no libFuzzer runtime: skipped"
  exit 77
fi
"$clang" -std=c11 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -Wall -Wextra -Werror -ffp-contract=off -D_GNU_SOURCE -I"$src/core/include" \
  "$src/fuzz/fuzz_partition.c" "$src/core/partition.c" "$src/core/model.c" "$src/core/status.c" \
  -o "$bin"
exec "$bin" -runs="$runs" -seed=1 -max_len=256 -print_final_stats=1
