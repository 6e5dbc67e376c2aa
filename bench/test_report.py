#!/usr/bin/env python3
"""Tests of bench/report.py on the fixtures in bench/testdata (python3 -m unittest, or run directly).

The fixtures are hand-written result files (their "note" says so), not measurements: serial,
mpi rows P=2 and P=4, cuda, a run whose gate failed (after timing: its timings must not be
shown), a peer without a speedup field (computed), an older duplicate of a
configuration that must be superseded by the newer file, and under testdata/bad/ three malformed
files (truncated JSON, another schema, a missing timing field).
"""
import os
import re
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPORT = os.path.join(HERE, "report.py")
DATA = os.path.join(HERE, "testdata")
sys.path.insert(0, HERE)
import report  # noqa: E402  (for the model arithmetic)


def run(*args):
    return subprocess.run([sys.executable, REPORT, *args], capture_output=True, text=True, timeout=300)


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def rows(markdown):
    """Table rows (without header and rule) as lists of cell strings."""
    out = []
    for line in markdown.splitlines():
        if line.startswith("| ") and not line.startswith("| model "):
            out.append([c.strip() for c in line.strip().strip("|").split("|")])
    return out


class ReportTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = os.path.join(self.tmp.name, "plots")

    def tearDown(self):
        self.tmp.cleanup()

    def test_table_rows(self):
        r = run(DATA, "--out", self.out, "--peak", "gpu:51000:3350", "--peak", "cpu:80:20")
        self.assertEqual(r.returncode, 0, r.stderr)
        table = rows(r.stdout)
        # 8 fixture files, two of them the same configuration: 7 rows, serial before mpi before cuda
        self.assertEqual(len(table), 7, r.stdout)
        self.assertEqual([t[1] for t in table[:6]], ["serial", "serial", "mpi", "mpi", "mpi", "cuda"])
        by = {(t[0], t[1], t[2], t[3], t[4]): t for t in table}
        # the newer serial batch-1 file (325 ms, peer 118.3 ms) wins over the older one (400 ms)
        s1 = by[("alexnet", "serial", "—", "1", "1")]
        self.assertEqual(s1[7:], ["325.0", "3.08", "6.99", "pytorch-eager-fp32-cpu-1t", "118.3", "0.36×",
                                  "PASS"])
        # speedup = peer / ours = 700 / 1400; GFLOP/s = 2270512192 * 8 / 1.4 s
        m2 = by[("alexnet", "mpi", "rows", "2", "8")]
        self.assertEqual(m2[7:], ["1400.0", "5.71", "12.97", "pytorch-eager-fp32-cpu-0t", "700.0", "0.50×",
                                  "PASS"])
        # no peer: dashes, not zeros
        m4 = by[("alexnet", "mpi", "rows", "4", "8")]
        self.assertEqual(m4[10:13], ["—", "—", "—"])
        # a failed gate is listed with FAIL and none of the figures its file carries
        ref = by[("alexnet", "mpi", "batch", "2", "8")]
        self.assertEqual(ref[7:], ["—"] * 6 + ["FAIL"])
        # no speedup field in the file: computed as peer / ours = 95 / 110
        mn = by[("mnist-cnn", "serial", "—", "1", "64")]
        self.assertEqual(mn[7:], ["110.0", "581.8", "13.95", "pytorch-eager-fp32-cpu-1t", "95.00", "0.86×", "PASS"])
        cu = by[("alexnet", "cuda", "—", "1", "64")]
        self.assertEqual(cu[12], "0.80×")

    def test_pngs_written(self):
        r = run(DATA, "--out", self.out)
        self.assertEqual(r.returncode, 0, r.stderr)
        for name in ("throughput_vs_batch.png", "scaling_vs_ranks.png", "phases.png", "roofline.png"):
            path = os.path.join(self.out, name)
            self.assertTrue(os.path.isfile(path), f"{name} not written")
            with open(path, "rb") as f:
                head = f.read(8)
            self.assertEqual(head, b"\x89PNG\r\n\x1a\n", f"{name} is not a PNG")
            self.assertGreater(os.path.getsize(path), 5000, f"{name} is (nearly) empty")

    def test_malformed_files_named(self):
        cases = {"truncated.json": r"not valid JSON: .* at line \d+ column \d+",
                 "wrong_schema.json": r"schema is 'fivefold-bench/0', expected 'fivefold-bench/1'",
                 "missing_median.json": r"missing field 'timing\.median_ms'"}
        for name, pattern in cases.items():
            path = os.path.join(DATA, "bad", name)
            # alone and mixed with good files: the bad one stops the report and is named
            for args in ([path], [DATA, path]):
                r = run(*args, "--out", self.out)
                self.assertEqual(r.returncode, 2, f"{name}: {r.stdout} {r.stderr}")
                self.assertIn(path, r.stderr)
                self.assertRegex(r.stderr, pattern)
                self.assertEqual(rows(r.stdout), [], "no table may be printed from bad input")

    def test_readme_rewritten_between_markers(self):
        readme = os.path.join(self.tmp.name, "README.md")
        with open(readme, "w") as f:
            f.write("# title\n\nintro\n\n## Performance\n\n<!-- perf:begin -->\nold table\n<!-- perf:end -->\n\n"
                    "## After\n\nkept\n")
        r = run(DATA, "--out", self.out, "--readme", readme)
        self.assertEqual(r.returncode, 0, r.stderr)
        text = read(readme)
        self.assertTrue(text.startswith("# title\n\nintro\n\n## Performance\n\n<!-- perf:begin -->"))
        self.assertTrue(text.endswith("<!-- perf:end -->\n\n## After\n\nkept\n"))
        self.assertNotIn("old table", text)
        self.assertEqual(len(rows(text)), 7)
        # the plots are linked relative to the README
        links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
        self.assertEqual(sorted(os.path.basename(x) for x in links),
                         ["phases.png", "roofline.png", "scaling_vs_ranks.png", "throughput_vs_batch.png"])
        for link in links:
            self.assertFalse(os.path.isabs(link))
            self.assertTrue(os.path.isfile(os.path.join(self.tmp.name, link)), link)
        # twice gives the same text (the markers are kept)
        before = text
        self.assertEqual(run(DATA, "--out", self.out, "--readme", readme).returncode, 0)
        self.assertEqual(read(readme), before)

    def test_readme_without_markers_refused(self):
        readme = os.path.join(self.tmp.name, "README.md")
        with open(readme, "w") as f:
            f.write("# no markers here\n")
        r = run(DATA, "--no-plots", "--readme", readme)
        self.assertEqual(r.returncode, 2)
        self.assertIn(readme, r.stderr)
        self.assertIn("<!-- perf:begin -->", r.stderr)
        self.assertEqual(read(readme), "# no markers here\n")

    def test_bad_peak_flag(self):
        r = run(DATA, "--out", self.out, "--peak", "tpu:5")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--peak 'tpu:5'", r.stderr)

    def test_no_results(self):
        r = run(os.path.join(DATA, "bad", "nothing-here"), "--no-plots")
        self.assertEqual(r.returncode, 2)  # a path that does not exist is bad input, named
        self.assertIn("nothing-here", r.stderr)
        empty = os.path.join(self.tmp.name, "empty")
        os.mkdir(empty)
        r = run(empty, "--no-plots")
        self.assertEqual(r.returncode, 1)
        self.assertIn("no result files", r.stderr)

    def test_model_arithmetic_matches_design(self):
        # docs/ARCHITECTURE.md §2: AlexNet about 2.27 GFLOP and 62.4 M parameters; mnist-cnn 24 MFLOP, 1.2 M.
        # The exact figures are those fivefold's model.c derives (`fivefold info`).
        fa, pa, _ = report.model_stats("alexnet")
        fm, pm, _ = report.model_stats("mnist-cnn")
        self.assertEqual(fa, 2270512192)
        self.assertEqual(pa, 62378344)
        self.assertEqual(fm, 23984896)
        self.assertEqual(pm, 1199882)


if __name__ == "__main__":
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("SKIP: matplotlib is missing (apt-get install python3-matplotlib)", file=sys.stderr)
        sys.exit(77)  # CTest's skip code (SKIP_RETURN_CODE 77)
    unittest.main()
