#!/usr/bin/env python3
"""Generates core/device/cuda/winograd_tf.h: the Winograd F(m, r) transforms as straight-line C (one fixed
order of operations per output, shared by the CUDA kernels and the CPU emulation in the tests).

Construction (Toom-Cook, transposed): with V_g (alpha x r) and V_h (alpha x m) the evaluation
matrices of polynomials at the points p_0..p_{alpha-2} and infinity, and C = V_z^-1 the
interpolation matrix of degree alpha-1, the correlation y_i = sum_k g_k d_{i+k} is
    y = V_h^T [ (V_g g) (.) (C^T d) ]
so A^T = V_h^T, G = S V_g, B^T = S^-1 C^T with S diagonal, chosen so that B^T has integer entries
(the input and output transforms then multiply by small integers only; G's fractions are applied
to the weights once, in float64, at create). Every matrix is checked numerically below.

Usage: python3 tools/gen_winograd.py > core/device/cuda/winograd_tf.h
"""
import random
import sys
from fractions import Fraction as F
from math import gcd, lcm

VARIANTS = {  # (m, r): finite points
    (2, 3): [0, 1, -1],
    (4, 3): [0, 1, -1, 2, -2],
    (2, 5): [0, 1, -1, 2, -2],
    (4, 5): [0, 1, -1, 2, -2, F(1, 2), F(-1, 2)],
}


def evalmat(points, n):
    rows = [[F(p) ** k for k in range(n)] for p in points]
    rows.append([F(0)] * (n - 1) + [F(1)])  # infinity: leading coefficient
    return rows


def inverse(M):
    n = len(M)
    A = [row[:] + [F(int(i == j)) for j in range(n)] for i, row in enumerate(M)]
    for c in range(n):
        piv = next(r for r in range(c, n) if A[r][c] != 0)
        A[c], A[piv] = A[piv], A[c]
        pv = A[c][c]
        A[c] = [x / pv for x in A[c]]
        for r in range(n):
            if r != c and A[r][c] != 0:
                f = A[r][c]
                A[r] = [x - f * y for x, y in zip(A[r], A[c])]
    return [row[n:] for row in A]


def transpose(M):
    return [list(r) for r in zip(*M)]


def build(m, r, pts):
    alpha = m + r - 1
    assert len(pts) == alpha - 1
    Vg = evalmat(pts, r)
    Vh = evalmat(pts, m)
    C = inverse(evalmat(pts, alpha))
    BT = transpose(C)
    G = [row[:] for row in Vg]
    for j in range(alpha):  # scale row j of B^T to coprime integers, G's row j by the inverse
        den = lcm(*[x.denominator for x in BT[j] if x != 0])
        row = [x * den for x in BT[j]]
        g = 0
        for x in row:
            g = gcd(g, int(x))
        s = F(den, g)
        BT[j] = [x * s for x in BT[j]]
        G[j] = [x / s for x in G[j]]
    AT = transpose(Vh)
    for j in range(alpha):  # points like 1/2 give fractions: scale column j of A^T to integers, G's row j by the inverse
        den = lcm(*[x.denominator for x in (AT[i][j] for i in range(m))])
        for i in range(m):
            AT[i][j] *= den
        G[j] = [x / den for x in G[j]]
    # numerical check of the 2-D identity on random integers
    for _ in range(20):
        d = [[F(random.randint(-9, 9)) for _ in range(alpha)] for _ in range(alpha)]
        w = [[F(random.randint(-9, 9)) for _ in range(r)] for _ in range(r)]
        U = mm(mm(G, w), transpose(G))
        V = mm(mm(BT, d), transpose(BT))
        Y = mm(mm(AT, [[U[i][j] * V[i][j] for j in range(alpha)] for i in range(alpha)]), transpose(AT))
        for i in range(m):
            for j in range(m):
                ref = sum(w[a][b] * d[i + a][j + b] for a in range(r) for b in range(r))
                assert Y[i][j] == ref, (m, r)
    return BT, G, AT


def mm(A, B):
    return [[sum(A[i][k] * B[k][j] for k in range(len(B))) for j in range(len(B[0]))] for i in range(len(A))]


def lit(x):
    assert x.denominator == 1
    return "%d.0f" % int(x)


def emit_sum(out, dst, terms):
    """dst = sum over terms (coef, expr), ascending, zero coefficients skipped, +-1 exact."""
    first = True
    expr = None
    for c, e in terms:
        if c == 0:
            continue
        if first:
            expr = e if c == 1 else ("(-%s)" % e if c == -1 else "FF_WG_MUL(%s, %s)" % (lit(c), e))
            first = False
        else:
            if c == 1:
                expr = "FF_WG_ADD(%s, %s)" % (expr, e)
            elif c == -1:
                expr = "FF_WG_SUB(%s, %s)" % (expr, e)
            else:
                expr = "FF_WG_ADD(%s, FF_WG_MUL(%s, %s))" % (expr, lit(c), e)
    out.append("    %s = %s;" % (dst, expr if expr is not None else "0.0f"))


def emit_two_sided(out, name, Mleft, n_in_rows, n_in_cols, src):
    """dst = Mleft * X * Mleft^T with X (n_in_rows x n_in_cols) row-major in `src`."""
    a = len(Mleft)
    out.append("    float t[%d];" % (a * n_in_cols))
    for i in range(a):  # t = Mleft X: row i, column j
        for j in range(n_in_cols):
            emit_sum(out, "t[%d]" % (i * n_in_cols + j),
                     [(Mleft[i][k], "%s[%d]" % (src, k * n_in_cols + j)) for k in range(n_in_rows)])
    for i in range(a):  # dst = t Mleft^T
        for j in range(a):
            emit_sum(out, "%s[%d]" % (name, i * a + j), [(Mleft[j][k], "t[%d]" % (i * n_in_cols + k)) for k in range(n_in_cols)])


def main():
    random.seed(1)
    o = []
    o.append("// GENERATED by tools/gen_winograd.py: do not edit. Winograd F(m x m, r x r) transforms.")
    o.append("// One fixed order of operations per output element (ascending terms, zero coefficients")
    o.append("// skipped, +-1 coefficients exact): the CUDA kernels and the CPU emulation in the tests run")
    o.append("// this same code, so they give the same bits. FF_WG_FN, FF_WG_ADD/SUB/MUL are defined by")
    o.append("// the includer (core/winograd.h): plain operators in C (-ffp-contract=off), _rn")
    o.append("// intrinsics on the device (no contraction into FMAs).")
    o.append("#pragma once")
    for (m, r), pts in VARIANTS.items():
        BT, G, AT = build(m, r, pts)
        alpha = m + r - 1
        o.append("")
        o.append("// F(%dx%d, %dx%d): alpha = %d, points %s and infinity" % (m, m, r, r, alpha, pts))
        o.append("// B^T = %s" % [[str(x) for x in row] for row in BT])
        o.append("// G   = %s" % [[str(x) for x in row] for row in G])
        o.append("// A^T = %s" % [[str(x) for x in row] for row in AT])
        o.append("static const double ff_wg_G_%d_%d[%d] = {%s};" % (m, r, alpha * r, ", ".join(
            repr(float(x.numerator) / float(x.denominator)) for row in G for x in row)))
        o.append("static const double ff_wg_BT_%d_%d[%d] = {%s};" % (m, r, alpha * alpha, ", ".join(
            "%d.0" % int(x) for row in BT for x in row)))
        o.append("static const double ff_wg_AT_%d_%d[%d] = {%s};" % (m, r, m * alpha, ", ".join(
            "%d.0" % int(x) for row in AT for x in row)))
        # input transform v = B^T d B, d (alpha x alpha)
        o.append("FF_WG_FN void ff_wg_in_%d_%d(float *v, const float *d) {" % (m, r))
        emit_two_sided(o, "v", BT, alpha, alpha, "d")
        o.append("}")
        # output transform y = A^T M A, M (alpha x alpha) -> y (m x m)
        o.append("FF_WG_FN void ff_wg_out_%d_%d(float *y, const float *x) {" % (m, r))
        emit_two_sided(o, "y", AT, alpha, alpha, "x")
        o.append("}")
    sys.stdout.write("\n".join(o) + "\n")


if __name__ == "__main__":
    main()
