#!/bin/sh
# Scaling of mode mpi (issue 4 §6): AlexNet, batch N, P = 1 2 4 8 ranks for each split, plus the
# serial mode as the baseline. Each run's output digest must equal serial's (a wrong run is not
# timed: the row gets "digest_ok": false and the script exits 1 at the end). Writes JSON with the
# median forward time, speedup and parallel efficiency per P (vs the same split at P = 1, and vs
# serial).
#
# Environment (all optional):
#   FIVEFOLD   the binary                      (default: build/fivefold)
#   MPIEXEC    the launcher and its flags      (default: mpiexec; Open MPI as root needs e.g.
#              "mpiexec --oversubscribe --bind-to core" and OMPI_ALLOW_RUN_AS_ROOT=1
#              OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 in the environment)
#   NP_FLAG    rank-count flag                 (default: -n)
#   RANKS      rank counts                     (default: "1 2 4 8")
#   SPLITS     splits                          (default: "batch rows replicate")
#   MODEL      model                           (default: alexnet)
#   BATCH      images per forward              (default: 16)
#   ITERS      timed forwards (median taken)   (default: 5)
#   REPEATS    separate launches per configuration; the median of their medians is reported
#              (default: 1). On a shared VM one launch can land on a slow core and stay there:
#              repeats measure the configuration, not the luck of one placement.
#   OUT        JSON path                       (default: bench/results/scaling_mpi_<host>.json)
set -eu
FIVEFOLD=${FIVEFOLD:-build/fivefold}
MPIEXEC=${MPIEXEC:-mpiexec}
NP_FLAG=${NP_FLAG:--n}
RANKS=${RANKS:-"1 2 4 8"}
SPLITS=${SPLITS:-"batch rows replicate"}
MODEL=${MODEL:-alexnet}
BATCH=${BATCH:-16}
ITERS=${ITERS:-5}
REPEATS=${REPEATS:-1}
host=$(hostname -s 2>/dev/null || echo host)
OUT=${OUT:-bench/results/scaling_mpi_${host}.json}
mkdir -p "$(dirname "$OUT")"
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# run LABEL CMD...: prints "ms digest" from the command's "time:" and "output digest:" lines.
run() {
  label=$1
  shift
  echo "== $label: $*" >&2
  if ! "$@" > "$log" 2>&1; then
    cat "$log" >&2
    echo "run failed: $label" >&2
    exit 1
  fi
  ms=$(sed -n 's/^time: \([0-9.]*\) ms.*/\1/p' "$log" | head -n 1)
  dg=$(sed -n 's/^output digest: \([0-9a-f]*\)$/\1/p' "$log" | head -n 1)
  [ -n "$ms" ] && [ -n "$dg" ] || { cat "$log" >&2; echo "no time/digest in output: $label" >&2; exit 1; }
  echo "$ms $dg"
}

# repeat LABEL CMD...: REPEATS launches of run; prints "median_ms digest runs" (digest "mixed" when
# the launches disagree: a wrong run then fails the digest check below).
repeat() {
  label=$1
  shift
  all="" dgs=""
  k=0
  while [ "$k" -lt "$REPEATS" ]; do
    out=$(run "$label (launch $((k + 1)) of $REPEATS)" "$@") || exit 1
    all="$all ${out% *}"
    d=${out#* }
    [ -z "$dgs" ] && dgs=$d
    [ "$d" = "$dgs" ] || dgs=mixed
    k=$((k + 1))
  done
  med=$(echo $all | tr ' ' '\n' | sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}')
  echo "$med $dgs$(echo $all | tr ' ' ',' | sed 's/^/ /')"
}

common="--model $MODEL --batch $BATCH --iters $ITERS"
set -- $(repeat serial "$FIVEFOLD" infer $common)
serial_ms=$1 serial_dg=$2 serial_runs=$3
bad=0
rows=""
for split in $SPLITS; do
  base_ms=""
  for P in $RANKS; do
    # shellcheck disable=SC2086  # MPIEXEC may carry several words
    set -- $(repeat "$split P=$P" $MPIEXEC "$NP_FLAG" "$P" "$FIVEFOLD" infer $common --mode mpi --split "$split")
    ms=$1 dg=$2 runs=$3
    [ -z "$base_ms" ] && base_ms=$ms
    ok=true
    [ "$dg" = "$serial_dg" ] || { ok=false; bad=1; }
    row=$(awk -v s="$split" -v p="$P" -v ms="$ms" -v b="$base_ms" -v ser="$serial_ms" -v ok="$ok" -v dg="$dg" -v runs="$runs" 'BEGIN {
      sp = b / ms; sps = ser / ms;
      printf "    {\"split\": \"%s\", \"ranks\": %d, \"median_ms\": %.3f, \"launch_medians_ms\": [%s], \"speedup\": %.3f, \"efficiency\": %.3f, \"speedup_vs_serial\": %.3f, \"efficiency_vs_serial\": %.3f, \"digest\": \"%s\", \"digest_ok\": %s}", s, p, ms, runs, sp, sp / p, sps, sps / p, dg, ok }')
    echo "$row" >&2
    rows="${rows:+$rows,
}$row"
  done
done
commit=${FF_SOURCE_COMMIT:-$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)}
mpiver=$($MPIEXEC --version 2>&1 | head -n 2 | tr '\n' ' ' | sed 's/"/\\"/g')
cpus=$(nproc 2>/dev/null || echo 0)
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1 | sed 's/"/\\"/g')
cat > "$OUT" <<JSON
{
  "benchmark": "scaling_mpi",
  "model": "$MODEL",
  "batch": $BATCH,
  "iters": $ITERS,
  "repeats": $REPEATS,
  "commit": "$commit",
  "host": "$host",
  "cpu": "$cpu",
  "cpus": $cpus,
  "mpiexec": "$MPIEXEC $NP_FLAG P",
  "mpi": "$mpiver",
  "serial_median_ms": $serial_ms,
  "serial_launch_medians_ms": [$serial_runs],
  "serial_digest": "$serial_dg",
  "note": "median_ms = median over REPEATS launches of each launch's median of ITERS forwards; speedup = same split at P=1 / P ranks; efficiency = speedup / P; *_vs_serial use the serial mode instead",
  "results": [
$rows
  ]
}
JSON
echo "wrote $OUT" >&2
exit $bad
