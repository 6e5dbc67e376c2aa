// The comparison rules of DESIGN §6, implemented once (derivations: golden/README.md). Every check
// `fivefold verify` and the golden tests make goes through these functions.
//
//   dot-product layers (conv2d, linear), per element:
//       |ours - ref64| <= (gamma_K(2^-24) + gamma_K(2^-53)) * A + K * 2^-149
//       A = |b| + sum |w * x| (float64, from the golden float32 input), K = terms (C*R*S + 1, in + 1)
//   exact layers (relu, maxpool, flatten): ours == golden float32 output (0 ULP apart; NaN fails)
//   lrn:     ULP(ours, (float)ref64) <= FF_TOL_LRN_ULP
//   softmax: ULP(ours, (float)ref64) <= ff_tol_softmax_ulp(|x_i - max x|, classes)
//   end to end: |ours - ref64| <= B, a running first-order error bound propagated layer by layer
//       (ff_tol_prop_*: guaranteed, and loose), and <= FF_TOL_LAMBDA * sigma, the statistical
//       tolerance (ff_tol_stat_dot: rounding errors as independent zero-mean variables, standard
//       deviation propagated); top-1/top-5 equal to PyTorch's up to ties (classes whose float64
//       logits are closer than FF_TOL_LAMBDA * (sigma_i + sigma_j)).
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

// ---- first-order error propagation for the end-to-end bound (per op; see README) ----
// d_in: the bound on the layer's input error (n, in); x: golden float32 input; y: golden float32
// output; d_out receives the bound on the output error. For conv/linear pass the absdot A already
// computed for x and the propagated |W| d_in.
void ff_tol_prop_dot(double *d_out, const double *A, const double *Wd, int64_t K, int64_t count, double prod_rel);
// Statistical: sigma_out = sqrt((u^2 (K + 1) + prod_rel^2) / 3 * A^2 + sum w^2 sigma_in^2)
// (W2s2 = the sum).
void ff_tol_stat_dot(double *s_out, const double *A, const double *W2s2, int64_t K, int64_t count, double prod_rel);
// The same for a Winograd layer: its own rounding bound replaces the dot bound (Ybar, nround as in
// ff_tol_winograd_bound); the propagated input error passes through the same linear map W.
void ff_tol_prop_winograd(double *d_out, const double *Ybar, const double *Wd, int64_t nround, int64_t K,
                          int64_t count);
// sigma_out = sqrt(u^2 (nround + 1) / 3 * Ybar^2 + sum w^2 sigma_in^2).
void ff_tol_stat_winograd(double *s_out, const double *Ybar, const double *W2s2, int64_t nround, int64_t count);
void ff_tol_prop_maxpool(double *d_out, const double *d_in, const ff_layer *L, int64_t n);
void ff_tol_prop_lrn(double *d_out, const double *d_in, const float *x, const float *y, const ff_layer *L, int64_t n);
void ff_tol_prop_softmax(double *d_out, const double *d_in, const float *x, const float *y, int64_t classes, int64_t n);

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
