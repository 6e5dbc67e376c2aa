#!/usr/bin/env python3
"""golden/synthetic.py against core/include/fivefold/synthetic.h, bit for bit (issue 16).

    test_synthetic_port.py DUMPER SOURCE_DIR

DUMPER is verify/golden/synth_dump.c built by CMake. Checked: fmaf32 (the port's exact fmaf
through float64) against the C library's fmaf on random triples and on triples built so that the
float64 sum lands on a float32 rounding midpoint (where a plain double rounding is wrong), then
features, teacher logits and labels of both MLP models' shapes -- mlp-small (256 features, 32
classes) and mlp (4096, 512) -- on both splits, including sample indices past 2^32.
"""
import os
import subprocess
import sys

import numpy as np


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def c_fma(dumper, a, b, c):
    t = np.stack([a, b, c], axis=1).astype("<f4")
    out = subprocess.run([dumper, "fma"], input=t.tobytes(), stdout=subprocess.PIPE, check=True).stdout
    return np.frombuffer(out, dtype="<f4")


def midpoint_cases(rng, n):
    """Triples whose float64 p + c rounds onto a float32 midpoint although p + c is not one."""
    # c: odd last mantissa bit (a tie rounds away from it); p just below (or above) half an ulp of c.
    e = rng.integers(-20, 20, n)
    mant = (rng.integers(0, 1 << 22, n) * 2 + 1).astype(np.int64)  # odd 23-bit mantissa
    c = np.ldexp(1.0 + mant * 2.0**-23, e).astype(np.float32)
    k = rng.integers(1, 300, n).astype(np.float64)  # k^2 2^-46 below half a float64 ulp of c
    half_ulp = np.ldexp(1.0, e - 24)
    sgn = np.where(rng.integers(0, 2, n) == 0, 1.0, -1.0)
    a = (1.0 + k * 2.0**-23).astype(np.float32)
    b = (half_ulp * (1.0 - k * 2.0**-23) * sgn).astype(np.float32)  # p = half_ulp (1 - k^2 2^-46)
    flip = rng.integers(0, 2, n) == 0  # the other side: c negative as well
    return a, b, np.where(flip, -c, c).astype(np.float32), np.where(flip, -1.0, 1.0)


def check_fma(S, dumper):
    rng = np.random.default_rng(16)
    n = 200000
    a = rng.standard_normal(n).astype(np.float32)
    b = (rng.standard_normal(n) * np.exp2(rng.integers(-30, 30, n))).astype(np.float32)
    c = (rng.standard_normal(n) * np.exp2(rng.integers(-30, 30, n))).astype(np.float32)
    ma, mb, mc, _ = midpoint_cases(rng, n)
    a, b, c = np.concatenate([a, ma]), np.concatenate([b, mb]), np.concatenate([c, mc])
    want = c_fma(dumper, a, b, c)
    got = S.fmaf32(a, b, c)
    bad = np.flatnonzero(want.view(np.uint32) != got.view(np.uint32))
    if len(bad):
        i = bad[0]
        fail("fmaf32(%r, %r, %r) = %r, C fmaf %r (%d of %d differ)" % (a[i], b[i], c[i], got[i], want[i], len(bad), len(a)))
    naive = (a.astype(np.float64) * b + c).astype(np.float32)
    hard = int(np.sum(naive.view(np.uint32) != want.view(np.uint32)))
    if hard < n // 4:
        fail("only %d triples where double rounding differs from fmaf: the midpoint cases test nothing" % hard)
    print("fmaf32 = C fmaf on %d triples (%d where a plain double rounding is wrong)" % (len(a), hard))


def check_samples(S, dumper, seed, split, dim, classes, first, count, stride):
    out = subprocess.run([dumper, str(seed), str(split), str(dim), str(classes), str(first), str(count), str(stride)],
                         stdout=subprocess.PIPE, check=True).stdout
    if len(out) != count * (dim + 1 + classes) * 4:
        fail("dumper wrote %d bytes" % len(out))
    x = np.frombuffer(out, "<f4", count * dim).reshape(count, dim)
    y = np.frombuffer(out, "<i4", count, offset=count * dim * 4)
    z = np.frombuffer(out, "<f4", count * classes, offset=count * (dim + 1) * 4).reshape(count, classes)
    idx = first + stride * np.arange(count, dtype=np.int64)
    what = "seed %d split %d dim %d classes %d samples %d + %d k" % (seed, split, dim, classes, first, stride)
    px = S.synth_x(seed, split, idx, dim)
    if not np.array_equal(px.view(np.uint32), x.view(np.uint32)):
        fail("features differ (%s)" % what)
    pz = S.synth_logits(seed, split, idx, dim, classes)
    if not np.array_equal(pz.view(np.uint32), z.view(np.uint32)):
        fail("teacher logits differ (%s)" % what)
    py = S.synth_labels(seed, split, idx, dim, classes)
    if py.dtype != np.int32 or px.dtype != np.float32 or px.shape != (count, dim):
        fail("synth_x/synth_labels dtypes or shapes")
    if not np.array_equal(py, y):
        fail("labels differ (%s)" % what)
    used = len(np.unique(y))
    print("%s: %d features, %d logits, %d labels equal (%d classes occur)" % (what, x.size, z.size, count, used))


def main():
    dumper, src = sys.argv[1], sys.argv[2]
    sys.path.insert(0, os.path.join(src, "golden"))
    import synthetic as S

    check_fma(S, dumper)
    check_samples(S, dumper, 1, 0, 256, 32, 0, 3000, 1)  # mlp-small's training samples
    check_samples(S, dumper, 1, 1, 256, 32, 0, 1000, 1)  # and its test samples
    check_samples(S, dumper, 7, 0, 256, 32, (1 << 40) + 5, 500, 7919)  # past 2^32: i * D wraps nothing
    check_samples(S, dumper, 1, 0, 4096, 512, 0, 300, 1)  # mlp
    check_samples(S, dumper, 1, 1, 4096, 512, 123456, 300, 1013)
    print("PASS")


if __name__ == "__main__":
    main()
