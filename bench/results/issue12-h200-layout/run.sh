# The issue-12 run after the core/ layout move (the whole CTest suite but the mutation run) on the GPU machine (H200), from the repository root:
#   bash bench/results/issue12-h200-layout/run.sh $OUT 2>&1 | tee $OUT/gpu.log
set -u
out=$1
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1
b=build-gpu
s() { echo "=== $*"; local t=$SECONDS; timeout 450 "$@"; echo "=== exit $? ($((SECONDS-t)) s)"; }
s nvidia-smi --query-gpu=name,driver_version --format=csv
s cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DFF_SOURCE_COMMIT=$(cat .ff-source-commit 2>/dev/null || echo unknown)
s cmake --build $b -j 16
s ctest --test-dir $b -L gpu --output-on-failure
for m in alexnet mnist-cnn; do
  s $b/fivefold verify --mode cuda --model $m
  s $b/fivefold verify --mode cuda --backend vendor --model $m
done
s $b/fivefold infer --model alexnet --mode cuda --batch 1024
s $b/fivefold infer --model alexnet --mode cuda --batch 1 --iters 20
s ctest --test-dir $b -E mutation_run -j 8 --output-on-failure --timeout 400
mkdir -p $out/json
s $b/fivefold bench --model alexnet --mode cuda --batch 1,128 --peer pytorch --json $out/json
