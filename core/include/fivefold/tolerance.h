// The comparison rules, implemented once (derivations: golden/README.md). Every check `fivefold
// verify` and the golden tests make goes through these functions.
//
//   dot-product layers (conv2d, linear), per element, two rules, both must pass:
//     rigorous:    |ours - ref64| <= (gamma_K(2^-24) + gamma_K(2^-53)) * A + K * 2^-149
//                  A = |b| + sum |w * x| (float64, from the golden float32 input), K = C*R*S + 1, in + 1
//                  (Winograd layers: ff_tol_winograd_bound); no correct summation order can fail it
//     statistical: the error against the rounding noise the algorithm's own order makes
//                  (ff_tol_check_stat: max and per-channel RMS of |error| / sigma, at a false-alarm
//                  rate of FF_TOL_STAT_ALPHA per layer and rule); hundreds of times sharper
//   exact layers (relu, maxpool, flatten): ours == golden float32 output (0 ULP apart; NaN fails)
//   lrn:     ULP(ours, (float)ref64) <= FF_TOL_LRN_ULP
//   softmax: ULP(ours, (float)ref64) <= ff_tol_softmax_ulp(|x_i - max x|, classes)
//   end to end: |ours - ref64| <= FF_TOL_LAMBDA * sigma, the statistical tolerance (ff_tol_stat_dot:
//       rounding errors as independent zero-mean variables, standard deviation propagated);
//       top-1/top-5 equal to PyTorch's up to ties (classes whose float64 logits are closer than
//       FF_TOL_LAMBDA * (sigma_i + sigma_j)).
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "fivefold/model.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FF_TOL_U32 0x1p-24         // unit roundoff of float32
#define FF_TOL_U64 0x1p-53         // unit roundoff of float64
#define FF_TOL_UNDERFLOW 0x1p-149  // float32 subnormal spacing: absolute error per operation
#define FF_TOL_LAMBDA 6.0          // statistical tolerance: 6 standard deviations
#define FF_TOL_LRN_ULP 13.0        // lrn: 11 ULP of float32 arithmetic + 2 for the reference

// Reduced-precision products (--precision tf32: tensor cores round both factors to 10 explicit
// mantissa bits, unit roundoff 2^-11, then accumulate in float32): each product w x carries an extra
// relative error up to (1 + 2^-11)^2 - 1. 0 for float32 products. The dot rules take it as prod_rel.
#define FF_TOL_TF32_PRODUCT ((1.0 + 0x1p-11) * (1.0 + 0x1p-11) - 1.0)
// --precision tf32x3 (layers_cuda.cu, k_conv_x3): x = big + small + e with |e| <= 2^-22 |x|, and
// w x taken as w_small x_big + w_big x_small + w_big x_big; what is left out (w_small x_small, and
// e times the rest on either side) is below 3 * 2^-22 (1 + 2^-10) |w x|. Each term is then three
// exact partial products added by the tensor cores, which may truncate instead of rounding:
// gamma_3K(2u) = gamma_6K(u), so the dot rules take K * FF_TOL_TF32X3_TERMS.
#define FF_TOL_TF32X3_PRODUCT (3.0 * 0x1p-22 * (1.0 + 0x1p-10))
#define FF_TOL_TF32X3_TERMS 6

// gamma_k = k u / (1 - k u); +inf when k u >= 1 (no bound).
double ff_tol_gamma(int64_t k, double u);
// The per-element bound of a dot product of K terms with absolute sum A = |b| + sum|w x|.
double ff_tol_dot_bound(double A, int64_t K);
// The same when each product carries an extra relative error prod_rel (FF_TOL_TF32_PRODUCT):
// (prod_rel + gamma_K(u) (1 + prod_rel) + gamma_K(2^-53)) A + K 2^-149.
double ff_tol_dot_bound_p(double A, int64_t K, double prod_rel);
// The per-element bound of a Winograd conv output (winograd.h; derivation: golden/README.md §1b):
// (gamma_n(2^-24) + gamma_K(2^-53)) * Ybar + n * 2^-129, Ybar the absolute sum of every product
// path (ff_winograd_absdot), n the roundings on the longest path (ff_winograd_roundings), K the
// direct dot length (the float64 reference's own error).
double ff_tol_winograd_bound(double Ybar, int64_t nround, int64_t K);
// Softmax ULP bound for an element whose input is d = |x_i - max_j x_j| below the row maximum.
double ff_tol_softmax_ulp(double d, int64_t classes);
// ULP size of float32 at |x| (2^(e-23) for normal x, 2^-149 below): converts ULP bounds to absolute.
double ff_tol_ulp_size(double x);

typedef enum { FF_TOL_DOT, FF_TOL_EXACT, FF_TOL_ULP, FF_TOL_BOUND, FF_TOL_WINOGRAD } ff_tol_rule;
const char *ff_tol_rule_name(ff_tol_rule r);

// What decided a comparison: the figures each verify row prints.
typedef struct {
    ff_tol_rule rule;
    int64_t n;           // elements compared
    int64_t n_fail;      // elements outside their bound (NaN included)
    int64_t n_nan;       // NaN or inf in ours where the reference is finite
    uint64_t max_ulp;    // max ULP distance between ours and the reference rounded to float32
    double max_ratio;    // max |ours - ref| / bound (1.0 = bound fully used); inf for exact misses
    double max_abs;      // max |ours - ref|
    int64_t worst;       // element index deciding the result (largest ratio, or first failure)
    float ours_worst;    // ours at `worst`
    double ref_worst;    // reference at `worst`
    double bound_worst;  // bound at `worst`
    bool pass;
} ff_tol_result;

// Dot-product layer: absdot[i] = A_i = |b| + sum |w x| for element i (computed by ff_tol_absdot_*).
void ff_tol_check_dot(ff_tol_result *r, const float *ours, const double *ref, const double *absdot, int64_t n,
                      int64_t K, double prod_rel);
// Winograd conv layer: |ours - ref| <= ff_tol_winograd_bound(Ybar[i], nround, K) for every element.
void ff_tol_check_winograd(ff_tol_result *r, const float *ours, const double *ref, const double *Ybar, int64_t n,
                           int64_t nround, int64_t K);
// Exact layer: ours must equal ref (the golden float32 output) value for value (0 ULP: +0 == -0).
void ff_tol_check_exact(ff_tol_result *r, const float *ours, const float *ref, int64_t n);
// ULP rule: ULP(ours, (float)ref) <= bound_ulp[i] (or bound_scalar when bound_ulp is NULL).
void ff_tol_check_ulp(ff_tol_result *r, const float *ours, const double *ref, const double *bound_ulp,
                      double bound_scalar, int64_t n);
// Absolute bound per element: |ours - ref| <= bound[i] (end to end).
void ff_tol_check_bound(ff_tol_result *r, const float *ours, const double *ref, const double *bound, int64_t n);

// ---- the quantities the bounds need, computed in float64 (plain loops; order does not matter
// ---- at float64 precision for a float32 bound) ----
// A = |b| + sum |w| v for v >= 0 (v = |x| for the per-layer bound, v = an error bound when
// propagating). conv: out (n, K, Ho, Wo); v (n, C, H, W) as float or double; w (K, C, R, S).
// Pass b = NULL to leave out the bias term (propagation).
// wpow = 1 uses |w|, wpow = 2 uses w^2 (variance propagation: sum w^2 sigma^2).
void ff_tol_absdot_conv(double *out, const float *x_f32, const double *v_f64, const float *w, const float *b,
                        const ff_layer *L, int64_t n, int wpow);
// linear: out (n, out); x/v (n, in); w (out, in)
void ff_tol_absdot_linear(double *out, const float *x_f32, const double *v_f64, const float *w, const float *b,
                          const ff_layer *L, int64_t n, int wpow);

// ---- the end-to-end statistical tolerance: sigma propagated per op (see README) ----
// For conv/linear pass the absdot A computed for the golden input x and W2s2 = sum w^2 sigma_in^2.
// Statistical: sigma_out = sqrt((u^2 (K + 1) + prod_rel^2) / 3 * A^2 + sum w^2 sigma_in^2)
// (W2s2 = the sum).
void ff_tol_stat_dot(double *s_out, const double *A, const double *W2s2, int64_t K, int64_t count, double prod_rel);
// sigma_out = sqrt(u^2 (nround + 1) / 3 * Ybar^2 + sum w^2 sigma_in^2).
void ff_tol_stat_winograd(double *s_out, const double *Ybar, const double *W2s2, int64_t nround, int64_t count);
void ff_tol_prop_maxpool(double *d_out, const double *d_in, const ff_layer *L, int64_t n);
void ff_tol_prop_lrn(double *d_out, const double *d_in, const float *x, const float *y, const ff_layer *L, int64_t n);
void ff_tol_prop_softmax(double *d_out, const double *d_in, const float *x, const float *y, int64_t classes, int64_t n);

// ---- the statistical rule of the dot-product layers (golden/README.md, 1c) ----
// A float32 chain's error is the sum of its roundings' errors (first order). Model: each rounding
// of a value v != 0 errs by a variable uniform on [-ulp(v)/2, ulp(v)/2] (variance ulp(v)^2 / 12),
// independent of the others. sigma_i^2 is the sum of those variances over the roundings of the
// algorithm's own order, computed in float64 from the golden float32 input; uniform variables are
// strictly sub-Gaussian, so (for independent roundings)
//   max rule: P(|e_i| > t sigma_i) <= 2 exp(-t^2 / 2): t = FF_TOL_STAT_TMAX(n) over n elements;
//   rms rule: per group of m elements sharing their weights (an output channel / feature),
//             P(sum z^2 >= m + 2 sqrt(m x) + 2 x) <= e^-x (Laurent-Massart), x = ln(groups/alpha).
// Each rule's false-alarm probability per layer is at most FF_TOL_STAT_ALPHA.
#define FF_TOL_STAT_ALPHA 1e-9
// The chain variances are returned times this margin: the model matches float32 chains to a few
// percent (mean z^2 0.98 on random chains, worst channel 1.05 on MNIST conv1), and the rms rule's
// limit on a group of 10^4 elements is only ~10 % above 1 (golden/README.md, 1c).
#define FF_TOL_STAT_MARGIN 1.125

// float32 ulp(v)^2 (2^-298 below 2^-126: the subnormal spacing squared), from v's exponent alone.
double ff_tol_ulp2(double v);
// max rule threshold: sqrt(2 ln(2 n / alpha)).
double ff_tol_stat_tmax(int64_t n);
// rms rule threshold on RMS z over m elements, `groups` groups: sqrt(1 + 2 sqrt(x/m) + 2 x/m).
double ff_tol_stat_trms(int64_t m, int64_t groups);
// The variance sigma^2 (times FF_TOL_STAT_MARGIN) of a conv output under the chain order out = b; for c, r, s
// ascending: out += w x (padding taps skipped), with each nonzero product and each partial sum after a nonzero term
// rounded (an fma chain rounds fewer values: the same sigma over-estimates its error). Also writes A = |b| + sum |w x|
// (the dot rule's absdot) when A != NULL. var, A: (n, K, Ho, Wo); x: (n, C, H, W); w: (K, C, R, S); b: (K) FF_ERR_OOM
// when its two rows of scratch cannot be had.
ff_status ff_tol_chain_var_conv(double *var, double *A, const float *x, const float *w, const float *b,
                                const ff_layer *L, int64_t n);
// The same for linear in the split order of linear_split.h with `split` chunks (1: the CPU chain
// b, i ascending): chunk 0 from b, chunks s >= 1 from +0, then p_0 + p_1 + ... in order.
// var, A: (n, out); x: (n, in); w: (out, in); b: (out)
void ff_tol_chain_var_linear(double *var, double *A, const float *x, const float *w, const float *b, const ff_layer *L,
                             int split, int64_t n);
// Winograd (no per-rounding model: tiles share U's rounding): every one of the nround roundings
// on a path errs by at most u times a value whose weighted absolute sum is <= Ybar, so
// var <= (nround + 1) (u Ybar)^2 / 3, an over-estimate (golden/README.md, 1c); max rule only.
void ff_tol_winograd_var(double *var, const double *Ybar, int64_t nround, int64_t count);

typedef struct {
    bool applied;       // false: no statistical model for this algorithm (vendor, tf32)
    bool rms_applied;   // the rms rule ran (independent roundings per element)
    int64_t n, groups;  // elements, groups of the rms rule
    double t_max, t_rms;
    double max_z;    // max over elements of z_i = max(0, |ours - ref| - slack_i) / sigma_i
    int64_t worst;   // element of max_z
    double max_rms;  // max over groups of RMS z
    int64_t worst_group;
    double max_ratio;  // max_z / t_max
    double rms_ratio;  // max_rms / t_rms
    int64_t n_fail;    // elements with z > t_max (NaN included)
    bool pass;
} ff_tol_stat_result;

// The statistical rule: z_i = max(0, |ours_i - ref_i| - 2^-23 bound_i) / sqrt(var_i), where bound_i
// is the rigorous bound (the slack covers the float64 reference's own error and its stored form);
// element i belongs to group (i / inner) % groups (conv: inner = Ho*Wo, groups = K; linear: 1,
// out). rms: false for the max rule alone. Passes when max z <= t_max and every group's RMS z
// <= t_rms, and everything is finite.
void ff_tol_check_stat(ff_tol_stat_result *r, const float *ours, const double *ref, const double *var,
                       const double *bound, int64_t n, int64_t inner, int64_t groups, bool rms);
// The rigorous per-element bound the rows use (for the slack above): ff_tol_dot_bound_p(A, K, p) and
// ff_tol_winograd_bound(Ybar, nround, K), each times (1 + 2^-23) as in ff_tol_check_dot/_winograd.
void ff_tol_dot_bounds(double *bound, const double *A, int64_t count, int64_t K, double prod_rel);
void ff_tol_winograd_bounds(double *bound, const double *Ybar, int64_t count, int64_t nround, int64_t K);

// Top-k of a row (descending value, lower index first among equal values).
void ff_tol_topk(int64_t *idx, const float *row, int64_t classes, int k);
// Top-k agreement with ties: position j agrees if ours[j] == ref[j], or the float64 values of the
// two classes are within the sum of their bounds (their order is undecidable within tolerance).
// Returns false on a real mismatch; *n_tied counts positions accepted as ties.
bool ff_tol_topk_agree(const int64_t *ours, const int64_t *ref, int k, const double *ref64, const double *bound,
                       int *n_tied);

#ifdef __cplusplus
}
#endif
