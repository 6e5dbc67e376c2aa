#!/usr/bin/env python3
"""Tests of bench/halo_bandwidth.py on made-up files: the interpolation, the table, and --check
failing exactly when a >= 4 MB halo is below 80 % of the reference (and not for a small one)."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import halo_bandwidth as hb  # noqa: E402


def bench_file(d, name, layers):
    path = os.path.join(d, name)
    with open(path, "w") as f:
        json.dump({"config": {"model": "alexnet", "mode": "direct", "split": "rows", "ranks": 2, "batch": 256},
                   "timing": {"layers": layers}}, f)
    return path


def run(args):
    r = subprocess.run([sys.executable, os.path.join(HERE, "halo_bandwidth.py")] + args, capture_output=True,
                       text=True)
    return r.returncode, r.stdout, r.stderr


def main():
    ref = [(4 << 20, 59.0), (16 << 20, 178.0), (64 << 20, 251.0)]
    assert hb.reference_at(ref, 1) == 59.0 and hb.reference_at(ref, 1 << 30) == 251.0
    mid = hb.reference_at(ref, 8 << 20)  # half-way in log size between 4 and 16 MB
    assert abs(mid - (59.0 + 178.0) / 2) < 1e-9, mid
    with tempfile.TemporaryDirectory() as d:
        nccl = os.path.join(d, "nccl.jsonl")
        with open(nccl, "w") as f:
            for b, g in ref:
                f.write("JSON " + json.dumps({"name": "nccl-sendrecv", "bytes": b, "gbs_each_way": g}) + "\n")
        # conv2: 5.3 MB in 0.03 ms = 177 GB/s against ~99 interpolated -> fine; conv3: 5 MB in 1 ms
        # = 5 GB/s -> too slow; pool: 1 MB slow but small -> not judged.
        fast = bench_file(d, "fast.json", [{"layer": "conv2", "halo_bytes": 5300000, "comm_ms": 0.03}])
        slow = bench_file(d, "slow.json", [{"layer": "conv3", "halo_bytes": 5000000, "comm_ms": 1.0},
                                            {"layer": "fc6", "halo_bytes": 0, "comm_ms": 0.5}])
        small = bench_file(d, "small.json", [{"layer": "conv5", "halo_bytes": 1000000, "comm_ms": 1.0}])
        rc, out, err = run(["--nccl", nccl, "--check", fast, small])
        assert rc == 0, (rc, out, err)
        assert "| alexnet direct rows P=2 N=256 | conv2 | 5.30 |" in out and "✓" in out, out
        assert "conv5" in out and "fc6" not in out, out
        rc, out, err = run(["--nccl", nccl, "--check", fast, slow])
        assert rc == 1 and "conv3" in err and "✗" in out, (rc, out, err)
        rc, out, err = run(["--nccl", nccl, slow])  # a report without --check does not judge
        assert rc == 0, (rc, err)
        bad = os.path.join(d, "bad.json")
        with open(bad, "w") as f:
            f.write("{not json")
        rc, out, err = run(["--nccl", nccl, bad])
        assert rc != 0 and "bad.json" in err, (rc, err)
        rc, out, err = run(["--nccl", os.path.join(d, "missing.jsonl"), fast])
        assert rc != 0 and "missing.jsonl" in err and "Traceback" not in err, (rc, err)
    print("test_halo_bandwidth: all checks passed")


if __name__ == "__main__":
    main()
