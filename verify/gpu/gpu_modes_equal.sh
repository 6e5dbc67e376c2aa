#!/bin/sh
# One row of the GPU digest class across modes (docs/ARCHITECTURE.md §7): `fivefold verify --mode
# MODE --split S` under mpiexec with P ranks passes every golden check, and `fivefold infer` in that
# mode prints the same output digest as `--mode cuda`, bit for bit. With a fault layer both runs
# perturb it: the digests must agree with each other and differ from the clean one (the check can
# fail). MODE may name the direct mode's transport: direct:nccl, direct:ipc (plain direct: auto).
# Exits 77 (CTest: skipped) when this machine has no GPU, or for direct:nccl (one GPU per rank)
# fewer GPUs than ranks.
# Usage: gpu_modes_equal.sh FIVEFOLD "MPIEXEC [PREFLAGS]" NUMPROC_FLAG P MODE SPLIT MODEL BATCH [FAULT_LAYER]
set -u
ff=$1 mpiexec=$2 npflag=$3 P=$4 mode=$5 split=$6 model=$7 batch=$8 fault=${9:-}
transport=""
case "$mode" in direct:*) transport=${mode#direct:}; mode=direct ;; esac
tflag=${transport:+--transport $transport}
tmp=$(mktemp) || exit 1
trap 'rm -f "$tmp"' EXIT
digest_of() { sed -n 's/^output digest: \([0-9a-f]\{16\}\)$/\1/p' "$tmp"; }
case="$model $mode${transport:+ ($transport)} split=$split P=$P batch=$batch"
"$ff" infer --model "$model" --batch 1 --mode cuda >"$tmp" 2>&1
rc=$?
if [ "$rc" -eq 77 ]; then echo "SKIP $case: no GPU here ($(tail -1 "$tmp"))"; exit 77; fi
if [ "$transport" = nccl ]; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  if [ "${gpus:-0}" -lt "$P" ]; then
    echo "SKIP $case: direct over NCCL needs one GPU per rank; this machine has ${gpus:-0}"
    exit 77
  fi
fi
run_cuda() {
  "$ff" infer --model "$model" --batch "$batch" --seed 3 --mode cuda "$@" >"$tmp" 2>&1 || { cat "$tmp"; return 1; }
  digest_of
}
run_mode() {
  # shellcheck disable=SC2086  # mpiexec may carry flags (e.g. --oversubscribe)
  $mpiexec "$npflag" "$P" "$ff" infer --model "$model" --batch "$batch" --seed 3 --mode "$mode" \
    --split "$split" $tflag "$@" >"$tmp" 2>&1 || { cat "$tmp"; return 1; }
  digest_of
}
# shellcheck disable=SC2086
if ! $mpiexec "$npflag" "$P" "$ff" verify --model "$model" --mode "$mode" --split "$split" $tflag >"$tmp" 2>&1; then
  cat "$tmp"
  echo "FAIL $case: verify failed"
  exit 1
fi
grep -E '^(verify|summary|digest)|checks' "$tmp" | tail -3
want=$(run_cuda) || { echo "FAIL $case: the cuda run failed: $want"; exit 1; }
got=$(run_mode) || { echo "FAIL $case: the $mode run failed: $got"; exit 1; }
if [ -z "$want" ] || [ "$want" != "$got" ]; then
  echo "FAIL $case: digest $got, cuda $want"
  exit 1
fi
echo "PASS $case: verify passed, digest $got = cuda"
if [ -n "$fault" ]; then
  fwant=$(run_cuda --inject-fault "$fault") || { echo "FAIL $case: cuda with the fault failed: $fwant"; exit 1; }
  fgot=$(run_mode --inject-fault "$fault") || { echo "FAIL $case: $mode with the fault failed: $fgot"; exit 1; }
  if [ -z "$fgot" ] || [ "$fgot" != "$fwant" ] || [ "$fgot" = "$want" ]; then
    echo "FAIL $case fault@$fault: digest $fgot, cuda $fwant, clean $want"
    exit 1
  fi
  echo "PASS $case fault@$fault: digest $fgot = cuda with the same fault, != clean"
fi
