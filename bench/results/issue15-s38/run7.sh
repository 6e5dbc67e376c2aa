#!/usr/bin/env bash
# Session 38, GPU call 7: ci/gpu's new gpu-sanitizer step (verify/gpu/sanitize.sh: compute-sanitizer
# memcheck, racecheck, synccheck over test_gpu_train's pool-sparse and whole-backward tests), then
# two mutants it must catch, built in place one after the other:
#   race   k_ps_dgrad without the barrier between the warps' writes of their quarters and the sum
#   oob    k_ps_dgrad's staging reads G and Q at the unguarded index (a window left of column 0)
# Usage: bash bench/results/issue15-s38/run7.sh OUTDIR  (carry .deps, .ff-source-commit)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run7 "${1:?usage: run7.sh OUTDIR}"
dr_build . test_gpu_train || exit 1
el built
timeout 200 sh verify/gpu/sanitize.sh build-gpu > "$out/sanitize.log" 2>&1
echo "a. sanitize.sh: exit $? (0 expected)"; cat "$out/sanitize.log" | head -30
el a done
cp core/device/cuda/pool_sparse.cu /tmp/pool_sparse.orig.cu
mutant() {  # NAME TOOL PYTHON-EDIT
    cp /tmp/pool_sparse.orig.cu core/device/cuda/pool_sparse.cu
    python3 -c "import sys; p='core/device/cuda/pool_sparse.cu'; s=open(p).read(); t=$3; assert t != s, 'edit did not apply'; open(p,'w').write(t)" || return
    cmake --build build-gpu --target test_gpu_train > "$out/build-$1.log" 2>&1 || { echo "mutant $1: build failed"; return; }
    FF_SANITIZE_TESTS="test_gpu_train:*pool_sparse*" FF_SANITIZE_TOOLS=$2 timeout 120 sh verify/gpu/sanitize.sh build-gpu > "$out/mutant-$1.log" 2>&1
    echo "b. mutant $1 under $2: exit $? (1 expected)"; head -12 "$out/mutant-$1.log"
}
mutant race racecheck "s.replace('    __syncthreads();\n    for (int o = threadIdx.x; o < 32 * 2 * PSD_CT;', '    for (int o = threadIdx.x; o < 32 * 2 * PSD_CT;', 1)"
mutant oob memcheck "s.replace('const long long at = ok ? ((img * g.K + k) * g.PH + i) * (long long)g.PW + j : 0;', 'const long long at = ((img * g.K + k) * g.PH + i) * (long long)g.PW + j;', 1).replace('gv[u] = ok ? __ldg(G + at) : 0.0f;', 'gv[u] = __ldg(G + at);', 1)"
cp /tmp/pool_sparse.orig.cu core/device/cuda/pool_sparse.cu
el done
