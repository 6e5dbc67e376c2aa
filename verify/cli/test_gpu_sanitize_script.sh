#!/bin/sh
# verify/gpu/sanitize.sh's verdicts, without a GPU: compute-sanitizer, nvidia-smi and the test
# binary are stubs. A clean report passes (exit 0) with each tool run once per test and the test's
# glob handed to it in FF_TEST_FILTER; a tool's report, a failing test, a test binary that was not
# built each fail (exit 1); an unknown tool or a test entry without its glob is refused (exit 2,
# naming it, nothing run); no compute-sanitizer or no GPU is a skip (exit 77), never a pass.
# Usage: test_gpu_sanitize_script.sh   (from anywhere)
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
mkdir -p "$T/bin" "$T/nogpu" "$T/build/verify/gpu"
# compute-sanitizer --tool TOOL --error-exitcode 1 BINARY: logs the tool and the filter, runs the
# binary; FAKE_CS=report makes it find an error (exit 1 as --error-exitcode asks).
cat > "$T/bin/compute-sanitizer" <<'STUB'
#!/bin/sh
echo "$2 $FF_TEST_FILTER" >> "$FAKE_LOG"
"$5"
rc=$?
if [ "${FAKE_CS:-clean}" = report ]; then
    echo "========= Invalid __global__ read of size 4 bytes"
    echo "========= ERROR SUMMARY: 1 error"
    exit 1
fi
echo "========= ERROR SUMMARY: 0 errors"
exit $rc
STUB
printf '#!/bin/sh\nexit "${FAKE_TEST_RC:-0}"\n' > "$T/build/verify/gpu/test_gpu_train"
printf '#!/bin/sh\necho "GPU 0: stub"\n' > "$T/bin/nvidia-smi"
printf '#!/bin/sh\nexit 9\n' > "$T/nogpu/nvidia-smi"
chmod +x "$T/bin/compute-sanitizer" "$T/build/verify/gpu/test_gpu_train" "$T/bin/nvidia-smi" "$T/nogpu/nvidia-smi"
case_() {  # NAME EXPECT_RC PATH [VAR=VALUE ...]
    name=$1 want=$2 path=$3
    shift 3
    : > "$T/calls"
    env PATH="$path:/usr/bin:/bin" FAKE_LOG="$T/calls" "$@" sh "$root/verify/gpu/sanitize.sh" "$T/build" > "$T/out" 2>&1
    rc=$?
    if [ "$rc" -eq "$want" ]; then
        echo "PASS  $name: exit $rc"
    else
        echo "FAIL  $name: exit $rc, expected $want:"
        sed 's/^/      /' "$T/out" | head -8
        fail=1
    fi
}
case_ "clean reports" 0 "$T/bin"
want="memcheck *pool_sparse*
racecheck *pool_sparse*
synccheck *pool_sparse*
memcheck *backward_reduced_bits*
racecheck *backward_reduced_bits*
synccheck *backward_reduced_bits*"
[ "$(cat "$T/calls")" = "$want" ] || { echo "FAIL  clean reports: the tools and globs run were:"; sed 's/^/      /' "$T/calls"; fail=1; }
case_ "one tool and glob chosen" 0 "$T/bin" FF_SANITIZE_TOOLS=racecheck FF_SANITIZE_TESTS="test_gpu_train:*x*"
[ "$(cat "$T/calls")" = "racecheck *x*" ] || { echo "FAIL  one tool and glob: ran $(cat "$T/calls")"; fail=1; }
case_ "a tool's report" 1 "$T/bin" FAKE_CS=report
grep -q "Invalid __global__ read" "$T/out" || { echo "FAIL  a tool's report: the report is not shown"; fail=1; }
case_ "a failing test" 1 "$T/bin" FAKE_TEST_RC=1
case_ "a test binary not built" 1 "$T/bin" FF_SANITIZE_TESTS="test_gpu_nothing:*"
grep -q "test_gpu_nothing: not built" "$T/out" || { echo "FAIL  not built: no message"; fail=1; }
case_ "an unknown tool" 2 "$T/bin" FF_SANITIZE_TOOLS="memcheck leakcheck"
grep -q "FF_SANITIZE_TOOLS 'leakcheck': expected memcheck" "$T/out" && [ ! -s "$T/calls" ] ||
    { echo "FAIL  an unknown tool: not named, or something ran"; fail=1; }
case_ "no tools" 2 "$T/bin" FF_SANITIZE_TOOLS=" "
case_ "a test entry without a glob" 2 "$T/bin" FF_SANITIZE_TESTS="test_gpu_train"
grep -q "FF_SANITIZE_TESTS 'test_gpu_train': expected BINARY:GLOB" "$T/out" && [ ! -s "$T/calls" ] ||
    { echo "FAIL  a test entry without a glob: not named, or something ran"; fail=1; }
case_ "no GPU" 77 "$T/nogpu:$T/bin"
case_ "FF_COMPUTE_SANITIZER names no tool" 77 "$T/bin" FF_COMPUTE_SANITIZER="$T/none"
grep -q "FF_COMPUTE_SANITIZER=$T/none" "$T/out" || { echo "FAIL  FF_COMPUTE_SANITIZER: the message does not name it"; fail=1; }
mv "$T/bin/compute-sanitizer" "$T/cs"
case_ "FF_COMPUTE_SANITIZER names the tool" 0 "$T/bin" FF_COMPUTE_SANITIZER="$T/cs"
exit $fail
