#!/usr/bin/env python3
"""Turn a PyTorch model of either fivefold architecture (its state_dict) plus an input batch into a
golden file and a weights file, so that fivefold can be checked against *your* weights:

    /usr/bin/python3 golden/export_torch.py --model mnist-cnn --state-dict mnist_cnn.pt \\
        --input batch.npy --golden my-golden.h5 --weights my-weights.h5
    fivefold verify --model mnist-cnn --golden my-golden.h5 --trust
    fivefold infer  --model mnist-cnn --weights my-weights.h5 --input my-golden.h5

State-dict keys (golden/README.md, "Users' own weights"):
  * fivefold's layer names: `<layer>.weight` / `<layer>.bias` (conv1, conv2, fc1, fc2 for
    mnist-cnn - the names PyTorch's MNIST example uses; conv1..conv5, fc6..fc8 for alexnet);
  * otherwise the weight/bias pairs are taken in the state_dict's order (e.g. `features.0`,
    `features.3`, ... `classifier.6` of an nn.Sequential) and assigned to the model's conv/linear
    layers in order.
  A `module.` prefix (DataParallel/DDP checkpoints) is removed. Every shape must equal fivefold's
  exactly (alexnet: docs/ARCHITECTURE.md §2, no channel groups - torchvision's AlexNet has other widths and does
  not fit). A checkpoint dict with a "state_dict" or "model" entry is unwrapped.
Input: .npy or .pt, float32 (N, C, H, W) (N, 1, 28, 28 for mnist-cnn; N, 3, 227, 227 for alexnet).
"""
import argparse
import os
import sys

import h5py
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_golden as mg  # noqa: E402  (the same layer code and file layout as the committed goldens)


def load_state_dict(path):
    sd = torch.load(path, map_location="cpu")
    if isinstance(sd, dict) and not any(torch.is_tensor(v) for v in sd.values()):
        for k in ("state_dict", "model", "model_state_dict"):
            if k in sd and isinstance(sd[k], dict):
                sd = sd[k]
                break
    if hasattr(sd, "state_dict") and callable(sd.state_dict):  # a whole nn.Module was saved
        sd = sd.state_dict()
    out = {}
    for k, v in sd.items():
        if torch.is_tensor(v):
            out[k[len("module."):] if k.startswith("module.") else k] = v
    return out


def map_weights(model, sd):
    """{layer: (w, b)} float32 numpy arrays with fivefold's shapes; raises ValueError explaining why not."""
    layers = [L for L in model["layers"] if "param_index" in L]
    by_name = all(L["name"] + ".weight" in sd and L["name"] + ".bias" in sd for L in layers)
    if by_name:
        pairs = [(L["name"] + ".weight", L["name"] + ".bias") for L in layers]
    else:
        keys = [k for k in sd if k.endswith(".weight") or k.endswith(".bias")]
        weights = [k for k in keys if k.endswith(".weight") and sd[k].dim() >= 2]
        pairs = []
        for k in weights:
            b = k[: -len(".weight")] + ".bias"
            if b not in sd:
                raise ValueError("%s has no bias %s: fivefold's layers all have biases" % (k, b))
            pairs.append((k, b))
        if len(pairs) != len(layers):
            raise ValueError("state_dict has %d weight tensors (%s): %s has %d conv/linear layers (%s)" % (
                len(pairs), ", ".join(p[0] for p in pairs), model["name"], len(layers), ", ".join(L["name"] for L in layers)))
    out = {}
    for L, (kw, kb) in zip(layers, pairs):
        w = sd[kw].detach().to(torch.float32).contiguous().numpy()
        b = sd[kb].detach().to(torch.float32).contiguous().numpy()
        if tuple(w.shape) != tuple(L["wshape"]) or tuple(b.shape) != (L["out_c"],):
            raise ValueError("%s/%s -> %s: shapes %s, %s; expected %s, %s" % (
                kw, kb, L["name"], tuple(w.shape), tuple(b.shape), tuple(L["wshape"]), (L["out_c"],)))
        out[L["name"]] = (w, b)
    return out, ("layer names" if by_name else "state_dict order: " + ", ".join(
        "%s->%s" % (p[0].rsplit(".", 1)[0], L["name"]) for L, p in zip(layers, pairs)))


def load_input(path, model):
    if path.endswith(".npy"):
        x = np.load(path)
    else:
        x = torch.load(path, map_location="cpu")
        x = x.detach().numpy() if torch.is_tensor(x) else np.asarray(x)
    x = np.ascontiguousarray(x, dtype=np.float32)
    want = tuple(model["input"])
    if x.ndim == 3 and want[0] == 1:
        x = x[:, None]
    if x.ndim != 4 or tuple(x.shape[1:]) != want or x.shape[0] < 1:
        raise ValueError("input has shape %s: expected (N, %d, %d, %d)" % ((x.shape,) + want))
    if not np.all(np.isfinite(x)):
        raise ValueError("input holds NaN or inf")
    return x


def write_weights_file(path, model_name, model, weights):
    """The weights file `fivefold infer --weights` reads: /weights/<layer>/w, /b (float32)."""
    with h5py.File(path, "w") as f:
        for L in model["layers"]:
            if L["name"] in weights:
                w, b = weights[L["name"]]
                mg.put(f, "weights/%s/w" % L["name"], w)
                mg.put(f, "weights/%s/b" % L["name"], b)
        f.create_group("meta")
        f["meta"].attrs["model"] = mg.text(model_name)
        f["meta"].attrs["format"] = mg.text("fivefold-weights/1")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 1)[1])
    ap.add_argument("--model", required=True, choices=sorted(mg.MODELS))
    ap.add_argument("--state-dict", required=True, help="torch.save'd state_dict (.pt/.pth)")
    ap.add_argument("--input", required=True, help="input batch, .npy or .pt, float32 (N, C, H, W)")
    ap.add_argument("--golden", required=True, help="golden file to write")
    ap.add_argument("--weights", help="weights file to write (for fivefold infer --weights)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    model = mg.derive_shapes(dict(mg.MODELS[args.model], name=args.model))
    try:
        weights, how = map_weights(model, load_state_dict(args.state_dict))
        x = load_input(args.input, model)
    except (ValueError, OSError, RuntimeError) as e:
        print("export_torch.py: error: %s" % e, file=sys.stderr)
        return 2
    print("weights mapped by %s" % how)
    mg.write_infer_golden(args.golden, args.model, model, weights, x, seed=0, store_weights=True,
                          weights_source="state_dict")
    print("wrote golden %s (%d images, %.1f MB)" % (args.golden, x.shape[0], os.path.getsize(args.golden) / 1e6))
    if args.weights:
        write_weights_file(args.weights, args.model, model, weights)
        print("wrote weights %s" % args.weights)
    print("check: fivefold verify --model %s --golden %s --trust" % (args.model, args.golden))
    return 0


if __name__ == "__main__":
    sys.exit(main())
