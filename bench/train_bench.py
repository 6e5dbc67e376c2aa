#!/usr/bin/env python3
"""fivefold's training against PyTorch's, on the same machine in the same run: one JSON file (the
committed evidence for the training speed goals) and a table on stdout.

  python3 bench/train_bench.py --fivefold BUILD/fivefold --data DIR --batch 64,256 --epochs 3 \\
      --modes cuda[,direct:2] --peers graph,eager[,ddp:2] --out FILE.json \\
      [--train-limit N] [--test-limit N] [--mpiexec "mpiexec --oversubscribe"] [--device cuda|cpu]

Order of work:
  1. The gate (fivefold's rule: nothing is timed until its checks pass): `fivefold verify --model
     mnist-cnn --mode M` for the device's own mode (cuda; serial with --device cpu) and for every
     other mode in --modes (multi-rank modes under the mpiexec prefix with -n P). Any failure:
     exit 3 (77 where verify says the mode is unavailable here), nothing timed, no JSON.
     --no-gate skips it (for tests only; the JSON says so).
  2. For each batch B: `fivefold train --mode M --batch B --epochs E --json TMP --log-every 0
     --data DIR` for each mode (mode:P runs under `MPIEXEC -n P`), then each PyTorch variant:
     `peer_pytorch.py --task train --device D --batch B --epochs E --init fivefold --shuffle
     fivefold --seed S` (+ --graph, or --ddp --nproc P): the same recipe from the same initial
     weights over the same data order.
  3. Per batch: epoch time = median of seconds_per_epoch without the first epoch when E >= 2 (the
     first is warm-up: allocations, cuDNN/kernel autotuning, caches), all of them when E = 1;
     ratio = PyTorch epoch s / fivefold epoch s for each (mode, variant) pair (> 1: fivefold is
     faster); test accuracy of both after the last epoch and the difference in points (fivefold
     minus PyTorch); fivefold's TFLOP/s = the FLOPs a step computes per image x images per epoch /
     epoch s against --peak-tflops: 3 x the forward's (forward + input gradient + weight gradient,
     each about the forward's FLOPs) less the first layer's input gradient, which neither side
     computes (the images need no gradient). Until session 17 that layer was counted too, which put
     the MLP's one-GPU step at 106 % of the peak.

Modes: serial, cuda (one process), mpi:P, hybrid:P, direct:P (P ranks under the mpiexec prefix).
Peers: eager, graph, ddp[:P] (ddp without P: the peer's default, one rank per GPU), ddp-graph[:P]
(data parallel with each rank's whole step in one CUDA graph: peer_pytorch.py --ddp --graph), or
none.

The MLPs (issue 16): --model mlp|mlp-small (default mnist-cnn, the behaviour above).

  python3 bench/train_bench.py --fivefold BUILD/fivefold --model mlp --batch 2048 --epochs 3 \
      --modes cuda,direct:2 --peers graph,eager,ddp:2 --out FILE.json [--ff-args '--microbatch 256'] \
      [--mode-args 'cuda=--microbatch 2048']

  Data: fivefold's synthetic teacher set on both sides (no --data; --train-limit default 8192 for
  mlp-small, 32768 for mlp; --test-limit default 4096), the peer making it on its device with the
  same bits (checked against golden/synthetic.py). The gate runs `fivefold verify --model mlp-small
  --mode M` for the base mode and every mode in --modes (the full mlp has no golden: mlp-small has
  the same layers at 1/16 of the widths). Figures per run, besides the ones above: ms_per_step =
  epoch_s / steps per epoch (ceil(train set / B); the first epoch is warm-up as above; for mlp at
  B = 2048 an epoch is 16 steps, so --epochs 3 times 32 steps after 16 of warm-up), the ratio
  peer / fivefold per step (= the epoch ratio: both sides run the same steps), TFLOP/s of the step
  from the layer table: 3 x 2 x sum(in x out) per sample (forward, input gradient and weight
  gradient; biases, relu and the loss not counted), and the scaling from one GPU to P: speedup =
  ms/step of the one-process run / ms/step of the P-rank run and efficiency = speedup / P, for
  fivefold (cuda, or serial on the CPU, to each mode:P) and for PyTorch (eager and graph to each
  ddp:P). The peer's own per-step medians (CUDA events, after 5 warm-up steps) are kept beside them
  (step_ms_events) as a cross-check of the epoch-based figure.

--mode-args LABEL=ARGS (repeatable) adds ARGS to the runs of one mode only, after --ff-args (the
last of a repeated flag wins): e.g. the one-GPU run at its fastest micro-batch (2048) while
direct:2 runs one micro-batch of 1024 per rank, so the scaling is against the best one-GPU step,
not only the same micro-batch. Each run records its own extra arguments ("ff_args"), and a scaling
line whose two runs had different ones says so.

Exit codes: 0 all measured, 1 some run failed or gave a JSON without a needed field (the JSON is
still written, "complete": false, the failure recorded in place of the figures), 2 bad usage,
3 gate refused, 77 a gated mode is unavailable on this machine.
"""
import argparse
import datetime
import json
import os
import platform
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PEER = os.path.join(HERE, "peer_pytorch.py")

EXIT_FAILED, EXIT_USAGE, EXIT_GATE, EXIT_UNAVAILABLE = 1, 2, 3, 77
MULTI_RANK = ("mpi", "hybrid", "direct")
MODES = ("serial", "cuda") + MULTI_RANK
PEERS = ("eager", "graph", "ddp", "ddp-graph")

# mnist-cnn's forward FLOPs per image from its layer shapes, 2 FLOPs per multiply-add (ReLU, pooling
# and the loss are not counted, as fivefold's model.c and peer_pytorch.flops_per_image count them).
LAYERS = [  # (name, multiply-adds per image)
    ("conv1 1->32 3x3, 28x28 -> 26x26", 32 * 1 * 3 * 3 * 26 * 26),
    ("conv2 32->64 3x3, 26x26 -> 24x24", 64 * 32 * 3 * 3 * 24 * 24),
    ("fc1 9216->128 (after 2x2 max pool to 64x12x12)", 9216 * 128),
    ("fc2 128->10", 128 * 10),
]
FLOPS_PER_IMAGE = 2 * sum(m for _, m in LAYERS)  # 23,984,896
STEP_FLOPS_PER_IMAGE = 3 * FLOPS_PER_IMAGE - 2 * LAYERS[0][1]  # 71,565,312
FLOPS_FORMULA = ("forward FLOPs/image = 2 * (32*1*3*3*26*26 + 64*32*3*3*24*24 + 9216*128 + 128*10) = "
                 f"{FLOPS_PER_IMAGE}; step FLOPs/image = 3 * forward FLOPs/image - 2 * 32*1*3*3*26*26 = "
                 f"{STEP_FLOPS_PER_IMAGE}; TFLOP/s = step FLOPs/image * images per epoch / epoch_s / 1e12 "
                 "(the backward counted as twice the forward, input and weight gradients, less conv1's input "
                 "gradient, which is never computed)")

# issue 16's MLPs (core/model/model.c): fc1..fc6, relu between; mlp-small is every width / 16.
MLP_WIDTHS = {"mlp": (4096, 8192, 6144, 4096, 2048, 1024, 512)}
MLP_WIDTHS["mlp-small"] = tuple(w // 16 for w in MLP_WIDTHS["mlp"])
MODELS = ("mnist-cnn",) + tuple(MLP_WIDTHS)
# The model the gate verifies: the full mlp has no golden file; mlp-small has the same layers.
GATE_MODEL = {"mnist-cnn": "mnist-cnn", "mlp": "mlp-small", "mlp-small": "mlp-small"}


def model_layers(model):
    """(layers [(name, multiply-adds per sample)], forward FLOPs per sample, step FLOPs per sample,
    formula text). A step computes the forward, each layer's weight gradient (about the forward's
    FLOPs) and each layer's input gradient but the first's (the samples need none)."""
    if model == "mnist-cnn":
        return LAYERS, FLOPS_PER_IMAGE, STEP_FLOPS_PER_IMAGE, FLOPS_FORMULA
    w = MLP_WIDTHS[model]
    layers = [(f"fc{k + 1} {w[k]}->{w[k + 1]}", w[k] * w[k + 1]) for k in range(len(w) - 1)]
    fwd = 2 * sum(m for _, m in layers)
    step = 3 * fwd - 2 * layers[0][1]
    text = (f"forward FLOPs/sample = 2 * ({' + '.join(f'{w[k]}*{w[k + 1]}' for k in range(len(w) - 1))}) = "
            f"{fwd}; step FLOPs/sample = 3 * forward FLOPs/sample - 2 * {w[0]}*{w[1]} = {step}; TFLOP/s = step "
            f"FLOPs/sample * samples per step / s per step / 1e12 (forward, weight gradients, input gradients "
            f"but fc1's, which is never computed; biases, relu, softmax and the loss not counted)")
    return layers, fwd, step, text

# fields of `fivefold train --json` (schema fivefold-train/1) that this script reads
FF_FIELDS = ("model", "mode", "ranks", "batch", "microbatch", "epochs", "steps", "images", "seconds",
             "seconds_per_epoch", "samples_per_s", "test_accuracy", "final_loss", "loss_digest",
             "weights_digest")
PEER_FIELDS = ("variant", "world_size", "batch", "epochs", "steps", "seconds_per_epoch", "test_accuracy",
               "train_samples", "initial_weights_digest", "weights_digest", "loss_last", "torch")


class BenchError(Exception):
    def __init__(self, msg, code=EXIT_USAGE):
        super().__init__(msg)
        self.code = code


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def parse_spec(text, allowed, what):
    """'cuda,direct:2' -> [('cuda', None), ('direct', 2)]."""
    out = []
    for item in [x.strip() for x in str(text).split(",") if x.strip()]:
        name, _, p = item.partition(":")
        if name not in allowed:
            raise BenchError(f"{what} '{item}': expected one of {', '.join(allowed)} (optionally :P)")
        ranks = None
        if p:
            try:
                ranks = int(p)
            except ValueError:
                ranks = 0
            if ranks < 1:
                raise BenchError(f"{what} '{item}': P must be an integer >= 1")
        out.append((name, ranks))
    return out


def label(name, ranks):
    return f"{name}:{ranks}" if ranks else name


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--fivefold", required=True, help="the built fivefold command")
    p.add_argument("--model", default="mnist-cnn", choices=MODELS,
                   help="mnist-cnn (default), or the MLPs mlp / mlp-small (synthetic data, per-step figures, "
                        "scaling; gate: verify --model mlp-small)")
    p.add_argument("--data", default=None,
                   help="MNIST-format IDX folder (mnist-cnn; default /usr/share/datasets/fashion-mnist); the "
                        "MLPs: synthetic (their only data, the default)")
    p.add_argument("--batch", default="64,256", help="global batch sizes, comma-separated")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--modes", default="cuda", help="fivefold modes, e.g. cuda,direct:2")
    p.add_argument("--peers", default="graph,eager", help="PyTorch variants, e.g. graph,eager,ddp:2 (or none)")
    p.add_argument("--out", required=True, help="result JSON file")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                   help="the peer's device and the gate's base mode (cuda; cpu: serial, for tests)")
    p.add_argument("--train-limit", type=int, default=0,
                   help="train on the first N samples (default all; the MLPs: 8192 mlp-small, 32768 mlp)")
    p.add_argument("--test-limit", type=int, default=0, help="evaluate on the first N (the MLPs: default 4096)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--mpiexec", default="mpiexec", help="launcher prefix for multi-rank modes ('-n P' is added)")
    p.add_argument("--python", default=os.environ.get("FF_PYTHON") or sys.executable,
                   help="python with torch for the peer (default $FF_PYTHON, else this python)")
    p.add_argument("--peak-tflops", type=float, default=51.0,
                   help="fp32 peak for the fraction-of-peak column (default 51: the H200's measured fp32 peak)")
    p.add_argument("--ff-args", default="", help="extra arguments for every `fivefold train`, e.g. '--microbatch 16'")
    p.add_argument("--mode-args", action="append", default=[], metavar="LABEL=ARGS",
                   help="extra `fivefold train` arguments for one mode (a --modes label), after --ff-args; "
                        "repeatable, e.g. 'cuda=--microbatch 2048'")
    p.add_argument("--peer-args", default="", help="extra arguments for every peer run, e.g. '--threads 16'")
    p.add_argument("--timeout", type=int, default=3600, help="seconds allowed to each run")
    p.add_argument("--no-gate", action="store_true", help="skip `fivefold verify` (tests only)")
    return p.parse_args(argv)


def check_args(a):
    try:
        batches = [int(x) for x in a.batch.split(",") if x.strip()]
    except ValueError:
        batches = []
    if not batches or any(b < 1 for b in batches):
        raise BenchError(f"--batch '{a.batch}': expected comma-separated integers >= 1")
    if a.epochs < 1:
        raise BenchError(f"--epochs {a.epochs}: expected >= 1")
    modes = parse_spec(a.modes, MODES, "--modes")
    if not modes:
        raise BenchError("--modes: at least one fivefold mode")
    for name, ranks in modes:
        if name in MULTI_RANK and not ranks:
            raise BenchError(f"--modes '{name}': a multi-rank mode needs its rank count, {name}:P")
        if name not in MULTI_RANK and ranks:
            raise BenchError(f"--modes '{label(name, ranks)}': {name} is one process (no :P)")
    peers = [] if a.peers.strip() in ("", "none") else parse_spec(a.peers, PEERS, "--peers")
    for name, ranks in peers:
        if ranks and name not in ("ddp", "ddp-graph"):
            raise BenchError(f"--peers '{label(name, ranks)}': only ddp and ddp-graph take :P")
    if a.device == "cpu" and any(m in ("cuda", "hybrid", "direct") for m, _ in modes):
        raise BenchError("--device cpu: GPU modes (cuda, hybrid, direct) need --device cuda")
    if a.device == "cpu" and any(p in ("graph", "ddp-graph") for p, _ in peers):
        raise BenchError("--device cpu: the graph and ddp-graph peers need --device cuda")
    if a.model in MLP_WIDTHS:
        if a.data not in (None, "synthetic"):
            raise BenchError(f"--model {a.model}: --data '{a.data}': the MLPs train on synthetic teacher data "
                             "only (leave --data out, or --data synthetic)")
        a.data = "synthetic"
    else:
        if a.data is None:
            a.data = "/usr/share/datasets/fashion-mnist"
        if not os.path.isdir(a.data):
            raise BenchError(f"--data '{a.data}': no such folder")
    if a.peak_tflops <= 0:
        raise BenchError(f"--peak-tflops {a.peak_tflops}: expected > 0")
    labels = [label(m, r) for m, r in modes]
    a.mode_args_by_label = {}
    for spec in a.mode_args:
        name, eq, extra = spec.partition("=")
        if not eq or name.strip() not in labels:
            raise BenchError(f"--mode-args '{spec}': expected LABEL=ARGS with LABEL one of --modes "
                             f"({', '.join(labels)})")
        if name.strip() in a.mode_args_by_label:
            raise BenchError(f"--mode-args: '{name.strip()}' given twice")
        a.mode_args_by_label[name.strip()] = extra.strip()
    # words for a command line: split here, once, so that an unclosed quote is a usage error
    # naming the flag rather than a traceback halfway through the runs
    given = [("--ff-args", a.ff_args, a.ff_args), ("--peer-args", a.peer_args, a.peer_args),
             ("--mpiexec", a.mpiexec, a.mpiexec)]
    given += [("--mode-args", f"{k}={v}", v) for k, v in a.mode_args_by_label.items()]
    for flag, shown, words in given:
        try:
            shlex.split(words or "")
        except ValueError as e:
            raise BenchError(f"{flag} '{shown}': {e} (expected arguments as a shell would split them)")
    return batches, modes, peers


class Runner:
    """Runs commands, recording each (argv as a shell line, exit code, seconds) for the JSON."""

    def __init__(self, timeout):
        self.timeout = timeout
        self.commands = []

    def run(self, argv, what):
        line = shlex.join(argv)
        log(f"train_bench: {what}: {line}")
        t0 = time.perf_counter()
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout)
            rc, out, err = r.returncode, r.stdout, r.stderr
        except subprocess.TimeoutExpired as e:
            rc, out, err = 124, e.stdout or "", f"timed out after {self.timeout} s"
            out = out.decode() if isinstance(out, bytes) else out
        except OSError as e:
            rc, out, err = 127, "", f"cannot run: {e}"
        secs = time.perf_counter() - t0
        self.commands.append({"what": what, "command": line, "exit": rc, "seconds": round(secs, 3)})
        return rc, out, err


def tail(text, n=15):
    return "\n".join(text.strip().splitlines()[-n:])


def launcher(a, mode, ranks):
    return shlex.split(a.mpiexec) + ["-n", str(ranks)] if mode in MULTI_RANK else []


def plan_flags(extra):
    """The plan flags among a mode's extra `fivefold train` arguments (--precision, --backend, --conv),
    for its gate: what is timed is what was verified. Training always runs direct convolutions, so
    --precision tf32x3 without --conv is verified with --conv direct."""
    words, out = shlex.split(extra), []
    for i, w in enumerate(words):
        for flag in ("--precision", "--backend", "--conv"):
            if w == flag and i + 1 < len(words):
                out += [flag, words[i + 1]]
            elif w.startswith(flag + "="):
                out += [flag, w.split("=", 1)[1]]
    if "tf32x3" in out and "--conv" not in out:
        out += ["--conv", "direct"]
    return out


def gate(a, modes, runner):
    """fivefold verify for the device's base mode and each mode to be timed (of mlp-small for the
    MLPs: the full mlp has no golden); returns the record."""
    base = "cuda" if a.device == "cuda" else "serial"
    # the base mode with the default plan, then each timed mode with its own plan flags
    todo = [(base, None, ())] + [
        (mode, ranks, tuple(plan_flags(" ".join(x for x in (a.ff_args, a.mode_args_by_label.get(label(mode, ranks), ""))
                                                if x))))
        for mode, ranks in modes]
    seen, checks = set(), []
    for mode, ranks, flags in todo:
        if (mode, ranks, flags) in seen:
            continue
        seen.add((mode, ranks, flags))
        argv = launcher(a, mode, ranks) + [a.fivefold, "verify", "--model", GATE_MODEL[a.model], "--mode", mode]
        argv += list(flags)
        rc, out, err = runner.run(argv, f"gate {label(mode, ranks)}")
        summary = next((ln for ln in reversed(out.splitlines()) if "passed" in ln and "failed" in ln), None)
        checks.append({"mode": label(mode, ranks), "command": shlex.join(argv), "exit": rc, "summary": summary})
        if rc != 0:
            why = "the mode is unavailable on this machine" if rc == EXIT_UNAVAILABLE else "its checks did not pass"
            raise BenchError(f"gate refused: `{shlex.join(argv)}` exited {rc} ({why}); nothing was timed. "
                             f"Its output ends:\n{tail(out + err)}",
                             EXIT_UNAVAILABLE if rc == EXIT_UNAVAILABLE else EXIT_GATE)
    return {"passed": True, "skipped": False, "checks": checks}


def need(d, fields, where):
    missing = [f for f in fields if f not in d]
    if missing:
        raise BenchError(f"{where}: field(s) {', '.join(missing)} missing", EXIT_FAILED)


def epoch_time(spe, where):
    if not isinstance(spe, list) or not spe or not all(isinstance(x, (int, float)) and x > 0 for x in spe):
        raise BenchError(f"{where}: seconds_per_epoch {spe!r}: expected a non-empty list of positive numbers",
                         EXIT_FAILED)
    timed = spe[1:] if len(spe) >= 2 else spe
    return statistics.median(timed), len(spe) >= 2


def tflops(images_per_epoch, epoch_s, step_flops=STEP_FLOPS_PER_IMAGE):
    return step_flops * images_per_epoch / epoch_s / 1e12


def step_figures(a, B, ipe, ep):
    """ms per step (epoch_s over the epoch's ceil(N / B) steps) and samples/s; the per-step view of
    the epoch time, the same definition on both sides."""
    spe = -(-int(ipe) // B)
    return {"steps_per_epoch": spe, "ms_per_step": 1e3 * ep / spe}


def run_fivefold(a, mode, ranks, B, runner, tmpdir):
    path = os.path.join(tmpdir, f"ff-{mode}-{ranks or 1}-{B}.json")
    argv = launcher(a, mode, ranks) + [
        a.fivefold, "train", "--model", a.model, "--mode", mode, "--batch", str(B),
        "--epochs", str(a.epochs), "--json", path, "--log-every", "0", "--data", a.data,
        "--seed", str(a.seed), "--lr", repr(a.lr), "--momentum", repr(a.momentum)]
    if a.train_limit:
        argv += ["--train-limit", str(a.train_limit)]
    if a.test_limit:
        argv += ["--test-limit", str(a.test_limit)]
    extra = " ".join(x for x in (a.ff_args, a.mode_args_by_label.get(label(mode, ranks), "")) if x)
    argv += shlex.split(extra)
    rc, out, err = runner.run(argv, f"fivefold {label(mode, ranks)} batch {B}")
    where = f"`{shlex.join(argv)}`"
    if rc != 0:
        raise BenchError(f"{where} exited {rc}; its output ends:\n{tail(out + err)}", EXIT_FAILED)
    if not os.path.exists(path):
        raise BenchError(f"{where} exited 0 but wrote no {path} (does this fivefold have `train --json`?)",
                         EXIT_FAILED)
    try:
        with open(path) as f:
            d = json.load(f)
    except ValueError as e:
        raise BenchError(f"{where}: {path} is not JSON: {e}", EXIT_FAILED)
    need(d, FF_FIELDS, f"fivefold train --json ({path})")
    ep, warm = epoch_time(d["seconds_per_epoch"], f"fivefold train --json ({path})")
    acc = d["test_accuracy"][-1] if isinstance(d["test_accuracy"], list) and d["test_accuracy"] else None
    if not isinstance(acc, (int, float)):
        raise BenchError(f"fivefold train --json ({path}): test_accuracy {d['test_accuracy']!r}: expected a "
                         "non-empty list of percentages", EXIT_FAILED)
    ipe = d["images"] / d["epochs"]  # every epoch sees every training image once
    tf = tflops(ipe, ep, model_layers(a.model)[2])
    return {"mode": mode, "ranks": d["ranks"], "epoch_s": ep, "first_epoch_excluded": warm,
            "seconds_per_epoch": d["seconds_per_epoch"], "images_per_epoch": ipe,
            "samples_per_s_epoch": ipe / ep, "test_accuracy": acc, "tflops": tf,
            "peak_fraction": tf / a.peak_tflops, "final_loss": d["final_loss"],
            "loss_digest": d["loss_digest"], "weights_digest": d["weights_digest"],
            **step_figures(a, B, ipe, ep), "ff_args": extra, "command": shlex.join(argv), "json": d}


def run_peer(a, variant, ranks, B, runner):
    argv = [a.python, PEER, "--task", "train", "--model", a.model, "--device", a.device, "--data", a.data,
            "--batch", str(B),
            "--epochs", str(a.epochs), "--init", "fivefold", "--shuffle", "fivefold", "--seed", str(a.seed),
            "--lr", repr(a.lr), "--momentum", repr(a.momentum)]
    if a.train_limit:
        argv += ["--train-limit", str(a.train_limit)]
    if a.test_limit:
        argv += ["--test-limit", str(a.test_limit)]
    if variant == "graph":
        argv += ["--graph"]
    elif variant in ("ddp", "ddp-graph"):
        argv += ["--ddp"] + (["--graph"] if variant == "ddp-graph" else [])
        argv += ["--nproc", str(ranks)] if ranks else []
    argv += shlex.split(a.peer_args)
    rc, out, err = runner.run(argv, f"pytorch {label(variant, ranks)} batch {B}")
    where = f"`{shlex.join(argv)}`"
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    try:
        d = json.loads(lines[-1]) if lines else {}
    except ValueError:
        d = {}
    if rc != 0 or "error" in d or not d:
        msg = d.get("error") or tail(out + err)
        raise BenchError(f"{where} exited {rc}: {msg}", EXIT_FAILED)
    need(d, PEER_FIELDS, f"peer_pytorch.py --task train ({where})")
    ep, warm = epoch_time(d["seconds_per_epoch"], f"peer ({where})")
    ipe = d["train_samples"]
    tf = tflops(ipe, ep, model_layers(a.model)[2])
    return {"variant": variant, "ranks": d["world_size"], "epoch_s": ep, "first_epoch_excluded": warm,
            "seconds_per_epoch": d["seconds_per_epoch"], "images_per_epoch": ipe,
            "samples_per_s_epoch": ipe / ep, "test_accuracy": d["test_accuracy"],
            "tflops": tf, "peak_fraction": tf / a.peak_tflops,
            "loss_last": d["loss_last"], "initial_weights_digest": d["initial_weights_digest"],
            "weights_digest": d["weights_digest"], **step_figures(a, B, ipe, ep),
            "step_ms_events": d.get("step_ms_median"), "command": shlex.join(argv), "json": d}


def machine(a):
    m = {"host": socket.gethostname(), "cpu": None, "cores": os.cpu_count(), "gpus": [], "os": platform.platform()}
    try:
        with open("/proc/cpuinfo") as f:
            m["cpu"] = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), None)
    except OSError:
        pass
    if shutil.which("nvidia-smi"):
        try:
            r = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                                "--format=csv,noheader"], capture_output=True, text=True, timeout=60)
            m["gpus"] = [ln.strip() for ln in r.stdout.splitlines() if ln.strip()] if r.returncode == 0 else []
        except (OSError, subprocess.TimeoutExpired):
            pass
    m["name"] = m["gpus"][0].split(",")[0] if m["gpus"] and a.device == "cuda" else (m["cpu"] or platform.machine())
    return m


def sha256(path):
    import hashlib
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    except OSError:
        return None
    return h.hexdigest()


def fivefold_version(a):
    try:
        r = subprocess.run([a.fivefold, "--version"], capture_output=True, text=True, timeout=60)
        return r.stdout.strip().splitlines()[0] if r.returncode == 0 and r.stdout.strip() else None
    except (OSError, subprocess.TimeoutExpired, IndexError):
        return None


def has_train_json(a):
    try:
        r = subprocess.run([a.fivefold, "train", "--help"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--json" in r.stdout + r.stderr


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def table(results, peak, per_step=False):
    """The result table; per_step (the MLPs): a ms/step column after s/epoch, the peers' TFLOP/s
    with their share of the peak too, and the scaling lines below."""
    head = ["batch", "run", "s/epoch", "ratio peer/ff", "test acc %", "TFLOP/s (% peak)"]
    if per_step:
        head[3:3] = ["ms/step"]
    rows = [tuple(head)]

    def row(B, name, x, ratios):
        if "error" in x:
            cells = [str(B), name, "FAILED", "", "", ""]
        else:
            tf = f"{x['tflops']:.3f}"
            if per_step or name.startswith("fivefold"):
                tf += f" ({100 * x['tflops'] / peak:.1f}%)"
            cells = [str(B), name, fmt(x["epoch_s"], ".4f"), ratios, fmt(x["test_accuracy"], ".2f"), tf]
        if per_step:
            cells[3:3] = ["FAILED" if "error" in x else fmt(x.get("ms_per_step"), ".3f")]
            if "error" in x:
                cells[2] = ""
        rows.append(tuple(cells))

    for r in results:
        B = r["batch"]
        for f in r["fivefold"]:
            row(B, f"fivefold {f['label']}", f, "")
        for p in r["pytorch"]:
            ratios = ", ".join(f"{x['ratio']:.2f} vs {x['mode']}" for x in r["pairs"]
                               if x["peer"] == p["label"] and x["ratio"] is not None)
            row(B, f"pytorch {p['label']}", p, ratios)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    text = "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows)
    if per_step:
        lines = [f"scaling batch {r['batch']}: {x['side']} {x['from']} -> {x['to']}: {x['speedup']:.2f}x "
                 f"({100 * x['efficiency']:.0f}% of {x['ranks']})"
                 + (f" [{x['from']}: '{x['args_from']}'; {x['to']}: '{x['args_to']}']" if "args_from" in x else "")
                 for r in results for x in r["scaling"]]
        if lines:
            text += "\n" + "\n".join(lines)
    lines = strongest_lines(results) + [phases_line(r["batch"], f) for r in results for f in r["fivefold"]]
    lines = [x for x in lines if x]
    if lines:
        text += "\n" + "\n".join(lines)
    return text


def phases_line(B, f):
    """A multi-rank fivefold run's step split (rank 0, train --json phases_ms_per_step): compute,
    the exchange's exposed part and its whole time in collectives, update; None without one."""
    ph = f.get("json", {}).get("phases_ms_per_step") if "error" not in f else None
    if not ph or f.get("ranks", 1) <= 1 or not ph.get("steps"):
        return None
    total = ph.get("exchange_total")
    over = f["json"].get("overlap")
    if f["json"].get("queued"):
        where = ("in buckets during the backward and the next step's forward" if f["json"].get("overlap_steps")
                 else "in buckets during the backward" if over else "after the backward")
        return (f"phases batch {B}, fivefold {f['label']} (ms/step, rank 0): step {ph['step']:.3f}, the exchange "
                f"queued on the GPU with the compute ({where}"
                f", {f['json'].get('buckets', '?')} buckets; FF_QUEUED_COMM=0 splits the phases), the host enqueuing "
                f"for {ph.get('enqueue', float('nan')):.3f}")
    return (f"phases batch {B}, fivefold {f['label']} (ms/step, rank 0): compute {ph['compute']:.3f}, exchange "
            f"{ph['exchange']:.3f} exposed" + (f" of {total:.3f}" if total is not None else "")
            + (f" ({'in buckets during the backward' if over else 'after the backward'}, "
               f"{f['json'].get('buckets', '?')} buckets)" if over is not None else "")
            + f", update {ph['update']:.3f}")


def rel_diff(a, b):
    """|a - b| / |a| of two final losses (None if either is missing): the same recipe from the same
    weights over the same data gives the same loss up to float32 summation order."""
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)) or a == 0:
        return None
    return abs(a - b) / abs(a)


def strongest(r, key):
    """For each fivefold run that succeeded: the fastest PyTorch run on at most as many GPUs (ranks)
    of the same batch, and fivefold's ratio against it (> 1: fivefold faster). The fair question is
    not "faster than DDP" but "faster than anything PyTorch does with these GPUs": with two GPUs its
    best may be a graph on one of them. key: "ms_per_step" (the MLPs) or "epoch_s"."""
    peers = [p for p in r["pytorch"] if "error" not in p and p.get(key)]
    out = []
    for f in r["fivefold"]:
        if "error" in f or not f.get(key):
            continue
        cands = [p for p in peers if p["ranks"] <= f["ranks"]]
        if not cands:
            continue
        best = min(cands, key=lambda p: p[key])
        out.append({"mode": f["label"], "ranks": f["ranks"], "peer": best["label"], "by": key,
                    "peer_value": best[key], "value": f[key], "ratio": best[key] / f[key],
                    "peers_considered": sorted(p["label"] for p in cands)})
    return out


def strongest_lines(results):
    unit = {"ms_per_step": "ms/step", "epoch_s": "s/epoch"}
    return [f"strongest peer batch {r['batch']}: fivefold {x['mode']} {x['ratio']:.2f}x PyTorch's fastest on at most "
            f"{x['ranks']} rank{'s' if x['ranks'] > 1 else ''} ({x['peer']}, {x['peer_value']:.4g} {unit[x['by']]}; "
            f"of {', '.join(x['peers_considered'])})"
            for r in results for x in r.get("strongest", [])]


def effective_args(text):
    """The arguments as fivefold reads them: a flag given twice (--ff-args, then --mode-args) keeps
    its last value, where it last appeared. "--backend vendor --microbatch 1024 --microbatch 2048"
    -> "--backend vendor --microbatch 2048". Flags without values and positional words are kept."""
    words = shlex.split(text or "")
    items = []  # [flag or None, words]
    i = 0
    while i < len(words):
        w = words[i]
        if w.startswith("--") and "=" in w:
            items.append([w.split("=", 1)[0], [w]])
        elif w.startswith("--") and i + 1 < len(words) and not words[i + 1].startswith("--"):
            items.append([w, [w, words[i + 1]]])
            i += 1
        else:
            items.append([w if w.startswith("--") else None, [w]])
        i += 1
    last = {flag: k for k, (flag, _) in enumerate(items) if flag}
    return shlex.join([w for k, (flag, ws) in enumerate(items) if flag is None or last[flag] == k for w in ws])


def scaling(r):
    """Speedup of the step from one process to P ranks (ms/step of the one-process run / ms/step of
    the P-rank run) and efficiency = speedup / P: fivefold's serial or cuda run to each multi-rank
    mode, PyTorch's eager and graph runs to each ddp run."""
    out = []
    ok = [x for x in r["fivefold"] + r["pytorch"] if "error" not in x]
    ones = [x for x in ok if x["ranks"] == 1]
    for to in ok:
        if to["ranks"] <= 1:
            continue
        side = "fivefold" if "mode" in to else "pytorch"
        for base in ones:
            if ("mode" in base) != (side == "fivefold"):
                continue
            sp = base["ms_per_step"] / to["ms_per_step"]
            x = {"side": side, "from": base["label"], "to": to["label"], "ranks": to["ranks"],
                 "ms_per_step_from": base["ms_per_step"], "ms_per_step_to": to["ms_per_step"],
                 "speedup": sp, "efficiency": sp / to["ranks"]}
            fa, ta = effective_args(base.get("ff_args", "")), effective_args(to.get("ff_args", ""))
            if fa != ta:  # --mode-args: not the same configuration
                x.update(args_from=fa, args_to=ta)
            out.append(x)
    return out


def bench(a):
    batches, modes, peers = check_args(a)
    mlp = a.model in MLP_WIDTHS
    layers, fwd_flops, step_flops, flops_text = model_layers(a.model)
    runner = Runner(a.timeout)
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    if a.no_gate:
        log("train_bench: --no-gate: the checks are NOT run (tests only)")
        gate_rec = {"passed": None, "skipped": True, "checks": []}
    else:
        gate_rec = gate(a, modes, runner)
    if not has_train_json(a):
        raise BenchError(f"`{a.fivefold} train --help` does not list --json: this fivefold cannot report its "
                         "training figures (build one with `fivefold train --json`)")
    complete = True
    results = []
    with tempfile.TemporaryDirectory(prefix="train_bench.") as tmpdir:
        for B in batches:
            r = {"batch": B, "fivefold": [], "pytorch": [], "pairs": []}
            for mode, ranks in modes:
                try:
                    f = run_fivefold(a, mode, ranks, B, runner, tmpdir)
                except BenchError as e:
                    complete = False
                    log(f"train_bench: {e}")
                    f = {"mode": mode, "ranks": ranks or 1, "error": str(e)}
                f["label"] = label(mode, ranks)
                r["fivefold"].append(f)
            for variant, ranks in peers:
                try:
                    p = run_peer(a, variant, ranks, B, runner)
                except BenchError as e:
                    complete = False
                    log(f"train_bench: {e}")
                    p = {"variant": variant, "ranks": ranks, "error": str(e)}
                p["label"] = label(variant, ranks)
                r["pytorch"].append(p)
            for f in r["fivefold"]:
                for p in r["pytorch"]:
                    ok = "error" not in f and "error" not in p
                    pair = {"mode": f["label"], "peer": p["label"],
                            "ratio": p["epoch_s"] / f["epoch_s"] if ok else None,
                            "accuracy_diff_points": f["test_accuracy"] - p["test_accuracy"] if ok else None}
                    if mlp:  # per step (the same number when both ran the same steps per epoch)
                        pair.update(ratio_per_step=p["ms_per_step"] / f["ms_per_step"] if ok else None,
                                    same_samples_per_epoch=f["images_per_epoch"] == p["images_per_epoch"]
                                    if ok else None,
                                    loss_last_rel_diff=rel_diff(f["final_loss"], p["loss_last"]) if ok else None)
                    r["pairs"].append(pair)
            if mlp:
                r["scaling"] = scaling(r)
            r["strongest"] = strongest(r, "ms_per_step" if mlp else "epoch_s")
            results.append(r)
    torch_v = next((p["json"] for r in results for p in r["pytorch"] if "json" in p), {})
    out = {
        "schema": "fivefold-train-bench/1",
        "created": started,
        "complete": complete,
        "machine": machine(a),
        "versions": {"fivefold": fivefold_version(a), "fivefold_path": os.path.abspath(a.fivefold),
                     "fivefold_sha256": sha256(a.fivefold),
                     "fivefold_digests": {f"{f['label']} batch {r['batch']}": {"loss": f["loss_digest"],
                                                                               "weights": f["weights_digest"]}
                                          for r in results for f in r["fivefold"] if "error" not in f},
                     "torch": torch_v.get("torch"), "cuda": torch_v.get("cuda"), "cudnn": torch_v.get("cudnn"),
                     "python": torch_v.get("python"), "peer_python": a.python},
        "config": {"model": a.model, "data": "synthetic" if mlp else os.path.abspath(a.data),
                   "batches": batches, "epochs": a.epochs,
                   "modes": [label(m, r) for m, r in modes], "peers": [label(p, r) for p, r in peers],
                   "device": a.device, "train_limit": a.train_limit, "test_limit": a.test_limit,
                   "seed": a.seed, "lr": a.lr, "momentum": a.momentum, "peak_tflops": a.peak_tflops,
                   "ff_args": a.ff_args, "mode_args": a.mode_args_by_label, "peer_args": a.peer_args,
                   "mpiexec": a.mpiexec,
                   "recipe": "SGD with momentum, cross-entropy, fivefold's generator weights (--init fivefold) "
                             "and data order (--shuffle fivefold) on both sides; fp32 (the peer's TF32 off)"},
        "gate": gate_rec,
        "method": {
            "epoch_s": ("median of seconds_per_epoch over epochs 2..E: the first epoch is warm-up (allocations, "
                        "autotuning, caches) and is excluded when E >= 2; with E = 1 it is the only one"),
            "warmup_epoch_excluded": a.epochs >= 2,
            "ratio": "pytorch epoch_s / fivefold epoch_s, per (mode, peer) pair: > 1 means fivefold is faster",
            "strongest": "per fivefold run: the fastest PyTorch run on at most as many ranks (GPUs) and the ratio "
                         "against it (ms_per_step for the MLPs, else epoch_s)",
            "accuracy": "test accuracy (%) after the last epoch; accuracy_diff_points = fivefold - pytorch",
            "flops_per_image": fwd_flops,
            "step_flops_per_image": step_flops,
            "flops_layers": [{"layer": n, "multiply_adds": m} for n, m in layers],
            "tflops": flops_text,
            "peak_tflops": a.peak_tflops,
            "peer_timing": "peer seconds_per_epoch: the optimizer steps of each epoch only (no evaluation)",
        },
        "results": results,
        "commands": runner.commands,
    }
    if mlp:
        out["config"]["gate_model"] = GATE_MODEL[a.model]
        out["config"]["recipe"] += ("; data: fivefold's synthetic teacher set of --seed on both sides "
                                    "(the peer's made on its device with the same bits)")
        out["method"].update(
            flops_per_sample=fwd_flops,
            step_flops_per_sample=step_flops,
            ms_per_step="1000 * epoch_s / steps per epoch (ceil(train samples / batch)); the same steps on "
                        "both sides, so ratio_per_step = ratio",
            ratio_per_step="pytorch ms_per_step / fivefold ms_per_step: > 1 means fivefold is faster",
            scaling="speedup = ms_per_step of the one-process run / ms_per_step of the P-rank run, "
                    "efficiency = speedup / P; fivefold: serial or cuda to each mode:P, pytorch: eager and "
                    "graph to each ddp:P",
            step_ms_events="the peer's median of its per-step times (CUDA events on a GPU) after 5 warm-up "
                           "steps (peer_pytorch.py --warmup-steps): a cross-check of ms_per_step",
            loss_last_rel_diff="|fivefold final_loss - pytorch loss_last| / |fivefold final_loss|: the same "
                               "recipe, weights and batches, so small (float32 summation order only)")
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    os.replace(tmp, a.out)
    print(f"{a.model} training, {a.epochs} epoch(s), epoch time = "
          + ("median of epochs 2.." + str(a.epochs) + " (epoch 1 is warm-up)" if a.epochs >= 2 else "the one epoch")
          + ("; ms/step = epoch time / steps per epoch; ratio = pytorch / fivefold per step"
             if mlp else "; ratio = pytorch s/epoch / fivefold s/epoch")
          + f"; peak {a.peak_tflops:g} TFLOP/s")
    print(table(results, a.peak_tflops, per_step=mlp))
    print(f"written: {a.out}" + ("" if complete else " (INCOMPLETE: some runs failed, see \"error\" entries)"))
    return 0 if complete else EXIT_FAILED


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return bench(a)
    except BenchError as e:
        log(f"train_bench: {e}")
        return e.code


if __name__ == "__main__":
    sys.exit(main())
