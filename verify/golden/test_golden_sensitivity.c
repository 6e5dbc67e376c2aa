// The sensitivity of the dot-product rules (golden/README.md, 1c): for every conv/linear layer of
// both committed goldens, one weight (the one with the largest |w| sum|x| on the golden batch) is scaled by 1 + eps and
// the layer recomputed by the CPU reference; the smallest eps on a grid of quarter decades that each rule (rigorous,
// statistical) fails is printed. AlexNet conv2: the statistical rule must catch 1e-4, which the rigorous one must not.
// No false failure: eps = 0 passes both rules on every layer, and so do the GPU's own algorithms run by their CPU
// emulations (linear_split.h's split-K order, Winograd F(4x4) and F(2x2)) with the variance of their own plan.
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common.h"
#include "fivefold/layers_cpu.h"
#include "fivefold/linear_split.h"
#include "fivefold/tolerance.h"
#include "fivefold/winograd.h"

typedef struct {
    ff_model m;
    ff_golden g;
    ff_weights wt;
} fixture;

static void load(fixture *f, const char *model) {
    char path[1024];
    golden_path(path, sizeof path, model);
    assert_int_equal(ff_model_init(&f->m, model), FF_OK);
    ff_golden_options o = {.manifest = MANIFEST};
    assert_int_equal(ff_golden_load(&f->g, &f->m, path, &o), FF_OK);
    assert_int_equal(ff_weights_alloc(&f->wt, &f->m), FF_OK);
    assert_int_equal(ff_golden_weights(&f->wt, &f->g, &f->m), FF_OK);
}

static void unload(fixture *f) {
    ff_weights_free(&f->wt);
    ff_golden_free(&f->g);
}

// What verify computes for a direct (CPU chain) dot layer, with `split` chunks for linear layers.
typedef struct {
    double *A, *var, *bnd;
    size_t count;
    int64_t inner;
} layer_rules;

static void rules_init(layer_rules *r, const fixture *f, int i, int split) {
    const ff_layer *L = &f->m.layers[i];
    r->count = (size_t)(f->g.n * ff_shape_numel(L->out));
    r->A = malloc(r->count * sizeof(double));
    r->var = malloc(r->count * sizeof(double));
    r->bnd = malloc(r->count * sizeof(double));
    assert_non_null(r->A);
    assert_non_null(r->var);
    assert_non_null(r->bnd);
    const float *x = f->g.layers[i].in_f32;
    if (L->op == FF_OP_CONV2D) {
        assert_int_equal(ff_tol_chain_var_conv(r->var, r->A, x, f->wt.w[i], f->wt.b[i], L, f->g.n), FF_OK);
        r->inner = L->out.h * L->out.w;
    } else {
        ff_tol_chain_var_linear(r->var, r->A, x, f->wt.w[i], f->wt.b[i], L, split, f->g.n);
        r->inner = 1;
    }
    ff_tol_dot_bounds(r->bnd, r->A, (int64_t)r->count, L->fan_in + 1, 0.0);
}

static void rules_free(layer_rules *r) {
    free(r->A);
    free(r->var);
    free(r->bnd);
}

// Both rules as verify applies them; returns (rigorous passes) | (statistical passes) << 1.
static int judge(const fixture *f, int i, const layer_rules *r, const float *out, ff_tol_stat_result *st) {
    const ff_layer *L = &f->m.layers[i];
    ff_tol_result rig;
    ff_tol_check_dot(&rig, out, f->g.layers[i].out_f64, r->A, (int64_t)r->count, L->fan_in + 1, 0.0);
    ff_tol_check_stat(st, out, f->g.layers[i].out_f64, r->var, r->bnd, (int64_t)r->count, r->inner, L->out.c, true);
    return (rig.pass ? 1 : 0) | (st->pass ? 2 : 0);
}

// The CPU reference output of layer i with weight widx scaled by (1 + eps): only the output
// channel (feature) of that weight changes, so only it is recomputed (every element depends only
// on its own inputs: layers_cpu.h), into a copy of the unperturbed output `base`.
static void perturbed(float *out, const float *base, const fixture *f, int i, int64_t widx, double eps) {
    const ff_layer *L = &f->m.layers[i];
    const int64_t per_k = L->fan_in, k = widx / per_k, n = f->g.n;
    memcpy(out, base, (size_t)(n * ff_shape_numel(L->out)) * sizeof(float));
    float *w = malloc((size_t)per_k * sizeof(float));
    assert_non_null(w);
    memcpy(w, f->wt.w[i] + k * per_k, (size_t)per_k * sizeof(float));
    w[widx - k * per_k] = (float)((double)w[widx - k * per_k] * (1.0 + eps));
    ff_layer one = *L;  // the same layer with the one output channel k
    one.out.c = 1;
    one.out_c = 1;
    const int64_t plane = L->op == FF_OP_CONV2D ? L->out.h * L->out.w : 1;
    float *y = malloc((size_t)(n * plane) * sizeof(float));
    assert_non_null(y);
    if (L->op == FF_OP_CONV2D) {
        ff_rows rows = ff_rows_full(&one);
        ff_cpu_conv2d(y, f->g.layers[i].in_f32, w, f->wt.b[i] + k, &one, &rows, n);
    } else {
        ff_cpu_linear(y, f->g.layers[i].in_f32, w, f->wt.b[i] + k, &one, n);
    }
    for (int64_t img = 0; img < n; img++)
        memcpy(out + (img * L->out.c + k) * plane, y + img * plane, (size_t)plane * sizeof(float));
    free(y);
    free(w);
}

// The weight with the largest influence on the golden batch: |w| times the sum of |x| over what
// it multiplies (its input channel's values over every image and pixel; its input feature's over
// the images). A weight that only meets zeros (relu) would change nothing at all.
static int64_t heaviest_weight(const fixture *f, int i) {
    const ff_layer *L = &f->m.layers[i];
    const int64_t cin = L->op == FF_OP_CONV2D ? L->in.c : L->fan_in;
    const int64_t plane = L->op == FF_OP_CONV2D ? L->in.h * L->in.w : 1;
    const int64_t taps = L->op == FF_OP_CONV2D ? (int64_t)L->kh * L->kw : 1;
    double *sx = calloc((size_t)cin, sizeof(double));
    assert_non_null(sx);
    for (int64_t img = 0; img < f->g.n; img++)
        for (int64_t c = 0; c < cin; c++)
            for (int64_t p = 0; p < plane; p++)
                sx[c] += fabs((double)f->g.layers[i].in_f32[(img * cin + c) * plane + p]);
    const int64_t nw = L->out.c * L->fan_in;
    int64_t best = 0;
    double bv = -1;
    for (int64_t j = 0; j < nw; j++) {
        double v = fabs((double)f->wt.w[i][j]) * sx[(j / taps) % cin];
        if (v > bv) {
            bv = v;
            best = j;
        }
    }
    free(sx);
    return best;
}

// For every dot layer: no false failure at eps = 0; the smallest eps (grid 1e-7 * 10^(q/4)) each
// rule catches. Returns, for `probe` (a layer name), whether each rule catches `probe_eps`.
static void sweep(const char *model, const char *probe, double probe_eps, int *rig_catches, int *stat_catches) {
    fixture f;
    load(&f, model);
    for (int i = 0; i < f.m.n_layers; i++) {
        const ff_layer *L = &f.m.layers[i];
        if (L->op != FF_OP_CONV2D && L->op != FF_OP_LINEAR) continue;
        layer_rules r;
        rules_init(&r, &f, i, 1);
        float *base = malloc(r.count * sizeof(float)), *out = malloc(r.count * sizeof(float));
        assert_non_null(base);
        assert_non_null(out);
        if (L->op == FF_OP_CONV2D) {
            ff_rows rows = ff_rows_full(L);
            ff_cpu_conv2d(base, f.g.layers[i].in_f32, f.wt.w[i], f.wt.b[i], L, &rows, f.g.n);
        } else {
            ff_cpu_linear(base, f.g.layers[i].in_f32, f.wt.w[i], f.wt.b[i], L, f.g.n);
        }
        ff_tol_stat_result st;
        int v = judge(&f, i, &r, base, &st);
        printf("%s %-6s correct: rigorous pass, statistical max z %.2f (limit %.2f), rms %.3f (limit %.3f)\n", model,
               L->name, st.max_z, st.t_max, st.max_rms, st.t_rms);
        assert_int_equal(v, 3);  // no false failure
        const int64_t widx = heaviest_weight(&f, i);
        double first_rig = 0, first_stat = 0;
        for (int q = 0; q <= 28 && !(first_rig > 0 && first_stat > 0); q++) {
            double eps = 1e-7 * pow(10.0, q / 4.0);
            perturbed(out, base, &f, i, widx, eps);
            v = judge(&f, i, &r, out, &st);
            if (!(v & 1) && first_rig == 0) first_rig = eps;
            if (!(v & 2) && first_stat == 0) first_stat = eps;
        }
        printf("%s %-6s weight %lld (|w| = %.3g) x (1 + eps): smallest eps caught: rigorous %.2g, statistical %.2g\n",
               model, L->name, (long long)widx, fabsf(f.wt.w[i][widx]), first_rig, first_stat);
        // The sharper rule catches at least what the rigorous one catches.
        assert_true(first_stat > 0 && first_rig > 0 && first_stat <= first_rig);
        if (probe && !strcmp(L->name, probe)) {
            perturbed(out, base, &f, i, widx, probe_eps);
            v = judge(&f, i, &r, out, &st);
            *rig_catches = !(v & 1);
            *stat_catches = !(v & 2);
            printf("%s %s eps %g: rigorous %s, statistical %s (max z %.2f, rms %.3f of limit %.3f)\n", model, probe,
                   probe_eps, *rig_catches ? "FAIL" : "pass", *stat_catches ? "FAIL" : "pass", st.max_z, st.max_rms,
                   st.t_rms);
        }
        free(base);
        free(out);
        rules_free(&r);
    }
    unload(&f);
}

static void alexnet_conv2_1e4(void **state) {
    (void)state;
    int rig = -1, stat = -1;
    sweep("alexnet", "conv2", 1e-4, &rig, &stat);
    assert_int_equal(stat, 1);  // the statistical rule catches one conv2 weight off by 1e-4
    assert_int_equal(rig, 0);   // the rigorous bound does not
}

static void mnist_layers(void **state) {
    (void)state;
    sweep("mnist-cnn", NULL, 0, NULL, NULL);
}

// The GPU's split-K linear order (its CPU emulation, bit-identical to the GPU) with the variance of
// its own plan passes; a split the plan does not describe is still a correct order (the rigorous
// rule passes) whatever the statistical rule says, so only the plan's own split is asserted.
static void split_k_and_winograd_pass(void **state) {
    (void)state;
    const char *models[] = {"alexnet", "mnist-cnn"};
    for (int mi = 0; mi < 2; mi++) {
        fixture f;
        load(&f, models[mi]);
        for (int i = 0; i < f.m.n_layers; i++) {
            const ff_layer *L = &f.m.layers[i];
            if (L->op == FF_OP_LINEAR) {
                const int split = ff_linear_split(L->fan_in);
                layer_rules r;
                rules_init(&r, &f, i, split);
                float *out = malloc(r.count * sizeof(float));
                assert_non_null(out);
                assert_int_equal(
                    ff_linear_split_cpu(out, f.g.layers[i].in_f32, f.wt.w[i], f.wt.b[i], L, split, false, f.g.n),
                    FF_OK);
                ff_tol_stat_result st;
                int v = judge(&f, i, &r, out, &st);
                printf("%s %-6s split-K S=%d: max z %.2f (limit %.2f), rms %.3f (limit %.3f)\n", models[mi], L->name,
                       split, st.max_z, st.t_max, st.max_rms, st.t_rms);
                assert_int_equal(v, 3);
                free(out);
                rules_free(&r);
            } else if (L->op == FF_OP_CONV2D) {
                for (int mm = 2; mm <= 4; mm += 2) {
                    const int wm = ff_winograd_m(L, mm);
                    if (wm <= 0) continue;
                    const size_t count = (size_t)(f.g.n * ff_shape_numel(L->out));
                    float *u = malloc((size_t)ff_winograd_weight_floats(L, wm) * sizeof(float));
                    float *out = malloc(count * sizeof(float));
                    double *Y = malloc(count * sizeof(double)), *var = malloc(count * sizeof(double));
                    double *bnd = malloc(count * sizeof(double));
                    assert_true(u && out && Y && var && bnd);
                    assert_int_equal(ff_winograd_weights(u, f.wt.w[i], L, wm), FF_OK);
                    ff_rows rows = ff_rows_full(L);
                    assert_int_equal(
                        ff_winograd_conv_cpu(out, f.g.layers[i].in_f32, u, f.wt.b[i], L, wm, false, &rows, f.g.n),
                        FF_OK);
                    assert_int_equal(ff_winograd_absdot(Y, f.g.layers[i].in_f32, f.wt.w[i], f.wt.b[i], L, wm, f.g.n),
                                     FF_OK);
                    const int64_t nround = ff_winograd_roundings(L, wm);
                    ff_tol_winograd_var(var, Y, nround, (int64_t)count);
                    ff_tol_winograd_bounds(bnd, Y, (int64_t)count, nround, ff_winograd_ref_terms(L));
                    ff_tol_stat_result st;
                    ff_tol_check_stat(&st, out, f.g.layers[i].out_f64, var, bnd, (int64_t)count, 1, L->out.c, false);
                    printf("%s %-6s winograd-%d: max z %.3f (limit %.2f)\n", models[mi], L->name, wm, st.max_z,
                           st.t_max);
                    assert_true(st.pass);
                    free(u);
                    free(out);
                    free(Y);
                    free(var);
                    free(bnd);
                }
            }
        }
        unload(&f);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(alexnet_conv2_1e4),
        cmocka_unit_test(mnist_layers),
        cmocka_unit_test(split_k_and_winograd_pass),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
