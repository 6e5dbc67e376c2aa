// The comparison rules (tolerance.h): each bound holds for correct float32 computations in several
// summation orders, and each rule fails on a wrong value, a NaN, an exact-layer difference.
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fivefold/model.h"
#include "fivefold/rng.h"
#include "fivefold/plan.h"
#include "fivefold/tolerance.h"
#include "fivefold/verify.h"

static void gamma_values(void **state) {
    (void)state;
    assert_true(fabs(ff_tol_gamma(1, 0x1p-24) - 0x1p-24 / (1 - 0x1p-24)) < 1e-30);
    assert_true(fabs(ff_tol_gamma(1000, 0x1p-24) - 1000 * 0x1p-24 / (1 - 1000 * 0x1p-24)) < 1e-22);
    assert_true(isinf(ff_tol_gamma(1 << 24, 0x1p-24)));
    assert_true(ff_tol_ulp_size(1.0) == 0x1p-23);
    assert_true(ff_tol_ulp_size(1.5) == 0x1p-23);
    assert_true(ff_tol_ulp_size(0.75) == 0x1p-24);
    assert_true(ff_tol_ulp_size(1e-40) == 0x1p-149);
}

// K-term dot products in float32, summed forward, backward and pairwise: all within the bound,
// and the bound is not absurdly loose (a one-ULP-of-A error in the reference is far outside it).
static void dot_bound_holds_for_any_order(void **state) {
    (void)state;
    enum { N = 200, K = 4097 };
    static float w[K], x[K];
    float ours_f[N], ours_b[N], ours_p[N];
    double ref[N], A[N];
    for (int t = 0; t < N; t++) {
        ff_rng_fill(w, K, 11, (uint64_t)t, 1.0f);
        ff_rng_fill(x, K, 12, (uint64_t)t, 3.0f);
        double s = 0, a = 0;
        float f = 0, b = 0;
        for (int i = 0; i < K; i++) {
            s += (double)w[i] * (double)x[i];
            a += fabs((double)w[i] * (double)x[i]);
            f += w[i] * x[i];
        }
        for (int i = K - 1; i >= 0; i--) b += w[i] * x[i];
        float part[K];
        for (int i = 0; i < K; i++) part[i] = w[i] * x[i];
        for (int len = K; len > 1; len = (len + 1) / 2)
            for (int i = 0; i < len / 2; i++) {
                part[i] = part[2 * i] + part[2 * i + 1];
                if (len % 2 && i == len / 2 - 1) part[i + 1] = part[len - 1];
            }
        ref[t] = s;
        A[t] = a;
        ours_f[t] = f;
        ours_b[t] = b;
        ours_p[t] = part[0];
    }
    ff_tol_result r;
    ff_tol_check_dot(&r, ours_f, ref, A, N, K, 0.0);
    assert_true(r.pass);
    assert_true(r.max_ratio < 1.0);
    ff_tol_check_dot(&r, ours_b, ref, A, N, K, 0.0);
    assert_true(r.pass);
    ff_tol_check_dot(&r, ours_p, ref, A, N, K, 0.0);
    assert_true(r.pass);
    assert_int_equal(r.n_fail, 0);
    // A wrong value: one element off by 1% of A fails, and is the reported worst element.
    ours_f[17] = (float)(ref[17] + 0.01 * A[17]);
    ff_tol_check_dot(&r, ours_f, ref, A, N, K, 0.0);
    assert_false(r.pass);
    assert_int_equal(r.n_fail, 1);
    assert_int_equal(r.worst, 17);
    assert_true(r.max_ratio > 1.0);
    // NaN fails.
    ours_f[17] = NAN;
    ff_tol_check_dot(&r, ours_f, ref, A, N, K, 0.0);
    assert_false(r.pass);
    assert_int_equal(r.n_nan, 1);
    assert_int_equal(r.worst, 17);
}

// Round a float to TF32 (10 explicit mantissa bits, round to nearest even), as tensor cores do.
static float tf32(float x) {
    uint32_t b;
    memcpy(&b, &x, 4);
    b = (b + 0xFFFu + ((b >> 13) & 1u)) & ~0x1FFFu;
    memcpy(&x, &b, 4);
    return x;
}

// --precision tf32: products of TF32-rounded factors summed in float32 exceed the float32 bound
// but stay within the bound with FF_TOL_TF32_PRODUCT.
static void tf32_products_need_their_term(void **state) {
    (void)state;
    enum { N = 100, K = 9 };  // few terms: the float32 bound is tight, TF32 rounding is not
    static float w[K], x[K];
    float ours[N];
    double ref[N], A[N];
    for (int t = 0; t < N; t++) {
        ff_rng_fill(w, K, 21, (uint64_t)t, 1.0f);
        ff_rng_fill(x, K, 22, (uint64_t)t, 1.0f);
        double s = 0, a = 0;
        float f = 0;
        for (int i = 0; i < K; i++) {
            s += (double)w[i] * (double)x[i];
            a += fabs((double)w[i] * (double)x[i]);
            f += tf32(w[i]) * tf32(x[i]);
        }
        ref[t] = s;
        A[t] = a;
        ours[t] = f;
    }
    ff_tol_result r;
    ff_tol_check_dot(&r, ours, ref, A, N, K, 0.0);
    assert_false(r.pass);
    ff_tol_check_dot(&r, ours, ref, A, N, K, FF_TOL_TF32_PRODUCT);
    assert_true(r.pass);
}

static void exact_rule(void **state) {
    (void)state;
    float a[4] = {1.0f, -0.0f, 3.5f, 0.0f}, b[4] = {1.0f, 0.0f, 3.5f, 0.0f};
    ff_tol_result r;
    ff_tol_check_exact(&r, a, b, 4);
    assert_true(r.pass);  // +0 == -0: 0 ULP apart
    assert_int_equal(r.max_ulp, 0);
    a[2] = nextafterf(3.5f, 4.0f);  // one ULP is a failure for an exact layer
    ff_tol_check_exact(&r, a, b, 4);
    assert_false(r.pass);
    assert_int_equal(r.worst, 2);
    assert_int_equal(r.max_ulp, 1);
    a[2] = 3.5f;
    a[3] = NAN;
    b[3] = NAN;  // NaN never equals, even NaN
    ff_tol_check_exact(&r, a, b, 4);
    assert_false(r.pass);
}

static void ulp_rule_and_softmax_bound(void **state) {
    (void)state;
    double ref[3] = {1.0, 0.25, 1e-3};
    float ours[3] = {1.0f, 0.25f, 1e-3f};
    for (int k = 0; k < 13; k++) ours[0] = nextafterf(ours[0], 2.0f);
    ff_tol_result r;
    ff_tol_check_ulp(&r, ours, ref, NULL, FF_TOL_LRN_ULP, 3);
    assert_true(r.pass);  // 13 ULP: exactly the LRN bound
    assert_int_equal(r.max_ulp, 13);
    ours[0] = nextafterf(ours[0], 2.0f);
    ff_tol_check_ulp(&r, ours, ref, NULL, FF_TOL_LRN_ULP, 3);
    assert_false(r.pass);  // 14 ULP: over
    assert_int_equal(r.worst, 0);
    // softmax: the bound grows with the class count and with the distance below the maximum.
    assert_true(ff_tol_softmax_ulp(0, 10) > 10 && ff_tol_softmax_ulp(0, 10) < 30);
    assert_true(ff_tol_softmax_ulp(5, 10) == ff_tol_softmax_ulp(0, 10) + 5);
    assert_true(ff_tol_softmax_ulp(0, 1000) > 1000);
    // A float32 softmax (expf, ascending sum, divide) of random logits stays within it.
    enum { C = 1000 };
    static float x[C], p[C];
    static double p64[C], bu[C];
    ff_rng_fill(x, C, 3, 4, 8.0f);
    float mx = x[0];
    for (int j = 1; j < C; j++) mx = x[j] > mx ? x[j] : mx;
    float s = 0;
    double s64 = 0;
    for (int j = 0; j < C; j++) {
        p[j] = expf(x[j] - mx);
        s += p[j];
        p64[j] = exp((double)x[j] - (double)mx);
        s64 += p64[j];
    }
    for (int j = 0; j < C; j++) {
        p[j] /= s;
        p64[j] /= s64;
        bu[j] = ff_tol_softmax_ulp((double)mx - (double)x[j], C);
    }
    ff_tol_check_ulp(&r, p, p64, bu, 0, C);
    assert_true(r.pass);
    p[5] *= 1.001f;  // a 0.1% error is ~8000 ULP: fails
    ff_tol_check_ulp(&r, p, p64, bu, 0, C);
    assert_false(r.pass);
    assert_int_equal(r.worst, 5);
}

static void bound_rule_and_topk_ties(void **state) {
    (void)state;
    float row[6] = {0.1f, 0.9f, 0.5f, 0.9f, 0.2f, 0.49999f};
    int64_t idx[5];
    ff_tol_topk(idx, row, 6, 5);
    // descending, lower index first among equal values
    assert_int_equal(idx[0], 1);
    assert_int_equal(idx[1], 3);
    assert_int_equal(idx[2], 2);
    assert_int_equal(idx[3], 5);
    assert_int_equal(idx[4], 4);
    double ref64[6] = {0.1, 0.9, 0.5, 0.9, 0.2, 0.49999};
    double tol[6] = {1e-6, 1e-6, 1e-6, 1e-6, 1e-6, 1e-6};
    int64_t theirs[5] = {1, 3, 5, 2, 4};  // 2 and 5 swapped: 1e-5 apart, more than 2e-6
    int tied = 0;
    assert_false(ff_tol_topk_agree(idx, theirs, 5, ref64, tol, &tied));
    for (int j = 0; j < 6; j++) tol[j] = 1e-5;  // now within tolerance: a tie, accepted and counted
    assert_true(ff_tol_topk_agree(idx, theirs, 5, ref64, tol, &tied));
    assert_int_equal(tied, 2);
    float ours[2] = {1.0f, 2.0f};
    double ref[2] = {1.0, 2.001}, bnd[2] = {0.0, 0.01};
    ff_tol_result r;
    ff_tol_check_bound(&r, ours, ref, bnd, 2);
    assert_true(r.pass);
    bnd[1] = 0.0005;
    ff_tol_check_bound(&r, ours, ref, bnd, 2);
    assert_false(r.pass);
    assert_int_equal(r.worst, 1);
}

// The float64 ingredients: conv absdot equals a direct triple loop on a small case with padding
// and stride; maxpool propagation takes the window maximum.
static void absdot_conv_matches_direct(void **state) {
    (void)state;
    ff_layer L = {.name = "c", .op = FF_OP_CONV2D, .out_c = 2, .kh = 3, .kw = 3, .stride = 2, .pad = 1};
    L.in = (ff_shape){3, 7, 6};
    L.out = (ff_shape){2, (7 + 2 - 3) / 2 + 1, (6 + 2 - 3) / 2 + 1};
    float x[2 * 3 * 7 * 6], w[2 * 3 * 9], b[2];
    ff_rng_fill(x, sizeof x / sizeof x[0], 1, 1, 1.0f);
    ff_rng_fill(w, sizeof w / sizeof w[0], 1, 2, 1.0f);
    ff_rng_fill(b, 2, 1, 3, 1.0f);
    double out[2 * 2 * 4 * 3];
    ff_tol_absdot_conv(out, x, NULL, w, b, &L, 2, 1);
    for (int n = 0; n < 2; n++)
        for (int k = 0; k < 2; k++)
            for (int oh = 0; oh < 4; oh++)
                for (int ow = 0; ow < 3; ow++) {
                    double a = fabs((double)b[k]);
                    for (int c = 0; c < 3; c++)
                        for (int r = 0; r < 3; r++)
                            for (int s = 0; s < 3; s++) {
                                int ih = oh * 2 - 1 + r, iw = ow * 2 - 1 + s;
                                if (ih < 0 || ih >= 7 || iw < 0 || iw >= 6) continue;
                                a += fabs((double)w[(k * 3 + c) * 9 + r * 3 + s]) *
                                     fabs((double)x[((n * 3 + c) * 7 + ih) * 6 + iw]);
                            }
                    assert_true(fabs(a - out[((n * 2 + k) * 4 + oh) * 3 + ow]) <= 1e-12 * a);
                }
    ff_layer P = {.name = "p", .op = FF_OP_MAXPOOL, .kh = 2, .kw = 2, .stride = 2};
    P.in = (ff_shape){1, 2, 4};
    P.out = (ff_shape){1, 1, 2};
    double d[8] = {1, 2, 3, 4, 5, 0, 0, 9}, dout[2];
    ff_tol_prop_maxpool(dout, d, &P, 1);
    assert_true(dout[0] == 5 && dout[1] == 9);
}

// ---- every rule exactly as verify applies it: an error equal to the bound passes, the next double
// ---- above fails. The bounds are written out here from golden/README.md, not taken from
// ---- tolerance.c, so a changed formula (gamma_2K for gamma_K, a lost term) fails these.
static double gam(double k, double u) {
    return k * u / (1.0 - k * u);
}

// ours = 0, ref = B: |ours - ref| is B exactly (no rounding in the check's subtraction).
static void pass_at_bound_fail_above(void (*check)(ff_tol_result *, const float *, const double *, double, void *),
                                     double B, void *ctx) {
    float ours[1] = {0.0f};
    double ref[1] = {B};
    ff_tol_result r;
    check(&r, ours, ref, B, ctx);
    assert_true(r.pass);
    assert_true(fabs(r.max_ratio - 1.0) < 1e-15);
    ref[0] = nextafter(B, INFINITY);
    check(&r, ours, ref, B, ctx);
    assert_false(r.pass);
    assert_int_equal(r.n_fail, 1);
}

typedef struct {
    double A;
    int64_t K, nround;
    double p;
} dot_ctx;

static void run_dot(ff_tol_result *r, const float *ours, const double *ref, double B, void *ctx) {
    (void)B;
    const dot_ctx *c = ctx;
    ff_tol_check_dot(r, ours, ref, &c->A, 1, c->K, c->p);
}

static void run_wino(ff_tol_result *r, const float *ours, const double *ref, double B, void *ctx) {
    (void)B;
    const dot_ctx *c = ctx;
    ff_tol_check_winograd(r, ours, ref, &c->A, 1, c->nround, c->K);
}

static void run_bound(ff_tol_result *r, const float *ours, const double *ref, double B, void *ctx) {
    (void)ctx;
    ff_tol_check_bound(r, ours, ref, &B, 1);
}

static void dot_rule_exact(void **state) {
    (void)state;
    const double u = 0x1p-24, u64 = 0x1p-53;
    const int64_t Ks[] = {10, 2401, 9217};
    for (int i = 0; i < 3; i++) {
        dot_ctx c = {.A = 3.75, .K = Ks[i], .p = 0.0};
        double K = (double)c.K;
        double B = ((gam(K, u) + gam(K, u64)) * c.A + K * 0x1p-149) * (1.0 + 0x1p-23);
        pass_at_bound_fail_above(run_dot, B, &c);
        assert_true(fabs(ff_tol_dot_bound(c.A, c.K) * (1.0 + 0x1p-23) - B) <= 0x1p-52 * B);
        // tf32: (p + gamma_K(u) (1 + p) + gamma_K(2^-53)) A + K 2^-149
        c.p = FF_TOL_TF32_PRODUCT;
        assert_true(FF_TOL_TF32_PRODUCT == (1.0 + 0x1p-11) * (1.0 + 0x1p-11) - 1.0);
        B = ((c.p + gam(K, u) * (1.0 + c.p) + gam(K, u64)) * c.A + K * 0x1p-149) * (1.0 + 0x1p-23);
        pass_at_bound_fail_above(run_dot, B, &c);
    }
}

static void winograd_rule_exact(void **state) {
    (void)state;
    const double u = 0x1p-24, u64 = 0x1p-53;
    dot_ctx c = {.A = 12.5, .K = 2305, .nround = 275};
    double B = ((gam(275, u) + gam(2305, u64)) * c.A + 275 * 0x1p-129) * (1.0 + 0x1p-23);
    pass_at_bound_fail_above(run_wino, B, &c);
}

// End to end: the rule is |y - r| <= 6 sigma with sigma from ff_tol_stat_dot (per dot layer:
// sigma^2 = (u^2 (K + 1) + p^2) / 3 A^2 + sum w^2 sigma_in^2).
static void end_to_end_rule_exact(void **state) {
    (void)state;
    const double u = 0x1p-24, A = 7.0, W2s2 = 1e-12;
    const int64_t K = 4097;
    double s;
    ff_tol_stat_dot(&s, &A, &W2s2, K, 1, 0.0);
    double want = sqrt(u * u * (double)(K + 1) / 3.0 * A * A + W2s2);
    assert_true(fabs(s - want) <= 1e-15 * want);
    pass_at_bound_fail_above(run_bound, FF_TOL_LAMBDA * s, NULL);
    assert_true(FF_TOL_LAMBDA == 6.0);
    ff_tol_stat_winograd(&s, &A, &W2s2, 275, 1);
    want = sqrt(u * u * 276.0 / 3.0 * A * A + W2s2);
    assert_true(fabs(s - want) <= 1e-15 * want);
}

// ULP rules: the softmax bound's formula, and floor(bound) ULP passes, one more fails.
static void ulp_rules_exact(void **state) {
    (void)state;
    const double u = 0x1p-24;
    const int64_t ns[] = {10, 1000};
    for (int i = 0; i < 2; i++) {
        double n = (double)ns[i], d = 3.25;
        double want = d + 2.0 + (n - 1.0) / (1.0 - (n - 1.0) * u) + n / M_E + 5.0;
        double got = ff_tol_softmax_ulp(d, ns[i]);
        assert_true(fabs(got - want) <= 1e-13 * want);
        double ref[1] = {0.01};
        float ours[1] = {0.01f};
        int k = (int)floor(want);
        // ours (float)ref moved k ULP up: passes; k + 1: fails.
        for (int j = 0; j < k; j++) ours[0] = nextafterf(ours[0], 1.0f);
        ff_tol_result r;
        ff_tol_check_ulp(&r, ours, ref, &got, 0, 1);
        assert_true(r.pass);
        assert_int_equal(r.max_ulp, k);
        ours[0] = nextafterf(ours[0], 1.0f);
        ff_tol_check_ulp(&r, ours, ref, &got, 0, 1);
        assert_false(r.pass);
    }
    assert_true(FF_TOL_LRN_ULP == 13.0);  // the lrn rule: 13 and 14 ULP in ulp_rule_and_softmax_bound
}

// The statistical rule's pieces: ulp^2, the two thresholds' formulas, the chain variance of a
// hand-computed chain, and the rule at its limits.
static void stat_rule_exact(void **state) {
    (void)state;
    assert_true(ff_tol_ulp2(1.0) == 0x1p-46);
    assert_true(ff_tol_ulp2(-1.5) == 0x1p-46);
    assert_true(ff_tol_ulp2(0.75) == 0x1p-48);
    assert_true(ff_tol_ulp2(0x1p-126) == 0x1p-298);
    assert_true(ff_tol_ulp2(1e-40) == 0x1p-298);
    assert_true(ff_tol_ulp2(0.0) == 0x1p-298);
    for (double v = 1e-30; v < 1e30; v *= 7.3) assert_true(ff_tol_ulp2(v) == ff_tol_ulp_size(v) * ff_tol_ulp_size(v));
    assert_true(FF_TOL_STAT_ALPHA == 1e-9);
    assert_true(fabs(ff_tol_stat_tmax(373248) - sqrt(2.0 * log(2.0 * 373248 / 1e-9))) < 1e-14);
    double x = log(256 / 1e-9), m = 1458;
    assert_true(fabs(ff_tol_stat_trms(1458, 256) - sqrt(1.0 + 2.0 * sqrt(x / m) + 2.0 * x / m)) < 1e-14);

    // out = b + w0 x0 + w1 x1 (+ a zero term) with b = 1, w x = 3 then 0 then 2^-30:
    //   product 3: ulp(3)^2/12; 1 + 3 = 4: U = ulp(4), h = ulp(1): U^2/12 + h^2/6
    //   product 2^-30: ulp^2/12; 4 + 2^-30: U = ulp(4), h = ulp(2^-30): U^2/12 + h^2/6
    ff_layer L = {.name = "l", .op = FF_OP_LINEAR, .out_c = 1, .fan_in = 3};
    L.in = (ff_shape){3, 1, 1};
    L.out = (ff_shape){1, 1, 1};
    float w[3] = {3.0f, 5.0f, 0x1p-15f}, xin[3] = {1.0f, 0.0f, 0x1p-15f}, b[1] = {1.0f};
    double var, A;
    ff_tol_chain_var_linear(&var, &A, xin, w, b, &L, 1, 1);
    double want = 0x1p-44 / 12 + (0x1p-42 / 12 + 0x1p-46 / 6) + 0x1p-106 / 12 + (0x1p-42 / 12 + 0x1p-106 / 6);
    assert_true(FF_TOL_STAT_MARGIN == 1.125);
    want *= 1.125;
    assert_true(var == want);
    assert_true(A == 1.0 + 3.0 + 0x1p-30);
    // split into 3 chunks of one term: p0 = 1 + 3, p1 = 0 (nothing), p2 = 2^-30 from +0 (its
    // product only), then 4 + 2^-30 (the chunk addition)
    ff_tol_chain_var_linear(&var, &A, xin, w, b, &L, 3, 1);
    want = (0x1p-44 / 12 + (0x1p-42 / 12 + 0x1p-46 / 6) + 0x1p-106 / 12 + (0x1p-42 / 12 + 0x1p-106 / 6)) * 1.125;
    assert_true(var == want);

    // The rule at its limits: one element at z = t_max passes, the next double above fails.
    enum { N = 1000 };
    static float ours[N];
    static double ref[N], v1[N], bz[N];
    for (int i = 0; i < N; i++) {
        ours[i] = 0.0f;
        ref[i] = 0.0;
        v1[i] = 1.0;
        bz[i] = 0.0;
    }
    ff_tol_stat_result r;
    double t = ff_tol_stat_tmax(N);
    ref[7] = t;
    ff_tol_check_stat(&r, ours, ref, v1, bz, N, 1, 10, false);
    assert_true(r.pass);
    assert_int_equal(r.worst, 7);
    ref[7] = nextafter(t, INFINITY);
    ff_tol_check_stat(&r, ours, ref, v1, bz, N, 1, 10, false);
    assert_false(r.pass);
    assert_int_equal(r.n_fail, 1);
    // the slack: 2^-23 of the rigorous bound comes off the error first
    bz[7] = 1.0;
    ref[7] = t + 0x1p-23;
    ff_tol_check_stat(&r, ours, ref, v1, bz, N, 1, 10, false);
    assert_true(r.pass);
    ref[7] = t + 0x1p-23 + 1e-12;  // beyond the slack by 1e-12
    ff_tol_check_stat(&r, ours, ref, v1, bz, N, 1, 10, false);
    assert_false(r.pass);
    bz[7] = 0.0;
    ref[7] = 0.0;
    // rms: group 3 of 10 (elements i % 10 == 3 with inner 1) at RMS z just under / over t_rms
    double tr = ff_tol_stat_trms(N / 10, 10);
    for (int i = 3; i < N; i += 10) ref[i] = tr * (1.0 - 1e-12);
    ff_tol_check_stat(&r, ours, ref, v1, bz, N, 1, 10, true);
    assert_true(r.pass);
    assert_int_equal(r.worst_group, 3);
    for (int i = 3; i < N; i += 10) ref[i] = tr * (1.0 + 1e-12);
    ff_tol_check_stat(&r, ours, ref, v1, bz, N, 1, 10, true);
    assert_false(r.pass);
    assert_true(r.rms_ratio > 1.0 && r.max_ratio < 1.0);  // the rms rule alone decides
    // without the rms rule the same data passes; NaN fails
    ff_tol_check_stat(&r, ours, ref, v1, bz, N, 1, 10, false);
    assert_true(r.pass);
    ours[0] = NAN;
    ff_tol_check_stat(&r, ours, ref, v1, bz, N, 1, 10, false);
    assert_false(r.pass);
}

// The variance model against real float32 chains: over many random dot products, summed as the
// CPU reference sums them (b, then products rounded, added in order), the mean of z^2 is 1 within
// its sampling error (the model is neither loose nor tight), and the rule passes.
static void stat_model_matches_float32_chains(void **state) {
    (void)state;
    enum { N = 4000, K = 200 };
    ff_layer L = {.name = "l", .op = FF_OP_LINEAR, .out_c = N, .fan_in = K};
    L.in = (ff_shape){K, 1, 1};
    L.out = (ff_shape){N, 1, 1};
    static float w[N * K], x[K], b[N], ours[N];
    static double ref[N], var[N], A[N], bnd[N];
    ff_rng_fill(w, N * K, 31, 1, 1.0f);
    ff_rng_fill(x, K, 31, 2, 1.0f);
    ff_rng_fill(b, N, 31, 3, 1.0f);
    for (int j = 0; j < N; j++) {
        volatile float acc = b[j];
        double s = b[j];
        for (int i = 0; i < K; i++) {
            volatile float t = w[j * K + i] * x[i];
            acc = acc + t;
            s += (double)w[j * K + i] * (double)x[i];
        }
        ours[j] = acc;
        ref[j] = s;  // float64 error ~2^-53 K: far below a float32 ulp
    }
    ff_tol_chain_var_linear(var, A, x, w, b, &L, 1, 1);
    double z2 = 0;
    for (int j = 0; j < N; j++) z2 += ((double)ours[j] - ref[j]) * ((double)ours[j] - ref[j]) / var[j];
    z2 *= FF_TOL_STAT_MARGIN / N;  // the model's own variance, without the margin
    printf("float32 chains: mean z^2 = %.4f over %d (1 +- %.3f expected)\n", z2, N, sqrt(2.0 / N));
    assert_true(z2 > 0.9 && z2 < 1.1);
    ff_tol_dot_bounds(bnd, A, N, K + 1, 0.0);
    ff_tol_stat_result r;
    ff_tol_check_stat(&r, ours, ref, var, bnd, N, 1, 1, true);
    assert_true(r.pass);
}

// The digest class of a configuration: serial and mpi share "cpu", the GPU modes "gpu"; the vendor
// backend and tf32 have none (judged by tolerance only).
// The digest class a run is compared with is named by its device and plan (plan.h): the CPU
// reference, the default GPU plan ("gpu", what the committed goldens record), every other GPU
// plan its own class, and none for the vendor backend (its own summation orders).
static void digest_class_selection(void **state) {
    (void)state;
    ff_model m;
    assert_int_equal(ff_model_init(&m, "alexnet"), FF_OK);
    ff_plan_options o;
    ff_plan p;
    unsetenv("FF_CUDA_CONV");
    unsetenv("FF_WINOGRAD_M");
    unsetenv("FF_CUDA_S2D");
    assert_int_equal(ff_plan_options_default(&o), FF_OK);
    assert_int_equal(ff_plan_build(&p, &m, FF_DEVICE_CPU, &o), FF_OK);
    assert_string_equal(p.digest_class, "cpu");
    assert_int_equal(ff_plan_build(&p, &m, FF_DEVICE_CUDA, &o), FF_OK);
    assert_string_equal(p.digest_class, "gpu");
    o.conv = FF_CONV_DIRECT;
    assert_int_equal(ff_plan_build(&p, &m, FF_DEVICE_CUDA, &o), FF_OK);
    assert_string_equal(p.digest_class, "gpu-direct");
    o.conv = FF_CONV_WINOGRAD;
    o.winograd_m = 2;
    assert_int_equal(ff_plan_build(&p, &m, FF_DEVICE_CUDA, &o), FF_OK);
    assert_string_equal(p.digest_class, "gpu-wg2");
    o.winograd_m = 4;
    o.s2d = false;
    assert_int_equal(ff_plan_build(&p, &m, FF_DEVICE_CUDA, &o), FF_OK);
    assert_string_equal(p.digest_class, "gpu-wg4-nos2d");
    o.s2d = true;
    o.backend = FF_BACKEND_VENDOR;
    assert_int_equal(ff_plan_build(&p, &m, FF_DEVICE_CUDA, &o), FF_OK);
    assert_string_equal(p.digest_class, "");
    o.precision = FF_PRECISION_TF32;
    assert_int_equal(ff_plan_build(&p, &m, FF_DEVICE_CUDA, &o), FF_OK);
    assert_string_equal(p.digest_class, "");
    o.backend = FF_BACKEND_OWN;  // tf32 needs the vendor backend
    assert_int_equal(ff_plan_build(&p, &m, FF_DEVICE_CUDA, &o), FF_ERR_INPUT);
    assert_non_null(strstr(ff_last_error(), "tf32"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gamma_values),
        cmocka_unit_test(dot_bound_holds_for_any_order),
        cmocka_unit_test(tf32_products_need_their_term),
        cmocka_unit_test(exact_rule),
        cmocka_unit_test(ulp_rule_and_softmax_bound),
        cmocka_unit_test(bound_rule_and_topk_ties),
        cmocka_unit_test(absdot_conv_matches_direct),
        cmocka_unit_test(dot_rule_exact),
        cmocka_unit_test(winograd_rule_exact),
        cmocka_unit_test(end_to_end_rule_exact),
        cmocka_unit_test(ulp_rules_exact),
        cmocka_unit_test(stat_rule_exact),
        cmocka_unit_test(stat_model_matches_float32_chains),
        cmocka_unit_test(digest_class_selection),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
