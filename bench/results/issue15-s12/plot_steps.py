#!/usr/bin/env python3
"""MNIST-CNN training on two GPUs, ms per step: how the direct mode's exchange moved from host
waits to the GPU (session 12, REPORT.md), beside PyTorch's graph (one GPU) and DDP (two GPUs).

    python3 bench/results/issue15-s12/plot_steps.py [--out FILE.png]

Reads the train_bench JSON files committed beside this script (runN/*.json). The bars are steady-state
epochs' ms per step (epoch seconds / steps); the dark part of a fivefold bar is the host's part
of the step where the run recorded it (train --json phases_ms_per_step.enqueue). Needs matplotlib
(Debian: python3-matplotlib); exit 77 without it.
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# (label, file, which run in it): fivefold direct:2 in four ways, then PyTorch's peers
BARS = [
    ("host waits\n(FF_QUEUED_COMM=0)", "run1/train-mnist-unqueued.json", ("fivefold", "direct:2")),
    ("queued,\nnot captured", "run3/mnist-uncaptured.json", ("fivefold", "direct:2")),
    ("queued and\ncaptured", "run3/train-mnist.json", ("fivefold", "direct:2")),
    ("captured,\n2 buckets\n(the default)", "run4/train-mnist.json", ("fivefold", "direct:2")),
    ("PyTorch graph\n(one GPU)", "run4/train-mnist.json", ("pytorch", "graph")),
    ("PyTorch DDP\n(two GPUs)", "run4/train-mnist.json", ("pytorch", "ddp:2")),
]


def figures(path, kind, label):
    """{batch: (ms per step, host ms or None)} of one run in a train_bench JSON file."""
    with open(os.path.join(HERE, path)) as f:
        d = json.load(f)
    out = {}
    for r in d["results"]:
        for run in r.get(kind, []):
            if run.get("label") != label or "error" in run:
                continue
            steps = run.get("steps_per_epoch") or -(-60000 // r["batch"])
            ms = run.get("ms_per_step") or 1e3 * run["epoch_s"] / steps
            ph = run.get("json", {}).get("phases_ms_per_step", {})
            host = ph.get("enqueue") if ph.get("enqueue") else None
            out[r["batch"]] = (ms, host)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(HERE, "mnist-direct2-steps.png"))
    a = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_steps.py: matplotlib is missing (apt-get install python3-matplotlib)", file=sys.stderr)
        return 77
    data = [(label, figures(path, *which)) for label, path, which in BARS]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6))
    for ax, batch in zip(axes, (64, 256)):
        xs = range(len(data))
        ms = [d.get(batch, (float("nan"), None))[0] for _, d in data]
        host = [d.get(batch, (0, None))[1] for _, d in data]
        colors = ["#4c72b0"] * 4 + ["#999999", "#dd8452"]
        ax.bar(xs, ms, color=colors)
        ax.bar(xs, [h or 0 for h in host], color="#1b2a49", width=0.5, label="the host's part (enqueue)")
        for x, v in zip(xs, ms):
            ax.text(x, v, f"{v:.2f}", ha="center", va="bottom", fontsize=8)
        ax.set_xticks(list(xs))
        ax.set_xticklabels([label for label, _ in data], fontsize=7)
        ax.set_ylabel("ms per step")
        ax.set_title(f"batch {batch}")
        if batch == 64:
            ax.set_yscale("log")
            ax.set_ylabel("ms per step (log scale)")
        ax.legend(fontsize=8, loc="upper left")
    fig.suptitle("MNIST-CNN training, fivefold direct:2 (NCCL) on two H100s: the exchange moved onto the GPU")
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print(f"written: {os.path.relpath(a.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
