#!/bin/sh
# One row of the CPU digest class (README, Modes): `fivefold infer --mode mpi --split S` under
# mpiexec with P ranks must print the same output digest as `--mode serial`, bit for bit. With --inject-fault L
# both runs perturb layer L: the digests must still agree with each other and must differ from
# the clean run (which shows this check can fail).
# Usage: digest_equal.sh FIVEFOLD "MPIEXEC [PREFLAGS]" NUMPROC_FLAG P SPLIT MODEL BATCH [FAULT_LAYER]
set -u
ff=$1 mpiexec=$2 npflag=$3 P=$4 split=$5 model=$6 batch=$7 fault=${8:-}
tmp=$(mktemp) || exit 1
trap 'rm -f "$tmp"' EXIT
# Each run's exit status is fivefold's (or mpiexec's), not the filter's: a sanitizer report or a
# crash after the digest line was printed still fails the test. The output goes to a file first.
digest_of() { sed -n 's/^output digest: \([0-9a-f]\{16\}\)$/\1/p' "$tmp"; }
run_serial() {
  "$ff" infer --model "$model" --batch "$batch" --seed 3 "$@" >"$tmp" 2>&1 || { cat "$tmp"; return 1; }
  digest_of
}
run_mpi() {
  # shellcheck disable=SC2086  # mpiexec may carry flags (e.g. --oversubscribe)
  $mpiexec "$npflag" "$P" "$ff" infer --model "$model" --batch "$batch" --seed 3 --mode mpi \
    --split "$split" "$@" >"$tmp" 2>&1 || { cat "$tmp"; return 1; }
  digest_of
}
case="$model split=$split P=$P batch=$batch"
want=$(run_serial) || { echo "FAIL $case: the serial run failed: $want"; exit 1; }
got=$(run_mpi) || { echo "FAIL $case: the mpi run failed: $got"; exit 1; }
if [ -z "$want" ] || [ "$want" != "$got" ]; then
  echo "FAIL $case: digest $got, serial $want"
  exit 1
fi
echo "PASS $case: digest $got = serial"
if [ -n "$fault" ]; then
  fwant=$(run_serial --inject-fault "$fault") || { echo "FAIL $case: serial with the fault failed: $fwant"; exit 1; }
  fgot=$(run_mpi --inject-fault "$fault") || { echo "FAIL $case: mpi with the fault failed: $fgot"; exit 1; }
  if [ -z "$fgot" ] || [ "$fgot" != "$fwant" ] || [ "$fgot" = "$want" ]; then
    echo "FAIL $case fault@$fault: digest $fgot, serial $fwant, clean $want"
    exit 1
  fi
  echo "PASS $case fault@$fault: digest $fgot = serial with the same fault, != clean"
fi
