#!/usr/bin/env python3
"""Side-by-side report of `fivefold bench` results (docs/ARCHITECTURE.md §8, issue 5 §5).

Reads result files (schema "fivefold-bench/1", one per run, default bench/results/*.json), prints
a markdown table — ours, the PyTorch peer, speedup, gate — and draws PNG plots:

  throughput_vs_batch.png  images/s against batch, one line per configuration, peers dashed
  scaling_vs_ranks.png     speedup against ranks of each multi-rank configuration over its
                           one-process mode (mpi over serial, hybrid/direct over cuda) at the same
                           model, batch, precision and backend, with the ideal line
  phases.png               share of each run's time per phase (compute, h2d, d2h, comm, host) as
                           stacked bars, the median time written above
  roofline.png             achieved GFLOP/s against arithmetic intensity (FLOP per byte of
                           compulsory memory traffic, see intensity()) under the roofs given by
                           --peak cpu:GFLOPS[:GB/s] / --peak gpu:GFLOPS[:GB/s], a panel per class

  --readme README.md  rewrites the part between `<!-- perf:begin -->` and `<!-- perf:end -->`
                      with the table and links to the plots (paths relative to the README).

When several files describe the same configuration (model, mode, split, ranks, batch, precision,
backend), the newest (its "created" field, else the file's mtime) is the one reported.

Exit codes: 0 ok; 2 bad input (a file that is not JSON, has another schema or lacks a field: the
message names the file and what is wrong); 1 nothing to report.
Needs matplotlib (Debian: python3-matplotlib) for the plots; --no-plots prints the table only.
"""
import argparse
import glob
import json
import math
import os
import sys

SCHEMA = "fivefold-bench/1"
PHASES = ["compute", "h2d", "d2h", "comm", "host"]
BEGIN, END = "<!-- perf:begin -->", "<!-- perf:end -->"
MODE_ORDER = ["serial", "mpi", "cuda", "hybrid", "direct"]
KEY_FIELDS = ("model", "mode", "split", "ranks", "batch", "precision", "backend")

# FLOPs (2*K*C*R*S*Ho*Wo per conv, 2*in*out per linear) and per-image activation elements of the
# two models, for the roofline when a result file does not carry them. Derived from docs/ARCHITECTURE.md §2's
# tables the same way model.c does (so a change there shows up as a mismatch in test_report.py).
MODEL_TABLES = {
    # (op, out_channels, kernel, stride, pad) on an input (C, H, W)
    "alexnet": ((3, 227, 227), [("conv", 96, 11, 4, 0), ("relu",), ("pool", 0, 3, 2, 0),
                                ("conv", 256, 5, 1, 2), ("relu",), ("pool", 0, 3, 2, 0), ("lrn",),
                                ("conv", 384, 3, 1, 1), ("relu",), ("conv", 384, 3, 1, 1), ("relu",),
                                ("conv", 256, 3, 1, 1), ("relu",), ("pool", 0, 3, 2, 0), ("flatten",),
                                ("fc", 4096), ("relu",), ("fc", 4096), ("relu",), ("fc", 1000),
                                ("softmax",)]),
    "mnist-cnn": ((1, 28, 28), [("conv", 32, 3, 1, 0), ("relu",), ("conv", 64, 3, 1, 0), ("relu",),
                                ("pool", 0, 2, 2, 0), ("flatten",), ("fc", 128), ("relu",), ("fc", 10),
                                ("softmax",)]),
}


class ReportError(Exception):
    pass


def model_stats(name):
    """(flops per image, parameters, activation elements summed over every layer's in + out)."""
    if name not in MODEL_TABLES:
        return None
    (c, h, w), layers = MODEL_TABLES[name]
    flops = params = acts = 0
    for spec in layers:
        op = spec[0]
        n_in = c * h * w
        if op in ("conv", "pool"):
            k, r, st, pd = spec[1], spec[2], spec[3], spec[4]
            ho, wo = (h + 2 * pd - r) // st + 1, (w + 2 * pd - r) // st + 1
            if op == "conv":
                flops += 2 * k * c * r * r * ho * wo
                params += k * c * r * r + k
                c = k
            h, w = ho, wo
        elif op == "fc":
            flops += 2 * n_in * spec[1]
            params += n_in * spec[1] + spec[1]
            c, h, w = spec[1], 1, 1
        elif op == "flatten":
            c, h, w = n_in, 1, 1
        acts += n_in + c * h * w
    return flops, params, acts


def intensity(res):
    """FLOP per byte of compulsory traffic for one batch: every parameter read once, every layer's
    input read and output written once (float32). Result files may carry timing.flops and
    timing.bytes instead, which win."""
    t = res["timing"]
    if isinstance(t.get("flops"), (int, float)) and isinstance(t.get("bytes"), (int, float)) and t["bytes"] > 0:
        return t["flops"] / t["bytes"]
    st = model_stats(res["config"]["model"])
    if not st:
        return None
    flops, params, acts = st
    n = res["config"]["batch"]
    return flops * n / (4.0 * (params + n * acts))


def gflops(res):
    t, c = res["timing"], res["config"]
    if isinstance(t.get("gflops"), (int, float)) and t["gflops"] > 0:
        return t["gflops"]
    fpi = c.get("flops_per_image") or (model_stats(c["model"]) or (None,))[0]
    if not fpi or not t.get("median_ms"):
        return None
    return fpi * c["batch"] / (t["median_ms"] / 1e3) / 1e9


# ----------------------------------------------------------------------------- loading

def need(obj, path, fname):
    """obj[path...] or a ReportError naming the file and the missing field."""
    cur = obj
    for i, k in enumerate(path):
        if not isinstance(cur, dict) or k not in cur:
            raise ReportError(f"{fname}: missing field '{'.'.join(path[:i + 1])}' "
                              f"(a {SCHEMA} result needs {'.'.join(path)})")
        cur = cur[k]
    return cur


def load_one(fname):
    try:
        with open(fname, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ReportError(f"{fname}: cannot read: {e.strerror}")
    try:
        res = json.loads(text)
    except json.JSONDecodeError as e:
        raise ReportError(f"{fname}: not valid JSON: {e.msg} at line {e.lineno} column {e.colno}")
    if not isinstance(res, dict):
        raise ReportError(f"{fname}: expected a JSON object, found {type(res).__name__}")
    schema = res.get("schema")
    if schema != SCHEMA:
        raise ReportError(f"{fname}: schema is {schema!r}, expected {SCHEMA!r}")
    for k in KEY_FIELDS:
        need(res, ("config", k), fname)
    for k in ("model", "mode", "precision", "backend"):
        if not isinstance(res["config"][k], str):
            raise ReportError(f"{fname}: config.{k} is {res['config'][k]!r}, expected a string")
    for k in ("ranks", "batch"):
        v = res["config"][k]
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ReportError(f"{fname}: config.{k} is {v!r}, expected an integer >= 1")
    passed = need(res, ("gate", "passed"), fname)
    if not isinstance(passed, bool):
        raise ReportError(f"{fname}: gate.passed is {passed!r}, expected true or false")
    # A refused run times nothing, and a run whose after-timing check failed has timings that must
    # not be reported: only a passed one must carry timings, and only its figures are shown.
    if passed:
        for k in ("median_ms", "images_per_s"):
            v = need(res, ("timing", k), fname)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v < 0:
                raise ReportError(f"{fname}: timing.{k} is {v!r}, expected a non-negative number")
    else:
        res.setdefault("timing", {})
    if "peer" in res and res["peer"] is not None:
        need(res, ("peer", "name"), fname)
        pm = need(res, ("peer", "median_ms"), fname)
        if not isinstance(pm, (int, float)) or isinstance(pm, bool) or pm <= 0:
            raise ReportError(f"{fname}: peer.median_ms is {pm!r}, expected a positive number")
    res["_file"] = fname
    res["_when"] = res.get("created") or ""
    res["_mtime"] = os.path.getmtime(fname)
    return res


def config_key(res):
    c = res["config"]
    return tuple("" if c.get(k) is None else c.get(k) for k in KEY_FIELDS)


def load_all(paths):
    files = []
    for p in paths:
        if os.path.isdir(p):
            files += sorted(glob.glob(os.path.join(p, "*.json")))
        else:
            files.append(p)
    if not files:
        return []
    latest = {}
    for f in files:
        r = load_one(f)
        k = config_key(r)
        if k not in latest or (r["_when"], r["_mtime"]) >= (latest[k]["_when"], latest[k]["_mtime"]):
            latest[k] = r
    def order(r):  # model, then the modes in docs/ARCHITECTURE.md §1's order, then split, ranks, batch, ...
        m, mode, split, ranks, batch, prec, back = config_key(r)
        return (m, MODE_ORDER.index(mode) if mode in MODE_ORDER else len(MODE_ORDER), mode, split, ranks,
                batch, prec, back)
    return sorted(latest.values(), key=order)


# ----------------------------------------------------------------------------- table

def fmt(v, digits=3):
    if v is None:
        return "—"
    if isinstance(v, float):
        if v >= 100:
            return f"{v:.1f}"
        return f"{v:.{digits}g}" if v < 1 else f"{v:.2f}"
    return str(v)


def speedup(res):
    if isinstance(res.get("speedup"), (int, float)):
        return res["speedup"]
    p, t = res.get("peer"), res.get("timing", {})
    if p and t.get("median_ms"):
        return p["median_ms"] / t["median_ms"]
    return None


def table(results):
    head = ["model", "mode", "split", "ranks", "batch", "precision", "backend", "ours ms", "images/s",
            "GFLOP/s", "peer", "peer ms", "speedup", "gate"]
    rows = []
    for r in results:
        c, t, p = r["config"], r.get("timing", {}), r.get("peer") or {}
        passed = r["gate"]["passed"]
        sp = speedup(r) if passed else None
        rows.append([c["model"], c["mode"], c.get("split") or "—", str(c["ranks"]), str(c["batch"]),
                     c["precision"], c["backend"], fmt(t.get("median_ms")) if passed else "—",
                     fmt(t.get("images_per_s")) if passed else "—",
                     fmt(gflops(r)) if passed else "—", p.get("name", "—") if passed else "—",
                     fmt(p.get("median_ms")) if passed else "—",
                     f"{sp:.2f}×" if sp is not None else "—",
                     "PASS" if passed else "FAIL"])
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- plots

def label(r, skip=()):
    c = r["config"]
    parts = [c["model"], c["mode"]]
    if c.get("split") and "split" not in skip:
        parts.append(c["split"])
    if "ranks" not in skip and c["ranks"] > 1:
        parts.append(f"P={c['ranks']}")
    if "batch" not in skip:
        parts.append(f"N={c['batch']}")
    if c["precision"] != "fp32":
        parts.append(c["precision"])
    if c["backend"] != "own":
        parts.append(c["backend"])
    return " ".join(parts)


GPU_MODES = ("cuda", "hybrid", "direct")
BASE_MODE = {"mpi": "serial", "hybrid": "cuda", "direct": "cuda"}


def device_class(r):
    return "gpu" if r["config"]["mode"] in GPU_MODES else "cpu"


def parse_peak(text):
    """'gpu:51000:3350' -> ('gpu', (51000.0, 3350.0)); the bandwidth is optional."""
    parts = text.split(":")
    try:
        if parts[0] not in ("cpu", "gpu") or len(parts) not in (2, 3):
            raise ValueError
        vals = [float(x) for x in parts[1:]]
        if any(v <= 0 for v in vals):
            raise ValueError
    except ValueError:
        raise ReportError(f"--peak '{text}': expected cpu|gpu:GFLOPS[:GB/s] with positive numbers, "
                          "e.g. gpu:51000:3350")
    return parts[0], (vals[0], vals[1] if len(vals) > 1 else None)


def plot_all(results, outdir, peaks=None):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    timed = [r for r in results if r["gate"]["passed"]]
    os.makedirs(outdir, exist_ok=True)
    written = []

    def save(fig, name):
        path = os.path.join(outdir, name)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)

    # throughput vs batch: one line per configuration without the batch; the peer dashed
    fig, ax = plt.subplots(figsize=(7, 4.5))
    groups = {}
    for r in timed:
        groups.setdefault(label(r, skip=("batch",)), []).append(r)
    for name, rs in sorted(groups.items()):
        rs = sorted(rs, key=lambda r: r["config"]["batch"])
        xs = [r["config"]["batch"] for r in rs]
        line, = ax.plot(xs, [r["timing"]["images_per_s"] for r in rs], "o-", label=name)
        peer = [(r["config"]["batch"], r["config"]["batch"] / (r["peer"]["median_ms"] / 1e3), r["peer"]["name"])
                for r in rs if r.get("peer")]
        if peer:
            ax.plot([p[0] for p in peer], [p[1] for p in peer], "s--", color=line.get_color(), alpha=0.7,
                    label=f"{name} vs {peer[0][2]}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("batch (images)")
    ax.set_ylabel("images/s")
    ax.set_title("Throughput vs batch (solid: fivefold, dashed: PyTorch peer)")
    ax.grid(True, which="both", alpha=0.3)
    if groups:
        ax.legend(fontsize=7)
    save(fig, "throughput_vs_batch.png")

    # scaling vs ranks: speedup over the one-process mode of the same class (serial for mpi, cuda for
    # hybrid and direct) at the same model, batch, precision and backend; ideal is y = ranks.
    fig, ax = plt.subplots(figsize=(7, 4.5))
    by_key = {config_key(r): r for r in timed}
    groups = {}
    for r in timed:
        if r["config"]["mode"] in BASE_MODE:
            groups.setdefault(label(r, skip=("ranks",)), []).append(r)
    top = 1
    for name, rs in sorted(groups.items()):
        rs = sorted(rs, key=lambda r: r["config"]["ranks"])
        c = rs[0]["config"]
        base = by_key.get((c["model"], BASE_MODE[c["mode"]], "", 1, c["batch"], c["precision"], c["backend"]))
        if base:
            xs = [1] + [r["config"]["ranks"] for r in rs]
            ys = [1.0] + [base["timing"]["median_ms"] / r["timing"]["median_ms"] for r in rs]
            name += f" (vs {BASE_MODE[c['mode']]})"
        else:  # no one-process run: relative to the fewest ranks, taken as ideal
            r0 = rs[0]
            xs = [r["config"]["ranks"] for r in rs]
            ys = [r0["config"]["ranks"] * r0["timing"]["median_ms"] / r["timing"]["median_ms"] for r in rs]
            name += f" (vs P={r0['config']['ranks']} taken as ideal)"
        ax.plot(xs, ys, "o-", label=name)
        top = max(top, max(xs))
    ax.plot([1, top], [1, top], "k:", lw=1, label="ideal")
    ax.set_xlabel("ranks")
    ax.set_ylabel("speedup")
    ax.set_title("Scaling vs ranks")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    save(fig, "scaling_vs_ranks.png")

    # phase breakdown: each run's median time cut into phases, as shares, with the total on top
    with_phases = [r for r in timed if isinstance(r["timing"].get("phases"), dict)]
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(with_phases) + 2), 4.5))
    names = [label(r) for r in with_phases]
    extra = sorted({k for r in with_phases for k in r["timing"]["phases"]} - set(PHASES))

    def phase_ms(r, ph):
        v = r["timing"]["phases"].get(ph, 0.0)
        if isinstance(v, dict):
            v = v.get("ms", 0.0)
        return float(v or 0.0)

    totals = [sum(phase_ms(r, ph) for ph in PHASES + extra) for r in with_phases]
    bottom = [0.0] * len(with_phases)
    for ph in PHASES + extra:
        vals = [100.0 * phase_ms(r, ph) / t if t > 0 else 0.0 for r, t in zip(with_phases, totals)]
        if any(vals):
            ax.bar(range(len(vals)), vals, bottom=bottom, label=ph)
            bottom = [b + v for b, v in zip(bottom, vals)]
    for i, r in enumerate(with_phases):
        ax.text(i, 101, f"{fmt(r['timing']['median_ms'])} ms", ha="center", fontsize=7)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=30, ha="right", fontsize=7)
    ax.set_ylim(0, 110)
    ax.set_ylabel("% of the run's time")
    ax.set_title("Where the time goes (phases; the median time above each bar)")
    if with_phases:
        ax.legend(fontsize=8, loc="lower right")
    save(fig, "phases.png")

    # roofline, one panel per device class (a CPU point under a GPU roof would mean nothing)
    classes = [k for k in ("cpu", "gpu") if any(device_class(r) == k for r in timed)] or ["cpu"]
    fig, axes = plt.subplots(1, len(classes), figsize=(6.5 * len(classes), 4.5), squeeze=False)
    for ax, cls in zip(axes[0], classes):
        pts = [(intensity(r), gflops(r), label(r)) for r in timed if device_class(r) == cls]
        pts = [p for p in pts if p[0] and p[1]]
        for x, y, name in pts:
            ax.plot([x], [y], "o", label=name)
        pk_f, pk_b = (peaks or {}).get(cls, (None, None))
        xs = [p[0] for p in pts] or [1.0]
        lo, hi = min(xs) / 4, max(xs) * 4
        if pk_f and pk_b:
            lo, hi = min(lo, pk_f / pk_b / 8), max(hi, pk_f / pk_b * 8)
        title = f"{cls.upper()} roofline"
        if pk_f:
            grid = [lo * (hi / lo) ** (i / 100) for i in range(101)]
            roof = [min(pk_f, pk_b * g) if pk_b else pk_f for g in grid]
            ax.plot(grid, roof, "k-", lw=1.2)
            title += f": peak {pk_f:g} GFLOP/s" + (f", {pk_b:g} GB/s (ridge {pk_f / pk_b:.1f} FLOP/B)" if pk_b else "")
        else:
            title += " (no peak given: --peak {cls}:GFLOPS[:GB/s])".format(cls=cls)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ys = [p[1] for p in pts] + ([pk_f] if pk_f else [])
        if ys:
            ax.set_ylim(min(ys) / 3, max(ys) * 2)
        ax.set_xlabel("FLOP per byte of compulsory traffic")
        ax.set_ylabel("achieved GFLOP/s")
        ax.set_title(title, fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        if pts:
            ax.legend(fontsize=7, loc="best")
    save(fig, "roofline.png")
    return written


# ----------------------------------------------------------------------------- README

def readme_section(tbl, pngs, readme):
    base = os.path.dirname(os.path.abspath(readme))
    lines = [BEGIN, "", "Regenerate with `python3 bench/report.py --readme README.md` (reads bench/results/*.json).",
             "", tbl, ""]
    for p in pngs:
        rel = os.path.relpath(os.path.abspath(p), base).replace(os.sep, "/")
        name = os.path.splitext(os.path.basename(p))[0].replace("_", " ")
        lines.append(f"![{name}]({rel})")
    lines += ["", END]
    return "\n".join(lines)


def rewrite_readme(readme, section):
    try:
        with open(readme, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ReportError(f"{readme}: cannot read: {e.strerror}")
    b, e = text.find(BEGIN), text.find(END)
    if b < 0 or e < 0 or e < b:
        raise ReportError(f"{readme}: needs the markers {BEGIN} and {END} (in that order) around the "
                          "performance section")
    new = text[:b] + section + text[e + len(END):]
    tmp = readme + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(new)
    os.replace(tmp, readme)


# ----------------------------------------------------------------------------- main

def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("results", nargs="*", help="result files or folders (default: bench/results)")
    ap.add_argument("--out", default=os.path.join(here, "plots"), help="folder for the PNGs (default bench/plots)")
    ap.add_argument("--readme", help="rewrite the perf section of this README")
    ap.add_argument("--peak", action="append", default=[], metavar="CLASS:GFLOPS[:GBS]",
                    help="roofline roof for cpu or gpu modes: fp32 peak and memory bandwidth, "
                         "e.g. --peak gpu:51000:3350 --peak cpu:110:40 (repeatable)")
    ap.add_argument("--no-plots", action="store_true")
    a = ap.parse_args(argv)
    try:
        results = load_all(a.results or [os.path.join(here, "results")])
        if not results:
            print(f"report.py: no result files in {', '.join(a.results or [os.path.join(here, 'results')])}",
                  file=sys.stderr)
            return 1
        tbl = table(results)
        print(tbl)
        pngs = []
        if not a.no_plots:
            peaks = dict(parse_peak(p) for p in a.peak)
            pngs = plot_all(results, a.out, peaks)
            for p in pngs:
                print(f"wrote {p}", file=sys.stderr)
        if a.readme:
            rewrite_readme(a.readme, readme_section(tbl, pngs, a.readme))
            print(f"updated {a.readme}", file=sys.stderr)
    except ReportError as e:
        print(f"report.py: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
