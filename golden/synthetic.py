#!/usr/bin/env python3
"""Synthetic teacher data of the MLP models, a bit-exact numpy port of core/include/fivefold/synthetic.h.

    synth_x(seed, split, idx, dim)               -> float32 (len(idx), dim)  features of samples idx
    synth_labels(seed, split, idx, dim, classes) -> int32 (len(idx),)        the teacher's labels

split is 0 (train) or 1 (test); idx are int64 sample indices. Every value is a pure function of
(seed, split, sample index), exactly as the C header computes it (read its comment for the
definition). The only operation that needs care is fmaf (one rounding of w * x + z): numpy has
none, so fmaf32() below computes it exactly through float64 -- the product of two float32 values
is exact in float64, the sum p + z is made exact by its TwoSum error term, and that exact sum is
rounded to float32 through round-to-odd in float64 (53 >= 24 + 2 bits, so the second rounding
is correct: Boldo & Melquiond, "Emulation of FMA and correctly rounded sums", 2008). The values
involved never come near float32's subnormal or overflow ranges (|w| >= 2^-23 or 0, |x| < 3.47).

This module needs only numpy; verify/golden/test_synthetic_port.py proves it against the C header.
"""
import numpy as np

GAMMA = np.uint64(0x9E3779B97F4A7C15)
TENSOR_ID_SYNTH_X = 0x53594E5458  # "SYNTX" (+ split)
TENSOR_ID_SYNTH_TEACHER = 0x53594E5454  # "SYNTT"
TAPS = 32
_CHUNK = 1024  # samples per block when computing labels (bounds memory for dim 4096, 512 classes)


def _mix(z):
    """splitmix64's finaliser on a uint64 array (wrapping multiply), = ff_mix64 / ff_synth_mix."""
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def rng_key(seed, tensor_id):
    """ff_rng_key(seed, tensor_id) as a numpy uint64."""
    with np.errstate(over="ignore"):
        t = np.array([tensor_id], dtype=np.uint64) + GAMMA
        return _mix(np.array([seed], dtype=np.uint64) ^ _mix(t))[0]


def _x_at(x_key, idx, dim, feat):
    """float32 x[i, f] for i in idx (column) and f in feat (broadcast): ff_synth_x."""
    with np.errstate(over="ignore"):
        ctr = np.asarray(idx, dtype=np.int64).astype(np.uint64) * np.uint64(dim)
        ctr = ctr + np.asarray(feat, dtype=np.int64).astype(np.uint64) + np.uint64(1)
        bits = _mix(x_key + ctr * GAMMA)
    m = np.uint64(0xFFFF)
    sc = np.float32(2.0**-16)
    u0 = (bits & m).astype(np.float32) * sc
    u1 = ((bits >> np.uint64(16)) & m).astype(np.float32) * sc
    u2 = ((bits >> np.uint64(32)) & m).astype(np.float32) * sc
    u3 = ((bits >> np.uint64(48)) & m).astype(np.float32) * sc
    return ((u0 + u1) + (u2 + u3) - np.float32(2.0)) * np.float32(1.7320508)


def synth_x(seed, split, idx, dim):
    """float32 (len(idx), dim): features of samples idx of split (0 train, 1 test)."""
    idx = np.asarray(idx, dtype=np.int64).reshape(-1)
    key = rng_key(seed, TENSOR_ID_SYNTH_X + int(split))
    return _x_at(key, idx[:, None], dim, np.arange(dim, dtype=np.int64)[None, :]).astype(np.float32)


def teacher(seed, dim, classes):
    """The sparse linear teacher: feature index int64 (classes, TAPS) and weight float32 (classes, TAPS)."""
    key = rng_key(seed, TENSOR_ID_SYNTH_TEACHER)
    with np.errstate(over="ignore"):
        ctr = np.arange(1, classes * TAPS + 1, dtype=np.uint64)
        bits = _mix(key + ctr * GAMMA)
    feat = (((bits >> np.uint64(32)) * np.uint64(dim)) >> np.uint64(32)).astype(np.int64)
    w = (bits >> np.uint64(40)).astype(np.float32) * np.float32(2.0**-24) * np.float32(2.0) - np.float32(1.0)
    return feat.reshape(classes, TAPS), w.reshape(classes, TAPS)


def fmaf32(a, b, c):
    """float32 fmaf(a, b, c) elementwise, exactly (one rounding of a * b + c); see the module doc."""
    a, b, c = (np.asarray(v, dtype=np.float32).astype(np.float64) for v in (a, b, c))
    p = a * b  # exact: 24 + 24 bits fit in 53
    s = p + c
    # TwoSum: e is the exact rounding error of s, p + c = s + e exactly.
    bp = s - c
    e = (p - bp) + (c - (s - bp))
    # Round to odd: when inexact and s's last mantissa bit is even, step s one ulp toward the exact
    # value (the bracketing float64 with an odd last bit).
    even = (s.view(np.uint64) & np.uint64(1)) == np.uint64(0)
    fix = (e != 0) & even
    s = np.where(fix, np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s)
    return s.astype(np.float32)


def synth_logits(seed, split, idx, dim, classes):
    """float32 (len(idx), classes): the teacher's logits (ff_synth_logit)."""
    idx = np.asarray(idx, dtype=np.int64).reshape(-1)
    feat, w = teacher(seed, dim, classes)
    key = rng_key(seed, TENSOR_ID_SYNTH_X + int(split))
    out = np.empty((len(idx), classes), dtype=np.float32)
    for lo in range(0, len(idx), _CHUNK):
        blk = idx[lo:lo + _CHUNK]
        x = _x_at(key, blk[:, None], dim, np.arange(dim, dtype=np.int64)[None, :])  # (n, dim)
        z = np.zeros((len(blk), classes), dtype=np.float32)
        for t in range(TAPS):
            z = fmaf32(w[None, :, t], x[:, feat[:, t]], z)
        out[lo:lo + len(blk)] = z
    return out


def synth_labels(seed, split, idx, dim, classes):
    """int32 (len(idx),): the first class with the largest teacher logit (ff_synth_label)."""
    return np.argmax(synth_logits(seed, split, idx, dim, classes), axis=1).astype(np.int32)


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--split", type=int, default=0)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--classes", type=int, default=32)
    ap.add_argument("--n", type=int, default=4)
    a = ap.parse_args()
    ix = np.arange(a.n)
    print(synth_x(a.seed, a.split, ix, a.dim)[:, :4])
    print(synth_labels(a.seed, a.split, ix, a.dim, a.classes))
