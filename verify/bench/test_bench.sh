#!/bin/sh
# `fivefold bench` (issue 5): the gate refuses a configuration whose checks fail (exit 3, the failed
# check named, no timing line, no result file), a passing configuration produces a JSON result with
# the schema's fields, and the timed outputs equal the gated one (#wrong 0).
# $FIVEFOLD is the binary; $MPIEXEC (optional) runs the multi-rank case.
set -u
ff=${FIVEFOLD:?set FIVEFOLD to the fivefold binary}
. "$(dirname "$0")/lib.sh"

# 1. A fault injected into any checked layer: refused, exit 3, nothing timed, no JSON.
for layer in conv1 pool1 fc1 softmax; do
    "$ff" bench --model mnist-cnn --mode serial --batch 2 --iters 2 --inject-fault $layer \
        --json "$tmp/refused.json" >"$tmp/out" 2>&1
    rc=$?
    if [ $rc -eq 3 ] && grep -q "gate refused" "$tmp/out" && grep -q "check failed: .*$layer" "$tmp/out" \
        && ! grep -q "median ms" "$tmp/out" && [ ! -e "$tmp/refused.json" ]; then
        ok "fault in $layer: refused with exit 3, nothing timed"
    else
        bad "fault in $layer: exit $rc (expected 3, gate refused, no timing, no JSON)"
    fi
done

# 2. A tampered golden (one byte flipped): the manifest refuses it before anything runs.
cp "${FF_SOURCE_DIR:?}/golden/data/mnist-cnn.h5" "$tmp/mnist-cnn.h5"
printf '\001' | dd of="$tmp/mnist-cnn.h5" bs=1 seek=5000 conv=notrunc 2>/dev/null
"$ff" bench --model mnist-cnn --mode serial --batch 2 --iters 2 --golden "$tmp/mnist-cnn.h5" >"$tmp/out" 2>&1
rc=$?
if [ $rc -ne 0 ] && ! grep -q "median ms" "$tmp/out"; then ok "tampered golden: refused (exit $rc)"; else bad "tampered golden: exit $rc"; fi

# 3. A passing configuration: a result with every field of schema fivefold-bench/1, #wrong 0.
"$ff" bench --model mnist-cnn --mode serial --batch 3 --iters 3 --warmup 1 --json "$tmp/r.json" >"$tmp/out" 2>&1
rc=$?
if [ $rc -eq 0 ] && [ -s "$tmp/r.json" ]; then
    missing=""
    for key in '"schema": "fivefold-bench/1"' '"commit"' '"build"' '"flags"' '"machine"' '"cpu"' '"cores"' \
        '"mpi"' '"config"' '"model": "mnist-cnn"' '"mode": "serial"' '"split"' '"ranks": 1' '"batch": 3' \
        '"precision": "fp32"' '"backend": "own"' '"gate"' '"passed": true' '"checks"' '"golden"' '"digest"' \
        '"timing"' '"median_ms"' '"min_ms"' '"max_ms"' '"iters": 3' '"images_per_s"' '"phases"' '"wrong": 0' \
        '"cpu_vector_bits"'; do
        grep -qF "$key" "$tmp/r.json" || missing="$missing $key"
    done
    if [ -z "$missing" ]; then ok "passing configuration: result JSON complete"; else bad "result JSON lacks:$missing"; fi
else
    bad "passing configuration: exit $rc or no JSON"
fi

# 4. The gate's batch digest equals a plain forward of the same images (what was timed is what
#    was checked): N=3 is golden images 0,1,2, so infer on them must give the same digest.
gd=$(sed -n 's/.*batch digest \([0-9a-f]\{16\}\).*/\1/p' "$tmp/out")
if [ -n "$gd" ] && grep -q "#wrong" "$tmp/out" && grep -Eq " 0$" "$tmp/out"; then ok "timed runs equal the gated output (#wrong 0, digest $gd)"; else bad "no batch digest / #wrong column"; fi

# 5. Multi-rank: the same gate under mpiexec.
if [ -n "${MPIEXEC:-}" ]; then
    $MPIEXEC 2 "$ff" bench --model mnist-cnn --mode mpi --split rows --batch 3 --iters 2 --inject-fault conv2 >"$tmp/out" 2>&1
    rc=$?
    if [ $rc -eq 3 ] && grep -q "gate refused" "$tmp/out"; then ok "mpi rows P=2 fault: refused"; else bad "mpi rows P=2 fault: exit $rc"; fi
    $MPIEXEC 2 "$ff" bench --model mnist-cnn --mode mpi --split rows --batch 3 --iters 2 >"$tmp/out" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && grep -q "batch digest $gd" "$tmp/out"; then ok "mpi rows P=2: gated digest equals serial's"; else bad "mpi rows P=2: exit $rc"; fi
fi
# 6. --peer pytorch: every variant measured is listed, "peer" is the fastest of them and the speedup
#    is quoted against it (on one GPU eager and a CUDA graph; here, on the CPU, eager alone). The
#    checker must also refuse a result whose "peer" is not the fastest variant.
check_peer() {  # check_peer FILE: exit 0 when peer = min(variants) and speedup = peer / ours
    python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
v = d["peer_variants"]
best = min(x["median_ms"] for x in v)
t = d["timing"]
ours = t["resident_median_ms"] if d["speedup_basis"] == "resident_median_ms" else t["median_ms"]
ok = len(v) >= 1 and d["peer"]["median_ms"] == best and abs(d["speedup"] - best / ours) <= 1e-4 * d["speedup"]
sys.exit(0 if ok else 1)
PY
}
"$ff" bench --model mnist-cnn --mode serial --batch 1 --iters 3 --peer pytorch --json "$tmp/p.json" >"$tmp/out" 2>&1
rc=$?
if grep -q "PyTorch peer failed" "$tmp/out"; then
    echo "SKIP  --peer pytorch: no python3 with torch here (not counted)"
elif [ $rc -eq 0 ] && check_peer "$tmp/p.json"; then
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["peer_variants"].append({"name": "faster", "median_ms": d["peer"]["median_ms"] / 2}); json.dump(d, open(sys.argv[2], "w"))' \
        "$tmp/p.json" "$tmp/p-bad.json"
    if check_peer "$tmp/p-bad.json"; then
        bad "--peer pytorch: the checker accepted a peer that is not the fastest variant"
    else
        ok "--peer pytorch: peer is the fastest variant, the speedup is against it; a slower peer is refused"
    fi
else
    bad "--peer pytorch: exit $rc, or peer/peer_variants/speedup inconsistent in $tmp/p.json"
fi

# 7. A multi-rank CPU run is compared with PyTorch on as many threads as it has ranks (never with
#    torch's default, which is one thread where OpenMP sees a CPU quota).
if [ -n "${MPIEXEC:-}" ] && ! grep -q "PyTorch peer failed" "$tmp/out"; then
    $MPIEXEC 2 "$ff" bench --model mnist-cnn --mode mpi --split batch --batch 2 --iters 2 --peer pytorch \
        --json "$tmp/p2.json" >"$tmp/out" 2>&1
    rc=$?
    name=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["peer"]["name"])' "$tmp/p2.json" 2>/dev/null)
    if [ $rc -eq 0 ] && [ "$name" = "pytorch-eager-fp32-cpu-2t" ]; then
        ok "--peer pytorch at P = 2: PyTorch on 2 threads ($name)"
    else
        bad "--peer pytorch at P = 2: exit $rc, peer '$name' (expected pytorch-eager-fp32-cpu-2t)"
    fi
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
