#!/usr/bin/env bash
# Session 30, GPU call 4 (one H200): the landed tree. The gradient lane (runs 1-3) now first makes
# the rearranged weights of the data gradients below the top layer (fc1's transpose, conv2's
# flip), each with an event the stream waits for before that data gradient.
#  a. GPU ctests of training (test_gpu_train with the two-step data gradients, gpu_train_*,
#     test_gpu_exec, train_mlp_gpu, gpu_kernel_trace)
#  b. A/B in one call: one stream (FF_TRAIN_CONCURRENT_BACKWARD=0) against the lane, batch 64 and
#     256, tf32x3 and fp32, twice each interleaved; every digest must equal runs 1-3's
#  c. the mutant whose stream does not wait for the weights made on the lane (lane-noprepwait.patch)
#  d. train_bench tf32x3 and fp32 against the CUDA-graph peer
# Usage: bash bench/results/issue15-s30/run4.sh OUTDIR  (carry .deps, .ff-source-commit, .data-mid)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
. bench/device_run.sh
dr_begin run4 "${1:?usage: run4.sh OUTDIR}"
export DATA="$PWD/.data-mid/fashion-mnist"
dr_build . fivefold test_gpu_train test_gpu_exec ff_kernel_trace || exit 1
el built
timeout 150 ctest --test-dir build-gpu -R "^(test_gpu_train|gpu_train_.*|test_gpu_exec|train_mlp_gpu|gpu_kernel_trace)$" \
    -j 4 --timeout 140 -V > "$out/ctest-gpu.log" 2>&1
echo "a. ctest: exit $?"; grep -E "Test +#|tests passed|Total Test" "$out/ctest-gpu.log"
grep -E "^[0-9]+: (cuda|hybrid P=2 |direct P=2 |cuda killed).*digest" "$out/ctest-gpu.log" | head -8
grep -E "weights made apart|fast path bits" "$out/ctest-gpu.log" | head -8
el a done
F=$PWD/build-gpu/fivefold
# runs 1-3's digests (loss, weights) per precision and batch
declare -A want=([tf32x3-64]="a1afe801dd367dad f5c1bb3e67fbb81a" [tf32x3-256]="ce1eb0186245a1c3 70e8b6618a4c1cf6"
                 [fp32-64]="2700b21baa2a906b 31eb4951f42edf67" [fp32-256]="78d5841cf5ff10cd a406e8748dd5ff7f")
digs() { python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(j['loss_digest'], j['weights_digest'])" "$1" 2>/dev/null; }
bad=0
for p in tf32x3 fp32; do
    for b in 64 256; do
        for r in 1 2; do
            for v in one lane; do
                envs="X=1"; [ $v = one ] && envs="FF_TRAIN_CONCURRENT_BACKWARD=0"
                n=ab-$p-b$b-$v-$r
                timeout 60 env $envs $F train --model mnist-cnn --mode cuda --data "$DATA" \
                    --batch $b --epochs 4 --log-every 0 --precision $p --json "$out/$n.json" > "$out/$n.log" 2>&1
                dr_summ "$p b$b $v #$r" "$out/$n.json"
                [ "$(digs "$out/$n.json")" = "${want[$p-$b]}" ] || { echo "b. $n: digests $(digs "$out/$n.json"), expected ${want[$p-$b]}"; bad=1; }
            done
        done
    done
done
echo "b. digests equal to runs 1-3: $([ $bad = 0 ] && echo yes || echo NO)"
el b done
if git apply "$here/lane-noprepwait.patch"; then
    cmake --build build-gpu --target fivefold > "$out/build-mutant.log" 2>&1 || echo "c. mutant build failed"
    for p in tf32x3 fp32; do
        for b in 64 256; do
            timeout 60 $F train --model mnist-cnn --mode cuda --data "$DATA" --batch $b --epochs 4 --log-every 0 \
                --precision $p --json "$out/mutant-$p-b$b.json" > "$out/mutant-$p-b$b.log" 2>&1
            echo "c. mutant $p b$b: exit $?, digests $(digs "$out/mutant-$p-b$b.json") ($([ "$(digs "$out/mutant-$p-b$b.json")" = "${want[$p-$b]}" ] && echo "equal: not caught" || echo "differ: caught"))"
        done
    done
    git apply -R "$here/lane-noprepwait.patch"
    cmake --build build-gpu --target fivefold > "$out/build-unmutant.log" 2>&1 || echo "c. rebuild failed"
fi
el c done
for p in tf32x3 fp32; do
    timeout 100 python3 bench/train_bench.py --fivefold $F --data "$DATA" --batch 64,256 --epochs 4 --modes cuda \
        --peers graph --ff-args "--precision $p" --timeout 80 --out "$out/mnist-$p.json" > "$out/mnist-$p.txt" 2>&1
    echo "d. bench $p: exit $?"
    grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-$p.txt" | tail -7
done
el done
