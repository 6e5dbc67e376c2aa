#!/bin/sh
# One row of the CPU digest class (README, Modes): `fivefold infer --mode mpi --split S` under
# mpiexec with P ranks must print the same output digest as `--mode serial`, bit for bit. With --inject-fault L
# both runs perturb layer L: the digests must still agree with each other and must differ from
# the clean run (which shows this check can fail).
# The GPU class is checked the same way (verify/gpu/gpu_modes_equal.sh): FF_MODE (default mpi) is
# the multi-rank mode, FF_REF_MODE (default serial) the one-process mode of its class, and
# FF_MODE_FLAGS extra flags of the multi-rank run (e.g. --transport ipc).
# Usage: digest_equal.sh FIVEFOLD "MPIEXEC [PREFLAGS]" NUMPROC_FLAG P SPLIT MODEL BATCH [FAULT_LAYER]
set -u
ff=$1 mpiexec=$2 npflag=$3 P=$4 split=$5 model=$6 batch=$7 fault=${8:-}
mode=${FF_MODE:-mpi} ref=${FF_REF_MODE:-serial} flags=${FF_MODE_FLAGS:-}
tmp=$(mktemp) || exit 1
trap 'rm -f "$tmp"' EXIT
# Each run's exit status is fivefold's (or mpiexec's), not the filter's: a sanitizer report or a
# crash after the digest line was printed still fails the test. The output goes to a file first.
digest_of() { sed -n 's/^output digest: \([0-9a-f]\{16\}\)$/\1/p' "$tmp"; }
run_ref() {
  "$ff" infer --model "$model" --batch "$batch" --seed 3 --mode "$ref" "$@" >"$tmp" 2>&1 || { cat "$tmp"; return 1; }
  digest_of
}
run_mode() {
  # shellcheck disable=SC2086  # mpiexec (and the mode's flags) may carry several words
  $mpiexec "$npflag" "$P" "$ff" infer --model "$model" --batch "$batch" --seed 3 --mode "$mode" \
    --split "$split" $flags "$@" >"$tmp" 2>&1 || { cat "$tmp"; return 1; }
  digest_of
}
case="$model $mode${flags:+ $flags} split=$split P=$P batch=$batch"
want=$(run_ref) || { echo "FAIL $case: the $ref run failed: $want"; exit 1; }
got=$(run_mode) || { echo "FAIL $case: the $mode run failed: $got"; exit 1; }
if [ -z "$want" ] || [ "$want" != "$got" ]; then
  echo "FAIL $case: digest $got, $ref $want"
  exit 1
fi
echo "PASS $case: digest $got = $ref"
if [ -n "$fault" ]; then
  fwant=$(run_ref --inject-fault "$fault") || { echo "FAIL $case: $ref with the fault failed: $fwant"; exit 1; }
  fgot=$(run_mode --inject-fault "$fault") || { echo "FAIL $case: $mode with the fault failed: $fgot"; exit 1; }
  if [ -z "$fgot" ] || [ "$fgot" != "$fwant" ] || [ "$fgot" = "$want" ]; then
    echo "FAIL $case fault@$fault: digest $fgot, $ref $fwant, clean $want"
    exit 1
  fi
  echo "PASS $case fault@$fault: digest $fgot = $ref with the same fault, != clean"
fi
