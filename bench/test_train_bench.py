#!/usr/bin/env python3
"""Tests of bench/train_bench.py (python3 bench/test_train_bench.py; $FIVEFOLD names the built
command; exit 77 when it, torch or the Fashion-MNIST folder is missing).

- End to end on the CPU with tiny limits (serial against the eager peer, 2 epochs of 512 images):
  the gate ran `fivefold verify --model mnist-cnn --mode serial` and passed, the JSON has every
  field and its figures follow from the runs' own (epoch time = median without epoch 1, ratio =
  peer / fivefold, accuracy difference, TFLOP/s from 23,984,896 forward FLOPs per image), the
  table is printed.
- A failing gate (`--fivefold /bin/false`) refuses: exit 3, nothing timed, no JSON.
- A fivefold whose `train --json` lacks a field: exit 1, the field named, the JSON marked incomplete.
- Bad usage exits 2 naming the option.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "train_bench.py")
FIVEFOLD = os.environ.get("FIVEFOLD", "")
DATA = os.environ.get("FF_DATA", "/usr/share/datasets/fashion-mnist")
TINY = ["--device", "cpu", "--modes", "serial", "--batch", "64", "--epochs", "2", "--train-limit", "512",
        "--test-limit", "100", "--data", DATA]

try:
    import torch  # noqa: F401  (the peer runs with this python)
except ImportError:
    torch = None

FAKE = """#!/bin/sh
# a fivefold whose checks pass and whose `train --json` lacks most fields
case "$1" in
  verify) echo "1 passed, 0 failed"; exit 0 ;;
  --version) echo "fivefold fake"; exit 0 ;;
  train)
    [ "$2" = --help ] && { echo "  --json FILE"; exit 0; }
    while [ $# -gt 0 ]; do [ "$1" = --json ] && out=$2; shift; done
    echo '{"model": "mnist-cnn", "mode": "serial", "ranks": 1}' > "$out"; exit 0 ;;
esac
exit 2
"""


def run(*args):
    return subprocess.run([sys.executable, BENCH, "--python", sys.executable, *args], capture_output=True,
                          text=True, timeout=300)


class TrainBenchTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = os.path.join(self.tmp.name, "bench.json")

    def tearDown(self):
        self.tmp.cleanup()

    def test_end_to_end_cpu(self):
        r = run("--fivefold", FIVEFOLD, "--peers", "eager", "--out", self.out, *TINY)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        with open(self.out) as f:
            d = json.load(f)
        for key in ("schema", "created", "complete", "machine", "versions", "config", "gate", "method",
                    "results", "commands"):
            self.assertIn(key, d)
        self.assertEqual(d["schema"], "fivefold-train-bench/1")
        self.assertTrue(d["complete"])
        self.assertTrue(d["machine"]["name"])
        self.assertEqual(d["versions"]["torch"], torch.__version__)
        self.assertTrue(d["versions"]["fivefold"].startswith("fivefold "), d["versions"])
        self.assertEqual(d["gate"]["passed"], True)
        self.assertEqual([c["mode"] for c in d["gate"]["checks"]], ["serial"])
        self.assertTrue(d["gate"]["checks"][0]["command"].endswith("verify --model mnist-cnn --mode serial"))
        self.assertRegex(d["gate"]["checks"][0]["summary"], r"\d+ passed, 0 failed")
        self.assertEqual(d["method"]["flops_per_image"], 23984896)
        self.assertIn("3 * forward FLOPs/image", d["method"]["tflops"])
        self.assertTrue(d["method"]["warmup_epoch_excluded"])
        whats = [c["what"] for c in d["commands"]]
        self.assertEqual(whats, ["gate serial", "fivefold serial batch 64", "pytorch eager batch 64"])
        self.assertTrue(all(c["exit"] == 0 for c in d["commands"]))

        self.assertEqual(len(d["results"]), 1)
        res = d["results"][0]
        self.assertEqual(res["batch"], 64)
        (ff,), (pt,), (pair,) = res["fivefold"], res["pytorch"], res["pairs"]
        # fivefold: its own JSON, and the figures derived from it
        self.assertEqual((ff["mode"], ff["ranks"], ff["json"]["batch"], ff["json"]["epochs"]), ("serial", 1, 64, 2))
        self.assertEqual(len(ff["seconds_per_epoch"]), 2)
        self.assertEqual(ff["epoch_s"], statistics.median(ff["seconds_per_epoch"][1:]))
        self.assertTrue(ff["first_epoch_excluded"])
        self.assertEqual(ff["images_per_epoch"], 512)
        self.assertAlmostEqual(ff["tflops"], 3 * 23984896 * 512 / ff["epoch_s"] / 1e12, places=12)
        self.assertAlmostEqual(ff["peak_fraction"], ff["tflops"] / 51.0, places=12)
        self.assertEqual(ff["test_accuracy"], ff["json"]["test_accuracy"][-1])
        self.assertGreater(ff["test_accuracy"], 20)
        self.assertRegex(ff["weights_digest"], r"^[0-9a-f]{16}$")
        self.assertIn("serial batch 64", d["versions"]["fivefold_digests"])
        # the peer: same recipe, same initial weights (fivefold's generator, seed 1)
        self.assertEqual((pt["variant"], pt["ranks"]), ("eager", 1))
        self.assertEqual(pt["json"]["initial_weights_digest"], "01191716b3bfe8fe")
        self.assertEqual((pt["json"]["init"], pt["json"]["shuffle"], pt["json"]["batch"]), ("fivefold", "fivefold", 64))
        self.assertEqual(pt["epoch_s"], statistics.median(pt["seconds_per_epoch"][1:]))
        self.assertGreater(pt["test_accuracy"], 20)
        # the pair
        self.assertEqual((pair["mode"], pair["peer"]), ("serial", "eager"))
        self.assertAlmostEqual(pair["ratio"], pt["epoch_s"] / ff["epoch_s"], places=12)
        self.assertAlmostEqual(pair["accuracy_diff_points"], ff["test_accuracy"] - pt["test_accuracy"], places=9)
        self.assertLess(abs(pair["accuracy_diff_points"]), 15)  # same recipe: close accuracies
        # the table
        self.assertIn("fivefold serial", r.stdout)
        self.assertIn("pytorch eager", r.stdout)
        self.assertIn(f"{pair['ratio']:.2f} vs serial", r.stdout)
        self.assertIn(f"written: {self.out}", r.stdout)

    def test_gate_failure_refuses(self):
        r = run("--fivefold", "/bin/false", "--peers", "eager", "--out", self.out, *TINY)
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn("gate refused: `/bin/false verify --model mnist-cnn --mode serial` exited 1", r.stderr)
        self.assertIn("nothing was timed", r.stderr)
        self.assertNotIn("train --model", r.stderr)  # no training run was started
        self.assertNotIn("peer_pytorch.py", r.stderr)
        self.assertFalse(os.path.exists(self.out))
        self.assertEqual(r.stdout, "")

    def test_missing_field_named(self):
        fake = os.path.join(self.tmp.name, "fivefold")
        with open(fake, "w") as f:
            f.write(FAKE)
        os.chmod(fake, 0o755)
        r = run("--fivefold", fake, "--peers", "none", "--out", self.out, *TINY)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("field(s) batch, microbatch, epochs, steps, images, seconds, seconds_per_epoch, ", r.stderr)
        with open(self.out) as f:
            d = json.load(f)
        self.assertFalse(d["complete"])
        self.assertIn("seconds_per_epoch", d["results"][0]["fivefold"][0]["error"])
        self.assertIn("FAILED", r.stdout)

    def test_usage_errors(self):
        for args, msg in ((["--modes", "direct"], "--modes 'direct': a multi-rank mode needs its rank count"),
                          (["--modes", "cuda"], "--device cpu: GPU modes"),
                          (["--modes", "serial", "--peers", "graph"], "the graph peer needs --device cuda"),
                          (["--modes", "serial", "--peers", "eager:2"], "only ddp takes :P"),
                          (["--modes", "serial", "--batch", "0"], "--batch '0'")):
            r = run("--fivefold", "/bin/true", "--out", self.out, "--device", "cpu", "--data", DATA, *args)
            self.assertEqual(r.returncode, 2, f"{args}: {r.stderr}")
            self.assertIn(msg, r.stderr)
            self.assertFalse(os.path.exists(self.out))


if __name__ == "__main__":
    missing = [why for cond, why in ((torch is None, "torch"),
                                     (not (FIVEFOLD and os.access(FIVEFOLD, os.X_OK)), "$FIVEFOLD (the built command)"),
                                     (not os.path.isdir(DATA), f"the IDX data in {DATA}")) if cond]
    if missing:
        print(f"SKIP: missing {', '.join(missing)}", file=sys.stderr)
        sys.exit(77)
    unittest.main()
