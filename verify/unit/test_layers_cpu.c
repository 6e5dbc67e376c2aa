// Unit tests of the CPU reference layers (core/device/cpu/layers_cpu.c).
//
// 1. Hand-computed cases for every layer: the expected numbers are written here, derived by hand in
//    the comments (small integers, so every float32 operation is exact).
// 2. Summation-order cases: sums where float32 rounding makes the documented order (bias first,
//    then c, r, s ascending; linear bias then i ascending) give a different result from any other.
// 3. A naive float64 re-implementation written here, independently of the layer code, compared on
//    random shapes (1x1 inputs, kernel = input, stride > kernel, odd pads, pad >= kernel/2,
//    non-square, C = 1, K = 1, strided rows wider than the gather chunk). conv and linear must be
//    within the forward-error bound of a float32 sum of K terms, gamma_K * (|b| + sum |w*x|),
//    gamma_K = K*u/(1-K*u), u = 2^-24, K = number of terms (products + bias): any order passes, a
//    wrong index does not. relu and maxpool must be exact. lrn and softmax have derived bounds
//    (see their tests).
// 4. Bit identity of row bands (in_lo > 0, out_lo > 0, empty bands) and sub-batches with the full
//    computation: the MPI rows and batch splits depend on it.
// 5. NaN, -0.0 and infinity behaviour matching PyTorch (checked against torch 1.13:
//    torch.relu(tensor([-0., nan])) == tensor([-0., nan]); max_pool2d propagates NaN).
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
#include "ref_conv64.h"

// ------------------------------------------------------------------ helpers

static const double U = 1.0 / 16777216.0;  // unit roundoff of float32, 2^-24

static double gamma_k(int64_t k) {
    return (double)k * U / (1.0 - (double)k * U);
}

static uint32_t fbits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

// Layers built by hand (the test does not depend on model.c): the derived fields the layer code
// reads (in, out, out_c, kernel, stride, pad, lrn parameters) are filled here.
static int64_t out_dim(int64_t in, int k, int stride, int pad) {
    return (in + 2 * pad - k) / stride + 1;
}

static ff_layer make_conv(int64_t C, int64_t H, int64_t W, int64_t K, int kh, int kw, int stride, int pad) {
    ff_layer L;
    memset(&L, 0, sizeof L);
    L.name = "conv";
    L.op = FF_OP_CONV2D;
    L.out_c = K;
    L.kh = kh, L.kw = kw, L.stride = stride, L.pad = pad;
    L.in = (ff_shape){C, H, W};
    L.out = (ff_shape){K, out_dim(H, kh, stride, pad), out_dim(W, kw, stride, pad)};
    L.param_index = 0;
    L.n_weight = K * C * kh * kw;
    L.n_bias = K;
    L.fan_in = C * kh * kw;
    L.flops = 2 * L.n_weight * L.out.h * L.out.w;
    return L;
}

static ff_layer make_pool(int64_t C, int64_t H, int64_t W, int kh, int kw, int stride, int pad) {
    ff_layer L;
    memset(&L, 0, sizeof L);
    L.name = "pool";
    L.op = FF_OP_MAXPOOL;
    L.out_c = C;
    L.kh = kh, L.kw = kw, L.stride = stride, L.pad = pad;
    L.in = (ff_shape){C, H, W};
    L.out = (ff_shape){C, out_dim(H, kh, stride, pad), out_dim(W, kw, stride, pad)};
    L.param_index = -1;
    return L;
}

static ff_layer make_lrn(int64_t C, int64_t H, int64_t W, int size, float alpha, float beta, float k) {
    ff_layer L;
    memset(&L, 0, sizeof L);
    L.name = "lrn";
    L.op = FF_OP_LRN;
    L.out_c = C;
    L.in = L.out = (ff_shape){C, H, W};
    L.lrn_size = size, L.lrn_alpha = alpha, L.lrn_beta = beta, L.lrn_k = k;
    L.param_index = -1;
    return L;
}

static ff_layer make_linear(int64_t I, int64_t J) {
    ff_layer L;
    memset(&L, 0, sizeof L);
    L.name = "fc";
    L.op = FF_OP_LINEAR;
    L.out_c = J;
    L.in = (ff_shape){I, 1, 1};
    L.out = (ff_shape){J, 1, 1};
    L.param_index = 0;
    L.n_weight = I * J;
    L.n_bias = J;
    L.fan_in = I;
    L.flops = 2 * I * J;
    return L;
}

// Input rows needed by output rows [o0, o1) of a windowed layer (written here independently of
// model.c's ff_layer_input_rows).
static ff_rows band_for(const ff_layer *L, int64_t o0, int64_t o1) {
    ff_rows r = {0, 0, o0, o1};
    if (o1 <= o0) return r;
    int64_t lo = o0 * L->stride - L->pad, hi = (o1 - 1) * L->stride - L->pad + L->kh;
    r.in_lo = lo < 0 ? 0 : lo;
    r.in_hi = hi > L->in.h ? L->in.h : hi;
    if (r.in_hi < r.in_lo) r.in_hi = r.in_lo;
    return r;
}

// splitmix64: a deterministic stream for the random cases.
typedef struct {
    uint64_t s;
} trng;
static uint64_t trng_next(trng *r) {
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static float trng_unit(trng *r) {  // uniform in [-1, 1)
    return (float)((double)(trng_next(r) >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
}
static int64_t trng_int(trng *r, int64_t lo, int64_t hi) {  // in [lo, hi]
    return lo + (int64_t)(trng_next(r) % (uint64_t)(hi - lo + 1));
}
static float *rand_buf(trng *r, int64_t count, float scale) {
    float *p = malloc((size_t)(count > 0 ? count : 1) * sizeof(float));
    assert_non_null(p);
    for (int64_t i = 0; i < count; i++) p[i] = scale * trng_unit(r);
    return p;
}

// ------------------------------------------------------------------ naive float64 references

// out64 and bound (per element) of a conv over the full tensor (verify/ref_conv64.h): every output
// visits every tap and tests it for padding; the bound is gamma of its own term count.
static void ref_conv(double *out64, double *bound, const float *in, const float *w, const float *b, const ff_layer *L,
                     int64_t n) {
    const int64_t count = n * ff_shape_numel(L->out);
    int64_t *terms = malloc((size_t)count * sizeof(int64_t));
    ff_ref_conv64(out64, bound, terms, in, w, b, L, n);
    for (int64_t o = 0; o < count; o++) bound[o] *= gamma_k(terms[o]);
    free(terms);
}

static void ref_linear(double *out64, double *bound, const float *in, const float *w, const float *b, int64_t I,
                       int64_t J, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < J; j++) {
            double s = b[j], a = fabs((double)b[j]);
            for (int64_t t = 0; t < I; t++) {
                double p = (double)w[j * I + t] * (double)in[i * I + t];
                s += p;
                a += fabs(p);
            }
            out64[i * J + j] = s;
            bound[i * J + j] = gamma_k(I + 1) * a;
        }
}

// Fails (naming the worst element) unless |got - ref| <= bound everywhere.
static void check_bound(const char *what, const float *got, const double *ref, const double *bound, int64_t count) {
    double worst = -1.0;
    int64_t wi = -1;
    for (int64_t i = 0; i < count; i++) {
        double err = fabs((double)got[i] - ref[i]);
        if (isnan(got[i])) err = INFINITY;
        double used = bound[i] > 0 ? err / bound[i] : (err > 0 ? INFINITY : 0.0);
        if (used > worst) worst = used, wi = i;
    }
    if (worst > 1.0) {
        print_error(
            "%s: element %lld = %.9g, float64 reference %.17g, |error| %.3g > bound %.3g "
            "(%.1f%% of bound)\n",
            what, (long long)wi, (double)got[wi], ref[wi], fabs((double)got[wi] - ref[wi]), bound[wi], 100.0 * worst);
        fail();
    }
}

static void check_bits(const char *what, const float *got, const float *want, int64_t count) {
    for (int64_t i = 0; i < count; i++)
        if (fbits(got[i]) != fbits(want[i])) {
            print_error("%s: element %lld differs: %.9g (0x%08x) vs %.9g (0x%08x)\n", what, (long long)i,
                        (double)got[i], fbits(got[i]), (double)want[i], fbits(want[i]));
            fail();
        }
}

// ------------------------------------------------------------------ conv2d: hand cases

// C=1, 3x3 input, one 2x2 filter, stride 1, pad 0, bias 0.5.
//   in = [1 2 3; 4 5 6; 7 8 9], w = [1 0; -1 2]
//   out(0,0) = 0.5 + 1*1 + 0*2 - 1*4 + 2*5 = 7.5
//   out(0,1) = 0.5 + 1*2 + 0*3 - 1*5 + 2*6 = 9.5
//   out(1,0) = 0.5 + 1*4 + 0*5 - 1*7 + 2*8 = 13.5
//   out(1,1) = 0.5 + 1*5 + 0*6 - 1*8 + 2*9 = 15.5
// (a transposed kernel [1 -1; 0 2] would give out(0,0) = 0.5 + 1 - 2 + 0 + 10 = 9.5)
static void test_conv_hand_simple(void **state) {
    (void)state;
    ff_layer L = make_conv(1, 3, 3, 1, 2, 2, 1, 0);
    const float in[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    const float w[4] = {1, 0, -1, 2};
    const float b[1] = {0.5f};
    float out[4];
    ff_rows r = ff_rows_full(&L);
    ff_cpu_conv2d(out, in, w, b, &L, &r, 1);
    const float want[4] = {7.5f, 9.5f, 13.5f, 15.5f};
    check_bits("conv 3x3 * 2x2", out, want, 4);
}

// C=2, 3x3 inputs, K=2 filters of 2x2, stride 2, pad 1 -> 2x2 outputs.
// Output (oh, ow) reads input row 2*oh - 1 + r and column 2*ow - 1 + s: for oh = 0 only r = 1
// (row 0) is inside, for oh = 1 rows 1, 2; the same for columns.
//   in c0 = [1 2 3; 4 5 6; 7 8 9]     in c1 = [1 0 2; 0 3 0; 4 0 5]
//   filter 0: c0 = [1 2; 3 4], c1 = [-1 1; 1 -1], b = 1
//   filter 1: c0 = [0 1; 0 0], c1 = [0 0; 0 2],  b = -2
// filter 0:
//   (0,0): c0 4*1 ; c1 -1*1                                   -> 1 + 4 - 1 = 4
//   (0,1): c0 3*2 + 4*3 ; c1 1*0 - 1*2                        -> 1 + 18 - 2 = 17
//   (1,0): c0 2*4 + 4*7 ; c1 1*0 - 1*4                        -> 1 + 36 - 4 = 33
//   (1,1): c0 1*5 + 2*6 + 3*8 + 4*9 ; c1 -1*3 + 1*0 + 1*0 - 1*5 -> 1 + 77 - 8 = 70
// filter 1 (taps c0 (r0,s1) and c1 (r1,s1) only):
//   (0,0): c0 tap is padding ; c1 2*in1[0][0] = 2              -> -2 + 2 = 0
//   (0,1): c0 padding ; c1 2*in1[0][2] = 4                     -> -2 + 4 = 2
//   (1,0): c0 in0[1][0] = 4 ; c1 2*in1[2][0] = 8               -> -2 + 12 = 10
//   (1,1): c0 in0[1][2] = 6 ; c1 2*in1[2][2] = 10              -> -2 + 16 = 14
static void test_conv_hand_pad_stride(void **state) {
    (void)state;
    ff_layer L = make_conv(2, 3, 3, 2, 2, 2, 2, 1);
    assert_int_equal(L.out.h, 2);
    assert_int_equal(L.out.w, 2);
    const float in[18] = {1, 2, 3, 4, 5, 6, 7, 8, 9, /* c1 */ 1, 0, 2, 0, 3, 0, 4, 0, 5};
    const float w[16] = {1, 2, 3, 4, -1, 1, 1, -1, /* filter 1 */ 0, 1, 0, 0, 0, 0, 0, 2};
    const float b[2] = {1, -2};
    float out[8];
    ff_rows r = ff_rows_full(&L);
    ff_cpu_conv2d(out, in, w, b, &L, &r, 1);
    const float want[8] = {4, 17, 33, 70, 0, 2, 10, 14};
    check_bits("conv pad 1 stride 2", out, want, 8);
}

// The documented order is visible in float32: 2^24 + 1 rounds back to 2^24 (ties to even).
//  (a) bias first: C=1, 1x2 input [1 1], 1x2 kernel [2^24, -2^24], b = 1:
//      ((1 + 2^24) - 2^24) = (2^24) - 2^24 = 0; bias last would give (2^24 - 2^24) + 1 = 1.
//  (b) s ascending: 1x3 input [1 1 1], kernel [2^24, 1, -2^24], b = 0:
//      ((0 + 2^24) + 1) - 2^24 = 0; s descending gives (-2^24 + 1) + 2^24 = 1.
//  (c) c before r: C=2, 2x1 input (all ones), kernel 2x1 per channel, taps
//      (c0,r0) = 2^24, (c0,r1) = -2^24, (c1,r0) = 1, (c1,r1) = 0.5, b = 0:
//      c outer: ((2^24 - 2^24) + 1) + 0.5 = 1.5;  r outer: ((2^24 + 1) - 2^24) + 0.5 = 0.5.
static void test_conv_summation_order(void **state) {
    (void)state;
    const float big = 16777216.0f;
    ff_rows r;
    float out[1];
    {
        ff_layer L = make_conv(1, 1, 2, 1, 1, 2, 1, 0);
        const float in[2] = {1, 1}, w[2] = {big, -big}, b[1] = {1};
        r = ff_rows_full(&L);
        ff_cpu_conv2d(out, in, w, b, &L, &r, 1);
        assert_true(fbits(out[0]) == fbits(0.0f));
    }
    {
        ff_layer L = make_conv(1, 1, 3, 1, 1, 3, 1, 0);
        const float in[3] = {1, 1, 1}, w[3] = {big, 1, -big}, b[1] = {0};
        r = ff_rows_full(&L);
        ff_cpu_conv2d(out, in, w, b, &L, &r, 1);
        assert_true(fbits(out[0]) == fbits(0.0f));
    }
    {
        ff_layer L = make_conv(2, 2, 1, 1, 2, 1, 1, 0);
        const float in[4] = {1, 1, 1, 1}, w[4] = {big, -big, 1, 0.5f}, b[1] = {0};
        r = ff_rows_full(&L);
        ff_cpu_conv2d(out, in, w, b, &L, &r, 1);
        assert_true(out[0] == 1.5f);
    }
}

// ------------------------------------------------------------------ conv2d: random vs float64

typedef struct {
    int64_t n, C, H, W, K;
    int kh, kw, stride, pad;
} conv_case;

static const conv_case conv_cases[] = {
    {1, 1, 1, 1, 1, 1, 1, 1, 0},      // 1x1 input, 1x1 kernel, C = K = 1
    {2, 3, 1, 1, 4, 3, 3, 1, 1},      // 1x1 input, 3x3 kernel pad 1: only the centre tap is inside
    {1, 2, 5, 5, 3, 5, 5, 1, 0},      // kernel = input size -> 1x1 output
    {2, 3, 9, 10, 2, 2, 2, 3, 0},     // stride 3 > kernel 2: some inputs never read
    {1, 1, 7, 7, 1, 3, 3, 1, 2},      // pad 2 >= kernel/2: output larger than input
    {1, 2, 6, 5, 3, 2, 2, 1, 3},      // pad 3 > kernel 2: border outputs are the bias alone
    {2, 4, 11, 9, 5, 3, 5, 2, 1},     // non-square kernel and input, odd pad, stride 2
    {1, 3, 13, 13, 6, 3, 3, 1, 1},    // AlexNet conv3-5 geometry, small C/K
    {1, 3, 35, 35, 4, 11, 11, 4, 0},  // AlexNet conv1 geometry
    {1, 2, 17, 17, 3, 5, 5, 1, 2},    // AlexNet conv2 geometry
    {1, 1, 3, 1100, 2, 3, 3, 4, 1},   // strided row wider than the 256-column gather chunk
    {1, 2, 4, 600, 1, 1, 3, 2, 3},    // stride 2, odd pad 3, Wo = 302
    {3, 1, 8, 8, 1, 4, 4, 4, 0},      // stride = kernel (non-overlapping), batch 3
    {1, 5, 6, 7, 2, 1, 1, 1, 0},      // 1x1 convolution (channel mixing only)
    // More channels than one packed chunk holds (56 for 3x3, 20 for 5x5): later chunks continue
    // from the stored value, the bias must enter once. K = 9: a partial last k block.
    {1, 60, 5, 5, 9, 3, 3, 1, 1},
    {2, 24, 6, 7, 3, 5, 5, 2, 2},
    // Kernels the packed path does not take (S > 64, or R*S > 512): the plain loop nest.
    {1, 2, 3, 70, 2, 1, 65, 1, 3},
    {1, 1, 25, 24, 2, 23, 23, 1, 1},
};

static void run_conv_case(const conv_case *cc, trng *g) {
    ff_layer L = make_conv(cc->C, cc->H, cc->W, cc->K, cc->kh, cc->kw, cc->stride, cc->pad);
    const int64_t nin = cc->n * ff_shape_numel(L.in), nout = cc->n * ff_shape_numel(L.out);
    float *in = rand_buf(g, nin, 1.0f);
    float *w = rand_buf(g, L.n_weight, 0.5f);
    float *b = rand_buf(g, L.n_bias, 0.25f);
    float *out = malloc((size_t)nout * sizeof(float));
    double *ref = malloc((size_t)nout * sizeof(double)), *bound = malloc((size_t)nout * sizeof(double));
    assert_non_null(out);
    assert_non_null(ref);
    assert_non_null(bound);
    ff_rows r = ff_rows_full(&L);
    ff_cpu_conv2d(out, in, w, b, &L, &r, cc->n);
    ref_conv(ref, bound, in, w, b, &L, cc->n);
    char what[160];
    snprintf(what, sizeof what, "conv(n=%lld,C=%lld,H=%lld,W=%lld,K=%lld,k=%dx%d,s=%d,p=%d)", (long long)cc->n,
             (long long)cc->C, (long long)cc->H, (long long)cc->W, (long long)cc->K, cc->kh, cc->kw, cc->stride,
             cc->pad);
    check_bound(what, out, ref, bound, nout);
    free(in), free(w), free(b), free(out), free(ref), free(bound);
}

static void test_conv_vs_float64(void **state) {
    (void)state;
    trng g = {42};
    for (size_t i = 0; i < sizeof conv_cases / sizeof conv_cases[0]; i++) run_conv_case(&conv_cases[i], &g);
    // and random geometries
    for (int t = 0; t < 60; t++) {
        conv_case cc;
        cc.kh = (int)trng_int(&g, 1, 6);
        cc.kw = (int)trng_int(&g, 1, 6);
        cc.stride = (int)trng_int(&g, 1, 5);
        cc.pad = (int)trng_int(&g, 0, 4);
        cc.H = trng_int(&g, 1, 20);
        cc.W = trng_int(&g, 1, 20);
        if (cc.H + 2 * cc.pad < cc.kh) cc.H = cc.kh;
        if (cc.W + 2 * cc.pad < cc.kw) cc.W = cc.kw;
        cc.C = trng_int(&g, 1, 5);
        cc.K = trng_int(&g, 1, 5);
        cc.n = trng_int(&g, 1, 3);
        run_conv_case(&cc, &g);
    }
}

// ------------------------------------------------------------------ bands and sub-batches

// Computes a random output band [o0, o1) from an input buffer holding rows [i0, i1) (the rows the
// band needs, or a wider range `extra` rows further out) and compares its bits with the rows of
// the full computation.
static void check_band(const ff_layer *L, const float *in_full, const float *w, const float *b, const float *out_full,
                       int64_t n, int64_t o0, int64_t o1, int64_t extra) {
    const int64_t C = L->in.c, H = L->in.h, W = L->in.w, Co = L->out.c, Ho = L->out.h, Wo = L->out.w;
    ff_rows r = band_for(L, o0, o1);
    r.in_lo = r.in_lo - extra < 0 ? 0 : r.in_lo - extra;
    r.in_hi = r.in_hi + extra > H ? H : r.in_hi + extra;
    if (o1 <= o0) r.in_lo = r.in_hi = 0;
    const int64_t ib = r.in_hi - r.in_lo, ob = o1 - o0;
    float *in = malloc((size_t)(n * C * (ib > 0 ? ib : 1) * W) * sizeof(float));
    // one spare element on each side of the output band: a write outside it is caught
    float *outb = malloc((size_t)(n * Co * ob * Wo + 2) * sizeof(float));
    assert_non_null(in);
    assert_non_null(outb);
    for (int64_t p = 0; p < n * C; p++)
        memcpy(in + p * ib * W, in_full + (p * H + r.in_lo) * W, (size_t)(ib * W) * sizeof(float));
    const float guard = -12345.5f;
    outb[0] = guard;
    outb[n * Co * ob * Wo + 1] = guard;
    if (L->op == FF_OP_CONV2D)
        ff_cpu_conv2d(outb + 1, in, w, b, L, &r, n);
    else
        ff_cpu_layer_forward(outb + 1, in, w, b, L, &r, n);
    assert_true(fbits(outb[0]) == fbits(guard));
    assert_true(fbits(outb[n * Co * ob * Wo + 1]) == fbits(guard));
    for (int64_t p = 0; p < n * Co; p++) {
        char what[128];
        snprintf(what, sizeof what, "%s band [%lld,%lld) extra %lld plane %lld", L->name, (long long)o0, (long long)o1,
                 (long long)extra, (long long)p);
        check_bits(what, outb + 1 + p * ob * Wo, out_full + (p * Ho + o0) * Wo, ob * Wo);
    }
    free(in), free(outb);
}

static void band_identity(const ff_layer *L, trng *g, int64_t n) {
    const int64_t nin = n * ff_shape_numel(L->in), nout = n * ff_shape_numel(L->out);
    float *in = rand_buf(g, nin, 1.0f);
    float *w = L->op == FF_OP_CONV2D ? rand_buf(g, L->n_weight, 0.5f) : NULL;
    float *b = L->op == FF_OP_CONV2D ? rand_buf(g, L->n_bias, 0.5f) : NULL;
    float *out = malloc((size_t)nout * sizeof(float));
    assert_non_null(out);
    ff_rows full = ff_rows_full(L);
    ff_cpu_layer_forward(out, in, w, b, L, &full, n);
    const int64_t Ho = L->out.h;
    // every single row, the first and last halves, an empty band, and random bands
    for (int64_t o = 0; o < Ho; o++) check_band(L, in, w, b, out, n, o, o + 1, 0);
    check_band(L, in, w, b, out, n, 0, Ho / 2, 0);
    check_band(L, in, w, b, out, n, Ho / 2, Ho, 0);
    check_band(L, in, w, b, out, n, Ho / 2, Ho / 2, 0);
    for (int t = 0; t < 10; t++) {
        int64_t o0 = trng_int(g, 0, Ho - 1), o1 = trng_int(g, o0, Ho);
        check_band(L, in, w, b, out, n, o0, o1, trng_int(g, 0, 2));
    }
    // sub-batches: image i alone, and images [1, n) together, from offset pointers
    const int64_t ii = ff_shape_numel(L->in), oi = ff_shape_numel(L->out);
    float *sub = malloc((size_t)nout * sizeof(float));
    assert_non_null(sub);
    for (int64_t i = 0; i < n; i++) {
        ff_cpu_layer_forward(sub, in + i * ii, w, b, L, &full, 1);
        check_bits("sub-batch of one image", sub, out + i * oi, oi);
    }
    if (n > 1) {
        ff_cpu_layer_forward(sub, in + ii, w, b, L, &full, n - 1);
        check_bits("sub-batch [1, n)", sub, out + oi, (n - 1) * oi);
    }
    free(in), free(w), free(b), free(out), free(sub);
}

// Every wider copy of the conv kernel — AVX2 (8 k a vector, 8 pixels a block) and AVX-512 (16 k a
// vector, 12 pixels a block) — gives the 128-bit baseline's bits (8 k in two vectors, 4 pixels) on
// every geometry above, on partial k blocks (K = 9, 17, 23) and on rows whose width leaves every
// remainder 1-11 of a block; a one-bit difference is caught by the same comparison. A copy the CPU
// lacks is not compared; with neither wider copy the test reports itself skipped, not passed.
static void test_conv_wide_equals_baseline(void **state) {
    (void)state;
    const int was = ff_cpu_vector();  // restored at the end (FF_CPU_VECTOR may have chosen)
    const int widest = ff_cpu_set_vector(512);
    if (widest == 128) {
        ff_cpu_set_vector(was);
        skip();  // no AVX2 here: only the baseline exists (reported as skipped, not passed)
    }
    trng g = {11};
    // {n, C, H, W, K, kh, kw, stride, pad}: rows 13..24 wide (every remainder 0-11 of a 12-pixel
    // block, 1-7 of an 8-pixel one), K = 9, 17, 23, 33 (partial k blocks of 8 and 16), conv1's stride.
    conv_case extra[16] = {{2, 3, 6, 15, 9, 3, 3, 1, 1},
                           {1, 2, 5, 23, 17, 5, 5, 1, 2},
                           {1, 3, 9, 31, 9, 3, 3, 2, 0},
                           {1, 3, 15, 57, 20, 11, 11, 4, 0}};
    for (int i = 4; i < 16; i++) extra[i] = (conv_case){1 + i % 2, 2 + i % 3, 3, 9 + i, 33 - 8 * (i % 4), 3, 3, 1, 1};
    const int n_main = (int)(sizeof conv_cases / sizeof conv_cases[0]);
    const int n_extra = (int)(sizeof extra / sizeof extra[0]);
    for (int copy = 256; copy <= widest; copy *= 2)
        for (int i = 0; i < n_main + n_extra; i++) {
            const conv_case *cc = i < n_main ? &conv_cases[i] : &extra[i - n_main];
            ff_layer L = make_conv(cc->C, cc->H, cc->W, cc->K, cc->kh, cc->kw, cc->stride, cc->pad);
            const int64_t nin = cc->n * ff_shape_numel(L.in), nout = cc->n * ff_shape_numel(L.out);
            float *in = rand_buf(&g, nin, 1.0f), *w = rand_buf(&g, L.n_weight, 0.5f),
                  *b = rand_buf(&g, L.n_bias, 0.25f);
            float *wide = malloc((size_t)nout * sizeof(float)), *base = malloc((size_t)nout * sizeof(float));
            assert_non_null(wide);
            assert_non_null(base);
            ff_rows r = ff_rows_full(&L);
            assert_int_equal(ff_cpu_set_vector(copy), copy);
            ff_cpu_conv2d(wide, in, w, b, &L, &r, cc->n);
            assert_int_equal(ff_cpu_set_vector(128), 128);
            ff_cpu_conv2d(base, in, w, b, &L, &r, cc->n);
            assert_memory_equal(wide, base, (size_t)nout * sizeof(float));
            uint32_t u;
            memcpy(&u, &base[nout - 1], sizeof u);
            u ^= 1u;  // the last element one ulp off: the comparison must see it
            memcpy(&base[nout - 1], &u, sizeof u);
            assert_true(memcmp(wide, base, (size_t)nout * sizeof(float)) != 0);
            free(in), free(w), free(b), free(wide), free(base);
        }
    ff_cpu_set_vector(was);
}

static void test_conv_band_and_batch_identity(void **state) {
    (void)state;
    trng g = {7};
    ff_layer a = make_conv(3, 23, 23, 4, 11, 11, 4, 0);  // conv1-like: stride 4
    band_identity(&a, &g, 3);
    ff_layer c = make_conv(4, 13, 13, 5, 3, 3, 1, 1);  // conv3-like: pad 1
    band_identity(&c, &g, 2);
    ff_layer d = make_conv(2, 12, 9, 3, 5, 5, 1, 2);  // conv2-like: pad 2
    band_identity(&d, &g, 3);
    ff_layer e = make_conv(2, 10, 300, 2, 4, 3, 2, 3);  // strided, chunked gather, pad > kernel/2
    band_identity(&e, &g, 2);
    ff_layer f = make_conv(2, 30, 26, 2, 23, 23, 2, 1);  // 23x23: the plain loop nest
    band_identity(&f, &g, 2);
}

// ff_cpu_conv2d_segments (the mpi rows split's image groups, each with its own band): every
// segment equals ff_cpu_conv2d of that segment alone, bit for bit, for bands of different heights
// and images from different places in the batch; a segment fed another image's band does not.
static void test_conv_segments_equal_single_calls(void **state) {
    (void)state;
    trng g = {17};
    const ff_layer Ls[2] = {make_conv(6, 13, 13, 11, 3, 3, 1, 1), make_conv(3, 27, 27, 9, 5, 5, 1, 2)};
    for (int li = 0; li < 2; li++) {
        const ff_layer *L = &Ls[li];
        const int64_t n = 5, C = L->in.c, H = L->in.h, W = L->in.w, K = L->out.c, Ho = L->out.h, Wo = L->out.w;
        float *in = rand_buf(&g, n * C * H * W, 1.0f);
        float *w = rand_buf(&g, L->n_weight, 0.5f), *b = rand_buf(&g, L->n_bias, 0.5f);
        // three groups: images [0, 2) rows [0, 4), image 2 rows [4, 9), images [3, 5) rows [9, Ho)
        const int64_t img0[3] = {0, 2, 3}, nimg[3] = {2, 1, 2}, o0[3] = {0, 4, 9}, o1[3] = {4, 9, Ho};
        ff_conv_segment seg[3];
        float *want[3], *inb[3];
        for (int q = 0; q < 3; q++) {
            ff_rows r = band_for(L, o0[q], o1[q]);
            const int64_t ib = r.in_hi - r.in_lo, ob = o1[q] - o0[q];
            inb[q] = malloc((size_t)(nimg[q] * C * ib * W) * sizeof(float));
            want[q] = malloc((size_t)(nimg[q] * K * ob * Wo) * sizeof(float));
            assert_non_null(inb[q]);
            assert_non_null(want[q]);
            for (int64_t p = 0; p < nimg[q] * C; p++)
                memcpy(inb[q] + p * ib * W, in + ((img0[q] * C + p) * H + r.in_lo) * W,
                       (size_t)(ib * W) * sizeof(float));
            ff_cpu_conv2d(want[q], inb[q], w, b, L, &r, nimg[q]);
            seg[q].out = malloc((size_t)(nimg[q] * K * ob * Wo) * sizeof(float));
            assert_non_null(seg[q].out);
            seg[q].in = inb[q];
            seg[q].rows = r;
            seg[q].n = nimg[q];
        }
        ff_cpu_conv2d_segments(seg, 3, w, b, L);
        for (int q = 0; q < 3; q++)
            check_bits("segment vs single call", seg[q].out, want[q], nimg[q] * K * (o1[q] - o0[q]) * Wo);
        // negative: segment 1's band cut from another image (image 3) gives other bits
        ff_conv_segment wrong = seg[1];
        const int64_t ib1 = seg[1].rows.in_hi - seg[1].rows.in_lo;
        float *other = malloc((size_t)(C * ib1 * W) * sizeof(float));
        assert_non_null(other);
        for (int64_t p = 0; p < C; p++)
            memcpy(other + p * ib1 * W, in + ((3 * C + p) * H + seg[1].rows.in_lo) * W,
                   (size_t)(ib1 * W) * sizeof(float));
        wrong.in = other;
        ff_cpu_conv2d_segments(&wrong, 1, w, b, L);
        free(other);
        int64_t diff = 0;
        for (int64_t i = 0; i < nimg[1] * K * (o1[1] - o0[1]) * Wo; i++)
            diff += fbits(wrong.out[i]) != fbits(want[1][i]);
        assert_true(diff > 0);
        for (int q = 0; q < 3; q++) free(seg[q].out), free(want[q]), free(inb[q]);
        free(in), free(w), free(b);
    }
}

static void test_pool_band_and_batch_identity(void **state) {
    (void)state;
    trng g = {8};
    ff_layer a = make_pool(3, 27, 27, 3, 3, 2, 0);
    band_identity(&a, &g, 3);
    ff_layer b = make_pool(2, 9, 11, 3, 2, 2, 1);
    band_identity(&b, &g, 2);
}

static void test_lrn_band_and_batch_identity(void **state) {
    (void)state;
    trng g = {9};
    ff_layer L = make_lrn(9, 7, 5, 5, 1e-4f, 0.75f, 2.0f);
    const int64_t n = 3, HW = 35, C = 9;
    float *in = rand_buf(&g, n * C * HW, 4.0f);
    float *out = malloc((size_t)(n * C * HW) * sizeof(float));
    float *band = malloc((size_t)(n * C * HW) * sizeof(float));
    float *bin = malloc((size_t)(n * C * HW) * sizeof(float));
    assert_non_null(out);
    assert_non_null(band);
    assert_non_null(bin);
    ff_cpu_lrn(out, in, &L, 7, n);
    for (int64_t lo = 0; lo < 7; lo++)
        for (int64_t hi = lo; hi <= 7; hi++) {
            const int64_t rows = hi - lo;
            for (int64_t p = 0; p < n * C; p++)
                memcpy(bin + p * rows * 5, in + p * HW + lo * 5, (size_t)(rows * 5) * sizeof(float));
            ff_rows r = {lo, hi, lo, hi};
            ff_cpu_layer_forward(band, bin, NULL, NULL, &L, &r, n);
            for (int64_t p = 0; p < n * C; p++)
                check_bits("lrn band", band + p * rows * 5, out + p * HW + lo * 5, rows * 5);
        }
    ff_cpu_lrn(band, in + C * HW, &L, 7, 1);
    check_bits("lrn sub-batch", band, out + C * HW, C * HW);
    free(in), free(out), free(band), free(bin);
}

// The real layer tables (model.c): every spatial layer of both models, its output rows cut into
// P bands with the input rows ff_layer_input_rows asks for (what the MPI rows split sends), gives
// the bits of the full computation; and model.c's input rows agree with this file's band_for.
static void split_real_layer(const ff_layer *L, trng *g, int64_t n, const int64_t *ps, int nps) {
    const int64_t nin = n * ff_shape_numel(L->in), nout = n * ff_shape_numel(L->out);
    float *in = rand_buf(g, nin, 1.0f);
    float *w = L->op == FF_OP_CONV2D ? rand_buf(g, L->n_weight, 0.1f) : NULL;
    float *b = L->op == FF_OP_CONV2D ? rand_buf(g, L->n_bias, 0.1f) : NULL;
    float *out = malloc((size_t)nout * sizeof(float)), *band = malloc((size_t)nout * sizeof(float));
    float *bin = malloc((size_t)nin * sizeof(float));
    assert_non_null(out);
    assert_non_null(band);
    assert_non_null(bin);
    ff_rows full = ff_rows_full(L);
    ff_cpu_layer_forward(out, in, w, b, L, &full, n);
    const int64_t C = L->in.c, H = L->in.h, W = L->in.w, Co = L->out.c, Ho = L->out.h, Wo = L->out.w;
    for (int q = 0; q < nps; q++) {
        const int64_t P = ps[q];
        for (int64_t rank = 0; rank < P; rank++) {
            // the block split the MPI mode uses: rows [rank*Ho/P, (rank+1)*Ho/P)
            const int64_t o0 = rank * Ho / P, o1 = (rank + 1) * Ho / P;
            ff_range ir = ff_layer_input_rows(L, o0, o1);
            if (ff_layer_is_windowed(L) && o1 > o0) {
                ff_rows mine = band_for(L, o0, o1);
                assert_int_equal(ir.lo, mine.in_lo);
                assert_int_equal(ir.hi, mine.in_hi);
            }
            ff_rows r = {ir.lo, ir.hi, o0, o1};
            const int64_t ib = ir.hi - ir.lo, ob = o1 - o0;
            for (int64_t p = 0; p < n * C; p++)
                memcpy(bin + p * ib * W, in + (p * H + ir.lo) * W, (size_t)(ib * W) * sizeof(float));
            ff_cpu_layer_forward(band, bin, w, b, L, &r, n);
            for (int64_t p = 0; p < n * Co; p++) {
                char what[96];
                snprintf(what, sizeof what, "%s P=%lld rank %lld plane %lld", L->name, (long long)P, (long long)rank,
                         (long long)p);
                check_bits(what, band + p * ob * Wo, out + (p * Ho + o0) * Wo, ob * Wo);
            }
        }
    }
    free(in), free(w), free(b), free(out), free(band), free(bin);
}

static void test_real_models_row_split(void **state) {
    (void)state;
    trng g = {21};
    ff_model m;
    assert_int_equal(ff_model_init(&m, "alexnet"), FF_OK);
    const int64_t pa[] = {3, 64};  // 64 ranks: more ranks than rows (empty bands)
    for (int i = 0; i < m.n_layers; i++)
        if (ff_layer_is_spatial(&m.layers[i])) split_real_layer(&m.layers[i], &g, 1, pa, 2);
    assert_int_equal(ff_model_init(&m, "mnist-cnn"), FF_OK);
    const int64_t pm[] = {1, 2, 4, 5, 30};
    for (int i = 0; i < m.n_layers; i++)
        if (ff_layer_is_spatial(&m.layers[i])) split_real_layer(&m.layers[i], &g, 3, pm, 5);
}

// ------------------------------------------------------------------ relu

// torch.relu(tensor([-1, 0, 2.5, -0., nan, -inf, inf, 1e-45, -1e-45]))
//   = tensor([0, 0, 2.5, -0., nan, 0, inf, 1.4013e-45, 0])   (torch 1.13: -0.0 stays -0.0)
static void test_relu_hand(void **state) {
    (void)state;
    const float in[9] = {-1.0f, 0.0f, 2.5f, -0.0f, NAN, -INFINITY, INFINITY, 1e-45f, -1e-45f};
    const float want[9] = {0.0f, 0.0f, 2.5f, -0.0f, NAN, 0.0f, INFINITY, 1e-45f, 0.0f};
    float out[9];
    ff_cpu_relu(out, in, 9);
    for (int i = 0; i < 9; i++) {
        if (isnan(want[i])) {
            assert_true(isnan(out[i]));
        } else if (fbits(out[i]) != fbits(want[i])) {
            print_error("relu(%g) = %g (0x%08x), expected %g (0x%08x)\n", (double)in[i], (double)out[i], fbits(out[i]),
                        (double)want[i], fbits(want[i]));
            fail();
        }
    }
    // in place, and over a long buffer (the vectorised path) against the float64 rule
    trng g = {3};
    const int64_t cnt = 1027;
    float *x = rand_buf(&g, cnt, 3.0f), *y = malloc((size_t)cnt * sizeof(float));
    assert_non_null(y);
    x[100] = -0.0f;
    x[517] = NAN;
    ff_cpu_relu(y, x, cnt);
    for (int64_t i = 0; i < cnt; i++) {
        // The expected bits are selected as integers: clang 14 turns a floating-point
        // `x < 0 ? 0 : x` written here into a maxnum that returns +0.0 for -0.0 (seen on this
        // test's reference, not on the library's relu, which this test would then catch).
        const uint32_t want = x[i] < 0.0f ? 0u : fbits(x[i]);  // NaN and -0.0 pass through
        if (isnan(x[i]))
            assert_true(isnan(y[i]));
        else
            assert_true(fbits(y[i]) == want);
    }
    ff_cpu_relu(x, x, cnt);  // in place gives the same
    check_bits("relu in place", x, y, cnt);
    free(x), free(y);
}

// ------------------------------------------------------------------ maxpool

// 4x4 input, 2x2 window, stride 2:
//   [ 1  5 |  2  0 ]
//   [ 3  4 |  8  1 ]     -> [ 5  8 ]
//   [-1 -2 |  0  7 ]        [-1  9 ]
//   [-3 -4 |  6  9 ]
// 3x4 input, 3x3 window, stride 1 (overlapping) -> 1x2:
//   [1 2  2  3; 4 5 6 0; 7 8 -1 10]: cols 0-2 max 8, cols 1-3 max 10.
static void test_maxpool_hand(void **state) {
    (void)state;
    ff_layer L = make_pool(1, 4, 4, 2, 2, 2, 0);
    const float in[16] = {1, 5, 2, 0, 3, 4, 8, 1, -1, -2, 0, 7, -3, -4, 6, 9};
    float out[4];
    ff_rows r = ff_rows_full(&L);
    ff_cpu_maxpool(out, in, &L, &r, 1);
    const float want[4] = {5, 8, -1, 9};
    check_bits("maxpool 2x2/2", out, want, 4);

    ff_layer M = make_pool(1, 3, 4, 3, 3, 1, 0);
    const float in2[12] = {1, 2, 2, 3, 4, 5, 6, 0, 7, 8, -1, 10};
    float out2[2];
    r = ff_rows_full(&M);
    ff_cpu_maxpool(out2, in2, &M, &r, 1);
    const float want2[2] = {8, 10};
    check_bits("maxpool 3x3/1", out2, want2, 2);
}

// NaN propagates wherever it sits in the window; among equal maxima the first wins, so a window
// [-0, +0] gives -0.0 and [+0, -0] gives +0.0 (torch: max_pool2d([[-0., 0.]]) is -0.).
static void test_maxpool_nan_and_zero(void **state) {
    (void)state;
    ff_layer L = make_pool(1, 1, 6, 1, 2, 2, 0);
    const float in[6] = {5.0f, NAN, NAN, -1.0f, -0.0f, 0.0f};
    float out[3];
    ff_rows r = ff_rows_full(&L);
    ff_cpu_maxpool(out, in, &L, &r, 1);
    assert_true(isnan(out[0]));  // NaN after a larger value
    assert_true(isnan(out[1]));  // NaN first
    assert_true(fbits(out[2]) == fbits(-0.0f));
    const float in2[2] = {0.0f, -0.0f};
    ff_layer M = make_pool(1, 1, 2, 1, 2, 2, 0);
    r = ff_rows_full(&M);
    ff_cpu_maxpool(out, in2, &M, &r, 1);
    assert_true(fbits(out[0]) == fbits(0.0f));
    // a NaN in a 3x3/2 pool reaches exactly the windows that contain it (torch: 2 outputs for
    // (5, 6) in a 33x33 map)
    ff_layer P = make_pool(1, 33, 33, 3, 3, 2, 0);
    float *x = calloc(33 * 33, sizeof(float)), y[16 * 16];
    assert_non_null(x);
    x[5 * 33 + 6] = NAN;
    r = ff_rows_full(&P);
    ff_cpu_maxpool(y, x, &P, &r, 1);
    int nans = 0;
    for (int i = 0; i < 16 * 16; i++) nans += isnan(y[i]) ? 1 : 0;
    assert_int_equal(nans, 2);
    assert_true(isnan(y[2 * 16 + 2]) && isnan(y[2 * 16 + 3]));
    free(x);
}

// PyTorch's rule (the first maximum wins, a NaN wins and stays) on every window position of the
// models' windows (2x2 and 3x3 of stride 2: inside columns 4 at a time, then the tail) and of
// padded and stride-1 ones (edge columns one at a time), on values drawn from {-1, -0, +0, 1, NaN}
// so that ties of -0 and +0 and NaNs sit in every lane and tap: bit for bit against the rule
// written out per window. A full band and a band of rows [2, Ho) give the same bits.
static void test_maxpool_rule_every_position(void **state) {
    (void)state;
    trng g = {23};
    const float vals[5] = {-1.0f, -0.0f, 0.0f, 1.0f, NAN};
    const int geo[][4] = {{2, 2, 2, 0}, {3, 3, 2, 0}, {3, 3, 2, 1}, {2, 3, 1, 1}, {3, 2, 3, 0}};  // kh, kw, st, pad
    for (size_t t = 0; t < sizeof geo / sizeof geo[0]; t++) {
        const int kh = geo[t][0], kw = geo[t][1], st = geo[t][2], pad = geo[t][3];
        const int64_t C = 3, H = 11, W = 43, n = 2;
        ff_layer L = make_pool(C, H, W, kh, kw, st, pad);
        const int64_t Ho = L.out.h, Wo = L.out.w, nout = n * C * Ho * Wo;
        float *in = malloc((size_t)(n * C * H * W) * sizeof(float)), *out = malloc((size_t)nout * sizeof(float));
        float *want = malloc((size_t)nout * sizeof(float));
        assert_non_null(in);
        assert_non_null(out);
        assert_non_null(want);
        for (int64_t i = 0; i < n * C * H * W; i++) in[i] = vals[trng_int(&g, 0, 4)];
        for (int64_t p = 0; p < n * C; p++)
            for (int64_t oh = 0; oh < Ho; oh++)
                for (int64_t ow = 0; ow < Wo; ow++) {
                    float m = -INFINITY;
                    for (int64_t a = 0; a < kh; a++)
                        for (int64_t c = 0; c < kw; c++) {
                            const int64_t ih = oh * st - pad + a, iw = ow * st - pad + c;
                            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                            const float v = in[(p * H + ih) * W + iw];
                            if (v > m || isnan(v)) m = v;
                        }
                    want[(p * Ho + oh) * Wo + ow] = m;
                }
        ff_rows r = ff_rows_full(&L);
        ff_cpu_maxpool(out, in, &L, &r, n);
        check_bits("maxpool rule", out, want, nout);
        // rows [2, Ho) from the input rows they need
        ff_rows band = {2 * st - pad, H, 2, Ho};
        if (band.in_lo < 0) band.in_lo = 0;
        const int64_t in_rows = band.in_hi - band.in_lo, out_rows = Ho - 2;
        float *bin = malloc((size_t)(n * C * in_rows * W) * sizeof(float));
        float *bout = malloc((size_t)(n * C * out_rows * Wo) * sizeof(float));
        assert_non_null(bin);
        assert_non_null(bout);
        for (int64_t p = 0; p < n * C; p++)
            memcpy(bin + p * in_rows * W, in + (p * H + band.in_lo) * W, (size_t)(in_rows * W) * sizeof(float));
        ff_cpu_maxpool(bout, bin, &L, &band, n);
        for (int64_t p = 0; p < n * C; p++)
            check_bits("maxpool rule, band", bout + p * out_rows * Wo, want + (p * Ho + 2) * Wo, out_rows * Wo);
        free(in), free(out), free(want), free(bin), free(bout);
    }
}

static void test_maxpool_vs_reference(void **state) {
    (void)state;
    trng g = {11};
    for (int t = 0; t < 40; t++) {
        int kh = (int)trng_int(&g, 1, 4), kw = (int)trng_int(&g, 1, 4), st = (int)trng_int(&g, 1, 3);
        int pad = (int)trng_int(&g, 0, kh < kw ? kh / 2 : kw / 2);  // PyTorch: pad <= kernel/2
        int64_t H = trng_int(&g, kh, 15), W = trng_int(&g, kw, 15), C = trng_int(&g, 1, 4), n = trng_int(&g, 1, 2);
        ff_layer L = make_pool(C, H, W, kh, kw, st, pad);
        const int64_t Ho = L.out.h, Wo = L.out.w, nout = n * C * Ho * Wo;
        float *in = rand_buf(&g, n * C * H * W, 2.0f), *out = malloc((size_t)nout * sizeof(float));
        float *want = malloc((size_t)nout * sizeof(float));
        assert_non_null(out);
        assert_non_null(want);
        ff_rows r = ff_rows_full(&L);
        ff_cpu_maxpool(out, in, &L, &r, n);
        for (int64_t p = 0; p < n * C; p++)
            for (int64_t oh = 0; oh < Ho; oh++)
                for (int64_t ow = 0; ow < Wo; ow++) {
                    double m = -INFINITY;
                    for (int64_t a = 0; a < kh; a++)
                        for (int64_t c = 0; c < kw; c++) {
                            int64_t ih = oh * st - pad + a, iw = ow * st - pad + c;
                            if (ih >= 0 && ih < H && iw >= 0 && iw < W && in[(p * H + ih) * W + iw] > m)
                                m = in[(p * H + ih) * W + iw];
                        }
                    want[(p * Ho + oh) * Wo + ow] = (float)m;
                }
        check_bits("maxpool vs reference", out, want, nout);
        free(in), free(out), free(want);
    }
}

// ------------------------------------------------------------------ lrn

// size 4, alpha 4 (alpha/size = 1), beta 1, k 1: b_c = a_c / (1 + sum of a^2 over the window),
// window = [c - 2, c + 1] clipped (PyTorch: c - size/2 .. c + (size-1)/2). One pixel, a = 1..5:
//   c=0: [0,1] 1+4 = 5        -> 1/6
//   c=1: [0,2] 1+4+9 = 14     -> 2/15
//   c=2: [0,3] 1+4+9+16 = 30  -> 3/31   (a window mirrored to [c-1, c+2] would give 3/55)
//   c=3: [1,4] 4+9+16+25 = 54 -> 4/55
//   c=4: [2,4] 9+16+25 = 50   -> 5/51
// Every step is exact in float32 except the final division, which is correctly rounded.
// Then beta 0.5, k 0, size 4, alpha 4, a = (3, 4): both windows hold both channels: sqrt(25) = 5,
// so b = (3/5, 4/5).
static void test_lrn_hand(void **state) {
    (void)state;
    ff_layer L = make_lrn(5, 1, 1, 4, 4.0f, 1.0f, 1.0f);
    const float in[5] = {1, 2, 3, 4, 5};
    float out[5];
    ff_cpu_lrn(out, in, &L, 1, 1);
    const float want[5] = {1.0f / 6.0f, 2.0f / 15.0f, 3.0f / 31.0f, 4.0f / 55.0f, 5.0f / 51.0f};
    check_bits("lrn size 4", out, want, 5);

    ff_layer M = make_lrn(2, 1, 1, 4, 4.0f, 0.5f, 0.0f);
    const float in2[2] = {3, 4};
    ff_cpu_lrn(out, in2, &M, 1, 1);
    const float want2[2] = {3.0f / 5.0f, 4.0f / 5.0f};
    check_bits("lrn beta 0.5", out, want2, 2);
}

// Against float64 (PyTorch's formula evaluated in double from the float32 input). Bound, relative:
// the sum of at most `size` non-negative squares carries gamma_{size+1} (squares rounded, then
// added); /size, *alpha and +k (k > 0, all terms positive) add 3 roundings; a relative error e in
// the base becomes beta*e after pow, plus 1 rounding of pow; the division adds 1. So
//   |b - b64| <= (beta * (gamma_{size+1} + 3u) + 2u) * |b64|   (to first order; x1.01 margin).
static void test_lrn_vs_float64(void **state) {
    (void)state;
    trng g = {12};
    const int sizes[4] = {1, 2, 5, 6};
    for (int t = 0; t < 8; t++) {
        int size = sizes[t % 4];
        const int64_t C = trng_int(&g, 1, 12), H = trng_int(&g, 1, 5), W = trng_int(&g, 1, 5), n = 2;
        const float alpha = t < 4 ? 1e-4f : 0.5f, beta = t % 2 ? 0.75f : 0.6f, k = t < 6 ? 2.0f : 1.0f;
        ff_layer L = make_lrn(C, H, W, size, alpha, beta, k);
        const int64_t HW = H * W, cnt = n * C * HW;
        float *in = rand_buf(&g, cnt, t < 4 ? 50.0f : 3.0f), *out = malloc((size_t)cnt * sizeof(float));
        double *ref = malloc((size_t)cnt * sizeof(double)), *bound = malloc((size_t)cnt * sizeof(double));
        assert_non_null(out);
        assert_non_null(ref);
        assert_non_null(bound);
        ff_cpu_lrn(out, in, &L, H, n);
        const double rel = ((double)beta * (gamma_k(size + 1) + 3 * U) + 2 * U) * 1.01;
        for (int64_t i = 0; i < n; i++)
            for (int64_t c = 0; c < C; c++)
                for (int64_t p = 0; p < HW; p++) {
                    double s = 0;
                    for (int64_t cc = c - size / 2; cc <= c + (size - 1) / 2; cc++)
                        if (cc >= 0 && cc < C) s += (double)in[(i * C + cc) * HW + p] * in[(i * C + cc) * HW + p];
                    double d = pow((double)k + (double)alpha / size * s, (double)beta);
                    int64_t o = (i * C + c) * HW + p;
                    ref[o] = in[o] / d;
                    bound[o] = rel * fabs(ref[o]);
                    if (bound[o] == 0) bound[o] = 1e-300;  // a = 0 gives exactly 0
                }
        check_bound("lrn vs float64", out, ref, bound, cnt);
        free(in), free(out), free(ref), free(bound);
    }
}

// ------------------------------------------------------------------ linear

// I = 3, J = 2, batch 2:  w = [1 2 3; -1 0 0.5], b = (0.5, -1)
//   x = (1, -1, 2): y0 = 0.5 + 1 - 2 + 6 = 5.5     y1 = -1 - 1 + 0 + 1 = -1
//   x = (0, 1, 0):  y0 = 0.5 + 2 = 2.5             y1 = -1 + 0 = -1
static void test_linear_hand(void **state) {
    (void)state;
    ff_layer L = make_linear(3, 2);
    const float w[6] = {1, 2, 3, -1, 0, 0.5f}, b[2] = {0.5f, -1}, x[6] = {1, -1, 2, 0, 1, 0};
    float y[4];
    ff_cpu_linear(y, x, w, b, &L, 2);
    const float want[4] = {5.5f, -1, 2.5f, -1};
    check_bits("linear hand", y, want, 4);

    // J = 9 (a block of 8 rows and one more): row j = (j, 1, -1), b_j = j/2, x = (1, 2, 3):
    //   y_j = j/2 + j + 2 - 3 = 1.5 j - 1
    ff_layer M = make_linear(3, 9);
    float w9[27], b9[9], y9[9];
    for (int j = 0; j < 9; j++) w9[3 * j] = (float)j, w9[3 * j + 1] = 1, w9[3 * j + 2] = -1, b9[j] = 0.5f * (float)j;
    const float x9[3] = {1, 2, 3};
    ff_cpu_linear(y9, x9, w9, b9, &M, 1);
    for (int j = 0; j < 9; j++) assert_true(y9[j] == 1.5f * (float)j - 1.0f);
}

// Order: b = s, row = (2^24 s, -2^24 s), x = (1, 1), s = 2^(j%3) so that rows differ:
// (s + 2^24 s) rounds to 2^24 s (a tie, to even), then - 2^24 s gives 0 in the documented order;
// bias last or i descending give s. J = 11 rows: a block of 8 and 3 remainder rows.
// b[j] + big*s - big*s: in the documented order the bias is lost in the first add and the result
// is exactly 0; any other order keeps s. For one image (the scalar rows) and for 20 (images in
// the lanes of each copy the CPU has: 20 leaves a partial vector).
static void test_linear_summation_order(void **state) {
    (void)state;
    const float big = 16777216.0f;
    const int64_t J = 11, n = 20;
    ff_layer L = make_linear(2, J);
    float w[22], b[11], y[11 * 20], x[2 * 20];
    for (int64_t j = 0; j < J; j++) {
        float s = (float)(1 << (j % 3));
        w[2 * j] = big * s, w[2 * j + 1] = -big * s, b[j] = s;
    }
    for (int64_t i = 0; i < 2 * n; i++) x[i] = 1;
    const int was = ff_cpu_vector();
    for (int copy = 128; copy <= 512; copy *= 2) {
        if (ff_cpu_set_vector(copy) != copy) continue;  // a copy this CPU lacks
        ff_cpu_linear(y, x, w, b, &L, 1);
        for (int64_t j = 0; j < J; j++) assert_true(fbits(y[j]) == fbits(0.0f));
        ff_cpu_linear(y, x, w, b, &L, n);
        for (int64_t j = 0; j < n * J; j++) assert_true(fbits(y[j]) == fbits(0.0f));
    }
    ff_cpu_set_vector(was);
}

// Every copy of the linear kernel gives the baseline's bits (the scalar rows) for batches that fill
// one, two or four vectors of images, partly or whole, for input counts around the 128-input chunk
// and feature counts that leave partial blocks of features; a one-bit difference is seen.
static void test_linear_copies_equal_baseline(void **state) {
    (void)state;
    const int was = ff_cpu_vector();
    const int widest = ff_cpu_set_vector(512);
    if (widest == 128) {
        ff_cpu_set_vector(was);
        skip();  // no AVX2 here: only the baseline exists (reported as skipped, not passed)
    }
    trng g = {29};
    const int64_t Is[] = {1, 127, 128, 129, 300}, Js[] = {1, 3, 17, 33}, ns[] = {3, 4, 5, 16, 17, 33, 64, 70};
    for (size_t a = 0; a < sizeof Is / sizeof Is[0]; a++)
        for (size_t c = 0; c < sizeof Js / sizeof Js[0]; c++)
            for (size_t d = 0; d < sizeof ns / sizeof ns[0]; d++) {
                const int64_t I = Is[a], J = Js[c], n = ns[d];
                ff_layer L = make_linear(I, J);
                float *x = rand_buf(&g, n * I, 1.0f), *w = rand_buf(&g, I * J, 0.5f), *b = rand_buf(&g, J, 0.5f);
                float *base = malloc((size_t)(n * J) * sizeof(float)), *y = malloc((size_t)(n * J) * sizeof(float));
                assert_non_null(base);
                assert_non_null(y);
                assert_int_equal(ff_cpu_set_vector(128), 128);
                ff_cpu_linear(base, x, w, b, &L, n);
                for (int copy = 256; copy <= widest; copy *= 2) {
                    assert_int_equal(ff_cpu_set_vector(copy), copy);
                    ff_cpu_linear(y, x, w, b, &L, n);
                    assert_memory_equal(y, base, (size_t)(n * J) * sizeof(float));
                    uint32_t u;
                    memcpy(&u, &y[n * J - 1], sizeof u);
                    u ^= 1u;  // the last element one ulp off: the comparison must see it
                    memcpy(&y[n * J - 1], &u, sizeof u);
                    assert_true(memcmp(y, base, (size_t)(n * J) * sizeof(float)) != 0);
                }
                free(x), free(w), free(b), free(base), free(y);
            }
    ff_cpu_set_vector(was);
}

static void test_linear_vs_float64(void **state) {
    (void)state;
    trng g = {13};
    const int64_t shapes[][3] = {{1, 1, 1}, {7, 1, 1}, {1, 9, 2}, {300, 17, 3}, {64, 8, 1}, {5, 16, 4}, {1000, 23, 2}};
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
        const int64_t I = shapes[t][0], J = shapes[t][1], n = shapes[t][2];
        ff_layer L = make_linear(I, J);
        float *x = rand_buf(&g, n * I, 1.0f), *w = rand_buf(&g, I * J, 0.5f), *b = rand_buf(&g, J, 0.5f);
        float *y = malloc((size_t)(n * J) * sizeof(float)), *y1 = malloc((size_t)J * sizeof(float));
        double *ref = malloc((size_t)(n * J) * sizeof(double)), *bound = malloc((size_t)(n * J) * sizeof(double));
        assert_non_null(y);
        assert_non_null(y1);
        assert_non_null(ref);
        assert_non_null(bound);
        ff_cpu_linear(y, x, w, b, &L, n);
        ref_linear(ref, bound, x, w, b, I, J, n);
        check_bound("linear vs float64", y, ref, bound, n * J);
        for (int64_t i = 0; i < n; i++) {  // each image alone gives the same bits
            ff_rows full = {0, 1, 0, 1};
            ff_cpu_layer_forward(y1, x + i * I, w, b, &L, &full, 1);
            check_bits("linear sub-batch", y1, y + i * J, J);
        }
        free(x), free(w), free(b), free(y), free(y1), free(ref), free(bound);
    }
}

// ------------------------------------------------------------------ softmax

// (0, 0, 0, 0) -> 1/4 each (exp(0) = 1, sum 4, exact); (1000, 1000) -> 1/2 each (the max is
// subtracted first, so exp never overflows); (3, 3 + ln 3) -> (1/4, 3/4) up to the rounding of
// ln 3 to float (relative 2^-24 * ln 3 in exp's argument) and three roundings: 3e-7 absolute.
// A NaN makes the whole row NaN (torch.softmax(tensor([nan, 1.])) = tensor([nan, nan])).
static void test_softmax_hand(void **state) {
    (void)state;
    float y[4];
    const float z[4] = {0, 0, 0, 0};
    ff_cpu_softmax(y, z, 4, 1);
    for (int i = 0; i < 4; i++) assert_true(y[i] == 0.25f);
    const float big[2] = {1000, 1000};
    ff_cpu_softmax(y, big, 2, 1);
    assert_true(y[0] == 0.5f && y[1] == 0.5f);
    const float l3[2] = {3.0f, 3.0f + (float)log(3.0)};
    ff_cpu_softmax(y, l3, 2, 1);
    assert_true(fabs(y[0] - 0.25) <= 3e-7 && fabs(y[1] - 0.75) <= 3e-7);
    const float two[8] = {NAN, 1, 2, 3, /* second image, finite: */ 1, 1, 1, 1};
    float y2[8];
    ff_cpu_softmax(y2, two, 4, 2);
    for (int i = 0; i < 4; i++) assert_true(isnan(y2[i]));
    for (int i = 4; i < 8; i++) assert_true(y2[i] == 0.25f);
}

// Against float64. With d_i = x_i - m rounded (absolute error <= u|d_i|), exp(d_i) carries relative
// error |d_i|*u from its argument plus 1 rounding; the sum of n positive terms gamma_{n} more; the
// division 1 more:  |y - y64| <= ((|d_i| + 2) u + gamma_n + u) |y64| (x1.01 margin), where the sum's
// error also inherits the terms' own errors, bounded by max_i (|d_i| + 1) u.
static void test_softmax_vs_float64(void **state) {
    (void)state;
    trng g = {14};
    const int64_t sizes[] = {1, 2, 10, 1000};
    for (size_t t = 0; t < 4; t++) {
        const int64_t cls = sizes[t], n = 3, cnt = cls * n;
        float *x = rand_buf(&g, cnt, 12.0f), *y = malloc((size_t)cnt * sizeof(float));
        double *ref = malloc((size_t)cnt * sizeof(double)), *bound = malloc((size_t)cnt * sizeof(double));
        assert_non_null(y);
        assert_non_null(ref);
        assert_non_null(bound);
        ff_cpu_softmax(y, x, cls, n);
        for (int64_t i = 0; i < n; i++) {
            double m = -INFINITY, s = 0, dmax = 0;
            for (int64_t c = 0; c < cls; c++) m = fmax(m, x[i * cls + c]);
            for (int64_t c = 0; c < cls; c++) {
                s += exp((double)x[i * cls + c] - m);
                dmax = fmax(dmax, m - x[i * cls + c]);
            }
            for (int64_t c = 0; c < cls; c++) {
                double d = m - x[i * cls + c];
                ref[i * cls + c] = exp(-d) / s;
                bound[i * cls + c] = ((d + 2) * U + gamma_k(cls) + (dmax + 1) * U + U) * 1.01 * ref[i * cls + c];
            }
        }
        check_bound("softmax vs float64", y, ref, bound, cnt);
        free(x), free(y), free(ref), free(bound);
    }
}

// ------------------------------------------------------------------ layer_forward dispatch

// Flatten is a copy; every op reaches its own function (checked against a direct call).
static void test_layer_forward_dispatch(void **state) {
    (void)state;
    trng g = {15};
    float *x = rand_buf(&g, 2 * 24, 2.0f), y[48], z[48];
    ff_layer F;
    memset(&F, 0, sizeof F);
    F.name = "flatten";
    F.op = FF_OP_FLATTEN;
    F.in = (ff_shape){2, 3, 4};
    F.out = (ff_shape){24, 1, 1};
    ff_rows full = {0, 1, 0, 1};
    ff_cpu_layer_forward(y, x, NULL, NULL, &F, &full, 2);
    check_bits("flatten", y, x, 48);

    ff_layer R;
    memset(&R, 0, sizeof R);
    R.name = "relu";
    R.op = FF_OP_RELU;
    R.in = R.out = (ff_shape){2, 3, 4};
    ff_rows band = {1, 3, 1, 3};  // a band of 2 rows: 2 images * 2 channels * 2 rows * 4 = 32
    y[32] = 7.0f;
    ff_cpu_layer_forward(y, x, NULL, NULL, &R, &band, 2);
    ff_cpu_relu(z, x, 32);
    check_bits("relu via layer_forward", y, z, 32);
    assert_true(y[32] == 7.0f);  // nothing written past the band

    ff_layer S;
    memset(&S, 0, sizeof S);
    S.name = "softmax";
    S.op = FF_OP_SOFTMAX;
    S.in = S.out = (ff_shape){24, 1, 1};
    ff_cpu_layer_forward(y, x, NULL, NULL, &S, &full, 2);
    ff_cpu_softmax(z, x, 24, 2);
    check_bits("softmax via layer_forward", y, z, 48);
    free(x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_hand_simple),
        cmocka_unit_test(test_conv_segments_equal_single_calls),
        cmocka_unit_test(test_conv_hand_pad_stride),
        cmocka_unit_test(test_conv_summation_order),
        cmocka_unit_test(test_conv_vs_float64),
        cmocka_unit_test(test_conv_band_and_batch_identity),
        cmocka_unit_test(test_conv_wide_equals_baseline),
        cmocka_unit_test(test_pool_band_and_batch_identity),
        cmocka_unit_test(test_lrn_band_and_batch_identity),
        cmocka_unit_test(test_real_models_row_split),
        cmocka_unit_test(test_relu_hand),
        cmocka_unit_test(test_maxpool_hand),
        cmocka_unit_test(test_maxpool_nan_and_zero),
        cmocka_unit_test(test_maxpool_vs_reference),
        cmocka_unit_test(test_maxpool_rule_every_position),
        cmocka_unit_test(test_lrn_hand),
        cmocka_unit_test(test_lrn_vs_float64),
        cmocka_unit_test(test_linear_hand),
        cmocka_unit_test(test_linear_summation_order),
        cmocka_unit_test(test_linear_copies_equal_baseline),
        cmocka_unit_test(test_linear_vs_float64),
        cmocka_unit_test(test_softmax_hand),
        cmocka_unit_test(test_softmax_vs_float64),
        cmocka_unit_test(test_layer_forward_dispatch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
