#!/usr/bin/env python3
"""NCCL bandwidth on this machine through PyTorch (torchrun --nproc_per_node P nccl_probe.py):
the collectives fivefold's deterministic exchange uses (all-to-all, all-gather) against
reduce-scatter and all-reduce, for the MLP's bucket sizes. Median of 10 event-timed calls after 3
warm-ups; algbw = bytes per rank / time, busbw = algbw x nccl-tests' factor."""
import os, statistics, torch, torch.distributed as dist

dist.init_process_group("nccl")
r, P = dist.get_rank(), dist.get_world_size()
torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", r)))
dev = torch.device("cuda")


def timed(fn, reps=10):
    for _ in range(3): fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize()
        ts.append(a.elapsed_time(b))
    t = torch.tensor([statistics.median(ts)], device=dev)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


for mb in (32, 134, 480):
    n = mb * 2**20 // 4 // P * P  # floats, divisible by P
    x = torch.ones(n, device=dev)
    y = torch.empty(n, device=dev)
    part = torch.empty(n // P, device=dev)
    rows = []
    t = timed(lambda: dist.all_to_all_single(y, x)); rows.append(("all_to_all", t, (P - 1) / P))
    t = timed(lambda: dist.all_gather_into_tensor(y, part)); rows.append(("all_gather", t, (P - 1) / P))
    t = timed(lambda: dist.reduce_scatter_tensor(part, x)); rows.append(("reduce_scatter", t, (P - 1) / P))
    t = timed(lambda: dist.all_reduce(x)); rows.append(("all_reduce", t, 2 * (P - 1) / P))
    if r == 0:
        for name, ms, f in rows:
            alg = n * 4 / (ms / 1e3) / 1e9
            print(f"P={P} {mb:4d} MB {name:15s} {ms:8.3f} ms  algbw {alg:7.1f} GB/s  busbw {alg * f:7.1f} GB/s", flush=True)
dist.destroy_process_group()
