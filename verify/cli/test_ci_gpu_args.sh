#!/bin/sh
# ci/gpu refuses bad knobs before it builds anything: exit 2 and one line naming the value and what
# was expected. Each case is also run with a knob that is fine, so that a refusal of every run
# cannot pass: a valid FF_GPU_STEPS and DATA must get past the checks. The tools the steps call
# (nvidia-smi, cmake, ctest, ...) are stubs that leave a marker and exit 42 at once, so the
# script records each step's failure and goes on; the nvidia-smi marker shows the checks passed.
# A pattern that matches one step must run that step alone and not be reported as matching none.
# Usage: test_ci_gpu_args.sh   (from anywhere; needs bash; each run of ci/gpu is cut at 60 s, so a
# mutant that runs every step fails instead of hanging)
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
mkdir -p "$T/bin" "$T/data"
# A PATH where the first step's tools and every later command stop at once.
for tool in nvidia-smi nvcc cmake ctest mpiexec python3; do
    printf '#!/bin/sh\ntouch "%s/ran-%s"\nexit 42\n' "$T" "$tool" > "$T/bin/$tool"
    chmod +x "$T/bin/$tool"
done
: > "$T/data/train-images-idx3-ubyte"
run() {  # run NAME EXPECT_RC EXPECT_TEXT [VAR=VALUE ...]
    name=$1 want=$2 text=$3
    shift 3
    rm -f "$T"/ran-*
    timeout 60 env PATH="$T/bin:/usr/bin:/bin" "$@" bash "$root/ci/gpu" "$T/out" > "$T/log" 2>&1
    rc=$?
    if [ "$want" = 2 ]; then
        if [ "$rc" -eq 2 ] && grep -q -- "$text" "$T/log" && [ "$(grep -c . "$T/log")" -eq 1 ] && ! ls "$T"/ran-* > /dev/null 2>&1; then
            echo "PASS  $name: exit 2, nothing run: $(cat "$T/log")"
        else
            echo "FAIL  $name: exit $rc (expected 2 and one line with '$text', nothing run):"
            sed 's/^/      /' "$T/log" | head -5
            fail=1
        fi
    elif [ -e "$T/ran-nvidia-smi" ] && grep -q -- "$text" "$T/log"; then
        echo "PASS  $name: past the checks (exit $rc, the stubbed steps failed as they must)"
    else
        echo "FAIL  $name: did not get past the checks (exit $rc):"
        sed 's/^/      /' "$T/log" | head -5
        fail=1
    fi
}
run "FF_GPU_STEPS not a regex" 2 "FF_GPU_STEPS '(': not a valid regular expression" FF_GPU_STEPS='('
run "DATA without the images" 2 "DATA '$T/nowhere': expected a Fashion-MNIST folder" DATA="$T/nowhere"
run "DATA an empty folder" 2 "DATA '$T/bin': expected a Fashion-MNIST folder" DATA="$T/bin"
run "a valid FF_GPU_STEPS and DATA" 0 "FF_GPU_STEPS 'nothing-has-this-name' matched no step" \
    FF_GPU_STEPS='nothing-has-this-name' DATA="$T/data"
run "FF_GPU_STEPS matching one step" 0 "=== ctest: exit 42" FF_GPU_STEPS='^ctest$' DATA="$T/data"
if grep -q "matched no step" "$T/log" || [ "$(grep -c '^=== [a-z-]*: exit' "$T/log")" -ne 4 ]; then
    echo "FAIL  FF_GPU_STEPS '^ctest\$': expected machine, configure, build and ctest only, none reported as unmatched:"
    grep '^=== \|matched' "$T/log" | sed 's/^/      /' | head -8
    fail=1
fi
exit $fail
