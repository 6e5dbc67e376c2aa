#!/usr/bin/env python3
"""Plots one or more bench/scaling_mpi.sh results (issue 4 §6).

    python3 bench/plot_scaling.py RESULT.json [RESULT.json ...] [--out bench/plots/scaling_mpi.png]

Left: parallel efficiency against ranks for each split, from the median launch (solid) and from
the fastest forward (dashed: what the code does when no rank's core is slowed). Right: for every
launch at the largest common rank count, the fastest and slowest rank's compute per forward. Ranks
given the same work that finish far apart are a slow core, not the code. One row per file. Prints
a table of the same figures. Needs matplotlib (Debian: python3-matplotlib); --no-plot prints the
table only. Exit 2 on a file that is not a scaling_mpi result.
"""
import argparse
import json
import sys


def load(path):
    try:
        with open(path) as f:
            d = json.load(f)
    except (OSError, ValueError) as e:
        raise SystemExit(f"plot_scaling.py: {path}: {e}") from None
    if d.get("benchmark") != "scaling_mpi" or not isinstance(d.get("results"), list):
        sys.stderr.write(f"plot_scaling.py: {path}: expected a bench/scaling_mpi.sh result "
                         f"(\"benchmark\": \"scaling_mpi\" with \"results\")\n")
        sys.exit(2)
    return d


def table(path, d):
    print(f"{path}: {d.get('model')} N={d.get('batch')}, {d.get('repeats')} round(s), "
          f"serial median {d.get('serial_median_ms')} ms, commit {d.get('commit')}")
    print(f"  {'split':<10} {'P':>2} {'median ms':>10} {'eff':>6} {'paired':>7} {'best ms':>9} {'eff best':>9} digest")
    for r in d["results"]:
        best = r.get("best_ms")
        eb = r.get("efficiency_best")
        print(f"  {r['split']:<10} {r['ranks']:>2} {r['median_ms']:>10.1f} {r['efficiency']:>6.3f} "
              f"{r.get('efficiency_paired', float('nan')):>7.3f} "
              f"{best if best is not None else float('nan'):>9.1f} {eb if eb is not None else float('nan'):>9.3f} "
              f"{'ok' if r['digest_ok'] else 'DIFFERS'}")


def plot(files, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(files), 2, figsize=(11, 3.8 * len(files)), squeeze=False)
    for row, (path, d) in enumerate(files):
        ax, bx = axes[row]
        splits = sorted({r["split"] for r in d["results"]})
        for i, s in enumerate(splits):
            rs = sorted((r for r in d["results"] if r["split"] == s), key=lambda r: r["ranks"])
            c = f"C{i}"
            ax.plot([r["ranks"] for r in rs], [r["efficiency"] for r in rs], "o-", color=c, label=f"{s} (median)")
            if all(r.get("efficiency_best") is not None for r in rs):
                ax.plot([r["ranks"] for r in rs], [r["efficiency_best"] for r in rs], "s--", color=c, alpha=0.6,
                        label=f"{s} (best forward)")
        ax.axhline(1.0, color="k", lw=0.8, ls=":")
        ax.set_xscale("log", base=2)
        ticks = sorted({r["ranks"] for r in d["results"]})
        ax.set_xticks(ticks)
        ax.set_xticklabels([str(t) for t in ticks])
        ax.set_xlabel("ranks")
        ax.set_ylabel("parallel efficiency")
        ax.set_ylim(0, 1.15)
        ax.set_title(f"{d.get('model')} N={d.get('batch')}, {d.get('repeats')} rounds ({path.split('/')[-1]})", fontsize=8)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)

        ranks = [r["ranks"] for r in d["results"] if r["ranks"] > 1]
        p = 4 if 4 in ranks else (max(ranks) if ranks else None)
        x = 0
        for i, s in enumerate(splits):
            for r in d["results"]:
                if r["split"] != s or r["ranks"] != p:
                    continue
                for k, mm in enumerate(r.get("launch_rank_compute_min_max_ms") or []):
                    if mm is None:
                        continue
                    bx.plot([x, x], mm, "-", color=f"C{i}", lw=3, label=f"{s} P={p}" if k == 0 else None)
                    bx.plot([x], [r["launch_medians_ms"][k]], "kx")
                    x += 1
                x += 1
        if p:
            ideal = d["serial_median_ms"] / p
            bx.axhline(ideal, color="k", lw=0.8, ls=":", label=f"serial median / {p}")
        bx.set_xticks([])
        bx.set_xlabel("launches (bar: fastest to slowest rank's compute, x: forward time)", fontsize=8)
        bx.set_ylabel("ms per forward")
        bx.grid(True, axis="y", alpha=0.3)
        bx.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results", nargs="+", help="scaling_mpi JSON files")
    ap.add_argument("--out", default="bench/plots/scaling_mpi.png")
    ap.add_argument("--no-plot", action="store_true", help="print the table only")
    a = ap.parse_args(argv)
    files = [(p, load(p)) for p in a.results]
    for p, d in files:
        table(p, d)
    if not a.no_plot:
        plot(files, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
