#!/bin/sh
# The scaling tools (issue 4 §6) on a tiny configuration: bench/scaling_mpi.sh writes a JSON with
# every field, one entry per launch, and exits 1 with "digest_ok": false when a multi-rank run's
# output differs from serial's (a fault injected into mode mpi only); bad numbers are exit 2;
# bench/core_probe.sh writes one speed per CPU. Timings are not asserted (a test is not a
# benchmark); the structure and the digest check are.
# $FIVEFOLD is the binary, $FF_SOURCE_DIR the repository, $MPIEXEC the launcher with its flags.
set -u
ff=${FIVEFOLD:?set FIVEFOLD to the fivefold binary}
src=${FF_SOURCE_DIR:?set FF_SOURCE_DIR to the repository}
mpiexec=${MPIEXEC:-mpiexec}
command -v python3 > /dev/null || { echo "SKIP  no python3 to read the JSON"; exit 77; }
. "$(dirname "$0")/lib.sh"
# json FILE EXPR: evaluates a Python expression over the parsed file as d (exit 0 when true)
json() { python3 -c "import json, sys; d = json.load(open(sys.argv[1])); sys.exit(0 if ($2) else 1)" "$1"; }

scaling() {  # scaling OUT [VAR=VALUE...]: the tiny configuration, extra environment appended
  out=$1
  shift
  env FIVEFOLD="$ff" MPIEXEC="$mpiexec" MODEL=mnist-cnn BATCH=4 RANKS="1 2" SPLITS="batch rows" ITERS=2 \
    REPEATS=2 OUT="$out" "$@" sh "$src/bench/scaling_mpi.sh" > "$tmp/out" 2>&1
}

# 1. A correct run: exit 0, every configuration, two launches each, digests equal serial's.
scaling "$tmp/s.json"
rc=$?
if [ $rc -eq 0 ] && json "$tmp/s.json" '
    d["repeats"] == 2 and d["repeats_planned"] == 2 and d["serial_best_ms"] > 0 and
    [(r["split"], r["ranks"]) for r in d["results"]] == [("batch", 1), ("batch", 2), ("rows", 1), ("rows", 2)] and
    all(r["digest_ok"] and r["digest"] == d["serial_digest"] and len(r["launch_medians_ms"]) == 2 and
        len(r["launch_rank_compute_min_max_ms"]) == 2 and r["best_ms"] > 0 and r["efficiency_best"] > 0 and
        r["efficiency_paired"] > 0 for r in d["results"]) and
    all(c is None for r in d["results"] if r["ranks"] == 1 for c in r["launch_rank_compute_min_max_ms"]) and
    all(c[0] <= c[1] for r in d["results"] if r["ranks"] == 2 for c in r["launch_rank_compute_min_max_ms"])'; then
    ok "scaling_mpi.sh: JSON with every configuration, launch and rank-compute field; digests equal serial"
else
    bad "scaling_mpi.sh: exit $rc or a missing/wrong field"
fi

# 1b. bench/plot_scaling.py reads it (table only here) and refuses a file of another benchmark.
python3 "$src/bench/plot_scaling.py" --no-plot "$tmp/s.json" > "$tmp/out" 2>&1
rc=$?
if [ $rc -eq 0 ] && [ "$(grep -c '^  \(batch\|rows\) .* ok$' "$tmp/out")" -eq 4 ]; then
    ok "plot_scaling.py: a table row per configuration"
else
    bad "plot_scaling.py: exit $rc or not 4 rows"
fi
python3 "$src/bench/plot_scaling.py" --no-plot "$src/bench/testdata/serial_alexnet_b1.json" > "$tmp/out" 2>&1
rc=$?
if [ $rc -eq 2 ] && grep -q "expected a bench/scaling_mpi.sh result" "$tmp/out"; then
    ok "plot_scaling.py: another benchmark's JSON is exit 2"
else
    bad "plot_scaling.py on a fivefold-bench file: exit $rc (expected 2)"
fi

# 2. A multi-rank run that computes something else (a fault injected into mode mpi's conv1, serial
#    untouched): exit 1 and digest_ok false for the mpi rows, true for none of them.
cat > "$tmp/faulty" <<EOF
#!/bin/sh
case " \$* " in *" --mode mpi "*) exec "$ff" "\$@" --inject-fault conv1 ;; esac
exec "$ff" "\$@"
EOF
chmod +x "$tmp/faulty"
env FIVEFOLD="$tmp/faulty" MPIEXEC="$mpiexec" MODEL=mnist-cnn BATCH=4 RANKS="1 2" SPLITS="batch" ITERS=1 \
  REPEATS=1 OUT="$tmp/f.json" sh "$src/bench/scaling_mpi.sh" > "$tmp/out" 2>&1
rc=$?
if [ $rc -eq 1 ] && json "$tmp/f.json" 'not any(r["digest_ok"] for r in d["results"])'; then
    ok "scaling_mpi.sh: a wrong multi-rank output gives exit 1 and digest_ok false"
else
    bad "scaling_mpi.sh with a fault in mode mpi: exit $rc (expected 1, digest_ok false)"
fi

# 3. Bad numbers: a clear message and exit 2, nothing run.
for v in ITERS=abc REPEATS=0 BATCH=-3; do
    scaling "$tmp/bad.json" "$v"
    rc=$?
    if [ $rc -eq 2 ] && grep -q "${v%%=*}=.*expected a positive integer" "$tmp/out" && [ ! -e "$tmp/bad.json" ]; then
        ok "scaling_mpi.sh $v: exit 2 with the value named"
    else
        bad "scaling_mpi.sh $v: exit $rc (expected 2)"
    fi
done

# 4. core_probe.sh: one figure per CPU alone, one pair per other CPU, the groups asked for.
if command -v taskset > /dev/null; then
    env FIVEFOLD="$ff" MODEL=mnist-cnn BATCH=1 ITERS=1 CPU_SETS="0;0-$(($(nproc) - 1))" OUT="$tmp/p.json" \
        sh "$src/bench/core_probe.sh" > "$tmp/out" 2>&1
    rc=$?
    n=$(nproc)
    if [ $rc -eq 0 ] && json "$tmp/p.json" "
        d['cpus'] == $n and len(d['alone_ms']) == $n and all(t > 0 for t in d['alone_ms']) and
        len(d['pair_with_cpu0_ms']) == $n - 1 and all(len(p) == 2 for p in d['pair_with_cpu0_ms']) and
        [len(g['ms']) for g in d['groups']] == [1, $n]"; then
        ok "core_probe.sh: $n CPUs alone, in pairs with CPU 0 and in groups"
    else
        bad "core_probe.sh: exit $rc or a wrong JSON"
    fi
    env FIVEFOLD="$ff" ITERS=x OUT="$tmp/p2.json" sh "$src/bench/core_probe.sh" > "$tmp/out" 2>&1
    rc=$?
    if [ $rc -eq 2 ] && grep -q "ITERS=x: expected a positive integer" "$tmp/out"; then
        ok "core_probe.sh ITERS=x: exit 2"
    else
        bad "core_probe.sh ITERS=x: exit $rc (expected 2)"
    fi
else
    echo "SKIP  core_probe.sh: no taskset"
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
