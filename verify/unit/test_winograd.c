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

static ff_layer conv_layer(int64_t C, int64_t K, int64_t H, int r) {
    ff_layer L;
    memset(&L, 0, sizeof L);
    L.name = "wconv";
    L.op = FF_OP_CONV2D;
    L.out_c = K;
    L.kh = L.kw = r;
    L.stride = 1;
    L.pad = r / 2;
    L.in = (ff_shape){C, H, H};
    L.out = (ff_shape){K, H, H};
    L.n_weight = K * C * r * r;
    L.n_bias = K;
    L.fan_in = C * r * r;
    return L;
}

// float64 direct correlation: the reference the golden files hold.
static void conv_f64(double *out, const float *x, const float *w, const float *b, const ff_layer *L, int64_t n) {
    const int64_t C = L->in.c, H = L->in.h, W = L->in.w, K = L->out_c, Ho = L->out.h, Wo = L->out.w;
    const int R = L->kh;
    for (int64_t img = 0; img < n; img++)
        for (int64_t k = 0; k < K; k++)
            for (int64_t oh = 0; oh < Ho; oh++)
                for (int64_t ow = 0; ow < Wo; ow++) {
                    double s = b[k];
                    for (int64_t c = 0; c < C; c++)
                        for (int p = 0; p < R; p++)
                            for (int q = 0; q < R; q++) {
                                int64_t ih = oh - L->pad + p, iw = ow - L->pad + q;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                s += (double)w[((k * C + c) * R + p) * R + q] * x[((img * C + c) * H + ih) * W + iw];
                            }
                    out[((img * K + k) * Ho + oh) * Wo + ow] = s;
                }
}

typedef struct {
    ff_layer L;
    int m;
    int64_t n, nin, nout, nu;
    float *x, *w, *b, *u, *y;
    double *ref, *Yb, *A;
} fixture;

static void setup(fixture *f, int64_t C, int64_t K, int64_t H, int r, int m, int64_t n, uint64_t seed) {
    f->L = conv_layer(C, K, H, r);
    f->m = m;
    f->n = n;
    f->nin = n * C * H * H;
    f->nout = n * K * H * H;
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

static void teardown(fixture *f) {
    free(f->x), free(f->w), free(f->b), free(f->u), free(f->y), free(f->ref), free(f->Yb), free(f->A);
}

static void check(ff_tol_result *r, const fixture *f, const float *y) {
    ff_tol_check_winograd(r, y, f->ref, f->Yb, f->nout, ff_winograd_roundings(&f->L, f->m), f->L.fan_in + 1);
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
static void wrong_transform_one(int kr, int m, uint64_t seed, float scale) {
    fixture f;
    setup(&f, 24, 5, 11, kr, m, 2, seed);
    // transform position 5 (an interior one: it reaches all four outputs of a tile)
    const int64_t K = f.L.out_c, C = f.L.in.c;
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

// Shapes the executor relies on: AlexNet's conv2..5 get a variant, conv1 (11x11, stride 4) none.
static void variant_choice(void **state) {
    (void)state;
    ff_model m;
    assert_int_equal(ff_model_init(&m, "alexnet"), FF_OK);
    int expect[] = {0, 4, 4, 4, 4};  // default: F(4x4, 5x5) for conv2, F(4x4, 3x3) for conv3..5
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

// A CPU mode reports the direct algorithm for every layer and has no device-resident timing.
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
    for (int i = 0; i < m.n_layers; i++) assert_string_equal(ff_exec_layer_algorithm(e, i), "direct");
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
        cmocka_unit_test(variants_within_bound), cmocka_unit_test(wrong_transform_fails),
        cmocka_unit_test(band_equals_full),      cmocka_unit_test(variant_choice),
        cmocka_unit_test(cpu_mode_hooks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
