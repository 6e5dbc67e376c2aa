// Winograd F(m x m, r x r) on the CPU (winograd.h, the emulation the GPU must equal bit for bit) and
// its derived error rule (tolerance.h: ff_tol_winograd_bound; golden/README.md): the rule holds for
// the correct transforms with margin and fails for a deliberately wrong transform; whole tiles are
// anchored at absolute rows, so a band starting mid-tile gives the full result's bits.
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fivefold/executor.h"
#include "fivefold/layers_cpu.h"
#include "fivefold/weights.h"
#include "fivefold/model.h"
#include "fivefold/rng.h"
#include "fivefold/tolerance.h"
#include "fivefold/winograd.h"

// conv2d of C -> K channels over H x H, k x k kernel, stride and pad.
static ff_layer conv_layer_s(int64_t C, int64_t K, int64_t H, int k, int stride, int pad) {
    ff_layer L;
    memset(&L, 0, sizeof L);
    L.name = "wconv";
    L.op = FF_OP_CONV2D;
    L.out_c = K;
    L.kh = L.kw = k;
    L.stride = stride;
    L.pad = pad;
    const int64_t Ho = (H + 2 * pad - k) / stride + 1;
    L.in = (ff_shape){C, H, H};
    L.out = (ff_shape){K, Ho, Ho};
    L.n_weight = K * C * k * k;
    L.n_bias = K;
    L.fan_in = C * k * k;
    L.flops = 2 * L.n_weight * Ho * Ho;
    return L;
}

static ff_layer conv_layer(int64_t C, int64_t K, int64_t H, int r) {
    return conv_layer_s(C, K, H, r, 1, r / 2);
}

// float64 direct correlation (any stride and pad): the reference the golden files hold.
static void conv_f64(double *out, const float *x, const float *w, const float *b, const ff_layer *L, int64_t n) {
    const int64_t C = L->in.c, H = L->in.h, W = L->in.w, K = L->out_c, Ho = L->out.h, Wo = L->out.w;
    const int R = L->kh, s = L->stride;
    for (int64_t img = 0; img < n; img++)
        for (int64_t k = 0; k < K; k++)
            for (int64_t oh = 0; oh < Ho; oh++)
                for (int64_t ow = 0; ow < Wo; ow++) {
                    double sum = b[k];
                    for (int64_t c = 0; c < C; c++)
                        for (int p = 0; p < R; p++)
                            for (int q = 0; q < R; q++) {
                                int64_t ih = oh * s - L->pad + p, iw = ow * s - L->pad + q;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                sum += (double)w[((k * C + c) * R + p) * R + q] * x[((img * C + c) * H + ih) * W + iw];
                            }
                    out[((img * K + k) * Ho + oh) * Wo + ow] = sum;
                }
}

typedef struct {
    ff_layer L;
    int m;
    int64_t n, nin, nout, nu;
    float *x, *w, *b, *u, *y;
    double *ref, *Yb, *A;
} fixture;

// The fixture of layer L (any Winograd layer: stride-1 or space-to-depth).
static void setup_layer(fixture *f, ff_layer L, int m, int64_t n, uint64_t seed) {
    const int64_t K = L.out_c;
    f->L = L;
    f->m = m;
    f->n = n;
    f->nin = n * ff_shape_numel(L.in);
    f->nout = n * ff_shape_numel(L.out);
    f->nu = ff_winograd_weight_floats(&f->L, m);
    f->x = malloc((size_t)f->nin * sizeof(float));
    f->w = malloc((size_t)f->L.n_weight * sizeof(float));
    f->b = malloc((size_t)K * sizeof(float));
    f->u = malloc((size_t)f->nu * sizeof(float));
    f->y = malloc((size_t)f->nout * sizeof(float));
    f->ref = malloc((size_t)f->nout * sizeof(double));
    f->Yb = malloc((size_t)f->nout * sizeof(double));
    f->A = malloc((size_t)f->nout * sizeof(double));
    assert_non_null(f->A);
    ff_rng_fill(f->x, (size_t)f->nin, seed, 1, 1.0f);
    ff_rng_fill(f->w, (size_t)f->L.n_weight, seed, 2, 0.1f);
    ff_rng_fill(f->b, (size_t)K, seed, 3, 0.1f);
    assert_int_equal(ff_winograd_weights(f->u, f->w, &f->L, m), FF_OK);
    ff_rows rows = ff_rows_full(&f->L);
    assert_int_equal(ff_winograd_conv_cpu(f->y, f->x, f->u, f->b, &f->L, m, false, &rows, n), FF_OK);
    conv_f64(f->ref, f->x, f->w, f->b, &f->L, n);
    assert_int_equal(ff_winograd_absdot(f->Yb, f->x, f->w, f->b, &f->L, m, n), FF_OK);
    ff_tol_absdot_conv(f->A, f->x, NULL, f->w, f->b, &f->L, n, 1);
}

static void setup(fixture *f, int64_t C, int64_t K, int64_t H, int r, int m, int64_t n, uint64_t seed) {
    setup_layer(f, conv_layer(C, K, H, r), m, n, seed);
}

static void teardown(fixture *f) {
    free(f->x), free(f->w), free(f->b), free(f->u), free(f->y), free(f->ref), free(f->Yb), free(f->A);
}

static void check(ff_tol_result *r, const fixture *f, const float *y) {
    ff_tol_check_winograd(r, y, f->ref, f->Yb, f->nout, ff_winograd_roundings(&f->L, f->m),
                          ff_winograd_ref_terms(&f->L));
}

// Each variant: the rule holds, Ybar >= A everywhere (each product w x is the sum of its paths),
// and the outputs are Winograd's (close to the direct result, not equal to it bit for bit).
static void variants_within_bound(void **state) {
    (void)state;
    const int vs[4][2] = {{2, 3}, {4, 3}, {2, 5}, {4, 5}};
    for (int v = 0; v < 4; v++) {
        fixture f;
        setup(&f, 24, 5, 11, vs[v][1], vs[v][0], 2, 7 + v);
        ff_tol_result r;
        check(&r, &f, f.y);
        printf("F(%dx%d,%dx%d): max ratio %.4f of the Winograd bound, max abs %.3g\n", f.m, f.m, f.L.kh, f.L.kh,
               r.max_ratio, r.max_abs);
        assert_true(r.pass);
        assert_true(r.max_ratio > 0 && r.max_ratio < 0.5);
        for (int64_t i = 0; i < f.nout; i++) assert_true(f.Yb[i] >= f.A[i] * (1 - 1e-12));
        teardown(&f);
    }
}

// A wrong transform must fail the rule: G's row for one transform position off by 2^-8 relative
// (every U at that position scaled: what a mistyped G coefficient such as 1/6 -> 0.167 does), and
// the weights transformed as if G were scaled by 1 + 2^-10 everywhere.
// `scale`: the relative error of the wrongly transformed weights that the rule must catch. The
// guaranteed bound grows with the transform's coefficients (|B^T| up to 21 and |A^T| up to 8 for
// F(4x4, 5x5)): it catches 2^-10 for F(2x2, 3x3) but only about 2^-7 for F(4x4, 5x5) (printed below;
// golden/README.md §1b). Tighter checks of those layers are the statistical end-to-end row and
// the bit-exact GPU = CPU emulation test.
static void wrong_transform_layer(ff_layer L, int m, uint64_t seed, float scale) {
    fixture f;
    setup_layer(&f, L, m, 2, seed);
    const int kr = ff_winograd_alpha(&f.L, m) - m + 1;  // r of L' (3 for a space-to-depth layer)
    // transform position 5 (an interior one: it reaches all four outputs of a tile); u is
    // (alpha^2, K, C') with C' the channels of the stride-1 layer L' (ff_winograd_equiv).
    const int64_t K = f.L.out_c, C = f.nu / ((int64_t)ff_winograd_alpha(&f.L, m) * ff_winograd_alpha(&f.L, m) * K);
    for (int64_t i = 0; i < K * C; i++) f.u[5 * K * C + i] *= 1.0f + 0x1p-8f;
    ff_rows rows = ff_rows_full(&f.L);
    float *bad = malloc((size_t)f.nout * sizeof(float));
    assert_int_equal(ff_winograd_conv_cpu(bad, f.x, f.u, f.b, &f.L, f.m, false, &rows, f.n), FF_OK);
    ff_tol_result r;
    check(&r, &f, bad);
    printf("perturbed U: max ratio %.2f, %lld of %lld elements fail\n", r.max_ratio, (long long)r.n_fail,
           (long long)f.nout);
    assert_false(r.pass);
    // And the weights transformed as with G scaled by 1 + scale (a wrong G).
    float *w2 = malloc((size_t)f.L.n_weight * sizeof(float));
    memcpy(w2, f.w, (size_t)f.L.n_weight * sizeof(float));
    for (int64_t i = 0; i < f.L.n_weight; i++) w2[i] *= 1.0f + scale;  // what a scaled G does to U
    assert_int_equal(ff_winograd_weights(f.u, w2, &f.L, f.m), FF_OK);
    assert_int_equal(ff_winograd_conv_cpu(bad, f.x, f.u, f.b, &f.L, f.m, false, &rows, f.n), FF_OK);
    check(&r, &f, bad);
    printf("F(%dx%d,%dx%d) weights scaled by 1 + %g: max ratio %.2f\n", m, m, kr, kr, scale, r.max_ratio);
    assert_false(r.pass);
    // The correct transform again passes (the fixture is intact).
    assert_int_equal(ff_winograd_weights(f.u, f.w, &f.L, f.m), FF_OK);
    assert_int_equal(ff_winograd_conv_cpu(bad, f.x, f.u, f.b, &f.L, f.m, false, &rows, f.n), FF_OK);
    check(&r, &f, bad);
    assert_true(r.pass);
    assert_memory_equal(bad, f.y, (size_t)f.nout * sizeof(float));
    free(w2);
    free(bad);
    teardown(&f);
}

static void wrong_transform_one(int kr, int m, uint64_t seed, float scale) {
    wrong_transform_layer(conv_layer(24, 5, 11, kr), m, seed, scale);
}

static void wrong_transform_fails(void **state) {
    (void)state;
    wrong_transform_one(3, 2, 11, 0x1p-10f);  // F(2x2, 3x3)
    wrong_transform_one(5, 4, 12, 0x1p-7f);   // F(4x4, 5x5): alpha 8, the largest transform
}

// Tiles are anchored at absolute output rows: a band starting mid-tile (out_lo odd for m = 2) fed
// the rows ff_winograd_input_rows names equals the full result bit for bit; fed only the rows a
// direct conv needs (ff_layer_input_rows) it is refused.
static void band_equals_full(void **state) {
    (void)state;
    const int vs[4][2] = {{2, 3}, {4, 3}, {2, 5}, {4, 5}};
    for (int v = 0; v < 4; v++) {
        fixture f;
        setup(&f, 16, 3, 13, vs[v][1], vs[v][0], 2, 21 + v);
        const int64_t H = f.L.in.h, W = f.L.in.w, C = f.L.in.c, K = f.L.out_c, Wo = f.L.out.w;
        for (int64_t o0 = 0; o0 < f.L.out.h; o0 += 3) {
            const int64_t o1 = o0 + 5 < f.L.out.h ? o0 + 5 : f.L.out.h;
            ff_range ir = ff_winograd_input_rows(&f.L, f.m, o0, o1);
            ff_range dr = ff_layer_input_rows(&f.L, o0, o1);
            assert_true(ir.lo <= dr.lo && ir.hi >= dr.hi);
            const int64_t in_rows = ir.hi - ir.lo, out_rows = o1 - o0;
            float *xb = malloc((size_t)(f.n * C * in_rows * W) * sizeof(float));
            float *yb = malloc((size_t)(f.n * K * out_rows * Wo) * sizeof(float));
            for (int64_t p = 0; p < f.n * C; p++)
                memcpy(xb + p * in_rows * W, f.x + (p * H + ir.lo) * W, (size_t)(in_rows * W) * sizeof(float));
            ff_rows rows = {ir.lo, ir.hi, o0, o1};
            assert_int_equal(ff_winograd_conv_cpu(yb, xb, f.u, f.b, &f.L, f.m, false, &rows, f.n), FF_OK);
            for (int64_t p = 0; p < f.n * K; p++)
                assert_memory_equal(yb + p * out_rows * Wo, f.y + (p * f.L.out.h + o0) * Wo,
                                    (size_t)(out_rows * Wo) * sizeof(float));
            if (dr.lo > ir.lo || dr.hi < ir.hi) {  // the direct halo is not enough: refused
                ff_rows short_rows = {dr.lo, dr.hi, o0, o1};
                assert_int_equal(ff_winograd_conv_cpu(yb, xb, f.u, f.b, &f.L, f.m, false, &short_rows, f.n),
                                 FF_ERR_INPUT);
                ff_clear_error();
            }
            free(xb);
            free(yb);
        }
        teardown(&f);
    }
}

// Space-to-depth (winograd.h): a 11x11 stride-4 conv (C = 3 -> C' = 48; AlexNet's conv1 with
// H = 35 -> H' = 9, Ho = 7, and the real 227 -> 57 -> 55) is exactly the stride-1 3x3 conv of X' and
// W' (float64: the same sum in another order), and its Winograd emulation holds the rule, computed
// on L', against the float64 direct reference of the ORIGINAL strided conv, with Ybar >= A.
static void s2d_within_bound(void **state) {
    (void)state;
    const ff_layer small = conv_layer_s(3, 5, 35, 11, 4, 0), conv1 = conv_layer_s(3, 4, 227, 11, 4, 0);
    ff_layer E;
    assert_int_equal(ff_winograd_equiv(&E, &small), 4);
    assert_int_equal(E.in.c, 48), assert_int_equal(E.in.h, 9), assert_int_equal(E.in.w, 9);
    assert_int_equal(E.out.h, 7), assert_int_equal(E.kh, 3), assert_int_equal(E.stride, 1);
    assert_int_equal(E.pad, 0), assert_int_equal(E.fan_in, 48 * 9);
    assert_int_equal(ff_winograd_equiv(&E, &conv1), 4);
    assert_int_equal(E.in.h, 57), assert_int_equal(E.out.h, 55);
    assert_int_equal(ff_winograd_alpha(&conv1, 4), 6);
    assert_int_equal(ff_winograd_weight_floats(&conv1, 4), 36 * 4 * 48);
    assert_int_equal(ff_winograd_roundings(&conv1, 4), 2 + 12 + 48 + 12 + 1);
    assert_int_equal(ff_winograd_ref_terms(&conv1), 48 * 9 + 1);
    const struct {
        ff_layer L;
        int m;
        int64_t n;
    } cases[] = {{small, 2, 2}, {small, 4, 2}, {conv1, 4, 1}};
    for (int v = 0; v < 3; v++) {
        fixture f;
        setup_layer(&f, cases[v].L, cases[v].m, cases[v].n, 41 + v);
        // The rewrite alone (no Winograd): the float64 stride-1 3x3 conv of X' and W'.
        assert_int_equal(ff_winograd_equiv(&E, &f.L), 4);
        float *xp = malloc((size_t)(f.n * ff_shape_numel(E.in)) * sizeof(float));
        float *wp = malloc((size_t)E.n_weight * sizeof(float));
        double *ref2 = malloc((size_t)f.nout * sizeof(double));
        assert_non_null(ref2);
        ff_winograd_s2d_input(xp, f.x, &f.L, f.n);
        ff_winograd_s2d_weights(wp, f.w, &f.L);
        conv_f64(ref2, xp, wp, f.b, &E, f.n);
        double worst = 0;
        for (int64_t i = 0; i < f.nout; i++) {
            const double d = fabs(ref2[i] - f.ref[i]) / f.A[i];
            if (d > worst) worst = d;
        }
        assert_true(worst < 1e-13);
        ff_tol_result r;
        check(&r, &f, f.y);
        printf(
            "s2d %lldx%lld k11 s4 F(%dx%d,3x3): max ratio %.4f of the Winograd bound, max abs %.3g; "
            "X'W' vs x w (float64): %.2g A\n",
            (long long)f.L.in.h, (long long)f.L.in.w, f.m, f.m, r.max_ratio, r.max_abs, worst);
        assert_true(r.pass);
        assert_true(r.max_ratio > 0 && r.max_ratio < 0.5);
        for (int64_t i = 0; i < f.nout; i++) assert_true(f.Yb[i] >= f.A[i] * (1 - 1e-12));
        free(xp), free(wp), free(ref2);
        teardown(&f);
    }
}

// A wrong transform of a space-to-depth layer fails the rule as that of any other layer.
static void s2d_wrong_transform_fails(void **state) {
    (void)state;
    wrong_transform_layer(conv_layer_s(3, 5, 35, 11, 4, 0), 4, 51, 0x1p-9f);  // F(4x4, 3x3) on L'
}

// A space-to-depth layer is computed whole: for any band the geometry answers the whole input and
// every tile, and the emulation refuses a band that is not the whole layer (the GPU launcher too:
// test_gpu_layers). X' takes n*C'*H'*W' floats rounded up to 64 at the start of the workspace.
static void s2d_whole_layer_only(void **state) {
    (void)state;
    fixture f;
    setup_layer(&f, conv_layer_s(3, 2, 35, 11, 4, 0), 4, 2, 61);
    const ff_layer *L = &f.L;
    const ff_range ir = ff_winograd_input_rows(L, 4, 3, 5);
    assert_int_equal(ir.lo, 0), assert_int_equal(ir.hi, 35);
    const ff_wg_tiles tb = ff_winograd_tiles(L, 4, 3, 5), tf = ff_winograd_tiles(L, 4, 0, 7);
    assert_int_equal(tb.th_lo, 0), assert_int_equal(tb.th_hi, 2), assert_int_equal(tb.tw, 2);
    assert_memory_equal(&tb, &tf, sizeof tb);
    assert_int_equal(ff_winograd_s2d_floats(L, 2), (2 * 48 * 81 + 63) / 64 * 64);
    assert_int_equal(ff_winograd_s2d_floats(&(ff_layer){0}, 2), 0);
    assert_int_equal(ff_winograd_workspace_floats(L, 4, 3, 5, 2),
                     ff_winograd_s2d_floats(L, 2) + 36 * (2 * 4) * (48 + 2));
    assert_int_equal(ff_winograd_workspace_floats(L, 4, 3, 5, 2), ff_winograd_workspace_floats(L, 4, 0, 7, 2));
    float *y = malloc((size_t)f.nout * sizeof(float));
    const ff_rows bad_rows[] = {{0, 35, 3, 5}, {0, 35, 0, 6}, {0, 34, 0, 7}, {1, 35, 0, 7}};
    for (int k = 0; k < 4; k++) {
        assert_int_equal(ff_winograd_conv_cpu(y, f.x, f.u, f.b, L, 4, false, &bad_rows[k], f.n), FF_ERR_INPUT);
        assert_non_null(strstr(ff_last_error(), "whole layer"));
        ff_clear_error();
    }
    const ff_rows full = ff_rows_full(L);
    assert_int_equal(ff_winograd_conv_cpu(y, f.x, f.u, f.b, L, 4, false, &full, f.n), FF_OK);
    assert_memory_equal(y, f.y, (size_t)f.nout * sizeof(float));
    free(y);
    teardown(&f);
}

// The eligibility rule (ff_winograd_m): stride-1 3x3/5x5 with >= 16 channels; space-to-depth for
// stride s > 1, pad 0, ceil(k/s) == 3, C*s*s >= 16 and ceil(H/s) - 2 == Ho.
static void eligibility(void **state) {
    (void)state;
    const struct {
        ff_layer L;
        int m;
    } cases[] = {
        {conv_layer_s(3, 96, 227, 11, 4, 0), 4},  // AlexNet's conv1
        {conv_layer_s(3, 96, 227, 11, 4, 1), 0},  // pad 1
        {conv_layer_s(3, 96, 229, 11, 4, 0), 0},  // ceil(229/4) - 2 = 56 != Ho = 55
        {conv_layer_s(4, 8, 15, 5, 2, 0), 4},     // 5x5 stride 2: ceil(5/2) = 3, C' = 16
        {conv_layer_s(3, 8, 15, 5, 2, 0), 0},     // C' = 12 < 16
        {conv_layer_s(16, 8, 15, 7, 2, 0), 0},    // ceil(7/2) = 4
        {conv_layer_s(16, 8, 15, 3, 2, 0), 0},    // ceil(3/2) = 2
        {conv_layer_s(16, 8, 15, 3, 2, 1), 0},    // stride 2, pad 1
        {conv_layer_s(16, 8, 15, 3, 1, 1), 4},    // stride 1 3x3, 16 channels
        {conv_layer_s(8, 8, 15, 3, 1, 1), 0},     // stride 1, 8 channels
        {conv_layer_s(16, 8, 15, 7, 1, 3), 0},    // 7x7
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const ff_layer *L = &cases[k].L;
        assert_int_equal(ff_winograd_m(L, 0), cases[k].m);
        assert_int_equal(ff_winograd_m(L, 2), cases[k].m ? 2 : 0);
        // no Winograd formulation at all (not merely too few channels): no geometry either
        if (!ff_winograd_equiv(NULL, L)) assert_int_equal(ff_winograd_workspace_floats(L, 4, 0, L->out.h, 1), 0);
    }
    ff_layer lin;
    memset(&lin, 0, sizeof lin);
    lin.op = FF_OP_LINEAR;
    lin.stride = 1, lin.kh = lin.kw = 3;
    assert_int_equal(ff_winograd_m(&lin, 4), 0);
    // mnist-cnn: conv1 has 1 input channel (direct), conv2 32 (F(4x4, 3x3)).
    ff_model m;
    assert_int_equal(ff_model_init(&m, "mnist-cnn"), FF_OK);
    assert_int_equal(ff_winograd_m(&m.layers[ff_model_find_layer(&m, "conv1")], 0), 0);
    assert_int_equal(ff_winograd_m(&m.layers[ff_model_find_layer(&m, "conv2")], 0), 4);
}

// Shapes the executor relies on: AlexNet's conv2..5 get a variant, and conv1 (11x11, stride 4) too,
// through space-to-depth.
static void variant_choice(void **state) {
    (void)state;
    ff_model m;
    assert_int_equal(ff_model_init(&m, "alexnet"), FF_OK);
    // default: F(4x4, 3x3) on conv1's L', F(4x4, 5x5) for conv2, F(4x4, 3x3) for conv3..5
    int expect[] = {4, 4, 4, 4, 4};
    int j = 0;
    for (int i = 0; i < m.n_layers; i++) {
        const ff_layer *L = &m.layers[i];
        if (L->op != FF_OP_CONV2D) continue;
        assert_int_equal(ff_winograd_m(L, 0), expect[j]);
        if (expect[j]) assert_int_equal(ff_winograd_m(L, 2), 2);
        if (expect[j]) assert_int_equal(ff_winograd_m(L, 4), 4);
        j++;
    }
    assert_int_equal(j, 5);
}

// A CPU mode's plan runs every layer direct (class "cpu"), and it has no device-resident timing.
static void cpu_mode_hooks(void **state) {
    (void)state;
    ff_model m;
    ff_weights w;
    assert_int_equal(ff_model_init(&m, "mnist-cnn"), FF_OK);
    assert_int_equal(ff_weights_alloc(&w, &m), FF_OK);
    ff_weights_generate(&w, &m, 3);
    ff_exec_options o;
    ff_exec_options_default(&o);
    ff_executor *e = NULL;
    assert_int_equal(ff_exec_create(&e, &m, &w, &o), FF_OK);
    const ff_plan *plan = ff_exec_plan(e);
    assert_string_equal(plan->digest_class, "cpu");
    for (int i = 0; i < m.n_layers; i++) {
        assert_int_equal(plan->layer[i].alg, FF_CONV_DIRECT);
        assert_string_equal(plan->layer[i].name, "direct");
    }
    ff_exec_caps caps;
    ff_exec_caps_of(&caps, e);
    assert_false(caps.resident_timing);
    double ms[2];
    assert_int_equal(ff_exec_time_resident(e, 1, 2, ms), FF_ERR_INPUT);
    assert_non_null(strstr(ff_last_error(), "not supported"));
    ff_clear_error();
    float y[10];
    assert_int_equal(ff_exec_resident_output(e, y, 1), FF_ERR_INPUT);
    ff_clear_error();
    ff_exec_destroy(e);
    ff_weights_free(&w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(variants_within_bound),
        cmocka_unit_test(wrong_transform_fails),
        cmocka_unit_test(band_equals_full),
        cmocka_unit_test(s2d_within_bound),
        cmocka_unit_test(s2d_wrong_transform_fails),
        cmocka_unit_test(s2d_whole_layer_only),
        cmocka_unit_test(eligibility),
        cmocka_unit_test(variant_choice),
        cmocka_unit_test(cpu_mode_hooks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
