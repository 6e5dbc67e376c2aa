#!/usr/bin/env python3
"""The MLP's step on H200s (batch 2048, fp32, --backend vendor): fivefold against PyTorch on one,
two and four GPUs, from this folder's evidence (run 4: one invocation on two H200s; run 3: four
H200s, direct:4 from `fivefold train --json` runs of main's code beside DDP:4's invocation).

  python3 bench/results/issue16-s14/plot_mlp_h200.py [--out mlp-h200-steps.png]

Prints the figures it draws; exit 77 without matplotlib.
"""
import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def bench_ms(path):
    """label -> ms per step of a train_bench JSON's runs."""
    with open(path) as f:
        r = json.load(f)["results"][0]
    return {x["label"]: x["ms_per_step"] for x in r["fivefold"] + r["pytorch"] if "error" not in x}


def train_ms(path):
    """ms per step of a `fivefold train --json` run: median epoch after the first / steps per epoch."""
    with open(path) as f:
        d = json.load(f)
    return statistics.median(d["seconds_per_epoch"][1:]) / (d["steps"] // d["epochs"]) * 1e3


def figures():
    two = bench_ms(os.path.join(HERE, "run4", "train-mlp.json"))
    four = bench_ms(os.path.join(HERE, "run3", "train-mlp.json"))
    d4 = [train_ms(os.path.join(HERE, "run3", f"before-direct4-{r}.json")) for r in "ab"]
    best1 = train_ms(os.path.join(HERE, "run3", "after-cuda-mb2048.json"))
    # fivefold's one-GPU bar: its best step (the whole batch as one micro-batch), so the dotted
    # lines and the scaling are against the best, not only the same micro-batch (cuda at 1024: run 4)
    return {
        "fivefold": {1: best1, 2: two["direct:2"], 4: statistics.mean(d4)},
        "PyTorch": {1: two["graph"], 2: two["ddp:2"], 4: four["ddp:4"]},
        "fivefold cuda at micro-batch 1024": two["cuda"],
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=os.path.join(HERE, "mlp-h200-steps.png"))
    a = p.parse_args(argv)
    fig_data = figures()
    ff, pt = fig_data["fivefold"], fig_data["PyTorch"]
    for g in (1, 2, 4):
        print(f"{g} GPU(s): fivefold {ff[g]:.2f} ms, PyTorch {pt[g]:.2f} ms "
              f"(scaling fivefold {ff[1] / ff[g]:.2f}x, PyTorch {pt[1] / pt[g]:.2f}x)")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no matplotlib", file=sys.stderr)
        return 77
    fig, ax = plt.subplots(figsize=(7, 4))
    xs = [0, 1, 2]
    w = 0.38
    ax.bar([x - w / 2 for x in xs], [ff[g] for g in (1, 2, 4)], w,
           label="fivefold (1 GPU: cuda, micro-batch 2048; direct:P, 2048 / P)")
    ax.bar([x + w / 2 for x in xs], [pt[g] for g in (1, 2, 4)], w,
           label="PyTorch (1 GPU: CUDA graph; DDP on P GPUs)")
    for x, g in zip(xs, (1, 2, 4)):
        ax.text(x - w / 2, ff[g] + 0.3, f"{ff[g]:.2f}", ha="center", fontsize=8)
        ax.text(x + w / 2, pt[g] + 0.3, f"{pt[g]:.2f}", ha="center", fontsize=8)
    for x, g in zip(xs, (1, 2, 4)):  # the ideal scaling from the one-GPU step
        ax.plot([x - w, x + w], [ff[1] / g] * 2, "k:", lw=1)
    ax.set_xticks(xs, ["1 GPU", "2 GPUs", "4 GPUs"])
    ax.set_ylabel("ms per step (lower is faster)")
    ax.set_title("120 M-parameter MLP, batch 2048, fp32, H200s (dotted: one GPU's step / P)", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(a.out, dpi=120)
    print(f"written: {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
