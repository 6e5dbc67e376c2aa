#!/usr/bin/env bash
# Session 7's GPU run for issue 15 (training in the GPU modes), one GPU: build, the GPU training
# tests (kernels against the CPU reference, cuda = hybrid = direct at P = 1..4, resume, cuda vs
# serial, the training golden on the GPU), a lost rank while training in hybrid and direct, then
# epoch timings of fivefold (graph and eager steps) beside PyTorch's graph and eager peers.
# Fashion-MNIST travels with the checkout in .data/ (the GPU machine has no copy).
set -uo pipefail
out=${1:?usage: run.sh OUTDIR}
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export DATA="$PWD/.data/fashion-mnist"
nvidia-smi -L; cat .ff-source-commit
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build build-gpu -j 16 > "$out/build.log" 2>&1 || { grep -n "error" "$out/build.log" | head -40; exit 1; }
F=build-gpu/fivefold
mkdir -p "$out/json"
# timings first (the part that matters most if the run is cut short)
for B in 64 256; do
  $F train --mode cuda --data "$DATA" --batch $B --epochs 2 --log-every 0 --json "$out/json/ff-cuda-b$B.json" \
    > "$out/train-cuda-b$B.log" 2>&1; echo "cuda B=$B rc=$?"; tail -4 "$out/train-cuda-b$B.log"
  FF_TRAIN_GRAPHS=0 $F train --mode cuda --data "$DATA" --batch $B --epochs 1 --log-every 0 \
    --json "$out/json/ff-cuda-eager-b$B.json" > "$out/train-cuda-eager-b$B.log" 2>&1; echo "cuda eager B=$B rc=$?"
  tail -2 "$out/train-cuda-eager-b$B.log"
  for v in graph eager; do
    flag=""; [ $v = graph ] && flag=--graph
    timeout 200 python3 bench/peer_pytorch.py --task train --device cuda --data "$DATA" --batch $B --epochs 2 \
      --init fivefold --shuffle fivefold $flag > "$out/json/peer-$v-b$B.json" 2> "$out/peer-$v-b$B.log"
    echo "peer $v B=$B rc=$?"; tail -c 600 "$out/json/peer-$v-b$B.json"; echo
  done
done
timeout 300 ctest --test-dir build-gpu -R "train" -L gpu --output-on-failure --timeout 300 > "$out/ctest-train.log" 2>&1
echo "ctest rc=$?"; grep -E "tests passed|Failed|Passed|Skipped" "$out/ctest-train.log"
for mode in hybrid direct; do
  timeout 120 env FIVEFOLD=$F MPIEXEC=mpiexec TASK=train sh verify/cli/test_mpi_crash.sh $mode > "$out/crash-train-$mode.log" 2>&1
  echo "crash train $mode rc=$?"; grep -E "PASS|FAIL|passed" "$out/crash-train-$mode.log"
done
tar czf "$out/json.tgz" -C "$out" json
