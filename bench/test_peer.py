#!/usr/bin/env python3
"""Tests of bench/peer_pytorch.py (python3 bench/test_peer.py; exit 77 when torch is missing).

- The peer's copy of fivefold's generator and shuffle gives fivefold's values: known answers
  recorded from the C code (core/model/rng.c ff_rng_fill, ff_weights_generate + ff_weights_digest, the
  train branch's ff_shuffle_order), and, when $FIVEFOLD names the built command, a live comparison.
- The peer's mnist-cnn and alexnet with fivefold's generator weights and input give the top-5
  probabilities `fivefold infer --model M --mode serial --batch 1 --seed 7` prints: the
  architectures are the same (a wrong layer order, pad, stride or LRN would change them).
- The infer task prints one JSON line whose figures are consistent; bad usage exits 2 with a JSON
  error naming the flag.
"""
import json
import math
import os
import re
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PEER = os.path.join(HERE, "peer_pytorch.py")
sys.path.insert(0, HERE)

try:
    import torch
    import peer_pytorch as peer
except ImportError:  # reported as a skip by __main__ below
    torch = None

# `fivefold infer --model mnist-cnn --mode serial --batch 1 --seed 7` (commit 9558fe217d07):
#   image 0 top-5: 4 (0.3162) 8 (0.3004) 2 (0.09209) 1 (0.08129) 7 (0.06533)
MNIST_SEED7_TOP5 = [(4, 0.3162), (8, 0.3004), (2, 0.09209), (1, 0.08129), (7, 0.06533)]
# `fivefold infer --model alexnet --mode serial --batch 1 --seed 7` (same commit):
ALEXNET_SEED7_TOP5 = [(167, 0.1255), (245, 0.03165), (401, 0.02238), (29, 0.02085), (238, 0.02057)]
FF_TENSOR_ID_INPUT = 0x494E505554


def run(*args):
    return subprocess.run([sys.executable, PEER, *args], capture_output=True, text=True, timeout=600)


@unittest.skipIf(torch is None, "torch is missing")
class GeneratorTest(unittest.TestCase):
    def test_rng_fill_known_answers(self):
        # ff_rng_fill(v, 4, seed 12345, tensor id 3, scale 0.5f), printed with %a
        want = ["-0x1.9c1p-9", "-0x1.5a318p-7", "-0x1.fc0bfp-4", "-0x1.e53c1p-3"]
        got = [float(x).hex() for x in peer.rng_fill(4, 12345, 3, 0.5)]
        self.assertEqual([float.fromhex(g) for g in got], [float.fromhex(w) for w in want])

    def test_generated_weights_digest(self):
        # ff_weights_generate(mnist-cnn, seed 7) then ff_weights_digest: bf3262b840189f09
        m, _ = peer.make_model("mnist-cnn")
        peer.init_fivefold(m, 7)
        self.assertEqual(peer.weights_digest(m), "bf3262b840189f09")
        peer.init_fivefold(m, 8)
        self.assertNotEqual(peer.weights_digest(m), "bf3262b840189f09")

    def test_shuffle_known_answers(self):
        # ff_shuffle_order(order, 10, seed 1, epoch 0 / 1)
        self.assertEqual(peer.shuffle_fivefold(10, 1, 0), [3, 2, 1, 8, 0, 4, 7, 6, 5, 9])
        self.assertEqual(peer.shuffle_fivefold(10, 1, 1), [3, 4, 1, 6, 7, 2, 5, 9, 0, 8])
        self.assertEqual(sorted(peer.shuffle_fivefold(1000, 3, 2)), list(range(1000)))

    def check_forward_equals_fivefold(self, model, want):
        m, shape = peer.make_model(model)
        peer.init_fivefold(m, 7)
        n = shape[0] * shape[1] * shape[2]
        x = torch.from_numpy(peer.rng_fill(n, 7, FF_TENSOR_ID_INPUT, 1.0)).view(1, *shape)
        with torch.no_grad():
            p = m(x)[0]
        exe = os.environ.get("FIVEFOLD")
        if exe and os.access(exe, os.X_OK):  # live: the command this build made
            out = subprocess.run([exe, "infer", "--model", model, "--mode", "serial", "--batch", "1",
                                  "--seed", "7"], capture_output=True, text=True, timeout=300).stdout
            line = re.search(r"image 0 top-5: (.*)", out)
            self.assertIsNotNone(line, out)
            want = [(int(c), float(v)) for c, v in re.findall(r"(\d+) \(([0-9.e-]+)\)", line.group(1))]
        top = torch.topk(p, 5)
        self.assertEqual(top.indices.tolist(), [c for c, _ in want])
        for (c, v), got in zip(want, top.values.tolist()):
            # printed with 4 significant digits: half a unit of the 4th digit, plus float32 slack
            delta = 0.5 * 10 ** (math.floor(math.log10(v)) - 3) + 1e-6
            self.assertAlmostEqual(got, v, delta=delta, msg=f"{model} class {c}")

    def test_mnist_forward_equals_fivefold(self):
        self.check_forward_equals_fivefold("mnist-cnn", MNIST_SEED7_TOP5)

    def test_alexnet_forward_equals_fivefold(self):
        # every layer's geometry (pads, strides, LRN after pool2, no groups) shows in these numbers
        self.check_forward_equals_fivefold("alexnet", ALEXNET_SEED7_TOP5)

    def test_flops_match_design(self):
        for name, flops in (("alexnet", 2270512192), ("mnist-cnn", 23984896)):
            m, shape = peer.make_model(name)
            self.assertEqual(peer.flops_per_image(m, shape), flops)


@unittest.skipIf(torch is None, "torch is missing")
class CommandTest(unittest.TestCase):
    def test_infer_json(self):
        r = run("--model", "mnist-cnn", "--batch", "2,3", "--threads", "1", "--iters", "3", "--warmup", "1")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.strip().splitlines()
        self.assertEqual(len(lines), 1, "exactly one JSON line on stdout")
        d = json.loads(lines[0])
        self.assertEqual(d["name"], "pytorch-eager-fp32-cpu-1t")
        self.assertEqual([x["batch"] for x in d["runs"]], [2, 3])
        for x in d["runs"]:
            self.assertEqual(x["iters"], 3)
            self.assertLessEqual(x["min_ms"], x["median_ms"])
            self.assertLessEqual(x["median_ms"], x["max_ms"])
            self.assertAlmostEqual(x["images_per_s"], x["batch"] / (x["median_ms"] / 1e3), places=6)
        self.assertEqual(d["torch"], torch.__version__)

    def test_single_batch_top_level_first(self):
        r = run("--model", "mnist-cnn", "--batch", "1", "--threads", "1", "--iters", "2", "--warmup", "0")
        self.assertEqual(r.returncode, 0, r.stderr)
        d = json.loads(r.stdout)
        self.assertEqual(d["median_ms"], d["runs"][0]["median_ms"])
        # the C bench takes the first "median_ms": it must be the top-level one (before "runs")
        self.assertLess(r.stdout.index('"median_ms"'), r.stdout.index('"runs"'))

    def test_usage_errors(self):
        for args, flag in ((["--model", "vgg"], "--model"), (["--batch", "0"], "--batch"),
                           (["--graph"], "--graph"), (["--precision", "bf16"], "--precision"),
                           (["--task", "train", "--data", os.path.join(HERE, "no-such-dir")], "--data")):
            r = run(*args, "--iters", "1")
            self.assertEqual(r.returncode, 2, f"{args}: {r.stdout}")
            self.assertIn(flag, json.loads(r.stdout)["error"])


if __name__ == "__main__":
    if torch is None:
        print("SKIP: torch is missing (use /usr/bin/python3 with python3-torch)", file=sys.stderr)
        sys.exit(77)
    unittest.main()
