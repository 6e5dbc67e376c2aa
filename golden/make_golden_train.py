#!/usr/bin/env python3
"""Training golden for fivefold's mnist-cnn (issue 7, docs/ARCHITECTURE.md §6, §9), computed by PyTorch on the CPU.

    /usr/bin/python3 golden/make_golden_train.py [--data DIR] [--out golden/data/train-mnist-cnn.h5]

K = 10 SGD steps (lr 0.01, momentum 0.9, batch B = 16) from fivefold's generator weights (seed 1) on
real Fashion-MNIST batches: the first K*B images of ff_shuffle_order(seed 1, epoch 0), stored as
uint8 with their labels. PyTorch runs the same steps twice from the same float32 weights and the
same float32 normalised images: once in float32 (what a float32 trainer computes) and once in
float64 (the reference). The C verifier (core/train/train_golden.c) checks fivefold against both.

File layout (all float tensors little-endian; fc1's weight is 128 x 9216 = 1.18 M values, so to keep
the golden small (32 MB for all goldens) its weight-shaped tensors are stored for rows 0, 32,
64, 96 only: /fc1_rows; datasets are gzip-compressed):
  /meta attrs: format_version, kind "train", model, seed, steps, batch, lr, momentum,
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

import h5py
import numpy as np
import torch
import torch.nn.functional as F

FORMAT_VERSION = 1
SEED = 1
K_STEPS = 10
BATCH = 16
N_ISO = 1
LR, MOMENTUM, WD = 0.01, 0.9, 0.0
MEAN, STD = 0.2860, 0.3530
FC1_ROWS = list(range(0, 128, 32))
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


# ---------------------------------------------------------------- model (fivefold's mnist-cnn table)
LAYERS = ["conv1", "conv2", "fc1", "fc2"]
SHAPES = {"conv1": ((32, 1, 3, 3), 9), "conv2": ((64, 32, 3, 3), 288), "fc1": ((128, 9216), 9216),
          "fc2": ((10, 128), 128)}


def generator_weights(seed):
    w = {}
    for p, name in enumerate(LAYERS):
        shape, fan_in = SHAPES[name]
        ws = np.float32(math.sqrt(6.0 / fan_in))
        bs = np.float32(1.0 / math.sqrt(fan_in))
        w[name] = (rng_fill(int(np.prod(shape)), seed, 2 * p, ws).reshape(shape),
                   rng_fill(shape[0], seed, 2 * p + 1, bs))
    return w


def forward(params, x, keep=None):
    """conv1 relu1 conv2 relu2 pool1 flatten fc1 relu3 fc2 -> logits. keep: dict receiving each
    layer's input (and output) tensors, with retain_grad, for the isolation records."""
    acts = []

    def rec(name, t_in, t_out):
        if keep is not None:
            t_out.retain_grad()
            keep[name] = (t_in, t_out)

    h = x
    y = F.conv2d(h, *params["conv1"]); rec("conv1", h, y); h = y
    y = F.relu(h); rec("relu1", h, y); h = y
    y = F.conv2d(h, *params["conv2"]); rec("conv2", h, y); h = y
    y = F.relu(h); rec("relu2", h, y); h = y
    y = F.max_pool2d(h, 2, 2); rec("pool1", h, y); h = y
    h = torch.flatten(h, 1)
    y = F.linear(h, *params["fc1"]); rec("fc1", h, y); h = y
    y = F.relu(h); rec("relu3", h, y); h = y
    y = F.linear(h, *params["fc2"]); rec("fc2", h, y)
    return y


def to_params(w, dtype):
    return {k: (torch.tensor(v[0], dtype=dtype, requires_grad=True),
                torch.tensor(v[1], dtype=dtype, requires_grad=True)) for k, v in w.items()}


def sgd_run(w0, xs, ys, dtype):
    """PyTorch's SGD (momentum, dampening 0) for K steps; returns losses, step-1 grads, final."""
    params = to_params(w0, dtype)
    flat = [t for k in LAYERS for t in params[k]]
    opt = torch.optim.SGD(flat, lr=LR, momentum=MOMENTUM, weight_decay=WD)
    losses, grad1 = [], None
    for k in range(len(xs)):
        opt.zero_grad()
        loss = F.cross_entropy(forward(params, xs[k].to(dtype)), ys[k])
        loss.backward()
        losses.append(float(loss.item()))
        if k == 0:
            grad1 = {n: (params[n][0].grad.detach().clone().numpy(), params[n][1].grad.detach().clone().numpy())
                     for n in LAYERS}
        opt.step()
    final = {n: (params[n][0].detach().numpy().copy(), params[n][1].detach().numpy().copy()) for n in LAYERS}
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


def rows(name, a):
    return a[FC1_ROWS] if name == "fc1" and a.ndim == 2 else a


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


def isolation(f32params, x16, y16, g):
    """Each layer's backward on the first N_ISO images, float32 inputs -> float64 outputs."""
    keep = {}
    p = {k: (v[0].detach().clone().requires_grad_(True), v[1].detach().clone().requires_grad_(True))
         for k, v in f32params.items()}
    x = x16[:N_ISO].clone()
    logits = forward(p, x, keep)
    logits.retain_grad()
    loss = F.cross_entropy(logits, y16[:N_ISO])
    loss.backward()
    iso = g.create_group("isolation")
    # loss layer: logits -> dz
    z64 = logits.detach().double().requires_grad_(True)
    F.cross_entropy(z64, y16[:N_ISO]).backward()
    gl = iso.create_group("loss")
    put(gl, "logits", logits.detach().numpy())
    put(gl, "labels", y16[:N_ISO].numpy().astype(np.uint8))
    put(gl, "dz_f64", z64.grad.numpy())
    for name in ["conv1", "relu1", "conv2", "relu2", "pool1", "fc1", "relu3", "fc2"]:
        t_in, t_out = keep[name]
        xin = t_in.detach()
        dy = t_out.grad.detach()
        x64 = xin.double().requires_grad_(True)
        gg = iso.create_group(name)
        put(gg, "x", xin.numpy())
        put(gg, "dy", dy.numpy())
        if name in SHAPES:
            w64 = p[name][0].detach().double().requires_grad_(True)
            b64 = p[name][1].detach().double().requires_grad_(True)
            y64 = F.conv2d(x64, w64, b64) if name.startswith("conv") else F.linear(x64, w64, b64)
            y64.backward(dy.double())
            put(gg, "dw_f64", rows(name, w64.grad.numpy()))
            put(gg, "db_f64", b64.grad.numpy())
            put(gg, "dx_f64", x64.grad.numpy())
            continue
        y64 = F.relu(x64) if name.startswith("relu") else F.max_pool2d(x64, 2, 2)
        y64.backward(dy.double())
        dx = x64.grad.numpy()
        assert np.array_equal(dx.astype(np.float32).astype(np.float64), dx), name  # exact in float32
        put(gg, "dx", dx.astype(np.float32))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--out", default=os.path.join(HERE, "data", "train-mnist-cnn.h5"))
    a = ap.parse_args()
    torch.set_num_threads(1)
    images = read_idx(find(a.data, "train-images-idx3-ubyte"), 3)
    labels = read_idx(find(a.data, "train-labels-idx1-ubyte"), 1)
    order = shuffle_order(images.shape[0], SEED, 0)[:K_STEPS * BATCH]
    img_u8 = images[order].reshape(K_STEPS, BATCH, 28, 28)
    lab_u8 = labels[order].reshape(K_STEPS, BATCH)
    # float32 normalisation exactly as data_idx.h: ((float)x / 255.0f - 0.2860f) / 0.3530f
    xf = ((torch.from_numpy(img_u8.astype(np.float32)) / np.float32(255.0)) - np.float32(MEAN)) / np.float32(STD)
    xs = [xf[k].unsqueeze(1).contiguous() for k in range(K_STEPS)]
    ys = [torch.from_numpy(lab_u8[k].astype(np.int64)) for k in range(K_STEPS)]
    w0 = generator_weights(SEED)
    digest = fnv1a64_fast([t for n in LAYERS for t in w0[n]])
    loss32, g32, fin32 = sgd_run(w0, xs, ys, torch.float32)
    loss64, g64, fin64 = sgd_run(w0, xs, ys, torch.float64)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    tmp = a.out + ".tmp"
    with h5py.File(tmp, "w") as f:
        m = f.attrs
        m["format_version"] = FORMAT_VERSION
        m["kind"] = text("train")
        m["model"] = text("mnist-cnn")
        m["seed"] = SEED
        m["steps"] = K_STEPS
        m["batch"] = BATCH
        m["lr"] = LR
        m["momentum"] = MOMENTUM
        m["weight_decay"] = WD
        m["normalise"] = text(f"((x/255) - {MEAN}) / {STD} in float32")
        m["torch_version"] = text(str(torch.__version__))
        m["python"] = text(platform.python_version())
        m["created"] = text(datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
        m["initial_weights_digest"] = text(f"{digest:016x}")
        put(f, "fc1_rows", np.array(FC1_ROWS, dtype=np.int64))
        put(f, "data/images", img_u8)
        put(f, "data/labels", lab_u8)
        put(f, "trajectory/loss_f32", np.array(loss32, dtype=np.float64))
        put(f, "trajectory/loss_f64", np.array(loss64, dtype=np.float64))
        for n in LAYERS:
            put(f, f"trajectory/final_f32/{n}/w", rows(n, fin32[n][0]))
            put(f, f"trajectory/final_f32/{n}/b", fin32[n][1])
            put(f, f"trajectory/final_f64/{n}/w", rows(n, fin64[n][0]))
            put(f, f"trajectory/final_f64/{n}/b", fin64[n][1])
            put(f, f"step1_grad/{n}/w_f32", rows(n, g32[n][0]))
            put(f, f"step1_grad/{n}/b_f32", g32[n][1])
            put(f, f"step1_grad/{n}/w_f64", rows(n, g64[n][0]))
            put(f, f"step1_grad/{n}/b_f64", g64[n][1])
        isolation(to_params(w0, torch.float32), xs[0], ys[0], f)
    os.replace(tmp, a.out)
    print(f"wrote {a.out} ({os.path.getsize(a.out)} bytes): losses f32 {loss32[0]:.6f} .. {loss32[-1]:.6f}, "
          f"max |loss32 - loss64| {max(abs(p - q) for p, q in zip(loss32, loss64)):.3g}, "
          f"initial weights digest {digest:016x}")


if __name__ == "__main__":
    main()
