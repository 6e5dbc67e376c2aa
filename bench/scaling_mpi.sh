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
#   REPEATS    rounds (default: 1). Each round launches every configuration once, in the same
#              order, so all configurations see the same (drifting) machine; a configuration's
#              figure is the median over rounds of each launch's median, and the paired efficiency
#              is the median over rounds of (P=1 launch / (P x P-rank launch)) of the same round.
#              On a shared VM one launch can land on a slow core and stay there, and the machine's
#              speed drifts within minutes: rounds measure the configuration, not that luck.
#   OUT        JSON path                       (default: bench/results/scaling_mpi_<host>.json),
#              rewritten after every round ("repeats": rounds done), so a run cut short keeps them
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
for v in "ITERS=$ITERS" "REPEATS=$REPEATS" "BATCH=$BATCH"; do
  case ${v#*=} in
    '' | *[!0-9]* | 0) echo "scaling_mpi.sh: $v: expected a positive integer" >&2; exit 2 ;;
  esac
done
host=$(hostname -s 2>/dev/null || echo host)
OUT=${OUT:-bench/results/scaling_mpi_${host}.json}
mkdir -p "$(dirname "$OUT")"
log=$(mktemp)

# run LABEL CMD...: prints "ms digest" from the command's "time:" and "output digest:" lines.
# cpu_snap: "total steal" jiffies of all CPUs from /proc/stat (steal: time the hypervisor ran
# someone else on our vCPUs; "0 0" where there is no /proc/stat).
cpu_snap() {
  awk '/^cpu / {t = 0; for (i = 2; i <= NF; i++) t += $i; print t, $9; exit}' /proc/stat 2>/dev/null || echo "0 0"
}
run() {
  label=$1
  shift
  echo "== $label: $*" >&2
  snap0=$(cpu_snap)
  if ! "$@" > "$log" 2>&1; then
    cat "$log" >&2
    echo "run failed: $label" >&2
    exit 1
  fi
  ms=$(sed -n 's/^time: \([0-9.]*\) ms.*/\1/p' "$log" | head -n 1)
  fastest=$(sed -n 's/^time: .*(min \([0-9.]*\),.*/\1/p' "$log" | head -n 1)
  dg=$(sed -n 's/^output digest: \([0-9a-f]*\)$/\1/p' "$log" | head -n 1)
  [ -n "$ms" ] && [ -n "$dg" ] || { cat "$log" >&2; echo "no time/digest in output: $label" >&2; exit 1; }
  steal=$(echo "$snap0 $(cpu_snap)" | awk '{dt = $3 - $1; printf "%.1f", (dt > 0 ? 100 * ($4 - $2) / dt : 0)}')
  # fastest and slowest rank's compute per forward (from --trace; "-" for serial): ranks given
  # the same work that differ a lot are a slow core, not the code
  comp=$(awk '/^trace \(rank/ {r = $3} /^  [a-z]/ && $2 ~ /^[0-9.]+$/ {s[r] += $2}
              END {n = 0; for (k in s) {if (n == 0 || s[k] < lo) lo = s[k]; if (n == 0 || s[k] > hi) hi = s[k]; n++}
                   if (n > 1) printf "%.1f/%.1f", lo, hi; else print "-"}' "$log")
  echo "   $ms ms, steal $steal % of all CPU time during the launch, rank compute min/max $comp ms" >&2
  echo "$ms $dg $steal $comp ${fastest:-$ms}"
}

# summary FILE: "median digest launches steals computes best" over the lines "ms digest steal comp
# fastest" of FILE (best: the fastest single forward of all launches) (digest
# "mixed" when the launches disagree: the digest check below then fails).
summary() {
  awk '{ms[NR] = $1; st[NR] = $3; cp[NR] = $4; if (NR == 1 || $5 < best) best = $5; if (NR == 1) d = $2; else if ($2 != d) d = "mixed"}
       END {n = NR; for (i = 1; i <= n; i++) s[i] = ms[i];
            for (i = 2; i <= n; i++) {v = s[i]; j = i - 1; while (j > 0 && s[j] > v) {s[j + 1] = s[j]; j--} s[j + 1] = v}
            med = (n % 2) ? s[(n + 1) / 2] : (s[n / 2] + s[n / 2 + 1]) / 2;
            l = ""; t = ""; c = "";
            for (i = 1; i <= n; i++) {l = l (i > 1 ? "," : "") ms[i]; t = t (i > 1 ? "," : "") st[i];
                                      split(cp[i], mm, "/"); c = c (i > 1 ? "," : "") (cp[i] == "-" ? "null" : "[" mm[1] "," mm[2] "]")}
            print med, d, l, t, c, best}' "$1"
}
# paired_eff BASEFILE FILE P: median over rounds of base_ms / (P * ms).
paired_eff() {
  # each line is "ms digest steal comp fastest": the pasted line's field 6 is FILE's ms
  paste -d ' ' "$1" "$2" | awk -v p="$3" '{r[NR] = $1 / (p * $6)}
       END {n = NR; for (i = 2; i <= n; i++) {v = r[i]; j = i - 1; while (j > 0 && r[j] > v) {r[j + 1] = r[j]; j--} r[j + 1] = v}
            printf "%.3f", (n % 2) ? r[(n + 1) / 2] : (r[n / 2] + r[n / 2 + 1]) / 2}'
}

common="--model $MODEL --batch $BATCH --iters $ITERS"
tmp=$(mktemp -d)
trap 'rm -f "$log"; rm -rf "$tmp"' EXIT
configs=serial
for split in $SPLITS; do
  for P in $RANKS; do configs="$configs $split:$P"; done
done
# write_json ROUNDS: the JSON of the rounds done so far (written after every round, through a
# temporary file, so a run cut short by a time limit keeps its finished rounds); sets bad=1 when
# a configuration's digest differs from serial's.
write_json() {
  rounds_done=$1
  set -- $(summary "$tmp/serial")
  serial_ms=$1 serial_dg=$2 serial_runs=$3 serial_steal=$4 serial_best=$6
  bad=0
  rows=""
  for split in $SPLITS; do
    base_ms="" base_file=""
    for P in $RANKS; do
      f="$tmp/${split}_$P"
      set -- $(summary "$f")
      ms=$1 dg=$2 runs=$3 steal=$4 comps=$5 best=$6
      [ -z "$base_ms" ] && base_ms=$ms base_file=$f base_p=$P base_best=$best
      peff=$(paired_eff "$base_file" "$f" "$((P / base_p))")
      ok=true
      [ "$dg" = "$serial_dg" ] || { ok=false; bad=1; }
      row=$(awk -v s="$split" -v p="$P" -v ms="$ms" -v b="$base_ms" -v ser="$serial_ms" -v ok="$ok" -v dg="$dg" -v runs="$runs" -v steal="$steal" -v peff="$peff" -v comps="$comps" -v best="$best" -v bb="$base_best" 'BEGIN {
        sp = b / ms; sps = ser / ms;
        printf "    {\"split\": \"%s\", \"ranks\": %d, \"median_ms\": %.3f, \"launch_medians_ms\": [%s], \"launch_steal_pct\": [%s], \"launch_rank_compute_min_max_ms\": [%s], \"speedup\": %.3f, \"efficiency\": %.3f, \"efficiency_paired\": %s, \"best_ms\": %.3f, \"efficiency_best\": %.3f, \"speedup_vs_serial\": %.3f, \"efficiency_vs_serial\": %.3f, \"digest\": \"%s\", \"digest_ok\": %s}", s, p, ms, runs, steal, comps, sp, sp / p, peff, best, bb / (p * best), sps, sps / p, dg, ok }')
      [ "$rounds_done" -lt "$REPEATS" ] || echo "$row" >&2
      rows="${rows:+$rows,
}$row"
    done
  done
  commit=${FF_SOURCE_COMMIT:-$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)}
  mpiver=$($MPIEXEC --version 2>&1 | head -n 2 | tr '\n' ' ' | sed 's/"/\\"/g')
  cpus=$(nproc 2>/dev/null || echo 0)
  cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1 | sed 's/"/\\"/g')
  cat > "$OUT.part" <<JSON
{
  "benchmark": "scaling_mpi",
  "model": "$MODEL",
  "batch": $BATCH,
  "iters": $ITERS,
  "repeats": $rounds_done,
  "repeats_planned": $REPEATS,
  "commit": "$commit",
  "host": "$host",
  "cpu": "$cpu",
  "cpus": $cpus,
  "mpiexec": "$MPIEXEC $NP_FLAG P",
  "mpi": "$mpiver",
  "serial_median_ms": $serial_ms,
  "serial_launch_medians_ms": [$serial_runs],
  "serial_best_ms": $serial_best,
  "serial_launch_steal_pct": [$serial_steal],
  "serial_digest": "$serial_dg",
  "note": "REPEATS rounds, each launching every configuration once in the same order; median_ms = median over the rounds of each launch's median of ITERS forwards; efficiency_paired = median over rounds of (P=1 launch / (P x this launch)) within one round; best_ms = the fastest single forward over all launches, efficiency_best = the same split's best at P=1 / (P x best): what the code does when no rank's core is slowed by a neighbour (a multi-rank forward is only fast when every rank is); launch_rank_compute_min_max_ms = the fastest and slowest rank's compute per forward in each launch (--trace; a wide gap with equal work is a slow core); launch_steal_pct = the hypervisor's steal time over all CPUs during each launch (/proc/stat); speedup = same split at P=1 / P ranks; efficiency = speedup / P; *_vs_serial use the serial mode instead",
  "results": [
$rows
  ]
}
JSON
  mv "$OUT.part" "$OUT"
}

k=1
while [ "$k" -le "$REPEATS" ]; do
  for c in $configs; do
    if [ "$c" = serial ]; then
      out=$(run "serial (round $k of $REPEATS)" "$FIVEFOLD" infer $common) || exit 1
    else
      split=${c%:*} P=${c#*:}
      # shellcheck disable=SC2086  # MPIEXEC may carry several words
      out=$(run "$split P=$P (round $k of $REPEATS)" $MPIEXEC "$NP_FLAG" "$P" "$FIVEFOLD" infer $common --mode mpi \
        --split "$split" --trace) || exit 1
    fi
    echo "$out" >> "$tmp/$(echo "$c" | tr ':' '_')"
  done
  write_json "$k"
  echo "-- round $k of $REPEATS done: $OUT" >&2
  k=$((k + 1))
done

echo "wrote $OUT" >&2
exit $bad
