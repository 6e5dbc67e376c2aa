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

int ff_winograd_m(const ff_layer *L, int m) {
    if (L->op != FF_OP_CONV2D || L->stride != 1 || L->kh != L->kw || (L->kh != 3 && L->kh != 5)) return 0;
    return m == 2 ? 2 : 4;
}

int ff_winograd_alpha(const ff_layer *L, int m) {
    return m ? m + L->kh - 1 : 0;
}

int64_t ff_winograd_weight_floats(const ff_layer *L, int m) {
    const int64_t a = ff_winograd_alpha(L, m);
    return a * a * L->out_c * L->in.c;
}

ff_status ff_winograd_weights(float *u, const float *w, const ff_layer *L, int m) {
    wg_variant v;
    if (!variant_of(&v, m, L->kh) || L->kh != L->kw)
        return FF_FAIL(FF_ERR_INPUT, "%s: no Winograd F(%dx%d, %dx%d) variant", L->name, m, m, L->kh, L->kw);
    const int a = v.alpha, r = v.r;
    const int64_t K = L->out_c, C = L->in.c;
    for (int64_t k = 0; k < K; k++)
        for (int64_t c = 0; c < C; c++) {
            const float *g = w + (k * C + c) * r * r;
            double t[8 * 5];  // G g: (alpha, r)
            for (int i = 0; i < a; i++)
                for (int j = 0; j < r; j++) {
                    double s = 0;
                    for (int q = 0; q < r; q++) s += v.G[i * r + q] * (double)g[q * r + j];
                    t[i * r + j] = s;
                }
            for (int i = 0; i < a; i++)
                for (int j = 0; j < a; j++) {  // (G g) G^T, rounded once to float32
                    double s = 0;
                    for (int q = 0; q < r; q++) s += t[i * r + q] * v.G[j * r + q];
                    u[((int64_t)(i * a + j) * K + k) * C + c] = (float)s;
                }
        }
    return FF_OK;
}

ff_wg_tiles ff_winograd_tiles(const ff_layer *L, int m, int64_t out_lo, int64_t out_hi) {
    ff_wg_tiles t = {0, 0, 0};
    if (m <= 0 || out_hi <= out_lo) return t;
    t.th_lo = out_lo / m;
    t.th_hi = (out_hi + m - 1) / m;
    t.tw = (L->out.w + m - 1) / m;
    return t;
}

ff_range ff_winograd_input_rows(const ff_layer *L, int m, int64_t out_lo, int64_t out_hi) {
    ff_range r = {0, 0};
    ff_wg_tiles t = ff_winograd_tiles(L, m, out_lo, out_hi);
    if (t.th_hi <= t.th_lo) return r;
    const int64_t lo = t.th_lo * m - L->pad, hi = (t.th_hi - 1) * m - L->pad + ff_winograd_alpha(L, m);
    r.lo = lo < 0 ? 0 : lo;
    r.hi = hi > L->in.h ? L->in.h : hi;
    if (r.hi < r.lo) r.hi = r.lo;
    return r;
}

int64_t ff_winograd_workspace_floats(const ff_layer *L, int m, int64_t out_lo, int64_t out_hi, int64_t n) {
    ff_wg_tiles t = ff_winograd_tiles(L, m, out_lo, out_hi);
    const int64_t a = ff_winograd_alpha(L, m), P = n * (t.th_hi - t.th_lo) * t.tw;
    return a * a * P * (L->in.c + L->out_c);
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

ff_status ff_winograd_conv_cpu(float *out, const float *in, const float *u, const float *b, const ff_layer *L, int m,
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

int64_t ff_winograd_roundings(const ff_layer *L, int m) {
    // U: float64 then one rounding (the float64 error is far below one float32 rounding): 2;
    // V: two stages of at most alpha roundings each (one product, alpha - 1 additions);
    // the channel chain: C fmas; Y: two stages of at most alpha; the bias: 1 (winograd.h).
    const int64_t a = ff_winograd_alpha(L, m);
    return 2 + 2 * a + L->in.c + 2 * a + 1;
}

ff_status ff_winograd_absdot(double *out, const float *x, const float *w, const float *b, const ff_layer *L, int m,
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
