# The two GPU-machine fixes of 62d05b7 re-run there, and the GPU suite once more, from the
# repository root: bash bench/results/issue12-h200-final/run.sh $OUT
set -u
out=$1
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1
b=build-gpu
s() { echo "=== $*"; local t=$SECONDS; timeout 400 "$@"; echo "=== exit $? ($((SECONDS-t)) s)"; }
s cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DFF_SOURCE_COMMIT=$(cat .ff-source-commit 2>/dev/null || echo unknown)
s cmake --build $b -j 16
s ctest --test-dir $b -L gpu --output-on-failure
s ctest --test-dir $b -R 'cli_demo_python|golden_make_check|cli_errors|cli_mpi_errors|bench_gate' -j 8 --output-on-failure --timeout 400
s ctest --test-dir $b -R 'cli_demo_python|golden_make_check_mnist' -V
