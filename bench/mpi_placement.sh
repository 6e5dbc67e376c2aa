#!/bin/sh
# Where the ranks run matters as much as the code: on a VM whose 16 vCPUs may be 8 cores x 2
# hyperthreads, two ranks on the sibling threads of one core each run at ~60 % speed, and the rows
# split waits for its slowest rank at every halo. This script times one configuration (default:
# AlexNet N = 16, rows split, P = 4) under several mpiexec placements, keeps each run's per-rank
# trace (compute per rank shows a slow core at once) and writes a JSON table. Benchmark only; the
# output digest of every run must equal serial's (exit 1 otherwise).
#
# Environment (all optional): FIVEFOLD (build/fivefold), MPIEXEC_BASE ("mpiexec --oversubscribe"),
# P (4), SPLIT (rows), MODEL (alexnet), BATCH (16), ITERS (5), OUT (bench/results/mpi_placement.json),
# PLACEMENTS: ';'-separated mpiexec flag sets (default: Open MPI's --bind-to core, two cores' worth
# of hardware threads per rank, spread by socket/package, and no binding).
set -eu
FIVEFOLD=${FIVEFOLD:-build/fivefold}
MPIEXEC_BASE=${MPIEXEC_BASE:-mpiexec --oversubscribe}
P=${P:-4}
SPLIT=${SPLIT:-rows}
MODEL=${MODEL:-alexnet}
BATCH=${BATCH:-16}
ITERS=${ITERS:-5}
OUT=${OUT:-bench/results/mpi_placement.json}
for v in "P=$P" "ITERS=$ITERS" "BATCH=$BATCH"; do
  case ${v#*=} in
    '' | *[!0-9]* | 0) echo "mpi_placement.sh: $v: expected a positive integer" >&2; exit 2 ;;
  esac
done
PLACEMENTS=${PLACEMENTS:-"--bind-to core;--map-by slot:PE=2 --bind-to core;--map-by numa --bind-to core;--bind-to none"}
mkdir -p "$(dirname "$OUT")"
log=$(mktemp)
trap 'rm -f "$log"' EXIT

(lscpu | grep -E '^(Model name|CPU\(s\)|Thread|Core|Socket|NUMA node\(s\))' || true) >&2
common="--model $MODEL --batch $BATCH --iters $ITERS"
"$FIVEFOLD" infer $common > "$log" 2>&1 || { cat "$log" >&2; exit 1; }
serial_ms=$(sed -n 's/^time: \([0-9.]*\) ms.*/\1/p' "$log" | head -n 1)
serial_dg=$(sed -n 's/^output digest: \([0-9a-f]*\)$/\1/p' "$log" | head -n 1)
echo "serial: $serial_ms ms, digest $serial_dg" >&2
rows=""
bad=0
IFS=';'
for place in $PLACEMENTS; do
  unset IFS
  echo "== $place" >&2
  # shellcheck disable=SC2086  # the flag sets are several words on purpose
  if ! $MPIEXEC_BASE $place -n "$P" "$FIVEFOLD" infer $common --mode mpi --split "$SPLIT" --trace > "$log" 2>&1; then
    cat "$log" >&2
    echo "run failed: $place (skipped)" >&2
    IFS=';'
    continue
  fi
  ms=$(sed -n 's/^time: \([0-9.]*\) ms.*/\1/p' "$log" | head -n 1)
  dg=$(sed -n 's/^output digest: \([0-9a-f]*\)$/\1/p' "$log" | head -n 1)
  # per-rank compute sums from the traces: the spread says whether one core is slow
  comp=$(awk '/^trace \(rank/ {r=$3} /^  [a-z]/ && $2 ~ /^[0-9.]+$/ {s[r]+=$2} END {o=""; for (k=0; k<32; k++) if (k in s) o=o (o==""?"":", ") sprintf("%.1f", s[k]); print o}' "$log")
  ok=true
  [ "$dg" = "$serial_dg" ] || { ok=false; bad=1; }
  eff=$(awk -v s="$serial_ms" -v t="$ms" -v p="$P" 'BEGIN {printf "%.3f", s / (p * t)}')
  echo "   $ms ms, efficiency vs serial $eff, compute per rank [$comp] ms, digest $dg" >&2
  row=$(printf '{"mpiexec_flags": "%s", "median_ms": %s, "efficiency_vs_serial": %s, "compute_ms_per_rank": [%s], "digest_ok": %s}' \
    "$place" "$ms" "$eff" "$comp" "$ok")
  rows="${rows:+$rows,
}  $row"
  IFS=';'
done
unset IFS
cat > "$OUT" <<EOF
{"benchmark": "mpi_placement", "commit": "${FF_SOURCE_COMMIT:-$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)}", "model": "$MODEL", "batch": $BATCH, "split": "$SPLIT", "ranks": $P,
 "iters": $ITERS, "cpus": $(nproc), "serial_median_ms": $serial_ms, "serial_digest": "$serial_dg",
 "results": [
$rows
]}
EOF
echo "wrote $OUT" >&2
exit $bad
