// The comparison rules (tolerance.h); derivations in golden/README.md.
#include "fivefold/tolerance.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fivefold/digest.h"

double ff_tol_gamma(int64_t k, double u) {
    double ku = (double)k * u;
    return ku >= 1.0 ? INFINITY : ku / (1.0 - ku);
}

// float32 error of any summation order plus the float64 reference's own error, plus K underflows.
// "Any order": gamma_K bounds the error as long as no term goes through more than K roundings
// (Higham, Lemma 3.1 applied per term), which every order in use meets with K = fan_in + 1: the CPU
// chain, the GPU fma chain, and the GPU's split-K linear order (linear_split.h), where a term goes
// through at most c fmas (chunk length c, its own included) and S - 1 chunk additions, and
// c + S - 1 <= fan_in since c = fan_in / S. K comes from fan_in, never from the split.
double ff_tol_dot_bound(double A, int64_t K) {
    return ff_tol_dot_bound_p(A, K, 0.0);
}

// Products perturbed by prod_rel first: |sum w'x' - sum w x| <= prod_rel A, and the float32 sum of
// the perturbed terms errs by gamma_K sum|w'x'| <= gamma_K (1 + prod_rel) A.
double ff_tol_dot_bound_p(double A, int64_t K, double prod_rel) {
    return (prod_rel + ff_tol_gamma(K, FF_TOL_U32) * (1.0 + prod_rel) + ff_tol_gamma(K, FF_TOL_U64)) * A +
           (double)K * FF_TOL_UNDERFLOW;
}

// Every product path of a Winograd output carries at most nround float32 roundings (winograd.h), so
// its relative error is at most gamma_nround (Higham, Lemma 3.1) and the total at most gamma * Ybar;
// the float64 direct reference adds gamma_K(2^-53) * A <= gamma_K(2^-53) * Ybar (A <= Ybar: each
// product w x is the sum of its Winograd paths). Each rounding may also lose up to 2^-149 to
// underflow, scaled by at most the transforms' coefficient products (< 2^20): nround * 2^-129.
double ff_tol_winograd_bound(double Ybar, int64_t nround, int64_t K) {
    return (ff_tol_gamma(nround, FF_TOL_U32) + ff_tol_gamma(K, FF_TOL_U64)) * Ybar + (double)nround * 0x1p-129;
}

// In units of u = 2^-24 (a relative error of k u is under k ULP): d from exp's argument (x_i - m
// rounded in float32: absolute error d u), 2 from expf (<= 1 ULP); the sum of `classes` positive
// terms: gamma_{n-1} for its own roundings, plus the terms' errors, which weigh in at most
// n/e + 2 (sum_j e^-d_j (d_j + 2) / sum_j e^-d_j with t e^-t <= 1/e and the sum >= 1); 1 for the
// division; then 1 ULP for rounding the reference to float32 and 1 for its stored form (README).
double ff_tol_softmax_ulp(double d, int64_t classes) {
    double n = (double)classes;
    return d + 2.0 + (n - 1.0) / (1.0 - (n - 1.0) * FF_TOL_U32) + n / M_E + 2.0 + 1.0 + 1.0 + 1.0;
}

double ff_tol_ulp_size(double x) {
    x = fabs(x);
    if (!(x >= 0x1p-126)) return FF_TOL_UNDERFLOW;  // subnormal, zero (and NaN: smallest)
    int e;
    frexp(x, &e);  // x in [2^(e-1), 2^e)
    return ldexp(1.0, e - 24);
}

const char *ff_tol_rule_name(ff_tol_rule r) {
    switch (r) {
        case FF_TOL_DOT: return "dot-bound";
        case FF_TOL_EXACT: return "exact";
        case FF_TOL_ULP: return "ulp";
        case FF_TOL_BOUND: return "e2e-bound";
        case FF_TOL_WINOGRAD: return "winograd-bound";
    }
    return "?";
}

static void result_init(ff_tol_result *r, ff_tol_rule rule, int64_t n) {
    memset(r, 0, sizeof *r);
    r->rule = rule;
    r->n = n;
    r->worst = -1;
}

// One element: `ratio` is |ours - ref| / bound in the rule's own units (inf for NaN or an exact
// miss), `ok` whether the element is within its bound. The `worst` slot holds the first failing
// element (replaced only by a failure with a larger ratio), or while nothing failed the element
// with the largest ratio: the figures a row prints.
static void consider(ff_tol_result *r, int64_t i, float ours, double ref, double bound_abs, double ratio, bool ok) {
    uint64_t ulp = ff_ulp_distance(ours, (float)ref);
    if (ulp > r->max_ulp) r->max_ulp = ulp;
    double err = fabs((double)ours - ref);
    if (!isnan(err) && err > r->max_abs) r->max_abs = err;
    if (!isfinite(ours) && isfinite(ref)) r->n_nan++;
    bool take;
    if (!ok) {
        r->n_fail++;
        take = r->n_fail == 1 || ratio > r->max_ratio;
    } else {
        take = r->n_fail == 0 && (r->worst < 0 || ratio > r->max_ratio);
    }
    if (ratio > r->max_ratio || isnan(ratio)) r->max_ratio = isnan(ratio) ? INFINITY : ratio;
    if (take) {
        r->worst = i;
        r->ours_worst = ours;
        r->ref_worst = ref;
        r->bound_worst = bound_abs;
    }
}

static double ratio_of(double err, double bound) {
    if (isnan(err)) return INFINITY;
    if (bound > 0) return err / bound;
    return err == 0 ? 0.0 : INFINITY;
}

static void finish(ff_tol_result *r) {
    r->pass = r->n_fail == 0 && r->n_nan == 0;
}

void ff_tol_check_dot(ff_tol_result *r, const float *ours, const double *ref, const double *absdot, int64_t n,
                      int64_t K, double prod_rel) {
    result_init(r, FF_TOL_DOT, n);
    for (int64_t i = 0; i < n; i++) {
        // (1 + 2^-23): the stored float64 reference is float32 + a float32-rounded difference, off
        // by at most 2^-24 of a difference that is itself within the bound (README).
        double bnd = ff_tol_dot_bound_p(absdot[i], K, prod_rel) * (1.0 + 0x1p-23);
        double err = fabs((double)ours[i] - ref[i]);
        bool ok = isfinite(ours[i]) && isfinite(ref[i]) && err <= bnd;
        consider(r, i, ours[i], ref[i], bnd, ratio_of(err, bnd), ok);
    }
    finish(r);
}

void ff_tol_check_winograd(ff_tol_result *r, const float *ours, const double *ref, const double *Ybar, int64_t n,
                           int64_t nround, int64_t K) {
    result_init(r, FF_TOL_WINOGRAD, n);
    for (int64_t i = 0; i < n; i++) {
        double bnd = ff_tol_winograd_bound(Ybar[i], nround, K) * (1.0 + 0x1p-23);  // as check_dot
        double err = fabs((double)ours[i] - ref[i]);
        bool ok = isfinite(ours[i]) && isfinite(ref[i]) && err <= bnd;
        consider(r, i, ours[i], ref[i], bnd, ratio_of(err, bnd), ok);
    }
    finish(r);
}

void ff_tol_check_exact(ff_tol_result *r, const float *ours, const float *ref, int64_t n) {
    result_init(r, FF_TOL_EXACT, n);
    for (int64_t i = 0; i < n; i++) {
        // == makes +0 and -0 equal and any NaN unequal: 0 ULP apart, NaN always fails.
        bool ok = ours[i] == ref[i];
        consider(r, i, ours[i], (double)ref[i], 0.0, ok ? 0.0 : INFINITY, ok);
    }
    finish(r);
}

void ff_tol_check_ulp(ff_tol_result *r, const float *ours, const double *ref, const double *bound_ulp,
                      double bound_scalar, int64_t n) {
    result_init(r, FF_TOL_ULP, n);
    for (int64_t i = 0; i < n; i++) {
        double bu = bound_ulp ? bound_ulp[i] : bound_scalar;
        uint64_t ulp = ff_ulp_distance(ours[i], (float)ref[i]);  // UINT64_MAX for any NaN
        bool ok = ulp != UINT64_MAX && isfinite(ours[i]) && (double)ulp <= bu;
        double ratio = ulp == UINT64_MAX ? INFINITY : ratio_of((double)ulp, bu);
        consider(r, i, ours[i], ref[i], bu * ff_tol_ulp_size(ref[i]), ratio, ok);
    }
    finish(r);
}

void ff_tol_check_bound(ff_tol_result *r, const float *ours, const double *ref, const double *bound, int64_t n) {
    result_init(r, FF_TOL_BOUND, n);
    for (int64_t i = 0; i < n; i++) {
        double err = fabs((double)ours[i] - ref[i]);
        bool ok = isfinite(ours[i]) && isfinite(ref[i]) && err <= bound[i];
        consider(r, i, ours[i], ref[i], bound[i], ratio_of(err, bound[i]), ok);
    }
    finish(r);
}

// ---------------------------------------------------------------- float64 bound ingredients
void ff_tol_absdot_conv(double *out, const float *x_f32, const double *v_f64, const float *w, const float *b,
                        const ff_layer *L, int64_t n, int wpow) {
    const int64_t C = L->in.c, H = L->in.h, W = L->in.w;
    const int64_t K = L->out.c, Ho = L->out.h, Wo = L->out.w;
    const int R = L->kh, S = L->kw, st = L->stride, pad = L->pad;
    for (int64_t img = 0; img < n; img++) {
        for (int64_t k = 0; k < K; k++) {
            double *o = out + (img * K + k) * Ho * Wo;
            double bias = b ? fabs((double)b[k]) : 0.0;
            for (int64_t i = 0; i < Ho * Wo; i++) o[i] = bias;
            for (int64_t c = 0; c < C; c++) {
                const int64_t plane = (img * C + c) * H * W;
                for (int r = 0; r < R; r++) {
                    for (int s = 0; s < S; s++) {
                        double wv = fabs((double)w[((k * C + c) * R + r) * S + s]);
                        if (wpow == 2) wv *= wv;
                        if (wv == 0.0) continue;
                        for (int64_t oh = 0; oh < Ho; oh++) {
                            int64_t ih = oh * st - pad + r;
                            if (ih < 0 || ih >= H) continue;
                            // valid ow: 0 <= ow*st - pad + s < W
                            int64_t ow0 = 0, ow1 = Wo;
                            while (ow0 < Wo && ow0 * st - pad + s < 0) ow0++;
                            while (ow1 > ow0 && (ow1 - 1) * st - pad + s >= W) ow1--;
                            double *orow = o + oh * Wo;
                            const int64_t base = plane + ih * W - pad + s;
                            if (x_f32) {
                                for (int64_t ow = ow0; ow < ow1; ow++)
                                    orow[ow] += wv * fabs((double)x_f32[base + ow * st]);
                            } else {
                                for (int64_t ow = ow0; ow < ow1; ow++) orow[ow] += wv * v_f64[base + ow * st];
                            }
                        }
                    }
                }
            }
        }
    }
}

void ff_tol_absdot_linear(double *out, const float *x_f32, const double *v_f64, const float *w, const float *b,
                          const ff_layer *L, int64_t n, int wpow) {
    const int64_t in = ff_shape_numel(L->in), nout = L->out.c;
    for (int64_t img = 0; img < n; img++) {
        for (int64_t j = 0; j < nout; j++) {
            const float *wr = w + j * in;
            double acc = b ? fabs((double)b[j]) : 0.0;
            if (x_f32) {
                const float *x = x_f32 + img * in;
                for (int64_t i = 0; i < in; i++) acc += fabs((double)wr[i]) * fabs((double)x[i]);
            } else if (wpow == 2) {
                const double *v = v_f64 + img * in;
                for (int64_t i = 0; i < in; i++) acc += (double)wr[i] * (double)wr[i] * v[i];
            } else {
                const double *v = v_f64 + img * in;
                for (int64_t i = 0; i < in; i++) acc += fabs((double)wr[i]) * v[i];
            }
            out[img * nout + j] = acc;
        }
    }
}

// ---------------------------------------------------------------- end-to-end propagation (sigma)
// Each of the K roundings (K-1 additions, the products, the bias add) contributes an error
// uniform in [-u, u] times a partial sum (or product) bounded by A: variance <= u^2/3 A^2 each.
// The GPU's split-K linear order (linear_split.h) has no more roundings of partial sums than the
// single chain: chunks 1..S-1 start at +0, so their first fma rounds a product (the products'
// errors together weigh at most u^2/3 A^2, sum (w x)^2 <= A^2), and the S - 1 chunk additions take
// the place of those S - 1 partial-sum roundings.
void ff_tol_stat_dot(double *s_out, const double *A, const double *W2s2, int64_t K, int64_t count, double prod_rel) {
    // (reduced-precision factors: each product's error is at most prod_rel |w x|, and
    // sum (w x)^2 <= A^2)
    const double c = (FF_TOL_U32 * FF_TOL_U32 * (double)(K + 1) + prod_rel * prod_rel) / 3.0;
    for (int64_t i = 0; i < count; i++) s_out[i] = sqrt(c * A[i] * A[i] + W2s2[i]);
}

// As ff_tol_stat_dot: each of the roundings on a path contributes a uniform error of at most u
// times a partial value whose weighted absolute sum is bounded by Ybar (README).
void ff_tol_stat_winograd(double *s_out, const double *Ybar, const double *W2s2, int64_t nround, int64_t count) {
    const double c = FF_TOL_U32 * FF_TOL_U32 * (double)(nround + 1) / 3.0;
    for (int64_t i = 0; i < count; i++) s_out[i] = sqrt(c * Ybar[i] * Ybar[i] + W2s2[i]);
}

// max is 1-Lipschitz in the max-norm: the output error is at most the largest error in its window.
void ff_tol_prop_maxpool(double *d_out, const double *d_in, const ff_layer *L, int64_t n) {
    const int64_t C = L->in.c, H = L->in.h, W = L->in.w, Ho = L->out.h, Wo = L->out.w;
    for (int64_t p = 0; p < n * C; p++) {
        for (int64_t oh = 0; oh < Ho; oh++) {
            for (int64_t ow = 0; ow < Wo; ow++) {
                double m = 0.0;
                for (int r = 0; r < L->kh; r++) {
                    int64_t ih = oh * L->stride - L->pad + r;
                    if (ih < 0 || ih >= H) continue;
                    for (int s = 0; s < L->kw; s++) {
                        int64_t iw = ow * L->stride - L->pad + s;
                        if (iw < 0 || iw >= W) continue;
                        double v = d_in[(p * H + ih) * W + iw];
                        if (v > m) m = v;
                    }
                }
                d_out[(p * Ho + oh) * Wo + ow] = m;
            }
        }
    }
}

// b_c = a_c D_c^-beta, D_c = k + alpha/size sum_{c' in win(c)} a_c'^2:
// |db_c| <= D^-beta |da_c| + 2 beta alpha/size |a_c| D^(-beta-1) sum_win |a_c'| |da_c'| + local.
void ff_tol_prop_lrn(double *d_out, const double *d_in, const float *x, const float *y, const ff_layer *L, int64_t n) {
    const int64_t C = L->in.c, HW = L->in.h * L->in.w;
    const int size = L->lrn_size;
    const double alpha = L->lrn_alpha, beta = L->lrn_beta, k = L->lrn_k;
    for (int64_t img = 0; img < n; img++) {
        for (int64_t c = 0; c < C; c++) {
            int64_t c0 = c - size / 2, c1 = c + (size - 1) / 2;
            if (c0 < 0) c0 = 0;
            if (c1 > C - 1) c1 = C - 1;
            for (int64_t p = 0; p < HW; p++) {
                double sq = 0.0, cross = 0.0;
                for (int64_t cc = c0; cc <= c1; cc++) {
                    int64_t j = (img * C + cc) * HW + p;
                    sq += (double)x[j] * (double)x[j];
                    cross += fabs((double)x[j]) * d_in[j];
                }
                int64_t i = (img * C + c) * HW + p;
                double D = k + alpha / size * sq;
                double prop = pow(D, -beta) * d_in[i] +
                              2.0 * beta * alpha / size * fabs((double)x[i]) * pow(D, -beta - 1.0) * cross;
                d_out[i] = prop + FF_TOL_LRN_ULP * ff_tol_ulp_size(y[i]);
            }
        }
    }
}

// p_i = e^x_i / sum e^x_j: dp_i = p_i (dx_i - sum_j p_j dx_j), so |dp_i| <= p_i (d_i + sum p_j d_j).
void ff_tol_prop_softmax(double *d_out, const double *d_in, const float *x, const float *y, int64_t classes,
                         int64_t n) {
    for (int64_t img = 0; img < n; img++) {
        const float *xr = x + img * classes;
        const float *yr = y + img * classes;
        const double *dr = d_in + img * classes;
        double m = -INFINITY, avg = 0.0;
        for (int64_t j = 0; j < classes; j++)
            if (xr[j] > m) m = xr[j];
        for (int64_t j = 0; j < classes; j++) avg += (double)yr[j] * dr[j];
        for (int64_t j = 0; j < classes; j++) {
            double local = ff_tol_softmax_ulp(m - (double)xr[j], classes) * ff_tol_ulp_size(yr[j]);
            d_out[img * classes + j] = (double)yr[j] * (dr[j] + avg) + local;
        }
    }
}

// ---------------------------------------------------------------- top-k
void ff_tol_topk(int64_t *idx, const float *row, int64_t classes, int k) {
    for (int j = 0; j < k; j++) idx[j] = -1;
    for (int64_t c = 0; c < classes; c++) {
        // insertion into a descending list; strict > keeps the lower index first among equals
        int pos = k;
        while (pos > 0 && (idx[pos - 1] < 0 || row[c] > row[idx[pos - 1]])) pos--;
        if (pos >= k) continue;
        for (int j = k - 1; j > pos; j--) idx[j] = idx[j - 1];
        idx[pos] = c;
    }
}

bool ff_tol_topk_agree(const int64_t *ours, const int64_t *ref, int k, const double *ref64, const double *bound,
                       int *n_tied) {
    int tied = 0;
    bool ok = true;
    for (int j = 0; j < k; j++) {
        if (ours[j] == ref[j]) continue;
        if (ours[j] < 0 || ref[j] < 0) {
            ok = false;
            continue;
        }
        double gap = fabs(ref64[ours[j]] - ref64[ref[j]]);
        if (gap <= bound[ours[j]] + bound[ref[j]])
            tied++;
        else
            ok = false;
    }
    if (n_tied) *n_tied = tied;
    return ok;
}

// ---------------------------------------------------------------- the statistical rule
double ff_tol_ulp2(double v) {
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    const uint64_t e = (bits >> 52) & 0x7ff;  // |v| in [2^(e-1023), 2^(e-1022))
    // float32 ulp there is 2^(e-1023-23), squared 2^(2e-2092): biased exponent 2e-1069. Below
    // 2^-126 (e < 897) the float32 spacing is 2^-149 (zero and subnormals too).
    if (e < 897) return 0x1p-298;
    const uint64_t r = (2 * e - 1069) << 52;
    double out;
    memcpy(&out, &r, sizeof out);
    return out;
}

double ff_tol_stat_tmax(int64_t n) {
    return sqrt(2.0 * log(2.0 * (double)(n > 0 ? n : 1) / FF_TOL_STAT_ALPHA));
}

double ff_tol_stat_trms(int64_t m, int64_t groups) {
    double x = log((double)(groups > 0 ? groups : 1) / FF_TOL_STAT_ALPHA);
    double md = (double)(m > 0 ? m : 1);
    return sqrt(1.0 + 2.0 * sqrt(x / md) + 2.0 * x / md);
}

// The variance of one float32 addition s = a + b (a, b float32, b != 0): the exact sum is a
// multiple of h = min(ulp(a), ulp(b)) and is rounded to a multiple of U = ulp(s). When U <= h it is
// exact (variance 0); otherwise, with U = 2^d h and the residues equally likely, the error takes
// the 2^d values j h in (-U/2, U/2] (the tie split evenly to either side), variance
// U^2 / 12 + h^2 / 6: 1/8 U^2 for one extra bit, tending to the continuous U^2 / 12.
static inline double add_var(double a, double b, double s) {
    if (a == 0.0) return 0.0;  // +0 + b = b exactly
    const double u2s = ff_tol_ulp2(s), ua = ff_tol_ulp2(a), ub = ff_tol_ulp2(b);
    const double h2 = ua < ub ? ua : ub;
    return u2s > h2 ? u2s / 12.0 + h2 / 6.0 : 0.0;
}

// One term of a chain: the product t = w x (exact in float64, 48 significant bits: its rounding
// error is continuous-uniform, variance ulp(t)^2 / 12) and the addition S + fl(t). A zero term is
// an exact no-op.
static inline void chain_term(double *S, double *Q, double *A, double t) {
    if (t == 0.0) return;
    const double prev = *S;
    *S += t;
    *A += fabs(t);
    *Q += ff_tol_ulp2(t) / 12.0 + add_var(prev, t, *S);
}

ff_status ff_tol_chain_var_conv(double *var, double *A, const float *x, const float *w, const float *b,
                                const ff_layer *L, int64_t n) {
    const int64_t C = L->in.c, H = L->in.h, W = L->in.w;
    const int64_t K = L->out.c, Ho = L->out.h, Wo = L->out.w, P = Ho * Wo;
    const int R = L->kh, S = L->kw, st = L->stride, pad = L->pad;
    double *sum = malloc((size_t)P * sizeof(double)), *abs_ = malloc((size_t)P * sizeof(double));
    if (!sum || !abs_) {
        free(sum);
        free(abs_);
        return FF_FAIL(FF_ERR_OOM, "statistical rule of %s: 2 x %lld doubles", L->name, (long long)P);
    }
    for (int64_t img = 0; img < n; img++) {
        for (int64_t k = 0; k < K; k++) {
            double *q = var + (img * K + k) * P;
            const double bias = b ? (double)b[k] : 0.0;
            for (int64_t i = 0; i < P; i++) {
                sum[i] = bias;
                abs_[i] = fabs(bias);
                q[i] = 0.0;
            }
            // The CPU reference's order (layers_cpu.h): c, r, s ascending, each tap over the pixels.
            for (int64_t c = 0; c < C; c++) {
                const float *xp = x + (img * C + c) * H * W;
                for (int r = 0; r < R; r++) {
                    for (int s = 0; s < S; s++) {
                        const double wv = (double)w[((k * C + c) * R + r) * S + s];
                        if (wv == 0.0) continue;  // every product exactly 0: nothing rounded
                        for (int64_t oh = 0; oh < Ho; oh++) {
                            const int64_t ih = oh * st - pad + r;
                            if (ih < 0 || ih >= H) continue;
                            for (int64_t ow = 0; ow < Wo; ow++) {
                                const int64_t iw = ow * st - pad + s;
                                if (iw < 0 || iw >= W) continue;
                                const int64_t o = oh * Wo + ow;
                                chain_term(&sum[o], &q[o], &abs_[o], wv * (double)xp[ih * W + iw]);
                            }
                        }
                    }
                }
            }
            for (int64_t i = 0; i < P; i++) q[i] *= FF_TOL_STAT_MARGIN;
            if (A) memcpy(A + (img * K + k) * P, abs_, (size_t)P * sizeof(double));
        }
    }
    free(sum);
    free(abs_);
    return FF_OK;
}

void ff_tol_chain_var_linear(double *var, double *A, const float *x, const float *w, const float *b, const ff_layer *L,
                             int split, int64_t n) {
    const int64_t in = ff_shape_numel(L->in), nout = L->out.c;
    if (split < 1 || in % split) split = 1;
    const int64_t chunk = in / split;
    for (int64_t img = 0; img < n; img++) {
        const float *xr = x + img * in;
        for (int64_t j = 0; j < nout; j++) {
            const float *wr = w + j * in;
            double total = 0.0, q = 0.0, a = b ? fabs((double)b[j]) : 0.0;
            for (int s = 0; s < split; s++) {
                // chunk 0 starts at the bias, the others at +0 (linear_split.h)
                double p = s == 0 && b ? (double)b[j] : 0.0, dummy = 0.0;
                for (int64_t i = s * chunk; i < (s + 1) * chunk; i++)
                    chain_term(&p, &q, &dummy, (double)wr[i] * (double)xr[i]);
                a += dummy;
                if (s == 0) {
                    total = p;
                } else if (p != 0.0) {
                    const double prev = total;
                    total += p;
                    q += add_var(prev, p, total);  // the chunk addition
                }
            }
            var[img * nout + j] = q * FF_TOL_STAT_MARGIN;
            if (A) A[img * nout + j] = a;
        }
    }
}

void ff_tol_winograd_var(double *var, const double *Ybar, int64_t nround, int64_t count) {
    const double c = FF_TOL_U32 * FF_TOL_U32 * (double)(nround + 1) / 3.0;
    for (int64_t i = 0; i < count; i++) var[i] = c * Ybar[i] * Ybar[i];
}

void ff_tol_dot_bounds(double *bound, const double *A, int64_t count, int64_t K, double prod_rel) {
    for (int64_t i = 0; i < count; i++) bound[i] = ff_tol_dot_bound_p(A[i], K, prod_rel) * (1.0 + 0x1p-23);
}

void ff_tol_winograd_bounds(double *bound, const double *Ybar, int64_t count, int64_t nround, int64_t K) {
    for (int64_t i = 0; i < count; i++) bound[i] = ff_tol_winograd_bound(Ybar[i], nround, K) * (1.0 + 0x1p-23);
}

void ff_tol_check_stat(ff_tol_stat_result *r, const float *ours, const double *ref, const double *var,
                       const double *bound, int64_t n, int64_t inner, int64_t groups, bool rms) {
    memset(r, 0, sizeof *r);
    r->applied = true;
    r->rms_applied = rms;
    r->n = n;
    r->groups = groups > 0 ? groups : 1;
    r->worst = r->worst_group = -1;
    if (inner < 1) inner = 1;
    r->t_max = ff_tol_stat_tmax(n);
    r->t_rms = ff_tol_stat_trms(n / r->groups, r->groups);
    double *ss = rms ? calloc((size_t)r->groups, sizeof(double)) : NULL;
    int64_t *cnt = rms ? calloc((size_t)r->groups, sizeof(int64_t)) : NULL;
    if (rms && (!ss || !cnt)) {  // no memory for the groups: the max rule alone, said by rms_applied
        r->rms_applied = rms = false;
    }
    for (int64_t i = 0; i < n; i++) {
        double err = fabs((double)ours[i] - ref[i]) - 0x1p-23 * bound[i];
        double z;
        if (!isfinite(ours[i]) || !isfinite(ref[i]) || isnan(err))
            z = INFINITY;
        else if (err <= 0.0)
            z = 0.0;
        else
            z = var[i] > 0.0 ? err / sqrt(var[i]) : INFINITY;
        if (z > r->t_max) r->n_fail++;
        if (r->worst < 0 || z > r->max_z) {
            r->max_z = z;
            r->worst = i;
        }
        if (rms) {
            int64_t g = (i / inner) % r->groups;
            ss[g] += z * z;
            cnt[g]++;
        }
    }
    if (rms) {
        for (int64_t g = 0; g < r->groups; g++) {
            if (!cnt[g]) continue;
            double v = sqrt(ss[g] / (double)cnt[g]);
            if (r->worst_group < 0 || v > r->max_rms || isnan(v)) {
                r->max_rms = isnan(v) ? INFINITY : v;
                r->worst_group = g;
            }
        }
        r->rms_ratio = r->max_rms / r->t_rms;
    }
    free(ss);
    free(cnt);
    r->max_ratio = r->max_z / r->t_max;
    r->pass = r->n_fail == 0 && r->max_ratio <= 1.0 && (!rms || r->rms_ratio <= 1.0);
}
