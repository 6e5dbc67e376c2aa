#!/usr/bin/env python3
"""Training goldens for fivefold's mnist-cnn (issue 7) and mlp-small (issue 16), computed by PyTorch on the CPU
(docs/ARCHITECTURE.md §6, §9).

    /usr/bin/python3 golden/make_golden_train.py [--data DIR] [--out golden/data/train-mnist-cnn.h5]
    /usr/bin/python3 golden/make_golden_train.py --model mlp-small [--out golden/data/train-mlp-small.h5]
    /usr/bin/python3 golden/make_golden_train.py --model mlp-small --check   # regenerate to a temp file, compare

mlp-small (the same recipe, MODELS below says what differs): K = 10 steps of batch B = 64 (fivefold
uses micro-batches of 8), synthetic teacher data (golden/synthetic.py, the port of
core/include/fivefold/synthetic.h): the first K*B samples of ff_shuffle_order(seed 1, epoch 0) over
the 8192 training samples `fivefold train --model mlp-small` uses, stored as /data/features float32
(K, B, 256), /data/labels int32 (K, B) and /data/indices int64 (K, B); the isolation records use
the first N_ISO = 8 samples of step 1 (one micro-batch); weight-shaped tensors of the layers with
more than 16384 weights are stored for 16 evenly spaced rows, listed in /rows/<layer> (int64).
Attributes also name the data ("synthetic"), the training set size (train_n) and the micro-batch.
Every golden also has a /meta group with the generator's versions (torch, numpy, h5py, python).

mnist-cnn:

K = 10 SGD steps (lr 0.01, momentum 0.9, batch B = 16) from fivefold's generator weights (seed 1) on
real Fashion-MNIST batches: the first K*B images of ff_shuffle_order(seed 1, epoch 0), stored as
uint8 with their labels. PyTorch runs the same steps twice from the same float32 weights and the
same float32 normalised images: once in float32 (what a float32 trainer computes) and once in
float64 (the reference). The C verifier (core/train/train_golden.c) checks fivefold against both.

File layout (all float tensors little-endian; fc1's weight is 128 x 9216 = 1.18 M values, so to keep
the golden small (32 MB for all goldens) its weight-shaped tensors are stored for rows 0, 32,
64, 96 only: /fc1_rows; datasets are gzip-compressed):
  / (root) attrs: format_version, kind "train", model, seed, steps, batch, lr, momentum,
               weight_decay, normalise, torch_version, created, initial_weights_digest (16 hex,
               FNV-1a over the generator weights: catches a generator drift at once)
  /fc1_rows                    int64 (4)   the fc1 rows stored
  /data/images                 uint8 (K, B, 28, 28), /data/labels uint8 (K, B)
  /trajectory/loss_f32, loss_f64              float64 (K): the loss before each update
  /trajectory/final_f32/<layer>/w, b          float32: weights after K steps, float32 run
  /trajectory/final_f64/<layer>/w, b          float64: the same, float64 run
  /step1_grad/<layer>/w_f32, b_f32, w_f64, b_f64: the gradient of step 1 (mean loss over B)
  /isolation/<layer>/...       each layer's backward in isolation on the first N_ISO = 1 image of
                               step 1: x (float32 input of the layer, from the float32 forward),
                               dy (float32 gradient of its output, from the float32 backward of
                               that image's loss), and dx_f64 / dw_f64 / db_f64 computed in float64
                               from exactly those float32 x, dy (and weights). relu and maxpool
                               route dy values unchanged, so their exact float64 result is a
                               float32 value: stored as float32 'dx'.
                               /isolation/loss: logits (float32), labels, dz_f64 (mean over N_ISO).
"""
import argparse
import datetime
import gzip
import math
import os
import platform
import sys
import tempfile

import h5py
import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_golden  # noqa: E402  the model tables (MODELS, derive_shapes)
import synthetic  # noqa: E402  golden/synthetic.py

FORMAT_VERSION = 1
SEED = 1
K_STEPS = 10
LR, MOMENTUM, WD = 0.01, 0.9, 0.0
MEAN, STD = 0.2860, 0.3530
MICROBATCH = 8  # fivefold's side (recorded; PyTorch takes the whole batch at once)

# What differs between the models' goldens. rows: {layer: stored rows} for weight-shaped tensors
# stored in part (size budget); rows_attr: mnist-cnn's single /fc1_rows dataset (its original
# layout), otherwise /rows/<layer>.
MODELS = {
    "mnist-cnn": dict(batch=16, n_iso=1, data="fashion-mnist", rows={"fc1": list(range(0, 128, 32))},
                      rows_attr="fc1_rows"),
    "mlp-small": dict(batch=64, n_iso=8, data="synthetic", train_n=8192, rows_above=16384, n_rows=16),
}
HERE = os.path.dirname(os.path.abspath(__file__))

# ---------------------------------------------------------------- generator (core/model/rng.c, weights.c)
M64 = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15


def mix64_np(z):
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def mix64(z):
    z &= M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def rng_key(seed, tensor_id):
    return mix64(seed ^ mix64(tensor_id + GAMMA))


def rng_fill(n, seed, tensor_id, scale):
    with np.errstate(over="ignore"):
        key = np.uint64(rng_key(seed, tensor_id))
        i = np.arange(1, n + 1, dtype=np.uint64)
        bits = mix64_np(key + i * np.uint64(GAMMA))
    u = (bits >> np.uint64(40)).astype(np.float32) * np.float32(2.0 ** -24)
    return (np.float32(2.0) * u - np.float32(1.0)) * np.float32(scale)


def shuffle_order(n, seed, epoch):
    """ff_shuffle_order: Fisher-Yates from i = n-1 down to 1, j = (bits(i) * (i+1)) >> 64."""
    order = list(range(n))
    key = rng_key(seed, 0x5348554646 ^ epoch)
    for i in range(n - 1, 0, -1):
        bits = mix64(key + (i + 1) * GAMMA)
        j = (bits * (i + 1)) >> 64
        order[i], order[j] = order[j], order[i]
    return order


def fnv1a64_fast(arrays):
    """FNV-1a-64 over the little-endian bytes of float32 arrays (ff_weights_digest's definition)."""
    h = 0xcbf29ce484222325
    for a in arrays:
        for byte in np.ascontiguousarray(a, dtype="<f4").tobytes():
            h = ((h ^ byte) * 0x100000001b3) & M64
    return h


# ---------------------------------------------------------------- model (fivefold's tables, golden/make_golden.py)
def model_spec(name):
    """The layer table (make_golden.MODELS with shapes) plus the training recipe of MODELS."""
    spec = make_golden.derive_shapes(dict(make_golden.MODELS[name]))
    spec = dict(spec, **MODELS[name])
    spec["name"] = name
    spec["params"] = [L["name"] for L in spec["layers"] if "param_index" in L]
    spec["by_name"] = {L["name"]: L for L in spec["layers"]}
    if "rows_above" in spec:  # evenly spaced rows of every large weight
        rows = {}
        for L in spec["layers"]:
            if "wshape" in L and int(np.prod(L["wshape"])) > spec["rows_above"]:
                out = L["wshape"][0]
                rows[L["name"]] = list(range(0, out, out // spec["n_rows"]))[:spec["n_rows"]]
        spec["rows"] = rows
    return spec


def generator_weights(spec, seed):
    w = {}
    for name in spec["params"]:
        L = spec["by_name"][name]
        shape, fan_in = L["wshape"], L["fan_in"]
        ws = np.float32(math.sqrt(6.0 / fan_in))
        bs = np.float32(1.0 / math.sqrt(fan_in))
        p = L["param_index"]
        w[name] = (rng_fill(int(np.prod(shape)), seed, 2 * p, ws).reshape(shape),
                   rng_fill(shape[0], seed, 2 * p + 1, bs))
    return w


def forward(spec, params, x, keep=None):
    """The model's layers up to the logits (softmax is the loss's): mnist-cnn conv1 relu1 conv2 relu2
    pool1 flatten fc1 relu3 fc2; mlp-small fc1 relu1 ... fc6. keep: dict receiving each layer's
    input (and output) tensors, with retain_grad, for the isolation records (flatten: none)."""
    h = x
    for L in spec["layers"]:
        op, name = L["op"], L["name"]
        if op == "softmax":
            break
        if op == "flatten":
            h = torch.flatten(h, 1)
            continue
        if op == "conv2d":
            y = F.conv2d(h, *params[name], stride=L["stride"], padding=L["pad"])
        elif op == "linear":
            y = F.linear(h, *params[name])
        elif op == "relu":
            y = F.relu(h)
        elif op == "maxpool":
            y = F.max_pool2d(h, L["k"], L["stride"])
        else:
            raise ValueError("training golden: op %s" % op)
        if keep is not None:
            y.retain_grad()
            keep[name] = (h, y)
        h = y
    return h


def to_params(w, dtype):
    return {k: (torch.tensor(v[0], dtype=dtype, requires_grad=True),
                torch.tensor(v[1], dtype=dtype, requires_grad=True)) for k, v in w.items()}


def sgd_run(spec, w0, xs, ys, dtype):
    """PyTorch's SGD (momentum, dampening 0) for K steps; returns losses, step-1 grads, final."""
    params = to_params(w0, dtype)
    flat = [t for k in spec["params"] for t in params[k]]
    opt = torch.optim.SGD(flat, lr=LR, momentum=MOMENTUM, weight_decay=WD)
    losses, grad1 = [], None
    for k in range(len(xs)):
        opt.zero_grad()
        loss = F.cross_entropy(forward(spec, params, xs[k].to(dtype)), ys[k])
        loss.backward()
        losses.append(float(loss.item()))
        if k == 0:
            grad1 = {n: (params[n][0].grad.detach().clone().numpy(), params[n][1].grad.detach().clone().numpy())
                     for n in spec["params"]}
        opt.step()
    final = {n: (params[n][0].detach().numpy().copy(), params[n][1].detach().numpy().copy()) for n in spec["params"]}
    return losses, grad1, final


def text(s):
    """Fixed-length ASCII attribute (what the C reader, ff_h5_read_attr_str, accepts)."""
    return np.bytes_(str(s).encode("ascii"))


def put(g, name, a):
    a = np.asarray(a)
    if a.size >= 256:
        g.create_dataset(name, data=a, compression="gzip", compression_opts=9, shuffle=True)
    else:
        g.create_dataset(name, data=a)


def rows(spec, name, a):
    """A weight-shaped (O, ...) tensor restricted to the layer's stored rows (all when none are listed)."""
    sel = spec["rows"].get(name)
    return a[sel] if sel is not None and a.ndim >= 2 else a


def read_idx(path, ndims):
    with (gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")) as f:
        raw = f.read()
    assert raw[0] == 0 and raw[1] == 0 and raw[2] == 8 and raw[3] == ndims, path
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndims)]
    hdr = 4 + 4 * ndims
    return np.frombuffer(raw, dtype=np.uint8, offset=hdr).reshape(dims)


def find(d, stem):
    for p in (os.path.join(d, stem + ".gz"), os.path.join(d, stem)):
        if os.path.exists(p):
            return p
    sys.exit(f"make_golden_train: {stem}[.gz] not found in {d} (apt-get install dataset-fashion-mnist)")


def isolation(spec, f32params, x16, y16, g, label_dtype):
    """Each layer's backward on the first N_ISO images, float32 inputs -> float64 outputs."""
    n_iso = spec["n_iso"]
    keep = {}
    p = {k: (v[0].detach().clone().requires_grad_(True), v[1].detach().clone().requires_grad_(True))
         for k, v in f32params.items()}
    x = x16[:n_iso].clone()
    logits = forward(spec, p, x, keep)
    logits.retain_grad()
    loss = F.cross_entropy(logits, y16[:n_iso])
    loss.backward()
    iso = g.create_group("isolation")
    # loss layer: logits -> dz
    z64 = logits.detach().double().requires_grad_(True)
    F.cross_entropy(z64, y16[:n_iso]).backward()
    gl = iso.create_group("loss")
    put(gl, "logits", logits.detach().numpy())
    put(gl, "labels", y16[:n_iso].numpy().astype(label_dtype))
    put(gl, "dz_f64", z64.grad.numpy())
    for L in spec["layers"]:
        name, op = L["name"], L["op"]
        if name not in keep:
            continue
        t_in, t_out = keep[name]
        xin = t_in.detach()
        dy = t_out.grad.detach()
        x64 = xin.double().requires_grad_(True)
        gg = iso.create_group(name)
        put(gg, "x", xin.numpy())
        put(gg, "dy", dy.numpy())
        if op in ("conv2d", "linear"):
            w64 = p[name][0].detach().double().requires_grad_(True)
            b64 = p[name][1].detach().double().requires_grad_(True)
            if op == "conv2d":
                y64 = F.conv2d(x64, w64, b64, stride=L["stride"], padding=L["pad"])
            else:
                y64 = F.linear(x64, w64, b64)
            y64.backward(dy.double())
            put(gg, "dw_f64", rows(spec, name, w64.grad.numpy()))
            put(gg, "db_f64", b64.grad.numpy())
            put(gg, "dx_f64", x64.grad.numpy())
            continue
        y64 = F.relu(x64) if op == "relu" else F.max_pool2d(x64, L["k"], L["stride"])
        y64.backward(dy.double())
        dx = x64.grad.numpy()
        assert np.array_equal(dx.astype(np.float32).astype(np.float64), dx), name  # exact in float32
        put(gg, "dx", dx.astype(np.float32))


def mnist_data(spec, data_dir, batch):
    """Fashion-MNIST: uint8 images and labels of the first K*B samples of the shuffle, and the
    float32 normalised batches."""
    images = read_idx(find(data_dir, "train-images-idx3-ubyte"), 3)
    labels = read_idx(find(data_dir, "train-labels-idx1-ubyte"), 1)
    order = shuffle_order(images.shape[0], SEED, 0)[:K_STEPS * batch]
    img_u8 = images[order].reshape(K_STEPS, batch, 28, 28)
    lab_u8 = labels[order].reshape(K_STEPS, batch)
    # float32 normalisation exactly as data_idx.h: ((float)x / 255.0f - 0.2860f) / 0.3530f
    xf = ((torch.from_numpy(img_u8.astype(np.float32)) / np.float32(255.0)) - np.float32(MEAN)) / np.float32(STD)
    xs = [xf[k].unsqueeze(1).contiguous() for k in range(K_STEPS)]
    stored = {"data/images": img_u8, "data/labels": lab_u8}
    return xs, lab_u8, stored, np.uint8


def synthetic_data(spec, batch):
    """The synthetic teacher's training split: the first K*B samples of the shuffle of train_n."""
    dim = int(np.prod(spec["input"]))
    classes = spec["layers"][-1]["out"][0]
    order = np.array(shuffle_order(spec["train_n"], SEED, 0)[:K_STEPS * batch], dtype=np.int64)
    feats = synthetic.synth_x(SEED, 0, order, dim).reshape(K_STEPS, batch, dim)
    labs = synthetic.synth_labels(SEED, 0, order, dim, classes).reshape(K_STEPS, batch)
    xs = [torch.from_numpy(feats[k].copy()) for k in range(K_STEPS)]
    stored = {"data/features": feats, "data/labels": labs, "data/indices": order.reshape(K_STEPS, batch)}
    return xs, labs, stored, np.int32


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=sorted(MODELS), default="mnist-cnn")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist", help="Fashion-MNIST (mnist-cnn only)")
    ap.add_argument("--out", default=None, help="default: golden/data/train-<model>.h5")
    ap.add_argument("--check", action="store_true",
                    help="regenerate into a temporary file and compare every dataset with the committed one")
    a = ap.parse_args()
    out = a.out or os.path.join(HERE, "data", "train-%s.h5" % a.model)
    if a.check:
        with tempfile.TemporaryDirectory() as tmp:
            fresh = os.path.join(tmp, os.path.basename(out))
            make(a, fresh)
            return check(out, fresh)
    make(a, out)
    return 0


def check(committed, fresh):
    """0: every dataset of the two files has identical dtype, shape and bytes; 1: some differ; 77:
    they differ where only PyTorch's outputs may (another torch version), the data being identical."""
    def datasets(f):
        out = {}
        f.visititems(lambda n, o: out.__setitem__(n, o) if isinstance(o, h5py.Dataset) else None)
        return out
    if not os.path.exists(committed):
        print("%s: missing" % committed)
        return 1
    problems = []
    with h5py.File(committed, "r") as a, h5py.File(fresh, "r") as b:
        da, db = datasets(a), datasets(b)
        for name in sorted(set(da) | set(db)):
            if name not in da or name not in db:
                problems.append("%s: in one file only" % name)
                continue
            x, y = da[name][()], db[name][()]
            if x.dtype != y.dtype or x.shape != y.shape or x.tobytes() != y.tobytes():
                problems.append("%s: differs" % name)
        for k in ("initial_weights_digest", "steps", "batch", "seed"):
            if str(a.attrs.get(k)) != str(b.attrs.get(k)):
                problems.append("attribute %s: committed %s, regenerated %s" % (k, a.attrs.get(k), b.attrs.get(k)))
        why = make_golden.pytorch_differs(dict(a["meta"].attrs) if "meta" in a else dict(a.attrs))
    for p in problems:
        print("%s: %s" % (committed, p))
    if not problems:
        print("%s: identical" % committed)
        return 0
    ours = [p for p in problems if not p.split(":")[0].startswith(("trajectory/", "step1_grad/", "isolation/"))]
    if why and not ours:
        print("the generator's data are identical; PyTorch's outputs cannot be compared bit for bit: %s" % why)
        return 77
    return 1


def make(a, out):
    torch.set_num_threads(1)
    spec = model_spec(a.model)
    batch = spec["batch"]
    if spec["data"] == "synthetic":
        xs, labs, stored, label_dtype = synthetic_data(spec, batch)
    else:
        xs, labs, stored, label_dtype = mnist_data(spec, a.data, batch)
    ys = [torch.from_numpy(labs[k].astype(np.int64)) for k in range(K_STEPS)]
    w0 = generator_weights(spec, SEED)
    digest = fnv1a64_fast([t for n in spec["params"] for t in w0[n]])
    loss32, g32, fin32 = sgd_run(spec, w0, xs, ys, torch.float32)
    loss64, g64, fin64 = sgd_run(spec, w0, xs, ys, torch.float64)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    tmp = out + ".tmp"
    created = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    with h5py.File(tmp, "w") as f:
        m = f.attrs
        m["format_version"] = FORMAT_VERSION
        m["kind"] = text("train")
        m["model"] = text(a.model)
        m["seed"] = SEED
        m["steps"] = K_STEPS
        m["batch"] = batch
        m["lr"] = LR
        m["momentum"] = MOMENTUM
        m["weight_decay"] = WD
        if spec["data"] == "synthetic":
            m["data"] = text("synthetic")
            m["train_n"] = np.int64(spec["train_n"])
            m["microbatch"] = np.int64(MICROBATCH)
            m["iso_images"] = np.int64(spec["n_iso"])
        else:
            m["normalise"] = text(f"((x/255) - {MEAN}) / {STD} in float32")
        m["torch_version"] = text(str(torch.__version__))
        m["python"] = text(platform.python_version())
        m["created"] = text(created)
        m["initial_weights_digest"] = text(f"{digest:016x}")
        # The generator's versions, as the inference goldens record them (make_golden.write_meta).
        meta = f.create_group("meta")
        meta.attrs["generator"] = text("golden/make_golden_train.py")
        meta.attrs["torch_version"] = text(str(torch.__version__))
        meta.attrs["torch_cpu_capability"] = text(make_golden.cpu_capability())
        meta.attrs["numpy_version"] = text(np.__version__)
        meta.attrs["h5py_version"] = text(h5py.__version__)
        meta.attrs["python_version"] = text(platform.python_version())
        meta.attrs["command_line"] = text(" ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]))
        meta.attrs["created"] = text(created)
        if "rows_attr" in spec:
            (layer, sel), = spec["rows"].items()
            put(f, spec["rows_attr"], np.array(sel, dtype=np.int64))
        else:
            for layer, sel in spec["rows"].items():
                put(f, f"rows/{layer}", np.array(sel, dtype=np.int64))
        for k, v in stored.items():
            put(f, k, v)
        put(f, "trajectory/loss_f32", np.array(loss32, dtype=np.float64))
        put(f, "trajectory/loss_f64", np.array(loss64, dtype=np.float64))
        for n in spec["params"]:
            put(f, f"trajectory/final_f32/{n}/w", rows(spec, n, fin32[n][0]))
            put(f, f"trajectory/final_f32/{n}/b", fin32[n][1])
            put(f, f"trajectory/final_f64/{n}/w", rows(spec, n, fin64[n][0]))
            put(f, f"trajectory/final_f64/{n}/b", fin64[n][1])
            put(f, f"step1_grad/{n}/w_f32", rows(spec, n, g32[n][0]))
            put(f, f"step1_grad/{n}/b_f32", g32[n][1])
            put(f, f"step1_grad/{n}/w_f64", rows(spec, n, g64[n][0]))
            put(f, f"step1_grad/{n}/b_f64", g64[n][1])
        isolation(spec, to_params(w0, torch.float32), xs[0], ys[0], f, label_dtype)
    os.replace(tmp, out)
    print(f"wrote {out} ({os.path.getsize(out)} bytes): losses f32 {loss32[0]:.6f} .. {loss32[-1]:.6f}, "
          f"max |loss32 - loss64| {max(abs(p - q) for p, q in zip(loss32, loss64)):.3g}, "
          f"initial weights digest {digest:016x}")


if __name__ == "__main__":
    sys.exit(main())
