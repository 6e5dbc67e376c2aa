#!/usr/bin/env python3
"""One training step of a kernel timeline (tools/kernel_trace.c, FF_KERNEL_TRACE_TIMELINE=N), as text.

    FF_KERNEL_TRACE=tr FF_KERNEL_TRACE_TIMELINE=20000 FF_KERNEL_TRACE_SKIP=0.3 \\
        LD_PRELOAD=build-gpu/libff_kernel_trace.so build-gpu/fivefold train --model mnist-cnn --mode cuda ...
    python3 tools/trace_step.py tr.<pid>.timeline.tsv [--marker k_gather] [--step median|N]

A step runs from one launch of the marker kernel (mnist: k_gather, the batch's first kernel) to the
next. Of the whole steps in the timeline the one of median length is printed (or step N): every
record with its start and duration in microseconds from the step's start, the track it ran on
(records that overlap in time get different tracks: what ran side by side, whatever stream CUPTI
names) and its stream; then the step's length, the time the GPU ran nothing (launch gaps and
waits), the time two or more records overlapped, and each kernel's share. Exit 2 on a file that is
not a timeline or has fewer than two markers.
"""
import argparse
import statistics
import sys


def read(path):
    rows = []
    with open(path) as f:
        head = f.readline().rstrip("\n").split("\t")
        want = ["start_us", "end_us", "stream", "graph", "blocks", "threads", "kernel"]
        if head != want:
            raise ValueError(f"{path}: header {head!r}, expected {want!r} (a FF_KERNEL_TRACE_TIMELINE file)")
        for i, line in enumerate(f, 2):
            c = line.rstrip("\n").split("\t")
            if len(c) != 7:
                raise ValueError(f"{path}:{i}: {len(c)} columns, expected 7")
            rows.append((float(c[0]), float(c[1]), c[2], c[3], int(c[4]), int(c[5]), c[6]))
    return rows


def short(name, width=60):
    base = name.split("(")[0]
    return base if len(base) <= width else base[: width - 1] + "~"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("timeline", help="a tr.<pid>.timeline.tsv from FF_KERNEL_TRACE_TIMELINE")
    ap.add_argument("--marker", default="k_gather", help="the kernel that starts a step (default k_gather)")
    ap.add_argument("--step", default="median", help="'median' (default) or the index of a whole step")
    a = ap.parse_args()
    try:
        rows = read(a.timeline)
    except (OSError, ValueError) as e:
        print(f"trace_step: {e}", file=sys.stderr)
        return 2
    starts = [r[0] for r in rows if r[6].startswith(a.marker)]
    if len(starts) < 2:
        print(f"trace_step: {a.timeline}: {len(starts)} launches of {a.marker}, expected at least two "
              f"(a whole step lies between two)", file=sys.stderr)
        return 2
    lens = [b - s for s, b in zip(starts, starts[1:])]
    if a.step == "median":
        med = statistics.median(lens)
        k = min(range(len(lens)), key=lambda i: abs(lens[i] - med))
    else:
        try:
            k = int(a.step)
            assert 0 <= k < len(lens)
        except (ValueError, AssertionError):
            print(f"trace_step: --step '{a.step}': expected 'median' or 0 to {len(lens) - 1}", file=sys.stderr)
            return 2
    t0, t1 = starts[k], starts[k + 1]
    step = [r for r in rows if t0 <= r[0] < t1]
    tracks = []  # each track's end
    print(f"step {k} of {len(lens)} whole ones: {t1 - t0:.1f} us (median {statistics.median(lens):.1f}, "
          f"min {min(lens):.1f}, max {max(lens):.1f})")
    print(f"{'start':>8} {'us':>7} {'track':>5} {'stream':>6} {'blocks':>6}  kernel")
    for r in step:
        t = next((i for i, e in enumerate(tracks) if e <= r[0]), len(tracks))
        if t == len(tracks):
            tracks.append(0.0)
        tracks[t] = r[1]
        print(f"{r[0] - t0:8.1f} {r[1] - r[0]:7.1f} {t:5d} {r[2]:>6} {r[4]:6d}  {short(r[6])}")
    # the union of busy intervals and the time two or more overlap, within [t0, t1)
    ev = sorted([(max(r[0], t0), 1) for r in step] + [(min(r[1], t1), -1) for r in step])
    busy = multi = 0.0
    depth, last = 0, t0
    for t, d in ev:
        if depth >= 1:
            busy += t - last
        if depth >= 2:
            multi += t - last
        depth, last = depth + d, t
    share = {}
    for r in step:
        share[short(r[6])] = share.get(short(r[6]), 0.0) + r[1] - r[0]
    print(f"\nstep {t1 - t0:.1f} us: GPU busy {busy:.1f}, idle {t1 - t0 - busy:.1f} (launch gaps, waits), "
          f"two or more at once {multi:.1f}, {len(step)} records on {len(tracks)} tracks")
    for name, us in sorted(share.items(), key=lambda x: -x[1]):
        print(f"{us:8.1f} us  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
