#!/usr/bin/env python3
"""PyTorch eager (cuDNN, TF32 off) timings of the docs/ARCHITECTURE.md §2 AlexNet on this GPU, whole forward and
per layer, to set beside ff_gpu_bench's rows from the same run. A stopgap until bench/peer_pytorch.py
(the benchmark's peer) exists; same table, same fp32 setting.
usage: torch_cuda_layers.py [N ...]   (default 1 128 256)"""
import json
import sys

import torch
import torch.nn as nn

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def alexnet():
    return nn.Sequential(
        nn.Conv2d(3, 96, 11, stride=4), nn.ReLU(), nn.MaxPool2d(3, 2),
        nn.Conv2d(96, 256, 5, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2),
        nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=2.0),
        nn.Conv2d(256, 384, 3, padding=1), nn.ReLU(),
        nn.Conv2d(384, 384, 3, padding=1), nn.ReLU(),
        nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(), nn.MaxPool2d(3, 2),
        nn.Flatten(), nn.Linear(9216, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
        nn.Linear(4096, 1000), nn.Softmax(dim=1)).cuda().eval()


def time_ms(fn, reps=20):
    for _ in range(3):
        fn()
    ts = []
    for _ in range(7):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(reps):
            fn()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b) / reps)
    return sorted(ts)[3]


def main():
    ns = [int(a) for a in sys.argv[1:]] or [1, 128, 256]
    net = alexnet()
    print("torch", torch.__version__, "cudnn", torch.backends.cudnn.version(), torch.cuda.get_device_name())
    with torch.no_grad():
        for n in ns:
            x = torch.rand(n, 3, 227, 227, device="cuda") * 2 - 1
            total = time_ms(lambda: net(x))
            rows, h = [], x
            i = 0
            mods = list(net)
            while i < len(mods):
                m = mods[i]
                group = [m]
                if isinstance(m, (nn.Conv2d, nn.Linear)) and i + 1 < len(mods) and isinstance(mods[i + 1], nn.ReLU):
                    group.append(mods[i + 1])
                f = nn.Sequential(*group)
                inp = h
                t = time_ms(lambda: f(inp))
                h = f(inp)
                flops = 0
                if isinstance(m, nn.Conv2d):
                    flops = 2 * m.out_channels * m.in_channels * m.kernel_size[0] * m.kernel_size[1] * h.shape[2] * h.shape[3] * n
                elif isinstance(m, nn.Linear):
                    flops = 2 * m.in_features * m.out_features * n
                rows.append((type(m).__name__ + ("+relu" if len(group) > 1 else ""), t, flops / t * 1e-9 if t else 0))
                i += len(group)
            print(f"\nalexnet N={n} eager forward {total:.4f} ms")
            for name, t, tf in rows:
                print(f"  {name:<18} {t:9.4f} ms {tf:8.2f} TFLOP/s")
            print("JSON", json.dumps({"peer": "pytorch-eager", "model": "alexnet", "n": n, "ms": total,
                                      "tf32": False, "layers_ms": [r[1] for r in rows]}))


if __name__ == "__main__":
    main()
