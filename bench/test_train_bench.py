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
- --model mlp-small on the CPU (serial against eager and ddp:2, 512 synthetic samples, 2 epochs;
  gated when golden/data/mlp-small.h5 exists, else --no-gate): the JSON has the per-step figures
  (ms/step = epoch time / steps per epoch, the ratio per step, TFLOP/s from 6 x sum(in x out) per
  sample, the scaling eager -> ddp:2) and both sides' final losses agree; the gate of the MLPs
  verifies mlp-small (also for the full mlp); --data is refused for the MLPs.
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
        self.assertEqual(d["method"]["step_flops_per_image"], 3 * 23984896 - 2 * 32 * 1 * 3 * 3 * 26 * 26)
        self.assertIn("3 * forward FLOPs/image - 2 * 32*1*3*3*26*26", d["method"]["tflops"])
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
        self.assertAlmostEqual(ff["tflops"], 71565312 * 512 / ff["epoch_s"] / 1e12, places=12)
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
        # against the strongest peer on as many ranks: the only one here, per epoch
        (st,) = res["strongest"]
        self.assertEqual((st["mode"], st["peer"], st["by"]), ("serial", "eager", "epoch_s"))
        self.assertAlmostEqual(st["ratio"], pair["ratio"], places=12)
        self.assertIn(f"strongest peer batch 64: fivefold serial {st['ratio']:.2f}x PyTorch's fastest on at most 1 rank "
                      "(eager", r.stdout)
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
                          (["--modes", "serial", "--peers", "graph"], "the graph and ddp-graph peers need --device cuda"),
                          (["--modes", "serial", "--peers", "eager:2"], "only ddp and ddp-graph take :P"),
                          (["--modes", "serial", "--peers", "ddp-graph:2"], "the graph and ddp-graph peers need"),
                          (["--modes", "serial", "--batch", "0"], "--batch '0'"),
                          (["--modes", "serial", "--peers", "none", "--mode-args", "cuda=--microbatch 8"],
                           "--mode-args 'cuda=--microbatch 8': expected LABEL=ARGS with LABEL one of --modes (serial)"),
                          (["--modes", "serial", "--peers", "none", "--mode-args", "serial"],
                           "--mode-args 'serial': expected LABEL=ARGS"),
                          (["--modes", "serial", "--peers", "none", "--mode-args", "serial=--seed 2", "--mode-args",
                            "serial=--seed 3"],
                           "--mode-args: 'serial' given twice"),
                          (["--modes", "serial", "--peers", "none", "--ff-args", "--lr '0.1"],
                           "--ff-args '--lr '0.1': No closing quotation"),
                          (["--modes", "serial", "--peers", "none", "--mode-args", "serial=--seed \"2"],
                           "--mode-args 'serial=--seed \"2': No closing quotation")):
            r = run("--fivefold", "/bin/true", "--out", self.out, "--device", "cpu", "--data", DATA, *args)
            self.assertEqual(r.returncode, 2, f"{args}: {r.stderr}")
            self.assertIn(msg, r.stderr)
            self.assertFalse(os.path.exists(self.out))


MLP_GOLDEN = os.path.join(os.path.dirname(HERE), "golden", "data", "mlp-small.h5")
MLP_SMALL_FWD_FLOPS = 2 * (256 * 512 + 512 * 384 + 384 * 256 + 256 * 128 + 128 * 64 + 64 * 32)  # 937,984
# a step: forward, weight gradients and input gradients, fc1's input gradient left out (never computed)
MLP_SMALL_STEP_FLOPS = 3 * MLP_SMALL_FWD_FLOPS - 2 * 256 * 512  # 2,551,808
MLP_TINY = ["--model", "mlp-small", "--device", "cpu", "--batch", "128", "--epochs", "2", "--train-limit", "512",
            "--test-limit", "256"]


class MlpBenchTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = os.path.join(self.tmp.name, "bench.json")

    def tearDown(self):
        self.tmp.cleanup()

    def test_mlp_small_end_to_end_cpu(self):
        gated = os.path.exists(MLP_GOLDEN)
        r = run("--fivefold", FIVEFOLD, "--modes", "serial", "--peers", "eager,ddp:2", "--out", self.out,
                *MLP_TINY, *([] if gated else ["--no-gate"]))
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        with open(self.out) as f:
            d = json.load(f)
        self.assertTrue(d["complete"])
        self.assertEqual((d["config"]["model"], d["config"]["data"], d["config"]["gate_model"]),
                         ("mlp-small", "synthetic", "mlp-small"))
        if gated:
            self.assertEqual([c["command"].split(" verify ")[1] for c in d["gate"]["checks"]],
                             ["--model mlp-small --mode serial"])
        else:
            self.assertEqual(d["gate"], {"passed": None, "skipped": True, "checks": []})
        self.assertEqual(d["method"]["flops_per_sample"], MLP_SMALL_FWD_FLOPS)
        self.assertEqual(d["method"]["step_flops_per_sample"], MLP_SMALL_STEP_FLOPS)
        self.assertEqual([x["multiply_adds"] for x in d["method"]["flops_layers"]],
                         [256 * 512, 512 * 384, 384 * 256, 256 * 128, 128 * 64, 64 * 32])
        whats = [c["what"] for c in d["commands"]]
        self.assertEqual(whats[-3:], ["fivefold serial batch 128", "pytorch eager batch 128",
                                      "pytorch ddp:2 batch 128"])
        train_cmd = d["commands"][-3]["command"]
        self.assertIn("train --model mlp-small --mode serial --batch 128", train_cmd)
        self.assertIn("--data synthetic", train_cmd)
        (res,) = d["results"]
        (ff,), (pe, pd) = res["fivefold"], res["pytorch"]
        self.assertEqual(ff["json"]["model"], "mlp-small")
        for x in (pe, pd):
            self.assertEqual((x["json"]["model"], x["json"]["data"], x["json"]["init"]),
                             ("mlp-small", "synthetic", "fivefold"))
        self.assertEqual((pe["ranks"], pd["ranks"], pd["json"]["batch_per_rank"]), (1, 2, 64))
        for x in (ff, pe, pd):  # 512 samples / 128 = 4 steps per epoch; epoch 2 timed
            self.assertEqual((x["images_per_epoch"], x["steps_per_epoch"]), (512, 4))
            self.assertEqual(x["epoch_s"], x["seconds_per_epoch"][1])
            self.assertAlmostEqual(x["ms_per_step"], 1e3 * x["epoch_s"] / 4, places=9)
            self.assertAlmostEqual(x["tflops"], MLP_SMALL_STEP_FLOPS * 512 / x["epoch_s"] / 1e12, places=12)
            self.assertAlmostEqual(x["peak_fraction"], x["tflops"] / 51.0, places=12)
        for x in (pe, pd):  # the peer's own per-step medians, kept beside
            self.assertEqual(x["step_ms_events"], x["json"]["step_ms_median"])
            self.assertGreater(x["step_ms_events"], 0)
        self.assertEqual([(p["mode"], p["peer"]) for p in res["pairs"]], [("serial", "eager"), ("serial", "ddp:2")])
        for pair, x in zip(res["pairs"], (pe, pd)):
            self.assertAlmostEqual(pair["ratio_per_step"], x["ms_per_step"] / ff["ms_per_step"], places=12)
            self.assertAlmostEqual(pair["ratio_per_step"], pair["ratio"], places=12)
            self.assertTrue(pair["same_samples_per_epoch"])
            # the same recipe from the same weights over the same batches: the same final loss
            self.assertAlmostEqual(pair["loss_last_rel_diff"],
                                   abs(ff["final_loss"] - x["loss_last"]) / ff["final_loss"], places=12)
            self.assertLess(pair["loss_last_rel_diff"], 1e-3)
        (sc,) = res["scaling"]
        self.assertEqual((sc["side"], sc["from"], sc["to"], sc["ranks"]), ("pytorch", "eager", "ddp:2", 2))
        self.assertAlmostEqual(sc["speedup"], pe["ms_per_step"] / pd["ms_per_step"], places=12)
        self.assertAlmostEqual(sc["efficiency"], sc["speedup"] / 2, places=12)
        self.assertIn("ms/step", r.stdout)
        self.assertIn(f"{ff['ms_per_step']:.3f}", r.stdout)
        self.assertIn(f"scaling batch 128: pytorch eager -> ddp:2: {sc['speedup']:.2f}x", r.stdout)
        self.assertIn("mlp-small training, 2 epoch(s)", r.stdout)

    def test_phases_line(self):
        sys.path.insert(0, HERE)
        import train_bench  # noqa: E402
        ph = {"compute": 14.3, "exchange": 0.5, "exchange_total": 6.6, "update": 0.9, "step": 15.7, "steps": 30}
        f = {"label": "direct:2", "ranks": 2, "json": {"phases_ms_per_step": ph, "overlap": True, "buckets": 4}}
        self.assertEqual(train_bench.phases_line(2048, f),
                         "phases batch 2048, fivefold direct:2 (ms/step, rank 0): compute 14.300, exchange 0.500 "
                         "exposed of 6.600 (in buckets during the backward, 4 buckets), update 0.900")
        f["json"]["overlap"] = False
        self.assertIn("(after the backward, 4 buckets)", train_bench.phases_line(2048, f))
        # queued on the GPU (NCCL): the step whole, and where the exchange ran
        q = {**f, "json": {"phases_ms_per_step": {**ph, "enqueue": 1.5}, "overlap": True, "buckets": 4,
                           "queued": True}}
        self.assertIn("step 15.700, the exchange queued on the GPU with the compute (in buckets during the "
                      "backward, 4 buckets;", train_bench.phases_line(2048, q))
        q["json"]["overlap_steps"] = True
        self.assertIn("(in buckets during the backward and the next step's forward, 4 buckets;",
                      train_bench.phases_line(2048, q))
        for broken in ({**f, "ranks": 1}, {**f, "error": "x"}, {**f, "json": {}},
                       {**f, "json": {"phases_ms_per_step": {**ph, "steps": 0}}}):
            self.assertIsNone(train_bench.phases_line(2048, broken))

    def test_scaling_names_different_arguments(self):
        # --mode-args: the one-GPU run at another micro-batch than the P-rank run; the scaling says so
        sys.path.insert(0, HERE)
        import train_bench  # noqa: E402
        one = {"label": "cuda", "mode": "cuda", "ranks": 1, "ms_per_step": 28.0, "ff_args": "--microbatch 2048"}
        two = {"label": "direct:2", "mode": "direct", "ranks": 2, "ms_per_step": 15.0, "ff_args": ""}
        (x,) = train_bench.scaling({"fivefold": [one, two], "pytorch": []})
        self.assertAlmostEqual(x["speedup"], 28.0 / 15.0, places=12)
        self.assertEqual((x["args_from"], x["args_to"]), ("--microbatch 2048", ""))
        text = train_bench.table([{"batch": 2048, "fivefold": [], "pytorch": [], "pairs": [], "scaling": [x]}],
                                 51.0, per_step=True)
        self.assertIn("scaling batch 2048: fivefold cuda -> direct:2: 1.87x (93% of 2) "
                      "[cuda: '--microbatch 2048'; direct:2: '']", text)
        two["ff_args"] = "--microbatch 2048"
        (x,) = train_bench.scaling({"fivefold": [one, two], "pytorch": []})
        self.assertNotIn("args_from", x)
        # --ff-args then --mode-args: the later value is the one fivefold uses, and the one shown
        one["ff_args"] = "--backend vendor --microbatch 1024 --microbatch 2048"
        two["ff_args"] = "--backend vendor --microbatch 1024"
        (x,) = train_bench.scaling({"fivefold": [one, two], "pytorch": []})
        self.assertEqual((x["args_from"], x["args_to"]), ("--backend vendor --microbatch 2048",
                                                          "--backend vendor --microbatch 1024"))
        two["ff_args"] = "--microbatch=1024 --backend vendor --microbatch 2048"
        (x,) = train_bench.scaling({"fivefold": [one, two], "pytorch": []})
        self.assertNotIn("args_from", x)  # the same effective arguments, written otherwise

    def test_strongest_peer_is_the_fastest_on_as_many_ranks(self):
        # direct:2 is measured against PyTorch's fastest run on <= 2 ranks (here its one-GPU graph,
        # faster than its DDP:2), never against a 4-rank run or a failed one; cuda against 1 rank only
        sys.path.insert(0, HERE)
        import train_bench  # noqa: E402
        ff = [{"label": "cuda", "ranks": 1, "ms_per_step": 28.0}, {"label": "direct:2", "ranks": 2, "ms_per_step": 15.0},
              {"label": "direct:3", "ranks": 3, "error": "x"}]
        py = [{"label": "graph", "ranks": 1, "ms_per_step": 27.0}, {"label": "ddp:2", "ranks": 2, "ms_per_step": 30.0},
              {"label": "ddp-graph:2", "ranks": 2, "error": "timed out"},
              {"label": "ddp:4", "ranks": 4, "ms_per_step": 5.0}]
        r = {"batch": 2048, "fivefold": ff, "pytorch": py, "pairs": [], "scaling": []}
        got = {x["mode"]: x for x in train_bench.strongest(r, "ms_per_step")}
        self.assertEqual(set(got), {"cuda", "direct:2"})
        self.assertEqual((got["cuda"]["peer"], got["direct:2"]["peer"]), ("graph", "graph"))
        self.assertAlmostEqual(got["direct:2"]["ratio"], 27.0 / 15.0, places=12)
        self.assertEqual(got["direct:2"]["peers_considered"], ["ddp:2", "graph"])
        py[1]["ms_per_step"] = 16.0  # now DDP:2 is PyTorch's best on two
        got = {x["mode"]: x for x in train_bench.strongest(r, "ms_per_step")}
        self.assertEqual(got["direct:2"]["peer"], "ddp:2")
        r["strongest"] = train_bench.strongest(r, "ms_per_step")
        text = "\n".join(train_bench.strongest_lines([r]))  # what table() prints below the rows
        self.assertIn("strongest peer batch 2048: fivefold direct:2 1.07x PyTorch's fastest on at most 2 ranks "
                      "(ddp:2, 16 ms/step; of ddp:2, graph)", text)
        self.assertIn("strongest peer batch 2048: fivefold cuda 0.96x PyTorch's fastest on at most 1 rank (graph", text)

    def test_gate_verifies_mlp_small(self):
        for model in ("mlp-small", "mlp"):
            r = run("--fivefold", "/bin/false", "--peers", "eager", "--out", self.out, "--modes", "serial",
                    "--device", "cpu", "--model", model)
            self.assertEqual(r.returncode, 3, r.stderr)
            self.assertIn("gate refused: `/bin/false verify --model mlp-small --mode serial` exited 1", r.stderr)
            self.assertFalse(os.path.exists(self.out))

    def test_gate_verifies_the_timed_plan(self):
        # what is timed is what was verified: a mode's plan flags (--precision, --backend, --conv) go to
        # its gate, and tf32x3 (training's direct convs) is verified with --conv direct
        sys.path.insert(0, HERE)
        import train_bench
        self.assertEqual(train_bench.plan_flags("--microbatch 8 --precision tf32x3"),
                         ["--precision", "tf32x3", "--conv", "direct"])
        self.assertEqual(train_bench.plan_flags("--backend=vendor --lr 0.1"), ["--backend", "vendor"])
        self.assertEqual(train_bench.plan_flags("--microbatch 8"), [])
        # a fivefold that passes verify unless asked for tf32x3: the base gate passes, the timed mode's fails
        fake = os.path.join(self.tmp.name, "fake-tf32x3")
        with open(fake, "w") as f:
            f.write('#!/bin/sh\ncase "$*" in *tf32x3*) exit 1 ;; esac\necho "1 passed, 0 failed"\n')
        os.chmod(fake, 0o755)
        r = run("--fivefold", fake, "--peers", "eager", "--out", self.out, "--modes", "serial", "--device", "cpu",
                "--model", "mlp-small", "--mode-args", "serial=--precision tf32x3")
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn(f"gate refused: `{fake} verify --model mlp-small --mode serial --precision tf32x3 --conv direct`"
                      " exited 1", r.stderr)
        self.assertFalse(os.path.exists(self.out))

    def test_fake_fivefold_gets_mlp_arguments(self):
        fake = os.path.join(self.tmp.name, "fivefold")
        with open(fake, "w") as f:
            f.write(FAKE)
        os.chmod(fake, 0o755)
        r = run("--fivefold", fake, "--peers", "none", "--out", self.out, "--modes", "serial", "--device", "cpu",
                "--model", "mlp", "--batch", "2048")
        self.assertEqual(r.returncode, 1, r.stderr)  # the fake's JSON lacks fields
        with open(self.out) as f:
            d = json.load(f)
        self.assertEqual(d["gate"]["checks"][0]["command"], f"{fake} verify --model mlp-small --mode serial")
        train = [c["command"] for c in d["commands"] if c["what"].startswith("fivefold")]
        self.assertEqual(len(train), 1)
        self.assertIn("train --model mlp --mode serial --batch 2048", train[0])
        self.assertIn("--data synthetic", train[0])
        self.assertNotIn("--train-limit", train[0])  # fivefold's own default set size (32768 for mlp)
        self.assertEqual(d["method"]["flops_per_sample"], 2 * 120061952)
        self.assertEqual(d["results"][0]["scaling"], [])
        # --mode-args: added to that mode's runs after --ff-args, recorded in the config
        r = run("--fivefold", fake, "--peers", "none", "--out", self.out, "--modes", "serial", "--device", "cpu",
                "--model", "mlp", "--batch", "2048", "--ff-args", "--microbatch 1024",
                "--mode-args", "serial=--microbatch 2048 --backend own")
        self.assertEqual(r.returncode, 1, r.stderr)
        with open(self.out) as f:
            d = json.load(f)
        self.assertEqual(d["config"]["mode_args"], {"serial": "--microbatch 2048 --backend own"})
        train = [c["command"] for c in d["commands"] if c["what"].startswith("fivefold")]
        self.assertTrue(train[0].endswith("--microbatch 1024 --microbatch 2048 --backend own"), train[0])

    def test_mlp_usage_errors(self):
        for args, msg in ((["--model", "mlp", "--data", DATA], "the MLPs train on synthetic teacher data only"),
                          (["--model", "vgg"], "invalid choice: 'vgg'")):
            r = run("--fivefold", "/bin/true", "--out", self.out, "--device", "cpu", "--modes", "serial",
                    "--peers", "eager", *args)
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
