#!/usr/bin/env python3
"""Golden reference files for fivefold, computed by PyTorch on the CPU (docs/ARCHITECTURE.md §6).

    /usr/bin/python3 golden/make_golden.py                 # all inference goldens into golden/data/
    /usr/bin/python3 golden/make_golden.py --model mnist-cnn --out DIR
    /usr/bin/python3 golden/make_golden.py --check         # regenerate into a temp dir, compare tensors

Each golden kind is one function (make_infer_golden; a training kind adds make_train_golden and an
entry in KINDS). The file layout is documented in golden/README.md; the C reader is core/check/golden.c.

The weight/input generator below is a bit-exact transcription of core/model/rng.c and core/model/weights.c
(see core/include/fivefold/rng.h): uint64 arithmetic wraps mod 2^64, the 24-bit uniform and 2u-1
are exact in float32, and the one rounding is the float32 multiply by the scale, which is
sqrt(6/fan_in) (weights) or 1/sqrt(fan_in) (biases) computed in double and rounded once to float.
"""
import argparse
import datetime
import math
import os
import platform
import shlex
import sys
import tempfile

import h5py
import numpy as np
import torch
import torch.nn.functional as F

FORMAT_VERSION = 1
DEFAULT_SEED = 1
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # golden/synthetic.py

# ----------------------------------------------------------------------------- generator (rng.h)
GOLDEN_GAMMA = np.uint64(0x9E3779B97F4A7C15)
TENSOR_ID_INPUT = 0x494E505554  # "INPUT"


def mix64(z):
    """splitmix64's finaliser on a uint64 array (wrapping multiply)."""
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def rng_key(seed, tensor_id):
    with np.errstate(over="ignore"):
        t = np.array([tensor_id], dtype=np.uint64) + GOLDEN_GAMMA
        return mix64(np.array([seed], dtype=np.uint64) ^ mix64(t))[0]


def rng_fill(n, seed, tensor_id, scale, chunk=1 << 22):
    """float32[n]: symmetric(i) * scale, exactly as ff_rng_fill computes it."""
    key = rng_key(seed, tensor_id)
    out = np.empty(n, dtype=np.float32)
    scale = np.float32(scale)
    for lo in range(0, n, chunk):
        hi = min(n, lo + chunk)
        with np.errstate(over="ignore"):
            i1 = np.arange(lo + 1, hi + 1, dtype=np.uint64)
            bits = mix64(key + i1 * GOLDEN_GAMMA)
        u = (bits >> np.uint64(40)).astype(np.float32) * np.float32(2.0 ** -24)
        sym = np.float32(2.0) * u - np.float32(1.0)
        out[lo:hi] = sym * scale
    return out


# ----------------------------------------------------------------------------- digests
FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3


def fnv1a64(arr):
    """FNV-1a-64 over the raw little-endian bytes of a float32 array (docs/ARCHITECTURE.md §6.3), as 16 hex digits."""
    data = np.ascontiguousarray(arr, dtype=np.dtype(arr.dtype).newbyteorder("<")).tobytes()
    h, mask = FNV_OFFSET, (1 << 64) - 1
    for b in data:
        h = ((h ^ b) * FNV_PRIME) & mask
    return "%016x" % h


# ----------------------------------------------------------------------------- models (docs/ARCHITECTURE.md §2)
def conv(name, k, r, stride, pad):
    return dict(name=name, op="conv2d", out_c=k, k=r, stride=stride, pad=pad)


def pool(name, r, stride):
    return dict(name=name, op="maxpool", k=r, stride=stride)


def relu(name):
    return dict(name=name, op="relu")


def fc(name, n):
    return dict(name=name, op="linear", out_c=n)


MODELS = {
    "alexnet": dict(input=(3, 227, 227), images=2, layers=[
        conv("conv1", 96, 11, 4, 0), relu("relu1"), pool("pool1", 3, 2),
        conv("conv2", 256, 5, 1, 2), relu("relu2"), pool("pool2", 3, 2),
        dict(name="lrn2", op="lrn", size=5, alpha=1e-4, beta=0.75, k=2.0),
        conv("conv3", 384, 3, 1, 1), relu("relu3"),
        conv("conv4", 384, 3, 1, 1), relu("relu4"),
        conv("conv5", 256, 3, 1, 1), relu("relu5"), pool("pool5", 3, 2),
        dict(name="flatten", op="flatten"),
        fc("fc6", 4096), relu("relu6"), fc("fc7", 4096), relu("relu7"), fc("fc8", 1000),
        dict(name="softmax", op="softmax")]),
    "mnist-cnn": dict(input=(1, 28, 28), images=16, layers=[
        conv("conv1", 32, 3, 1, 0), relu("relu1"), conv("conv2", 64, 3, 1, 0), relu("relu2"),
        pool("pool1", 2, 2), dict(name="flatten", op="flatten"),
        fc("fc1", 128), relu("relu3"), fc("fc2", 10), dict(name="softmax", op="softmax")]),
    # The MLPs' small twin (issue 16): its input is a flat vector, stored (n, 256); the batch is the
    # first `images` samples of the synthetic teacher's test split (golden/synthetic.py), not the
    # generator's INPUT tensor. The full mlp (4096 wide, 120 M parameters) has no golden.
    "mlp-small": dict(input=(256, 1, 1), images=32, data="synthetic", layers=[
        fc("fc1", 512), relu("relu1"), fc("fc2", 384), relu("relu2"), fc("fc3", 256), relu("relu3"),
        fc("fc4", 128), relu("relu4"), fc("fc5", 64), relu("relu5"), fc("fc6", 32),
        dict(name="softmax", op="softmax")]),
}

# Layers whose output is an exact function of the input bits: their float64 output equals the
# float32 one, so it is not stored (the reader widens out_f32).
EXACT_OPS = ("relu", "maxpool", "flatten")


def derive_shapes(model):
    """Per-layer (in, out) shapes and fan-in, as core/model/model.c derives them."""
    c, h, w = model["input"]
    p = 0
    for L in model["layers"]:
        L["in"] = (c, h, w)
        op = L["op"]
        if op == "conv2d":
            L["fan_in"] = c * L["k"] * L["k"]
            L["wshape"] = (L["out_c"], c, L["k"], L["k"])
            h = (h + 2 * L["pad"] - L["k"]) // L["stride"] + 1
            w = (w + 2 * L["pad"] - L["k"]) // L["stride"] + 1
            c = L["out_c"]
        elif op == "maxpool":
            h = (h - L["k"]) // L["stride"] + 1
            w = (w - L["k"]) // L["stride"] + 1
        elif op == "flatten":
            c, h, w = c * h * w, 1, 1
        elif op == "linear":
            L["fan_in"] = c * h * w
            L["wshape"] = (L["out_c"], c * h * w)
            c, h, w = L["out_c"], 1, 1
        if op in ("conv2d", "linear"):
            L["param_index"] = p
            p += 1
        L["out"] = (c, h, w)
    return model


def generate_weights(model, seed):
    """{layer name: (w, b)} from the generator: w id 2p, b id 2p+1 (weights.h)."""
    weights = {}
    for L in model["layers"]:
        if "param_index" not in L:
            continue
        p, fan_in = L["param_index"], L["fan_in"]
        wscale = np.float32(math.sqrt(6.0 / fan_in))
        bscale = np.float32(1.0 / math.sqrt(fan_in))
        w = rng_fill(int(np.prod(L["wshape"])), seed, 2 * p, wscale).reshape(L["wshape"])
        b = rng_fill(L["out_c"], seed, 2 * p + 1, bscale)
        weights[L["name"]] = (w, b)
    return weights


def generate_input(model, n, seed):
    """The golden's input batch: generated images (n, C, H, W), or for a synthetic-data model the
    first n samples of the synthetic test split (split 1) as (n, features)."""
    c, h, w = model["input"]
    if model.get("data") == "synthetic":
        import synthetic  # golden/synthetic.py (numpy only)
        return synthetic.synth_x(seed, 1, np.arange(n, dtype=np.int64), c * h * w)
    return rng_fill(n * c * h * w, seed, TENSOR_ID_INPUT, 1.0).reshape(n, c, h, w)


# ----------------------------------------------------------------------------- the layers in torch
def layer_forward(L, x, w, b):
    """One layer in PyTorch, in the dtype of x (w/b converted to it)."""
    op = L["op"]
    if op == "conv2d":
        return F.conv2d(x, w.to(x.dtype), b.to(x.dtype), stride=L["stride"], padding=L["pad"])
    if op == "relu":
        return F.relu(x)
    if op == "maxpool":
        return F.max_pool2d(x, L["k"], L["stride"])
    if op == "lrn":
        return F.local_response_norm(x, L["size"], alpha=L["alpha"], beta=L["beta"], k=L["k"])
    if op == "flatten":
        return torch.flatten(x, 1)
    if op == "linear":
        return F.linear(x, w.to(x.dtype), b.to(x.dtype))
    if op == "softmax":
        return F.softmax(x, dim=1)
    raise ValueError("unknown op " + op)


def run_layers(model, weights, x32):
    """Per layer: float32 input/output in float32 (PyTorch's chain) and the float64 output from
    the same float32 input. Also the float64 chain from the float32 input (end to end)."""
    tw = {k: (torch.from_numpy(w), torch.from_numpy(b)) for k, (w, b) in weights.items()}
    rows = []
    x = torch.from_numpy(x32)
    x64 = x.double()
    for L in model["layers"]:
        w, b = tw.get(L["name"], (None, None))
        y32 = layer_forward(L, x, w, b)
        y64 = layer_forward(L, x.double(), w, b)
        rows.append((L, x.numpy(), y32.numpy(), y64.numpy()))
        x64 = layer_forward(L, x64, w, b)
        x = y32
    return rows, x64


# ----------------------------------------------------------------------------- writing
def text(s):
    """Strings are stored as fixed-length ASCII: every HDF5 reader (the C one included) reads those
    without character-set conversion (h5py's default, variable-length UTF-8, needs one)."""
    return np.bytes_(str(s).encode("ascii"))


def put(group, name, arr, compress=True):
    """A dataset with its FNV-1a digest as attribute `fnv1a64`; shuffle+gzip keep the files small."""
    arr = np.ascontiguousarray(arr)
    kw = dict(compression="gzip", compression_opts=9, shuffle=True) if compress and arr.size > 64 else {}
    ds = group.create_dataset(name, data=arr, **kw)
    ds.attrs["fnv1a64"] = text(fnv1a64(arr))
    return ds


def cpu_capability():
    """The instruction set PyTorch's CPU kernels dispatch to on this machine (AVX2, AVX512, ...):
    its float32 convolutions round differently under each, so a golden records it."""
    for line in torch.__config__.show().splitlines():
        if "CPU capability usage:" in line:
            return line.split(":", 1)[1].strip()
    return "unknown"


def pytorch_differs(attrs):
    """Why PyTorch's float32 outputs cannot be compared bit for bit with a golden whose meta
    attributes are `attrs` (another torch, another CPU capability, or one the golden does not
    record), or None when they can."""
    def attr(k):
        v = attrs.get(k)
        return None if v is None else v.decode() if isinstance(v, bytes) else str(v)
    made_by, made_on = attr("torch_version"), attr("torch_cpu_capability")
    if made_by != torch.__version__:
        return "the golden was made with torch %s, this is torch %s" % (made_by, torch.__version__)
    if made_on is None:
        return "the golden does not record the CPU capability it was made on, this is %s" % cpu_capability()
    if made_on != cpu_capability():
        return "the golden was made on CPU capability %s, this is %s" % (made_on, cpu_capability())
    return None


def write_meta(f, model_name, kind, seed, n, extra=None):
    m = f.create_group("meta")
    m.attrs["format_version"] = FORMAT_VERSION
    m.attrs["kind"] = text(kind)
    m.attrs["model"] = text(model_name)
    m.attrs["generator"] = text("golden/make_golden.py")
    m.attrs["torch_version"] = text(str(torch.__version__))
    m.attrs["torch_cpu_capability"] = text(cpu_capability())
    m.attrs["h5py_version"] = text(h5py.__version__)
    m.attrs["numpy_version"] = text(np.__version__)
    m.attrs["python_version"] = text(platform.python_version())
    m.attrs["torch_threads"] = torch.get_num_threads()
    m.attrs["seed"] = np.int64(seed)
    m.attrs["images"] = np.int64(n)
    m.attrs["command_line"] = text(" ".join(shlex.quote(a) for a in [os.path.basename(sys.argv[0])] + sys.argv[1:]))
    m.attrs["created"] = text(datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
    for k, v in (extra or {}).items():
        m.attrs[k] = text(v) if isinstance(v, str) else v


def write_weights(f, model, weights, store):
    """/weights/<layer> with attrs w_fnv1a64, b_fnv1a64 (and the datasets w, b when `store`);
    /weights attr fnv1a64 = digest of all parameters in model order, w then b (ff_weights_digest)."""
    g = f.create_group("weights")
    chain = []
    for L in model["layers"]:
        if L["name"] not in weights:
            continue
        w, b = weights[L["name"]]
        lg = g.create_group(L["name"])
        lg.attrs["w_fnv1a64"] = text(fnv1a64(w))
        lg.attrs["b_fnv1a64"] = text(fnv1a64(b))
        if store:
            put(lg, "w", w)
            put(lg, "b", b)
        chain += [w.ravel(), b.ravel()]
    g.attrs["fnv1a64"] = text(fnv1a64(np.concatenate(chain)))
    g.attrs["stored"] = np.int64(1 if store else 0)


U32 = 2.0 ** -24
U64 = 2.0 ** -53


def gamma(k, u):
    return k * u / (1 - k * u)


def ulp_size(y):
    """float32 ULP at |y| (2^-149 below the normal range), as ff_tol_ulp_size."""
    a = np.abs(y.astype(np.float64))
    _, e = np.frexp(a)
    return np.where(a >= 2.0 ** -126, np.ldexp(1.0, e - 24), 2.0 ** -149)


def ulp_distance(a, b):
    """ULP distance between float32 arrays with the biased-integer mapping (digest.h)."""
    def key(x):
        i = x.astype(np.float32).view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)
    return np.abs(key(a) - key(b))


def bound_use(L, x32, y32, y64, w, b):
    """How much of fivefold's tolerance (core/check/tolerance.c, golden/README.md) PyTorch's own float32
    output uses: a generator check that the derived bounds hold for a second implementation.
    Returns (max fraction of bound, max ULP)."""
    op = L["op"]
    if op in EXACT_OPS:
        same = np.array_equal(y32, y64.astype(np.float32))
        return (0.0 if same else float("inf")), int(ulp_distance(y32, y64).max())
    ulp = ulp_distance(y32, y64.astype(np.float32))
    if op in ("conv2d", "linear"):
        ax = torch.from_numpy(np.abs(x32).astype(np.float64))
        aw, ab = torch.from_numpy(np.abs(w).astype(np.float64)), torch.from_numpy(np.abs(b).astype(np.float64))
        if op == "conv2d":
            A = F.conv2d(ax, aw, ab, stride=L["stride"], padding=L["pad"]).numpy()
            K = int(np.prod(w.shape[1:])) + 1
        else:
            A = F.linear(ax, aw, ab).numpy()
            K = w.shape[1] + 1
        bnd = (gamma(K, U32) + gamma(K, U64)) * A + K * 2.0 ** -149
        return float(np.max(np.abs(y32 - y64) / bnd)), int(ulp.max())
    if op == "lrn":
        return float(ulp.max() / LRN_ULP), int(ulp.max())
    if op == "softmax":
        n = x32.shape[1]
        d = x32.max(axis=1, keepdims=True).astype(np.float64) - x32
        bu = d + 2.0 + (n - 1) / (1 - (n - 1) * U32) + n / math.e + 5.0  # ff_tol_softmax_ulp
        return float(np.max(ulp / bu)), int(ulp.max())
    raise ValueError(op)


LRN_ULP = 13.0  # FF_TOL_LRN_ULP


def write_infer_golden(path, model_name, model, weights, x32, seed, store_weights, weights_source):
    rows, y64_chain = run_layers(model, weights, x32)
    n = x32.shape[0]
    with h5py.File(path, "w") as f:
        extra = {"weights_source": weights_source}
        if model.get("data") == "synthetic":
            extra["input_source"] = "synthetic test split (golden/synthetic.py), samples 0..%d, seed %d" % (n - 1, seed)
        write_meta(f, model_name, "infer", seed, n, extra)
        put(f, "input", x32)
        write_weights(f, model, weights, store_weights)
        lg = f.create_group("layers")
        prev = "/input"
        for i, (L, xin, y32, y64) in enumerate(rows):
            g = lg.create_group(L["name"])
            g.attrs["op"] = text(L["op"])
            g.attrs["index"] = np.int64(i)
            w, b = weights.get(L["name"], (None, None))
            use, ulp = bound_use(L, xin, y32, y64, w, b)
            # PyTorch is a second correct implementation: it must satisfy fivefold's own bounds.
            assert use <= 1.0, "%s: PyTorch float32 uses %.3g of the bound (max %d ULP)" % (L["name"], use, ulp)
            g.attrs["torch_f32_bound_use"] = use
            g.attrs["torch_f32_max_ulp"] = np.int64(ulp)
            # A layer's float32 input is the previous layer's float32 output: a soft link, not a copy.
            g["in_f32"] = h5py.SoftLink(prev)
            put(g, "out_f32", y32)
            if L["op"] not in EXACT_OPS:
                # out_f64 = double(out_f32) + double(out_f64_delta): the float64 output stored as its
                # (small) difference from the float32 one, half the bytes of a float64 tensor; the
                # float32 rounding of the difference is at most 2^-24 |delta| (README: tolerances).
                delta = (y64 - y32.astype(np.float64)).astype(np.float32)
                put(g, "out_f64_delta", delta)
            else:
                assert np.array_equal(y64, y32.astype(np.float64)), L["name"] + ": exact op changed a value"
            prev = "/layers/%s/out_f32" % L["name"]
            print("  %-8s %-8s PyTorch float32: %6.2f%% of bound, max %d ULP" % (L["name"], L["op"], 100 * use, ulp))
        # End to end: the logits are the last dot-product layer's output; the float64 chain starts
        # from the same float32 input and never rounds to float32.
        last_dot = [r for r in rows if r[0]["op"] == "linear"][-1]
        f["logits"] = h5py.SoftLink("/layers/%s/out_f32" % last_dot[0]["name"])
        f.attrs["logits_layer"] = text(last_dot[0]["name"])
        _, logits64 = run_layers_f64_until(model, weights, x32, last_dot[0]["name"])
        put(f, "logits_f64", logits64)
        put(f, "probs_f64", y64_chain.numpy())
        top5 = np.argsort(-last_dot[2], axis=1, kind="stable")[:, :5].astype(np.int64)
        put(f, "top5", top5, compress=False)
        put(f, "top5_f64", np.argsort(-logits64, axis=1, kind="stable")[:, :5].astype(np.int64), compress=False)
    return rows


def run_layers_f64_until(model, weights, x32, last_name):
    x = torch.from_numpy(x32).double()
    for L in model["layers"]:
        w, b = weights.get(L["name"], (None, None))
        x = layer_forward(L, x, None if w is None else torch.from_numpy(w),
                          None if b is None else torch.from_numpy(b))
        if L["name"] == last_name:
            return L, x.numpy()
    raise KeyError(last_name)


def make_infer_golden(model_name, out_dir, seed=DEFAULT_SEED, images=None, store_weights=False):
    """Inference golden for a model with generator weights and a generated input batch."""
    model = derive_shapes(dict(MODELS[model_name]))
    n = images or model["images"]
    weights = generate_weights(model, seed)
    x32 = generate_input(model, n, seed)
    path = os.path.join(out_dir, model_name + ".h5")
    # Generator weights are not stored (AlexNet's are 250 MB, mnist-cnn's 4.7 MB of the 32 MB budget):
    # the reader regenerates them from the seed and checks every tensor's digest.
    write_infer_golden(path, model_name, model, weights, x32, seed,
                       store_weights=store_weights, weights_source="generator")
    return path


KINDS = {"infer": make_infer_golden}  # issue 7 adds "train": make_train_golden


# ----------------------------------------------------------------------------- --check
def compare_files(committed, fresh):
    """Every dataset of `fresh` must exist in `committed` with identical dtype, shape and bytes
    (also the reverse, except /expected which `fivefold verify --record` adds). Returns problems."""
    problems = []

    def datasets(f):
        out = {}

        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                out[name] = obj
        f.visititems(visit)
        return out

    with h5py.File(committed, "r") as a, h5py.File(fresh, "r") as b:
        da, db = datasets(a), datasets(b)
        for name, ds in db.items():
            if name not in da:
                problems.append("%s: missing in committed file" % name)
                continue
            x, y = da[name][()], ds[()]
            if x.dtype != y.dtype or x.shape != y.shape:
                problems.append("%s: committed %s%s, regenerated %s%s" % (name, x.dtype, x.shape, y.dtype, y.shape))
            elif x.tobytes() != y.tobytes():
                # compare bit patterns (NaN-safe): unsigned integers of the element size
                u = "u%d" % x.dtype.itemsize
                diff = np.flatnonzero(x.reshape(-1).view(u) != y.reshape(-1).view(u))
                problems.append("%s: %d of %d elements differ (first at flat index %d)" % (name, diff.size, x.size, diff[0]))
        for name in da:
            if name not in db and not name.startswith("expected"):
                problems.append("%s: in committed file only" % name)
        for k in ("weights",):
            if a[k].attrs["fnv1a64"] != b[k].attrs["fnv1a64"]:
                problems.append("weights digest: committed %s, regenerated %s" % (a[k].attrs["fnv1a64"], b[k].attrs["fnv1a64"]))
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=sorted(MODELS), action="append",
                    help="model(s) to make (default: all)")
    ap.add_argument("--kind", choices=sorted(KINDS), default="infer")
    ap.add_argument("--out", default=os.path.join(HERE, "data"), help="output directory")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--store-weights", action="store_true",
                    help="also store the generator weights in the file (not for committed goldens: size budget)")
    ap.add_argument("--check", action="store_true",
                    help="regenerate into a temporary directory and compare every tensor with the committed files")
    args = ap.parse_args()
    # One thread: PyTorch's float32 results must not depend on how work is split across threads.
    torch.set_num_threads(1)
    models = args.model or sorted(MODELS)
    make = KINDS[args.kind]
    if args.check:
        failed = skipped = 0
        with tempfile.TemporaryDirectory() as tmp:
            for m in models:
                fresh = make(m, tmp, seed=args.seed, store_weights=args.store_weights)
                committed = os.path.join(args.out, os.path.basename(fresh))
                problems = compare_files(committed, fresh) if os.path.exists(committed) else [committed + ": missing"]
                for p in problems:
                    print("%s: %s" % (m, p))
                print("%s: %s" % (m, "identical" if not problems else "DIFFERS (%d problems)" % len(problems)))
                if problems and os.path.exists(committed):
                    # Another PyTorch, or the same on another CPU instruction set, may round its
                    # float32 kernels differently: then only what the generator makes (the input,
                    # the weights' digest) must still be identical, and the bit-for-bit check of
                    # PyTorch's outputs cannot be made here (exit 77: skipped).
                    with h5py.File(committed, "r") as f:
                        why = pytorch_differs(dict(f["meta"].attrs))
                    if why:
                        ours = [p for p in problems if p.startswith(("input:", "weights digest:"))]
                        if not ours:
                            print("%s: the generator's tensors are identical; PyTorch's outputs cannot be compared "
                                  "bit for bit: %s" % (m, why))
                            skipped += 1
                            continue
                failed += bool(problems)
        return 1 if failed else (77 if skipped else 0)
    os.makedirs(args.out, exist_ok=True)
    for m in models:
        path = make(m, args.out, seed=args.seed, store_weights=args.store_weights)
        print("wrote %s (%.1f MB)" % (path, os.path.getsize(path) / 1e6))
    print("now: update golden/MANIFEST.sha256 (cd golden && sha256sum data/*.h5 > MANIFEST.sha256),\n"
          "     then record the CPU reference digests: fivefold verify --model M --record")
    return 0


if __name__ == "__main__":
    sys.exit(main())
