// The training kernels of gpu.h ("training"): backward layers, softmax cross-entropy, the tree
// reduction of train.h and the SGD update, for the cuda device's training ops (device.h).
//
// Determinism first (gpu.h states every order): each output element, or each partial sum, is one
// chain computed by ONE thread in a fixed order that depends on nothing but the layer's shape: not
// on the grid, the tile, the batch size or the number of groups. No atomics, no split that depends
// on the launch, no reduction whose order depends on scheduling. Dot-product chains are fmaf chains
// (one rounding per term); every other float operation that must give fixed bits is an explicit
// _rn intrinsic, so nvcc's -fmad cannot contract it into an fma.
//
// Which orders are the CPU's (layers_cpu_backward.h) and which are not:
//   - relu and maxpool backward, softmax cross-entropy, the tree reduction, SGD, the linear weight
//     and bias gradients and the direct conv kernels (below) follow the CPU's order exactly (the
//     dot products with fma instead of a rounded product, so within the dot-product bound).
//   - Three heavy kernels take another fixed order, because the CPU's order would forbid a fast
//     kernel (a 4608-term serial chain per conv weight, a gather with 576 divisions per conv data
//     element). That is allowed: GPU and CPU bits already differ (fma), what the `cuda` class needs
//     is ONE order per element, written down in gpu.h, and every order stays within the same
//     derived bound of the exact gradient (a term goes through no more roundings than the chain
//     length the bound uses; verify/gpu/test_gpu_train.c checks it against float64):
//       conv2d weights/bias (workspace given): a tiled GEMM per image (k_conv_wgrad_part: chain
//         over the output positions q ascending, every term), then the per-image partials summed
//         in image order per group (k_conv_wgrad_sum); a layer of few columns (conv1) in strips of
//         two output rows instead (k_conv_wgrad_img), an image's strips added in order first.
//         Under --precision tf32x3 a stride-1 conv's weight partials are tf32x3 sums instead
//         (k_conv_wgrad_x3 / k_conv_wgrad_x3wg: chunks of 8 positions ascending, tf32x3.cuh's
//         products), the bias partials the same fp32 chains.
//       conv2d data (stride 1, square kernel, pad <= kh-1, workspace given): the FORWARD conv
//         kernel (layers_cuda.cu, gpu.h's conv order) on dy with the flipped, transposed weights
//         (k_conv_flip), so the chain runs k ascending, then r, s DESCENDING.
//       linear data (workspace given): the forward linear GEMM on dy with the transposed weights
//         (k_transpose), chain j ascending from +0, every term (the CPU skips zero dy).
//     Without a workspace (work == NULL) the direct kernels run, in the CPU's order; the cuda
//     device always passes one, so its bits are the GEMM paths'.
//
// A conv under a relu and a 2x2 max-pool (mnist's conv2) takes other orders again where the cuda
// device chooses the pool-sparse backward (pool_sparse.cu, gpu.h).
//
// The direct kernels (grid-stride loops, one output per thread) stay for the cases the fast paths
// do not take: strided or non-square convs' data gradient, and callers without a workspace.
#include <cuda_runtime.h>

#include <atomic>
#include <math.h>
#include <stdint.h>

#include "fivefold/gpu.h"
#include "stage.cuh"
#include "tf32x3.cuh"
#include "train_rules.cuh"
#include "gpu_check.cuh"
#include "train_parts.cuh"

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

// ------------------------------------------------------------------ conv2d weight gradient (GEMM)
// Per image i: part[i][k][e] = sum over q = (oh, ow) of dy[i,k,q] * X[q][e], e = (c, r, s), with
// X[q][e] = x[i, c, oh*st-pad+r, ow*st-pad+s] gathered on the fly (+0 for a padding tap), and the
// bias partial part[i][K*CRS + k] = sum over q of dy[i,k,q]. A block computes a WG_BM x WG_BN tile
// of (k, e) for one image (blockIdx.z); the q dimension streams through shared memory in WG_BQ-deep
// stages (cp.async, WG_ST stages in flight, out-of-range and padding elements zero-filled). Each
// thread owns WG_TM x WG_TN outputs, each ONE chain acc = fma(dy, X, acc) over q ascending from +0:
// every position, zero dy and padding taps included. The bias partials are chains of plain
// additions over q ascending from +0, run in registers by the threads with tx == 0 of the blocks
// with blockIdx.x == 0, on the dy values they load for their FMAs. Which block or thread computes
// an element never changes how: other tile sizes give the same bits (tried on an H200: 64x32,
// 64x64 with 8x4 per thread, 32x32, BQ 8/16/32), and so does a plain one-thread-per-chain loop.
// These tiles were the fastest of five on conv2 at batch 64 and 256 (81.0 / 255.7 us; 8x4 per
// thread in 64x32 or 64x64, 8x8 in 64x64, BQ 32 with 3 stages: 87 to 133 us at 64, the same digest;
// bench/results/issue15-s25 run 6).
#ifndef WG_BM  // (tile experiments may override these; every value gives the same bits)
#define WG_BM 64
#define WG_BN 32
#define WG_BQ 16
#define WG_TM 4
#define WG_TN 4
#define WG_ST 4
#endif
#define WG_T ((WG_BM / WG_TM) * (WG_BN / WG_TN))  // 128 threads
#define WG_AP (WG_BM + 4)                         // padded rows (16-byte aligned float4 reads)
#define WG_BP (WG_BN + 4)

struct WgradGeom {
    int C, H, W, K, R, S, Wo, stride, pad;
    int Q;         // Ho * Wo: the chain length
    int CRS;       // C * R * S: the columns
    long long PW;  // floats per image in the partials: K * CRS + K
    long long img0;
    int KG;      // k_conv_wgrad_img: output channels a block (ff_gpu_conv2d_wgrad_image_group)
    int Ho, SR;  // k_conv_wgrad_img: output rows, and rows a strip (the last one may be shorter)
};

__global__ void __launch_bounds__(WG_T) k_conv_wgrad_part(float *__restrict__ part, const float *__restrict__ dy,
                                                          const float *__restrict__ x, WgradGeom g) {
    static_assert(WG_T % WG_BQ == 0 && (WG_BM * WG_BQ) % WG_T == 0 && (WG_BN * WG_BQ) % WG_T == 0, "tile mismatch");
    static_assert(WG_TM % 4 == 0 && WG_TN % 4 == 0, "float4 fragment reads");
    constexpr int RSTEP = WG_T / WG_BQ;                      // rows of a tile one pass of loads covers
    constexpr int AL = WG_BM * WG_BQ / WG_T;                 // dy loads per thread per stage
    constexpr int BL = WG_BN * WG_BQ / WG_T;                 // x loads per thread per stage
    __shared__ __align__(16) float As[WG_ST][WG_BQ][WG_AP];  // dy[i, k0 + kk, q0 + qq] at [qq][kk]
    __shared__ __align__(16) float Bs[WG_ST][WG_BQ][WG_BP];  // X[q0 + qq][e0 + ee] at [qq][ee]

    const int tid = threadIdx.x;
    const int e0 = blockIdx.x * WG_BN, k0 = blockIdx.y * WG_BM;
    const long long img = g.img0 + blockIdx.z;
    const long long HW = (long long)g.H * g.W;
    const float *dyi = dy + img * g.K * (long long)g.Q;
    const float *xi = x + img * g.C * HW;

    // Loads: this thread always copies position q0 + lq of tile rows lrow + l * RSTEP. Offsets
    // within the image are 32-bit (the launcher checks K*Q and C*H*W).
    const int lq = tid % WG_BQ, lrow = tid / WG_BQ;
    // Its dy rows k = k0 + lrow + l * RSTEP: offset k*Q + lq, + l * RSTEP*Q per row, + q0 per stage.
    const int aoff = (k0 + lrow) * g.Q + lq, astep = RSTEP * g.Q;
    unsigned amask = 0;
#pragma unroll
    for (int l = 0; l < AL; l++) amask |= (k0 + lrow + l * RSTEP < g.K ? 1u : 0u) << l;
    // Its x columns e = e0 + lrow + l * RSTEP, decoded once: offset c*H*W + r*W + s, and r, s.
    int boff[BL], br[BL], bsc[BL];
    bool bval[BL];
    const int RS = g.R * g.S;
#pragma unroll
    for (int l = 0; l < BL; l++) {
        const int e = e0 + lrow + l * RSTEP;
        bval[l] = e < g.CRS;
        const int c = bval[l] ? e / RS : 0, rs = bval[l] ? e - c * RS : 0;
        br[l] = rs / g.S;
        bsc[l] = rs - br[l] * g.S;
        boff[l] = c * g.H * g.W + br[l] * g.W + bsc[l];
    }

    auto load_stage = [&](int st, int q0) {
        const int q = q0 + lq;
        const bool qv = q < g.Q;
#pragma unroll
        for (int l = 0; l < AL; l++) {
            const bool v = qv && (amask >> l & 1u);
            cp_async4(&As[st][lq][lrow + l * RSTEP], v ? dyi + (aoff + q0 + l * astep) : dy, v);
        }
        const int oh = qv ? q / g.Wo : 0, ow = qv ? q - oh * g.Wo : 0;
        const int ih0 = oh * g.stride - g.pad, iw0 = ow * g.stride - g.pad, base = ih0 * g.W + iw0;
#pragma unroll
        for (int l = 0; l < BL; l++) {
            const bool v =
                qv && bval[l] && (unsigned)(ih0 + br[l]) < (unsigned)g.H && (unsigned)(iw0 + bsc[l]) < (unsigned)g.W;
            cp_async4(&Bs[st][lq][lrow + l * RSTEP], v ? xi + (boff[l] + base) : x, v);
        }
    };

    const int tx = tid % (WG_BN / WG_TN), ty = tid / (WG_BN / WG_TN);
    float acc[WG_TM][WG_TN];
#pragma unroll
    for (int i = 0; i < WG_TM; i++)
#pragma unroll
        for (int j = 0; j < WG_TN; j++) acc[i][j] = 0.0f;
    // The bias partials: the threads of column group tx == 0 in the blocks of the first column
    // tile add the dy values they already hold for their WG_TM rows (a block-uniform branch below,
    // so the other blocks run no bias instructions at all).
    const bool bias_block = blockIdx.x == 0, bias_lane = bias_block && tx == 0;
    float bacc[WG_TM];
#pragma unroll
    for (int i = 0; i < WG_TM; i++) bacc[i] = 0.0f;

    const int ntiles = (g.Q + WG_BQ - 1) / WG_BQ;
#pragma unroll
    for (int st = 0; st < WG_ST - 1; st++) {
        if (st < ntiles) load_stage(st, st * WG_BQ);
        cp_async_commit();
    }
    for (int t = 0; t < ntiles; t++) {
        cp_async_wait<WG_ST - 2>();
        __syncthreads();  // stage t is visible to all; stage t-1 is no longer being read
        {
            const int tn = t + WG_ST - 1;
            if (tn < ntiles) load_stage(tn % WG_ST, tn * WG_BQ);
            cp_async_commit();
        }
        const int st = t % WG_ST;
        const int qr = min(WG_BQ, g.Q - t * WG_BQ);  // only the last stage can be partial
        // One term of each of this thread's chains per q, q ascending.
        auto step = [&](int qq, bool with_bias) {
            float av[WG_TM], bv[WG_TN];
#pragma unroll
            for (int v = 0; v < WG_TM; v += 4) {
                const float4 a = *(const float4 *)&As[st][qq][ty * WG_TM + v];
                av[v] = a.x, av[v + 1] = a.y, av[v + 2] = a.z, av[v + 3] = a.w;
            }
#pragma unroll
            for (int v = 0; v < WG_TN; v += 4) {
                const float4 b = *(const float4 *)&Bs[st][qq][tx * WG_TN + v];
                bv[v] = b.x, bv[v + 1] = b.y, bv[v + 2] = b.z, bv[v + 3] = b.w;
            }
#pragma unroll
            for (int i = 0; i < WG_TM; i++)
#pragma unroll
                for (int j = 0; j < WG_TN; j++) acc[i][j] = __fmaf_rn(av[i], bv[j], acc[i][j]);
            if (with_bias && bias_lane)
#pragma unroll
                for (int i = 0; i < WG_TM; i++) bacc[i] = __fadd_rn(bacc[i], av[i]);
        };
        if (qr == WG_BQ && !bias_block) {
#pragma unroll
            for (int qq = 0; qq < WG_BQ; qq++) step(qq, false);
        } else if (qr == WG_BQ) {
#pragma unroll
            for (int qq = 0; qq < WG_BQ; qq++) step(qq, true);
        } else {
            for (int qq = 0; qq < qr; qq++) step(qq, true);  // positions past Q are never added
        }
    }
    cp_async_wait<0>();

    float *pi = part + img * g.PW;
#pragma unroll
    for (int i = 0; i < WG_TM; i++) {
        const int k = k0 + ty * WG_TM + i;
        if (k >= g.K) continue;
#pragma unroll
        for (int j = 0; j < WG_TN; j++) {
            const int e = e0 + tx * WG_TN + j;
            if (e < g.CRS) pi[(long long)k * g.CRS + e] = acc[i][j];
        }
    }
    if (bias_lane)
#pragma unroll
        for (int i = 0; i < WG_TM; i++) {
            const int k = k0 + ty * WG_TM + i;
            if (k < g.K) pi[(long long)g.K * g.CRS + k] = bacc[i];
        }
}

// The partials of a layer with few columns (C*R*S < 32, gpu.h; mnist's conv1: 9), where a tile
// would leave most of its columns idle. A block owns one image, one strip of g.SR output rows
// (blockIdx.z; the last may be shorter) and g.KG of the output channels (blockIdx.y: the group; kg,
// fewer in the last one): their dy over the strip (kg, rows * Wo) and the image itself are copied
// into shared memory, and from the image, for each column e = (c, r, s), the input tap of every
// position of the strip in position order, a padding tap as +0 (CRS, rows * Wo); then thread
// t < kg*CRS runs chain (k, e) = (k0 + t / CRS, t % CRS) and thread kg*CRS + k the bias chain of
// k0 + k, each over the strip's positions ascending from +0 with every position, a padding tap as
// fma(dy, +0, acc), into the strip's partials (part: (n, strips, PW)); k_conv_wgrad_strip_sum adds
// an image's strips in order, then k_conv_wgrad_sum the images of a group. Where an image is one
// strip these are k_conv_wgrad_part's chains (test_gpu_train's conv_wgrad_image_kernel_bits checks
// both orders). Why strips: a block per image (sessions 28-32: 16-18.6 us alone at batch 64, 64
// blocks on 132 multiprocessors, 114 KB of shared memory each) ran beside conv2's weight gradient
// for 46 us (bench/results/issue15-s38 run 4), its blocks waiting for that kernel's to leave; a
// strip's block needs 12 KB, and mnist's 26 x 26 output makes 13 strips. The rows of a chain are
// read four positions a load where the strip's rows allow (a load a term was the old kernel's time:
// session 28).
__global__ void k_conv_wgrad_img(float *__restrict__ part, const float *__restrict__ dy, const float *__restrict__ x,
                                 WgradGeom g) {
    extern __shared__ __align__(16) float wgi_sm[];
    const int k0 = blockIdx.y * g.KG, kg = min(g.KG, g.K - k0);
    const int strip = blockIdx.z, oh0 = strip * g.SR, QS = g.SR * g.Wo, qs = min(g.SR, g.Ho - oh0) * g.Wo;
    const int RS = g.R * g.S, CHW = g.C * g.H * g.W;
    float *dys = wgi_sm;                      // (kg, QS): channels k0.. of dy over the strip
    float *xs = dys + g.KG * QS;              // (CRS, QS): the strip's taps, padding as +0
    float *xin = xs + (long long)g.CRS * QS;  // (C, H, W): the image
    const long long img = g.img0 + blockIdx.x;
    const float *dyi = dy + (img * g.K + k0) * (long long)g.Q + (long long)oh0 * g.Wo;  // channel k: + k Q
    const float *xi = x + img * (long long)CHW;
    // rows of whole quads, 16-byte aligned: the strip's dy rows (Q, QS, qs and its start), xs's rows
    const bool quads = (g.Q & 3) == 0 && (QS & 3) == 0 && (qs & 3) == 0 && ((oh0 * g.Wo) & 3) == 0;
    // Every copy in flight at once (cp.async, no register round trip), then one wait; 16 bytes a
    // copy where the rows allow (xin starts 16-byte aligned when QS % 4 == 0).
    if (quads && ((uintptr_t)dyi & 15) == 0)
        for (int i = threadIdx.x; i < kg * (qs / 4); i += blockDim.x) {
            const int k = i / (qs / 4), q4 = i - k * (qs / 4);
            cp_async16(dys + k * QS + 4 * q4, dyi + (long long)k * g.Q + 4 * q4, true);
        }
    else
        for (int i = threadIdx.x; i < kg * qs; i += blockDim.x) {
            const int k = i / qs, q = i - k * qs;
            cp_async4(dys + k * QS + q, dyi + (long long)k * g.Q + q, true);
        }
    if (quads && (CHW & 3) == 0 && ((uintptr_t)xi & 15) == 0)
        for (int i = threadIdx.x; i < CHW / 4; i += blockDim.x) cp_async16(xin + 4 * i, xi + 4 * i, true);
    else
        for (int i = threadIdx.x; i < CHW; i += blockDim.x) cp_async4(xin + i, xi + i, true);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    for (int i = threadIdx.x; i < g.CRS * qs; i += blockDim.x) {
        const int e = i / qs, ql = i - e * qs, q = oh0 * g.Wo + ql, c = e / RS, rs = e - c * RS, r = rs / g.S,
                  s = rs - r * g.S;
        const int h = q / g.Wo * g.stride - g.pad + r, w = q % g.Wo * g.stride - g.pad + s;
        const bool v = (unsigned)h < (unsigned)g.H && (unsigned)w < (unsigned)g.W;
        xs[e * QS + ql] = v ? xin[(c * g.H + h) * g.W + w] : 0.0f;
    }
    __syncthreads();
    const int t = threadIdx.x, KE = kg * g.CRS;
    float *pi = part + (img * gridDim.z + strip) * g.PW;
    if (t >= KE) {  // the bias chains (their own warps where kg*CRS is a multiple of 32)
        const int k = t - KE;
        if (k >= kg) return;
        const float *dk = dys + k * QS;
        float acc = 0.0f;
        if (quads) {
#pragma unroll 4
            for (int q4 = 0; q4 < qs / 4; q4++) {
                const float4 a = reinterpret_cast<const float4 *>(dk)[q4];
                acc = __fadd_rn(__fadd_rn(__fadd_rn(__fadd_rn(acc, a.x), a.y), a.z), a.w);
            }
        } else {
#pragma unroll 8
            for (int q = 0; q < qs; q++) acc = __fadd_rn(acc, dk[q]);
        }
        pi[(long long)g.K * g.CRS + k0 + k] = acc;
        return;
    }
    const int k = t / g.CRS, e = t - k * g.CRS;
    const float *dk = dys + k * QS, *xe = xs + e * QS;
    float acc = 0.0f;
    if (quads) {
#pragma unroll 4
        for (int q4 = 0; q4 < qs / 4; q4++) {
            const float4 a = reinterpret_cast<const float4 *>(dk)[q4], b = reinterpret_cast<const float4 *>(xe)[q4];
            acc = __fmaf_rn(a.w, b.w, __fmaf_rn(a.z, b.z, __fmaf_rn(a.y, b.y, __fmaf_rn(a.x, b.x, acc))));
        }
    } else {
#pragma unroll 8
        for (int q = 0; q < qs; q++) acc = __fmaf_rn(dk[q], xe[q], acc);
    }
    pi[(long long)(k0 + k) * g.CRS + e] = acc;
}

// k_conv_wgrad_img's partials (the same chains: over the strip's positions ascending from +0,
// fma(dy, x, acc) with a padding tap as x = +0; the bias chain +0 + dy + dy ...), with no shared
// memory and no barrier: a warp owns one image, one strip and 32 output channels, lane l channel
// k0 + l, and runs that channel's CRS + 1 chains together, position by position: its own dy (its
// row, read as it goes) against the position's CRS taps, which every lane reads at the same address
// (one broadcast load each). Why: k_conv_wgrad_img's blocks stage dy, the image and the taps in
// 12 KB of shared memory between two barriers, and beside conv2's pool-sparse weight gradient
// (105 KB blocks on the lane) they wait for shared memory to free: 22.9-35.8 us at batch 64 in the
// step against 13.2 alone under ncu (bench/results/issue15-s39, -s40). Opt-in (ff_gpu_set_wgrad_lanes,
// FF_TRAIN_WGRAD_LANES=1) until a GPU run has timed it.
template <int CE>  // CE >= CRS: the chains a lane holds (the few-column rule: CRS < 32)
__global__ void __launch_bounds__(128)
    k_conv_wgrad_lanes(float *__restrict__ part, const float *__restrict__ dy, const float *__restrict__ x, WgradGeom g,
                       int strips, long long warps) {
    const long long wid = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5;
    if (wid >= warps) return;
    const int lane = threadIdx.x & 31, kgroups = (g.K + 31) / 32;
    const int k = (int)(wid % kgroups) * 32 + lane;
    const long long rest = wid / kgroups, img = rest / strips;
    const int strip = (int)(rest - img * strips), oh0 = strip * g.SR, qs = min(g.SR, g.Ho - oh0) * g.Wo;
    const int RS = g.R * g.S;
    const float *dk = dy + (img * g.K + (k < g.K ? k : 0)) * (long long)g.Q + (long long)oh0 * g.Wo;
    const float *xi = x + img * (long long)g.C * g.H * g.W;
    int off[CE], rs[CE];  // column e = (c, r, s): its offset in the image, r and s
#pragma unroll
    for (int e = 0; e < CE; e++) {
        const int c = e < g.CRS ? e / RS : 0, t = e - c * RS, r = t / g.S, s = t - r * g.S;
        off[e] = (c * g.H + r) * g.W + s, rs[e] = r << 8 | s;
    }
    float acc[CE], bacc = 0.0f;
#pragma unroll
    for (int e = 0; e < CE; e++) acc[e] = 0.0f;
#pragma unroll 2
    for (int q = 0; q < qs; q++) {
        const int oh = oh0 + q / g.Wo, ow = q % g.Wo, ih0 = oh * g.stride - g.pad, iw0 = ow * g.stride - g.pad;
        const float d = __ldg(dk + q);
        bacc = __fadd_rn(bacc, d);
#pragma unroll
        for (int e = 0; e < CE; e++) {
            if (e >= g.CRS) break;
            const int ih = ih0 + (rs[e] >> 8), iw = iw0 + (rs[e] & 255);
            const float xv = (unsigned)ih < (unsigned)g.H && (unsigned)iw < (unsigned)g.W
                                 ? __ldg(xi + off[e] + (ih0 * g.W + iw0))
                                 : 0.0f;
            acc[e] = __fmaf_rn(d, xv, acc[e]);
        }
    }
    if (k >= g.K) return;
    float *pi = part + (img * strips + strip) * g.PW;
#pragma unroll
    for (int e = 0; e < CE; e++)
        if (e < g.CRS) pi[(long long)k * g.CRS + e] = acc[e];
    pi[(long long)g.K * g.CRS + k] = bacc;
}
static thread_local bool g_wgrad_lanes = false;  // gpu.h ff_gpu_set_wgrad_lanes
extern "C" void ff_gpu_set_wgrad_lanes(bool on) {
    g_wgrad_lanes = on;
}

// ------------------------------------------------------------------ conv2d weight gradient, tf32x3
// --precision tf32x3 (tf32x3.cuh): k_conv_wgrad_part's per-image partials on tensor cores, for
// stride-1 convs. Per image the GEMM part[k][e] = sum over q of dy[k, q] X[q][e] runs as mma
// m16n8k8 tiles with k the row (A = dy), e = (c, r, s) the column (B = X) and the positions q the
// reduction, in chunks of 8 positions ascending from +0 (the last one zero-padded, never a chunk
// past Q), each chunk's three products in x3_mma_chunk's order. A block owns one image, WX_BM rows
// of k and BN columns of e; a stage is WX_QS positions: their dy rows and the input rows they
// reach (zero-padded: NR rows of WP = W + 2 pad for each of the CB channels the block's columns
// touch) are copied raw by cp.async a stage ahead, then split once per block into (big, small)
// pairs. B's element (q, e) is the pair at pos[q] + tap[e] of the staged rows: k_conv_x3_rows'
// staging with the roles of pixel and tap swapped. An element's value depends only on its dy row,
// its X column and the chunk sequence, so every configuration, column tile and batch gives the
// same bits. The bias partials keep k_conv_wgrad_part's fp32 chains (+0, then dy[k, q] added for q
// ascending, every position), run on each stage's raw dy by the first WX_BM threads of the blocks
// of column tile 0 while the others split: the bias bits are the fp32 path's.
#define WX_BM 64
#define WX_QS 48            // positions a stage: 6 chunks of 8
#define WX_QSP (WX_QS + 4)  // pairs a staged dy row: 52 = 4 (mod 16), conflict-free A fragment reads
#define WX_NI 3             // column tiles of 8 a warp
struct WgradX3Geom {        // the staging of a launch (conv_wgrad_x3)
    int NR, WP, XS4, CB;    // staged rows a channel, padded width, staged x floats (a multiple of 4), channels
    int etiles;             // column tiles an image
};
// What both tf32x3 weight-gradient kernels do with a stage besides splitting dy (its raw rows dr,
// [rows][WX_QS]): the staged input rows split into pairs (xr -> xsp, XS of them), where each of its
// WX_QS positions starts in those rows (pos; past Q: a zero-filled row, the host stages every row a
// stage spans), and, on the bias lanes (thread tid < rows of column tile 0), the fp32 bias chain:
// +0, then dy[k, q] added for q ascending, k_conv_wgrad_part's bits.
__device__ __forceinline__ void wx_stage_rows(uint2 *xsp, int *pos, float &bacc, const float *xr, const float *dr,
                                              int XS, int q0s, const WgradGeom &g, const WgradX3Geom &r, bool bias_lane,
                                              int tid, int T) {
    for (int e = tid; e < XS; e += T) xsp[e] = split_pair(xr[e]);
    for (int qq = tid; qq < WX_QS; qq += T) {
        const int q = q0s + qq;
        pos[qq] = (q / g.Wo - q0s / g.Wo) * r.WP + q % g.Wo;
    }
    if (bias_lane) {
        const int qr = min(WX_QS, g.Q - q0s);
        for (int qq = 0; qq < qr; qq++) bacc = __fadd_rn(bacc, dr[tid * WX_QS + qq]);
    }
}
template <int BN>
static size_t wgrad_x3_smem_bytes(const WgradX3Geom &r) {
    const size_t staged = (size_t)(2 * WX_BM * WX_QS + 2 * r.XS4) * sizeof(float) +
                          (size_t)(WX_BM * WX_QSP + r.XS4) * sizeof(uint2) + WX_QS * sizeof(int);
    const size_t tile = (size_t)x3_tile_floats<WX_BM, BN>() * sizeof(float);  // the epilogue's
    return staged > tile ? staged : tile;
}
// MI: mma row tiles a warp (16 rows each); WMW warps along k, NWN along e (a warp WX_NI column tiles).
template <int MI, int WMW, int NWN>
__global__ void __launch_bounds__(WMW *NWN * 32)
    k_conv_wgrad_x3(float *__restrict__ part, const float *__restrict__ dy, const float *__restrict__ x, WgradGeom g,
                    WgradX3Geom r, int dy16) {
    constexpr int NI = WX_NI, T = WMW * NWN * 32, BN = NWN * NI * 8;
    static_assert(MI * 16 * WMW == WX_BM && T >= WX_BM, "the warps cover the block's rows; a bias thread a row");
    extern __shared__ __align__(16) float smem[];
    float *draw = smem;                        // [2][WX_BM][WX_QS] raw dy
    float *xraw = draw + 2 * WX_BM * WX_QS;    // [2][XS4] raw input rows: [CB][NR][WP]
    uint2 *dsp = (uint2 *)(xraw + 2 * r.XS4);  // [WX_BM][WX_QSP] split dy
    uint2 *xsp = dsp + WX_BM * WX_QSP;         // [XS4] split input rows
    int *pos = (int *)(xsp + r.XS4);           // [WX_QS] where position q0s + qq starts in the staged rows
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, gq = lane >> 2, tq = lane & 3;
    const long long img = g.img0 + blockIdx.x / r.etiles;
    const int e0 = (int)(blockIdx.x % r.etiles) * BN, k0 = blockIdx.y * WX_BM;
    const int RS = g.R * g.S, c_lo = e0 / RS, XS = r.CB * r.NR * r.WP;
    const long long HW = (long long)g.H * g.W;
    const float *dyi = dy + img * g.K * (long long)g.Q;
    const float *xi = x + img * g.C * HW;
    const int wm0 = (warp % WMW) * MI * 16, wn0 = (warp / WMW) * NI * 8;
    int tap[NI];  // where this lane's B column e0 + wn0 + ni * 8 + gq starts in a stage's rows
#pragma unroll
    for (int ni = 0; ni < NI; ni++) {
        const int e = e0 + wn0 + ni * 8 + gq;
        const int c = e / RS, rs = e - c * RS, rr = rs / g.S, ss = rs - rr * g.S;
        tap[ni] = e < g.CRS ? (c - c_lo) * r.NR * r.WP + rr * r.WP + ss : 0;  // past CRS: any staged pair
    }
    auto issue = [&](int st, int buf) {  // dy16: Q % 4 == 0, dy 16-byte aligned: whole quads
        const int q0s = st * WX_QS;      // stride 1: staged row 0 is input row q0s / Wo - pad
        stage_tile<WX_BM, WX_QS, T>(draw + buf * WX_BM * WX_QS, dyi, dy, g.Q, k0, g.K, q0s, g.Q, dy16, tid);
        stage_padded_rows(xraw + buf * r.XS4, xi, x, r.CB, r.NR, r.WP, c_lo, g.C, q0s / g.Wo - g.pad, g.H, g.W, g.pad,
                          0, g.H, HW, warp, T / 32, lane);
    };

    float acc[MI][NI][4];
    x3_acc_init(acc, (const float *)nullptr, 0, 0, gq);  // +0
    const bool bias_lane = blockIdx.x % r.etiles == 0 && tid < WX_BM;
    float bacc = 0.0f;
    const int nst = (g.Q + WX_QS - 1) / WX_QS;
    issue(0, 0);
    cp_async_commit();
    for (int t = 0; t < nst; t++) {
        if (t + 1 < nst) issue(t + 1, (t + 1) & 1);  // its buffer's last readers were split(t - 1) and the bias
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();  // stage t has landed; every warp is done with the split pairs of t - 1
        const int q0s = t * WX_QS;
        {
            const float *dr = draw + (t & 1) * WX_BM * WX_QS, *xr = xraw + (t & 1) * r.XS4;
            for (int e = tid; e < WX_BM * WX_QS; e += T) dsp[(e / WX_QS) * WX_QSP + e % WX_QS] = split_pair(dr[e]);
            wx_stage_rows(xsp, pos, bacc, xr, dr, XS, q0s, g, r, bias_lane, tid, T);
        }
        __syncthreads();
#pragma unroll
        for (int j = 0; j < WX_QS / 8; j++) {
            if (q0s + 8 * j >= g.Q) break;  // a chunk past Q is never added
            const int p0 = pos[8 * j + tq], p1 = pos[8 * j + tq + 4];
            uint32_t ab[MI][4], al[MI][4], bb[NI][2], bl[NI][2];
#pragma unroll
            for (int mi = 0; mi < MI; mi++)
                x3_a_rows(ab[mi], al[mi], dsp + (wm0 + mi * 16 + gq) * WX_QSP + 8 * j + tq, WX_QSP);
#pragma unroll
            for (int ni = 0; ni < NI; ni++) x3_b_taps(bb[ni], bl[ni], xsp, p0, p1, tap[ni]);
            x3_mma_chunk(acc, ab, al, bb, bl);
        }
    }
    cp_async_wait<0>();
    float *pi = part + img * g.PW;
    x3_store<WX_BM, BN, T>(pi, smem, acc, k0, wm0, wn0, g.K, g.CRS, gq, tq, 0,
                           [&](int c) -> long long { return e0 + c < g.CRS ? e0 + c : -1; });
    if (bias_lane && k0 + tid < g.K) pi[(long long)g.K * g.CRS + k0 + tid] = bacc;
}
// The same partials on Hopper's warpgroup MMA (tf32x3.cuh; sm_90a builds, FF_HAVE_WGMMA), with the
// operands' roles swapped: D[e][k] = sum over q of X[q][e] dy[k, q]. A warpgroup owns MT tiles of
// 64 columns e (the GEMM's rows here) and the block's WX_BM output channels; A (the taps, q the
// reduction) is read from the staged input pairs at pos[q] + tap[e] into registers, B (dy: WX_BM
// channels x 8 positions a k-chunk, K-major as dy's rows lie) is split once per block into two
// tiles (big, small) in wgmma's core-matrix layout. Each k-chunk's three products (x_big dy_small,
// x_small dy_big, x_big dy_big) are k_conv_wgrad_x3's (dy_small x_big, dy_big x_small, dy_big
// x_big) in the same order, from +0 over the same chunks: the same bits (the probe,
// bench/results/issue15-s27/wgmma_probe.cu; test_gpu_train compares every configuration). The
// bias partials: k_conv_wgrad_x3's fp32 chains. The epilogue goes through shared memory,
// channel-major, so that each channel's columns leave in whole rows.
template <int BE>
static size_t wgrad_x3wg_smem_bytes(const WgradX3Geom &r) {
    const size_t staged = (size_t)(2 * (WX_QS / 8) * WX_BM * 8 + 2 * WX_BM * WX_QS + 2 * r.XS4) * sizeof(float) +
                          (size_t)r.XS4 * sizeof(uint2) + WX_QS * sizeof(int);
    const size_t tile = (size_t)WX_BM * (BE + 4) * sizeof(float);
    return staged > tile ? staged : tile;
}
template <int MT, int WG>
__global__ void __launch_bounds__(WG * 128)
    k_conv_wgrad_x3wg(float *__restrict__ part, const float *__restrict__ dy, const float *__restrict__ x, WgradGeom g,
                      WgradX3Geom r, int dy16) {
    constexpr int T = WG * 128, BE = WG * MT * 64, NT = WX_BM, NCH = WX_QS / 8;
    extern __shared__ __align__(128) float wx_smem[];  // (its own name: the others are 16-byte aligned)
    float *bt = wx_smem;                               // [2][NCH][NT * 8]: the stage's split dy
    float *draw = bt + 2 * NCH * NT * 8;               // [2][NT][WX_QS] raw dy
    float *xraw = draw + 2 * NT * WX_QS;               // [2][XS4] raw input rows: [CB][NR][WP]
    uint2 *xsp = (uint2 *)(xraw + 2 * r.XS4);          // [XS4] split input rows
    int *pos = (int *)(xsp + r.XS4);                   // [WX_QS] where position q0s + qq starts in the rows
    const int tid = threadIdx.x, grp = tid / 128, warp = (tid / 32) % 4, lane = tid % 32, gq = lane >> 2, tq = lane & 3;
    const long long img = g.img0 + blockIdx.x / r.etiles;
    const int e0 = (int)(blockIdx.x % r.etiles) * BE, k0 = blockIdx.y * NT;
    const int RS = g.R * g.S, c_lo = e0 / RS, XS = r.CB * r.NR * r.WP;
    const long long HW = (long long)g.H * g.W;
    const float *dyi = dy + img * g.K * (long long)g.Q;
    const float *xi = x + img * g.C * HW;
    int tp[MT][2];  // where rows e0 + (grp MT + mt) 64 + 16 warp + gq (+ 8) start in a stage's rows
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int e = e0 + (grp * MT + mt) * 64 + warp * 16 + gq + 8 * h;
            const int c = e / RS, rs = e - c * RS, rr = rs / g.S, ss = rs - rr * g.S;
            tp[mt][h] = e < g.CRS ? (c - c_lo) * r.NR * r.WP + rr * r.WP + ss : 0;  // past CRS: any pair
        }
    auto issue = [&](int st, int buf) {  // k_conv_wgrad_x3's copies
        const int q0s = st * WX_QS;
        stage_tile<NT, WX_QS, T>(draw + buf * NT * WX_QS, dyi, dy, g.Q, k0, g.K, q0s, g.Q, dy16, tid);
        stage_padded_rows(xraw + buf * r.XS4, xi, x, r.CB, r.NR, r.WP, c_lo, g.C, q0s / g.Wo - g.pad, g.H, g.W, g.pad,
                          0, g.H, HW, tid / 32, T / 32, lane);
    };
    float d[MT][NT / 2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int i = 0; i < NT / 2; i++) d[mt][i] = 0.0f;
    uint32_t ab[2][MT][4], al[2][MT][4];
    auto read_a = [&](int set, int j) {
        const int p0 = pos[8 * j + tq], p1 = pos[8 * j + tq + 4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++) x3_a_taps(ab[set][mt], al[set][mt], xsp, p0, p1, tp[mt][0], tp[mt][1]);
    };
    const bool bias_lane = blockIdx.x % r.etiles == 0 && tid < NT;
    float bacc = 0.0f;
    const int nst = (g.Q + WX_QS - 1) / WX_QS;
    issue(0, 0);
    cp_async_commit();
    for (int t = 0; t < nst; t++) {
        if (t + 1 < nst) issue(t + 1, (t + 1) & 1);  // its buffer's last readers were split(t - 1) and the bias
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();  // stage t has landed; every warpgroup's products of t - 1 are done
        const int q0s = t * WX_QS;
        {
            const float *dr = draw + (t & 1) * NT * WX_QS, *xr = xraw + (t & 1) * r.XS4;
            wg_split_b<NT, WX_QS, T>(bt, dr, tid);
            wx_stage_rows(xsp, pos, bacc, xr, dr, XS, q0s, g, r, bias_lane, tid, T);
        }
        fence_proxy_async();  // the dy tiles, written by st.shared, are read by wgmma's async proxy
        __syncthreads();
        const int chunks = min(NCH, (g.Q - q0s + 7) / 8);  // a chunk past Q is never added
        read_a(0, 0);
#pragma unroll
        for (int j = 0; j < NCH; j++) {
            if (j >= chunks) break;
            const int set = j & 1;
            wg_x3_chunk<NT>(d, ab[set], al[set], wg_desc(bt + j * NT * 8), wg_desc(bt + (NCH + j) * NT * 8));
            wg_wait<1>();  // chunk j - 1 is done: its register set is free for chunk j + 1
            if (j + 1 < chunks) read_a(set ^ 1, j + 1);
        }
        wg_drain<NT>(d);
    }
    cp_async_wait<0>();
    __syncthreads();  // every warpgroup is done with the staged operands
    constexpr int TP = BE + 4;
    float *tile = wx_smem;  // [NT][TP], channel-major
    wg_tile_transposed<NT>(tile, TP, d, grp * MT * 64 + warp * 16, gq, tq);
    __syncthreads();
    float *pi = part + img * g.PW;
    for (int e = tid; e < NT * BE; e += T) {
        const int n = e / BE, c = e - n * BE;
        if (k0 + n < g.K && e0 + c < g.CRS) pi[(long long)(k0 + n) * g.CRS + e0 + c] = tile[n * TP + c];
    }
    if (bias_lane && k0 + tid < g.K) pi[(long long)g.K * g.CRS + k0 + tid] = bacc;
}
// Configurations 2.. : MT, WG (a block 64 WG MT columns e).
#define WXG_CFG_0 1, 3    // 384 threads, 192 columns
#define WXG_CFG_1 1, 5    // 640 threads, 320 columns
#define WXG_CFG_2 1, 2    // 256 threads, 128 columns
#define WXG_CFG_3 2, 3    // 384 threads, 384 columns
#define WX_CFG_0 4, 1, 6  // 6 warps, each 64 rows x 24 columns (block 64 x 144)
#define WX_CFG_1 2, 2, 6  // 12 warps, each 32 x 24 (block 64 x 144)
#ifdef FF_HAVE_WGMMA
#define WX_CFGS 6
#else
#define WX_CFGS 2
#endif

static bool g_force_wgrad_tiled = false;
extern "C" void ff_gpu_debug_force_wgrad_tiled(bool on) {
    g_force_wgrad_tiled = on;
}

// An image's partials from its strips' (k_conv_wgrad_img), one thread per (image, element):
// img[i][e] = ((strip[i][0][e] + strip[i][1][e]) + ...) + strip[i][S-1][e], float additions in strip
// order. (Run 1 of session 39 summed the strips inside k_conv_wgrad_sum, a thread per (group,
// element): 2560 threads each walking 104 partials took 9.1 us at batch 64; the same sums.)
__global__ void k_conv_wgrad_strip_sum(float *__restrict__ img, const float *__restrict__ strip, long long PW,
                                       int strips, long long total) {
    FF_GRID_STRIDE(t, total) {
        const long long e = t % PW, i = t / PW;
        const float *p = strip + i * strips * PW + e;
        float v = p[0];
        for (int s = 1; s < strips; s++) v = __fadd_rn(v, p[s * PW]);
        img[t] = v;
    }
}
// Group sums of the per-image partials, one thread per (group, element): row g of an element is
// part[i0], then + part[i0 + 1], ..., + part[i1 - 1] (float additions in image order; a one-image
// group is part[i0] itself). Elements [0, K*CRS) go to dw, [K*CRS, PW) to db.
__global__ void k_conv_wgrad_sum(float *__restrict__ dw, float *__restrict__ db, long long grad_stride,
                                 const float *__restrict__ part, long long KCRS, long long PW, long long n,
                                 long long group, long long total) {
    FF_GRID_STRIDE(t, total) {
        const long long e = t % PW, grp = t / PW;
        const long long i0 = grp * group, i1 = min(n, i0 + group);
        float v = part[i0 * PW + e];
        for (long long i = i0 + 1; i < i1; i++) v = __fadd_rn(v, part[i * PW + e]);
        if (e < KCRS)
            dw[grp * grad_stride + e] = v;
        else
            db[grp * grad_stride + (e - KCRS)] = v;
    }
}

// Max-pool backward where the windows tile the input exactly (stride = window, no padding, the
// input an exact multiple: mnist's 2x2/2): every input element is in one window, so one thread
// per window writes its R*S elements: 0, except the pick (the CPU's rule) which gets 0 + dy (the
// CPU's dx = 0; dx[argmax] += dy: the same addition, -0 included). The same bits as k_maxpool_bwd,
// without each element re-deriving its window.
// relu: x is a relu's output and dx the gradient of the relu's input (ff_gpu_maxpool_backward):
// the pick's value passes only where bv > 0, as k_relu_bwd would pass it.
// I: the index type, unsigned where every index fits (a 64-bit division costs dozens of
// instructions, and this pass is meant to be bound by memory).
template <typename I>
__global__ void k_maxpool_bwd_tiled(float *__restrict__ dx, const float *__restrict__ dy, const float *__restrict__ x,
                                    ConvGeom g, I total, bool relu) {
    const int HoWo = g.Ho * g.Wo;
    for (I t = blockIdx.x * (I)blockDim.x + threadIdx.x; t < total; t += (I)gridDim.x * blockDim.x) {
        const I plane = t / (I)HoWo;
        const int o = (int)(t - plane * HoWo), oh = o / g.Wo, ow = o - oh * g.Wo;
        const float *xp = x + (long long)plane * g.H * g.W;
        float *dxp = dx + (long long)plane * g.H * g.W;
        int best = -1;
        float bv = 0.0f;
        for (int r = 0; r < g.R; r++)
            for (int s2 = 0; s2 < g.S; s2++) {
                const int at = (oh * g.stride + r) * g.W + ow * g.stride + s2;
                const float v = xp[at];
                if (best < 0 || v > bv || isnan(v)) {
                    best = at;
                    bv = v;
                }
            }
        const float d = relu && !(bv > 0.0f) ? 0.0f : __fadd_rn(0.0f, dy[t]);
        for (int r = 0; r < g.R; r++)
            for (int s2 = 0; s2 < g.S; s2++) {
                const int at = (oh * g.stride + r) * g.W + ow * g.stride + s2;
                dxp[at] = at == best ? d : 0.0f;
            }
    }
}

// The same for 2x2 windows of stride 2 on an even-width input (mnist's pool1): a window's two rows
// read and written as float2s (8-byte aligned: W and every plane's H*W even), half the memory
// instructions of the general kernel, the same picks in the same order, the same bits.
template <typename I>
__global__ void k_maxpool_bwd_2x2(float *__restrict__ dx, const float *__restrict__ dy, const float *__restrict__ x,
                                  int Ho, int Wo, I total, bool relu) {
    const int HoWo = Ho * Wo, W = 2 * Wo;
    for (I t = blockIdx.x * (I)blockDim.x + threadIdx.x; t < total; t += (I)gridDim.x * blockDim.x) {
        const I plane = t / (I)HoWo;
        const int o = (int)(t - plane * HoWo), oh = o / Wo, ow = o - oh * Wo;
        const long long at = (long long)plane * HoWo * 4 + (long long)(2 * oh) * W + 2 * ow;
        const float2 a = *reinterpret_cast<const float2 *>(x + at), b = *reinterpret_cast<const float2 *>(x + at + W);
        float bv;  // (k_maxpool_bwd_tiled's scan)
        const int best = pool2x2_pick(a.x, a.y, b.x, b.y, &bv);
        const float d = relu && !(bv > 0.0f) ? 0.0f : __fadd_rn(0.0f, dy[t]);
        *reinterpret_cast<float2 *>(dx + at) = make_float2(best == 0 ? d : 0.0f, best == 1 ? d : 0.0f);
        *reinterpret_cast<float2 *>(dx + at + W) = make_float2(best == 2 ? d : 0.0f, best == 3 ? d : 0.0f);
    }
}

// ------------------------------------------------------------------ weight rearrangements
// wf[c][k][r'][s'] = w[k][c][R-1-r'][S-1-s'] (the conv data gradient's flipped, transposed
// weights), then zb[0 .. C) = +0 (the zero bias of that forward conv): one thread per element.
__global__ void k_conv_flip(float *__restrict__ wf, const float *__restrict__ w, int K, int C, int R, int S,
                            long long total) {
    const long long KCRS = (long long)K * C * R * S;
    FF_GRID_STRIDE(t, total) {
        if (t >= KCRS) {
            wf[t] = 0.0f;
            continue;
        }
        const int s2 = (int)(t % S), r2 = (int)(t / S % R);
        const int k = (int)(t / ((long long)R * S) % K);
        const long long c = t / ((long long)R * S * K);
        wf[t] = w[(((long long)k * C + c) * R + (R - 1 - r2)) * S + (S - 1 - s2)];
    }
}

// out (cols, rows) = in (rows, cols) transposed, through a 32 x 33 shared tile (coalesced reads and
// writes); the blocks of the first tile row also write zb[0 .. cols) = +0 (the linear data
// gradient's zero bias). Block (32, 8).
__global__ void k_transpose(float *__restrict__ out, float *__restrict__ zb, const float *__restrict__ in, int rows,
                            int cols) {
    __shared__ float tile[32][33];
    const int c0 = blockIdx.x * 32, r0 = blockIdx.y * 32;
    for (int j = threadIdx.y; j < 32; j += 8) {
        const int r = r0 + j, c = c0 + threadIdx.x;
        if (r < rows && c < cols) tile[j][threadIdx.x] = in[(long long)r * cols + c];
    }
    __syncthreads();
    for (int j = threadIdx.y; j < 32; j += 8) {
        const int c = c0 + j, r = r0 + threadIdx.x;
        if (c < cols && r < rows) out[(long long)c * rows + r] = tile[threadIdx.x][j];
    }
    if (blockIdx.y == 0 && threadIdx.y == 0 && c0 + (int)threadIdx.x < cols) zb[c0 + threadIdx.x] = 0.0f;
}

// ------------------------------------------------------------------ linear backward
// One thread per (group, quad of rows j0 .. j0+3, i): blockIdx.x * blockDim.x + threadIdx.x is i
// (consecutive i across a warp: x reads and dw stores coalesced, dy[n, j] one broadcast address),
// blockIdx.y walks the (group, quad) pairs (no 64-bit divisions per element); each x[n, i] is read
// once for four rows. Each output element keeps its own chain: images of the group ascending, zero
// dy skipped (the CPU's order and skip).
#define LW_JB 4
__global__ void k_linear_bwd_weights(float *__restrict__ dw, long long grad_stride, const float *__restrict__ dy,
                                     const float *__restrict__ x, long long O, long long I, long long n,
                                     long long group, long long pairs) {
    const long long OQ = (O + LW_JB - 1) / LW_JB;
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= I) return;
    for (long long p = blockIdx.y; p < pairs; p += gridDim.y) {
        const long long jq = p % OQ, grp = p / OQ;
        const long long j0 = jq * LW_JB;
        const long long i0 = grp * group, i1 = min(n, i0 + group);
        float acc[LW_JB];
#pragma unroll
        for (int jj = 0; jj < LW_JB; jj++) acc[jj] = 0.0f;
        for (long long s = i0; s < i1; s++) {
            const float xv = x[s * I + i];
#pragma unroll
            for (int jj = 0; jj < LW_JB; jj++) {
                if (j0 + jj >= O) break;
                const float a = dy[s * O + j0 + jj];
                if (a != 0.0f) acc[jj] = fmaf(a, xv, acc[jj]);
            }
        }
#pragma unroll
        for (int jj = 0; jj < LW_JB; jj++)
            if (j0 + jj < O) dw[grp * grad_stride + (j0 + jj) * I + i] = acc[jj];
    }
}

// The same weight gradient summed over all the groups in train.h's fixed tree, in one pass (one
// process: ff_device_train_backward_reduced; the bias keeps its small rows), where k_linear_bwd_weights writes a row
// per group for the tree to read back (at batch 256, 32 rows of fc1's 1.2 M floats: 150 MB each
// way). Each group's chain is k_linear_bwd_weights' (images ascending, zero dy skipped); the tree
// runs as the groups finish, on a binary counter of partial sums: level i holds the sum of 2^i
// groups while bit i of the count of groups done is set (the higher levels the older). A finished
// group's sum is added to the full levels from 0 up, older + newer, and the lowest free level
// takes the result; at the end the levels set in the group count are folded from the lowest up
// (older + newer). Those are the fixed tree's additions in its order, for any group count (every
// subtree of size 2^k is complete once its last group is; the leftover subtrees at the right end
// are joined right to left, as the fold does).
//
// A block computes a tile of LT_J rows x LT_I inputs for every group; each thread keeps 2 x 4 of
// them. Images stream through shared memory LT_S at a time (a stage never straddles two groups),
// two stages of them: the next stage's loads are in flight in registers while this one's FMAs run,
// and one barrier a stage suffices (the buffer written after the FMAs was last read a stage
// before). The levels live in dynamic shared memory, [level][element][thread] (a thread's own
// words: no conflicts), as many as the group count has bits. (They were a per-thread array indexed
// at run time, which put them in local memory: 400 bytes a thread, fc1's 28.5 us at batch 64; as
// registers, the unrolled levels took 80 to 160 of them and spilled.)
#define LT_J 32
#define LT_I 64
#define LT_S 8
#define LT_T 256                             // threads: 16 row pairs x 16 input quads
static int tree_levels(long long ngroups) {  // bits of the group count
    int b = 0;
    while ((1LL << b) <= ngroups) b++;
    return b;
}
static size_t tree_level_bytes(int levels) {
    return (size_t)levels * 8 * LT_T * sizeof(float);
}
__global__ void __launch_bounds__(LT_T)
    k_linear_bwd_weights_tree(float *__restrict__ dw, const float *__restrict__ dy, const float *__restrict__ x,
                              long long O, long long I, long long n, long long group) {
    __shared__ __align__(16) float xs[2][LT_S][LT_I];
    __shared__ float ds[2][LT_S][LT_J];
    extern __shared__ float lv[];  // [levels][8][LT_T]
    const int tid = threadIdx.x, ti = tid % 16, tj = tid / 16;
    const long long i0 = (long long)blockIdx.x * LT_I, j0 = (long long)blockIdx.y * LT_J;
    static_assert(LT_S * LT_I == 2 * LT_T && LT_S * LT_J == LT_T, "a thread copies two x and one dy a stage");
    float px[2], pd;  // the next stage's elements this thread copies
    auto fetch = [&](long long s0, int ns) {
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int e = tid + h * LT_T, ss = e / LT_I, ii = e % LT_I;
            px[h] = ss < ns && i0 + ii < I ? x[(s0 + ss) * I + i0 + ii] : 0.0f;
        }
        const int ss = tid / LT_J, jj = tid % LT_J;
        pd = ss < ns && j0 + jj < O ? dy[(s0 + ss) * O + j0 + jj] : 0.0f;
    };
    auto put = [&](int buf) {
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int e = tid + h * LT_T;
            xs[buf][e / LT_I][e % LT_I] = px[h];
        }
        ds[buf][tid / LT_J][tid % LT_J] = pd;
    };
    float acc[8];
#pragma unroll
    for (int e = 0; e < 8; e++) acc[e] = 0.0f;
    unsigned done = 0;  // groups summed so far
    long long s0 = 0, g1 = min(n, group);
    int ns = (int)min((long long)LT_S, g1), buf = 0;
    fetch(s0, ns);
    put(0);
    __syncthreads();
    while (true) {
        // the next stage: the rest of this group, or the next group's first
        const bool group_ends = s0 + ns == g1;
        const long long s1 = s0 + ns, g1n = group_ends ? min(n, g1 + group) : g1;
        const int ns1 = s1 < n ? (int)min((long long)LT_S, g1n - s1) : 0;
        if (ns1 > 0) fetch(s1, ns1);
        for (int ss = 0; ss < ns; ss++) {  // images ascending, zero dy skipped (the rows' chains)
            const float4 xv = *(const float4 *)&xs[buf][ss][ti * 4];
            const float xq[4] = {xv.x, xv.y, xv.z, xv.w};
#pragma unroll
            for (int jj = 0; jj < 2; jj++) {
                const float a = ds[buf][ss][tj * 2 + jj];
                if (a != 0.0f)
#pragma unroll
                    for (int q = 0; q < 4; q++) acc[jj * 4 + q] = fmaf(a, xq[q], acc[jj * 4 + q]);
            }
        }
        if (group_ends) {
            const int t = __ffs(~done) - 1;  // the lowest free level
            for (int i = 0; i < t; i++)
#pragma unroll
                for (int e = 0; e < 8; e++) acc[e] = __fadd_rn(lv[(i * 8 + e) * LT_T + tid], acc[e]);
#pragma unroll
            for (int e = 0; e < 8; e++) lv[(t * 8 + e) * LT_T + tid] = acc[e], acc[e] = 0.0f;
            done++;
        }
        if (ns1 == 0) break;
        put(buf ^ 1);
        __syncthreads();
        buf ^= 1, s0 = s1, g1 = g1n, ns = ns1;
    }
    // the fold, from the lowest level set up: older + newer
    float v[8];
    bool first = true;
    for (int i = 0; (done >> i) != 0; i++) {
        if (!((done >> i) & 1)) continue;
#pragma unroll
        for (int e = 0; e < 8; e++) {
            const float l = lv[(i * 8 + e) * LT_T + tid];
            v[e] = first ? l : __fadd_rn(l, v[e]);
        }
        first = false;
    }
#pragma unroll
    for (int jj = 0; jj < 2; jj++)
#pragma unroll
        for (int q = 0; q < 4; q++) {
            const long long j = j0 + tj * 2 + jj, i = i0 + ti * 4 + q;
            if (j < O && i < I) dw[j * I + i] = v[jj * 4 + q];
        }
}
extern "C" ff_status ff_gpu_train_kernels_init(void) {
    FF_CUDA_CHECK(cudaFuncSetAttribute(k_linear_bwd_weights_tree, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       (int)tree_level_bytes(tree_levels(FF_GPU_TREE_MAX_GROUPS))));
    FF_CUDA_CHECK(cudaFuncSetAttribute(k_conv_wgrad_img, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       FF_GPU_WGRAD_IMAGE_SMEM_MAX));
    FF_CUDA_CHECK(cudaFuncSetAttribute(k_conv_wgrad_x3<WX_CFG_0>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       FF_GPU_WGRAD_X3_SMEM_MAX));
    FF_CUDA_CHECK(cudaFuncSetAttribute(k_conv_wgrad_x3<WX_CFG_1>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       FF_GPU_WGRAD_X3_SMEM_MAX));
#ifdef FF_HAVE_WGMMA
#define FF_SET_WXG(c)                                                                                     \
    FF_CUDA_CHECK(cudaFuncSetAttribute(k_conv_wgrad_x3wg<c>, cudaFuncAttributeMaxDynamicSharedMemorySize, \
                                       FF_GPU_WGRAD_X3_SMEM_MAX));
    FF_SET_WXG(WXG_CFG_0)
    FF_SET_WXG(WXG_CFG_1)
    FF_SET_WXG(WXG_CFG_2)
    FF_SET_WXG(WXG_CFG_3)
#undef FF_SET_WXG
#endif
    return ff_gpu_pool_sparse_init();
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
// relu_pass (train_rules.cuh) per element. quads: the first 4 quads elements in float4s (every
// pointer 16-byte aligned; a memory-bound pass: half the instructions and twice the bytes in flight
// of a float a thread), the rest one by one.
__global__ void k_relu_bwd(float *__restrict__ dx, const float *__restrict__ dy, const float *__restrict__ y,
                           long long quads, long long total) {
    FF_GRID_STRIDE(t, quads) {
        const float4 a = reinterpret_cast<const float4 *>(y)[t], g = reinterpret_cast<const float4 *>(dy)[t];
        reinterpret_cast<float4 *>(dx)[t] =
            make_float4(relu_pass(a.x, g.x), relu_pass(a.y, g.y), relu_pass(a.z, g.z), relu_pass(a.w, g.w));
    }
    FF_GRID_STRIDE(t, total - 4 * quads) {
        const long long i = 4 * quads + t;
        dx[i] = relu_pass(y[i], dy[i]);
    }
}

// One thread per dx element: no atomics. The CPU scatters dy[window] into dx[argmax] for windows
// in ascending output position; here each dx element gathers, visiting the windows that contain it
// in that same ascending order and recomputing each one's pick with the CPU's rule (taps r, s
// ascending, padding skipped, a tap wins when greater or NaN): the same additions in the same
// order from +0, so the same bits, ties and NaNs included.
__global__ void k_maxpool_bwd(float *__restrict__ dx, const float *__restrict__ dy, const float *__restrict__ x,
                              ConvGeom g, long long total, bool relu) {
    const long long HW = (long long)g.H * g.W;
    FF_GRID_STRIDE(t, total) {
        const long long plane = t / HW;  // one 64-bit division, then 32-bit ones
        const int in_plane = (int)(t - plane * HW);
        const int x_h = in_plane / g.W, x_w = in_plane - x_h * g.W;
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
        dx[t] = relu && !(xp[me] > 0.0f) ? 0.0f : acc;  // (relu: k_relu_bwd's rule)
    }
}

// ------------------------------------------------------------------ softmax cross-entropy
// The CPU's loops (layers_cpu_backward.c) and their bits: the max with its NaN rule, the exps,
// their sum ascending, then the loss and the gradient; every float operation an _rn intrinsic, exp
// and log in double rounded once to float. Two kernels share these formulas and differ only in who
// computes which element: a thread per image for few classes (mnist-cnn's 10, where the loops cost
// nothing next to the backward), a warp per image from FF_SOFTMAX_WARP_CLASSES on (the MLP's 512
// classes: a thread per image left 8 of 132 multiprocessors busy for 0.18 ms a step).
#define FF_SOFTMAX_WARP_CLASSES 32
__device__ __forceinline__ float max_rule(float m, float v) {  // the CPU's: NaN wins
    return v > m || isnan(v) ? v : m;
}
__device__ __forceinline__ float softmax_exp(float z, float m) {
    return (float)exp((double)__fsub_rn(z, m));
}
__device__ __forceinline__ float softmax_loss(float sum, float z_label, float m) {
    return __fsub_rn((float)log((double)sum), __fsub_rn(z_label, m));
}
__device__ __forceinline__ float softmax_grad(float e, float sum, bool is_label, float scale) {
    return __fmul_rn(__fsub_rn(__fdiv_rn(e, sum), is_label ? 1.0f : 0.0f), scale);
}

__global__ void k_softmax_xent(float *__restrict__ dz, float *__restrict__ loss, const float *__restrict__ z,
                               const int32_t *__restrict__ labels, float scale, long long classes, long long n) {
    FF_GRID_STRIDE(s, n) {
        const float *zs = z + s * classes;
        float *ds = dz + s * classes;
        float m = zs[0];
        for (long long c = 1; c < classes; c++) m = max_rule(m, zs[c]);
        float sum = 0.0f;
        for (long long c = 0; c < classes; c++) {
            const float e = softmax_exp(zs[c], m);
            ds[c] = e;
            sum = __fadd_rn(sum, e);
        }
        const long long y = labels[s];
        if (loss) loss[s] = softmax_loss(sum, zs[y], m);
        for (long long c = 0; c < classes; c++) ds[c] = softmax_grad(ds[c], sum, c == y, scale);
    }
}

// A warp per image. The max is the same whatever the order (NaN wins; a tie of +0 and -0 may pick
// the other zero, which no later value can show: z - (+-0) and exp agree). The exps are per
// element. Only the sum has an order: lane 0 adds the row left to right, as the CPU does.
__global__ void k_softmax_xent_warp(float *__restrict__ dz, float *__restrict__ loss, const float *__restrict__ z,
                                    const int32_t *__restrict__ labels, float scale, long long classes, long long n) {
    const int lane = threadIdx.x & 31;
    const long long warps = (long long)gridDim.x * (blockDim.x / 32);
    for (long long s = blockIdx.x * (long long)(blockDim.x / 32) + threadIdx.x / 32; s < n; s += warps) {
        const float *zs = z + s * classes;
        float *ds = dz + s * classes;
        const long long y = labels[s];
        float m = zs[0];
        for (long long c = 1 + lane; c < classes; c += 32) m = max_rule(m, zs[c]);
#pragma unroll
        for (int o = 16; o > 0; o /= 2) m = max_rule(m, __shfl_xor_sync(0xffffffffu, m, o));
        for (long long c = lane; c < classes; c += 32) ds[c] = softmax_exp(zs[c], m);
        __syncwarp();  // orders the lanes' stores before lane 0 reads them
        float sum = 0.0f;
        if (lane == 0) {
#pragma unroll 8
            for (long long c = 0; c < classes; c++) sum = __fadd_rn(sum, ds[c]);  // loads run ahead
            if (loss) loss[s] = softmax_loss(sum, zs[y], m);
        }
        sum = __shfl_sync(0xffffffffu, sum, 0);
        for (long long c = lane; c < classes; c += 32) ds[c] = softmax_grad(ds[c], sum, c == y, scale);
    }
}

// ------------------------------------------------------------------ tree reduction, SGD, gather
// One thread per element runs the element's whole tree in train.h's order (consecutive threads:
// consecutive elements of every row, coalesced). Up to FF_TREE_REG_ROWS rows the row count is a
// template argument: every loop unrolls, the rows and partial sums live in registers, each row is
// read once and out written once. (A run-time stack of partial sums needs dynamic indexing, which
// puts it in local memory: slower than the in-place kernel below on an H100, session 11.)
#define FF_TREE_REG_ROWS 32
#define FF_TREE_SGD_ROWS 8  // ff_gpu_tree_sgd's fused tree: up to 8 rows (P <= 8 with one block each)
// Row j of the rows a tree adds (tree_rows.h: in place, or the own row where its backward left it).
__device__ __forceinline__ const float *row_of(const ff_tree_rows &r, int j) {
    return j == r.own ? r.own_at : r.at + j * r.stride;
}
// Element i's tree over N rows.
template <int N>
__device__ __forceinline__ float tree_in_registers(const ff_tree_rows &r, long long i) {
    float v[N];
#pragma unroll
    for (int j = 0; j < N; j++) v[j] = row_of(r, j)[i];
    return tree_of<N>(v);
}
template <int N>
__global__ void k_tree_reg(float *out, const float *rows, long long stride, long long len) {
    const ff_tree_rows r = {const_cast<float *>(rows), N, stride, -1, nullptr, false};
    FF_GRID_STRIDE(i, len) out[i] = tree_in_registers<N>(r, i);
}
// More rows: the tree in place, level by level (row 0 ends with the sum).
__global__ void k_tree_inplace(float *rows, long long nrows, long long stride, long long len) {
    FF_GRID_STRIDE(i, len) {
        for (long long s = 1; s < nrows; s *= 2)
            for (long long j = 0; j + s < nrows; j += 2 * s)
                rows[j * stride + i] = __fadd_rn(rows[j * stride + i], rows[(j + s) * stride + i]);
    }
}
__global__ void k_copy_floats(float *out, const float *in, long long len) {
    FF_GRID_STRIDE(i, len) out[i] = in[i];
}

// The same with the momentum in mom[i] (not touched when momentum is 0, not read when first).
__device__ __forceinline__ float sgd_rule(float w, float g, float *__restrict__ mom, long long i, float lr,
                                          float momentum, float wd, int first) {
    float m = momentum != 0.0f && !first ? mom[i] : 0.0f;
    const float out = sgd_rule_reg(w, g, m, lr, momentum, wd, first);
    if (momentum != 0.0f) mom[i] = m;
    return out;
}

// The deterministic exchange's last step on a slice (device.h ff_device_tree_sgd): the tree over
// N rows in registers (k_tree_reg's order), the sum kept in row 0, the SGD rule on it, the updated
// weight to w_out (w only read): one pass where the tree, the update and a copy of the weights
// were three.
template <int N>
__global__ void k_tree_sgd(float *w_out, const float *w, float *__restrict__ mom, ff_tree_rows r, long long count,
                           float lr, float momentum, float wd, int first) {
    float *rows = r.at;
    FF_GRID_STRIDE(i, count) {
        const float sum = tree_in_registers<N>(r, i);
        if (N > 1 && r.keep_sum) rows[i] = sum;
        w_out[i] = sgd_rule(w[i], sum, mom, i, lr, momentum, wd, first);
    }
}

// The same where every array is 16-byte aligned and the row stride a multiple of four, for a grid of
// one block per multiprocessor. Why: the update runs on the side lane at high priority while the
// backward's GEMMs run, and a full grid (one thread per element) takes every multiprocessor from
// them for its whole length, at half the memory bandwidth: 0.56 ms of the MLP's 14.96 ms step on two
// H200s (session 17, run 3). One block per multiprocessor, each thread loading four float4 chunks of
// every array before it computes any, draws the bandwidth with far fewer threads: 14.60 ms (run 4;
// 66 blocks 14.66, 264 14.73). The arithmetic per element is k_tree_sgd's (the same tree, the same
// rule, momentum through a register): the same bits. Elements past the last whole float4 go one by one.
#define FF_TREE_SGD_CHUNKS 4
struct tree_rows_at {  // tree_sgd_chunks' rows: row_of
    ff_tree_rows r;
    __device__ __forceinline__ const float *operator()(int j) const { return row_of(r, j); }
};
struct tree_sgd_out {    // tree_sgd_chunks' stores: the sum kept in row 0 where asked, the weights to w_out
    float *w_out, *sum;  // sum: NULL unless kept
    __device__ __forceinline__ void vec(long long i, float4 g, float4 o) const {
        if (sum) reinterpret_cast<float4 *>(sum)[i] = g;
        reinterpret_cast<float4 *>(w_out)[i] = o;
    }
    __device__ __forceinline__ void one(long long i, float g, float o) const {
        if (sum) sum[i] = g;
        w_out[i] = o;
    }
};
template <int N>
__global__ void k_tree_sgd4(float *w_out, const float *w, float *__restrict__ mom, ff_tree_rows r, long long count,
                            float lr, float momentum, float wd, int first) {
    tree_sgd_chunks<N, FF_TREE_SGD_CHUNKS>(tree_rows_at{r}, w, mom, count, lr, momentum, wd, first,
                                           tree_sgd_out{w_out, N > 1 && r.keep_sum ? r.at : nullptr});
}

int ff_gpu_multiprocessors() {  // of the current GPU, asked once (a process drives one GPU)
    static std::atomic<int> sms{0};
    int n = sms.load(std::memory_order_relaxed);
    if (n > 0) return n;
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n < 1)
        n = 132;  // (only the grid's size: any count gives the same bits)
    sms.store(n, std::memory_order_relaxed);
    return n;
}

// A block an image: idx may be pinned host memory (the trainer's mapped indices), read once a warp
// (every lane the same address) instead of once an element.
__global__ void k_gather(float *__restrict__ x, int32_t *__restrict__ labels, const float *__restrict__ images,
                         const int32_t *__restrict__ all_labels, const int64_t *__restrict__ idx, long long per,
                         long long n) {
    for (long long i = blockIdx.x; i < n; i += gridDim.x) {
        const long long src = idx[i];
        for (long long e = threadIdx.x; e < per; e += blockDim.x) x[i * per + e] = images[src * per + e];
        if (threadIdx.x == 0) labels[i] = all_labels[src];
    }
}

// One element per thread: synthetic.h's function, the host's bits (integer mixing, exact float
// sums, one rounded product).
__global__ void k_synth(float *__restrict__ x, ff_synth sy, long long first, long long total) {
    FF_GRID_STRIDE(t, total) {
        const long long i = t / sy.dim, j = t % sy.dim;
        x[t] = ff_synth_x(&sy, first + i, j);
    }
}

// ------------------------------------------------------------------ launchers
static ff_status check_groups(const char *what, const ff_layer *L, int64_t group) {
    if (group < 1)
        return FF_FAIL(FF_ERR_INPUT, "%s of %s: groups of %lld images, expected >= 1", what, L->name, (long long)group);
    return FF_OK;
}

static ff_status check_int(int64_t v, const char *what, const ff_layer *L) {
    if (v < 0 || v > 0x7fffffff)
        return FF_FAIL(FF_ERR_INPUT, "%s: %s = %lld does not fit the GPU kernels' 32-bit index", L->name, what,
                       (long long)v);
    return FF_OK;
}

static ff_status conv_wgrad_tiled(float *part, const float *dy, const float *x, WgradGeom g, const ff_layer *L,
                                  int64_t n, cudaStream_t st);
static ff_status conv_wgrad_x3(bool *ran, float *part, const float *dy, const float *x, WgradGeom g, const ff_layer *L,
                               int64_t n, cudaStream_t st);

// The GEMM path (work given): per-image partials (k_conv_wgrad_img for few columns, else the tiles
// of k_conv_wgrad_part; the same bits), then the group sums in image order.
static ff_status conv_wgrad_gemm(float *dw, float *db, int64_t grad_stride, const float *dy, const float *x,
                                 const ff_layer *L, int64_t n, int64_t group, float *part, cudaStream_t st) {
    const ConvGeom cg = conv_geom(L);
    FF_TRY(check_int(L->in.c * L->in.h * L->in.w, "input floats per image", L));
    FF_TRY(check_int(L->out.h * L->out.w, "output positions", L));
    FF_TRY(check_int((L->out_c + WG_BM) * L->out.h * L->out.w, "output floats per image", L));
    FF_TRY(check_int(L->in.c * L->kh * L->kw, "C*R*S", L));
    WgradGeom g;
    g.C = cg.C, g.H = cg.H, g.W = cg.W, g.K = cg.K, g.R = cg.R, g.S = cg.S, g.Wo = cg.Wo;
    g.stride = cg.stride, g.pad = cg.pad;
    g.Q = cg.Ho * cg.Wo;
    g.CRS = cg.C * cg.R * cg.S;
    const long long KCRS = (long long)g.K * g.CRS;
    g.PW = KCRS + g.K;
    // tf32x3 where k_conv_wgrad_x3 applies (stride 1, 32 columns or more), else the fp32 chains.
    bool x3 = false;
    if (ff_gpu_conv_math_tf32x3()) FF_TRY(conv_wgrad_x3(&x3, part, dy, x, g, L, n, st));
    // Few columns: a block per image (k_conv_wgrad_img), where its threads and shared memory fit.
    if (x3) {
    } else if (!g_force_wgrad_tiled && ff_gpu_conv2d_backward_weights_per_image(L, n)) {
        g.img0 = 0;
        g.KG = (int)ff_gpu_conv2d_wgrad_image_group(L);
        g.Ho = cg.Ho, g.SR = FF_GPU_WGRAD_STRIP_ROWS;
        const int strips = (int)ff_gpu_conv2d_wgrad_strips(L);
        if (n > 0x7fffffffLL || strips > 65535)
            return FF_FAIL(FF_ERR_INPUT, "%s weight gradient: %lld images of %d strips, too many", L->name,
                           (long long)n, strips);
        if (g_wgrad_lanes) {  // a warp an (image, strip, 32 channels), no shared memory: the same bits
            const long long warps = n * strips * (long long)((g.K + 31) / 32), blocks = (warps + 3) / 4;
            if (blocks > 0x7fffffffLL)
                return FF_FAIL(FF_ERR_INPUT, "%s weight gradient: %lld images of %d strips, too many", L->name,
                               (long long)n, strips);
            if (g.CRS <= 9)
                k_conv_wgrad_lanes<9><<<(unsigned)blocks, 128, 0, st>>>(part, dy, x, g, strips, warps);
            else
                k_conv_wgrad_lanes<31><<<(unsigned)blocks, 128, 0, st>>>(part, dy, x, g, strips, warps);
            FF_LAUNCH_CHECK("k_conv_wgrad_lanes");
        } else {
            const dim3 grid((unsigned)n, (unsigned)((g.K + g.KG - 1) / g.KG), (unsigned)strips);
            k_conv_wgrad_img<<<grid, (unsigned)ff_gpu_conv2d_wgrad_image_threads(L),
                               (size_t)ff_gpu_conv2d_wgrad_image_smem(L), st>>>(part, dy, x, g);
            FF_LAUNCH_CHECK("k_conv_wgrad_img");
        }
        return ff_gpu_conv_wgrad_group_sums(dw, db, grad_stride, part, KCRS, g.PW, n, group, strips, (ff_gpu_stream)st);
    } else {
        FF_TRY(conv_wgrad_tiled(part, dy, x, g, L, n, st));
    }
    return ff_gpu_conv_wgrad_group_sums(dw, db, grad_stride, part, KCRS, g.PW, n, group, 1, (ff_gpu_stream)st);
}

ff_status ff_gpu_conv_wgrad_group_sums(float *dw, float *db, int64_t grad_stride, float *part, long long KCRS,
                                       long long pstride, int64_t n, int64_t group, int strips, ff_gpu_stream s) {
    const long long ngroups = (n + group - 1) / group, total = ngroups * pstride;
    if (strips > 1) {  // the images' partials from the strips' (the workspace's last n * pstride floats)
        float *img = part + (long long)n * strips * pstride;
        k_conv_wgrad_strip_sum<<<train_blocks(n * pstride), FF_TRAIN_THREADS, 0, ff_cu_stream(s)>>>(
            img, part, pstride, strips, n * pstride);
        FF_LAUNCH_CHECK("k_conv_wgrad_strip_sum");
        part = img;
    }
    k_conv_wgrad_sum<<<train_blocks(total), FF_TRAIN_THREADS, 0, ff_cu_stream(s)>>>(dw, db, grad_stride, part, KCRS,
                                                                                    pstride, n, group, total);
    FF_LAUNCH_CHECK("k_conv_wgrad_sum");
    return FF_OK;
}

static ff_status conv_wgrad_tiled(float *part, const float *dy, const float *x, WgradGeom g, const ff_layer *L,
                                  int64_t n, cudaStream_t st) {
    const long long gx = (g.CRS + WG_BN - 1) / WG_BN, gy = (g.K + WG_BM - 1) / WG_BM;
    if (gx > 0x7fffffffLL || gy > 65535)
        return FF_FAIL(FF_ERR_INPUT, "%s weight gradient: grid %lld x %lld too large", L->name, gx, gy);
    // One block row of images per launch, at most 65535 images each (the grid's z limit); the
    // partials of an image do not depend on which launch computes them.
    for (long long i0 = 0; i0 < n; i0 += 65535) {
        const long long nz = n - i0 < 65535 ? n - i0 : 65535;
        g.img0 = i0;
        k_conv_wgrad_part<<<dim3((unsigned)gx, (unsigned)gy, (unsigned)nz), WG_T, 0, st>>>(part, dy, x, g);
        FF_LAUNCH_CHECK("k_conv_wgrad_part");
    }
    return FF_OK;
}

static int g_force_wgrad_x3 = -1;
extern "C" void ff_gpu_debug_force_wgrad_x3(int config) {
    g_force_wgrad_x3 = config;
}
extern "C" int ff_gpu_debug_wgrad_x3_count(void) {
    return WX_CFGS;
}
static thread_local int g_last_wgrad_x3 = -1;
extern "C" int ff_gpu_debug_last_wgrad_x3(void) {
    return g_last_wgrad_x3;
}
static thread_local bool g_wgrad_beside = false;  // gpu.h ff_gpu_set_wgrad_beside

extern "C" void ff_gpu_set_wgrad_beside(bool beside) {
    g_wgrad_beside = beside;
}
// The staging of k_conv_wgrad_x3 for a layer: the channels a column tile of BN touches, and the
// input rows a stage of WX_QS positions reaches (every stage's, the last one's positions past Q
// included, so that their B elements are zero-filled rows).
static WgradX3Geom wgrad_x3_geom(const WgradGeom &g, int BN) {
    WgradX3Geom r;
    const int RS = g.R * g.S;
    r.etiles = (g.CRS + BN - 1) / BN;
    r.CB = 0;
    for (int t = 0; t < r.etiles; t++) {
        const int e0 = t * BN, e1 = (e0 + BN < g.CRS ? e0 + BN : g.CRS) - 1, cb = e1 / RS - e0 / RS + 1;
        r.CB = cb > r.CB ? cb : r.CB;
    }
    r.NR = 0;
    for (int q0 = 0; q0 < g.Q; q0 += WX_QS) {
        const int rows = (q0 + WX_QS - 1) / g.Wo - q0 / g.Wo + 1;
        r.NR = rows > r.NR ? rows : r.NR;
    }
    r.NR += g.R - 1;
    r.WP = g.W + 2 * g.pad;
    r.XS4 = (r.CB * r.NR * r.WP + 3) / 4 * 4;
    return r;
}
// A tf32x3 weight-gradient launch of smem bytes with staging r: *fits false where the staging does
// not fit (the caller falls back), else its grid (an image's column tiles, then the rows in tiles
// of WX_BM).
static ff_status wgrad_x3_launch(bool *fits, dim3 *grid, const WgradGeom &g, const WgradX3Geom &r, size_t smem,
                                 long long nimg, const ff_layer *L) {
    *fits = false;
    FF_TRY(check_int((long long)r.CB * r.NR * r.WP, "tf32x3 staged rows", L));
    if (smem > FF_GPU_WGRAD_X3_SMEM_MAX) return FF_OK;
    const long long gx = nimg * r.etiles, gy = (g.K + WX_BM - 1) / WX_BM;
    if (gx > 0x7fffffffLL || gy > 65535)
        return FF_FAIL(FF_ERR_INPUT, "%s tf32x3 weight gradient: grid %lld x %lld too large", L->name, gx, gy);
    *grid = dim3((unsigned)gx, (unsigned)gy);
    *fits = true;
    return FF_OK;
}
template <int MI, int WMW, int NWN>
static ff_status launch_wgrad_x3(bool *ran, float *part, const float *dy, const float *x, const WgradGeom &g,
                                 long long nimg, int dy16, const ff_layer *L, cudaStream_t st) {
    constexpr int BN = NWN * WX_NI * 8;
    const WgradX3Geom r = wgrad_x3_geom(g, BN);
    const size_t smem = wgrad_x3_smem_bytes<BN>(r);
    dim3 grid;
    FF_TRY(wgrad_x3_launch(ran, &grid, g, r, smem, nimg, L));
    if (!*ran) return FF_OK;
    k_conv_wgrad_x3<MI, WMW, NWN><<<grid, WMW * NWN * 32, smem, st>>>(part, dy, x, g, r, dy16);
    FF_LAUNCH_CHECK("k_conv_wgrad_x3");
    return FF_OK;
}
#ifdef FF_HAVE_WGMMA
template <int MT, int WG>
static ff_status launch_wgrad_x3wg(bool *ran, float *part, const float *dy, const float *x, const WgradGeom &g,
                                   long long nimg, int dy16, const ff_layer *L, cudaStream_t st) {
    constexpr int BE = WG * MT * 64;
    const WgradX3Geom r = wgrad_x3_geom(g, BE);
    const size_t smem = wgrad_x3wg_smem_bytes<BE>(r);
    dim3 grid;
    FF_TRY(wgrad_x3_launch(ran, &grid, g, r, smem, nimg, L));
    if (!*ran) return FF_OK;
    k_conv_wgrad_x3wg<MT, WG><<<grid, WG * 128, smem, st>>>(part, dy, x, g, r, dy16);
    FF_LAUNCH_CHECK("k_conv_wgrad_x3wg");
    return FF_OK;
}
#endif
// *ran: whether a tf32x3 kernel applies (stride 1, at least 32 columns, the staging fits); when
// none does, the caller runs the fp32 chains.
static ff_status conv_wgrad_x3(bool *ran, float *part, const float *dy, const float *x, WgradGeom g, const ff_layer *L,
                               int64_t n, cudaStream_t st) {
    *ran = false;
    if (g.stride != 1 || g.CRS < 32) return FF_OK;
    const int dy16 = g.Q % 4 == 0 && ((uintptr_t)dy & 15) == 0;
    g.img0 = 0;
    // Every configuration gives the same bits: the choice changes only the time. A rule from times
    // measured on an H200 (bench/results/issue15-s27 run 4, mnist's conv2): mma.sync with 12 warps
    // (32 rows each) where one block per image and 144-column tile would leave most
    // multiprocessors with a single block (batch 64: 77 us; the warpgroup ones 79 to 104), else 6
    // warps (64 rows each: fewer fragment reads a product); the warpgroup MMA with one 320-column
    // tile an image once the batch gives 1.5 blocks a multiprocessor (batch 256: 186 us; 251 the
    // best mma.sync one).
    // Beside the data gradient (gpu.h ff_gpu_set_wgrad_beside), which holds most multiprocessors,
    // that warpgroup one at every batch (bench/results/issue15-s31 run 1: batch 64 0.298 ms a
    // step against 0.316 with configuration 1, the one alone; batch 256 the same one either way).
    const long long etiles = (g.CRS + 143) / 144;
    int cfg = n * etiles < 2 * ff_gpu_multiprocessors() ? 1 : 0;
#ifdef FF_HAVE_WGMMA
    if (2 * n >= 3 * (long long)ff_gpu_multiprocessors() || g_wgrad_beside) cfg = 3;
#endif
    if (g_force_wgrad_x3 >= 0) cfg = g_force_wgrad_x3 % WX_CFGS;
    switch (cfg) {
        case 1: FF_TRY(launch_wgrad_x3<WX_CFG_1>(ran, part, dy, x, g, n, dy16, L, st)); break;
#ifdef FF_HAVE_WGMMA
        case 2: FF_TRY(launch_wgrad_x3wg<WXG_CFG_0>(ran, part, dy, x, g, n, dy16, L, st)); break;
        case 3: FF_TRY(launch_wgrad_x3wg<WXG_CFG_1>(ran, part, dy, x, g, n, dy16, L, st)); break;
        case 4: FF_TRY(launch_wgrad_x3wg<WXG_CFG_2>(ran, part, dy, x, g, n, dy16, L, st)); break;
        case 5: FF_TRY(launch_wgrad_x3wg<WXG_CFG_3>(ran, part, dy, x, g, n, dy16, L, st)); break;
#endif
        default: break;
    }
    // configuration 0, chosen or where the chosen one's staging does not fit
    if (!*ran) {
        FF_TRY(launch_wgrad_x3<WX_CFG_0>(ran, part, dy, x, g, n, dy16, L, st));
        cfg = 0;
    }
    if (*ran) g_last_wgrad_x3 = cfg;
    return FF_OK;
}

extern "C" ff_status ff_gpu_conv2d_backward_weights(float *dw, float *db, int64_t grad_stride, const float *dy,
                                                    const float *x, const ff_layer *L, int64_t n, int64_t group,
                                                    float *work, ff_gpu_stream s) {
    if (n <= 0) return FF_OK;
    FF_TRY(check_groups("conv2d weight gradient", L, group));
    if (work) return conv_wgrad_gemm(dw, db, grad_stride, dy, x, L, n, group, work, ff_cu_stream(s));
    const ConvGeom g = conv_geom(L);
    const long long ngroups = (n + group - 1) / group;
    const long long tw = ngroups * g.K * g.C * g.R * g.S, tb = ngroups * g.K;
    k_conv_bwd_weights<<<train_blocks(tw), FF_TRAIN_THREADS, 0, ff_cu_stream(s)>>>(dw, grad_stride, dy, x, g, n, group,
                                                                                   tw);
    FF_LAUNCH_CHECK("k_conv_bwd_weights");
    k_bias_bwd<<<train_blocks(tb), FF_TRAIN_THREADS, 0, ff_cu_stream(s)>>>(db, grad_stride, dy, g.K,
                                                                           (long long)g.Ho * g.Wo, n, group, tb);
    FF_LAUNCH_CHECK("k_bias_bwd (conv2d)");
    return FF_OK;
}

extern "C" ff_status ff_gpu_conv2d_backward_data(float *dx, const float *dy, const float *w, const ff_layer *L,
                                                 int64_t n, float *work, ff_gpu_stream s) {
    if (n <= 0) return FF_OK;
    if (work && ff_gpu_conv2d_backward_data_flips(L)) {
        FF_TRY(ff_gpu_backward_data_weights(work, w, L, s));
        return ff_gpu_backward_data_from(dx, dy, work, L, n, NULL, s);
    }
    const ConvGeom g = conv_geom(L);
    const long long total = n * ff_shape_numel(L->in);
    k_conv_bwd_data<<<train_blocks(total), FF_TRAIN_THREADS, 0, ff_cu_stream(s)>>>(dx, dy, w, g, total);
    FF_LAUNCH_CHECK("k_conv_bwd_data");
    return FF_OK;
}

// A linear layer's bias gradient, a row per group (db + g * grad_stride), also where its weight
// gradient is summed over the groups in one pass (the bias rows are small).
static ff_status linear_bias_rows(float *db, int64_t grad_stride, const float *dy, long long O, int64_t n,
                                  int64_t group, ff_gpu_stream s) {
    const long long tb = ((n + group - 1) / group) * O;
    k_bias_bwd<<<train_blocks(tb), FF_TRAIN_THREADS, 0, ff_cu_stream(s)>>>(db, grad_stride, dy, (int)O, 1, n, group,
                                                                           tb);
    FF_LAUNCH_CHECK("k_bias_bwd (linear)");
    return FF_OK;
}

extern "C" ff_status ff_gpu_linear_backward_weights(float *dw, float *db, int64_t grad_stride, const float *dy,
                                                    const float *x, const ff_layer *L, int64_t n, int64_t group,
                                                    ff_gpu_stream s) {
    if (n <= 0) return FF_OK;
    FF_TRY(check_groups("linear weight gradient", L, group));
    const long long O = L->out_c, I = ff_shape_numel(L->in);
    const long long ngroups = (n + group - 1) / group;
    const long long pairs = ngroups * ((O + LW_JB - 1) / LW_JB);
    const long long gx = (I + FF_TRAIN_THREADS - 1) / FF_TRAIN_THREADS;
    if (gx > 0x7fffffffLL)
        return FF_FAIL(FF_ERR_INPUT, "linear weight gradient of %s: %lld inputs, too many", L->name, I);
    const dim3 grid((unsigned)gx, (unsigned)(pairs < 65535 ? pairs : 65535));
    k_linear_bwd_weights<<<grid, FF_TRAIN_THREADS, 0, ff_cu_stream(s)>>>(dw, grad_stride, dy, x, O, I, n, group, pairs);
    FF_LAUNCH_CHECK("k_linear_bwd_weights");
    return linear_bias_rows(db, grad_stride, dy, O, n, group, s);
}

extern "C" ff_status ff_gpu_linear_backward_weights_tree(float *dw, float *db, int64_t grad_stride, const float *dy,
                                                         const float *x, const ff_layer *L, int64_t n, int64_t group,
                                                         ff_gpu_stream s) {
    if (n <= 0) return FF_OK;
    FF_TRY(check_groups("linear weight gradient", L, group));
    const long long O = L->out_c, I = ff_shape_numel(L->in);
    const long long gx = (I + LT_I - 1) / LT_I, gy = (O + LT_J - 1) / LT_J;
    if (gx > 0x7fffffffLL || gy > 65535 || (n + group - 1) / group > FF_GPU_TREE_MAX_GROUPS)
        return FF_FAIL(FF_ERR_INPUT, "linear weight gradient of %s in one pass: %lld inputs, %lld outputs, %lld groups",
                       L->name, I, O, (long long)((n + group - 1) / group));
    const long long ng = (n + group - 1) / group;
    // The bias rows first: on the gradient lane the kernel after this one is the next layer's weight
    // gradient, which waits for free multiprocessors behind the data gradient's blocks; a bias kernel
    // launched after the tree waited there too and held it back (4.7 us at batch 64, 7.3 at 256 on an
    // H100: bench/results/issue15-s39 run 2's traces). Independent outputs: the same bits.
    FF_TRY(linear_bias_rows(db, grad_stride, dy, O, n, group, s));
    k_linear_bwd_weights_tree<<<dim3((unsigned)gx, (unsigned)gy), LT_T, tree_level_bytes(tree_levels(ng)),
                                ff_cu_stream(s)>>>(dw, dy, x, O, I, n, group);
    FF_LAUNCH_CHECK("k_linear_bwd_weights_tree");
    return FF_OK;
}

extern "C" ff_status ff_gpu_linear_backward_data(float *dx, const float *dy, const float *w, const ff_layer *L,
                                                 int64_t n, float *work, ff_gpu_stream s) {
    if (n <= 0) return FF_OK;
    if (work) {
        FF_TRY(ff_gpu_backward_data_weights(work, w, L, s));
        return ff_gpu_backward_data_from(dx, dy, work, L, n, work + ff_gpu_linear_backward_data_split_offset(L), s);
    }
    const long long O = L->out_c, I = ff_shape_numel(L->in);
    const long long total = n * I;
    k_linear_bwd_data<<<train_blocks(total), FF_TRAIN_THREADS, 0, ff_cu_stream(s)>>>(dx, dy, w, O, I, total);
    FF_LAUNCH_CHECK("k_linear_bwd_data");
    return FF_OK;
}

// The fast paths' two steps (gpu.h): the weights rearranged, then the forward kernel on dy.
extern "C" ff_status ff_gpu_backward_data_weights(float *wd, const float *w, const ff_layer *L, ff_gpu_stream s) {
    if (L->op == FF_OP_CONV2D) {
        if (!ff_gpu_conv2d_backward_data_flips(L))
            return FF_FAIL(FF_ERR_INPUT,
                           "%s: its data gradient has no fast path (stride 1, a square kernel, pad < "
                           "kernel), so no flipped weights",
                           L->name);
        // wf (C, K, R, S) and the zero bias (C), rewritten every call (the weights change every step)
        const ConvGeom g = conv_geom(L);
        const long long total = (long long)g.K * g.C * g.R * g.S + g.C;
        k_conv_flip<<<train_blocks(total), FF_TRAIN_THREADS, 0, ff_cu_stream(s)>>>(wd, w, g.K, g.C, g.R, g.S, total);
        FF_LAUNCH_CHECK("k_conv_flip");
        return FF_OK;
    }
    if (L->op != FF_OP_LINEAR)
        return FF_FAIL(FF_ERR_INPUT, "%s: rearranged weights for a data gradient: expected conv2d or linear", L->name);
    // wT (I, O) and the zero bias (I)
    const long long O = L->out_c, I = ff_shape_numel(L->in);
    FF_TRY(check_int(O, "out_features", L));
    FF_TRY(check_int(I, "in_features", L));
    const long long gy = (O + 31) / 32;
    if (gy > 65535) return FF_FAIL(FF_ERR_INPUT, "%s: %lld output features: too many to transpose", L->name, O);
    k_transpose<<<dim3((unsigned)((I + 31) / 32), (unsigned)gy), dim3(32, 8), 0, ff_cu_stream(s)>>>(wd, wd + O * I, w,
                                                                                                    (int)O, (int)I);
    FF_LAUNCH_CHECK("k_transpose");
    return FF_OK;
}

extern "C" ff_status ff_gpu_backward_data_from(float *dx, const float *dy, const float *wd, const ff_layer *L,
                                               int64_t n, float *split, ff_gpu_stream s) {
    if (n <= 0) return FF_OK;
    if (L->op == FF_OP_CONV2D) {
        // The forward conv of dy (K channels of Ho x Wo) with wf and a zero bias, pad R-1-pad: its
        // (C, H, W) output is dx (gpu.h).
        const long long KCRS = (long long)L->out_c * L->in.c * L->kh * L->kw;
        const ff_layer Lf = ff_gpu_conv2d_backward_data_layer(L);
        const ff_rows rows = ff_rows_full(&Lf);
        return ff_gpu_conv2d(dx, dy, wd, wd + KCRS, &Lf, false, &rows, n, s);
    }
    // The forward linear of dy (n, O) with wT (I, O) and a zero bias; the split-K partial sums (if
    // the transposed layer is split) in `split`, 16-byte aligned.
    const long long O = L->out_c, I = ff_shape_numel(L->in);
    const ff_layer Lt = ff_gpu_linear_backward_data_layer(L);
    return ff_gpu_linear(dx, dy, wd, wd + O * I, &Lt, false, n, split, s);
}

extern "C" ff_status ff_gpu_stream_capturing(ff_gpu_stream s, bool *capturing) {
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    FF_CUDA_CHECK(cudaStreamIsCapturing(ff_cu_stream(s), &cs));
    *capturing = cs != cudaStreamCaptureStatusNone;
    return FF_OK;
}

extern "C" ff_status ff_gpu_relu_backward(float *dx, const float *dy, const float *y, int64_t count, ff_gpu_stream s) {
    if (count <= 0) return FF_OK;
    const bool aligned = (((uintptr_t)dx | (uintptr_t)dy | (uintptr_t)y) & 15) == 0;
    const long long quads = aligned ? count / 4 : 0;
    k_relu_bwd<<<train_blocks(quads > 0 ? quads : count), FF_TRAIN_THREADS, 0, ff_cu_stream(s)>>>(dx, dy, y, quads,
                                                                                                  count);
    FF_LAUNCH_CHECK("k_relu_bwd");
    return FF_OK;
}

static bool g_force_maxpool_general = false;
extern "C" void ff_gpu_debug_force_maxpool_general(bool on) {
    g_force_maxpool_general = on;
}

extern "C" ff_status ff_gpu_maxpool_backward(float *dx, const float *dy, const float *x, const ff_layer *L, int64_t n,
                                             bool relu, ff_gpu_stream s) {
    if (n <= 0) return FF_OK;
    FF_TRY(check_int(L->in.h * L->in.w, "input plane", L));
    const ConvGeom g = conv_geom(L);
    if (g.pad == 0 && g.stride == g.R && g.stride == g.S && g.H == g.Ho * g.R && g.W == g.Wo * g.S) {
        const long long windows = n * (long long)g.C * g.Ho * g.Wo;
        const unsigned blocks = train_blocks(windows);
        const bool small = windows <= INT32_MAX && (long long)blocks * FF_TRAIN_THREADS <= INT32_MAX;
        if (g.R == 2 && g.S == 2 && ((uintptr_t)dx & 7) == 0 && ((uintptr_t)x & 7) == 0 && !g_force_maxpool_general) {
            if (small)
                k_maxpool_bwd_2x2<unsigned>
                    <<<blocks, FF_TRAIN_THREADS, 0, ff_cu_stream(s)>>>(dx, dy, x, g.Ho, g.Wo, (unsigned)windows, relu);
            else
                k_maxpool_bwd_2x2<long long>
                    <<<blocks, FF_TRAIN_THREADS, 0, ff_cu_stream(s)>>>(dx, dy, x, g.Ho, g.Wo, windows, relu);
            FF_LAUNCH_CHECK("k_maxpool_bwd_2x2");
            return FF_OK;
        }
        if (small)
            k_maxpool_bwd_tiled<unsigned>
                <<<blocks, FF_TRAIN_THREADS, 0, ff_cu_stream(s)>>>(dx, dy, x, g, (unsigned)windows, relu);
        else
            k_maxpool_bwd_tiled<long long>
                <<<blocks, FF_TRAIN_THREADS, 0, ff_cu_stream(s)>>>(dx, dy, x, g, windows, relu);
        FF_LAUNCH_CHECK("k_maxpool_bwd_tiled");
        return FF_OK;
    }
    const long long total = n * ff_shape_numel(L->in);
    k_maxpool_bwd<<<train_blocks(total), FF_TRAIN_THREADS, 0, ff_cu_stream(s)>>>(dx, dy, x, g, total, relu);
    FF_LAUNCH_CHECK("k_maxpool_bwd");
    return FF_OK;
}

extern "C" ff_status ff_gpu_softmax_xent(float *dz, float *loss, const float *z, const int32_t *labels, float scale,
                                         int64_t classes, int64_t n, ff_gpu_stream s) {
    if (n <= 0 || classes <= 0) return FF_OK;
    if (classes >= FF_SOFTMAX_WARP_CLASSES) {  // a warp per image, 4 per block
        const long long blocks = (n + 3) / 4;
        k_softmax_xent_warp<<<(unsigned)(blocks > (1 << 20) ? (1 << 20) : blocks), 128, 0, ff_cu_stream(s)>>>(
            dz, loss, z, labels, scale, classes, n);
        FF_LAUNCH_CHECK("k_softmax_xent_warp");
        return FF_OK;
    }
    // Small blocks: one image per thread, so spread the images over many multiprocessors.
    const int threads = 64;
    const long long blocks = (n + threads - 1) / threads;
    k_softmax_xent<<<(unsigned)(blocks > (1 << 20) ? (1 << 20) : blocks), threads, 0, ff_cu_stream(s)>>>(
        dz, loss, z, labels, scale, classes, n);
    FF_LAUNCH_CHECK("k_softmax_xent");
    return FF_OK;
}

extern "C" ff_status ff_gpu_tree_reduce(float *out, float *rows, int64_t nrows, int64_t stride, int64_t len,
                                        ff_gpu_stream s) {
    if (nrows < 1 || len <= 0 || (nrows == 1 && out == rows)) return FF_OK;
    const unsigned blocks = train_blocks(len);
    cudaStream_t cs = ff_cu_stream(s);
    // clang-format off
    switch (nrows) {
#define FF_TREE_CASE(n) case n: k_tree_reg<n><<<blocks, FF_TRAIN_THREADS, 0, cs>>>(out, rows, stride, len); break;
        FF_TREE_CASE(1)  FF_TREE_CASE(2)  FF_TREE_CASE(3)  FF_TREE_CASE(4)  FF_TREE_CASE(5)  FF_TREE_CASE(6)
        FF_TREE_CASE(7)  FF_TREE_CASE(8)  FF_TREE_CASE(9)  FF_TREE_CASE(10) FF_TREE_CASE(11) FF_TREE_CASE(12)
        FF_TREE_CASE(13) FF_TREE_CASE(14) FF_TREE_CASE(15) FF_TREE_CASE(16) FF_TREE_CASE(17) FF_TREE_CASE(18)
        FF_TREE_CASE(19) FF_TREE_CASE(20) FF_TREE_CASE(21) FF_TREE_CASE(22) FF_TREE_CASE(23) FF_TREE_CASE(24)
        FF_TREE_CASE(25) FF_TREE_CASE(26) FF_TREE_CASE(27) FF_TREE_CASE(28) FF_TREE_CASE(29) FF_TREE_CASE(30)
        FF_TREE_CASE(31) FF_TREE_CASE(32)
#undef FF_TREE_CASE
        default:  // more rows than FF_TREE_REG_ROWS
            k_tree_inplace<<<blocks, FF_TRAIN_THREADS, 0, cs>>>(rows, nrows, stride, len);
            FF_LAUNCH_CHECK("k_tree_inplace");
            if (out == rows) return FF_OK;
            k_copy_floats<<<blocks, FF_TRAIN_THREADS, 0, cs>>>(out, rows, len);
            FF_LAUNCH_CHECK("k_copy_floats");
            return FF_OK;
    }
    // clang-format on
    FF_LAUNCH_CHECK("k_tree_reg");
    return FF_OK;
}

struct tree_sgd_args {
    float *w_out;
    const float *w;
    float *mom;
    ff_tree_rows r;
    long long count;
    float lr, momentum, wd;
    int first;
};
template <int N>
static void launch_tree_sgd(bool aligned, unsigned blocks, cudaStream_t cs, const tree_sgd_args &a) {
    if (aligned)
        k_tree_sgd4<N>
            <<<blocks, FF_TRAIN_THREADS, 0, cs>>>(a.w_out, a.w, a.mom, a.r, a.count, a.lr, a.momentum, a.wd, a.first);
    else
        k_tree_sgd<N>
            <<<blocks, FF_TRAIN_THREADS, 0, cs>>>(a.w_out, a.w, a.mom, a.r, a.count, a.lr, a.momentum, a.wd, a.first);
}

extern "C" ff_status ff_gpu_tree_sgd(float *w_out, const float *w, float *mom, const ff_tree_rows *rows, int64_t count,
                                     float lr, float momentum, float weight_decay, bool first, ff_gpu_stream s) {
    ff_tree_rows r = *rows;
    if (count <= 0 || r.n < 1) return FF_OK;
    if (!r.own_at) r.own = -1;
    // (device.h refuses more rows than the fused kernel takes without keeping the sum)
    static_assert(FF_TREE_UNKEPT_ROWS <= FF_TREE_SGD_ROWS, "unkept sums stay in the fused kernel");
    if (r.n > FF_TREE_SGD_ROWS) {  // the own row into its place, then the tree alone (row 0 ends with the sum)
        if (r.own_at) {
            k_copy_floats<<<train_blocks(count), FF_TRAIN_THREADS, 0, ff_cu_stream(s)>>>(r.at + r.own * r.stride,
                                                                                         r.own_at, count);
            FF_LAUNCH_CHECK("k_copy_floats");
        }
        FF_TRY(ff_gpu_tree_reduce(r.at, r.at, r.n, r.stride, count, s));
        r.n = 1, r.own = -1, r.own_at = NULL;
    }
    const int64_t stride = r.stride;
    const bool aligned =
        stride % 4 == 0 &&
        ((uintptr_t)w_out | (uintptr_t)w | (uintptr_t)mom | (uintptr_t)r.at | (uintptr_t)r.own_at) % 16 == 0;
    unsigned blocks = train_blocks(count);
    if (aligned) {  // one block per multiprocessor at most (k_tree_sgd4)
        const long long per_block = (long long)FF_TREE_SGD_CHUNKS * 4 * FF_TRAIN_THREADS;
        const long long need = (count + per_block - 1) / per_block, sms = ff_gpu_multiprocessors();
        blocks = (unsigned)(need < sms ? need : sms);
    }
    const tree_sgd_args a = {w_out, w, mom, r, count, lr, momentum, weight_decay, first ? 1 : 0};
    cudaStream_t cs = ff_cu_stream(s);
    switch (r.n) {
        case 1: launch_tree_sgd<1>(aligned, blocks, cs, a); break;
        case 2: launch_tree_sgd<2>(aligned, blocks, cs, a); break;
        case 3: launch_tree_sgd<3>(aligned, blocks, cs, a); break;
        case 4: launch_tree_sgd<4>(aligned, blocks, cs, a); break;
        case 5: launch_tree_sgd<5>(aligned, blocks, cs, a); break;
        case 6: launch_tree_sgd<6>(aligned, blocks, cs, a); break;
        case 7: launch_tree_sgd<7>(aligned, blocks, cs, a); break;
        case 8: launch_tree_sgd<8>(aligned, blocks, cs, a); break;
    }
    FF_LAUNCH_CHECK(aligned ? "k_tree_sgd4" : "k_tree_sgd");
    return FF_OK;
}

// The plain update is the fused tree update of one row (its gradient), in place: the same rule
// and bits, float4s where aligned, here over a full grid (nothing runs beside it to leave room for).
extern "C" ff_status ff_gpu_sgd(float *w, float *mom, const float *g, int64_t count, float lr, float momentum,
                                float weight_decay, bool first, ff_gpu_stream s) {
    if (count <= 0) return FF_OK;
    const ff_tree_rows r = {const_cast<float *>(g), 1, count, -1, nullptr, false};
    const bool aligned = (((uintptr_t)w | (uintptr_t)mom | (uintptr_t)g) & 15) == 0;
    const long long per_block = (long long)FF_TREE_SGD_CHUNKS * 4 * FF_TRAIN_THREADS;
    const unsigned blocks = aligned ? (unsigned)((count + per_block - 1) / per_block) : train_blocks(count);
    launch_tree_sgd<1>(aligned, blocks, ff_cu_stream(s),
                       {w, w, mom, r, count, lr, momentum, weight_decay, first ? 1 : 0});
    FF_LAUNCH_CHECK(aligned ? "k_tree_sgd4" : "k_tree_sgd");
    return FF_OK;
}

extern "C" ff_status ff_gpu_synth(float *x, const ff_synth *sy, int64_t first, int64_t n, ff_gpu_stream s) {
    if (n <= 0 || sy->dim <= 0) return FF_OK;
    const long long total = n * sy->dim;
    k_synth<<<train_blocks(total), FF_TRAIN_THREADS, 0, ff_cu_stream(s)>>>(x, *sy, first, total);
    FF_LAUNCH_CHECK("k_synth");
    return FF_OK;
}

extern "C" ff_status ff_gpu_gather(float *x, int32_t *labels, const float *images, const int32_t *all_labels,
                                   const int64_t *idx, int64_t per, int64_t n, ff_gpu_stream s) {
    if (n <= 0 || per <= 0) return FF_OK;
    k_gather<<<(unsigned)(n < 65536 ? n : 65536), FF_TRAIN_THREADS, 0, ff_cu_stream(s)>>>(x, labels, images, all_labels,
                                                                                          idx, per, n);
    FF_LAUNCH_CHECK("k_gather");
    return FF_OK;
}
