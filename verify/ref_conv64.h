// The float64 conv reference the tests share (verify/unit/test_layers_cpu.c, verify/gpu/
// test_gpu_layers.c): written directly from the definition, sharing no code with any layer.
#pragma once
#include <math.h>
#include <stdint.h>

#include "fivefold/model.h"

// out64: (n, K, Ho, Wo) in float64; absdot: |b| + sum |w x| per output; terms (NULL: not wanted):
// the bias plus the taps inside the input per output (padding taps are not terms). in: (n, C, H, W).
static inline void ff_ref_conv64(double *out64, double *absdot, int64_t *terms, const float *in, const float *w,
                                 const float *b, const ff_layer *L, int64_t n) {
    const int64_t C = L->in.c, H = L->in.h, W = L->in.w, K = L->out.c, Ho = L->out.h, Wo = L->out.w;
    for (int64_t i = 0; i < n; i++)
        for (int64_t k = 0; k < K; k++)
            for (int64_t oh = 0; oh < Ho; oh++)
                for (int64_t ow = 0; ow < Wo; ow++) {
                    double s = b[k], a = fabs((double)b[k]);
                    int64_t t = 1;
                    for (int64_t c = 0; c < C; c++)
                        for (int64_t r = 0; r < L->kh; r++)
                            for (int64_t q = 0; q < L->kw; q++) {
                                const int64_t ih = oh * L->stride + r - L->pad, iw = ow * L->stride + q - L->pad;
                                if (ih < 0 || iw < 0 || ih >= H || iw >= W) continue;
                                const double p = (double)w[((k * C + c) * L->kh + r) * L->kw + q] *
                                                 (double)in[((i * C + c) * H + ih) * W + iw];
                                s += p, a += fabs(p), t++;
                            }
                    const int64_t o = ((i * K + k) * Ho + oh) * Wo + ow;
                    out64[o] = s, absdot[o] = a;
                    if (terms) terms[o] = t;
                }
}
