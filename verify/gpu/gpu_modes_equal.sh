#!/bin/sh
# One row of the GPU digest class across modes (docs/ARCHITECTURE.md §7): `fivefold verify --mode
# MODE --split S` under mpiexec with P ranks passes every golden check, and `fivefold infer` in that
# mode prints the same output digest as `--mode cuda`, bit for bit (with a fault layer: equal with
# the same fault, different from the clean run) — the digest comparison is verify/mpi/digest_equal.sh's,
# with cuda as the reference. MODE may name the direct mode's transport: direct:nccl, direct:ipc
# (plain direct: auto). Exits 77 (CTest: skipped) when this machine has no GPU, or for direct:nccl
# (one GPU per rank) fewer GPUs than ranks.
# Usage: gpu_modes_equal.sh FIVEFOLD "MPIEXEC [PREFLAGS]" NUMPROC_FLAG P MODE SPLIT MODEL BATCH [FAULT_LAYER]
set -u
ff=$1 mpiexec=$2 npflag=$3 P=$4 mode=$5 split=$6 model=$7 batch=$8 fault=${9:-}
transport=""
case "$mode" in direct:*) transport=${mode#direct:}; mode=direct ;; esac
tflag=${transport:+--transport $transport}
tmp=$(mktemp) || exit 1
trap 'rm -f "$tmp"' EXIT
case="$model $mode${transport:+ ($transport)} split=$split P=$P batch=$batch"
"$ff" infer --model "$model" --batch 1 --mode cuda >"$tmp" 2>&1
if [ $? -eq 77 ]; then echo "SKIP $case: no GPU here ($(tail -1 "$tmp"))"; exit 77; fi
if [ "$transport" = nccl ]; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  if [ "${gpus:-0}" -lt "$P" ]; then
    echo "SKIP $case: direct over NCCL needs one GPU per rank; this machine has ${gpus:-0}"
    exit 77
  fi
fi
# shellcheck disable=SC2086  # mpiexec and the transport flag may carry several words
if ! $mpiexec "$npflag" "$P" "$ff" verify --model "$model" --mode "$mode" --split "$split" $tflag >"$tmp" 2>&1; then
  cat "$tmp"
  echo "FAIL $case: verify failed"
  exit 1
fi
echo "PASS $case: verify: $(grep -E '^[0-9]+ passed, [0-9]+ failed' "$tmp" | tail -1)"
FF_MODE=$mode FF_REF_MODE=cuda FF_MODE_FLAGS=$tflag \
  exec sh "$(dirname "$0")/../mpi/digest_equal.sh" "$ff" "$mpiexec" "$npflag" "$P" "$split" "$model" "$batch" $fault
