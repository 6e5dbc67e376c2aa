// Winograd F(m x m, r x r), host side (winograd.h): variants, weight transform, band geometry, the
// CPU emulation (bit-identical to the GPU pipeline) and the error bound's absolute path sum.
#include "fivefold/winograd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FF_WG_FN static inline
#define FF_WG_ADD(a, b) ((a) + (b))  // -ffp-contract=off: every operation rounds on its own
#define FF_WG_SUB(a, b) ((a) - (b))
#define FF_WG_MUL(a, b) ((a) * (b))
#include "winograd_tf.h"

typedef struct {
    int m, r, alpha;
    const double *G, *BT, *AT;  // (alpha, r), (alpha, alpha), (m, alpha)
    void (*in_tf)(float *v, const float *d);
    void (*out_tf)(float *y, const float *x);
} wg_variant;

static bool variant_of(wg_variant *v, int m, int r) {
    memset(v, 0, sizeof *v);
    v->m = m, v->r = r, v->alpha = m + r - 1;
    if (m == 2 && r == 3) {
        v->G = ff_wg_G_2_3, v->BT = ff_wg_BT_2_3, v->AT = ff_wg_AT_2_3;
        v->in_tf = ff_wg_in_2_3, v->out_tf = ff_wg_out_2_3;
    } else if (m == 4 && r == 3) {
        v->G = ff_wg_G_4_3, v->BT = ff_wg_BT_4_3, v->AT = ff_wg_AT_4_3;
        v->in_tf = ff_wg_in_4_3, v->out_tf = ff_wg_out_4_3;
    } else if (m == 2 && r == 5) {
        v->G = ff_wg_G_2_5, v->BT = ff_wg_BT_2_5, v->AT = ff_wg_AT_2_5;
        v->in_tf = ff_wg_in_2_5, v->out_tf = ff_wg_out_2_5;
    } else if (m == 4 && r == 5) {
        v->G = ff_wg_G_4_5, v->BT = ff_wg_BT_4_5, v->AT = ff_wg_AT_4_5;
        v->in_tf = ff_wg_in_4_5, v->out_tf = ff_wg_out_4_5;
    } else {
        return false;
    }
    return true;
}

static int64_t ceil_div(int64_t a, int64_t b) {
    return (a + b - 1) / b;
}

int ff_winograd_equiv(ff_layer *E, const ff_layer *L) {
    if (L->op != FF_OP_CONV2D || L->kh != L->kw || L->stride < 1) return 0;
    const int s = L->stride;
    if (s == 1) {
        if (L->kh != 3 && L->kh != 5) return 0;
        if (E) *E = *L;
        return 1;
    }
    const int64_t C = L->in.c * s * s, H = ceil_div(L->in.h, s), W = ceil_div(L->in.w, s);
    if (L->pad != 0 || ceil_div(L->kh, s) != 3 || H - 2 != L->out.h || W - 2 != L->out.w) return 0;
    if (E) {
        *E = *L;
        E->kh = E->kw = 3;
        E->stride = 1;
        E->pad = 0;
        E->in = (ff_shape){C, H, W};
        E->fan_in = C * 9;
        E->n_weight = L->out_c * C * 9;
        E->flops = 2 * E->n_weight * L->out.h * L->out.w;
    }
    return s;
}

// L' of a layer with a Winograd formulation; false (E zeroed: a 0 alpha) for any other.
static bool equiv(ff_layer *E, const ff_layer *L) {
    if (ff_winograd_equiv(E, L)) return true;
    memset(E, 0, sizeof *E);
    return false;
}

static bool is_s2d(const ff_layer *L) {
    return ff_winograd_equiv(NULL, L) > 1;
}

int ff_winograd_m(const ff_layer *L, int m) {
    ff_layer E;
    if (!equiv(&E, L) || E.in.c < 16) return 0;
    return m == 2 ? 2 : 4;
}

int ff_winograd_alpha(const ff_layer *L, int m) {
    ff_layer E;
    return m && equiv(&E, L) ? m + E.kh - 1 : 0;
}

int64_t ff_winograd_weight_floats(const ff_layer *L, int m) {
    ff_layer E;
    equiv(&E, L);
    const int64_t a = ff_winograd_alpha(L, m);
    return a * a * L->out_c * E.in.c;
}

void ff_winograd_s2d_input(float *xp, const float *x, const ff_layer *L, int64_t n) {
    const int64_t s = L->stride, C = L->in.c, H = L->in.h, W = L->in.w;
    const int64_t Hs = ceil_div(H, s), Ws = ceil_div(W, s);
    for (int64_t img = 0; img < n; img++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t i = 0; i < s; i++)
                for (int64_t j = 0; j < s; j++) {
                    float *o = xp + ((img * C + c) * s * s + i * s + j) * Hs * Ws;
                    const float *xc = x + (img * C + c) * H * W;
                    for (int64_t h = 0; h < Hs; h++)
                        for (int64_t w = 0; w < Ws; w++) {
                            const int64_t ih = s * h + i, iw = s * w + j;
                            o[h * Ws + w] = ih < H && iw < W ? xc[ih * W + iw] : 0.0f;
                        }
                }
}

void ff_winograd_s2d_weights(float *wp, const float *w, const ff_layer *L) {
    const int64_t s = L->stride, C = L->in.c, K = L->out_c, k = L->kh;
    for (int64_t o = 0; o < K; o++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t i = 0; i < s; i++)
                for (int64_t j = 0; j < s; j++)
                    for (int64_t a = 0; a < 3; a++)
                        for (int64_t b = 0; b < 3; b++) {
                            const int64_t p = s * a + i, q = s * b + j;
                            wp[(((o * C + c) * s * s + i * s + j) * 3 + a) * 3 + b] =
                                p < k && q < k ? w[((o * C + c) * k + p) * k + q] : 0.0f;
                        }
}

int64_t ff_winograd_s2d_floats(const ff_layer *L, int64_t n) {
    ff_layer E;
    if (!is_s2d(L) || n <= 0) return 0;
    equiv(&E, L);
    return (n * ff_shape_numel(E.in) + 63) / 64 * 64;
}

// U = G g G^T for the stride-1 layer E: u (alpha^2, K, C), w (K, C, r, r).
static void transform_weights(float *u, const float *w, const ff_layer *E, const wg_variant *v) {
    const int a = v->alpha, r = v->r;
    const int64_t K = E->out_c, C = E->in.c;
    for (int64_t k = 0; k < K; k++)
        for (int64_t c = 0; c < C; c++) {
            const float *g = w + (k * C + c) * r * r;
            double t[8 * 5];  // G g: (alpha, r)
            for (int i = 0; i < a; i++)
                for (int j = 0; j < r; j++) {
                    double s = 0;
                    for (int q = 0; q < r; q++) s += v->G[i * r + q] * (double)g[q * r + j];
                    t[i * r + j] = s;
                }
            for (int i = 0; i < a; i++)
                for (int j = 0; j < a; j++) {  // (G g) G^T, rounded once to float32
                    double s = 0;
                    for (int q = 0; q < r; q++) s += t[i * r + q] * v->G[j * r + q];
                    u[((int64_t)(i * a + j) * K + k) * C + c] = (float)s;
                }
        }
}

ff_status ff_winograd_weights(float *u, const float *w, const ff_layer *L, int m) {
    wg_variant v;
    ff_layer E;
    if (!equiv(&E, L) || !variant_of(&v, m, E.kh))
        return FF_FAIL(FF_ERR_INPUT, "%s: no Winograd F(%dx%d, %dx%d) variant (stride %d)", L->name, m, m, L->kh, L->kw,
                       L->stride);
    if (!is_s2d(L)) {
        transform_weights(u, w, &E, &v);
        return FF_OK;
    }
    float *wp = malloc((size_t)E.n_weight * sizeof(float));
    if (!wp) return FF_FAIL(FF_ERR_OOM, "%s: %lld floats for the s2d weights", L->name, (long long)E.n_weight);
    ff_winograd_s2d_weights(wp, w, L);
    transform_weights(u, wp, &E, &v);
    free(wp);
    return FF_OK;
}

ff_wg_tiles ff_winograd_tiles(const ff_layer *L, int m, int64_t out_lo, int64_t out_hi) {
    ff_wg_tiles t = {0, 0, 0};
    if (m <= 0 || out_hi <= out_lo) return t;
    if (is_s2d(L)) out_lo = 0, out_hi = L->out.h;  // only the whole layer (winograd.h)
    t.th_lo = out_lo / m;
    t.th_hi = (out_hi + m - 1) / m;
    t.tw = (L->out.w + m - 1) / m;
    return t;
}

ff_range ff_winograd_input_rows(const ff_layer *L, int m, int64_t out_lo, int64_t out_hi) {
    ff_range r = {0, 0};
    ff_wg_tiles t = ff_winograd_tiles(L, m, out_lo, out_hi);
    if (t.th_hi <= t.th_lo) return r;
    if (is_s2d(L)) {  // the whole input (X' is made of all of it)
        r.hi = L->in.h;
        return r;
    }
    const int64_t lo = t.th_lo * m - L->pad, hi = (t.th_hi - 1) * m - L->pad + ff_winograd_alpha(L, m);
    r.lo = lo < 0 ? 0 : lo;
    r.hi = hi > L->in.h ? L->in.h : hi;
    if (r.hi < r.lo) r.hi = r.lo;
    return r;
}

int64_t ff_winograd_workspace_floats(const ff_layer *L, int m, int64_t out_lo, int64_t out_hi, int64_t n) {
    ff_layer E;
    equiv(&E, L);
    ff_wg_tiles t = ff_winograd_tiles(L, m, out_lo, out_hi);
    const int64_t a = ff_winograd_alpha(L, m), P = n * (t.th_hi - t.th_lo) * t.tw;
    return ff_winograd_s2d_floats(L, n) + a * a * P * (E.in.c + L->out_c);
}

// d (alpha x alpha) of tile (th, tw) of channel plane x (rows [in_lo, in_lo + in_rows) held).
static void gather(float *d, const float *x, const ff_layer *L, int m, int a, int64_t th, int64_t tw, int64_t in_lo) {
    for (int i = 0; i < a; i++)
        for (int j = 0; j < a; j++) {
            const int64_t ih = th * m - L->pad + i, iw = tw * m - L->pad + j;
            const bool in = ih >= 0 && ih < L->in.h && iw >= 0 && iw < L->in.w;
            d[i * a + j] = in ? x[(ih - in_lo) * L->in.w + iw] : 0.0f;
        }
}

// The emulation on the stride-1 layer L (L' of a s2d layer, fed X').
static ff_status conv_cpu(float *out, const float *in, const float *u, const float *b, const ff_layer *L, int m,
                          bool relu, const ff_rows *rows, int64_t n) {
    wg_variant v;
    if (!variant_of(&v, m, L->kh)) return FF_FAIL(FF_ERR_INPUT, "%s: no Winograd variant m=%d", L->name, m);
    const ff_range need = ff_winograd_input_rows(L, m, rows->out_lo, rows->out_hi);
    if (need.lo < rows->in_lo || need.hi > rows->in_hi)
        return FF_FAIL(FF_ERR_INPUT, "%s: Winograd band [%lld, %lld) needs input rows [%lld, %lld); got [%lld, %lld)",
                       L->name, (long long)rows->out_lo, (long long)rows->out_hi, (long long)need.lo,
                       (long long)need.hi, (long long)rows->in_lo, (long long)rows->in_hi);
    const int a = v.alpha, a2 = a * a;
    const int64_t K = L->out_c, C = L->in.c, W = L->in.w, Wo = L->out.w;
    const int64_t in_rows = rows->in_hi - rows->in_lo, out_rows = rows->out_hi - rows->out_lo;
    const ff_wg_tiles t = ff_winograd_tiles(L, m, rows->out_lo, rows->out_hi);
    float *V = malloc((size_t)(a2 * C) * sizeof(float));  // one tile: (alpha^2, C)
    if (!V) return FF_FAIL(FF_ERR_OOM, "winograd emulation: %lld floats", (long long)(a2 * C));
    for (int64_t img = 0; img < n; img++)
        for (int64_t th = t.th_lo; th < t.th_hi; th++)
            for (int64_t tw = 0; tw < t.tw; tw++) {
                for (int64_t c = 0; c < C; c++) {
                    float d[64], vt[64];
                    gather(d, in + (img * C + c) * in_rows * W, L, m, a, th, tw, rows->in_lo);
                    v.in_tf(vt, d);
                    for (int x = 0; x < a2; x++) V[x * C + c] = vt[x];
                }
                for (int64_t k = 0; k < K; k++) {
                    float M[64], y[16];
                    for (int x = 0; x < a2; x++) {
                        float acc = 0.0f;
                        const float *ux = u + ((int64_t)x * K + k) * C;
                        for (int64_t c = 0; c < C; c++) acc = fmaf(ux[c], V[x * C + c], acc);
                        M[x] = acc;
                    }
                    v.out_tf(y, M);
                    for (int i = 0; i < m; i++)
                        for (int j = 0; j < m; j++) {
                            const int64_t oh = th * m + i, ow = tw * m + j;
                            if (oh < rows->out_lo || oh >= rows->out_hi || ow >= Wo) continue;
                            float val = y[i * m + j] + b[k];
                            if (relu) val = val < 0.0f ? 0.0f : val;
                            out[((img * K + k) * out_rows + (oh - rows->out_lo)) * Wo + ow] = val;
                        }
                }
            }
    free(V);
    return FF_OK;
}

ff_status ff_winograd_conv_cpu(float *out, const float *in, const float *u, const float *b, const ff_layer *L, int m,
                               bool relu, const ff_rows *rows, int64_t n) {
    ff_layer E;
    if (!equiv(&E, L)) return FF_FAIL(FF_ERR_INPUT, "%s: no Winograd variant m=%d", L->name, m);
    if (!is_s2d(L)) return conv_cpu(out, in, u, b, L, m, relu, rows, n);
    if (rows->out_lo != 0 || rows->out_hi != L->out.h || rows->in_lo != 0 || rows->in_hi != L->in.h)
        return FF_FAIL(FF_ERR_INPUT,
                       "%s: space-to-depth Winograd computes the whole layer only (output rows [0, %lld) from "
                       "input rows [0, %lld)); got output rows [%lld, %lld) from [%lld, %lld)",
                       L->name, (long long)L->out.h, (long long)L->in.h, (long long)rows->out_lo,
                       (long long)rows->out_hi, (long long)rows->in_lo, (long long)rows->in_hi);
    const int64_t nx = ff_winograd_s2d_floats(L, n);
    float *xp = malloc((size_t)nx * sizeof(float));
    if (!xp) return FF_FAIL(FF_ERR_OOM, "%s: %lld floats for the s2d input", L->name, (long long)nx);
    ff_winograd_s2d_input(xp, in, L, n);
    const ff_rows full = ff_rows_full(&E);
    ff_status st = conv_cpu(out, xp, u, b, &E, m, relu, &full, n);
    free(xp);
    return st;
}

int64_t ff_winograd_roundings(const ff_layer *L, int m) {
    // U: float64 then one rounding (the float64 error is far below one float32 rounding): 2;
    // V: two stages of at most alpha roundings each (one product, alpha - 1 additions);
    // the channel chain: C' fmas; Y: two stages of at most alpha; the bias: 1 (winograd.h).
    // (The s2d copies are exact: no rounding.)
    ff_layer E;
    equiv(&E, L);
    const int64_t a = ff_winograd_alpha(L, m);
    return 2 + 2 * a + E.in.c + 2 * a + 1;
}

int64_t ff_winograd_ref_terms(const ff_layer *L) {
    ff_layer E;
    const int64_t k = equiv(&E, L) && E.fan_in > L->fan_in ? E.fan_in : L->fan_in;
    return k + 1;
}

static ff_status absdot(double *out, const float *x, const float *w, const float *b, const ff_layer *L, int m,
                        int64_t n);

ff_status ff_winograd_absdot(double *out, const float *x, const float *w, const float *b, const ff_layer *L, int m,
                             int64_t n) {
    ff_layer E;
    if (!equiv(&E, L)) return FF_FAIL(FF_ERR_INPUT, "%s: no Winograd variant m=%d", L->name, m);
    if (!is_s2d(L)) return absdot(out, x, w, b, L, m, n);
    const int64_t nx = ff_winograd_s2d_floats(L, n);
    float *xp = malloc((size_t)nx * sizeof(float)), *wp = malloc((size_t)E.n_weight * sizeof(float));
    if (!xp || !wp) {
        free(xp), free(wp);
        return FF_FAIL(FF_ERR_OOM, "%s: %lld floats for the s2d input and weights", L->name,
                       (long long)(nx + E.n_weight));
    }
    ff_winograd_s2d_input(xp, x, L, n);
    ff_winograd_s2d_weights(wp, w, L);
    ff_status st = absdot(out, xp, wp, b, &E, m, n);
    free(xp), free(wp);
    return st;
}

// Ybar of the stride-1 layer L (L' of a s2d layer, with X' and W').
static ff_status absdot(double *out, const float *x, const float *w, const float *b, const ff_layer *L, int m,
                        int64_t n) {
    wg_variant v;
    if (!variant_of(&v, m, L->kh)) return FF_FAIL(FF_ERR_INPUT, "%s: no Winograd variant m=%d", L->name, m);
    const int a = v.alpha, a2 = a * a, r = v.r;
    const int64_t K = L->out_c, C = L->in.c, H = L->in.h, W = L->in.w, Ho = L->out.h, Wo = L->out.w;
    const ff_wg_tiles t = ff_winograd_tiles(L, m, 0, Ho);
    const int64_t tiles = (t.th_hi - t.th_lo) * t.tw;
    double *Ub = malloc((size_t)(a2 * K * C) * sizeof(double));      // |G||g||G^T|: (alpha^2, K, C)
    double *Vb = malloc((size_t)(a2 * C * tiles) * sizeof(double));  // |B^T||d||B|: (alpha^2, tiles, C)
    if (!Ub || !Vb) {
        free(Ub), free(Vb);
        return FF_FAIL(FF_ERR_OOM, "winograd bound: %lld doubles", (long long)(a2 * (K + tiles) * C));
    }
    for (int64_t k = 0; k < K; k++)
        for (int64_t c = 0; c < C; c++) {
            const float *g = w + (k * C + c) * r * r;
            for (int i = 0; i < a; i++)
                for (int j = 0; j < a; j++) {
                    double s = 0;
                    for (int p = 0; p < r; p++)
                        for (int q = 0; q < r; q++)
                            s += fabs(v.G[i * r + p]) * fabs((double)g[p * r + q]) * fabs(v.G[j * r + q]);
                    Ub[((int64_t)(i * a + j) * K + k) * C + c] = s;
                }
        }
    for (int64_t img = 0; img < n; img++) {
        for (int64_t tile = 0; tile < tiles; tile++) {
            const int64_t th = tile / t.tw, tw = tile % t.tw;
            for (int64_t c = 0; c < C; c++) {
                double d[64];
                for (int i = 0; i < a; i++)
                    for (int j = 0; j < a; j++) {
                        const int64_t ih = th * m - L->pad + i, iw = tw * m - L->pad + j;
                        const bool in = ih >= 0 && ih < H && iw >= 0 && iw < W;
                        d[i * a + j] = in ? fabs((double)x[((img * C + c) * H + ih) * W + iw]) : 0.0;
                    }
                for (int i = 0; i < a; i++)
                    for (int j = 0; j < a; j++) {
                        double s = 0;
                        for (int p = 0; p < a; p++) {
                            const double bp = fabs(v.BT[i * a + p]);
                            if (bp == 0) continue;
                            for (int q = 0; q < a; q++) s += bp * d[p * a + q] * fabs(v.BT[j * a + q]);
                        }
                        Vb[((int64_t)(i * a + j) * tiles + tile) * C + c] = s;
                    }
            }
        }
        for (int64_t k = 0; k < K; k++)
            for (int64_t tile = 0; tile < tiles; tile++) {
                const int64_t th = tile / t.tw, tw = tile % t.tw;
                double Z[64];
                for (int x2 = 0; x2 < a2; x2++) {
                    const double *ub = Ub + ((int64_t)x2 * K + k) * C;
                    const double *vb = Vb + ((int64_t)x2 * tiles + tile) * C;
                    double s = 0;
                    for (int64_t c = 0; c < C; c++) s += ub[c] * vb[c];
                    Z[x2] = s;
                }
                for (int i = 0; i < m; i++)
                    for (int j = 0; j < m; j++) {
                        const int64_t oh = th * m + i, ow = tw * m + j;
                        if (oh >= Ho || ow >= Wo) continue;
                        double s = b ? fabs((double)b[k]) : 0.0;
                        for (int p = 0; p < a; p++)
                            for (int q = 0; q < a; q++)
                                s += fabs(v.AT[i * a + p]) * Z[p * a + q] * fabs(v.AT[j * a + q]);
                        out[((img * K + k) * Ho + oh) * Wo + ow] = s;
                    }
            }
    }
    free(Ub);
    free(Vb);
    return FF_OK;
}
