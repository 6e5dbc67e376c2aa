#!/usr/bin/env bash
# Session 14's sixth GPU call (two GPUs, the last 160 s of device time): ce_probe.cu, whether
# NCCL's zero-CTA policy (copy engines, symmetric windows) removes the exchange's cost from
# concurrent fp32 GEMMs. Four configurations: default policy on cudaMalloc buffers, default on
# symmetric windows, zero-CTA on windows, zero-CTA on cudaMalloc buffers.
# Usage: bash bench/results/issue16-s14/run6.sh OUTDIR
set -uo pipefail
out=${1:?usage: run6.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")"
nvidia-smi -L
H=$(find /usr/local /usr/include /opt /usr/lib -name nccl.h 2>/dev/null | head -1)
L=$(find /usr/local /usr/lib /opt -name "libnccl.so*" 2>/dev/null | head -1)
echo "nccl.h: $H; $(grep -hE '#define NCCL_(MAJOR|MINOR|PATCH) ' "$H" | tr '\n' ' '); lib: $L"
nvcc -O2 -arch=sm_90 -I"$(dirname "$H")" ce_probe.cu -o /tmp/ce_probe -L"$(dirname "$L")" -lnccl -lcublas 2>&1 | tail -5
export LD_LIBRARY_PATH="$(dirname "$L")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" NCCL_NVLS_ENABLE=0
for cfg in "-1 0" "-1 1" "2 1" "2 0"; do
  rm -f /tmp/ce_id
  for r in 0 1; do timeout 40 /tmp/ce_probe $r 2 $cfg /tmp/ce_id 128 > "$out/r$r.log" 2>&1 & done
  wait
  cat "$out/r0.log" "$out/r1.log" | grep -v "^$" | head -4
done 2>&1 | tee "$out/ce_probe.txt"
