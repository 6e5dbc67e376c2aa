// Bit identity of ff_cpu_conv2d with the plain loop nest of the documented summation order
// (layers_cpu.h: out = b[k]; then for c, r, s ascending, padding taps skipped: out += w * x, one
// float32 multiply and one float32 add each). The blocked kernel (8 k in vector lanes, 4 pixels in
// registers, channel chunks continued through the output buffer, a scalar path for very wide
// kernels) must give exactly these bits. Shapes are chosen to reach every path: K % 8 != 0 (partial
// lane blocks), Wo % 4 = 0..3 (pixel tails), stride 1..4 with pads that make edge pixels skip taps,
// C*R*S large enough to be split into several packed channel chunks, R*S > 512 (the scalar path),
// and row bands with in_lo > 0. Values span many binades (and include -0.0) so that any other order
// or a dropped/extra term changes bits.
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

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}
// A float in +-[2^-12, 2^12), or -0.0 now and then.
static float rnd_float(void) {
    if (rnd() % 64 == 0) return -0.0f;
    const float m = 1.0f + (float)(rnd() % 8388608u) / 8388608.0f;
    const float v = ldexpf(m, (int)(rnd() % 24) - 12);
    return rnd() % 2 ? -v : v;
}

// The documented order, written out plainly, float32.
static void conv_plain(float *out, const float *in, const float *w, const float *b, const ff_layer *L,
                       const ff_rows *rows, int64_t n) {
    const int64_t C = L->in.c, H = L->in.h, W = L->in.w, K = L->out.c, Wo = L->out.w;
    const int64_t in_rows = rows->in_hi - rows->in_lo, out_rows = rows->out_hi - rows->out_lo;
    for (int64_t img = 0; img < n; img++)
        for (int64_t k = 0; k < K; k++)
            for (int64_t oh = rows->out_lo; oh < rows->out_hi; oh++)
                for (int64_t ow = 0; ow < Wo; ow++) {
                    float a = b[k];
                    for (int64_t c = 0; c < C; c++)
                        for (int64_t r = 0; r < L->kh; r++)
                            for (int64_t s = 0; s < L->kw; s++) {
                                const int64_t ih = oh * L->stride - L->pad + r;
                                const int64_t iw = ow * L->stride - L->pad + s;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                const float p = w[((k * C + c) * L->kh + r) * L->kw + s] *
                                                in[((img * C + c) * in_rows + ih - rows->in_lo) * W + iw];
                                a = a + p;
                            }
                    out[((img * K + k) * out_rows + oh - rows->out_lo) * Wo + ow] = a;
                }
}

static ff_layer conv_layer(int64_t C, int64_t H, int64_t W, int64_t K, int kh, int kw, int st, int pad) {
    ff_layer L;
    memset(&L, 0, sizeof L);
    L.name = "conv";
    L.op = FF_OP_CONV2D;
    L.out_c = K, L.kh = kh, L.kw = kw, L.stride = st, L.pad = pad;
    L.in = (ff_shape){C, H, W};
    L.out = (ff_shape){K, (H + 2 * pad - kh) / st + 1, (W + 2 * pad - kw) / st + 1};
    return L;
}

// Runs one shape on the full map and on a band [o0, o1); returns the number of differing elements.
static int64_t check_shape(int64_t C, int64_t H, int64_t W, int64_t K, int kh, int kw, int st, int pad, int64_t n,
                           int64_t o0, int64_t o1) {
    const ff_layer L = conv_layer(C, H, W, K, kh, kw, st, pad);
    const ff_range ir = ff_layer_input_rows(&L, o0, o1);
    const ff_rows rows = {ir.lo, ir.hi, o0, o1};
    const int64_t in_n = n * C * (ir.hi - ir.lo) * W, out_n = n * K * (o1 - o0) * L.out.w;
    float *in = malloc(sizeof(float) * (size_t)in_n), *w = malloc(sizeof(float) * (size_t)(K * C * kh * kw));
    float *b = malloc(sizeof(float) * (size_t)K);
    float *got = malloc(sizeof(float) * (size_t)out_n), *want = malloc(sizeof(float) * (size_t)out_n);
    assert_non_null(in), assert_non_null(w), assert_non_null(b), assert_non_null(got), assert_non_null(want);
    for (int64_t i = 0; i < in_n; i++) in[i] = rnd_float();
    for (int64_t i = 0; i < K * C * kh * kw; i++) w[i] = rnd_float();
    for (int64_t i = 0; i < K; i++) b[i] = rnd_float();
    conv_plain(want, in, w, b, &L, &rows, n);
    ff_cpu_conv2d(got, in, w, b, &L, &rows, n);
    int64_t bad = 0;
    for (int64_t i = 0; i < out_n; i++) bad += memcmp(&got[i], &want[i], sizeof(float)) != 0;
    if (bad)
        fprintf(stderr, "C=%ld H=%ld W=%ld K=%ld %dx%d st=%d pad=%d n=%ld rows [%ld,%ld): %ld of %ld differ\n", (long)C,
                (long)H, (long)W, (long)K, kh, kw, st, pad, (long)n, (long)o0, (long)o1, (long)bad, (long)out_n);
    free(in), free(w), free(b), free(got), free(want);
    return bad;
}

// K % 8 and Wo % 4 over all residues, strides 1..4, pads up to kernel-1.
static void test_conv_blocks_and_tails(void **state) {
    (void)state;
    int64_t bad = 0;
    for (int64_t K = 1; K <= 17; K += 3)
        for (int64_t W = 5; W <= 12; W++)
            for (int st = 1; st <= 4; st++) {
                const int k = 1 + (int)(rnd() % 5), pad = (int)(rnd() % (unsigned)k);
                const ff_layer L = conv_layer(3, 9, W, K, k, k, st, pad);
                if (L.out.h <= 0 || L.out.w <= 0 || W + 2 * pad < k) continue;
                bad += check_shape(3, 9, W, K, k, k, st, pad, 2, 0, L.out.h);
            }
    assert_int_equal(bad, 0);
}

// AlexNet-like layers (several packed channel chunks: C*R*S*8 > 4096 floats) on full maps and bands.
static void test_conv_channel_chunks_and_bands(void **state) {
    (void)state;
    int64_t bad = 0;
    bad += check_shape(70, 13, 13, 24, 3, 3, 1, 1, 2, 0, 13);   // 56 channels per chunk: 2 chunks
    bad += check_shape(70, 13, 13, 24, 3, 3, 1, 1, 2, 5, 8);    // band inside the map
    bad += check_shape(70, 13, 13, 20, 3, 3, 1, 1, 1, 12, 13);  // last row only
    bad += check_shape(40, 15, 15, 16, 5, 5, 1, 2, 2, 3, 7);    // 20 channels per chunk
    bad += check_shape(5, 37, 37, 9, 11, 11, 4, 2, 1, 2, 6);    // conv1-like stride 4
    assert_int_equal(bad, 0);
}

// R*S*8 > 4096 floats: the scalar path for very wide kernels.
static void test_conv_wide_kernel(void **state) {
    (void)state;
    assert_int_equal(check_shape(2, 26, 27, 3, 23, 23, 1, 3, 1, 0, 10), 0);
    assert_int_equal(check_shape(2, 26, 27, 3, 23, 23, 2, 1, 2, 1, 3), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_blocks_and_tails),
        cmocka_unit_test(test_conv_channel_chunks_and_bands),
        cmocka_unit_test(test_conv_wide_kernel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
