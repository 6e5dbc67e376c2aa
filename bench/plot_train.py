#!/usr/bin/env python3
"""Plots one `fivefold train --json` file: the loss curve, and the GPUs' readings over the run.

    python3 bench/plot_train.py RUN.json [--out RUN.png]

Left: the training loss per step when the file has it ("loss_per_step": [...], as `fivefold train
--json` writes it; or "losses": {"step": [...], "loss": [...]}
or a plain list, one loss per step); otherwise what schema fivefold-train/1 always records, the
test accuracy per epoch and the final loss. Right, when the file has a "monitor" object
(core/include/fivefold/monitor.h: parallel arrays under "samples"): temperature (with the
--max-temp line; x marks samples whose clocks were thermally or power throttled), power,
GPU and memory utilisation, and device memory used (dashed: total) against time, one line per
GPU. Prints one summary line per GPU (peak temperature, mean power and utilisation, peak memory)
and the monitor's overhead. Needs matplotlib (Debian: python3-matplotlib; exit 77 without it).
Exit 2 on a file that is missing, not JSON, not a fivefold-train/1 result, or whose monitor
object is malformed (the message names the key).
"""
import argparse
import json
import math
import os
import sys

PROG = "plot_train.py"
SCHEMA = "fivefold-train/1"
COLUMNS = ("t", "gpu", "temp_c", "power_w", "mem_used_bytes", "mem_total_bytes", "util_pct", "mem_util_pct",
           "sm_clock_mhz", "throttle")
# Clock-throttle bits that mean heat or power limits (not idle, app clocks or sync boost).
THROTTLE_HOT = 0x4 | 0x8 | 0x20 | 0x40 | 0x80
GIB = float(1 << 30)


class BadFile(Exception):
    pass


def num(v):
    """JSON null (not reported) as NaN."""
    return float("nan") if v is None else float(v)


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
    except OSError as e:
        raise BadFile(f"{path}: cannot read: {e.strerror or e}") from None
    except ValueError as e:
        raise BadFile(f"{path}: not JSON: {e}") from None
    if not isinstance(d, dict) or d.get("schema") != SCHEMA:
        got = d.get("schema") if isinstance(d, dict) else type(d).__name__
        raise BadFile(f"{path}: schema {got!r}: expected a `fivefold train --json` file (schema {SCHEMA!r})")
    return d


def losses(path, d):
    """(steps, losses) per step, or None when the file has no per-step losses."""
    v = d.get("loss_per_step", d.get("losses"))  # the trainer writes loss_per_step (this run's steps)
    if v is None:
        return None
    if isinstance(v, list):
        first = d.get("last_step", len(v)) - len(v) + 1 if isinstance(d.get("last_step"), int) else 1
        return list(range(first, first + len(v))), [num(x) for x in v]
    if isinstance(v, dict) and isinstance(v.get("loss"), list):
        steps = v.get("step", list(range(1, len(v["loss"]) + 1)))
        if not isinstance(steps, list) or len(steps) != len(v["loss"]):
            raise BadFile(f"{path}: losses.step has {len(steps) if isinstance(steps, list) else 'no'} entries, "
                          f"losses.loss {len(v['loss'])}: expected the same number")
        return steps, [num(x) for x in v["loss"]]
    raise BadFile(f"{path}: losses: expected a list of numbers or {{\"step\": [...], \"loss\": [...]}}")


def monitor(path, d):
    """{gpu index: {column: [values]}} and the monitor object, or (None, None) without one."""
    mo = d.get("monitor")
    if mo is None:
        return None, None
    if not isinstance(mo, dict) or not isinstance(mo.get("samples"), dict):
        raise BadFile(f"{path}: monitor.samples: missing (expected an object of parallel arrays)")
    s = mo["samples"]
    for c in COLUMNS:
        if not isinstance(s.get(c), list):
            raise BadFile(f"{path}: monitor.samples.{c}: missing or not an array")
        if len(s[c]) != len(s["t"]):
            raise BadFile(f"{path}: monitor.samples.{c} has {len(s[c])} entries, monitor.samples.t "
                          f"{len(s['t'])}: expected one per sample")
    per = {}
    for k in range(len(s["t"])):
        g = s["gpu"][k]
        if not isinstance(g, int):
            raise BadFile(f"{path}: monitor.samples.gpu[{k}] = {g!r}: expected a GPU index")
        row = per.setdefault(g, {c: [] for c in COLUMNS})
        for c in COLUMNS:
            row[c].append(s[c][k])
    return per, mo


def gpu_names(mo):
    return {g.get("index"): g.get("name", "") for g in mo.get("gpus", []) if isinstance(g, dict)}


def finite(xs):
    return [x for x in xs if not math.isnan(x)]


def summary(per, mo):
    """One line per GPU and one for the overhead (and the pauses, if any)."""
    names = gpu_names(mo)
    lines = []
    for g in sorted(per):
        r = per[g]
        temp = finite([num(x) for x in r["temp_c"]])
        power = finite([num(x) for x in r["power_w"]])
        util = finite([num(x) for x in r["util_pct"]])
        mem = finite([num(x) for x in r["mem_used_bytes"]])
        hot = sum(1 for x in r["throttle"] if isinstance(x, int) and x & THROTTLE_HOT)
        parts = [f"GPU{g} {names.get(g, '')}: {len(r['t'])} samples",
                 f"peak {max(temp):.0f}C" if temp else "peak -C",
                 f"mean {sum(power) / len(power):.0f}W" if power else "mean -W",
                 f"mean util {sum(util) / len(util):.0f}%" if util else "mean util -%",
                 f"peak mem {max(mem) / GIB:.1f}GiB" if mem else "peak mem -GiB",
                 f"throttled (power/thermal) in {hot} sample(s)"]
        lines.append(", ".join(parts))
    ov = mo.get("overhead") or {}
    if isinstance(ov.get("fraction"), (int, float)):
        lines.append(f"monitor overhead: {100 * ov['fraction']:.3f}% of {num(ov.get('elapsed_s')):.1f} s "
                     f"({ov.get('rounds')} rounds, slowest {1000 * num(ov.get('sample_s_max')):.2f} ms)")
    te = mo.get("temperature") or {}
    if te.get("pauses"):
        lines.append(f"temperature pauses: {te['pauses']}, {num(te.get('paused_s')):.1f} s in all")
    return lines


def plot(path, d, curve, per, mo, out):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.stderr.write(f"{PROG}: needs matplotlib (Debian: apt-get install python3-matplotlib)\n")
        sys.exit(77)

    title = " ".join([str(d.get("model", "?")), str(d.get("mode", "?"))] +
                     [f"{k}={d[k]}" for k in ("ranks", "batch", "epochs", "steps") if k in d] +
                     [f"({os.path.basename(path)})"])
    if per:
        fig = plt.figure(figsize=(15, 7))
        grid = fig.add_gridspec(2, 3)
        ax = fig.add_subplot(grid[:, 0])
        panels = [fig.add_subplot(grid[r, c]) for r in range(2) for c in (1, 2)]
    else:
        fig = plt.figure(figsize=(7, 5))
        ax = fig.add_subplot(1, 1, 1)
        panels = []

    if curve:
        ax.plot(curve[0], curve[1], "-", lw=1, color="C0")
        ax.set_xlabel("step")
        ax.set_ylabel("training loss")
        ax.set_yscale("log" if all(x > 0 for x in finite(curve[1])) and finite(curve[1]) else "linear")
        ax.set_title("loss per step", fontsize=9)
    else:
        acc = [num(x) for x in d.get("test_accuracy") or []]
        if acc:
            ax.plot(range(1, len(acc) + 1), acc, "o-", color="C1", label="test accuracy (%)")
            ax.set_xlabel("epoch")
            ax.set_ylabel("test accuracy (%)")
        ax.set_title(f"no per-step losses in this file; final loss {num(d.get('final_loss')):.4g}", fontsize=9)
        if acc:
            ax.legend(fontsize=8)
    ax.grid(True, alpha=0.3)

    if per:
        names = gpu_names(mo)
        tp, pw, ut, mem = panels
        for i, g in enumerate(sorted(per)):
            r = per[g]
            t = [num(x) for x in r["t"]]
            c = f"C{i % 10}"
            label = f"GPU{g} {names.get(g, '')}".strip()
            tp.plot(t, [num(x) for x in r["temp_c"]], "-", color=c, label=label)
            hot = [k for k, x in enumerate(r["throttle"]) if isinstance(x, int) and x & THROTTLE_HOT]
            if hot:
                tp.plot([t[k] for k in hot], [num(r["temp_c"][k]) for k in hot], "x", color="red",
                        label="throttled (power/thermal)" if i == 0 else None)
            pw.plot(t, [num(x) for x in r["power_w"]], "-", color=c, label=label)
            ut.plot(t, [num(x) for x in r["util_pct"]], "-", color=c, label=f"{label} GPU")
            ut.plot(t, [num(x) for x in r["mem_util_pct"]], ":", color=c, label=f"{label} memory")
            mem.plot(t, [num(x) / GIB for x in r["mem_used_bytes"]], "-", color=c, label=f"{label} used")
            mem.plot(t, [num(x) / GIB for x in r["mem_total_bytes"]], "--", color=c, lw=0.8, label=f"{label} total")
        if isinstance(mo.get("max_temp_c"), (int, float)):
            tp.axhline(mo["max_temp_c"], color="k", ls=":", lw=0.8, label=f"--max-temp {mo['max_temp_c']:g}C")
        for p, ylabel in ((tp, "temperature (C)"), (pw, "power (W)"), (ut, "utilisation (%)"),
                          (mem, "device memory (GiB)")):
            p.set_xlabel("seconds since the monitor started")
            p.set_ylabel(ylabel)
            p.grid(True, alpha=0.3)
            p.legend(fontsize=7)
        ut.set_ylim(-2, 102)
        src = mo.get("source")
        ov = (mo.get("overhead") or {}).get("fraction")
        tp.set_title(f"source {src}, every {mo.get('interval_ms')} ms" +
                     (f", overhead {100 * ov:.3f}%" if isinstance(ov, (int, float)) else ""), fontsize=9)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog=PROG, description=__doc__.split("\n")[0],
        epilog="The monitor object is written by fivefold train when GPU monitoring is on (issue 16).")
    ap.add_argument("json", help="a `fivefold train --json` file (schema fivefold-train/1)")
    ap.add_argument("--out", help="PNG to write (default: the JSON's path with .png)")
    a = ap.parse_args(argv)
    out = a.out or os.path.splitext(a.json)[0] + ".png"
    try:
        d = load(a.json)
        curve = losses(a.json, d)  # every check before matplotlib is imported
        per, mo = monitor(a.json, d)
        plot(a.json, d, curve, per, mo, out)
    except BadFile as e:
        sys.stderr.write(f"{PROG}: {e}\n")
        return 2
    except OSError as e:
        sys.stderr.write(f"{PROG}: {out}: cannot write: {e.strerror or e}\n")
        return 2
    if per:
        for line in summary(per, mo):
            print(line)
    else:
        print("no monitor data in this file (train without GPU monitoring)")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
