#!/usr/bin/env python3
"""tools/trace_step.py on timelines made here (CTest: tools_trace_step, no GPU needed).

Three steps of 100, 130 and 160 us between four k_gather launches; step 1 (the median one, 130
us) holds the 5 us marker, a 35 us kernel on stream 7 after it and a 60 us one on stream 9 that
starts 20 us after that one (15 us side by side), nothing for the rest: busy 85 us, idle 45, two
at once 15, two tracks. Asserted: those
figures, the median choice, --step; and exit 2 with a message naming the problem for a file that
is not a timeline, a marker seen once, and a step index out of range.
Usage: test_trace_step.py REPO
"""
import os
import subprocess
import sys
import tempfile

repo = sys.argv[1]
tool = os.path.join(repo, "tools", "trace_step.py")
head = "start_us\tend_us\tstream\tgraph\tblocks\tthreads\tkernel\n"


def rec(s, e, stream, name):
    return f"{s:.3f}\t{e:.3f}\t{stream}\t0\t64\t256\t{name}(float*)\n"


def run(path, *args):
    p = subprocess.run([sys.executable, tool, path, *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


bad = []


def check(what, ok):
    print(("PASS " if ok else "FAIL ") + what)
    if not ok:
        bad.append(what)


with tempfile.TemporaryDirectory() as d:
    tl = os.path.join(d, "tr.1.timeline.tsv")
    with open(tl, "w") as f:
        f.write(head)
        f.write(rec(0, 5, 7, "k_gather") + rec(10, 90, 7, "k_a"))
        f.write(rec(100, 105, 7, "k_gather") + rec(105, 140, 7, "k_conv") + rec(125, 185, 9, "k_wgrad"))
        f.write(rec(230, 235, 7, "k_gather") + rec(240, 300, 7, "k_a"))
        f.write(rec(390, 395, 7, "k_gather"))
    rc, out, err = run(tl)
    check(f"median step: exit 0 ({rc}: {err.strip()})", rc == 0)
    check("the median step is step 1 of 3, 130 us", "step 1 of 3 whole ones: 130.0 us" in out)
    check("busy 85, idle 45, two at once 15, two tracks",
          "GPU busy 85.0, idle 45.0 (launch gaps, waits), two or more at once 15.0, 3 records on 2 tracks" in out)
    check("k_wgrad on track 1 (beside k_conv)", any(l.split()[2:3] == ["1"] and "k_wgrad" in l for l in out.splitlines()))
    rc, out, err = run(tl, "--step", "2")
    check("--step 2: step 2 of 3, 160 us", rc == 0 and "step 2 of 3 whole ones: 160.0 us" in out)
    rc, out, err = run(tl, "--step", "3")
    check("--step 3: exit 2 naming the range", rc == 2 and "--step '3': expected 'median' or 0 to 2" in err)
    rc, out, err = run(tl, "--marker", "k_nothing")
    check("a marker never launched: exit 2", rc == 2 and "0 launches of k_nothing" in err)
    other = os.path.join(d, "table.txt")
    with open(other, "w") as f:
        f.write("# kernel_trace: 3 records\n")
    rc, out, err = run(other)
    check("not a timeline: exit 2 naming the header", rc == 2 and "expected" in err and "header" in err)
print("PASS" if not bad else f"FAIL: {len(bad)} checks")
sys.exit(1 if bad else 0)
