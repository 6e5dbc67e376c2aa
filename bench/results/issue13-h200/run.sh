# Issue 13 on the GPU machine, from the repository root: bash bench/results/issue13-h200/run.sh $OUT [tests|bench]
# tests: the GPU suite (cuda device + loopback: test_gpu_decomp, halo_fuzz_gpu), verify cuda and
# hybrid (mpiexec, Open MPI, staged); bench: the cuda figures of this tree and of the commit before
# issue 13's restructuring (.ff-before.tar.gz = git archive 15d92ae), in the same call.
set -u
out=$1
what=${2:-tests}
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1
s() { echo "=== $*"; local t=$SECONDS; timeout 500 "$@"; echo "=== exit $? ($((SECONDS-t)) s)"; }
cfg="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH=$PWD/.deps/usr"
b=build-gpu
s cmake -S . -B $b $cfg -DFF_SOURCE_COMMIT=$(cat .ff-source-commit 2>/dev/null || echo unknown) > /dev/null
if [ "$what" = tests ]; then
  s cmake --build $b -j 16
  s ctest --test-dir $b -L gpu --output-on-failure --timeout 500 -j 2
  s $b/fivefold verify --mode cuda --model alexnet
  s $b/fivefold verify --mode cuda --model mnist-cnn
  for split in rows batch; do
    for P in 2 3; do
      s mpiexec --oversubscribe -n $P $b/fivefold verify --mode hybrid --split $split --model alexnet
      s mpiexec --oversubscribe -n $P $b/fivefold verify --mode hybrid --split $split --model mnist-cnn
    done
  done
  s $b/fivefold verify --mode cuda --model alexnet --conv direct
  s $b/fivefold info --model alexnet --mode hybrid --ranks 4 --split rows
elif [ "$what" = bench ]; then
  mkdir -p /tmp/before && tar -xzf .ff-before.tar.gz -C /tmp/before && cp -r .deps /tmp/before/
  (cd /tmp/before && cmake -S . -B build $cfg -DCMAKE_PREFIX_PATH=$PWD/.deps/usr > /dev/null && cmake --build build -j 8 > /tmp/before-build.log 2>&1; echo "before build: $?") &
  s cmake --build $b -j 8
  wait
  mkdir -p $out/json-after $out/json-before
  for model in alexnet mnist-cnn; do
    batches=$([ $model = alexnet ] && echo 1,32,128,256 || echo 1,64,256)
    s /tmp/before/build/fivefold bench --model $model --mode cuda --batch $batches --json $out/json-before
    s $b/fivefold bench --model $model --mode cuda --batch $batches --peer pytorch --json $out/json-after
  done
  s mpiexec -n 2 $b/fivefold bench --model alexnet --mode hybrid --split batch --batch 32,256 --json $out/json-after
  s mpiexec -n 2 $b/fivefold bench --model alexnet --mode hybrid --split rows --batch 32 --json $out/json-after
fi
# final: the whole suite but mutation_run at the final commit, then hybrid verify and the gated cuda bench
if [ "$what" = final ]; then
  s cmake --build $b -j 16
  s ctest --test-dir $b -E mutation_run -j 8 --timeout 500 --output-on-failure
  s mpiexec --oversubscribe -n 4 $b/fivefold verify --mode hybrid --split rows --model alexnet
  s mpiexec --oversubscribe -n 4 $b/fivefold verify --mode hybrid --split batch --model mnist-cnn
  mkdir -p $out/json-final; s $b/fivefold bench --model alexnet --mode cuda --batch 1,256 --json $out/json-final/
  s $b/fivefold verify --mode cuda --model alexnet --winograd-m 2 --s2d off
fi
