#!/usr/bin/env python3
"""Halo transfers against NCCL's own send/recv (issue 14: halos of >= 4 MB must reach >= 80 % of
the bandwidth NCCL's send/recv reaches for that size on the same GPU pair in the same run).

Reads `fivefold bench` JSON files of the rows split (their `timing.layers`: per layer, halo bytes
this rank sent and the layer's communication time) and the reference that `ff_nccl_p2p` printed
(`JSON {...}` lines or bare JSON lines: bytes, gbs_each_way), and prints one markdown row per
layer with a halo: bytes, time, GB/s each way, NCCL's GB/s at that size (interpolated in log size
between the measured sizes, clamped at the ends) and the ratio.

  python3 bench/halo_bandwidth.py --nccl OUT/nccl-p2p.jsonl OUT/json/*-rows-*.json [--check]

--check: exit 1 when a halo of at least --min-mb (default 4) MB is below --ratio (default 0.8)
of the reference. Exit 2 on bad input (the message names the file and what is wrong).
"""
import argparse
import json
import math
import sys


def load_reference(path):
    ref = []
    try:
        f = open(path)
    except OSError as e:
        raise SystemExit(f"halo_bandwidth: --nccl {path}: cannot read it ({e.strerror})")
    with f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if line.startswith("JSON "):
                line = line[5:]
            if not line.startswith("{"):
                continue
            try:
                j = json.loads(line)
                ref.append((float(j["bytes"]), float(j["gbs_each_way"])))
            except (ValueError, KeyError) as e:
                raise SystemExit(f"halo_bandwidth: {path}:{n}: not a send/recv record ({e})")
    if not ref:
        raise SystemExit(f"halo_bandwidth: {path}: no send/recv records")
    return sorted(ref)


def reference_at(ref, nbytes):
    """NCCL's GB/s at nbytes: linear in log(bytes) between the two nearest sizes, clamped."""
    if nbytes <= ref[0][0]:
        return ref[0][1]
    if nbytes >= ref[-1][0]:
        return ref[-1][1]
    for (b0, g0), (b1, g1) in zip(ref, ref[1:]):
        if b0 <= nbytes <= b1:
            t = (math.log(nbytes) - math.log(b0)) / (math.log(b1) - math.log(b0))
            return g0 + t * (g1 - g0)
    return ref[-1][1]


def rows(bench_path, ref):
    try:
        with open(bench_path) as f:
            j = json.load(f)
        cfg, layers = j["config"], j["timing"].get("layers", [])
    except (OSError, ValueError, KeyError) as e:
        raise SystemExit(f"halo_bandwidth: {bench_path}: not a fivefold bench result ({e})")
    case = f"{cfg.get('model')} {cfg.get('mode')} {cfg.get('split')} P={cfg.get('ranks')} N={cfg.get('batch')}"
    for L in layers:
        halo, ms = L.get("halo_bytes", 0), L.get("comm_ms", 0.0)
        if halo <= 0 or ms <= 0:
            continue
        gbs = halo / (ms / 1e3) / 1e9
        nccl = reference_at(ref, halo)
        yield case, L["layer"], halo, ms, gbs, nccl, gbs / nccl


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("bench", nargs="+", help="fivefold bench JSON files (rows split)")
    p.add_argument("--nccl", required=True, help="ff_nccl_p2p output (JSON lines)")
    p.add_argument("--check", action="store_true")
    p.add_argument("--min-mb", type=float, default=4.0)
    p.add_argument("--ratio", type=float, default=0.8)
    a = p.parse_args()
    ref = load_reference(a.nccl)
    print("| case | layer | halo MB | comm ms | GB/s each way | NCCL GB/s | ratio |")
    print("|---|---|---|---|---|---|---|")
    short = []
    for case, layer, halo, ms, gbs, nccl, ratio in (r for b in a.bench for r in rows(b, ref)):
        big = halo >= a.min_mb * 1e6
        mark = "" if not big else (" ✓" if ratio >= a.ratio else " ✗")
        print(f"| {case} | {layer} | {halo / 1e6:.2f} | {ms:.3f} | {gbs:.1f} | {nccl:.1f} | {ratio:.2f}{mark} |")
        if big and ratio < a.ratio:
            short.append(f"{case} {layer}: {ratio:.2f}")
    if a.check and short:
        print(f"halo_bandwidth: below {a.ratio:.0%} of NCCL's send/recv: " + "; ".join(short), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
