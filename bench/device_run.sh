# Sourced by the evidence scripts in bench/results/*/ that run on a GPU machine (one `run` call
# each): the set-up every such script repeated until session 17. After `. bench/device_run.sh`:
#   dr_begin NAME OUTDIR     the folder for logs ($out), the clock, the GPUs ($ngpu) and the commit
#                            carried in .ff-source-commit printed; at exit $out is packed into
#                            OUTDIR/../NAME.tgz (the run tool brings back only a few files)
#   dr_mnist_begin NAME DEFAULT_SECONDS OUTDIR [SECONDS]
#                            an mnist run script's start: SECONDS (its time budget, default
#                            DEFAULT_SECONDS) into $DL and MUTANTS (0 or 1, default 1) checked (exit 2
#                            naming a bad one), then dr_begin NAME OUTDIR and DATA=.data-mid's images
#   dr_build SRC TARGET...   configure SRC into SRC/build-gpu (sm_90, cmocka from .deps) and build
#                            the targets; the logs go to $out/build-<SRC's base name>.log
#   el TEXT                  a line with the seconds since dr_begin
#   dr_left LIMIT            seconds left of LIMIT since dr_begin
#   dr_summ NAME JSON        one line from a `fivefold train --json`: ms per step (median of the
#                            epochs after the first), the loss and weights digests
#   dr_mlp NAME BIN RANKS [VAR=VALUE ...] [-- ARG ...]
#                            the MLP's step in the direct mode as the issue times it ($DR_MLP, one
#                            micro-batch per rank) with those variables and extra arguments, its
#                            log and JSON in $out, then its dr_summ line
#   dr_mlp_bench [LIMIT]     bench/train_bench.py on the MLP as the issue's cards ask (cuda,
#                            direct:2 and, with four GPUs, direct:4 against PyTorch's graph and
#                            DDP in one invocation, each mode with its defaults); $out/train-mlp.*
#   dr_mnist_steps PREC...   mnist-cnn's step in the cuda mode (4 epochs of $DATA, batch 64 and 256)
#                            at each precision: $out/step-PREC-bBATCH[-$DR_TAG].{json,log} and their
#                            dr_summ lines (DR_TAG, optional: names an A/B side, e.g. with an FF_ switch)
#   dr_mnist_bench PREC      bench/train_bench.py, cuda against PyTorch's CUDA graph at batch 64 and
#                            256 at that precision; $out/mnist-PREC.{json,txt}, the table printed
#   dr_mnist_trace BATCH     a traced tf32x3 step (build-gpu's libff_kernel_trace.so, tools/trace_step.py):
#                            $out/step-bBATCH[-$DR_TAG].txt, its first 32 lines printed
#   dr_layer_tiles LAYER BATCH [ARG...]
#                            build-gpu/ff_conv_tiles on one mnist-cnn layer (every kernel alone, bits
#                            compared): $out/tiles-LAYER[ARG]-bBATCH.txt, its summary lines printed
#   dr_gpu_ctest SECONDS SHOW [HIDE]
#                            the GPU tests (test_gpu_layers, test_gpu_train, gpu_train_*,
#                            tools_conv_tiles_usage) for at most SECONDS (at least 40), verbose into
#                            $out/ctest-gpu.log.gz; their summary and the lines matching SHOW printed
#                            (but those matching HIDE, e.g. the negative controls that must fail)
#   dr_mutant_tree NAME...   a copy of the tree in /tmp/mut with verify/mutation/mutants.py's mutants
#                            NAME... applied together (pick ones that fail different test lines), its
#                            test_gpu_layers and test_gpu_train building in the background
#   dr_mutant_tests LAYERS TRAIN
#                            after dr_mutant_tree: both tests on the mutants (each must exit nonzero),
#                            the lines matching LAYERS and TRAIN printed; logs in $out/mutant-*.log.gz
# The environment: .deps' libraries, mpiexec as root (Open MPI), unbuffered Python, NVLink
# multicast off (the device notes: leave it off).
export LD_LIBRARY_PATH="$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
dr_t0=$(date +%s)
el() { echo "[+$(($(date +%s) - dr_t0)) s] $*"; }
dr_left() { echo $((dr_t0 + $1 - $(date +%s))); }
dr_begin() {
    dr_name=$1
    mkdir -p "$2" && out=$(cd "$2" && pwd)
    trap 'tar -C "$out" -czf "/tmp/$dr_name.tgz" . 2>/dev/null; mv "/tmp/$dr_name.tgz" "$out/../$dr_name.tgz"' EXIT
    nvidia-smi -L
    cat .ff-source-commit 2>/dev/null
    ngpu=$(nvidia-smi -L | grep -c "^GPU")
}
dr_build() {
    local src=$1 log
    shift
    log="$out/build-$(basename "$(cd "$src" && pwd)").log"
    cmake -S "$src" -B "$src/build-gpu" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
        -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" -DFF_SOURCE_COMMIT="$(cat .ff-source-commit 2>/dev/null)" > "$log" 2>&1 &&
        cmake --build "$src/build-gpu" -j "$(($(nproc) / 2 + 1))" --target "$@" >> "$log" 2>&1 ||
        { echo "build of $src failed:"; grep -E "error|FAILED" "$log" | head -20; return 1; }
}
DR_MLP="--model mlp --batch 2048 --epochs 4 --log-every 0 --data synthetic --seed 1 --backend vendor"
dr_mlp() {
    local name=$1 bin=$2 np=$3 envs=()
    shift 3
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do
        envs+=("$1")
        shift
    done
    [ "${1:-}" = "--" ] && shift
    timeout 60 env X=1 "${envs[@]}" mpiexec --oversubscribe -n "$np" "$bin" train --mode direct $DR_MLP \
        --microbatch $((2048 / np)) "$@" --json "$out/$name.json" > "$out/$name.log" 2>&1 || echo "$name: exit $?"
    dr_summ "$name" "$out/$name.json"
}
dr_summ() {
    python3 - "$1" "$2" <<'PY'
import json, sys, statistics
name, path = sys.argv[1], sys.argv[2]
try:
    d = json.load(open(path))
except Exception as e:
    print(f"{name:24s} no json ({e})")
    sys.exit()
spe = d["seconds_per_epoch"]
ms = statistics.median(spe[1:] or spe) / (d["steps"] // d["epochs"]) * 1e3
print(f"{name:24s} {ms:8.3f} ms/step  loss {d['loss_digest']} w {d['weights_digest']}")
PY
}
dr_mlp_bench() {
    local peers=graph,ddp:2 modes=cuda,direct:2 four=()
    [ "$ngpu" -ge 4 ] && peers=graph,ddp:2,ddp:4 modes=cuda,direct:2,direct:4 four=(--mode-args "direct:4=--microbatch 512")
    timeout "${1:-200}" python3 bench/train_bench.py --fivefold "$F" --model mlp --batch 2048 --epochs 3 \
        --modes $modes --peers $peers --ff-args "--backend vendor" \
        --mode-args "cuda=--microbatch 2048" --mode-args "direct:2=--microbatch 1024" "${four[@]}" \
        --mpiexec "mpiexec --oversubscribe" --timeout 90 --out "$out/train-mlp.json" > "$out/train-mlp.txt" 2>&1
    echo "mlp bench: exit $?"
    grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/train-mlp.txt" | tail -14
}
dr_mnist_steps() {
    local p b f
    for p in "$@"; do
        for b in 64 256; do
            f="$out/step-$p-b$b${DR_TAG:+-$DR_TAG}"
            timeout 30 "$PWD/build-gpu/fivefold" train --model mnist-cnn --mode cuda --data "$DATA" --epochs 4 \
                --log-every 0 --precision "$p" --batch $b --json "$f.json" > "$f.log" 2>&1
            dr_summ "$p b$b${DR_TAG:+ $DR_TAG}" "$f.json"
        done
    done
}
dr_mnist_bench() {
    timeout 110 python3 bench/train_bench.py --fivefold "$PWD/build-gpu/fivefold" --data "$DATA" --batch 64,256 \
        --epochs 4 --modes cuda --peers graph --ff-args "--precision $1" --timeout 60 --out "$out/mnist-$1.json" \
        > "$out/mnist-$1.txt" 2>&1
    echo "bench $1: exit $?"
    grep -vE "^train_bench: (fivefold|pytorch|gate)" "$out/mnist-$1.txt" | tail -7
}
dr_mnist_trace() {
    local t="b$1${DR_TAG:+-$DR_TAG}"
    timeout 40 env FF_KERNEL_TRACE="$out/tl-$t" FF_KERNEL_TRACE_TIMELINE=30000 FF_KERNEL_TRACE_SKIP=0.3 \
        LD_PRELOAD=build-gpu/libff_kernel_trace.so build-gpu/fivefold train --model mnist-cnn --mode cuda \
        --data "$DATA" --epochs 12 --log-every 0 --precision tf32x3 --batch "$1" > "$out/tl-$t.log" 2>&1
    python3 tools/trace_step.py "$out"/tl-$t.*.timeline.tsv > "$out/step-$t.txt" 2>&1
    echo "traced step $t: exit $?"
    sed -n 1,32p "$out/step-$t.txt"
    rm -f "$out"/tl-$t.*.timeline.tsv  # the raw timelines are too large to bring back
}
dr_layer_tiles() {
    local layer=$1 b=$2 f
    shift 2
    f="$out/tiles-$layer$(printf '%s' "$@" | tr -d ' ')-b$b.txt"
    timeout 30 build-gpu/ff_conv_tiles --layer "$layer" "$@" --batch "$b" --iters 100 > "$f" 2>&1
    echo "ff_conv_tiles --layer $layer ${*:+$* }--batch $b: exit $?"
    grep -E "tuner picks|fastest|DIFFER" "$f" | head -6
}
dr_gpu_ctest() {
    local ct=$1 show=$2 hide=${3:-^$}
    [ "$ct" -lt 40 ] && ct=40
    timeout "$ct" ctest --test-dir build-gpu -R "^(test_gpu_layers|test_gpu_train|gpu_train_.*|tools_conv_tiles_usage)$" \
        -j 4 --timeout $((ct - 10)) -V > "$out/ctest-gpu.log" 2>&1
    echo "ctest: exit $?"
    grep -E "Test +#|tests passed|Total Test" "$out/ctest-gpu.log"
    grep -E "$show" "$out/ctest-gpu.log" | grep -vE "$hide" | head -40
    gzip -f "$out/ctest-gpu.log"
}
dr_mutant_tree() {
    rm -rf /tmp/mut && mkdir /tmp/mut &&
        tar -C . --exclude=./build-gpu --exclude=./.data-mid --exclude=./bench/results -cf - . | tar -C /tmp/mut -xf - &&
        python3 - /tmp/mut "$@" <<'PY' || { echo "dr_mutant_tree: the mutants did not apply"; return 1; }
import os, sys
sys.path.insert(0, "verify/mutation")
from mutants import MUTANTS
names = sys.argv[2:]
found = [m for m in MUTANTS if m["name"] in names]
assert len(found) == len(names), f"unknown mutant(s): {sorted(set(names) - {m['name'] for m in found})}"
for m in found:
    p = os.path.join(sys.argv[1], m["file"])
    s = open(p).read()
    for find, repl in m["subs"]:
        assert s.count(find) == 1, (m["name"], find)
        s = s.replace(find, repl, 1)
    open(p, "w").write(s)
PY
    (dr_build /tmp/mut test_gpu_layers test_gpu_train > "$out/mut-build.txt" 2>&1) &
    dr_mut_pid=$!
}
dr_mutant_tests() {
    wait "$dr_mut_pid"
    cat "$out/mut-build.txt"
    (cd /tmp/mut/build-gpu && timeout 100 ./verify/gpu/test_gpu_layers > "$out/mutant-layers.log" 2>&1)
    echo "mutants: test_gpu_layers exit $? (must be nonzero)"
    grep -E "$1|FAILED|PASSED" "$out/mutant-layers.log" | head -12
    (cd /tmp/mut/build-gpu && timeout 100 ./verify/gpu/test_gpu_train > "$out/mutant-train.log" 2>&1)
    echo "mutants: test_gpu_train exit $? (must be nonzero)"
    grep -E "$2|FAILED|PASSED" "$out/mutant-train.log" | head -14
    gzip -f "$out"/mutant-*.log
}
dr_mnist_begin() {
    local name=$1
    DL=${4:-$2} MUTANTS=${MUTANTS:-1}
    case "$DL" in '' | *[!0-9]*) echo "$name.sh: SECONDS '$DL': expected a whole number of seconds" >&2; exit 2 ;; esac
    case "$MUTANTS" in 0 | 1) ;; *) echo "$name.sh: MUTANTS='$MUTANTS': expected 0 or 1" >&2; exit 2 ;; esac
    [ -n "${3:-}" ] || { echo "usage: $name.sh OUTDIR [SECONDS]: the folder for the logs is missing" >&2; exit 2; }
    dr_begin "$name" "$3"
    export DATA="$PWD/.data-mid/fashion-mnist"
}
