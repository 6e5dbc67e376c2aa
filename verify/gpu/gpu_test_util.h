// Helpers shared by the GPU test programs: device buffers from host arrays, and the two checks every
// GPU result goes through (docs/ARCHITECTURE.md §6.1):
//   - dot-product layers (conv, linear): |gpu - cpu| <= 2 * gamma_K * S with S = |b| + sum |w x|,
//     gamma_K = K u / (1 - K u), u = 2^-24, K = terms + 1 (the bias). Each of the two results is
//     within gamma_K * S of the exact value whatever its summation order, so any correct pair passes
//     and a wrong index or tap does not. S is computed by the CPU reference itself on |x|, |w|, |b|
//     (a sum of non-negative terms, so its float result is >= S (1 - gamma_K)); the bound divides by
//     (1 - gamma_K) to stay rigorous.
//   - every other layer: the same bits as the CPU (or at most `max_ulp` apart where a transcendental
//     is evaluated by different libraries: lrn's pow, softmax's exp, both in double).
// The dot bound holds for the GPU's split-K linear order too (linear_split.h): the bound needs only
// that no term goes through more than K roundings, whatever the order (Higham, Lemma 3.1), and with
// S chunks of c terms a term goes through at most c fmas (its own included) and S - 1 additions,
// c + S - 1 <= terms < K. Beyond the bound, the GPU linear layers are compared bit for bit with
// ff_linear_split_cpu, the CPU emulation of that order.
#pragma once
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fivefold/digest.h"
#include "fivefold/gpu.h"
#include "fivefold/rng.h"

static inline float *tu_dev_from(const float *h, size_t count, ff_gpu_stream s) {
    float *d = NULL;
    if (ff_gpu_alloc((void **)&d, count * sizeof(float), "test buffer") != FF_OK) {
        fprintf(stderr, "%s\n", ff_last_error());
        abort();
    }
    if (h && ff_gpu_copy_h2d(d, h, count * sizeof(float), s) != FF_OK) abort();
    if (!h && ff_gpu_fill(d, NAN, count, s) != FF_OK) abort();  // poison: unwritten outputs show
    return d;
}

// A NaN-poisoned device workspace for ff_gpu_linear / ff_gpu_layer_forward on n images of L
// (ff_gpu_linear_workspace_floats), or NULL where L needs none. ff_gpu_free(NULL) is a no-op.
static inline float *tu_linear_work(const ff_layer *L, int64_t n, ff_gpu_stream s) {
    const int64_t f = L->op == FF_OP_LINEAR ? ff_gpu_linear_workspace_floats(L, n) : 0;
    return f > 0 ? tu_dev_from(NULL, (size_t)f, s) : NULL;
}

static inline float *tu_host_from(const float *d, size_t count, ff_gpu_stream s) {
    float *h = malloc(count * sizeof(float));
    if (!h) abort();
    if (ff_gpu_copy_d2h(h, d, count * sizeof(float), s) != FF_OK || ff_gpu_stream_sync(s) != FF_OK) {
        fprintf(stderr, "%s\n", ff_last_error());
        abort();
    }
    return h;
}

static inline float *tu_rand(size_t count, uint64_t tensor_id, float scale) {
    float *x = malloc(count * sizeof(float));
    if (!x) abort();
    ff_rng_fill(x, count, 12345, tensor_id, scale);
    return x;
}

// Values whose bits below TF32's 10 explicit ones are not zero, all of one sign: (1 + 0.75 2^-11)
// 2^e (e in -2..2) splits into big = 2^e and small = 0.75 2^-11 2^e exactly. A kernel that leaves
// out a cross product (w_small x_big or w_big x_small) or runs plain TF32 errs by about 2^-11.4 of
// every output, far above the tf32x3 bound; the right one errs by about 2^-22.
static inline float *tu_low_bits(size_t count, uint64_t seed) {
    float *v = malloc(count * sizeof(float));
    if (!v) abort();
    uint64_t st = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t k = 0; k < count; k++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        v[k] = ldexpf(1.0f + 0.75f * 0x1p-11f, (int)(st >> 61) % 5 - 2);
    }
    return v;
}

static inline float *tu_abs(const float *x, size_t count) {
    float *a = malloc(count * sizeof(float));
    if (!a) abort();
    for (size_t i = 0; i < count; i++) a[i] = fabsf(x[i]);
    return a;
}

// Dot-product check. Returns the number of elements outside the bound (NaN counts); prints the
// case, the worst element and the share of the bound it used.
static inline size_t tu_check_dot(const char *what, const float *gpu, const float *cpu, const float *abs_sum,
                                  size_t count, int64_t terms) {
    const double u = ldexp(1.0, -24), Ku = (double)(terms + 1) * u, gamma = Ku / (1.0 - Ku);
    size_t bad = 0, worst = 0;
    double worst_frac = -1;
    for (size_t i = 0; i < count; i++) {
        const double bound = 2.0 * gamma * (double)abs_sum[i] / (1.0 - gamma);
        const double err = fabs((double)gpu[i] - (double)cpu[i]);
        const double frac = bound > 0 ? err / bound : (err > 0 ? INFINITY : 0);
        if (isnan(gpu[i]) || isnan(cpu[i]) || !(err <= bound)) bad++;
        if (isnan(frac) || frac > worst_frac) worst_frac = isnan(frac) ? INFINITY : frac, worst = i;
    }
    printf("  %-34s K=%-6lld %9zu elems  worst %.2f%% of bound at [%zu] gpu=%.9g cpu=%.9g  %s\n", what,
           (long long)(terms + 1), count, 100.0 * worst_frac, worst, count ? gpu[worst] : 0.0, count ? cpu[worst] : 0.0,
           bad ? "FAIL" : "PASS");
    return bad;
}

// Bitwise / ULP check. Returns the number of elements more than max_ulp apart (NaN vs NaN counts as
// equal only when both are NaN: the layers propagate NaN on purpose).
static inline size_t tu_check_ulp(const char *what, const float *a, const float *b, size_t count, uint64_t max_ulp) {
    size_t bad = 0, worst = 0;
    uint64_t worst_ulp = 0;
    for (size_t i = 0; i < count; i++) {
        uint64_t d = (isnan(a[i]) && isnan(b[i])) ? 0 : ff_ulp_distance(a[i], b[i]);
        if (d > max_ulp) bad++;
        if (d > worst_ulp) worst_ulp = d, worst = i;
    }
    printf("  %-34s %9zu elems  max %llu ulp at [%zu] (allowed %llu)  %s\n", what, count, (unsigned long long)worst_ulp,
           worst, (unsigned long long)max_ulp, bad ? "FAIL" : "PASS");
    return bad;
}

// Exit code 77 (CTest SKIP_RETURN_CODE) when this machine has no usable GPU or fivefold was built
// without CUDA; the reason is printed, and an empty reason is itself a failure.
static inline int tu_gpu_or_skip(void) {
    int n = 0;
    ff_status st = ff_gpu_device_count(&n);
    if (st == FF_OK && n > 0) return ff_gpu_select(0) == FF_OK ? 0 : 1;
    const char *msg = ff_last_error();
    printf("SKIP: %s\n", msg);
    if (st != FF_ERR_NO_CUDA || !msg || !*msg) return 1;  // a GPU error other than "none": fail
    return 77;
}
