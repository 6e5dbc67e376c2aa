// The CPU reference layers (DESIGN §4, §5). The summation order of every output element is the one
// layers_cpu.h documents; the loop orders below are chosen so that GCC vectorises the innermost
// loop WITHOUT changing that order: the innermost loop always runs over independent output
// elements (the columns of one output row), never over the terms of one sum. Vectorising such a
// loop performs, for each element, exactly the scalar multiply and add it would have done (no FMA:
// -ffp-contract=off), so vector and scalar-remainder elements get the same bits, and an element's
// value never depends on where a band, a batch slice or a vector boundary falls.
#include "fivefold/layers_cpu.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

// Largest output-row chunk gathered on the stack for strided convolutions (1 KiB of floats).
#define FF_GATHER_CHUNK 256

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// Output columns ow whose input column ow*stride + tap - pad lies inside [0, W): [lo, hi).
// Columns outside are padding taps and are skipped (not added as zeros).
static void valid_cols(int64_t *lo, int64_t *hi, int64_t W, int64_t Wo, int64_t stride, int64_t pad,
                       int64_t tap) {
    // ow*stride + tap - pad >= 0  <=>  ow >= ceil((pad - tap) / stride)
    int64_t need = pad - tap;
    int64_t l = need <= 0 ? 0 : (need + stride - 1) / stride;
    // ow*stride + tap - pad <= W - 1  <=>  ow <= floor((W - 1 + pad - tap) / stride)
    int64_t top = W - 1 + pad - tap;
    int64_t h = top < 0 ? 0 : top / stride + 1;
    *lo = max64(l, 0);
    *hi = min64(h, Wo);
    if (*hi < *lo) *hi = *lo;
}

// acc[ow] += wv * src[ow] for ow in [0, len): independent outputs, contiguous, vectorisable.
static inline void axpy_row(float *restrict acc, const float *restrict src, float wv, int64_t len) {
    for (int64_t i = 0; i < len; i++) acc[i] += wv * src[i];
}

void ff_cpu_conv2d(float *out, const float *in, const float *w, const float *b, const ff_layer *L,
                   const ff_rows *rows, int64_t n) {
    const int64_t C = L->in.c, H = L->in.h, W = L->in.w;
    const int64_t K = L->out.c, Wo = L->out.w;
    const int64_t R = L->kh, S = L->kw, st = L->stride, pad = L->pad;
    const int64_t in_rows = rows->in_hi - rows->in_lo;
    const int64_t out_rows = rows->out_hi - rows->out_lo;
    if (out_rows <= 0 || n <= 0) return;
    const int64_t in_img = C * in_rows * W;   // floats per image in the input band
    const int64_t out_img = K * out_rows * Wo;  // floats per image in the output band
    float gather[FF_GATHER_CHUNK];

    for (int64_t img = 0; img < n; img++) {
        const float *x = in + img * in_img;    // (C, in_rows, W)
        float *y = out + img * out_img;        // (K, out_rows, Wo)
        for (int64_t oh = rows->out_lo; oh < rows->out_hi; oh++) {
            const int64_t ol = oh - rows->out_lo;  // local output row
            // Every output of this row starts from its bias: the first term of its sum.
            for (int64_t k = 0; k < K; k++) {
                float *yr = y + (k * out_rows + ol) * Wo;
                for (int64_t ow = 0; ow < Wo; ow++) yr[ow] = b[k];
            }
            // Then the terms in (c, r, s) ascending order; the k loop inside only interleaves
            // independent outputs, each of which still sees c, r, s ascending.
            for (int64_t c = 0; c < C; c++) {
                for (int64_t r = 0; r < R; r++) {
                    const int64_t ih = oh * st - pad + r;
                    if (ih < 0 || ih >= H) continue;  // padding row: skipped
                    const float *xr = x + (c * in_rows + (ih - rows->in_lo)) * W;  // (W)
                    for (int64_t s = 0; s < S; s++) {
                        int64_t lo, hi;
                        valid_cols(&lo, &hi, W, Wo, st, pad, s);
                        const float *wks = w + (c * R + r) * S + s;  // w[0, c, r, s]; step C*R*S per k
                        const int64_t wstep = C * R * S;
                        if (st == 1) {
                            // input column of output ow is ow + s - pad: a contiguous slice
                            const float *src = xr + lo + s - pad;
                            for (int64_t k = 0; k < K; k++)
                                axpy_row(y + (k * out_rows + ol) * Wo + lo, src, wks[k * wstep],
                                         hi - lo);
                        } else {
                            // Strided: gather the taps into a contiguous chunk once, reuse for all k.
                            for (int64_t c0 = lo; c0 < hi; c0 += FF_GATHER_CHUNK) {
                                const int64_t len = min64(FF_GATHER_CHUNK, hi - c0);
                                const float *src = xr + c0 * st + s - pad;
                                for (int64_t i = 0; i < len; i++) gather[i] = src[i * st];
                                for (int64_t k = 0; k < K; k++)
                                    axpy_row(y + (k * out_rows + ol) * Wo + c0, gather,
                                             wks[k * wstep], len);
                            }
                        }
                    }
                }
            }
        }
    }
}

// PyTorch's relu keeps -0.0 as -0.0 and NaN as NaN (torch.relu(tensor([-0., nan])) is
// tensor([-0., nan]) in torch 1.13): only values that compare below zero become +0.0.
void ff_cpu_relu(float *out, const float *in, int64_t count) {
    for (int64_t i = 0; i < count; i++) out[i] = in[i] < 0.0f ? 0.0f : in[i];
}

void ff_cpu_maxpool(float *out, const float *in, const ff_layer *L, const ff_rows *rows, int64_t n) {
    const int64_t C = L->in.c, H = L->in.h, W = L->in.w, Wo = L->out.w;
    const int64_t R = L->kh, S = L->kw, st = L->stride, pad = L->pad;
    const int64_t in_rows = rows->in_hi - rows->in_lo;
    const int64_t out_rows = rows->out_hi - rows->out_lo;
    if (out_rows <= 0 || n <= 0) return;
    for (int64_t p = 0; p < n * C; p++) {  // (image, channel) planes are independent
        const float *x = in + p * in_rows * W;
        float *y = out + p * out_rows * Wo;
        for (int64_t oh = rows->out_lo; oh < rows->out_hi; oh++) {
            float *yr = y + (oh - rows->out_lo) * Wo;
            for (int64_t ow = 0; ow < Wo; ow++) {
                // PyTorch's rule (max_pool2d CPU kernel): start at -inf, take a tap when it is
                // greater than the current max or is NaN; so the first max wins among equals
                // (-0.0 before +0.0 stays -0.0) and a NaN propagates. Taps visited r, s ascending.
                float m = -INFINITY;
                for (int64_t r = 0; r < R; r++) {
                    const int64_t ih = oh * st - pad + r;
                    if (ih < 0 || ih >= H) continue;
                    const float *xr = x + (ih - rows->in_lo) * W;
                    for (int64_t s = 0; s < S; s++) {
                        const int64_t iw = ow * st - pad + s;
                        if (iw < 0 || iw >= W) continue;
                        const float v = xr[iw];
                        if (v > m || isnan(v)) m = v;
                    }
                }
                yr[ow] = m;
            }
        }
    }
}

// PyTorch (F.local_response_norm) computes, in float32: sq = a*a; avg = (sum of sq over the
// zero-padded window) / size; d = (avg * alpha + k) ^ beta; b = a / d. We keep that sequence of
// float32 operations; the window sum runs over the clipped window in ascending channel order
// (PyTorch adds zeros for the padded channels: adding +0.0f to a sum of squares, which is never
// -0.0, changes nothing, so skipping them is the same value). pow is computed in double and rounded
// once to float: glibc picks FMA or non-FMA powf per CPU, which can change the last bit, while the
// double pow rounded to float is the same on every machine (and correctly rounded almost always).
void ff_cpu_lrn(float *out, const float *in, const ff_layer *L, int64_t rows, int64_t n) {
    const int64_t C = L->in.c, HW = rows * L->in.w;  // per-channel plane of this band
    const int64_t size = L->lrn_size;
    const float alpha = L->lrn_alpha, beta = L->lrn_beta, k = L->lrn_k;
    for (int64_t img = 0; img < n; img++) {
        const float *x = in + img * C * HW;  // (C, rows, W)
        float *y = out + img * C * HW;
        for (int64_t c = 0; c < C; c++) {
            const int64_t c0 = max64(0, c - size / 2), c1 = min64(C - 1, c + (size - 1) / 2);
            for (int64_t p = 0; p < HW; p++) {
                float sum = 0.0f;
                for (int64_t cc = c0; cc <= c1; cc++) {
                    const float a = x[cc * HW + p];
                    const float sq = a * a;
                    sum += sq;
                }
                const float avg = sum / (float)size;
                const float base = avg * alpha + k;
                const float d = (float)pow((double)base, (double)beta);
                y[c * HW + p] = x[c * HW + p] / d;
            }
        }
    }
}

// Each output keeps the order b[j], then i = 0, 1, 2, ... The dot product over i cannot be
// vectorised without reassociating it, so instead 8 output rows j are computed together: 8
// independent chains that the CPU overlaps, with x[i] loaded once for all 8.
#define FF_LINEAR_BLOCK 8
void ff_cpu_linear(float *out, const float *in, const float *w, const float *b, const ff_layer *L,
                   int64_t n) {
    const int64_t I = L->in.c * L->in.h * L->in.w, J = L->out.c;
    int64_t j = 0;
    for (; j + FF_LINEAR_BLOCK <= J; j += FF_LINEAR_BLOCK) {
        const float *w0 = w + j * I;  // rows j .. j+7 of (J, I)
        for (int64_t img = 0; img < n; img++) {  // the 8 weight rows stay in cache across images
            const float *x = in + img * I;
            float a0 = b[j], a1 = b[j + 1], a2 = b[j + 2], a3 = b[j + 3];
            float a4 = b[j + 4], a5 = b[j + 5], a6 = b[j + 6], a7 = b[j + 7];
            for (int64_t i = 0; i < I; i++) {
                const float xi = x[i];
                a0 += w0[i] * xi;
                a1 += w0[I + i] * xi;
                a2 += w0[2 * I + i] * xi;
                a3 += w0[3 * I + i] * xi;
                a4 += w0[4 * I + i] * xi;
                a5 += w0[5 * I + i] * xi;
                a6 += w0[6 * I + i] * xi;
                a7 += w0[7 * I + i] * xi;
            }
            float *y = out + img * J + j;
            y[0] = a0, y[1] = a1, y[2] = a2, y[3] = a3, y[4] = a4, y[5] = a5, y[6] = a6, y[7] = a7;
        }
    }
    for (; j < J; j++) {  // the last J % 8 rows, same order
        for (int64_t img = 0; img < n; img++) {
            const float *x = in + img * I;
            float a = b[j];
            for (int64_t i = 0; i < I; i++) a += w[j * I + i] * x[i];
            out[img * J + j] = a;
        }
    }
}

// Max-subtracted softmax. exp is computed in double and rounded once to float, for the same reason
// as pow in lrn (glibc's expf differs in the last bit between its FMA and non-FMA variants); the
// subtraction, the sum (ascending) and the division are float32. The max uses the maxpool rule, so
// a NaN input makes the whole row NaN.
void ff_cpu_softmax(float *out, const float *in, int64_t classes, int64_t n) {
    for (int64_t img = 0; img < n; img++) {
        const float *x = in + img * classes;
        float *y = out + img * classes;
        float m = -INFINITY;
        for (int64_t i = 0; i < classes; i++)
            if (x[i] > m || isnan(x[i])) m = x[i];
        float sum = 0.0f;
        for (int64_t i = 0; i < classes; i++) {
            const float d = x[i] - m;
            y[i] = (float)exp((double)d);
            sum += y[i];
        }
        for (int64_t i = 0; i < classes; i++) y[i] = y[i] / sum;
    }
}

void ff_cpu_layer_forward(float *out, const float *in, const float *w, const float *b,
                          const ff_layer *L, const ff_rows *rows, int64_t n) {
    const int64_t band = rows->out_hi - rows->out_lo;
    switch (L->op) {
    case FF_OP_CONV2D:
        ff_cpu_conv2d(out, in, w, b, L, rows, n);
        break;
    case FF_OP_RELU:
        ff_cpu_relu(out, in, n * L->in.c * band * L->in.w);
        break;
    case FF_OP_MAXPOOL:
        ff_cpu_maxpool(out, in, L, rows, n);
        break;
    case FF_OP_LRN:
        ff_cpu_lrn(out, in, L, band, n);
        break;
    case FF_OP_FLATTEN:
        // (n, C, H, W) -> (n, C*H*W): the memory layout is already the flattened one.
        if (out != in) memmove(out, in, (size_t)(n * ff_shape_numel(L->in)) * sizeof(float));
        break;
    case FF_OP_LINEAR:
        ff_cpu_linear(out, in, w, b, L, n);
        break;
    case FF_OP_SOFTMAX:
        ff_cpu_softmax(out, in, ff_shape_numel(L->in), n);
        break;
    }
}
