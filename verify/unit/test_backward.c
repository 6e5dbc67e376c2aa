// Every backward of layers_cpu_backward.h against a float64 re-implementation, itself checked by
// central finite differences of a float64 forward. Then the float32 result must lie within the
// derived forward-error bound of its sum:
//     |fl(sum of k products) - exact| <= gamma_k * sum |products|,  gamma_k = k u / (1 - k u),
//     u = 2^-24
// (each element's k is the number of terms it sums). Element-wise layers (relu, maxpool with
// non-overlapping windows) must be exact. Softmax cross-entropy: expf/logf/division add a few
// roundings, so gamma_{classes+6} relative to the sizes involved (see check_xent).
//
// Each check is shown to fail on a broken backward: a flipped kernel (correlation vs
// convolution), images paired with the wrong gradients, relu passing everything, maxpool routing
// to the wrong element, a forgotten 1/B scale.
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fivefold/layers_cpu.h"
#include "fivefold/layers_cpu_backward.h"
#include "fivefold/model.h"
#include "fivefold/rng.h"

static double gamma_k(double k) {
    const double u = ldexp(1.0, -24);
    return k * u / (1.0 - k * u);
}

static float *rnd(int64_t n, uint64_t id, float scale) {
    float *p = malloc((size_t)n * sizeof *p);
    ff_rng_fill(p, (size_t)n, 1234, id, scale);
    return p;
}

// ---- comparison: worst |got - ref| / bound; a bound of 0 demands exact equality
typedef struct {
    double worst;  // max |err| / bound (inf if an exact element differs)
    int64_t idx;
} cmp;

static cmp compare(const float *got, const double *ref, const double *bound, int64_t n) {
    cmp c = {0.0, -1};
    for (int64_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - ref[i]);
        double r = bound[i] > 0 ? err / bound[i] : (err > 0 ? INFINITY : 0.0);
        if (isnan(got[i])) r = INFINITY;
        if (r > c.worst) {
            c.worst = r;
            c.idx = i;
        }
    }
    return c;
}

static void report(const char *what, cmp c) {
    printf("  %-28s %s  worst %.3g of bound at %lld\n", what, c.worst <= 1.0 ? "PASS" : "FAIL", c.worst,
           (long long)c.idx);
}

// ================================================================ conv2d

static ff_layer conv_layer(int64_t C, int64_t H, int64_t W, int64_t K, int R, int S, int st, int pad) {
    ff_layer L;
    memset(&L, 0, sizeof L);
    L.name = "conv";
    L.op = FF_OP_CONV2D;
    L.out_c = K;
    L.kh = R;
    L.kw = S;
    L.stride = st;
    L.pad = pad;
    L.in = (ff_shape){C, H, W};
    L.out = (ff_shape){K, (H + 2 * pad - R) / st + 1, (W + 2 * pad - S) / st + 1};
    L.param_index = 0;
    return L;
}

// float64 forward: y[i,k,oh,ow] = sum w * x (no bias: its gradient is checked separately)
static void conv_fwd64(double *y, const double *x, const double *w, const ff_layer *L, int64_t n) {
    const int64_t C = L->in.c, H = L->in.h, W = L->in.w, K = L->out_c, R = L->kh, S = L->kw;
    const int64_t Ho = L->out.h, Wo = L->out.w;
    for (int64_t i = 0; i < n; i++)
        for (int64_t k = 0; k < K; k++)
            for (int64_t oh = 0; oh < Ho; oh++)
                for (int64_t ow = 0; ow < Wo; ow++) {
                    double acc = 0;
                    for (int64_t c = 0; c < C; c++)
                        for (int64_t r = 0; r < R; r++)
                            for (int64_t s = 0; s < S; s++) {
                                int64_t ih = oh * L->stride - L->pad + r, iw = ow * L->stride - L->pad + s;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                acc += w[((k * C + c) * R + r) * S + s] * x[((i * C + c) * H + ih) * W + iw];
                            }
                    y[((i * K + k) * Ho + oh) * Wo + ow] = acc;
                }
}

// float64 analytic gradients, with the bound sums sum|terms| and term counts.
static void conv_bwd64(double *dw, double *dwabs, double *dwk, double *dx, double *dxabs, double *dxk, double *db,
                       double *dbabs, double *dbk, const double *dy, const double *x, const double *w,
                       const ff_layer *L, int64_t n) {
    const int64_t C = L->in.c, H = L->in.h, W = L->in.w, K = L->out_c, R = L->kh, S = L->kw;
    const int64_t Ho = L->out.h, Wo = L->out.w;
    memset(dw, 0, sizeof(double) * (size_t)(K * C * R * S));
    memset(dwabs, 0, sizeof(double) * (size_t)(K * C * R * S));
    memset(dwk, 0, sizeof(double) * (size_t)(K * C * R * S));
    memset(dx, 0, sizeof(double) * (size_t)(n * C * H * W));
    memset(dxabs, 0, sizeof(double) * (size_t)(n * C * H * W));
    memset(dxk, 0, sizeof(double) * (size_t)(n * C * H * W));
    memset(db, 0, sizeof(double) * (size_t)K);
    memset(dbabs, 0, sizeof(double) * (size_t)K);
    memset(dbk, 0, sizeof(double) * (size_t)K);
    for (int64_t i = 0; i < n; i++)
        for (int64_t k = 0; k < K; k++)
            for (int64_t oh = 0; oh < Ho; oh++)
                for (int64_t ow = 0; ow < Wo; ow++) {
                    double g = dy[((i * K + k) * Ho + oh) * Wo + ow];
                    db[k] += g;
                    dbabs[k] += fabs(g);
                    dbk[k] += 1;
                    for (int64_t c = 0; c < C; c++)
                        for (int64_t r = 0; r < R; r++)
                            for (int64_t s = 0; s < S; s++) {
                                int64_t ih = oh * L->stride - L->pad + r, iw = ow * L->stride - L->pad + s;
                                int64_t wi = ((k * C + c) * R + r) * S + s;
                                dwk[wi] += 1;  // padding taps count as terms (they add 0)
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                int64_t xi = ((i * C + c) * H + ih) * W + iw;
                                dw[wi] += g * x[xi];
                                dwabs[wi] += fabs(g * x[xi]);
                                dx[xi] += g * w[wi];
                                dxabs[xi] += fabs(g * w[wi]);
                                dxk[xi] += 1;
                            }
                }
}

static double *to64(const float *p, int64_t n) {
    double *d = malloc((size_t)n * sizeof *d);
    for (int64_t i = 0; i < n; i++) d[i] = p[i];
    return d;
}

static double dot64(const double *a, const double *b, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

// Finite differences validate the float64 analytic gradient of L = <dy, conv(x, w)>.
static double fd_check_conv(const ff_layer *L, const double *x, const double *w, const double *dy, const double *dw,
                            const double *dx, int64_t n) {
    const int64_t nx = n * ff_shape_numel(L->in), nw = L->out_c * L->in.c * L->kh * L->kw;
    const int64_t ny = n * ff_shape_numel(L->out);
    double *y = malloc((size_t)ny * sizeof *y), worst = 0;
    double *wc = malloc((size_t)nw * sizeof *wc), *xc = malloc((size_t)nx * sizeof *xc);
    memcpy(wc, w, (size_t)nw * sizeof *wc);
    memcpy(xc, x, (size_t)nx * sizeof *xc);
    const double h = 1e-3;  // L is linear in each argument: central differences are exact up to rounding
    for (int64_t i = 0; i < nw; i++) {
        wc[i] = w[i] + h;
        conv_fwd64(y, xc, wc, L, n);
        double lp = dot64(dy, y, ny);
        wc[i] = w[i] - h;
        conv_fwd64(y, xc, wc, L, n);
        double lm = dot64(dy, y, ny);
        wc[i] = w[i];
        double e = fabs((lp - lm) / (2 * h) - dw[i]) / (1 + fabs(dw[i]));
        if (e > worst) worst = e;
    }
    for (int64_t i = 0; i < nx; i += 3) {
        xc[i] = x[i] + h;
        conv_fwd64(y, xc, wc, L, n);
        double lp = dot64(dy, y, ny);
        xc[i] = x[i] - h;
        conv_fwd64(y, xc, wc, L, n);
        double lm = dot64(dy, y, ny);
        xc[i] = x[i];
        double e = fabs((lp - lm) / (2 * h) - dx[i]) / (1 + fabs(dx[i]));
        if (e > worst) worst = e;
    }
    free(y);
    free(wc);
    free(xc);
    return worst;
}

typedef struct {
    cmp dw, db, dx;
    double fd;
} conv_result;

// flip: the broken variant (kernel rotated by 180 degrees: convolution instead of correlation)
static conv_result run_conv(const ff_layer *L, int64_t n, int flip) {
    const int64_t C = L->in.c, K = L->out_c, R = L->kh, S = L->kw;
    const int64_t nx = n * ff_shape_numel(L->in), nw = K * C * R * S, ny = n * ff_shape_numel(L->out);
    float *x = rnd(nx, 1, 1.0f), *w = rnd(nw, 2, 0.5f), *dy = rnd(ny, 3, 1.0f);
    for (int64_t i = 0; i < ny; i += 4) dy[i] = 0.0f;  // exact zeros, as relu makes them
    float *dw = malloc((size_t)nw * 4), *db = malloc((size_t)K * 4), *dx = malloc((size_t)nx * 4);
    float *scratch = malloc((size_t)ff_cpu_conv2d_backward_weights_scratch(L) * 4);
    ff_cpu_conv2d_backward_weights(dw, db, dy, x, L, n, scratch);
    float *wuse = w;
    float *wf = NULL;
    if (flip) {
        wf = malloc((size_t)nw * 4);
        for (int64_t kc = 0; kc < K * C; kc++)
            for (int64_t r = 0; r < R; r++)
                for (int64_t s = 0; s < S; s++) wf[(kc * R + r) * S + s] = w[(kc * R + (R - 1 - r)) * S + (S - 1 - s)];
        wuse = wf;
        float *t = malloc((size_t)nw * 4);
        memcpy(t, dw, (size_t)nw * 4);
        for (int64_t kc = 0; kc < K * C; kc++)
            for (int64_t r = 0; r < R; r++)
                for (int64_t s = 0; s < S; s++) dw[(kc * R + r) * S + s] = t[(kc * R + (R - 1 - r)) * S + (S - 1 - s)];
        free(t);
    }
    ff_cpu_conv2d_backward_data(dx, dy, wuse, L, n);
    double *x6 = to64(x, nx), *w6 = to64(w, nw), *dy6 = to64(dy, ny);
    double *rdw = malloc((size_t)nw * 8), *adw = malloc((size_t)nw * 8), *kdw = malloc((size_t)nw * 8);
    double *rdx = malloc((size_t)nx * 8), *adx = malloc((size_t)nx * 8), *kdx = malloc((size_t)nx * 8);
    double *rdb = malloc((size_t)K * 8), *adb = malloc((size_t)K * 8), *kdb = malloc((size_t)K * 8);
    conv_bwd64(rdw, adw, kdw, rdx, adx, kdx, rdb, adb, kdb, dy6, x6, w6, L, n);
    conv_result res;
    res.fd = fd_check_conv(L, x6, w6, dy6, rdw, rdx, n);
    for (int64_t i = 0; i < nw; i++) adw[i] *= gamma_k(kdw[i]);
    for (int64_t i = 0; i < nx; i++) adx[i] *= gamma_k(kdx[i]);
    for (int64_t i = 0; i < K; i++) adb[i] *= gamma_k(kdb[i]);
    res.dw = compare(dw, rdw, adw, nw);
    res.db = compare(db, rdb, adb, K);
    res.dx = compare(dx, rdx, adx, nx);
    free(x);
    free(w);
    free(dy);
    free(dw);
    free(db);
    free(dx);
    free(scratch);
    free(wf);
    free(x6);
    free(w6);
    free(dy6);
    free(rdw);
    free(adw);
    free(kdw);
    free(rdx);
    free(adx);
    free(kdx);
    free(rdb);
    free(adb);
    free(kdb);
    return res;
}

static void conv_backward_within_bounds(void **state) {
    (void)state;
    const struct {
        int64_t C, H, W, K;
        int R, S, st, pad;
    } cases[] = {
        {1, 28, 28, 4, 3, 3, 1, 0},    // mnist conv1 geometry (fewer filters)
        {5, 9, 8, 6, 3, 3, 1, 0},      // mnist conv2 style
        {3, 11, 10, 4, 3, 3, 1, 1},    // padding
        {2, 13, 13, 3, 5, 5, 2, 2},    // stride and padding (alexnet conv2 style)
        {3, 15, 15, 2, 11, 11, 4, 0},  // alexnet conv1 geometry
        {40, 6, 6, 3, 3, 3, 1, 0},     // C*R*S = 360: more than one 32-weight register block + tail
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        ff_layer L = conv_layer(cases[c].C, cases[c].H, cases[c].W, cases[c].K, cases[c].R, cases[c].S, cases[c].st,
                                cases[c].pad);
        conv_result r = run_conv(&L, 2, 0);
        printf("conv C=%lld H=%lld W=%lld K=%lld R=%d st=%d pad=%d: fd %.2e\n", (long long)L.in.c, (long long)L.in.h,
               (long long)L.in.w, (long long)L.out_c, L.kh, L.stride, L.pad, r.fd);
        report("dw", r.dw);
        report("db", r.db);
        report("dx", r.dx);
        assert_true(r.fd < 1e-8);
        assert_true(r.dw.worst <= 1.0);
        assert_true(r.db.worst <= 1.0);
        assert_true(r.dx.worst <= 1.0);
    }
}

static void conv_backward_broken_fails(void **state) {
    (void)state;
    ff_layer L = conv_layer(3, 9, 9, 4, 3, 3, 1, 1);
    conv_result r = run_conv(&L, 2, 1);
    report("flipped kernel dw (broken)", r.dw);
    report("flipped kernel dx (broken)", r.dx);
    assert_true(r.dw.worst > 1.0);
    assert_true(r.dx.worst > 1.0);
}

// The data gradient in the header's order, written out: dx = +0; for k, r, s ascending:
// dx += w[k,c,r,s] * dy[k, oh, ow] for the (oh, ow) the tap reaches. ff_cpu_conv2d_backward_data
// runs a stride-1 conv on the packed conv kernel (dy convolved with the flipped kernel), with
// every vector copy the CPU has; each must give these bits.
static void conv_data_spec(float *dx, const float *dy, const float *w, const ff_layer *L, int64_t n) {
    const int64_t K = L->out_c, C = L->in.c, H = L->in.h, W = L->in.w, R = L->kh, S = L->kw;
    const int64_t Ho = L->out.h, Wo = L->out.w, st = L->stride, pad = L->pad;
    for (int64_t i = 0; i < n; i++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t x = 0; x < W; x++) {
                    float a = 0.0f;
                    for (int64_t k = 0; k < K; k++)
                        for (int64_t r = 0; r < R; r++)
                            for (int64_t s = 0; s < S; s++) {
                                const int64_t oh = h + pad - r, ow = x + pad - s;
                                if (oh < 0 || ow < 0 || oh % st || ow % st || oh / st >= Ho || ow / st >= Wo) continue;
                                a += w[((k * C + c) * R + r) * S + s] * dy[((i * K + k) * Ho + oh / st) * Wo + ow / st];
                            }
                    dx[((i * C + c) * H + h) * W + x] = a;
                }
}

static void conv_backward_data_equals_spec(void **state) {
    (void)state;
    const struct {
        int64_t C, H, W, K;
        int R, S, st, pad;
    } cases[] = {
        {32, 26, 26, 64, 3, 3, 1, 0},  // mnist-cnn conv2
        {3, 9, 11, 17, 3, 3, 1, 1},    // 17 gradient channels, 3 dx channels (partial k blocks)
        {17, 13, 13, 9, 3, 3, 1, 1},   // 17 dx channels: a partial block of 8 and of 16
        {5, 12, 27, 6, 5, 5, 1, 2},    // conv2-like: pad 2, a 27-wide row (blocks of 14 and 13)
        {4, 7, 40, 3, 2, 3, 1, 0},     // non-square kernel, rows wider than 16
        {70, 5, 6, 3, 3, 3, 1, 1},     // 70 gradient channels: more than one packed chunk
        {2, 9, 9, 3, 1, 1, 1, 0},      // 1x1
        {3, 11, 11, 4, 3, 3, 2, 1},    // stride 2: the loop nest
    };
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        const ff_layer L = conv_layer(cases[t].C, cases[t].H, cases[t].W, cases[t].K, cases[t].R, cases[t].S,
                                      cases[t].st, cases[t].pad);
        const int64_t n = 2, nx = n * ff_shape_numel(L.in), ny = n * ff_shape_numel(L.out);
        const int64_t nw = L.out_c * L.in.c * L.kh * L.kw;
        float *dy = rnd(ny, 5 + t, 1.0f), *w = rnd(nw, 6 + t, 0.5f);
        for (int64_t i = 0; i < ny; i += 3) dy[i] = i % 2 ? -0.0f : 0.0f;  // relu's zeros, of both signs
        for (int64_t i = 0; i < nw; i += 7) w[i] = -0.0f;
        float *want = malloc((size_t)nx * 4), *got = malloc((size_t)nx * 4);
        assert_non_null(want);
        assert_non_null(got);
        conv_data_spec(want, dy, w, &L, n);
        const int was = ff_cpu_vector();
        for (int copy = 128; copy <= 512; copy *= 2) {
            if (ff_cpu_set_vector(copy) != copy) continue;  // a copy this CPU lacks
            memset(got, 0xff, (size_t)nx * 4);              // NaN: an element left unwritten shows
            ff_cpu_conv2d_backward_data(got, dy, w, &L, n);
            for (int64_t i = 0; i < nx; i++) {
                uint32_t a, b;
                memcpy(&a, &got[i], 4), memcpy(&b, &want[i], 4);
                if (a != b) {
                    print_error("case %zu, copy %d: dx[%lld] = %a, the order gives %a\n", t, copy, (long long)i,
                                (double)got[i], (double)want[i]);
                    fail();
                }
            }
        }
        ff_cpu_set_vector(was);
        free(dy), free(w), free(want), free(got);
    }
}

// ================================================================ linear

static ff_layer linear_layer(int64_t in, int64_t out) {
    ff_layer L;
    memset(&L, 0, sizeof L);
    L.name = "fc";
    L.op = FF_OP_LINEAR;
    L.out_c = out;
    L.in = (ff_shape){in, 1, 1};
    L.out = (ff_shape){out, 1, 1};
    L.param_index = 0;
    return L;
}

typedef struct {
    cmp dw, db, dx;
    double fd;
} lin_result;

// broken: images paired with the gradients of the next image (an indexing bug in the n loop)
static lin_result run_linear(int64_t I, int64_t O, int64_t n, int broken) {
    ff_layer L = linear_layer(I, O);
    float *x = rnd(n * I, 11, 1.0f), *w = rnd(O * I, 12, 0.3f), *dy = rnd(n * O, 13, 1.0f);
    for (int64_t i = 0; i < n * O; i += 3) dy[i] = 0.0f;
    float *dw = malloc((size_t)(O * I) * 4), *db = malloc((size_t)O * 4), *dx = malloc((size_t)(n * I) * 4);
    float *dyb = dy;
    if (broken) {
        dyb = malloc((size_t)(n * O) * 4);
        for (int64_t s = 0; s < n; s++) memcpy(dyb + s * O, dy + ((s + 1) % n) * O, (size_t)O * 4);
    }
    ff_cpu_linear_backward_weights(dw, db, dyb, x, &L, n);
    ff_cpu_linear_backward_data(dx, dyb, w, &L, n);
    double *rdw = calloc((size_t)(O * I), 8), *adw = calloc((size_t)(O * I), 8);
    double *rdb = calloc((size_t)O, 8), *adb = calloc((size_t)O, 8);
    double *rdx = calloc((size_t)(n * I), 8), *adx = calloc((size_t)(n * I), 8);
    for (int64_t s = 0; s < n; s++)
        for (int64_t j = 0; j < O; j++) {
            double g = dy[s * O + j];
            rdb[j] += g;
            adb[j] += fabs(g);
            for (int64_t i = 0; i < I; i++) {
                rdw[j * I + i] += g * x[s * I + i];
                adw[j * I + i] += fabs(g * x[s * I + i]);
                rdx[s * I + i] += g * w[j * I + i];
                adx[s * I + i] += fabs(g * w[j * I + i]);
            }
        }
    // finite differences of L = sum dy . (w x) in float64
    lin_result r;
    r.fd = 0;
    const double h = 1e-3;
    for (int64_t j = 0; j < O; j++)
        for (int64_t i = 0; i < I; i += 2) {
            double lp = 0, lm = 0;
            for (int64_t s = 0; s < n; s++) {
                lp += dy[s * O + j] * ((double)w[j * I + i] + h) * x[s * I + i];
                lm += dy[s * O + j] * ((double)w[j * I + i] - h) * x[s * I + i];
            }
            double e = fabs((lp - lm) / (2 * h) - rdw[j * I + i]) / (1 + fabs(rdw[j * I + i]));
            if (e > r.fd) r.fd = e;
        }
    for (int64_t i = 0; i < O * I; i++) adw[i] *= gamma_k((double)n);
    for (int64_t i = 0; i < O; i++) adb[i] *= gamma_k((double)n);
    for (int64_t i = 0; i < n * I; i++) adx[i] *= gamma_k((double)O);
    r.dw = compare(dw, rdw, adw, O * I);
    r.db = compare(db, rdb, adb, O);
    r.dx = compare(dx, rdx, adx, n * I);
    if (broken) free(dyb);
    free(x);
    free(w);
    free(dy);
    free(dw);
    free(db);
    free(dx);
    free(rdw);
    free(adw);
    free(rdb);
    free(adb);
    free(rdx);
    free(adx);
    return r;
}

static void linear_backward_within_bounds(void **state) {
    (void)state;
    const int64_t cases[][3] = {{20, 7, 3}, {9216, 16, 4}, {128, 10, 8}};
    for (size_t c = 0; c < 3; c++) {
        lin_result r = run_linear(cases[c][0], cases[c][1], cases[c][2], 0);
        printf("linear %lld->%lld n=%lld: fd %.2e\n", (long long)cases[c][0], (long long)cases[c][1],
               (long long)cases[c][2], r.fd);
        report("dw", r.dw);
        report("db", r.db);
        report("dx", r.dx);
        assert_true(r.fd < 1e-8);
        assert_true(r.dw.worst <= 1.0 && r.db.worst <= 1.0 && r.dx.worst <= 1.0);
    }
}

static void linear_backward_broken_fails(void **state) {
    (void)state;
    lin_result r = run_linear(20, 7, 3, 1);
    report("shifted images dw (broken)", r.dw);
    assert_true(r.dw.worst > 1.0);
}

// ================================================================ relu and maxpool

static void relu_backward_exact(void **state) {
    (void)state;
    const int64_t n = 1000;
    float *y = rnd(n, 21, 1.0f), *dy = rnd(n, 22, 1.0f), *dx = malloc(n * 4);
    for (int64_t i = 0; i < n; i++) y[i] = y[i] > 0 ? y[i] : 0.0f;  // a relu output
    ff_cpu_relu_backward(dx, dy, y, n);
    double *ref = malloc(n * 8), *bound = calloc(n, 8);
    for (int64_t i = 0; i < n; i++) ref[i] = y[i] > 0 ? dy[i] : 0.0;
    cmp c = compare(dx, ref, bound, n);
    report("relu", c);
    assert_true(c.worst == 0.0);
    // broken: gradient passed through everywhere
    memcpy(dx, dy, n * 4);
    c = compare(dx, ref, bound, n);
    report("relu pass-through (broken)", c);
    assert_true(c.worst > 1.0);
    free(y);
    free(dy);
    free(dx);
    free(ref);
    free(bound);
}

static ff_layer pool_layer(int64_t C, int64_t H, int64_t W, int k, int st) {
    ff_layer L;
    memset(&L, 0, sizeof L);
    L.name = "pool";
    L.op = FF_OP_MAXPOOL;
    L.kh = L.kw = k;
    L.stride = st;
    L.in = (ff_shape){C, H, W};
    L.out = (ff_shape){C, (H - k) / st + 1, (W - k) / st + 1};
    L.param_index = -1;
    return L;
}

// float64 reference by finite differences directly: d/dx_i of <dy, maxpool(x)>.
static void pool_case(int k, int st, int broken, cmp *out) {
    ff_layer L = pool_layer(3, 9, 9, k, st);
    const int64_t n = 2, nx = n * ff_shape_numel(L.in), ny = n * ff_shape_numel(L.out);
    float *x = rnd(nx, 31, 1.0f), *dy = rnd(ny, 32, 1.0f), *dx = malloc((size_t)nx * 4);
    ff_cpu_maxpool_backward(dx, dy, x, &L, n);
    if (broken) {  // route every window's gradient to its top-left element
        memset(dx, 0, (size_t)nx * 4);
        for (int64_t p = 0; p < n * 3; p++)
            for (int64_t oh = 0; oh < L.out.h; oh++)
                for (int64_t ow = 0; ow < L.out.w; ow++)
                    dx[p * 81 + oh * st * 9 + ow * st] += dy[(p * L.out.h + oh) * L.out.w + ow];
    }
    double *ref = calloc((size_t)nx, 8), *bound = calloc((size_t)nx, 8);
    const double h = 1e-7;  // smaller than any gap between distinct random values here
    for (int64_t i = 0; i < nx; i++) {
        double lp = 0, lm = 0;
        for (int sign = 0; sign < 2; sign++) {
            double acc = 0;
            for (int64_t p = 0; p < n * 3; p++)
                for (int64_t oh = 0; oh < L.out.h; oh++)
                    for (int64_t ow = 0; ow < L.out.w; ow++) {
                        double m = -INFINITY;
                        for (int r = 0; r < k; r++)
                            for (int s = 0; s < k; s++) {
                                int64_t xi = p * 81 + (oh * st + r) * 9 + ow * st + s;
                                double v = x[xi] + (xi == i ? (sign ? -h : h) : 0.0);
                                if (v > m) m = v;
                            }
                        acc += dy[(p * L.out.h + oh) * L.out.w + ow] * m;
                    }
            if (sign)
                lm = acc;
            else
                lp = acc;
        }
        ref[i] = (lp - lm) / (2 * h);
        // The sums of at most ceil(k/st)^2 dy terms reach one element: float rounding of that sum,
        // plus the finite difference's own rounding (|L| * 2^-52 / h).
        double sabs = 0;
        for (int64_t j = 0; j < ny; j++) sabs += fabs(dy[j]);
        bound[i] = gamma_k(4.0) * (fabs(ref[i]) + 1e-30) + sabs * ldexp(1.0, -52) / h * 4;
    }
    *out = compare(dx, ref, bound, nx);
    free(x);
    free(dy);
    free(dx);
    free(ref);
    free(bound);
}

static void maxpool_backward_matches_finite_differences(void **state) {
    (void)state;
    cmp c;
    pool_case(2, 2, 0, &c);
    report("maxpool 2x2 s2", c);
    assert_true(c.worst <= 1.0);
    pool_case(3, 2, 0, &c);
    report("maxpool 3x3 s2 (overlapping)", c);
    assert_true(c.worst <= 1.0);
    pool_case(2, 2, 1, &c);
    report("maxpool top-left (broken)", c);
    assert_true(c.worst > 1.0);
}

static void maxpool_ties_go_to_the_first_maximum(void **state) {
    (void)state;
    ff_layer L = pool_layer(1, 2, 2, 2, 2);
    float x[4] = {1.0f, 3.0f, 3.0f, 2.0f}, dy[1] = {5.0f}, dx[4];
    ff_cpu_maxpool_backward(dx, dy, x, &L, 1);
    assert_true(dx[0] == 0.0f && dx[1] == 5.0f && dx[2] == 0.0f && dx[3] == 0.0f);
}

// ================================================================ softmax cross-entropy

static void xent_case(float scale_used, cmp *cz, cmp *cl, double *fd) {
    const int64_t n = 5, C = 10;
    float *z = rnd(n * C, 41, 4.0f), *dz = malloc((size_t)(n * C) * 4), loss[5];
    int32_t labels[5] = {0, 3, 9, 3, 7};
    const float scale = 1.0f / (float)n;
    ff_cpu_softmax_xent_backward(dz, loss, z, labels, scale_used, C, n);
    double *rz = malloc((size_t)(n * C) * 8), *bz = malloc((size_t)(n * C) * 8), rl[5], bl[5];
    *fd = 0;
    for (int64_t s = 0; s < n; s++) {
        const float *zs = z + s * C;
        double m = -INFINITY, sum = 0;
        for (int64_t c = 0; c < C; c++) m = zs[c] > m ? zs[c] : m;
        for (int64_t c = 0; c < C; c++) sum += exp(zs[c] - m);
        rl[s] = log(sum) - (zs[labels[s]] - m);
        // float32: z - m exact-ish (1 rounding), expf/logf <= 1 ulp, sum of C terms, division:
        // relative error of p is at most gamma_{C+6}; the loss mixes log(s) and (z_y - m).
        bl[s] = gamma_k((double)C + 6) * (fabs(log(sum)) + fabs(zs[labels[s]] - m) + 1.0);
        for (int64_t c = 0; c < C; c++) {
            double p = exp(zs[c] - m) / sum;
            rz[s * C + c] = (p - (c == labels[s])) * (double)scale;
            bz[s * C + c] = gamma_k((double)C + 6) * (p + (c == labels[s])) * (double)scale;
            // finite difference of scale * loss_s with respect to z_c
            const double h = 1e-5;
            double zp[10], lp = 0, lm = 0;
            for (int sign = 0; sign < 2; sign++) {
                double mm = -INFINITY, ss = 0;
                for (int64_t q = 0; q < C; q++) {
                    zp[q] = zs[q] + (q == c ? (sign ? -h : h) : 0.0);
                    mm = zp[q] > mm ? zp[q] : mm;
                }
                for (int64_t q = 0; q < C; q++) ss += exp(zp[q] - mm);
                double l = log(ss) - (zp[labels[s]] - mm);
                if (sign)
                    lm = l;
                else
                    lp = l;
            }
            double e = fabs((lp - lm) / (2 * h) * scale - rz[s * C + c]);
            if (e > *fd) *fd = e;
        }
    }
    *cz = compare(dz, rz, bz, n * C);
    *cl = compare(loss, rl, bl, n);
    free(z);
    free(dz);
    free(rz);
    free(bz);
}

static void softmax_xent_within_bounds(void **state) {
    (void)state;
    cmp cz, cl;
    double fd;
    xent_case(1.0f / 5.0f, &cz, &cl, &fd);
    printf("softmax xent: fd %.2e\n", fd);
    report("dz", cz);
    report("loss", cl);
    assert_true(fd < 1e-9);
    assert_true(cz.worst <= 1.0 && cl.worst <= 1.0);
    xent_case(1.0f, &cz, &cl, &fd);  // broken: the 1/B of the mean forgotten
    report("dz without 1/B (broken)", cz);
    assert_true(cz.worst > 1.0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(conv_backward_within_bounds),
        cmocka_unit_test(conv_backward_broken_fails),
        cmocka_unit_test(conv_backward_data_equals_spec),
        cmocka_unit_test(linear_backward_within_bounds),
        cmocka_unit_test(linear_backward_broken_fails),
        cmocka_unit_test(relu_backward_exact),
        cmocka_unit_test(maxpool_backward_matches_finite_differences),
        cmocka_unit_test(maxpool_ties_go_to_the_first_maximum),
        cmocka_unit_test(softmax_xent_within_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
