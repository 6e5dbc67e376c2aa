#!/usr/bin/env python3
"""Plots a bench/train_bench.py result: ms per step on 1, 2, 4 ... GPUs, fivefold against PyTorch.

    python3 bench/plot_train_bench.py RESULT.json [--batch B] [--out RESULT.png]

One group of bars per GPU count of the batch's runs (the first batch of the file, or --batch):
fivefold's fastest run on that many ranks (cuda on one GPU, direct:P or hybrid:P on P) beside
PyTorch's fastest (graph or eager on one GPU, ddp:P on P), each bar labelled with its ms per step
and run; dotted, fivefold's one-GPU step divided by P (ideal scaling). The title names the model,
batch and GPU. Prints the same figures as a table with each side's scaling from its own one-GPU
step. Needs matplotlib (Debian: python3-matplotlib; exit 77 without it, after the table);
--no-plot prints the table only. Exit 2 on a file that is missing, not JSON, not a
fivefold-train-bench/1 result, or without the batch asked for.
"""
import argparse
import json
import os
import sys

PROG = "plot_train_bench.py"
SCHEMA = "fivefold-train-bench/1"


class BadFile(Exception):
    pass


def load(path, batch=None):
    """(the file's JSON, the result of `batch` or the first one)."""
    try:
        with open(path) as f:
            d = json.load(f)
    except (OSError, ValueError) as e:
        raise BadFile(f"{path}: {e}") from None
    if not isinstance(d, dict) or d.get("schema") != SCHEMA:
        raise BadFile(f"{path}: expected a bench/train_bench.py result (\"schema\": \"{SCHEMA}\"), "
                      f"got schema {d.get('schema') if isinstance(d, dict) else type(d).__name__!r}")
    results = d.get("results")
    if not isinstance(results, list) or not results:
        raise BadFile(f"{path}: no \"results\"")
    for r in results:
        if batch is None or r.get("batch") == batch:
            return d, r
    raise BadFile(f"{path}: no result at batch {batch} (batches: {', '.join(str(r.get('batch')) for r in results)})")


def fastest_by_ranks(runs):
    """{ranks: (ms per step, label)}: the fastest run that finished at each rank count."""
    best = {}
    for x in runs:
        if "error" in x or not isinstance(x.get("ms_per_step"), (int, float)):
            continue
        p = int(x.get("ranks", 1))
        if p not in best or x["ms_per_step"] < best[p][0]:
            best[p] = (float(x["ms_per_step"]), x.get("label") or x.get("mode") or "?")
    return best


def table(ff, pt):
    """Rows of (GPUs, fivefold ms, label, scaling, PyTorch ms, label, scaling, fivefold's speedup)."""
    rows = []
    for p in sorted(set(ff) | set(pt)):
        f, t = ff.get(p), pt.get(p)
        rows.append((p, f, t,
                     ff[1][0] / f[0] if f and 1 in ff else None,
                     pt[1][0] / t[0] if t and 1 in pt else None,
                     t[0] / f[0] if f and t else None))
    return rows


def fmt(v, spec, none="-"):
    return none if v is None else format(v, spec)


def main(argv=None):
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    ap.add_argument("result")
    ap.add_argument("--batch", type=int, help="the batch to plot (default: the file's first)")
    ap.add_argument("--out", help="the PNG (default: RESULT with .png)")
    ap.add_argument("--no-plot", action="store_true", help="print the table only")
    a = ap.parse_args(argv)
    try:
        d, r = load(a.result, a.batch)
    except BadFile as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    ff, pt = fastest_by_ranks(r.get("fivefold", [])), fastest_by_ranks(r.get("pytorch", []))
    if not ff and not pt:
        print(f"{PROG}: {a.result}: no run at batch {r.get('batch')} finished", file=sys.stderr)
        return 2
    cfg, machine = d.get("config", {}), d.get("machine", {})
    gpu = machine.get("name") or "?"
    print(f"{cfg.get('model', '?')}, batch {r.get('batch')}, {gpu}: ms per step (scaling from the same side's "
          f"one-GPU step)")
    print(f"{'GPUs':>4}  {'fivefold':>22}  {'PyTorch':>22}  fivefold faster")
    for p, f, t, sf, st, ratio in table(ff, pt):
        fcell = f"{f[0]:.2f} {f[1]} ({fmt(sf, '.2f')}x)" if f else "-"
        tcell = f"{t[0]:.2f} {t[1]} ({fmt(st, '.2f')}x)" if t else "-"
        print(f"{p:>4}  {fcell:>22}  {tcell:>22}  {fmt(ratio, '.2f')}{'x' if ratio else ''}")
    if a.no_plot:
        return 0
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"{PROG}: no matplotlib (Debian: apt-get install python3-matplotlib): table only", file=sys.stderr)
        return 77
    counts = sorted(set(ff) | set(pt))
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    w = 0.38
    top = max(v[0] for side in (ff, pt) for v in side.values())
    for side, dx, name in ((ff, -w / 2, "fivefold"), (pt, w / 2, "PyTorch")):
        xs = [i + dx for i, p in enumerate(counts) if p in side]
        ys = [side[p][0] for p in counts if p in side]
        ax.bar(xs, ys, w, label=f"{name} (fastest run on P GPUs)")
        for x, p in zip(xs, [p for p in counts if p in side]):
            ax.text(x, side[p][0] + top * 0.01, f"{side[p][0]:.2f}\n{side[p][1]}", ha="center", va="bottom",
                    fontsize=7)
    if 1 in ff:
        for i, p in enumerate(counts):
            ax.plot([i - w, i + w], [ff[1][0] / p] * 2, "k:", lw=1)
    ax.set_xticks(range(len(counts)), [f"{p} GPU{'s' if p > 1 else ''}" for p in counts])
    ax.set_ylim(0, top * 1.18)
    ax.set_ylabel("ms per step (lower is faster)")
    ax.set_title(f"{cfg.get('model', '?')}, batch {r.get('batch')}, {gpu} (dotted: fivefold's one-GPU step / P)",
                 fontsize=9)
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    out = a.out or os.path.splitext(a.result)[0] + ".png"
    fig.savefig(out, dpi=120)
    print(f"written: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
