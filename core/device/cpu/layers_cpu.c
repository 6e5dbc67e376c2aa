// The CPU reference layers (docs/ARCHITECTURE.md §4, §5). The summation order of every output element is the one
// layers_cpu.h documents; the loops below never vectorise over the terms of one sum, only over
// independent output elements (conv2d: 8 output channels k of one pixel in the lanes of a vector;
// elsewhere the columns of one row). A vector lane performs, for its element, exactly the scalar
// multiply and add the plain loop nest would (no FMA: -ffp-contract=off), so an element's value
// never depends on where a band, a batch slice, a k block or a vector boundary falls.
#include "fivefold/layers_cpu.h"

#include "conv_cpu_private.h"
#include "fivefold/status.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

// Register blocking (issue 4 §6). The kernel (conv_cpu_kernel.h) vectorises over a block of
// CK_KB = 8 or 16 output channels k and keeps a block of output pixels of one output row in
// registers, so every loaded weight vector is used once per pixel and every loaded input value
// CK_KB times, whatever the band height or Wo. Each lane of each accumulator is one output
// element, and it receives exactly the scalar sequence the header documents: bias (or the value
// stored after the previous channel chunk), then w*x for c, r, s ascending, each a separate float
// multiply and add (vector lanes do IEEE single operations; -ffp-contract=off keeps mul and add
// apart, and no copy uses an FMA instruction); padding taps are skipped per pixel. So the bits are
// those of the plain loop nest, for any band, batch slice, block edge, k block or vector width.
// Weights of one k block and a chunk of channels are repacked as (c, r, s, CK_KB lanes) so that
// the k of one tap are contiguous vectors: 512 taps a chunk (16 or 32 KiB on the stack: callers
// own memory, no malloc).
#define FF_PACK_TAPS 512
// Largest kernel width handled with the per-s valid-column table on the stack.
#define FF_MAX_S 64

typedef float ff_v4 __attribute__((vector_size(4 * sizeof(float))));
typedef float ff_v8 __attribute__((vector_size(8 * sizeof(float))));
typedef float ff_v16 __attribute__((vector_size(16 * sizeof(float))));

static int64_t max64(int64_t a, int64_t b) {
    return a > b ? a : b;
}
static int64_t min64(int64_t a, int64_t b) {
    return a < b ? a : b;
}

// Output columns ow whose input column ow*stride + tap - pad lies inside [0, W): [lo, hi).
// Columns outside are padding taps and are skipped (not added as zeros).
static void valid_cols(int64_t *lo, int64_t *hi, int64_t W, int64_t Wo, int64_t stride, int64_t pad, int64_t tap) {
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

// What conv_run computes (the kernel of conv_cpu_kernel.h): for each output channel k and output
// pixel (oh, ow), out = b[k] (or +0.0f), then for input channel c, tap row r, tap column s
// ascending: out += w(k, c, r, s) * in[c, oh*st - pad + r*ts, ow*st - pad + s*ts], taps outside
// the input skipped; w(k, c, r, s) is w[((k*C + c)*R + r)*S + s], or w[((c*K + k)*R + r)*S + s]
// where wt. The forward conv: ts = 1, wt false. The data gradient of a stride-1 conv
// (layers_cpu_backward.h's order: k, r, s ascending, each dx element from +0): the same kernel
// with dy as the input, C and K exchanged, ts = -1, pad = -(the conv's pad), wt true.
typedef struct {
    int64_t C, H, W;  // input channels, rows, columns
    int64_t K, Wo;    // output channels, columns
    int64_t R, S, st, pad, ts;
    bool wt;
} conv_shape;

// Geometry shared by the block kernel calls of one conv2d call.
typedef struct {
    int64_t C, H, W, Wo, R, S, st, pad, ts;
    int64_t in_lo, in_rows, out_rows;
    const int64_t *lo, *hi;  // (S): valid output columns of tap s
    int64_t lo_all, hi_all;  // output columns valid for every tap: [max lo, min hi)
} conv_geom;

// Three copies of the kernel, chosen at run time (conv_vector), all with the same bits
// (test_layers_cpu compares them on every layer geometry it tests; FF_CPU_VECTOR forces one):
//   512  where the CPU has AVX-512F: one 512-bit vector holds 16 k of a pixel, a row in blocks
//        of 8-16 pixels (as many independent add chains; at most 16 of the 32 registers)
//   256  where it has AVX2: one 256-bit vector holds 8 k, 8 pixels a block (8 add chains)
//   128  the baseline every x86-64 has: two vectors per pixel, 4 pixels (8 accumulators in the
//        16 SSE registers)
#define CK_SUFFIX 128
#define CK_VEC ff_v4
#define CK_LANES 4
#define CK_KB 8
#define CK_PB 4
#define CK_BALANCED 0
#define CK_TARGET
#include "conv_cpu_kernel.h"
#undef CK_SUFFIX
#undef CK_VEC
#undef CK_LANES
#undef CK_KB
#undef CK_PB
#undef CK_BALANCED
#undef CK_TARGET
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define FF_HAVE_WIDE 1
#define CK_SUFFIX 256
#define CK_VEC ff_v8
#define CK_LANES 8
#define CK_KB 8
#define CK_PB 8
#define CK_BALANCED 0
#define CK_TARGET __attribute__((target("avx2")))
#include "conv_cpu_kernel.h"
#undef CK_SUFFIX
#undef CK_VEC
#undef CK_LANES
#undef CK_KB
#undef CK_PB
#undef CK_BALANCED
#undef CK_TARGET
#define CK_SUFFIX 512
#define CK_VEC ff_v16
#define CK_LANES 16
#define CK_KB 16
#define CK_PB 16
#define CK_BALANCED 1
#define CK_TARGET __attribute__((target("avx512f"), optimize("no-predictive-commoning")))
#include "conv_cpu_kernel.h"
#undef CK_SUFFIX
#undef CK_VEC
#undef CK_LANES
#undef CK_KB
#undef CK_PB
#undef CK_BALANCED
#undef CK_TARGET
// The batched linear kernel (linear_cpu_kernel.h), where a batch fills vectors: images in the
// lanes, as many features a block as the registers hold (16 or 8 accumulators).
#define LK_SUFFIX 512
#define LK_VEC ff_v16
#define LK_LANES 16
#define LK_ACC 16
#define LK_TARGET __attribute__((target("avx512f")))
#include "linear_cpu_kernel.h"
#undef LK_SUFFIX
#undef LK_VEC
#undef LK_LANES
#undef LK_ACC
#undef LK_TARGET
#define LK_SUFFIX 256
#define LK_VEC ff_v8
#define LK_LANES 8
#define LK_ACC 8
#define LK_TARGET __attribute__((target("avx2")))
#include "linear_cpu_kernel.h"
#undef LK_SUFFIX
#undef LK_VEC
#undef LK_LANES
#undef LK_ACC
#undef LK_TARGET
#endif

// The widest copy this CPU (and build) can run: 512, 256 or 128.
static int cpu_widest(void) {
#ifdef FF_HAVE_WIDE
    if (__builtin_cpu_supports("avx512f")) return 512;
    if (__builtin_cpu_supports("avx2")) return 256;
#endif
    return 128;
}

static int conv_vector = 0;  // 0: not decided yet; decided once (a race writes the same value)

// The three copies: FF_CPU_VECTOR's value, the instruction set each needs, its name for people.
static const struct {
    const char *value, *isa, *name;
    int bits;
} copies[] = {
    {"128", "SSE2", "128-bit baseline", 128}, {"256", "AVX2", "AVX2", 256}, {"512", "AVX-512F", "AVX-512", 512}};

const char *ff_cpu_vector_name(int bits) {
    for (size_t i = 0; i < sizeof copies / sizeof copies[0]; i++)
        if (copies[i].bits == bits) return copies[i].name;
    return "?";
}

ff_status ff_cpu_vector_choose(int *bits) {
    const char *e = getenv("FF_CPU_VECTOR");
    const int widest = cpu_widest();
    if (!e || !*e) {
        *bits = widest;
        return FF_OK;
    }
    for (size_t i = 0; i < sizeof copies / sizeof copies[0]; i++)
        if (strcmp(e, copies[i].value) == 0) {
            if (copies[i].bits > widest)
                return FF_FAIL(FF_ERR_INPUT,
                               "FF_CPU_VECTOR=%s: this CPU (or build) has no %s; expected at most %d (or unset: the "
                               "widest it has)",
                               e, copies[i].isa, widest);
            *bits = copies[i].bits;
            return FF_OK;
        }
    return FF_FAIL(FF_ERR_INPUT, "FF_CPU_VECTOR=%s: expected 128, 256 or 512 (or unset: the widest this CPU has, %d)",
                   e, widest);
}

int ff_cpu_vector(void) {
    if (conv_vector == 0) {
        int bits = 128;
        // A bad value was already refused by ff_exec_create; a direct caller gets the baseline.
        conv_vector = ff_cpu_vector_choose(&bits) == FF_OK ? bits : 128;
    }
    return conv_vector;
}

int ff_cpu_set_vector(int bits) {
    const int widest = cpu_widest();
    conv_vector = bits >= 512 && widest >= 512 ? 512 : bits >= 256 && widest >= 256 ? 256 : 128;
    return conv_vector;
}

// The plain loop nest (kernels too wide for the packed path): the order the header documents.
static void conv2d_plain(float *out, const float *in, const float *w, const float *b, const ff_layer *L,
                         const ff_rows *rows, int64_t n) {
    const int64_t C = L->in.c, W = L->in.w, K = L->out.c, Wo = L->out.w, R = L->kh, S = L->kw;
    const int64_t in_rows = rows->in_hi - rows->in_lo, out_rows = rows->out_hi - rows->out_lo;
    const int64_t in_img = C * in_rows * W, out_img = K * out_rows * Wo;
    for (int64_t img = 0; img < n; img++)
        for (int64_t k = 0; k < K; k++)
            for (int64_t ol = 0; ol < out_rows; ol++)
                for (int64_t ow = 0; ow < Wo; ow++) {
                    const int64_t oh = rows->out_lo + ol;
                    float a = b[k];
                    for (int64_t c = 0; c < C; c++)
                        for (int64_t r = 0; r < R; r++) {
                            const int64_t ih = oh * L->stride - L->pad + r;
                            if (ih < 0 || ih >= L->in.h) continue;
                            for (int64_t s = 0; s < S; s++) {
                                const int64_t iw = ow * L->stride - L->pad + s;
                                if (iw < 0 || iw >= W) continue;
                                a += w[((k * C + c) * R + r) * S + s] *
                                     in[img * in_img + (c * in_rows + ih - rows->in_lo) * W + iw];
                            }
                        }
                    out[img * out_img + (k * out_rows + ol) * Wo + ow] = a;
                }
}

void ff_cpu_conv2d(float *out, const float *in, const float *w, const float *b, const ff_layer *L, const ff_rows *rows,
                   int64_t n) {
    const ff_conv_segment seg = {out, in, *rows, n};
    ff_cpu_conv2d_segments(&seg, 1, w, b, L);
}

// The packed kernel over segments; false where the kernel is too wide for it (the caller then
// computes the same order another way).
static bool conv_packed(const ff_conv_segment *segs, int n_segs, const float *w, const float *b, const conv_shape *cs) {
    if (cs->K <= 0) return true;
    // Kernels wider than FF_MAX_S (none in the models) or so large that one channel's packed
    // taps overflow the pack buffer are left to the caller.
    if (cs->S > FF_MAX_S || cs->R * cs->S > FF_PACK_TAPS) return false;
    int64_t lo[FF_MAX_S], hi[FF_MAX_S];
    for (int64_t s = 0; s < cs->S; s++) valid_cols(&lo[s], &hi[s], cs->W, cs->Wo, cs->st, cs->pad, s * cs->ts);
    const int64_t cb = min64(cs->C, FF_PACK_TAPS / (cs->R * cs->S));  // channels per packed chunk
#ifdef FF_HAVE_WIDE
    switch (ff_cpu_vector()) {
        case 512: conv_run_512(segs, n_segs, w, b, cs, lo, hi, cb); return true;
        case 256: conv_run_256(segs, n_segs, w, b, cs, lo, hi, cb); return true;
        default: break;
    }
#endif
    conv_run_128(segs, n_segs, w, b, cs, lo, hi, cb);
    return true;
}

void ff_cpu_conv2d_segments(const ff_conv_segment *segs, int n_segs, const float *w, const float *b,
                            const ff_layer *L) {
    const conv_shape cs = {L->in.c, L->in.h, L->in.w, L->out.c, L->out.w, L->kh, L->kw, L->stride, L->pad, 1, false};
    if (conv_packed(segs, n_segs, w, b, &cs)) return;
    for (int q = 0; q < n_segs; q++) conv2d_plain(segs[q].out, segs[q].in, w, b, L, &segs[q].rows, segs[q].n);
}

bool ff_cpu_conv2d_backward_data_packed(float *dx, const float *dy, const float *w, const ff_layer *L, int64_t n) {
    if (L->stride != 1) return false;
    const conv_shape cs = {L->out.c, L->out.h, L->out.w, L->in.c, L->in.w, L->kh, L->kw, 1, -L->pad, -1, true};
    const ff_conv_segment seg = {dx, dy, {0, L->out.h, 0, L->in.h}, n};
    return conv_packed(&seg, 1, w, NULL, &cs);
}

// PyTorch's relu keeps -0.0 as -0.0 and NaN as NaN (torch.relu(tensor([-0., nan])) is
// tensor([-0., nan]) in torch 1.13): only values that compare below zero become +0.0.
void ff_cpu_relu(float *out, const float *in, int64_t count) {
    for (int64_t i = 0; i < count; i++) out[i] = in[i] < 0.0f ? 0.0f : in[i];
}

// PyTorch's rule (max_pool2d CPU kernel): start at -inf, take a tap when it is greater than the
// current max or is NaN; so the first max wins among equals (-0.0 before +0.0 stays -0.0) and a
// NaN propagates. Taps are visited r, s ascending. Written without branches (`|`, not `||`, and
// a select by mask): on real data the comparison is a coin toss, and a branch on it is
// mispredicted half the time.
typedef int32_t ff_i4 __attribute__((vector_size(4 * sizeof(int32_t))));
static inline __attribute__((always_inline)) float pool_take(float m, float v) {
    const uint32_t t = 0u - (uint32_t)((v > m) | (v != v));
    uint32_t mi, vi;
    memcpy(&mi, &m, sizeof mi), memcpy(&vi, &v, sizeof vi);
    const uint32_t r = (vi & t) | (mi & ~t);
    float out;
    memcpy(&out, &r, sizeof out);
    return out;
}
// The same rule for 4 columns at once (lane by lane).
static inline __attribute__((always_inline)) ff_v4 pool_take4(ff_v4 m, ff_v4 v) {
    const ff_i4 t = (v > m) | (v != v);
    ff_i4 mi, vi;
    memcpy(&mi, &m, sizeof mi), memcpy(&vi, &v, sizeof vi);
    const ff_i4 r = (vi & t) | (mi & ~t);
    ff_v4 out;
    memcpy(&out, &r, sizeof out);
    return out;
}

// The output columns [c0, c1) of one output row whose taps all lie inside the input row: no
// bounds to check, 4 columns a vector, each column's taps r, s ascending. With the window and
// stride constants (the models' 2x2 and 3x3 windows of stride 2) the taps unroll.
// y: (Wo) the output row; rows: (R) pointers to the input rows, NULL for a padding row.
static inline __attribute__((always_inline)) void pool_row_inside(float *y, const float *const *rows, int64_t R,
                                                                  int64_t S, int64_t st, int64_t pad, int64_t c0,
                                                                  int64_t c1) {
    int64_t ow = c0;
    for (; ow + 4 <= c1; ow += 4) {
        ff_v4 m = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
        for (int64_t r = 0; r < R; r++) {
            const float *xr = rows[r];
            if (!xr) continue;
            for (int64_t s = 0; s < S; s++) {
                const int64_t i = ow * st + s - pad;  // tap s of column ow
                const ff_v4 v = {xr[i], xr[i + st], xr[i + 2 * st], xr[i + 3 * st]};
                m = pool_take4(m, v);
            }
        }
        memcpy(y + ow, &m, sizeof m);
    }
    for (; ow < c1; ow++) {
        float m = -INFINITY;
        for (int64_t r = 0; r < R; r++) {
            if (!rows[r]) continue;
            for (int64_t s = 0; s < S; s++) m = pool_take(m, rows[r][ow * st + s - pad]);
        }
        y[ow] = m;
    }
}
static void pool_row_inside_any(float *y, const float *const *rows, int64_t R, int64_t S, int64_t st, int64_t pad,
                                int64_t c0, int64_t c1) {
    pool_row_inside(y, rows, R, S, st, pad, c0, c1);
}
static void pool_row_inside_2x2s2(float *y, const float *const *rows, int64_t R, int64_t S, int64_t st, int64_t pad,
                                  int64_t c0, int64_t c1) {
    (void)R, (void)S, (void)st;
    pool_row_inside(y, rows, 2, 2, 2, pad, c0, c1);
}
static void pool_row_inside_3x3s2(float *y, const float *const *rows, int64_t R, int64_t S, int64_t st, int64_t pad,
                                  int64_t c0, int64_t c1) {
    (void)R, (void)S, (void)st;
    pool_row_inside(y, rows, 3, 3, 2, pad, c0, c1);
}

#define FF_POOL_MAX_R 64  // taller windows (none in the models) take the per-column loop alone
void ff_cpu_maxpool(float *out, const float *in, const ff_layer *L, const ff_rows *rows, int64_t n) {
    const int64_t C = L->in.c, H = L->in.h, W = L->in.w, Wo = L->out.w;
    const int64_t R = L->kh, S = L->kw, st = L->stride, pad = L->pad;
    const int64_t in_rows = rows->in_hi - rows->in_lo;
    const int64_t out_rows = rows->out_hi - rows->out_lo;
    if (out_rows <= 0 || n <= 0) return;
    // Columns every tap finds inside the row: ow*st - pad >= 0 and ow*st - pad + S - 1 <= W - 1.
    int64_t c0 = st > 0 ? (pad + st - 1) / st : Wo, c1 = st > 0 ? (W - S + pad) / st + 1 : 0;
    if (W - S + pad < 0) c1 = 0;
    if (c0 > Wo) c0 = Wo;
    if (c1 > Wo) c1 = Wo;
    if (c1 < c0 || R > FF_POOL_MAX_R) c0 = c1 = 0;  // no inside columns: every column per column
    void (*inside)(float *, const float *const *, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t) =
        R == 2 && S == 2 && st == 2   ? pool_row_inside_2x2s2
        : R == 3 && S == 3 && st == 2 ? pool_row_inside_3x3s2
                                      : pool_row_inside_any;
    for (int64_t p = 0; p < n * C; p++) {  // (image, channel) planes are independent
        const float *x = in + p * in_rows * W;
        float *y = out + p * out_rows * Wo;
        for (int64_t oh = rows->out_lo; oh < rows->out_hi; oh++) {
            float *yr = y + (oh - rows->out_lo) * Wo;
            if (c1 > c0) {
                const float *taps[FF_POOL_MAX_R];  // (R): input row of tap r, NULL outside
                for (int64_t r = 0; r < R; r++) {
                    const int64_t ih = oh * st - pad + r;
                    taps[r] = ih < 0 || ih >= H ? NULL : x + (ih - rows->in_lo) * W;
                }
                inside(yr, taps, R, S, st, pad, c0, c1);
            }
            for (int64_t ow = 0; ow < Wo; ow++) {
                if (ow == c0 && c1 > c0) ow = c1;  // the inside columns are done
                if (ow >= Wo) break;
                float m = -INFINITY;
                for (int64_t r = 0; r < R; r++) {
                    const int64_t ih = oh * st - pad + r;
                    if (ih < 0 || ih >= H) continue;
                    const float *xr = x + (ih - rows->in_lo) * W;
                    for (int64_t s = 0; s < S; s++) {
                        const int64_t iw = ow * st - pad + s;
                        if (iw < 0 || iw >= W) continue;
                        m = pool_take(m, xr[iw]);
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
// vectorised without reassociating it. From FF_LINEAR_VECTOR_BATCH images on, the AVX2 and AVX-512
// copies put images in the lanes instead (linear_cpu_kernel.h); below that, and in the baseline,
// 8 output rows j are computed together: 8 independent chains that the CPU overlaps, with x[i]
// loaded once for all 8.
#define FF_LINEAR_BLOCK 8
#define FF_LINEAR_VECTOR_BATCH 4
void ff_cpu_linear(float *out, const float *in, const float *w, const float *b, const ff_layer *L, int64_t n) {
    const int64_t I = L->in.c * L->in.h * L->in.w, J = L->out.c;
#ifdef FF_HAVE_WIDE
    if (n >= FF_LINEAR_VECTOR_BATCH && J > 0) switch (ff_cpu_vector()) {
            case 512: linear_run_512(out, in, w, b, I, J, n); return;
            case 256: linear_run_256(out, in, w, b, I, J, n); return;
            default: break;
        }
#endif
    int64_t j = 0;
    for (; j + FF_LINEAR_BLOCK <= J; j += FF_LINEAR_BLOCK) {
        const float *w0 = w + j * I;             // rows j .. j+7 of (J, I)
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

void ff_cpu_layer_forward(float *out, const float *in, const float *w, const float *b, const ff_layer *L,
                          const ff_rows *rows, int64_t n) {
    const int64_t band = rows->out_hi - rows->out_lo;
    switch (L->op) {
        case FF_OP_CONV2D: ff_cpu_conv2d(out, in, w, b, L, rows, n); break;
        case FF_OP_RELU: ff_cpu_relu(out, in, n * L->in.c * band * L->in.w); break;
        case FF_OP_MAXPOOL: ff_cpu_maxpool(out, in, L, rows, n); break;
        case FF_OP_LRN: ff_cpu_lrn(out, in, L, band, n); break;
        case FF_OP_FLATTEN:
            // (n, C, H, W) -> (n, C*H*W): the memory layout is already the flattened one.
            if (out != in) memmove(out, in, (size_t)(n * ff_shape_numel(L->in)) * sizeof(float));
            break;
        case FF_OP_LINEAR: ff_cpu_linear(out, in, w, b, L, n); break;
        case FF_OP_SOFTMAX: ff_cpu_softmax(out, in, ff_shape_numel(L->in), n); break;
    }
}
