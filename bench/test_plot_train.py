#!/usr/bin/env python3
"""Tests of bench/plot_train.py on made-up `fivefold train --json` files (python3 -m unittest, or
run directly; exit 77, a CTest skip, without matplotlib).

The files are written here, not measured: one with per-step losses and a two-GPU "monitor" object
(one GPU reporting everything, one whose temperature, utilisation and memory are null), one as
schema fivefold-train/1 writes it today (no losses, no monitor), and broken ones: missing, not
JSON, another schema, a monitor column of the wrong length or missing.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "plot_train.py")
MIB = 1 << 20


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=120)


def png_size(path):
    """(width, height) from the PNG's IHDR chunk; fails on anything that is not a PNG."""
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", head[:8]
    return struct.unpack(">II", head[16:24])


def train_file(**extra):
    d = {"schema": "fivefold-train/1", "model": "mnist-cnn", "mode": "cuda", "transport": "none", "ranks": 1,
         "batch": 64, "epochs": 2, "steps": 100, "seconds": 10.0, "seconds_per_epoch": [5.0, 5.0],
         "test_accuracy": [91.5, 95.25], "final_loss": 0.125, "loss_digest": "0" * 16, "weights_digest": "0" * 16}
    d.update(extra)
    return d


def monitor(rounds=20):
    """Two GPUs sampled every 0.5 s. GPU 0: 60..78 C then 90 C in the last round, 400 W, 98 %,
    23654 MiB of 144384, sw-thermal throttling in the last 3 rounds. GPU 1: temperature,
    utilisation and memory not reported, 300/400 W alternating (mean 350), idle bit only."""
    s = {c: [] for c in ("t", "gpu", "temp_c", "power_w", "mem_used_bytes", "mem_total_bytes", "util_pct",
                         "mem_util_pct", "sm_clock_mhz", "throttle")}
    for k in range(rounds):
        for g in (0, 1):
            s["t"].append(0.5 * k)
            s["gpu"].append(g)
            if g == 0:
                s["temp_c"].append(90 if k == rounds - 1 else 60 + k)
                s["power_w"].append(400)
                s["mem_used_bytes"].append(23654 * MIB)
                s["mem_total_bytes"].append(144384 * MIB)
                s["util_pct"].append(98)
                s["mem_util_pct"].append(40)
                s["throttle"].append(0x20 if k >= rounds - 3 else 0)
            else:
                s["temp_c"].append(None)
                s["power_w"].append(300 if k % 2 == 0 else 400)
                s["mem_used_bytes"].append(None)
                s["mem_total_bytes"].append(None)
                s["util_pct"].append(None)
                s["mem_util_pct"].append(None)
                s["throttle"].append(0x1)
            s["sm_clock_mhz"].append(1980)
    return {"interval_ms": 500, "source": "fake", "max_temp_c": 85, "temp_action": "pause", "pause_limit_s": 600,
            "gpus": [{"index": 0, "name": "NVIDIA H200"}, {"index": 1, "name": "NVIDIA H200"}],
            "samples": s,
            "overhead": {"rounds": rounds, "sample_s_total": 0.002, "sample_s_max": 0.0005, "elapsed_s": 10.0,
                         "fraction": 0.0002, "check_calls": 100, "check_s_total": 0.001, "read_errors": 0,
                         "dropped": 0},
            "temperature": {"pauses": 1, "paused_s": 2.5, "warnings": 1}}


class PlotTrainTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, d):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(d if isinstance(d, str) else json.dumps(d))
        return path

    def test_losses_and_monitor(self):
        path = self.write("run.json", train_file(losses={"step": list(range(1, 101)),
                                                         "loss": [2.3 / (1 + 0.05 * k) for k in range(100)]},
                                                 monitor=monitor()))
        r = run(path)  # default output: beside the JSON
        self.assertEqual(r.returncode, 0, r.stderr)
        out = os.path.join(self.tmp.name, "run.png")
        self.assertEqual(r.stdout.splitlines(), [
            "GPU0 NVIDIA H200: 20 samples, peak 90C, mean 400W, mean util 98%, peak mem 23.1GiB, "
            "throttled (power/thermal) in 3 sample(s)",
            "GPU1 NVIDIA H200: 20 samples, peak -C, mean 350W, mean util -%, peak mem -GiB, "
            "throttled (power/thermal) in 0 sample(s)",
            "monitor overhead: 0.020% of 10.0 s (20 rounds, slowest 0.50 ms)",
            "temperature pauses: 1, 2.5 s in all",
            f"wrote {out}",
        ])
        self.assertEqual(png_size(out), (1500, 700))  # loss beside the four monitor panels
        self.assertGreater(os.path.getsize(out), 20000)

    def test_today_schema_without_monitor(self):
        # What `fivefold train --json` writes without monitoring: accuracy per epoch, final loss.
        path = self.write("plain.json", train_file())
        out = os.path.join(self.tmp.name, "sub.png")
        r = run(path, "--out", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("no monitor data in this file", r.stdout)
        self.assertEqual(png_size(out), (700, 500))  # the loss panel alone

    def test_plain_loss_list(self):
        path = self.write("list.json", train_file(losses=[2.0, 1.5, 1.0, None, 0.5]))
        out = os.path.join(self.tmp.name, "list.png")
        r = run(path, "--out", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        png_size(out)

    def test_bad_files(self):
        good = monitor()
        short = monitor()
        short["samples"]["power_w"].pop()
        missing = monitor()
        del missing["samples"]["throttle"]
        cases = [
            (os.path.join(self.tmp.name, "absent.json"), "absent.json: cannot read: No such file or directory"),
            (self.write("trunc.json", json.dumps(train_file())[:-10]), "trunc.json: not JSON"),
            (self.write("bench.json", {"schema": "fivefold-bench/1"}),
             "bench.json: schema 'fivefold-bench/1': expected a `fivefold train --json` file"),
            (self.write("short.json", train_file(monitor=short)),
             "short.json: monitor.samples.power_w has 39 entries, monitor.samples.t 40: expected one per sample"),
            (self.write("missing.json", train_file(monitor=missing)),
             "missing.json: monitor.samples.throttle: missing or not an array"),
            (self.write("steps.json", train_file(losses={"step": [1, 2], "loss": [1.0]})),
             "steps.json: losses.step has 2 entries, losses.loss 1"),
        ]
        for path, want in cases:
            out = os.path.join(self.tmp.name, "never.png")
            r = run(path, "--out", out)
            self.assertEqual(r.returncode, 2, (path, r.stdout, r.stderr))
            self.assertIn(want, r.stderr)
            self.assertTrue(r.stderr.startswith("plot_train.py: "), r.stderr)
            self.assertFalse(os.path.exists(out), path)
        # An output that cannot be written is named too.
        path = self.write("ok.json", train_file(monitor=good))
        r = run(path, "--out", os.path.join(self.tmp.name, "no", "such", "dir.png"))
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("dir.png: cannot write", r.stderr)

    def test_help(self):
        r = run("--help")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("usage: plot_train.py", r.stdout)
        self.assertIn("--out", r.stdout)


if __name__ == "__main__":
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("skipped: no matplotlib for this python3")
        sys.exit(77)
    unittest.main()
