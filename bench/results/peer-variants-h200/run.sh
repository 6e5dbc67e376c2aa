# fivefold bench --peer pytorch with every PyTorch variant (eager and a captured CUDA graph) on the
# GPU machine, from the repository root: bash bench/results/peer-variants-h200/run.sh $OUT
set -u
out=$1
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1
b=build-gpu
s() { echo "=== $*"; local t=$SECONDS; timeout 300 "$@"; echo "=== exit $? ($((SECONDS-t)) s)"; }
s cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DFF_SOURCE_COMMIT=$(cat .ff-source-commit 2>/dev/null || echo unknown)
s cmake --build $b -j 16 --target fivefold_cli
mkdir -p $out/json
s $b/fivefold bench --model alexnet --mode cuda --batch 1,32,128,256 --peer pytorch --json $out/json
s $b/fivefold bench --model mnist-cnn --mode cuda --batch 1,64,256 --peer pytorch --json $out/json
s ctest --test-dir $b -R bench_gate --output-on-failure
