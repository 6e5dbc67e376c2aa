#!/usr/bin/env python3
"""Per-step kernel time of one rank from an Nsight Systems cuda_gpu_trace CSV (run3.sh).

Usage: profile_summary.py TRACE.csv STEPS
The steady state is the second half of the run: from the start of the middle GEMM launch to the
end of the trace, taken as STEPS / 2 steps (every step launches the same GEMMs). Prints, per step:
the time the GPU was busy (the union of all kernels and copies), each class's summed durations
(GEMMs, NCCL, copies, the rest), how long GEMMs ran while an NCCL kernel ran beside them, and the
ten largest kernels.
"""
import csv, sys
from collections import defaultdict


def col(header, *keys):
    for i, h in enumerate(header):
        if any(h.startswith(k) for k in keys):
            return i
    raise SystemExit(f"no column {keys} in {header}")


def union(iv):
    iv = sorted(iv)
    out = []
    for a, b in iv:
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def overlap(iv, cover):  # total length of iv's intervals inside the union `cover` (sorted, disjoint)
    import bisect
    starts = [c[0] for c in cover]
    tot = 0
    for a, b in iv:
        i = max(bisect.bisect_right(starts, a) - 1, 0)
        while i < len(cover) and cover[i][0] < b:
            tot += max(0, min(b, cover[i][1]) - max(a, cover[i][0]))
            i += 1
    return tot


def klass(name):
    n = name.lower()
    if "nccl" in n: return "nccl"
    if "gemm" in n or "cutlass" in n or "xmma" in n: return "gemm"
    if n.startswith("[cuda mem"): return "copy"
    return "other"


rows = list(csv.reader(open(sys.argv[1])))
steps = int(sys.argv[2])
h = rows[0]
cs, cd, cn = col(h, "Start"), col(h, "Duration"), col(h, "Name")
ev = [(int(r[cs]), int(r[cs]) + int(r[cd]), r[cn]) for r in rows[1:] if r[cs].isdigit()]
ev.sort()
gemms = [e for e in ev if klass(e[2]) == "gemm"]
t0 = gemms[len(gemms) // 2][0]
w = [e for e in ev if e[0] >= t0]
n = steps // 2
span = max(e[1] for e in w) - t0
busy = sum(b - a for a, b in union([(a, b) for a, b, _ in w]))
by = defaultdict(int)
names = defaultdict(int)
for a, b, nm in w:
    by[klass(nm)] += b - a
    names[nm[:90]] += b - a
nccl_cover = union([(a, b) for a, b, nm in w if klass(nm) == "nccl"])
g_with_nccl = overlap([(a, b) for a, b, nm in w if klass(nm) == "gemm"], nccl_cover)
ms = lambda x: x / n / 1e6
print(f"{sys.argv[1]}: {n} steady steps, {ms(span):.3f} ms/step wall, GPU busy {ms(busy):.3f} ms/step")
print("per step: " + ", ".join(f"{k} {ms(v):.3f} ms" for k, v in sorted(by.items())))
print(f"GEMM time while an NCCL kernel ran: {ms(g_with_nccl):.3f} ms/step of {ms(by['gemm']):.3f}")
for nm, v in sorted(names.items(), key=lambda x: -x[1])[:10]:
    print(f"  {ms(v):8.3f} ms  {nm}")
