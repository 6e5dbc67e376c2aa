#!/usr/bin/env python3
"""MNIST-CNN training on two H100s against every PyTorch peer of one invocation (run 3: seconds per
Fashion-MNIST epoch at batch 64 and 256; fivefold cuda and direct:2; PyTorch's CUDA graph on one
GPU, eager DDP and ddp-graph on two). Shows why eager DDP is the wrong yardstick at batch 64.

  python3 bench/results/issue16-s15/plot_mnist_peers.py [--out mnist-peers-h100.png]

Prints the figures it draws; exit 77 without matplotlib.
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ORDER = [("fivefold", "cuda"), ("fivefold", "direct:2"), ("pytorch", "graph"), ("pytorch", "ddp:2"),
         ("pytorch", "ddp-graph:2")]


def figures(path=os.path.join(HERE, "run3", "train-mnist.json")):
    """{batch: {(side, label): s/epoch}} of a train_bench JSON, the runs that succeeded."""
    with open(path) as f:
        d = json.load(f)
    out = {}
    for r in d["results"]:
        out[r["batch"]] = {(side, x["label"]): x["epoch_s"] for side in ("fivefold", "pytorch")
                           for x in r[side] if "error" not in x}
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=os.path.join(HERE, "mnist-peers-h100.png"))
    a = p.parse_args(argv)
    fig_data = figures()
    for B, runs in fig_data.items():
        print(f"batch {B}: " + ", ".join(f"{s} {l} {runs[(s, l)]:.3f} s" for s, l in ORDER if (s, l) in runs))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is missing: no plot (apt-get install python3-matplotlib)", file=sys.stderr)
        return 77
    fig, axes = plt.subplots(1, len(fig_data), figsize=(5.2 * len(fig_data), 3.6))
    for ax, (B, runs) in zip(axes, sorted(fig_data.items())):
        keys = [k for k in ORDER if k in runs]
        vals = [runs[k] for k in keys]
        colors = ["#1f77b4" if s == "fivefold" else "#ff7f0e" for s, _ in keys]
        bars = ax.barh([f"{s} {l}" for s, l in keys], vals, color=colors)
        ax.invert_yaxis()
        for b, v in zip(bars, vals):
            ax.text(v, b.get_y() + b.get_height() / 2, f" {v:.3f}", va="center", fontsize=8)
        ax.set_xlim(0, max(vals) * 1.22)
        ax.set_xlabel("seconds per epoch (lower is faster)")
        ax.set_title(f"batch {B}")
    fig.suptitle("MNIST-CNN, Fashion-MNIST, fp32, two H100s, one invocation (session 15, run 3)", fontsize=10)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print(f"written: {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
