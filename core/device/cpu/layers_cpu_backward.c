// Backward of the CPU reference layers. The summation order of every output element is the one
// documented in layers_cpu_backward.h; loops are arranged so that the innermost loop runs over
// independent output elements (contiguous, vectorisable without reassociation) while each element
// still receives its terms in the documented order.
//
// A term whose dy factor is exactly zero is skipped (relu zeroes about half of every gradient):
// it would add +-0, which leaves a running sum unchanged whenever the other factor is finite. With
// non-finite activations or weights the skipped 0 * inf would have been NaN; training on such
// values is already lost, so the skip is documented rather than paid for.
#include "fivefold/layers_cpu_backward.h"

#include "conv_cpu_private.h"

#include <math.h>
#include <string.h>

int64_t ff_cpu_conv2d_backward_weights_scratch(const ff_layer *L) {
    return L->out.h * L->out.w * L->in.c * L->kh * L->kw;
}

// colT (Ho*Wo, C*R*S): row p holds the C*R*S input values output position p multiplies, 0 for
// padding taps.
static void im2col_t(float *colT, const float *x, const ff_layer *L) {
    const int64_t C = L->in.c, H = L->in.h, W = L->in.w, R = L->kh, S = L->kw;
    const int64_t Ho = L->out.h, Wo = L->out.w, st = L->stride, pad = L->pad;
    const int64_t CRS = C * R * S;
    for (int64_t oh = 0; oh < Ho; oh++)
        for (int64_t ow = 0; ow < Wo; ow++) {
            float *row = colT + (oh * Wo + ow) * CRS;
            for (int64_t c = 0; c < C; c++)
                for (int64_t r = 0; r < R; r++) {
                    int64_t ih = oh * st - pad + r;
                    for (int64_t s = 0; s < S; s++) {
                        int64_t iw = ow * st - pad + s;
                        *row++ = (ih >= 0 && ih < H && iw >= 0 && iw < W) ? x[(c * H + ih) * W + iw] : 0.0f;
                    }
                }
        }
}

#define FF_BWD_BLOCK 32

void ff_cpu_conv2d_backward_weights(float *dw, float *db, const float *dy, const float *x, const ff_layer *L, int64_t n,
                                    float *scratch) {
    const int64_t K = L->out_c, C = L->in.c, H = L->in.h, W = L->in.w;
    const int64_t P = L->out.h * L->out.w, CRS = C * L->kh * L->kw;
    memset(dw, 0, (size_t)(K * CRS) * sizeof *dw);
    memset(db, 0, (size_t)K * sizeof *db);
    for (int64_t i = 0; i < n; i++) {
        im2col_t(scratch, x + i * C * H * W, L);
        const float *dyi = dy + i * K * P;
        for (int64_t k = 0; k < K; k++) {
            const float *dyk = dyi + k * P;
            float *dwk = dw + k * CRS;
            float bsum = db[k];
            for (int64_t p = 0; p < P; p++) bsum += dyk[p];
            db[k] = bsum;
            // Blocks of FF_BWD_BLOCK weights kept in registers across the whole p loop; each weight
            // still receives its terms in p order.
            int64_t c0 = 0;
            for (; c0 + FF_BWD_BLOCK <= CRS; c0 += FF_BWD_BLOCK) {
                float acc[FF_BWD_BLOCK];
                memcpy(acc, dwk + c0, sizeof acc);
                for (int64_t p = 0; p < P; p++) {
                    const float a = dyk[p];
                    if (a == 0.0f) continue;
                    const float *col = scratch + p * CRS + c0;
                    for (int j = 0; j < FF_BWD_BLOCK; j++) acc[j] += a * col[j];
                }
                memcpy(dwk + c0, acc, sizeof acc);
            }
            for (; c0 < CRS; c0++) {
                float acc = dwk[c0];
                for (int64_t p = 0; p < P; p++) {
                    const float a = dyk[p];
                    if (a == 0.0f) continue;
                    acc += a * scratch[p * CRS + c0];
                }
                dwk[c0] = acc;
            }
        }
    }
}

void ff_cpu_conv2d_backward_data(float *dx, const float *dy, const float *w, const ff_layer *L, int64_t n) {
    // A stride-1 conv's data gradient is a conv of dy with the kernel flipped: the packed kernel
    // computes it in the same order (conv_cpu_private.h); the loop nest below is the spec and
    // takes the rest.
    if (ff_cpu_conv2d_backward_data_packed(dx, dy, w, L, n)) return;
    const int64_t K = L->out_c, C = L->in.c, H = L->in.h, W = L->in.w, R = L->kh, S = L->kw;
    const int64_t Ho = L->out.h, Wo = L->out.w, st = L->stride, pad = L->pad;
    memset(dx, 0, (size_t)(n * C * H * W) * sizeof *dx);
    for (int64_t i = 0; i < n; i++) {
        float *dxi = dx + i * C * H * W;
        const float *dyi = dy + i * K * Ho * Wo;
        for (int64_t k = 0; k < K; k++) {
            const float *dyk = dyi + k * Ho * Wo;
            for (int64_t c = 0; c < C; c++) {
                float *dxc = dxi + c * H * W;
                const float *wkc = w + (k * C + c) * R * S;
                for (int64_t r = 0; r < R; r++)
                    for (int64_t s = 0; s < S; s++) {
                        const float wv = wkc[r * S + s];
                        // output columns whose tap s lands inside the input: 0 <= ow*st-pad+s < W
                        int64_t ow0 = 0, ow1 = Wo;
                        while (ow0 < Wo && ow0 * st - pad + s < 0) ow0++;
                        while (ow1 > ow0 && (ow1 - 1) * st - pad + s >= W) ow1--;
                        for (int64_t oh = 0; oh < Ho; oh++) {
                            const int64_t ih = oh * st - pad + r;
                            if (ih < 0 || ih >= H) continue;
                            float *drow = dxc + ih * W - pad + s;
                            const float *grow = dyk + oh * Wo;
                            if (st == 1) {
                                for (int64_t ow = ow0; ow < ow1; ow++) drow[ow] += wv * grow[ow];
                            } else {
                                for (int64_t ow = ow0; ow < ow1; ow++) drow[ow * st] += wv * grow[ow];
                            }
                        }
                    }
            }
        }
    }
}

void ff_cpu_relu_backward(float *dx, const float *dy, const float *y, int64_t count) {
    for (int64_t i = 0; i < count; i++) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

void ff_cpu_maxpool_backward(float *dx, const float *dy, const float *x, const ff_layer *L, int64_t n) {
    const int64_t C = L->in.c, H = L->in.h, W = L->in.w, R = L->kh, S = L->kw;
    const int64_t Ho = L->out.h, Wo = L->out.w, st = L->stride, pad = L->pad;
    memset(dx, 0, (size_t)(n * C * H * W) * sizeof *dx);
    for (int64_t plane = 0; plane < n * C; plane++) {
        const float *xp = x + plane * H * W;
        float *dxp = dx + plane * H * W;
        const float *dyp = dy + plane * Ho * Wo;
        for (int64_t oh = 0; oh < Ho; oh++)
            for (int64_t ow = 0; ow < Wo; ow++) {
                int64_t best = -1;
                float bv = 0.0f;
                for (int64_t r = 0; r < R; r++) {
                    int64_t ih = oh * st - pad + r;
                    if (ih < 0 || ih >= H) continue;
                    for (int64_t s = 0; s < S; s++) {
                        int64_t iw = ow * st - pad + s;
                        if (iw < 0 || iw >= W) continue;
                        float v = xp[ih * W + iw];
                        // PyTorch's rule: strictly greater replaces (first max wins), NaN replaces.
                        if (best < 0 || v > bv || isnan(v)) {
                            best = ih * W + iw;
                            bv = v;
                        }
                    }
                }
                if (best >= 0) dxp[best] += dyp[oh * Wo + ow];
            }
    }
}

void ff_cpu_linear_backward_weights(float *dw, float *db, const float *dy, const float *x, const ff_layer *L,
                                    int64_t n) {
    const int64_t O = L->out_c, I = L->in.c * L->in.h * L->in.w;
    for (int64_t j = 0; j < O; j++) {
        float *dwj = dw + j * I;
        memset(dwj, 0, (size_t)I * sizeof *dwj);
        float bsum = 0.0f;
        for (int64_t s = 0; s < n; s++) {
            const float a = dy[s * O + j];
            bsum += a;
            if (a == 0.0f) continue;
            const float *xs = x + s * I;
            for (int64_t i = 0; i < I; i++) dwj[i] += a * xs[i];
        }
        db[j] = bsum;
    }
}

void ff_cpu_linear_backward_data(float *dx, const float *dy, const float *w, const ff_layer *L, int64_t n) {
    const int64_t O = L->out_c, I = L->in.c * L->in.h * L->in.w;
    memset(dx, 0, (size_t)(n * I) * sizeof *dx);
    // j outside the image loop so that row j of w is reused from cache by every image; each dx
    // element still receives its terms in j order.
    for (int64_t j = 0; j < O; j++) {
        const float *wj = w + j * I;
        for (int64_t s = 0; s < n; s++) {
            const float a = dy[s * O + j];
            if (a == 0.0f) continue;
            float *dxs = dx + s * I;
            for (int64_t i = 0; i < I; i++) dxs[i] += a * wj[i];
        }
    }
}

void ff_cpu_softmax_xent_backward(float *dz, float *loss, const float *z, const int32_t *labels, float scale,
                                  int64_t classes, int64_t n) {
    for (int64_t s = 0; s < n; s++) {
        const float *zs = z + s * classes;
        float *ds = dz + s * classes;
        float m = zs[0];
        for (int64_t c = 1; c < classes; c++)
            if (zs[c] > m || isnan(zs[c])) m = zs[c];
        float sum = 0.0f;
        for (int64_t c = 0; c < classes; c++) {
            ds[c] = (float)exp((double)(zs[c] - m));
            sum += ds[c];
        }
        const int64_t y = labels[s];
        if (loss) loss[s] = (float)log((double)sum) - (zs[y] - m);
        for (int64_t c = 0; c < classes; c++) ds[c] = (ds[c] / sum - (c == y ? 1.0f : 0.0f)) * scale;
    }
}
