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
#include "fivefold/tolerance.h"

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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gamma_values),
        cmocka_unit_test(dot_bound_holds_for_any_order),
        cmocka_unit_test(tf32_products_need_their_term),
        cmocka_unit_test(exact_rule),
        cmocka_unit_test(ulp_rule_and_softmax_bound),
        cmocka_unit_test(bound_rule_and_topk_ties),
        cmocka_unit_test(absdot_conv_matches_direct),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
