#!/bin/sh
# How fast is each CPU of this machine, alone and beside others? A multi-rank efficiency figure is
# only as good as the slowest core its ranks landed on, and on a VM the vCPUs need not be equal:
# two may be hyperthreads of one physical core, or share it with another tenant without any steal
# time being reported. This script times the same serial forward (AlexNet, BATCH images, median of
# ITERS) pinned with taskset:
#   alone    on each CPU in turn, nothing else running
#   pair     on CPU 0 and CPU j at the same time, for every j: a CPU j that slows CPU 0 down is
#            its sibling
#   groups   on each set of CPU_SETS at the same time (default: 0-3, 0,4,8,12, 0-7, all)
# and writes JSON. Benchmark/diagnostic only: nothing is asserted but that every run succeeds.
#
# Environment (all optional): FIVEFOLD (build/fivefold), MODEL (alexnet), BATCH (2), ITERS (3),
# CPU_SETS (';'-separated taskset CPU lists), OUT (bench/results/core_probe.json).
set -eu
FIVEFOLD=${FIVEFOLD:-build/fivefold}
MODEL=${MODEL:-alexnet}
BATCH=${BATCH:-2}
ITERS=${ITERS:-3}
OUT=${OUT:-bench/results/core_probe.json}
for v in "ITERS=$ITERS" "BATCH=$BATCH"; do
  case ${v#*=} in
    '' | *[!0-9]* | 0) echo "core_probe.sh: $v: expected a positive integer" >&2; exit 2 ;;
  esac
done
command -v taskset > /dev/null || { echo "core_probe.sh: taskset (util-linux) not found" >&2; exit 2; }
ncpu=$(nproc)
last=$((ncpu - 1))
CPU_SETS=${CPU_SETS:-"0-3;0,4,8,12;0-7;0-$last"}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$(dirname "$OUT")"

# timed CPU FILE: one pinned forward; writes its median ms to FILE
timed() {
  taskset -c "$1" "$FIVEFOLD" infer --model "$MODEL" --batch "$BATCH" --iters "$ITERS" > "$2.log" 2>&1 ||
    { cat "$2.log" >&2; echo "core_probe.sh: run on CPU $1 failed" >&2; return 1; }
  sed -n 's/^time: \([0-9.]*\) ms.*/\1/p' "$2.log" | head -n 1 > "$2"
}
# together CPU...: runs one pinned forward per CPU at the same time; prints their ms, comma-separated
together() {
  i=0
  pids=""
  for c in "$@"; do
    timed "$c" "$tmp/t$i" &
    pids="$pids $!"
    i=$((i + 1))
  done
  for p in $pids; do wait "$p" || exit 1; done
  j=0
  o=""
  while [ "$j" -lt "$i" ]; do
    o="$o${o:+,}$(cat "$tmp/t$j")"
    j=$((j + 1))
  done
  echo "$o"
}
cpus_of() {  # "0-3" / "0,4,8" -> "0 1 2 3" / "0 4 8"
  echo "$1" | tr ',' '\n' | awk -F- '{if (NF == 2) for (i = $1; i <= $2; i++) print i; else print $1}' | tr '\n' ' '
}

alone=""
c=0
while [ "$c" -le "$last" ]; do
  t=$(together "$c")
  echo "alone  CPU $c: $t ms" >&2
  alone="$alone${alone:+, }$t"
  c=$((c + 1))
done
pairs=""
j=1
while [ "$j" -le "$last" ]; do
  t=$(together 0 "$j")
  echo "pair   CPU 0 + CPU $j: $t ms" >&2
  pairs="$pairs${pairs:+, }[$t]"
  j=$((j + 1))
done
groups=""
IFS=';'
for g in $CPU_SETS; do
  unset IFS
  # shellcheck disable=SC2046  # the CPU list is several words on purpose
  t=$(together $(cpus_of "$g"))
  echo "group  CPUs $g: $t ms" >&2
  groups="$groups${groups:+,
}    {\"cpus\": \"$g\", \"ms\": [$t]}"
  IFS=';'
done
unset IFS
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1 | sed 's/"/\\"/g')
cat > "$OUT" <<JSON
{
  "benchmark": "core_probe",
  "commit": "${FF_SOURCE_COMMIT:-$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)}",
  "cpu": "$cpu",
  "cpus": $ncpu,
  "model": "$MODEL",
  "batch": $BATCH,
  "iters": $ITERS,
  "note": "median ms of one serial forward pinned with taskset; alone[c]: CPU c with nothing else running; pair_with_cpu0[j-1]: [CPU 0, CPU j] run at the same time; groups: every CPU of the set at once",
  "alone_ms": [$alone],
  "pair_with_cpu0_ms": [$pairs],
  "groups": [
$groups
  ]
}
JSON
echo "wrote $OUT" >&2
