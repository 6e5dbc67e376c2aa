#!/usr/bin/env python3
"""Tests of bench/plot_train_bench.py on made-up bench/train_bench.py results (python3 -m unittest,
or run directly; exit 77, a CTest skip, without matplotlib).

The files are written here, not measured: two batches, fivefold's cuda, direct:2 and hybrid:2 (the
faster of the two-rank runs is the one drawn), a direct:4 that failed (no four-GPU fivefold bar),
PyTorch's eager, graph (the faster one-GPU peer), DDP:2 and DDP:4; and broken ones: missing, not
JSON, another schema, no results, a batch the file does not have, every run failed.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "plot_train_bench.py")


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=120)


def png_size(path):
    """(width, height) from the PNG's IHDR chunk; fails on anything that is not a PNG."""
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", head[:8]
    return struct.unpack(">II", head[16:24])


def result(batch, scale=1.0):
    ff = [{"label": "cuda", "mode": "cuda", "ranks": 1, "ms_per_step": 28.0 * scale},
          {"label": "hybrid:2", "mode": "hybrid", "ranks": 2, "ms_per_step": 20.0 * scale},
          {"label": "direct:2", "mode": "direct", "ranks": 2, "ms_per_step": 14.0 * scale},
          {"label": "direct:4", "mode": "direct", "ranks": 4, "error": "exit 1"}]
    pt = [{"label": "eager", "ranks": 1, "ms_per_step": 30.0 * scale},
          {"label": "graph", "ranks": 1, "ms_per_step": 29.0 * scale},
          {"label": "ddp:2", "ranks": 2, "ms_per_step": 17.4 * scale},
          {"label": "ddp:4", "ranks": 4, "ms_per_step": 11.6 * scale}]
    return {"batch": batch, "fivefold": ff, "pytorch": pt}


def bench_file(**extra):
    d = {"schema": "fivefold-train-bench/1", "config": {"model": "mlp"}, "machine": {"name": "NVIDIA H200"},
         "results": [result(2048), result(1024, 0.5)]}
    d.update(extra)
    return d


class PlotTrainBenchTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def write(self, name, content):
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            f.write(content if isinstance(content, str) else json.dumps(content))
        return path

    def test_plot_and_table(self):
        path = self.write("r.json", bench_file())
        r = run(path)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = os.path.join(self.dir.name, "r.png")  # RESULT with .png by default
        w, h = png_size(out)
        self.assertGreater(w, 400)
        self.assertGreater(h, 300)
        self.assertIn("mlp, batch 2048, NVIDIA H200", r.stdout)
        lines = {int(x.split()[0]): x for x in r.stdout.splitlines() if x.strip()[:1].isdigit()}
        self.assertEqual(sorted(lines), [1, 2, 4])
        # one GPU: cuda against the faster of eager and graph
        self.assertIn("28.00 cuda (1.00x)", lines[1])
        self.assertIn("29.00 graph (1.00x)", lines[1])
        self.assertIn("1.04x", lines[1])  # 29 / 28
        # two: the faster fivefold run (direct, not hybrid), scaling 28 / 14
        self.assertIn("14.00 direct:2 (2.00x)", lines[2])
        self.assertNotIn("hybrid", r.stdout)
        self.assertIn("17.40 ddp:2 (1.67x)", lines[2])  # 29 / 17.4
        self.assertIn("1.24x", lines[2])  # 17.4 / 14
        # four: fivefold's run failed, so only PyTorch's bar, and no ratio
        self.assertRegex(lines[4], r"^\s+4\s+-\s+11\.60 ddp:4 \(2\.50x\)\s+-$")

    def test_batch_and_out(self):
        path = self.write("r.json", bench_file())
        out = os.path.join(self.dir.name, "b1024.png")
        r = run(path, "--batch", "1024", "--out", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        png_size(out)
        self.assertIn("batch 1024", r.stdout)
        self.assertIn("7.00 direct:2", r.stdout)
        r = run(path, "--no-plot")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("written", r.stdout)
        self.assertFalse(os.path.exists(os.path.join(self.dir.name, "r.png")))

    def test_bad_files(self):
        cases = {
            "missing": (os.path.join(self.dir.name, "nope.json"), "No such file"),
            "not json": (self.write("bad.json", "{not json"), "bad.json"),
            "schema": (self.write("train.json", {"schema": "fivefold-train/1"}), "expected a bench/train_bench.py"),
            "no results": (self.write("empty.json", bench_file(results=[])), "no \"results\""),
        }
        failed = bench_file()
        for r in failed["results"]:
            for x in r["fivefold"] + r["pytorch"]:
                x["error"] = "timeout"
        cases["all failed"] = (self.write("failed.json", failed), "no run at batch 2048 finished")
        for name, (path, message) in cases.items():
            with self.subTest(name):
                r = run(path)
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                self.assertIn(message, r.stderr)
                self.assertEqual(r.stderr.count("plot_train_bench.py:"), 1, r.stderr)
        r = run(self.write("r.json", bench_file()), "--batch", "512")
        self.assertEqual(r.returncode, 2)
        self.assertIn("no result at batch 512 (batches: 2048, 1024)", r.stderr)

    def test_help(self):
        r = run("--help")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("usage: plot_train_bench.py", r.stdout)
        self.assertIn("--no-plot", r.stdout)


if __name__ == "__main__":
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("skipped: no matplotlib for this python3")
        sys.exit(77)
    unittest.main()
