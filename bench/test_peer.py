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


DATA = os.environ.get("FF_DATA", "/usr/share/datasets/fashion-mnist")
TRAIN = ["--task", "train", "--data", DATA, "--test-limit", "200", "--batch", "64", "--init", "fivefold",
         "--shuffle", "fivefold", "--seed", "1"]
# ff_weights_generate(mnist-cnn, seed 1) then ff_weights_digest (as `fivefold train` prints it)
SEED1_INIT_DIGEST = "01191716b3bfe8fe"


def cpu_capture(step, warmup):
    """A CPU stand-in for cuda_graph_capture with its contract: warm-up steps run, the captured
    step does not run at capture, each replay reruns it on the same tensors and leaves its loss in
    the returned static tensor."""
    for _ in range(warmup):
        step()
    static = torch.zeros(())
    return (lambda: static.copy_(step().detach())), static


@unittest.skipIf(torch is None, "torch is missing")
@unittest.skipUnless(os.path.isdir(DATA), f"no IDX data in {DATA} (apt-get install dataset-fashion-mnist)")
class TrainTest(unittest.TestCase):
    """--task train: eager, --graph (its bookkeeping, through a CPU stand-in for the capture) and
    --ddp over gloo give the same recipe; usage errors are refused by name."""

    def train_json(self, *extra):
        r = run(*TRAIN, *extra)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        lines = r.stdout.strip().splitlines()
        self.assertEqual(len(lines), 1, "exactly one JSON line on stdout")
        return json.loads(lines[0])

    def check_epochs(self, d, epochs):
        self.assertEqual(len(d["seconds_per_epoch"]), epochs)
        self.assertTrue(all(0 < s < d["seconds"] for s in d["seconds_per_epoch"]), d["seconds_per_epoch"])
        self.assertEqual(len(d["test_accuracy_per_epoch"]), epochs)
        self.assertGreater(d["test_accuracy"], 20.0)  # 10 classes: well above chance after 512 images
        self.assertLessEqual(d["test_accuracy"], 100.0)
        self.assertEqual(d["test_samples"], 200)
        self.assertEqual(d["initial_weights_digest"], SEED1_INIT_DIGEST)
        self.assertRegex(d["weights_digest"], r"^[0-9a-f]{16}$")
        self.assertNotEqual(d["weights_digest"], SEED1_INIT_DIGEST)
        self.assertTrue(math.isfinite(d["loss_first"]) and math.isfinite(d["loss_last"]))
        self.assertLess(d["loss_last"], d["loss_first"])

    def test_eager_and_ddp(self):
        e = self.train_json("--train-limit", "512", "--epochs", "1", "--losses")
        self.assertEqual((e["variant"], e["name"], e["world_size"], e["steps"]),
                         ("eager", f"pytorch-train-fp32-cpu-{e['threads']}t", 1, 8))
        self.assertFalse(e["data_on_device"])
        self.check_epochs(e, 1)
        # DDP over 2 gloo ranks, 32 images each: the same recipe, so the same losses up to the
        # float rounding of the gradient average
        d = self.train_json("--train-limit", "512", "--epochs", "1", "--losses", "--ddp", "--device", "cpu",
                            "--nproc", "2")
        self.assertEqual((d["variant"], d["world_size"], d["batch"], d["batch_per_rank"], d["steps"]),
                         ("ddp", 2, 64, 32, 8))
        self.assertTrue(d["name"].startswith("pytorch-train-ddp-fp32-cpu-"), d["name"])
        self.assertTrue(d["data_on_device"])
        self.check_epochs(d, 1)
        self.assertEqual(len(d["losses"]), 8)
        for k, (a, b) in enumerate(zip(e["losses"], d["losses"])):
            self.assertAlmostEqual(a, b, delta=1e-4, msg=f"step {k + 1}")
        self.assertAlmostEqual(e["test_accuracy"], d["test_accuracy"], delta=1.0)

    def test_ddp_uneven_last_batch(self):
        # 200 images, B = 64: the last batch has 8 images, then P = 3 does not divide B (refused) and
        # P = 2 splits it 4 + 4; with 201 images 9 = 5 + 4, weighted so the step is the global mean
        r = run(*TRAIN, "--train-limit", "200", "--epochs", "1", "--ddp", "--device", "cpu", "--nproc", "3")
        self.assertEqual(r.returncode, 2, r.stdout)
        self.assertIn("--batch 64 is not divisible by the 3 processes", json.loads(r.stdout)["error"])
        e = self.train_json("--train-limit", "201", "--epochs", "1", "--losses")
        d = self.train_json("--train-limit", "201", "--epochs", "1", "--losses", "--ddp", "--device", "cpu",
                            "--nproc", "2")
        self.assertEqual(len(d["losses"]), 4)
        for k, (a, b) in enumerate(zip(e["losses"], d["losses"])):
            self.assertAlmostEqual(a, b, delta=1e-4, msg=f"step {k + 1}")

    def test_graph_bookkeeping_equals_eager(self):
        # In process: the graph variant with the CPU stand-in for the capture runs the warm-up steps,
        # undoes them, replays the full batches and runs the short last one (200 % 64 = 8) eagerly;
        # it must train bit for bit as the eager loop. Without undoing the warm-up it must not.
        base = TRAIN + ["--train-limit", "200", "--epochs", "2", "--losses"]
        e = peer.task_train(peer.parse_args(base + ["--model", "mnist-cnn"]))
        g = peer.task_train(peer.parse_args(base + ["--model", "mnist-cnn", "--graph"]), capture=cpu_capture)
        self.assertEqual((g["variant"], g["graph_tail"], g["graph_warmup_steps"], g["steps"]),
                         ("graph", "eager", 3, 8))
        self.assertEqual(g["losses"], e["losses"])
        self.assertEqual(g["weights_digest"], e["weights_digest"])
        self.assertEqual(len(g["seconds_per_epoch"]), 2)
        self.assertGreater(g["setup_s"], 0)
        keep = peer.restore_after_capture
        try:
            peer.restore_after_capture = lambda *a: None
            bad = peer.task_train(peer.parse_args(base + ["--model", "mnist-cnn", "--graph"]), capture=cpu_capture)
        finally:
            peer.restore_after_capture = keep
        self.assertNotEqual(bad["weights_digest"], e["weights_digest"])

    def test_usage_errors(self):
        for args, msg in ((["--graph", "--device", "cpu"], "--graph (CUDA graph replay) needs --device cuda"),
                          (["--graph", "--ddp", "--device", "cpu", "--nproc", "2"],
                           "--graph and --ddp do not combine"),
                          (["--ddp", "--device", "cpu", "--nproc", "2", "--batch", "63"],
                           "--batch 63 is not divisible by the 2 processes")):
            r = run(*TRAIN, "--train-limit", "64", "--epochs", "1", *args)
            self.assertEqual(r.returncode, 2, f"{args}: {r.stdout}")
            self.assertEqual(len(r.stdout.strip().splitlines()), 1, r.stdout)
            self.assertIn(msg, json.loads(r.stdout)["error"])


if __name__ == "__main__":
    if torch is None:
        print("SKIP: torch is missing (use /usr/bin/python3 with python3-torch)", file=sys.stderr)
        sys.exit(77)
    unittest.main()
