#!/bin/sh
# NVIDIA's compute-sanitizer over GPU unit tests (ci/gpu's gpu-sanitizer step): the device-side
# counterpart of the CPU's ASan/UBSan job. Each tool runs each test binary once with the cmocka
# tests FF_SANITIZE_TESTS names, and any report fails the run (--error-exitcode 1):
#   memcheck   out-of-bounds and misaligned device accesses, errors of CUDA API calls
#   racecheck  shared-memory hazards between the threads of a block (a write racing a read: the
#              staging buffers the training kernels reuse between chunks)
#   synccheck  barriers (__syncthreads, __syncwarp) that some threads of a block or warp miss
# FF_SANITIZE_TESTS: "BINARY:GLOB ..." (default: test_gpu_train's pool-sparse kernels and the
# backward of a whole step through the device interface); FF_SANITIZE_TOOLS: the tools (default
# "memcheck racecheck synccheck"); FF_COMPUTE_SANITIZER: the tool's path.
# Usage: sanitize.sh BUILD_DIR. Exit 77 (skipped, not passed) without compute-sanitizer or a GPU;
# 1 if any tool reported anything or a test failed; 2 for a tool or test entry it does not know.
set -u
set -f  # (the globs in FF_SANITIZE_TESTS are for cmocka, not the shell)
build=${1:?usage: sanitize.sh BUILD_DIR}
tests=${FF_SANITIZE_TESTS:-"test_gpu_train:*pool_sparse* test_gpu_train:*backward_reduced_bits*"}
tools=${FF_SANITIZE_TOOLS:-"memcheck racecheck synccheck"}
# Bad knobs are refused (exit 2) before anything runs, naming the value and what was expected.
for tool in $tools; do
    case $tool in
        memcheck | racecheck | synccheck | initcheck) ;;
        *) echo "sanitize.sh: FF_SANITIZE_TOOLS '$tool': expected memcheck, racecheck, synccheck or initcheck" >&2; exit 2 ;;
    esac
done
[ -n "$(echo $tools)" ] || { echo "sanitize.sh: FF_SANITIZE_TOOLS is empty: expected one or more of memcheck, racecheck, synccheck, initcheck" >&2; exit 2; }
for t in $tests; do
    case $t in
        ?*:?*) ;;
        *) echo "sanitize.sh: FF_SANITIZE_TESTS '$t': expected BINARY:GLOB, e.g. test_gpu_train:*pool_sparse*" >&2; exit 2 ;;
    esac
done
[ -n "$(echo $tests)" ] || { echo "sanitize.sh: FF_SANITIZE_TESTS is empty: expected BINARY:GLOB ..." >&2; exit 2; }
# The tool: FF_COMPUTE_SANITIZER, else on PATH, else beside nvcc, else CUDA's default prefix.
cs=${FF_COMPUTE_SANITIZER:-}
if [ -z "$cs" ]; then
    cs=$(command -v compute-sanitizer 2>/dev/null)
    nvcc_dir=$(dirname "$(command -v nvcc 2>/dev/null || echo /nonexistent/nvcc)")
    [ -z "$cs" ] && [ -x "$nvcc_dir/compute-sanitizer" ] && cs="$nvcc_dir/compute-sanitizer"
    [ -z "$cs" ] && cs=/usr/local/cuda/bin/compute-sanitizer
fi
if [ ! -x "$cs" ]; then
    echo "sanitize.sh: no compute-sanitizer (${FF_COMPUTE_SANITIZER:+FF_COMPUTE_SANITIZER=$cs; }the CUDA toolkit's bin/): skipped"
    exit 77
fi
nvidia-smi -L > /dev/null 2>&1 || { echo "sanitize.sh: no GPU: skipped"; exit 77; }
bad=0
for t in $tests; do
    bin=${t%%:*} glob=${t#*:}
    path=$(find "$build" -name "$bin" -type f -perm -u+x | head -1)
    [ -n "$path" ] || { echo "sanitize.sh: $bin: not built in $build"; bad=1; continue; }
    for tool in $tools; do
        start=$(date +%s)
        FF_TEST_FILTER=$glob "$cs" --tool "$tool" --error-exitcode 1 "$path" > "${TMPDIR:-/tmp}/sanitize.$$" 2>&1
        rc=$?
        summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "${TMPDIR:-/tmp}/sanitize.$$" | tail -1)
        echo "$bin $glob, $tool: exit $rc in $(($(date +%s) - start)) s (${summary:-no summary})"
        if [ "$rc" -ne 0 ]; then
            bad=1
            grep -E "=========|FAIL" "${TMPDIR:-/tmp}/sanitize.$$" | head -40
        fi
    done
done
rm -f "${TMPDIR:-/tmp}/sanitize.$$"
exit $bad
