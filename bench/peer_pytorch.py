#!/usr/bin/env python3
"""PyTorch peer for `fivefold bench` (docs/ARCHITECTURE.md §8, issue 5): the same models, measured the same way.

Three tasks, each printing ONE JSON object on a single line of stdout (everything else goes to
stderr), so that the C bench can run this script and parse its answer:

  infer  (default)  forward-pass timing of alexnet or mnist-cnn, docs/ARCHITECTURE.md §2 architectures (alexnet
                    without channel groups, LRN after pool2, softmax at the end, as fivefold's table)
      --model alexnet|mnist-cnn --batch N[,N...] --device cpu|cuda --threads T
      --precision fp32|tf32 [--graph] [--ddp] [--iters K] [--warmup W]
      --graph   replays a captured CUDA graph instead of eager launches (cuda only)
      --ddp     data parallel over P processes: under `torchrun --nproc_per_node P` its ranks, else
                the script starts P copies itself (--nproc P; default the GPU count, 2 on the CPU):
                the global batch N is cut into P blocks (the first N % P ranks get one more image,
                as fivefold's batch split), each rank runs its block, the logits are all-gathered;
                the time of an iteration is the slowest rank's (all_reduce MAX).
  train             training with SGD and momentum: mnist-cnn on an MNIST-format IDX folder, or
                    issue 16's MLPs on fivefold's synthetic teacher data
      --model mnist-cnn --data DIR | --model mlp|mlp-small [--data synthetic] [--synth device|host]
      [--epochs 3 --batch 64 --lr 0.01 --momentum 0.9 --weight-decay 0 --seed 1]
      [--init torch|fivefold] [--weights W.h5] [--shuffle torch|fivefold] [--steps K]
      [--warmup-steps 5] [--train-limit N] [--test-limit N] [--graph [--warmup W]] [--ddp [--nproc P]]
      mlp: 4096-8192-6144-4096-2048-1024-512 (nn.Linear, relu between, cross-entropy over 512
      classes, 120 M parameters); mlp-small: every width / 16. Their data: --seed's synthetic set
      (core/include/fivefold/synthetic.h; --train-limit default 8192 for mlp-small, 32768 for mlp,
      --test-limit default 4096), made once, untimed, on the training device by torch with the
      header's bits (--synth device: the first 64 samples of each split checked bit for bit against
      golden/synthetic.py, a mismatch refused; --synth host: golden/synthetic.py's numpy for all of
      it) and kept there: every variant gathers its batches on the device, eager included.
      --steps K stops after K steps in all (e.g. --steps 35: 5 warm-up + 30 timed); each step is
      timed (CUDA events on a GPU, the slowest rank's under --ddp) and step_ms_median is the median
      over the steps after the first --warmup-steps W (default 5), samples_per_s_step = B / it.
      fp32 runs with TF32 off for matmuls and cuDNN (torch >= 2.9: fp32_precision "ieee").
      --init fivefold / --shuffle fivefold reproduce fivefold's generator weights and data order
      (core/model/rng.c, ff_shuffle_order) so both sides start from the same point and see the same
      batches; --weights loads /weights/<layer>/w and /weights/<layer>/b from HDF5.
      Variants ("variant" in the JSON): eager (default: host gather and copy per batch, loss read
      every step); --graph (cuda only): the training set resident on the GPU, batches gathered by
      index on the device into static buffers, the whole step (zero_grad, forward, cross-entropy,
      backward, SGD step) captured in one CUDA graph after W warm-up steps (default 3) and replayed;
      the warm-up is undone (weights and momentum restored in place) so the recipe and the starting
      point are the eager ones; the short last batch runs eagerly; losses stay on the device until
      the epoch ends. --ddp: DistributedDataParallel over P ranks (nccl on cuda, gloo on the CPU),
      each a contiguous B/P share of every global batch (B % P == 0), eager, data resident.
      --ddp --graph ("ddp-graph"): data parallel with the whole step in one CUDA graph per rank,
      as PyTorch's CUDA-graph notes do it for a whole network: each rank's share gathered into
      static buffers, forward, backward, then each parameter's gradient all-reduced (summed, then
      divided by P: DDP's average) and the SGD step, all captured after W warm-up steps (undone as
      for --graph) and replayed; the short last batch runs eagerly with the same all-reduce. (Not
      DistributedDataParallel itself: its all-reduce runs from autograd hooks on its own streams.)
      FF_PEER_CPU_CAPTURE=1 (tests): on the CPU, --graph's capture is a stand-in that runs the
      step at each replay, so the bookkeeping can be checked without CUDA.
      seconds_per_epoch: each epoch's training steps only (no evaluation).
      JSON (one line): the recipe, losses (always for the MLPs; --losses for mnist-cnn, which then
      adds step_ms, every step's time), loss_first/last, test accuracy per epoch and final,
      seconds_per_epoch, step_ms_median/min/max/mean over timed_steps, samples_per_s(_step),
      flops_per_sample_forward (2 x multiply-adds), weight digests (FNV-1a; null above 16 MB of
      parameters, e.g. the full mlp), and for the MLPs "synthetic" (where and how the data was made).
  loader            DataLoader throughput (samples/s) over the training images with a per-item
                    normalisation ((x/255 - 0.2860)/0.3530 in float32, fivefold's data_idx.h)
      --data DIR [--workers 0,4] [--batch 64] [--train-limit N]

Timing: `--warmup` untimed iterations, then `--iters` timed ones; on a GPU each iteration is
bracketed by CUDA events, on the CPU by time.perf_counter() (the CPU forward returns when it is
done). Reported: median, min, max, mean of the per-iteration milliseconds, images/s at the median.

Exit codes: 0 ok, 2 bad usage or input (the JSON has "error"), 77 a CUDA run on a machine without
CUDA (the JSON has "error"; CTest's skip code).

Works with torch 1.13 (Debian's CPU build) and torch 2.x with CUDA.
"""
import argparse
import functools
import gzip
import json
import math
import os
import platform
import statistics
import struct
import sys
import time

EXIT_USAGE = 2
EXIT_UNAVAILABLE = 77

# fivefold's normalisation (core/include/fivefold/data_idx.h), evaluated in float32.
IDX_MEAN = 0.2860
IDX_STD = 0.3530


class PeerError(Exception):
    def __init__(self, msg, code=EXIT_USAGE):
        super().__init__(msg)
        self.code = code


def log(msg):
    print(msg, file=sys.stderr, flush=True)


try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:  # a clear message rather than a traceback
    print(json.dumps({"error": f"cannot import torch: {e} (use a Python that has PyTorch, "
                               f"e.g. Debian's /usr/bin/python3 with python3-torch)"}))
    sys.exit(EXIT_UNAVAILABLE)


# ----------------------------------------------------------------------------- models

class AlexNet(nn.Module):
    """docs/ARCHITECTURE.md §2: the seed's table, no channel groups, LRN (PyTorch's definition) after pool2."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 96, 11, stride=4, padding=0)
        self.conv2 = nn.Conv2d(96, 256, 5, stride=1, padding=2)
        self.lrn2 = nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=2.0)
        self.conv3 = nn.Conv2d(256, 384, 3, stride=1, padding=1)
        self.conv4 = nn.Conv2d(384, 384, 3, stride=1, padding=1)
        self.conv5 = nn.Conv2d(384, 256, 3, stride=1, padding=1)
        self.fc6 = nn.Linear(9216, 4096)
        self.fc7 = nn.Linear(4096, 4096)
        self.fc8 = nn.Linear(4096, 1000)

    def logits(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 3, 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 3, 2)
        x = self.lrn2(x)
        x = F.relu(self.conv3(x))
        x = F.relu(self.conv4(x))
        x = F.max_pool2d(F.relu(self.conv5(x)), 3, 2)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc6(x))
        x = F.relu(self.fc7(x))
        return self.fc8(x)

    def forward(self, x):
        return F.softmax(self.logits(x), dim=1)


class MnistCnn(nn.Module):
    """docs/ARCHITECTURE.md §2: PyTorch's classic MNIST example without dropout."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def logits(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        return self.fc2(x)

    def forward(self, x):
        return F.softmax(self.logits(x), dim=1)


# issue 16's MLPs (core/model/model.c mlp_table, mlp_small_table): fc1..fc6 with relu between,
# softmax at the end; mlp-small is every width / 16.
MLP_WIDTHS = {"mlp": (4096, 8192, 6144, 4096, 2048, 1024, 512)}
MLP_WIDTHS["mlp-small"] = tuple(w // 16 for w in MLP_WIDTHS["mlp"])


class Mlp(nn.Module):
    """fc1 .. fc6 (nn.Linear), relu after each but the last; forward ends in softmax as fivefold's
    table, training uses the logits with cross-entropy. device: where the parameters are made (the
    full mlp's 120 M parameters are initialised on the GPU rather than on the host)."""

    def __init__(self, widths, device=None):
        super().__init__()
        self.widths = tuple(widths)
        for k in range(len(widths) - 1):
            setattr(self, f"fc{k + 1}", nn.Linear(widths[k], widths[k + 1], device=device))

    def logits(self, x):
        layers = [m for _, m in param_layers(self)]
        for m in layers[:-1]:
            x = F.relu(m(x))
        return layers[-1](x)

    def forward(self, x):
        return F.softmax(self.logits(x), dim=1)


MODELS = {"alexnet": (AlexNet, (3, 227, 227)), "mnist-cnn": (MnistCnn, (1, 28, 28))}
MODELS.update({name: ((lambda w=w, device=None: Mlp(w, device)), (w[0],)) for name, w in MLP_WIDTHS.items()})
TRAIN_MODELS = ("mnist-cnn",) + tuple(MLP_WIDTHS)


def make_model(name, device=None):
    """(model, input shape per sample); device: where an MLP's parameters are made (default the host)."""
    if name not in MODELS:
        raise PeerError(f"--model '{name}': expected one of {', '.join(MODELS)}")
    cls, shape = MODELS[name]
    return (cls(device=device) if name in MLP_WIDTHS else cls()), shape


def param_layers(model):
    """(name, module) of the parameterised layers in model order (fivefold's param_index order)."""
    return [(n, m) for n, m in model.named_children() if isinstance(m, (nn.Conv2d, nn.Linear))]


def flops_per_image(model, shape):
    """2*K*C*R*S*Ho*Wo per conv and 2*in*out per linear, as fivefold's model.c counts them."""
    total = 0
    hooks = []

    def hook(mod, inp, out):
        nonlocal total
        if isinstance(mod, nn.Conv2d):
            k, c, r, s = mod.weight.shape
            total += 2 * k * c * r * s * out.shape[2] * out.shape[3]
        else:
            total += 2 * mod.in_features * mod.out_features

    for _, m in param_layers(model):
        hooks.append(m.register_forward_hook(hook))
    with torch.no_grad():
        model(torch.zeros((1,) + tuple(shape)))
    for h in hooks:
        h.remove()
    return total


# ----------------------------------------------------------------------------- fivefold's generator

MASK64 = (1 << 64) - 1
GOLDEN_GAMMA = 0x9E3779B97F4A7C15


def mix64(z):
    z &= MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def rng_key(seed, tensor_id):
    return mix64((seed & MASK64) ^ mix64(tensor_id + GOLDEN_GAMMA))


def s64(u):
    """uint64 u as the int64 with the same bits (torch has no uint64 arithmetic)."""
    u &= MASK64
    return u - (1 << 64) if u >> 63 else u


_MIX1, _MIX2, _GAMMA_S = s64(0xBF58476D1CE4E5B9), s64(0x94D049BB133111EB), s64(GOLDEN_GAMMA)


def t_mix(z):
    """mix64 on an int64 tensor: the multiplications wrap mod 2^64 as uint64's do (two's
    complement), and each right shift is masked to be logical rather than arithmetic."""
    z = (z ^ ((z >> 30) & ((1 << 34) - 1))) * _MIX1
    z = (z ^ ((z >> 27) & ((1 << 37) - 1))) * _MIX2
    return z ^ ((z >> 31) & ((1 << 33) - 1))


def t_rng_fill(n, seed, tensor_id, scale, device="cpu", chunk=1 << 24):
    """rng_fill computed by torch on `device` (int64 wrapping arithmetic, then the same float32
    operations, each exact but the final product): the same bits as rng_fill and ff_rng_fill, in
    milliseconds on a GPU for the full mlp's 120 M parameters."""
    key = s64(rng_key(seed, tensor_id))
    sc = float(__import__("numpy").float32(scale))  # the float32 scale, held exactly by the float
    out = torch.empty(n, dtype=torch.float32, device=device)
    for lo in range(0, n, chunk):
        hi = min(n, lo + chunk)
        z = t_mix(torch.arange(lo + 1, hi + 1, dtype=torch.int64, device=device) * _GAMMA_S + key)
        u = ((z >> 40) & ((1 << 24) - 1)).to(torch.float32) * (2.0 ** -24)  # exact
        out[lo:hi] = (2.0 * u - 1.0) * sc  # 2u - 1 exact; one float32 rounding in the product
    return out


def rng_fill(n, seed, tensor_id, scale):
    """core/model/rng.c ff_rng_fill, vectorised with numpy uint64 (wrapping) arithmetic: float32 array."""
    import numpy as np
    key = np.uint64(rng_key(seed, tensor_id))
    i = np.arange(1, n + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = key + i * np.uint64(GOLDEN_GAMMA)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(40)).astype(np.float32) * np.float32(2.0 ** -24)
    sym = np.float32(2.0) * u - np.float32(1.0)
    return sym * np.float32(scale)


def init_fivefold(model, seed):
    """ff_weights_generate: parameter p gets weight id 2p (scale sqrt(6/fan_in)) and bias id 2p+1
    (scale 1/sqrt(fan_in)), each scale rounded to float32 once. Generated by t_rng_fill where the
    parameters are (the host, or the GPU for a model made there): the same bits either way."""
    import numpy as np
    with torch.no_grad():
        for p, (_, m) in enumerate(param_layers(model)):
            fan_in = m.weight[0].numel()
            ws = np.float32(math.sqrt(6.0 / fan_in))
            bs = np.float32(1.0 / math.sqrt(fan_in))
            dev = m.weight.device
            m.weight.copy_(t_rng_fill(m.weight.numel(), seed, 2 * p, ws, dev).view_as(m.weight))
            m.bias.copy_(t_rng_fill(m.bias.numel(), seed, 2 * p + 1, bs, dev))


def shuffle_fivefold(n, seed, epoch):
    """ff_shuffle_order: Fisher-Yates from i = n-1 down to 1, j = (bits(i) * (i+1)) >> 64."""
    order = list(range(n))
    key = rng_key(seed, 0x5348554646 ^ epoch)
    for i in range(n - 1, 0, -1):
        bits = mix64(key + (i + 1) * GOLDEN_GAMMA)
        j = (bits * (i + 1)) >> 64
        order[i], order[j] = order[j], order[i]
    return order


def load_weights_h5(model, path):
    """/weights/<layer>/w and /b, shapes checked against the model before copying."""
    try:
        import h5py
    except ImportError:
        raise PeerError("--weights needs h5py (apt-get install python3-h5py)")
    if not os.path.exists(path):
        raise PeerError(f"--weights '{path}': no such file")
    with h5py.File(path, "r") as f, torch.no_grad():
        for name, m in param_layers(model):
            for key, t in (("w", m.weight), ("b", m.bias)):
                ds = f"/weights/{name}/{key}"
                if ds not in f:
                    raise PeerError(f"--weights '{path}': dataset {ds} is missing")
                a = f[ds][()]
                if tuple(a.shape) != tuple(t.shape):
                    raise PeerError(f"--weights '{path}': {ds} has shape {tuple(a.shape)}, "
                                    f"expected {tuple(t.shape)}")
                t.copy_(torch.from_numpy(a.astype("float32")))


DIGEST_MAX_BYTES = 16 << 20  # FNV-1a runs byte by byte in Python: ~1 s per 3 MB


def weights_digest(model, max_bytes=None):
    """FNV-1a-64 over all parameters in layer order (w then b), as `weights digest:` prints it;
    None for a model of more than max_bytes (default DIGEST_MAX_BYTES) of parameters: the full
    mlp's 480 MB would take minutes in this byte loop."""
    limit = DIGEST_MAX_BYTES if max_bytes is None else max_bytes
    if sum(4 * p.numel() for p in model.parameters()) > limit:
        return None
    h = 0xCBF29CE484222325
    for _, m in param_layers(model):
        for t in (m.weight, m.bias):
            for byte in t.detach().cpu().contiguous().numpy().astype("<f4").tobytes():
                h = ((h ^ byte) * 0x100000001B3) & MASK64
    return f"{h:016x}"


# ----------------------------------------------------------------------------- environment

def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def versions():
    v = {"torch": torch.__version__, "python": platform.python_version()}
    if torch.cuda.is_available():
        v["cuda"] = torch.version.cuda
        v["cudnn"] = torch.backends.cudnn.version()
    return v


def set_threads(threads):
    if threads and threads > 0:
        torch.set_num_threads(threads)
        try:
            torch.set_num_interop_threads(1)
        except RuntimeError:  # only allowed once, before any parallel work
            pass
    return torch.get_num_threads()


def set_precision(device, precision):
    if precision not in ("fp32", "tf32"):
        raise PeerError(f"--precision '{precision}': expected fp32 or tf32")
    if precision == "tf32" and device != "cuda":
        raise PeerError("--precision tf32 needs --device cuda (TF32 is a GPU tensor-core format)")
    tf32 = precision == "tf32"
    # TF32 is on by default for cuDNN convolutions: fp32 must switch it off explicitly. torch >= 2.9
    # has fp32_precision settings and refuses a mix of those with the legacy allow_tf32 flags, so
    # only one of the two APIs is used.
    matmul, conv = torch.backends.cuda.matmul, getattr(torch.backends.cudnn, "conv", None)

    def has(obj, name):  # torch 1.13's matmul object raises AssertionError for unknown attributes
        try:
            return obj is not None and hasattr(obj, name)
        except AssertionError:
            return False

    if has(matmul, "fp32_precision") and has(conv, "fp32_precision"):
        matmul.fp32_precision = "tf32" if tf32 else "ieee"
        conv.fp32_precision = "tf32" if tf32 else "ieee"
    else:
        matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
    if device == "cuda":
        torch.backends.cudnn.benchmark = True


def matmul_precision():
    """What fp32 matmuls run as, read through the API set_precision used: torch >= 2.9's
    fp32_precision ("ieee" or "tf32"), else get_float32_matmul_precision() ("highest" = no TF32).
    None if neither can be read."""
    m = torch.backends.cuda.matmul
    try:
        if hasattr(m, "fp32_precision") and hasattr(getattr(torch.backends.cudnn, "conv", None), "fp32_precision"):
            return m.fp32_precision
    except AssertionError:  # torch 1.13's matmul object raises for unknown attributes
        pass
    try:
        return torch.get_float32_matmul_precision()
    except (AttributeError, RuntimeError):
        return None


def parse_list(text, what):
    try:
        vals = [int(x) for x in str(text).split(",") if x.strip() != ""]
    except ValueError:
        raise PeerError(f"{what} '{text}': expected comma-separated integers")
    if not vals or any(v < 0 for v in vals):
        raise PeerError(f"{what} '{text}': expected non-negative integers")
    return vals


# ----------------------------------------------------------------------------- infer

def summary(times_ms, batch):
    med = statistics.median(times_ms)
    return {"batch": batch, "iters": len(times_ms), "median_ms": med, "min_ms": min(times_ms),
            "max_ms": max(times_ms), "mean_ms": statistics.fmean(times_ms),
            "images_per_s": batch / (med / 1e3) if med > 0 else None}


def time_infer(model, shape, batch, device, args, dist_ctx):
    rank, world = dist_ctx["rank"], dist_ctx["world"]
    # fivefold's batch split: the first N % P ranks get one more image
    local = batch // world + (1 if rank < batch % world else 0)
    per = -(-batch // world)  # padded block for the all-gather
    x = torch.randn((local,) + tuple(shape), device=device)
    cuda = device.startswith("cuda")
    classes = param_layers(model)[-1][1].out_features

    def eager():
        return model(x)

    step = eager
    if args.graph and local > 0:  # (a rank with no images has nothing to capture)
        # Warm up on a side stream (cuDNN picks algorithms), then capture once and replay.
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                model(x)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            static_y = model(x)

        def step():
            g.replay()
            return static_y

    def one():
        y = step() if local > 0 else torch.empty((0, classes), device=device)
        if world > 1:
            import torch.distributed as dist
            pad = torch.zeros((per, classes), device=device)
            pad[:local] = y
            parts = [torch.empty_like(pad) for _ in range(world)]
            dist.all_gather(parts, pad)
        return y

    for _ in range(args.warmup):
        one()
    if cuda:
        torch.cuda.synchronize()
    times = []
    for _ in range(args.iters):
        if world > 1:
            dist_ctx["barrier"]()
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            one()
            end.record()
            end.synchronize()
            ms = start.elapsed_time(end)
        else:
            t0 = time.perf_counter()
            one()
            ms = (time.perf_counter() - t0) * 1e3
        if world > 1:
            t = torch.tensor([ms], dtype=torch.float64, device=device)
            dist_ctx["max"](t)
            ms = float(t.item())
        times.append(ms)
    return summary(times, batch)


def init_dist(args, device):
    """torchrun sets RANK, WORLD_SIZE, LOCAL_RANK; without --ddp this is one process."""
    ctx = {"rank": 0, "world": 1, "local_rank": 0, "barrier": lambda: None, "max": lambda t: None}
    if not args.ddp:
        return ctx
    if "WORLD_SIZE" not in os.environ or "RANK" not in os.environ:
        raise PeerError("--ddp: RANK / WORLD_SIZE are not set: launch with `torchrun --nproc_per_node P "
                        "bench/peer_pytorch.py --ddp ...` (main() does that itself)")
    import torch.distributed as dist
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if device == "cuda":
        ngpu = torch.cuda.device_count()
        torch.cuda.set_device(local_rank % ngpu)
    dist.init_process_group(backend="nccl" if device == "cuda" else "gloo")
    ctx.update(rank=dist.get_rank(), world=dist.get_world_size(), local_rank=local_rank,
               barrier=dist.barrier,
               max=lambda t: dist.all_reduce(t, op=dist.ReduceOp.MAX))
    return ctx


def task_infer(args):
    device = args.device
    if device not in ("cpu", "cuda"):
        raise PeerError(f"--device '{device}': expected cpu or cuda")
    if device == "cuda" and not torch.cuda.is_available():
        raise PeerError("--device cuda: this torch sees no CUDA device "
                        f"(torch {torch.__version__}, built with CUDA {torch.version.cuda})",
                        EXIT_UNAVAILABLE)
    if args.graph and device != "cuda":
        raise PeerError("--graph (CUDA graph replay) needs --device cuda")
    if args.iters < 1 or args.warmup < 0:
        raise PeerError(f"--iters {args.iters} / --warmup {args.warmup}: expected iters >= 1, warmup >= 0")
    batches = parse_list(args.batch, "--batch")
    if any(b < 1 for b in batches):
        raise PeerError(f"--batch '{args.batch}': every batch must be >= 1")
    set_precision(device, args.precision)
    threads = set_threads(args.threads)
    ctx = init_dist(args, device)
    dev = f"cuda:{torch.cuda.current_device()}" if device == "cuda" else "cpu"
    torch.manual_seed(args.seed)
    model, shape = make_model(args.model)
    fl = flops_per_image(model, shape)
    model = model.to(dev).eval()
    # --ddp: each rank runs the plain module on its block of the batch. DistributedDataParallel's
    # wrapper only adds gradient all-reduce in backward, which inference never runs (and a wrapped
    # forward cannot be captured in a CUDA graph).
    kind = "ddp" if args.ddp else ("graph" if args.graph else "eager")
    name = f"pytorch-{kind}-{args.precision}" + (f"-cpu-{threads}t" if device == "cpu" else "")
    runs = []
    with torch.no_grad():
        for b in batches:
            r = time_infer(model, shape, b, dev, args, ctx)
            r["gflop_per_s"] = fl * b / (r["median_ms"] / 1e3) / 1e9 if r["median_ms"] > 0 else None
            runs.append(r)
            if ctx["rank"] == 0:
                log(f"{name} {args.model} batch {b}: median {r['median_ms']:.3f} ms "
                    f"(min {r['min_ms']:.3f}, max {r['max_ms']:.3f}), {r['images_per_s']:.1f} images/s")
    out = {"name": name, "task": "infer", "model": args.model, "device_kind": device,
           "device": torch.cuda.get_device_name() if device == "cuda" else cpu_name(),
           "threads": threads, "precision": args.precision, "graph": bool(args.graph),
           "ddp": bool(args.ddp), "world_size": ctx["world"], "warmup": args.warmup,
           "timer": "cuda-events" if device == "cuda" else "perf_counter",
           "cudnn_benchmark": bool(torch.backends.cudnn.benchmark) if device == "cuda" else None,
           "flops_per_image": fl, **versions()}
    if len(runs) == 1:  # one batch: its figures at the top level too, for simple parsers
        out.update(runs[0])
    out["runs"] = runs  # last, so that a parser taking the first "median_ms" finds the top level
    if args.ddp:
        import torch.distributed as dist
        dist.destroy_process_group()
    return out if ctx["rank"] == 0 else None


# ----------------------------------------------------------------------------- data

def idx_path(d, stem):
    for p in (os.path.join(d, stem + ".gz"), os.path.join(d, stem)):
        if os.path.exists(p):
            return p
    raise PeerError(f"--data '{d}': neither {stem}.gz nor {stem} is there "
                    "(any MNIST-format folder; Debian: apt-get install dataset-fashion-mnist)")


def read_idx(path, ndims):
    """IDX reader with the same checks as fivefold's: magic, type 0x08, rank, exact length."""
    import numpy as np
    with open(path, "rb") as f:
        opener = gzip.open if f.read(2) == b"\x1f\x8b" else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08 or data[3] != ndims:
        raise PeerError(f"{path}: not an unsigned-byte IDX file with {ndims} dimensions "
                        f"(header {data[:4].hex()})")
    dims = struct.unpack(">" + "I" * ndims, data[4:4 + 4 * ndims])
    need = 4 + 4 * ndims + math.prod(dims)
    if len(data) != need or 0 in dims:
        raise PeerError(f"{path}: header says {dims} ({need} bytes), file has {len(data)} bytes")
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndims).reshape(dims)


def load_split(d, split, limit):
    x = read_idx(idx_path(d, f"{split}-images-idx3-ubyte"), 3)
    y = read_idx(idx_path(d, f"{split}-labels-idx1-ubyte"), 1)
    if x.shape[0] != y.shape[0]:
        raise PeerError(f"--data '{d}': {split} has {x.shape[0]} images but {y.shape[0]} labels")
    if limit and limit > 0:
        x, y = x[:limit], y[:limit]
    return torch.from_numpy(x.copy()), torch.from_numpy(y.astype("int64"))


def normalise(u8):
    # float32 throughout: ((float)x / 255.0f - 0.2860f) / 0.3530f, as fivefold computes it
    return ((u8.float() / 255.0) - IDX_MEAN) / IDX_STD


# ----------------------------------------------------------------------------- synthetic teacher data

# The MLPs' data (core/include/fivefold/synthetic.h): every sample a pure function of (seed, split,
# index). golden/synthetic.py is the bit-exact numpy port; the functions below compute the same bits
# with torch on the training device (int64 wrapping arithmetic, float32 operations in the header's
# order, fmaf emulated exactly in float64), because numpy needs ~35 s for the full mlp's 32768 x 4096
# training set and its labels, torch on a GPU well under a second. A run checks its first samples
# against golden/synthetic.py before it trains (synthetic_check), so a GPU that computed other bits
# would be refused, not measured.
SYNTH_TRAIN_SMALL, SYNTH_TRAIN_FULL, SYNTH_TEST = 8192, 32768, 4096  # fivefold's defaults (core/cli/train.c)
SYNTH_CHECK_SAMPLES = 64
SYNTH_SQRT3 = 1.7320508  # the float64 nearest; rounded to float32 it is the header's 1.7320508f


def golden_synthetic():
    """golden/synthetic.py, imported from the golden/ folder beside bench/."""
    d = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "golden")
    if d not in sys.path:
        sys.path.insert(0, d)
    try:
        import synthetic
    except ImportError as e:
        raise PeerError(f"the MLPs' synthetic data needs golden/synthetic.py (looked in {d}): {e}")
    return synthetic


def t_synth_x(seed, split, i0, n, dim, device, rows=2048):
    """float32 (n, dim) on device: features of samples i0 .. i0+n-1 of split, ff_synth_x's bits."""
    syn = golden_synthetic()
    key = s64(int(syn.rng_key(seed, syn.TENSOR_ID_SYNTH_X + int(split))))
    out = torch.empty((n, dim), dtype=torch.float32, device=device)
    j = torch.arange(dim, dtype=torch.int64, device=device)[None, :] + 1
    for lo in range(0, n, rows):
        hi = min(n, lo + rows)
        i = torch.arange(i0 + lo, i0 + hi, dtype=torch.int64, device=device)[:, None]
        bits = t_mix((i * dim + j) * _GAMMA_S + key)
        u = [((bits >> (16 * k)) & 0xFFFF).to(torch.float32) * (2.0 ** -16) for k in range(4)]  # exact
        out[lo:hi] = ((u[0] + u[1]) + (u[2] + u[3]) - 2.0) * SYNTH_SQRT3  # one rounding, in the product
    return out


def t_fmaf(a, b, c):
    """float32 fmaf(a, b, c) on tensors, exactly (golden/synthetic.py's fmaf32 in torch): the float64
    product is exact, TwoSum gives the sum's error, round-to-odd in float64 then one rounding to
    float32 is the correctly rounded a * b + c. Each operation is its own torch kernel (nothing is
    contracted into a hardware fma)."""
    a, b, c = a.double(), b.double(), c.double()
    p = a * b
    s = p + c
    bp = s - c
    e = (p - bp) + (c - (s - bp))
    fix = (e != 0) & ((s.view(torch.int64) & 1) == 0)
    inf = torch.tensor(math.inf, dtype=torch.float64, device=s.device)
    s = torch.where(fix, torch.nextafter(s, torch.where(e > 0, inf, -inf)), s)
    return s.float()


def t_synth_labels(x, seed, classes, rows=4096):
    """int64 labels of the samples whose features are the rows of x (ff_synth_label): the teacher's
    logits as fmaf chains over its taps, then the first class with the largest logit."""
    syn = golden_synthetic()
    n, dim = x.shape
    feat, w = syn.teacher(seed, dim, classes)
    feat = torch.from_numpy(feat).to(x.device)
    w = torch.from_numpy(w).to(x.device)
    cls = torch.arange(classes, dtype=torch.int64, device=x.device)[None, :]
    out = torch.empty(n, dtype=torch.int64, device=x.device)
    for lo in range(0, n, rows):
        xb = x[lo:lo + rows]
        z = torch.zeros((xb.shape[0], classes), dtype=torch.float32, device=x.device)
        for t in range(syn.TAPS):
            z = t_fmaf(w[None, :, t], xb[:, feat[:, t]], z)
        top = z.max(dim=1, keepdim=True).values
        out[lo:lo + rows] = torch.where(z == top, cls, torch.full_like(cls, classes)).min(dim=1).values
    return out


def synthetic_split(seed, split, n, dim, classes, device, where):
    """(x float32 (n, dim), y int64 (n,)) on device. where: 'device' (torch on the device, its first
    SYNTH_CHECK_SAMPLES samples checked bit for bit against golden/synthetic.py) or 'host' (numpy,
    golden/synthetic.py itself, then copied). Returns (x, y, samples checked)."""
    import numpy as np
    syn = golden_synthetic()
    if where == "host":
        idx = np.arange(n, dtype=np.int64)
        x = torch.from_numpy(syn.synth_x(seed, split, idx, dim)).to(device)
        y = torch.from_numpy(syn.synth_labels(seed, split, idx, dim, classes).astype(np.int64)).to(device)
        return x, y, 0
    x = t_synth_x(seed, split, 0, n, dim, device)
    y = t_synth_labels(x, seed, classes)
    k = min(n, SYNTH_CHECK_SAMPLES)
    idx = np.arange(k, dtype=np.int64)
    want_x = syn.synth_x(seed, split, idx, dim)
    want_y = syn.synth_labels(seed, split, idx, dim, classes)
    got_x = x[:k].cpu().numpy()
    if not np.array_equal(got_x.view(np.uint32), want_x.view(np.uint32)):
        bad = int(np.argwhere(got_x.view(np.uint32) != want_x.view(np.uint32))[0][0])
        raise PeerError(f"synthetic data on {device}: sample {bad} of split {split} differs from "
                        "golden/synthetic.py (the device's integer or float32 arithmetic is not the "
                        "header's); use --synth host", EXIT_UNAVAILABLE)
    got_y = y[:k].cpu().numpy()
    if not np.array_equal(got_y, want_y.astype(np.int64)):
        bad = int(np.argwhere(got_y != want_y)[0][0])
        raise PeerError(f"synthetic labels on {device}: sample {bad} of split {split} has label "
                        f"{int(got_y[bad])}, golden/synthetic.py says {int(want_y[bad])}; use --synth host",
                        EXIT_UNAVAILABLE)
    return x, y, k


# ----------------------------------------------------------------------------- train

def train_checks(args, world):
    """Usage checks of --task train that hold before any process starts (relaunch_ddp runs them
    with the rank count it is about to start, so a bad combination fails once, by name, rather
    than in every rank). Returns the batch size."""
    if args.model not in TRAIN_MODELS:
        raise PeerError(f"--task train: --model {args.model}: expected one of {', '.join(TRAIN_MODELS)}")
    if args.model in MLP_WIDTHS:
        if args.data not in (None, "synthetic"):
            raise PeerError(f"--task train --model {args.model}: --data '{args.data}': the MLPs train on "
                            "synthetic teacher data only (--data synthetic, the default)")
        if args.synth not in ("device", "host"):
            raise PeerError(f"--synth '{args.synth}': expected device or host")
    elif not args.data or args.data == "synthetic":
        raise PeerError("--task train --model mnist-cnn needs --data DIR (an MNIST-format IDX folder)")
    if args.warmup_steps < 0:
        raise PeerError(f"--warmup-steps {args.warmup_steps}: expected >= 0")
    batches = parse_list(args.batch, "--batch")
    if len(batches) != 1 or batches[0] < 1:
        raise PeerError(f"--task train: --batch takes one batch size >= 1 (got '{args.batch}')")
    B = batches[0]
    if args.graph and args.warmup < 1:
        raise PeerError(f"--task train --graph: --warmup {args.warmup}: expected >= 1 (SGD's momentum "
                        "buffers must exist before the step is captured)")
    if args.ddp and B % world != 0:
        raise PeerError(f"--task train --ddp: --batch {B} is not divisible by the {world} processes "
                        "(each rank takes a contiguous B/P share of every global batch)")
    return B


def cuda_graph_capture(step, warmup, error_mode=None):
    """PyTorch's whole-network capture (CUDA graphs docs): `warmup` eager steps on a side stream
    (cuDNN picks its algorithms, autograd and SGD allocate the gradients and momentum buffers), then
    one step captured. Returns (replay, static_loss, release): each replay() reruns the captured
    kernels on the same tensors and leaves that step's loss in static_loss; release() frees the
    graph, which must happen before destroy_process_group when it holds NCCL collectives (otherwise
    ncclCommDestroy waits forever: pytorch/pytorch#115388, seen as a timed-out ddp-graph run on two
    H100s). error_mode "thread_local" (ddp-graph): other threads' CUDA calls during the capture,
    such as the NCCL process group's watchdog polling the warm-up's all-reduces, do not invalidate
    it."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warmup):
            step()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, **({"capture_error_mode": error_mode} if error_mode else {})):
        static_loss = step()

    def release():
        torch.cuda.synchronize()
        g.reset()

    return g.replay, static_loss, release


def cpu_capture_standin(step, warmup):
    """cuda_graph_capture's contract on the CPU, for tests (FF_PEER_CPU_CAPTURE=1): the warm-up steps
    run, the captured step does not run at capture, and each replay reruns it on the same tensors,
    leaving its loss in the returned static tensor; release() afterwards makes replay refuse."""
    for _ in range(warmup):
        step()
    static = torch.zeros(())
    live = [True]

    def replay():
        if not live[0]:
            raise PeerError("cpu_capture_standin: replay after release")
        static.copy_(step().detach())

    return replay, static, lambda: live.__setitem__(0, False)


def restore_after_capture(params, opt, saved_params, saved_state):
    """Puts the weights and SGD's state back to what they were before the warm-up steps, in place:
    the graph holds these tensors' addresses, so load_state_dict (which makes new tensors) will
    not do. A momentum buffer that did not exist then is zeroed: with dampening 0, SGD's first step
    without a buffer (buf = grad) and with a zero one (buf = 0 * mu + grad) give the same bits."""
    with torch.no_grad():
        for p, p0 in zip(params, saved_params):
            p.copy_(p0)
        for i, p in enumerate(params):
            before = saved_state.get(i, {})
            for k, v in opt.state[p].items():
                if k in before:
                    v.copy_(before[k]) if torch.is_tensor(v) else opt.state[p].__setitem__(k, before[k])
                elif k == "momentum_buffer" and torch.is_tensor(v):
                    v.zero_()
                else:
                    raise PeerError(f"--graph: optimizer state '{k}' appeared during the warm-up and "
                                    "cannot be put back (the graph peer expects plain SGD)")


class LogitsOf(nn.Module):
    """DistributedDataParallel runs the wrapped module's forward (its gradient hooks are armed
    there); mnist-cnn's forward ends in softmax, training wants the logits."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model.logits(x)


class StepTimer:
    """Each optimizer step's milliseconds: CUDA events around the step on a GPU (read once the
    epoch is synchronised, so timing adds no host wait), time.perf_counter() on the CPU (where a
    step returns when it is done)."""

    def __init__(self, cuda):
        self.cuda, self.pending, self.ms = cuda, [], []

    def start(self):
        if self.cuda:
            self.t0 = torch.cuda.Event(enable_timing=True)
            self.t0.record()
        else:
            self.t0 = time.perf_counter()

    def stop(self):
        if self.cuda:
            t1 = torch.cuda.Event(enable_timing=True)
            t1.record()
            self.pending.append((self.t0, t1))
        else:
            self.ms.append((time.perf_counter() - self.t0) * 1e3)

    def flush(self):  # after a synchronize
        self.ms.extend(a.elapsed_time(b) for a, b in self.pending)
        self.pending = []


def step_summary(ms, warmup, batch):
    """Median (and min, max, mean) ms per step over the steps after the first `warmup` (all of them
    when there are no more than `warmup`), and samples/s at the median."""
    excluded = warmup if len(ms) > warmup else 0
    timed = ms[excluded:]
    if not timed:
        return {"timed_steps": 0, "warmup_steps": excluded, "step_ms_median": None, "step_ms_min": None,
                "step_ms_max": None, "step_ms_mean": None, "samples_per_s_step": None}
    med = statistics.median(timed)
    return {"timed_steps": len(timed), "warmup_steps": excluded, "step_ms_median": med,
            "step_ms_min": min(timed), "step_ms_max": max(timed), "step_ms_mean": statistics.fmean(timed),
            "samples_per_s_step": batch / (med / 1e3) if med > 0 else None}


def load_train_data(args, dev):
    """(xtr, ytr, xte, yte, info): mnist-cnn's IDX splits on the host (uint8 images normalised to
    float32 (N, 1, 28, 28)), or an MLP's synthetic splits made on the training device (float32
    (N, D), int64 labels)."""
    if args.model not in MLP_WIDTHS:
        xtr, ytr = load_split(args.data, "train", args.train_limit)
        xte, yte = load_split(args.data, "t10k", args.test_limit)
        return (normalise(xtr).unsqueeze(1), ytr, normalise(xte).unsqueeze(1), yte,
                {"data": os.path.abspath(args.data)})
    widths = MLP_WIDTHS[args.model]
    dim, classes = widths[0], widths[-1]
    n = args.train_limit if args.train_limit and args.train_limit > 0 else (
        SYNTH_TRAIN_FULL if args.model == "mlp" else SYNTH_TRAIN_SMALL)
    nt = args.test_limit if args.test_limit and args.test_limit > 0 else SYNTH_TEST
    t = time.perf_counter()
    xtr, ytr, ktr = synthetic_split(args.seed, 0, n, dim, classes, dev, args.synth)
    xte, yte, kte = synthetic_split(args.seed, 1, nt, dim, classes, dev, args.synth)
    if dev.startswith("cuda"):
        torch.cuda.synchronize()
    info = {"data": "synthetic",
            "synthetic": {"generated_on": dev if args.synth == "device" else "host (numpy)",
                          "generator": "core/include/fivefold/synthetic.h; golden/synthetic.py "
                                       + ("checked on the first samples of each split" if args.synth == "device"
                                          else "computed the whole set"),
                          "checked_samples": {"train": ktr, "test": kte},
                          "features": dim, "classes": classes, "seconds": time.perf_counter() - t}}
    return xtr, ytr, xte, yte, info


def task_train(args, capture=None):
    """capture: the graph-capture function, cuda_graph_capture by default; a test passes a CPU
    stand-in with the same contract to check the graph variant's bookkeeping (static buffers,
    warm-up undone, eager tail) on a machine without CUDA."""
    device = args.device
    if device not in ("cpu", "cuda"):
        raise PeerError(f"--device '{device}': expected cpu or cuda")
    if device == "cuda" and not torch.cuda.is_available():
        raise PeerError("--device cuda: this torch sees no CUDA device", EXIT_UNAVAILABLE)
    if args.graph and device != "cuda" and capture is None:
        if os.environ.get("FF_PEER_CPU_CAPTURE") == "1":
            capture = cpu_capture_standin
        else:
            raise PeerError("--graph (CUDA graph replay) needs --device cuda")
    B = train_checks(args, int(os.environ.get("WORLD_SIZE", "1")) if args.ddp else 1)
    variant = "ddp-graph" if args.ddp and args.graph else "ddp" if args.ddp else "graph" if args.graph else "eager"
    mlp = args.model in MLP_WIDTHS
    set_precision(device, args.precision)
    threads = set_threads(args.threads)
    ctx = init_dist(args, device)
    rank, world = ctx["rank"], ctx["world"]
    dev = f"cuda:{torch.cuda.current_device()}" if device == "cuda" else "cpu"
    cuda = device == "cuda"
    if args.init not in ("torch", "fivefold") and not args.weights:
        raise PeerError(f"--init '{args.init}': expected torch or fivefold")
    if args.shuffle not in ("torch", "fivefold"):
        raise PeerError(f"--shuffle '{args.shuffle}': expected torch or fivefold")
    xtr_f, ytr, xte_f, yte, data_info = load_train_data(args, dev)
    torch.manual_seed(args.seed)
    # an MLP is made and initialised on the training device (the full mlp: 120 M parameters)
    model, shape = make_model(args.model, dev if mlp else None)
    fl = 2 * sum(m.in_features * m.out_features for _, m in param_layers(model)) if mlp \
        else flops_per_image(model, shape)
    if args.weights:
        load_weights_h5(model, args.weights)
        init = f"h5:{os.path.basename(args.weights)}"
    elif args.init == "fivefold":
        init_fivefold(model, args.seed)
        init = "fivefold"
    else:
        init = "torch"
    init_digest = weights_digest(model)
    model = model.to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                          weight_decay=args.weight_decay)
    n = xtr_f.shape[0]
    spe = -(-n // B)  # steps per epoch; the last batch may be short (as fivefold)
    total = min(args.steps, args.epochs * spe) if args.steps and args.steps > 0 else args.epochs * spe
    gen = torch.Generator().manual_seed(args.seed)

    def host_order(e):  # the data order on the host (the same on every rank)
        if args.shuffle == "fivefold":
            return torch.tensor(shuffle_fivefold(n, args.seed, e), dtype=torch.int64)
        return torch.randperm(n, generator=gen)

    # graph and ddp, and every variant of the MLPs: the training set is put on the device once
    # (untimed; the MLPs' is made there) and stays there; each epoch uploads its order and batches
    # are gathered there with index_select. mnist-cnn's eager is the plain loop: a host gather and a
    # copy per batch. eager reads the loss back every step, graph and ddp once per epoch.
    resident = variant != "eager" or mlp
    if resident:
        xtr_d, ytr_d = xtr_f.to(dev), ytr.to(dev)
        loss_vec = torch.zeros(spe, device=dev)  # each step's loss, read once per epoch
    setup_s = 0.0
    release_graph = None
    if args.ddp:
        import torch.distributed as dist
    params = list(opt.param_groups[0]["params"])

    def average_gradients():  # ddp-graph: DDP's average, each parameter's gradient summed over ranks / P
        for p in params:
            dist.all_reduce(p.grad)
            p.grad.div_(world)

    if variant in ("graph", "ddp-graph") and n >= B:
        # ONE graph for the full-size step: zero_grad (in place: the graph holds the gradients'
        # addresses), forward, cross-entropy, backward (ddp-graph: the gradients' all-reduce), SGD
        # step. The short last batch of an epoch (n % B != 0) runs eagerly on the same tensors
        # rather than through a second graph: one step per epoch, not worth a second capture.
        # ddp-graph: each rank's static buffers hold its B/P share of a full batch.
        t_setup = time.perf_counter()
        lo, hi = share(B, rank, world)
        static_x = torch.empty((hi - lo,) + tuple(xtr_d.shape[1:]), device=dev)
        static_y = torch.empty((hi - lo,), dtype=torch.int64, device=dev)
        first = host_order(0)[:B][lo:hi].to(dev)  # any real batch serves the warm-up: it is undone
        torch.index_select(xtr_d, 0, first, out=static_x)
        torch.index_select(ytr_d, 0, first, out=static_y)
        if args.shuffle == "torch":  # host_order(0) drew from the generator: start it again
            gen.manual_seed(args.seed)

        def graph_step():
            opt.zero_grad(set_to_none=False)
            loss = F.cross_entropy(model.logits(static_x), static_y)
            loss.backward()
            if variant == "ddp-graph":
                average_gradients()
            opt.step()
            return loss

        saved_params = [p.detach().clone() for p in params]
        import copy
        saved_state = copy.deepcopy(opt.state_dict()["state"])  # empty before the first step
        model.train()
        if capture is None and variant == "ddp-graph":
            capture = functools.partial(cuda_graph_capture, error_mode="thread_local")
        replay, static_loss, release_graph = (capture or cuda_graph_capture)(graph_step, args.warmup)
        if args.momentum != 0 and not all("momentum_buffer" in opt.state[p] for p in params):
            raise PeerError("--graph: SGD has no momentum buffers after the warm-up (cannot capture)")
        restore_after_capture(params, opt, saved_params, saved_state)
        if cuda:
            torch.cuda.synchronize()
        setup_s = time.perf_counter() - t_setup
    if variant == "ddp":
        # Eager: DDP's bucketed all-reduce is launched from autograd hooks on its own streams and is
        # not captured in a CUDA graph without extra machinery, so each step runs as launched
        # (ddp-graph is the captured way).
        from torch.nn.parallel import DistributedDataParallel as DDP
        net = DDP(LogitsOf(model), device_ids=[torch.cuda.current_device()] if cuda else None)

    timer = StepTimer(cuda)
    losses, accs, epoch_s, step, samples = [], [], [], 0, 0
    t0 = time.perf_counter()
    for e in range(args.epochs):
        if step >= total:
            break
        order = host_order(e)  # fivefold's shuffle is a reproduction aid, not a PyTorch cost: untimed
        model.train()
        done = 0
        if world > 1:
            ctx["barrier"]()
        t_ep = time.perf_counter()
        if resident:
            order_d = order.to(dev)
        for s in range(spe):
            if step >= total:
                break
            timer.start()
            if variant == "eager":
                if resident:
                    idx = order_d[s * B:(s + 1) * B]
                    x, y = xtr_d.index_select(0, idx), ytr_d.index_select(0, idx)
                else:
                    idx = order[s * B:(s + 1) * B]
                    x, y = xtr_f[idx].to(dev), ytr[idx].to(dev)
                opt.zero_grad()
                loss = F.cross_entropy(model.logits(x), y)
                loss.backward()
                opt.step()
                losses.append(float(loss.item()))
                m = int(idx.shape[0])
            elif variant == "graph":
                idx = order_d[s * B:(s + 1) * B]
                m = int(idx.shape[0])
                if m == B:
                    torch.index_select(xtr_d, 0, idx, out=static_x)
                    torch.index_select(ytr_d, 0, idx, out=static_y)
                    replay()
                    loss_vec[s].copy_(static_loss)
                else:  # the short last batch, eagerly; gradients zeroed, not freed (see above)
                    opt.zero_grad(set_to_none=False)
                    loss = F.cross_entropy(model.logits(xtr_d.index_select(0, idx)), ytr_d.index_select(0, idx))
                    loss.backward()
                    opt.step()
                    loss_vec[s].copy_(loss.detach())
            elif variant == "ddp-graph":  # this rank's share, through its graph when the batch is full
                idx = order_d[s * B:(s + 1) * B]
                m = int(idx.shape[0])
                lo, hi = share(m, rank, world)
                li = idx[lo:hi]
                if m == B:
                    torch.index_select(xtr_d, 0, li, out=static_x)
                    torch.index_select(ytr_d, 0, li, out=static_y)
                    replay()
                    loss_vec[s].copy_(static_loss / world)  # summed over ranks: the global mean loss
                else:  # the short last batch, eagerly, weighted as ddp's below
                    opt.zero_grad(set_to_none=False)
                    loss = F.cross_entropy(model.logits(xtr_d.index_select(0, li)), ytr_d.index_select(0, li),
                                           reduction="sum") / (m / world)
                    loss.backward()
                    average_gradients()
                    opt.step()
                    loss_vec[s].copy_(loss.detach() / world)
            else:  # ddp: this rank's contiguous share of the global batch (B/P each for a full one)
                idx = order_d[s * B:(s + 1) * B]
                m = int(idx.shape[0])
                lo, hi = share(m, rank, world)
                li = idx[lo:hi]
                opt.zero_grad()
                # DDP averages gradients over the P ranks; sum / (m / P) makes that average the
                # gradient of the global batch's mean loss also when the short last batch splits
                # unevenly (for a full batch m / P = B / P, this rank's count: the plain mean)
                out = net(xtr_d.index_select(0, li))
                loss = F.cross_entropy(out, ytr_d.index_select(0, li), reduction="sum") / (m / world)
                loss.backward()
                opt.step()
                loss_vec[s].copy_(loss.detach() / world)  # summed over ranks: the global mean loss
            timer.stop()
            step += 1
            done += 1
            samples += m
            if variant == "eager" and args.log_every and step % args.log_every == 0:
                log(f"epoch {e + 1} step {step}/{total} loss {losses[-1]:.6f}")
        if cuda:
            torch.cuda.synchronize()
        secs = time.perf_counter() - t_ep
        timer.flush()
        if world > 1:  # an epoch lasts as long as its slowest rank
            t = torch.tensor([secs], dtype=torch.float64, device=dev)
            ctx["max"](t)
            secs = float(t.item())
        epoch_s.append(secs)
        if variant != "eager":
            ep = loss_vec[:done].clone()
            if variant in ("ddp", "ddp-graph"):
                dist.all_reduce(ep)
            ep = [float(v) for v in ep.cpu().tolist()]
            if args.log_every:
                for k, v in enumerate(ep):
                    if (step - done + k + 1) % args.log_every == 0 and rank == 0:
                        log(f"epoch {e + 1} step {step - done + k + 1}/{total} loss {v:.6f}")
            losses.extend(ep)
        if done == spe and rank == 0:  # a complete epoch: test accuracy (rank 0; the weights are equal)
            accs.append(evaluate(model, xte_f, yte, dev))
            log(f"epoch {e + 1}: test accuracy {accs[-1]:.2f}%")
        if rank == 0:
            log(f"epoch {e + 1}: {secs:.3f} s of training ({variant}, {done} steps)")
    seconds = time.perf_counter() - t0
    step_ms = timer.ms
    if world > 1:  # a step lasts as long as its slowest rank
        t = torch.tensor(step_ms, dtype=torch.float64, device=dev)
        ctx["max"](t)
        step_ms = [float(v) for v in t.cpu().tolist()]
    if rank == 0:
        final_acc = accs[-1] if accs else evaluate(model, xte_f, yte, dev)
        final_digest = weights_digest(model.cpu())
    if release_graph is not None:  # before the process group goes (see cuda_graph_capture)
        release_graph()
    if args.ddp:
        dist.barrier()
        dist.destroy_process_group()
    if rank != 0:
        return None
    name = "pytorch-train" + ("" if variant == "eager" else f"-{variant}") + f"-{args.precision}"
    out = {"name": name + (f"-cpu-{threads}t" if device == "cpu" else ""),
           "task": "train", "variant": variant, "model": args.model, "device_kind": device,
           "device": torch.cuda.get_device_name() if device == "cuda" else cpu_name(), "threads": threads,
           "world_size": world, "epochs": args.epochs, "steps": step, "batch": B,
           "batch_per_rank": B // world, "lr": args.lr, "momentum": args.momentum,
           "weight_decay": args.weight_decay, "seed": args.seed, "init": init, "shuffle": args.shuffle,
           "train_samples": n, "test_samples": int(xte_f.shape[0]),
           "initial_weights_digest": init_digest, "weights_digest": final_digest,
           "loss_first": losses[0] if losses else None, "loss_last": losses[-1] if losses else None,
           "test_accuracy_per_epoch": accs, "test_accuracy": final_acc, "seconds": seconds,
           "seconds_per_epoch": epoch_s,
           "epoch_timing": "each epoch's optimizer steps only: the order's upload, batch gathers and "
                           "copies, forward/backward/step (CUDA synchronised at the end); not the "
                           "evaluation, not the host-side computation of the order"
                           + (", not the warm-up and capture (setup_s)" if args.graph else ""),
           "samples_per_s": samples / seconds if seconds > 0 else None,
           "data_on_device": resident, **versions()}
    # added for issue 16 (older readers ignore them): the data, per-step times, FLOPs, precision
    out.update(data_info)
    out.update(steps_per_epoch=spe, classes=param_layers(model)[-1][1].out_features,
               flops_per_sample_forward=fl, precision=args.precision,
               float32_matmul_precision=matmul_precision(),
               tf32=args.precision == "tf32",
               **step_summary(step_ms, args.warmup_steps, B),
               step_timing=("each optimizer step from its batch gather to the end of opt.step(): "
                            + ("CUDA events (the slowest rank's per step under ddp)" if cuda
                               else "time.perf_counter()")
                            + f"; median over the steps after the first --warmup-steps {args.warmup_steps}"))
    if init_digest is None:
        out["weights_digest_note"] = (f"not computed: more than {DIGEST_MAX_BYTES >> 20} MB of parameters "
                                      "(FNV-1a byte by byte in Python would take minutes)")
    if args.graph:
        out.update(setup_s=setup_s, graph_warmup_steps=args.warmup,
                   graph_tail="eager" if n % B else "none")
    if args.losses or mlp:  # the MLPs' runs are short: their loss curve always
        out["losses"] = losses
    if args.losses:
        out["step_ms"] = step_ms
    return out


def share(m, rank, world):
    """[lo, hi) of rank's contiguous block of m images: the first m % P ranks get one more (fivefold's
    batch split); m / P each when P divides m."""
    base, extra = divmod(m, world)
    lo = rank * base + min(rank, extra)
    return lo, lo + base + (1 if rank < extra else 0)


def evaluate(model, x, y, device):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, x.shape[0], 1000):
            pred = model.logits(x[i:i + 1000].to(device)).argmax(dim=1)
            correct += int((pred == y[i:i + 1000].to(pred.device)).sum())
    model.train()
    return 100.0 * correct / max(1, x.shape[0])


# ----------------------------------------------------------------------------- loader

class IdxDataset(torch.utils.data.Dataset):
    """One normalised image per item: the per-item work a DataLoader does."""

    def __init__(self, images, labels):
        self.images, self.labels = images, labels

    def __len__(self):
        return self.images.shape[0]

    def __getitem__(self, i):
        return normalise(self.images[i]).unsqueeze(0), self.labels[i]


def task_loader(args):
    if not args.data:
        raise PeerError("--task loader needs --data DIR (an MNIST-format IDX folder)")
    workers = parse_list(args.workers, "--workers")
    batches = parse_list(args.batch, "--batch")
    B = batches[0]
    threads = set_threads(args.threads)
    xtr, ytr = load_split(args.data, "train", args.train_limit)
    ds = IdxDataset(xtr, ytr)
    runs = []
    for w in workers:
        dl = torch.utils.data.DataLoader(ds, batch_size=B, shuffle=True, num_workers=w,
                                         generator=torch.Generator().manual_seed(args.seed))
        # Timed from the iterator's creation (worker start-up included, as a training loop sees it)
        # to the last batch; first_batch_s says how much of it was start-up.
        t0 = time.perf_counter()
        first = None
        count = 0
        for x, _ in dl:
            if first is None:
                first = time.perf_counter() - t0
            count += x.shape[0]
        secs = time.perf_counter() - t0
        runs.append({"workers": w, "samples": count, "seconds": secs, "first_batch_s": first,
                     "samples_per_s": count / secs if secs > 0 else None})
        log(f"DataLoader workers={w}: {count} samples in {secs:.3f} s = {count / secs:.0f} samples/s")
    return {"name": "pytorch-dataloader", "task": "loader", "batch": B, "threads": threads,
            "normalise": f"((x/255) - {IDX_MEAN}) / {IDX_STD} per item, float32",
            "device": cpu_name(), "cpus": os.cpu_count(), **versions(), "runs": runs}


# ----------------------------------------------------------------------------- main

def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--task", default="infer", choices=["infer", "train", "loader"])
    p.add_argument("--model", default=None,
                   help="alexnet|mnist-cnn|mlp|mlp-small (default: alexnet; train: mnist-cnn, mlp or mlp-small)")
    p.add_argument("--batch", default=None, help="N[,N...] (infer, default 1); train/loader: one N (default 64)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=0, help="CPU threads (0: torch's default)")
    p.add_argument("--precision", default="fp32")
    p.add_argument("--graph", action="store_true")
    p.add_argument("--ddp", action="store_true")
    p.add_argument("--nproc", type=int, default=0,
                   help="--ddp outside torchrun: processes to start (default: GPUs, or 2 on the CPU)")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--data", help="train/loader: MNIST-format IDX folder (mnist-cnn); the MLPs: synthetic "
                                   "(their only data, the default)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--steps", type=int, default=0,
                   help="train: stop after K optimizer steps in all (default: every step of --epochs)")
    p.add_argument("--warmup-steps", type=int, default=5,
                   help="train: the first W steps are left out of the per-step time (step_ms_median; "
                        "default 5); they still train")
    p.add_argument("--synth", default="device",
                   help="train, MLPs: where the synthetic set is computed: device (torch on the training "
                        "device, first samples checked against golden/synthetic.py; default) or host "
                        "(golden/synthetic.py's numpy for every sample: ~35 s for the full mlp)")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--init", default="torch")
    p.add_argument("--weights")
    p.add_argument("--shuffle", default="torch")
    p.add_argument("--train-limit", type=int, default=0)
    p.add_argument("--test-limit", type=int, default=0)
    p.add_argument("--log-every", type=int, default=0)
    p.add_argument("--losses", action="store_true", help="train: include every step's loss")
    p.add_argument("--workers", default="0,4")
    return p.parse_args(argv)


def relaunch_ddp(args, argv):
    """--ddp outside torchrun: start P copies of this script with the environment torchrun's
    --standalone mode gives them (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR/PORT on loopback) and
    pass rank 0's JSON line through, so callers need not know about torchrun. (Launched directly
    rather than through torch.distributed.run: Debian's torch 1.13 launcher fails on Python 3.11.)"""
    import socket
    import subprocess
    nproc = args.nproc or (torch.cuda.device_count() if args.device == "cuda" else 2)
    if nproc < 1:
        raise PeerError(f"--ddp: --nproc {nproc}: expected >= 1 (and a GPU per rank for --device cuda)",
                        EXIT_UNAVAILABLE if args.device == "cuda" else EXIT_USAGE)
    if args.task == "train":  # a bad combination fails here once, not in each of the P ranks
        train_checks(args, nproc)
    with socket.socket() as sk:  # a free loopback port for the rendezvous
        sk.bind(("127.0.0.1", 0))
        port = sk.getsockname()[1]
    import tempfile
    procs, files = [], []
    for r in range(nproc):
        env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(nproc),
                   LOCAL_WORLD_SIZE=str(nproc), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        files.append(tempfile.TemporaryFile(mode="w+"))  # a file, not a pipe: no size limit while polling
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__)] + list(argv), env=env,
                                      stdout=files[-1], text=True))
    # A rank that fails (a bad argument, the rendezvous port taken meanwhile) leaves the others
    # waiting in a collective until its 30-minute timeout: end them at once instead.
    first_fail = None
    while any(p.poll() is None for p in procs):
        first_fail = first_fail or next((p.returncode for p in procs if p.returncode not in (None, 0)), None)
        if first_fail is not None:
            for p in procs:
                if p.poll() is None:
                    p.terminate()
            break
        time.sleep(0.05)
    codes = [p.wait() for p in procs]
    first_fail = first_fail or next((c for c in codes if c > 0), None) or next((c for c in codes if c), None)
    files[0].seek(0)
    out0 = files[0].read()
    for f in files:
        f.close()
    lines = [ln for ln in out0.splitlines() if ln.startswith("{")]
    if any(codes) or len(lines) != 1:
        raise PeerError(f"--ddp: {nproc} processes failed (exit codes {codes}); rank 0 printed: "
                        f"{out0.strip()[-2000:]}", first_fail if first_fail and first_fail > 0 else EXIT_USAGE)
    print(lines[0], flush=True)
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.model is None:
        args.model = "mnist-cnn" if args.task == "train" else "alexnet"
    if args.batch is None:
        args.batch = "1" if args.task == "infer" else "64"
    if args.ddp and "RANK" not in os.environ:
        try:
            return relaunch_ddp(args, argv)
        except PeerError as e:
            print(json.dumps({"error": str(e), "task": args.task}), flush=True)
            log(f"peer_pytorch.py: {e}")
            return e.code
    try:
        out = {"infer": task_infer, "train": task_train, "loader": task_loader}[args.task](args)
    except PeerError as e:
        print(json.dumps({"error": str(e), "task": args.task}), flush=True)
        log(f"peer_pytorch.py: {e}")
        return e.code
    if out is not None:
        print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
