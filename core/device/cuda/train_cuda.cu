// The training kernels of gpu.h ("training"): backward layers, softmax cross-entropy, the tree
// reduction of train.h and the SGD update, for the cuda device's training ops (device.h).
//
// Determinism first (gpu.h states the orders): every output element is computed by one thread,
// whose loop visits the terms in the CPU's documented order (layers_cpu_backward.h). Kernels use
// grid-stride loops over output elements, so the grid size decides only which thread computes an
// element, never how: no atomics, no split reductions, no shared-memory trees. Dot-product chains
// are written with fmaf (one rounding per term; the dot-product bound covers the difference to the
// CPU's separate multiply and add); every other float operation that must give the CPU's bits is
// an explicit _rn intrinsic, so nvcc's -fmad cannot contract it into an fma.
//
// Performance is "reasonable", not tuned: consecutive threads own consecutive output elements
// (coalesced writes; the shared factor of a chain, e.g. dy[n, j] in the linear weight gradient, is
// the same address across a warp and so a broadcast). The conv weight gradient gives one thread
// per (group, k, c, r, s), each looping over the group's images and output positions: long chains,
// but the order forbids splitting them (a split would change the bits with the launch shape).
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "fivefold/gpu.h"
#include "gpu_check.cuh"

#define FF_TRAIN_THREADS 256

// Blocks for a grid-stride loop over count elements: enough to fill the GPU, capped (each thread
// then loops); the cap changes nothing but which thread does which element.
static unsigned train_blocks(long long count) {
    long long b = (count + FF_TRAIN_THREADS - 1) / FF_TRAIN_THREADS;
    const long long cap = 1 << 20;
    return (unsigned)(b < 1 ? 1 : b > cap ? cap : b);
}

#define FF_GRID_STRIDE(i, total)                                                      \
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < (total); \
         i += (long long)gridDim.x * blockDim.x)

struct ConvGeom {
    int C, H, W, K, R, S, Ho, Wo, stride, pad;
};

static ConvGeom conv_geom(const ff_layer *L) {
    ConvGeom g = {(int)L->in.c, (int)L->in.h,  (int)L->in.w,  (int)L->out_c, L->kh,
                  L->kw,        (int)L->out.h, (int)L->out.w, L->stride,     L->pad};
    return g;
}

// Output indices o in [0, out) whose tap lands inside the input: 0 <= o*st + off < in, with
// off = tap - pad. *lo, *hi: the half-open range (empty when lo >= hi).
__device__ __forceinline__ void tap_range(int *lo, int *hi, int off, int st, int in, int out) {
    const int a = off >= 0 ? 0 : (-off + st - 1) / st;
    const int last = in - 1 - off;  // o*st <= last
    const int b = last < 0 ? 0 : min(out, last / st + 1);
    *lo = a;
    *hi = b;
}

// ------------------------------------------------------------------ conv2d backward
// One thread per (group, k, c, r, s): the CPU's order, image ascending then output position
// ascending, padding positions skipped (their x is 0), zero dy skipped (the CPU's skip).
__global__ void k_conv_bwd_weights(float *__restrict__ dw, long long grad_stride, const float *__restrict__ dy,
                                   const float *__restrict__ x, ConvGeom g, long long n, long long group,
                                   long long total) {
    const long long CRS = (long long)g.C * g.R * g.S, KCRS = g.K * CRS;
    const long long HW = (long long)g.H * g.W, P = (long long)g.Ho * g.Wo;
    FF_GRID_STRIDE(t, total) {
        const int s = (int)(t % g.S);
        const int r = (int)(t / g.S % g.R);
        const int c = (int)(t / ((long long)g.S * g.R) % g.C);
        const long long kk = t % KCRS;  // (k, c, r, s) within the row
        const int k = (int)(kk / CRS);
        const long long grp = t / KCRS;
        const long long i0 = grp * group, i1 = min(n, i0 + group);
        int oh0, oh1, ow0, ow1;
        tap_range(&oh0, &oh1, r - g.pad, g.stride, g.H, g.Ho);
        tap_range(&ow0, &ow1, s - g.pad, g.stride, g.W, g.Wo);
        float acc = 0.0f;
        for (long long i = i0; i < i1; i++) {
            const float *xc = x + (i * g.C + c) * HW;
            const float *dyk = dy + (i * g.K + k) * P;
            for (int oh = oh0; oh < oh1; oh++) {
                const float *xr = xc + (long long)(oh * g.stride - g.pad + r) * g.W + (s - g.pad);
                const float *dr = dyk + (long long)oh * g.Wo;
                for (int ow = ow0; ow < ow1; ow++) {
                    const float a = dr[ow];
                    if (a != 0.0f) acc = fmaf(a, xr[(long long)ow * g.stride], acc);
                }
            }
        }
        dw[grp * grad_stride + kk] = acc;
    }
}

// Bias gradient of conv2d (P = Ho*Wo positions) and linear (P = 1): one thread per (group, k),
// plain float additions over image then position ascending, every term: the CPU's bits.
__global__ void k_bias_bwd(float *__restrict__ db, long long grad_stride, const float *__restrict__ dy, int K,
                           long long P, long long n, long long group, long long total) {
    FF_GRID_STRIDE(t, total) {
        const int k = (int)(t % K);
        const long long grp = t / K;
        const long long i0 = grp * group, i1 = min(n, i0 + group);
        float acc = 0.0f;
        for (long long i = i0; i < i1; i++) {
            const float *d = dy + (i * K + k) * P;
            for (long long p = 0; p < P; p++) acc = __fadd_rn(acc, d[p]);
        }
        db[grp * grad_stride + k] = acc;
    }
}

// One thread per dx element (consecutive threads: consecutive w, coalesced stores); k, r, s
// ascending, the one output position each (k, r, s) reaches, every term (the CPU skips none here).
__global__ void k_conv_bwd_data(float *__restrict__ dx, const float *__restrict__ dy, const float *__restrict__ w,
                                ConvGeom g, long long total) {
    FF_GRID_STRIDE(t, total) {
        const int x_w = (int)(t % g.W);
        const int x_h = (int)(t / g.W % g.H);
        const int c = (int)(t / ((long long)g.W * g.H) % g.C);
        const long long i = t / ((long long)g.W * g.H * g.C);
        const float *dyi = dy + i * g.K * (long long)g.Ho * g.Wo;
        float acc = 0.0f;
        for (int k = 0; k < g.K; k++) {
            const float *wkc = w + ((long long)k * g.C + c) * g.R * g.S;
            const float *dyk = dyi + (long long)k * g.Ho * g.Wo;
            for (int r = 0; r < g.R; r++) {
                const int hn = x_h + g.pad - r;  // oh * stride
                if (hn < 0 || hn % g.stride) continue;
                const int oh = hn / g.stride;
                if (oh >= g.Ho) continue;
                for (int s = 0; s < g.S; s++) {
                    const int wn = x_w + g.pad - s;
                    if (wn < 0 || wn % g.stride) continue;
                    const int ow = wn / g.stride;
                    if (ow >= g.Wo) continue;
                    acc = fmaf(wkc[r * g.S + s], dyk[(long long)oh * g.Wo + ow], acc);
                }
            }
        }
        dx[t] = acc;
    }
}

// ------------------------------------------------------------------ linear backward
// One thread per (group, j, i), consecutive i across a warp: x reads and dw stores coalesced,
// dy[n, j] one broadcast address. Images of the group ascending, zero dy skipped (the CPU's skip).
__global__ void k_linear_bwd_weights(float *__restrict__ dw, long long grad_stride, const float *__restrict__ dy,
                                     const float *__restrict__ x, long long O, long long I, long long n,
                                     long long group, long long total) {
    const long long OI = O * I;
    FF_GRID_STRIDE(t, total) {
        const long long ji = t % OI;
        const long long j = ji / I, i = ji % I;
        const long long grp = t / OI;
        const long long i0 = grp * group, i1 = min(n, i0 + group);
        float acc = 0.0f;
        for (long long s = i0; s < i1; s++) {
            const float a = dy[s * O + j];
            if (a != 0.0f) acc = fmaf(a, x[s * I + i], acc);
        }
        dw[grp * grad_stride + ji] = acc;
    }
}

// One thread per dx element (n, i): j ascending, zero dy skipped; w reads coalesced across i.
__global__ void k_linear_bwd_data(float *__restrict__ dx, const float *__restrict__ dy, const float *__restrict__ w,
                                  long long O, long long I, long long total) {
    FF_GRID_STRIDE(t, total) {
        const long long i = t % I, s = t / I;
        const float *dys = dy + s * O;
        float acc = 0.0f;
        for (long long j = 0; j < O; j++) {
            const float a = dys[j];
            if (a != 0.0f) acc = fmaf(a, w[j * I + i], acc);
        }
        dx[t] = acc;
    }
}

// ------------------------------------------------------------------ relu, maxpool backward
// The CPU's selection exactly: y > 0 is false for NaN and for -0, both giving +0.
__global__ void k_relu_bwd(float *__restrict__ dx, const float *__restrict__ dy, const float *__restrict__ y,
                           long long total) {
    FF_GRID_STRIDE(t, total) {
        dx[t] = y[t] > 0.0f ? dy[t] : 0.0f;
    }
}

// One thread per dx element: no atomics. The CPU scatters dy[window] into dx[argmax] for windows
// in ascending output position; here each dx element gathers, visiting the windows that contain it
// in that same ascending order and recomputing each one's pick with the CPU's rule (taps r, s
// ascending, padding skipped, a tap wins when greater or NaN): the same additions in the same
// order from +0, so the same bits, ties and NaNs included.
__global__ void k_maxpool_bwd(float *__restrict__ dx, const float *__restrict__ dy, const float *__restrict__ x,
                              ConvGeom g, long long total) {
    const long long HW = (long long)g.H * g.W;
    FF_GRID_STRIDE(t, total) {
        const int x_w = (int)(t % g.W);
        const int x_h = (int)(t / g.W % g.H);
        const long long plane = t / HW;
        const float *xp = x + plane * HW;
        const float *dyp = dy + plane * (long long)g.Ho * g.Wo;
        const int me = x_h * g.W + x_w;
        // windows containing row x_h: oh*st - pad <= x_h <= oh*st - pad + R - 1
        const int hlo = x_h + g.pad - g.R + 1, wlo = x_w + g.pad - g.S + 1;
        const int oh0 = hlo <= 0 ? 0 : (hlo + g.stride - 1) / g.stride;
        const int oh1 = min(g.Ho - 1, (x_h + g.pad) / g.stride);
        const int ow0 = wlo <= 0 ? 0 : (wlo + g.stride - 1) / g.stride;
        const int ow1 = min(g.Wo - 1, (x_w + g.pad) / g.stride);
        float acc = 0.0f;
        for (int oh = oh0; oh <= oh1; oh++)
            for (int ow = ow0; ow <= ow1; ow++) {
                int best = -1;
                float bv = 0.0f;
                for (int r = 0; r < g.R; r++) {
                    const int ih = oh * g.stride - g.pad + r;
                    if (ih < 0 || ih >= g.H) continue;
                    for (int s = 0; s < g.S; s++) {
                        const int iw = ow * g.stride - g.pad + s;
                        if (iw < 0 || iw >= g.W) continue;
                        const float v = xp[ih * g.W + iw];
                        if (best < 0 || v > bv || isnan(v)) {
                            best = ih * g.W + iw;
                            bv = v;
                        }
                    }
                }
                if (best == me) acc = __fadd_rn(acc, dyp[(long long)oh * g.Wo + ow]);
            }
        dx[t] = acc;
    }
}

// ------------------------------------------------------------------ softmax cross-entropy
// One thread per image, the CPU's loops as written (sequential max with its NaN rule, sum
// ascending), every float operation an _rn intrinsic, exp and log in double rounded once to float.
// Classes are few (10, 1000): the sequential loops cost nothing next to the backward.
__global__ void k_softmax_xent(float *__restrict__ dz, float *__restrict__ loss, const float *__restrict__ z,
                               const int32_t *__restrict__ labels, float scale, long long classes, long long n) {
    FF_GRID_STRIDE(s, n) {
        const float *zs = z + s * classes;
        float *ds = dz + s * classes;
        float m = zs[0];
        for (long long c = 1; c < classes; c++)
            if (zs[c] > m || isnan(zs[c])) m = zs[c];
        float sum = 0.0f;
        for (long long c = 0; c < classes; c++) {
            const float e = (float)exp((double)__fsub_rn(zs[c], m));
            ds[c] = e;
            sum = __fadd_rn(sum, e);
        }
        const long long y = labels[s];
        if (loss) loss[s] = __fsub_rn((float)log((double)sum), __fsub_rn(zs[y], m));
        for (long long c = 0; c < classes; c++)
            ds[c] = __fmul_rn(__fsub_rn(__fdiv_rn(ds[c], sum), c == y ? 1.0f : 0.0f), scale);
    }
}

// ------------------------------------------------------------------ tree reduction, SGD, gather
// One thread per element runs the element's whole tree in train.h's order (consecutive threads:
// consecutive elements of every row, coalesced).
__global__ void k_tree_reduce(float *__restrict__ rows, long long nrows, long long stride, long long len) {
    FF_GRID_STRIDE(i, len) {
        for (long long s = 1; s < nrows; s *= 2)
            for (long long j = 0; j + s < nrows; j += 2 * s)
                rows[j * stride + i] = __fadd_rn(rows[j * stride + i], rows[(j + s) * stride + i]);
    }
}

// step_core's (train.c) float operations one by one, no contraction.
__global__ void k_sgd(float *__restrict__ w, float *__restrict__ mom, const float *__restrict__ g, long long count,
                      float lr, float momentum, float wd, int first) {
    FF_GRID_STRIDE(i, count) {
        float gi = g[i];
        if (wd != 0.0f) gi = __fadd_rn(gi, __fmul_rn(wd, w[i]));
        float bi;
        if (momentum != 0.0f) {
            bi = first ? gi : __fadd_rn(__fmul_rn(momentum, mom[i]), gi);
            mom[i] = bi;
        } else {
            bi = gi;
        }
        w[i] = __fsub_rn(w[i], __fmul_rn(lr, bi));
    }
}

__global__ void k_gather(float *__restrict__ x, int32_t *__restrict__ labels, const float *__restrict__ images,
                         const int32_t *__restrict__ all_labels, const int64_t *__restrict__ idx, long long per,
                         long long total) {
    FF_GRID_STRIDE(t, total) {
        const long long i = t / per, e = t % per;
        const long long src = idx[i];
        x[t] = images[src * per + e];
        if (e == 0) labels[i] = all_labels[src];
    }
}

// ------------------------------------------------------------------ launchers
static ff_status check_groups(const char *what, const ff_layer *L, int64_t group) {
    if (group < 1)
        return FF_FAIL(FF_ERR_INPUT, "%s of %s: groups of %lld images, expected >= 1", what, L->name, (long long)group);
    return FF_OK;
}

extern "C" ff_status ff_gpu_conv2d_backward_weights(float *dw, float *db, int64_t grad_stride, const float *dy,
                                                    const float *x, const ff_layer *L, int64_t n, int64_t group,
                                                    ff_gpu_stream s) {
    if (n <= 0) return FF_OK;
    FF_TRY(check_groups("conv2d weight gradient", L, group));
    const ConvGeom g = conv_geom(L);
    const long long ngroups = (n + group - 1) / group;
    const long long tw = ngroups * L->n_weight, tb = ngroups * L->out_c;
    k_conv_bwd_weights<<<train_blocks(tw), FF_TRAIN_THREADS, 0, ff_cu_stream(s)>>>(dw, grad_stride, dy, x, g, n, group,
                                                                                   tw);
    FF_LAUNCH_CHECK("k_conv_bwd_weights");
    k_bias_bwd<<<train_blocks(tb), FF_TRAIN_THREADS, 0, ff_cu_stream(s)>>>(db, grad_stride, dy, g.K,
                                                                           (long long)g.Ho * g.Wo, n, group, tb);
    FF_LAUNCH_CHECK("k_bias_bwd (conv2d)");
    return FF_OK;
}

extern "C" ff_status ff_gpu_conv2d_backward_data(float *dx, const float *dy, const float *w, const ff_layer *L,
                                                 int64_t n, ff_gpu_stream s) {
    if (n <= 0) return FF_OK;
    const long long total = n * ff_shape_numel(L->in);
    k_conv_bwd_data<<<train_blocks(total), FF_TRAIN_THREADS, 0, ff_cu_stream(s)>>>(dx, dy, w, conv_geom(L), total);
    FF_LAUNCH_CHECK("k_conv_bwd_data");
    return FF_OK;
}

extern "C" ff_status ff_gpu_linear_backward_weights(float *dw, float *db, int64_t grad_stride, const float *dy,
                                                    const float *x, const ff_layer *L, int64_t n, int64_t group,
                                                    ff_gpu_stream s) {
    if (n <= 0) return FF_OK;
    FF_TRY(check_groups("linear weight gradient", L, group));
    const long long O = L->out_c, I = ff_shape_numel(L->in);
    const long long ngroups = (n + group - 1) / group;
    const long long tw = ngroups * O * I, tb = ngroups * O;
    k_linear_bwd_weights<<<train_blocks(tw), FF_TRAIN_THREADS, 0, ff_cu_stream(s)>>>(dw, grad_stride, dy, x, O, I, n,
                                                                                     group, tw);
    FF_LAUNCH_CHECK("k_linear_bwd_weights");
    k_bias_bwd<<<train_blocks(tb), FF_TRAIN_THREADS, 0, ff_cu_stream(s)>>>(db, grad_stride, dy, (int)O, 1, n, group,
                                                                           tb);
    FF_LAUNCH_CHECK("k_bias_bwd (linear)");
    return FF_OK;
}

extern "C" ff_status ff_gpu_linear_backward_data(float *dx, const float *dy, const float *w, const ff_layer *L,
                                                 int64_t n, ff_gpu_stream s) {
    if (n <= 0) return FF_OK;
    const long long O = L->out_c, I = ff_shape_numel(L->in), total = n * I;
    k_linear_bwd_data<<<train_blocks(total), FF_TRAIN_THREADS, 0, ff_cu_stream(s)>>>(dx, dy, w, O, I, total);
    FF_LAUNCH_CHECK("k_linear_bwd_data");
    return FF_OK;
}

extern "C" ff_status ff_gpu_relu_backward(float *dx, const float *dy, const float *y, int64_t count, ff_gpu_stream s) {
    if (count <= 0) return FF_OK;
    k_relu_bwd<<<train_blocks(count), FF_TRAIN_THREADS, 0, ff_cu_stream(s)>>>(dx, dy, y, count);
    FF_LAUNCH_CHECK("k_relu_bwd");
    return FF_OK;
}

extern "C" ff_status ff_gpu_maxpool_backward(float *dx, const float *dy, const float *x, const ff_layer *L, int64_t n,
                                             ff_gpu_stream s) {
    if (n <= 0) return FF_OK;
    const long long total = n * ff_shape_numel(L->in);
    k_maxpool_bwd<<<train_blocks(total), FF_TRAIN_THREADS, 0, ff_cu_stream(s)>>>(dx, dy, x, conv_geom(L), total);
    FF_LAUNCH_CHECK("k_maxpool_bwd");
    return FF_OK;
}

extern "C" ff_status ff_gpu_softmax_xent(float *dz, float *loss, const float *z, const int32_t *labels, float scale,
                                         int64_t classes, int64_t n, ff_gpu_stream s) {
    if (n <= 0 || classes <= 0) return FF_OK;
    // Small blocks: one image per thread, so spread the images over many multiprocessors.
    const int threads = 64;
    const long long blocks = (n + threads - 1) / threads;
    k_softmax_xent<<<(unsigned)(blocks > (1 << 20) ? (1 << 20) : blocks), threads, 0, ff_cu_stream(s)>>>(
        dz, loss, z, labels, scale, classes, n);
    FF_LAUNCH_CHECK("k_softmax_xent");
    return FF_OK;
}

extern "C" ff_status ff_gpu_tree_reduce(float *rows, int64_t nrows, int64_t stride, int64_t len, ff_gpu_stream s) {
    if (nrows <= 1 || len <= 0) return FF_OK;
    k_tree_reduce<<<train_blocks(len), FF_TRAIN_THREADS, 0, ff_cu_stream(s)>>>(rows, nrows, stride, len);
    FF_LAUNCH_CHECK("k_tree_reduce");
    return FF_OK;
}

extern "C" ff_status ff_gpu_sgd(float *w, float *mom, const float *g, int64_t count, float lr, float momentum,
                                float weight_decay, bool first, ff_gpu_stream s) {
    if (count <= 0) return FF_OK;
    k_sgd<<<train_blocks(count), FF_TRAIN_THREADS, 0, ff_cu_stream(s)>>>(w, mom, g, count, lr, momentum, weight_decay,
                                                                         first ? 1 : 0);
    FF_LAUNCH_CHECK("k_sgd");
    return FF_OK;
}

extern "C" ff_status ff_gpu_gather(float *x, int32_t *labels, const float *images, const int32_t *all_labels,
                                   const int64_t *idx, int64_t per, int64_t n, ff_gpu_stream s) {
    if (n <= 0 || per <= 0) return FF_OK;
    const long long total = n * per;
    k_gather<<<train_blocks(total), FF_TRAIN_THREADS, 0, ff_cu_stream(s)>>>(x, labels, images, all_labels, idx, per,
                                                                            total);
    FF_LAUNCH_CHECK("k_gather");
    return FF_OK;
}
