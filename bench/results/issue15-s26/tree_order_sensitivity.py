#!/usr/bin/env python3
"""CPU-side evidence for test_gpu_train's linear_tree_kernel_bits (session 26): on data shaped as
that test's (a 40 x 100 layer, groups of 11 images, uniform values, the same group counts), the
rows summed in another order than train.h's tree (left to right) differ from the tree's sum in
hundreds to thousands of the 4000 elements, so a kernel that added its groups in a wrong order
could not pass the test's bit-for-bit comparison. The test itself was not run against a mutant on
a GPU: no device time was left. Run: python3 tree_order_sensitivity.py (numpy)."""
import numpy as np

rng = np.random.default_rng(1)
O, I, G = 40, 100, 11


def tree(rows):  # train.h's tree as the kernel runs it: a binary counter, then the fold
    lv, done = {}, 0
    for r in rows:
        acc, t = r.copy(), 0
        while (done >> t) & 1:
            acc = (lv[t] + acc).astype(np.float32)  # older + newer
            t += 1
        lv[t], done = acc, done + 1
    v = None
    for i in range(done.bit_length()):
        if (done >> i) & 1:
            v = lv[i] if v is None else (lv[i] + v).astype(np.float32)
    return v


for ng in [4, 5, 7, 8, 9, 13, 16, 17, 31, 32, 33, 64, 100]:
    rows = []
    for _ in range(ng):
        dy = rng.uniform(-1, 1, (G, O)).astype(np.float32)
        x = rng.uniform(-1, 1, (G, I)).astype(np.float32)
        acc = np.zeros((O, I), np.float32)
        for s in range(G):
            acc = (acc + (dy[s][:, None] * x[s][None, :]).astype(np.float32)).astype(np.float32)
        rows.append(acc)
    t, seq = tree(rows), rows[0].copy()
    for r in rows[1:]:
        seq = (seq + r).astype(np.float32)
    print(ng, "groups: left-to-right order differs in", int((t != seq).sum()), "of", O * I)
