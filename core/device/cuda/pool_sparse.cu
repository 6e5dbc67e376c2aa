// The backward of conv -> relu -> 2x2 max-pool (mnist's conv2, relu2, pool1) in the pool's sparse
// form (gpu.h "pool-sparse backward"; docs/ARCHITECTURE.md §9).
//
// Why: a 2x2 window of stride 2 passes its gradient to ONE of its four inputs (its pick), and the
// relu below passes that only where the pick is positive. So at most a quarter of the conv's output
// gradient is nonzero, and WHERE it is nonzero is one of four offsets per window. The dense
// kernels (train_cuda.cu) multiply the other three quarters by their zeros; these kernels keep a
// window's gradient g and its pick q (0..3: (0,0), (0,1), (1,0), (1,1)) and compute in fp32 fma
// chains under every --precision (more exact than tf32x3): the weight gradient does only the
// nonzero quarter's work; the data gradient multiplies the three zero cells of each window too
// (branch-free, it outran a switch on the pick) but reads only the windows' g and q.
//
// Orders (each element one chain computed by one thread, fixed by the geometry alone):
//   data gradient dx[n][c][y][x]: the output channels in PSD_PARTS (4) contiguous parts of
//     ceil(K / 4) (the last ones shorter or empty); in each part, channels k ascending, then the
//     windows whose pick's 3x3 taps cover (y, x) in row-major window order (at most one tap a
//     window), fmaf(g, w, acc) from +0; then ((part 0 + part 1) + part 2) + part 3 (__fadd_rn), then
//     relu1's gate. A zero g's product is added too (+0: the bits of skipping it, the weights
//     being finite; against an infinite or NaN weight the loss is not finite anyway).
//   weight gradient: per image, dw[k][c][r][s] over every window in row-major order, fmaf(g, x, acc)
//     from +0 (a zero g included: it adds +0 where x is finite); db[k] = +0 + g + g ... (__fadd_rn) over the windows in
//     the same order; then the images of a group summed in image order (train_cuda.cu's k_conv_wgrad_sum, the dense
//     path's).
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>

#include "fivefold/gpu.h"
#include "gpu_check.cuh"
#include "train_parts.cuh"
#include "train_rules.cuh"

struct PsGeom {
    int C, H, W;  // the conv's input (C, H, W)
    int K;        // its output channels (the pool's planes)
    int Ho, Wo;   // its output = the pool's input
    int PH, PW;   // the pool's windows
};

static PsGeom ps_geom(const ff_layer *conv, const ff_layer *pool) {
    PsGeom g;
    g.C = (int)conv->in.c, g.H = (int)conv->in.h, g.W = (int)conv->in.w, g.K = (int)conv->out_c;
    g.Ho = (int)conv->out.h, g.Wo = (int)conv->out.w, g.PH = (int)pool->out.h, g.PW = (int)pool->out.w;
    return g;
}

// ------------------------------------------------------------------ the sparse gradient
// One thread per window: its pick (pool2x2_pick, k_maxpool_bwd_2x2's), g = +0 unless the pick is
// positive (the relu), else 0 + dy.
template <typename I>
static __global__ void k_ps_gradient(float *__restrict__ G, uint8_t *__restrict__ Q, const float *__restrict__ dy,
                                     const float *__restrict__ y, int Ho, int Wo, int PH, int PW, I total) {
    const int PP = PH * PW;
    for (I t = blockIdx.x * (I)blockDim.x + threadIdx.x; t < total; t += (I)gridDim.x * blockDim.x) {
        const I plane = t / (I)PP;
        const int o = (int)(t - plane * PP), py = o / PW, px = o - py * PW;
        const float *p = y + (long long)plane * Ho * Wo + (long long)(2 * py) * Wo + 2 * px;
        float bv;
        const int best = pool2x2_pick(p[0], p[1], p[Wo], p[Wo + 1], &bv);
        G[t] = !(bv > 0.0f) ? 0.0f : __fadd_rn(0.0f, dy[t]);
        Q[t] = (uint8_t)best;
    }
}

// Two windows a thread (px even, px + 1): their rows as two 16-byte loads each, dy and g as 8-byte
// ones, the picks as one 2-byte store; the same picks and values as k_ps_gradient (one thread a
// window: 4-byte loads and a 64-bit index split took 12.3 us at batch 64, 34 at 256 on an H100,
// bench/results/issue15-s38, for about 11 and 43 MB moved). Where the rows are 16-byte aligned
// and PW is even (ps_gradient_pairs).
template <typename I>
static __global__ void k_ps_gradient2(float *__restrict__ G, uint8_t *__restrict__ Q, const float *__restrict__ dy,
                                      const float *__restrict__ y, int Ho, int Wo, int PH, int PW, I pairs) {
    const int HP = PW / 2, PP2 = PH * HP;  // pairs a pooled row, a plane
    for (I t = blockIdx.x * (I)blockDim.x + threadIdx.x; t < pairs; t += (I)gridDim.x * blockDim.x) {
        const I plane = t / (I)PP2;
        const int o = (int)(t - plane * PP2), py = o / HP, px = 2 * (o - py * HP);
        const float *p = y + (long long)plane * Ho * Wo + (long long)(2 * py) * Wo + 2 * px;
        const float4 a = *reinterpret_cast<const float4 *>(p), b = *reinterpret_cast<const float4 *>(p + Wo);
        const long long w0 = (long long)plane * PH * PW + py * PW + px;  // the first window
        const float2 d = *reinterpret_cast<const float2 *>(dy + w0);
        float v0, v1;
        const int q0 = pool2x2_pick(a.x, a.y, b.x, b.y, &v0), q1 = pool2x2_pick(a.z, a.w, b.z, b.w, &v1);
        float2 gv;
        gv.x = !(v0 > 0.0f) ? 0.0f : __fadd_rn(0.0f, d.x);
        gv.y = !(v1 > 0.0f) ? 0.0f : __fadd_rn(0.0f, d.y);
        *reinterpret_cast<float2 *>(G + w0) = gv;
        *reinterpret_cast<uint16_t *>(Q + w0) = (uint16_t)(q0 | q1 << 8);  // (little-endian: q0 first)
    }
}

// The sparse gradient in two halves (ff_gpu_pool_sparse_picks, ff_gpu_pool_sparse_gate): the picks
// read only the forward's y, so they can be made before dy exists (on the gradient lane while the
// layers above run their backward); the gate then needs only dy and the pool's output, which is
// the window's max by the pick's rule (k_maxpool2's max_tap: the value pool2x2_pick returns), so
// pooled > 0 is the pick's test. Together they write k_ps_gradient's bytes.
template <typename I>
static __global__ void k_ps_picks(uint8_t *__restrict__ Q, const float *__restrict__ y, int Ho, int Wo, int PH, int PW,
                                  I total) {
    const int PP = PH * PW;
    for (I t = blockIdx.x * (I)blockDim.x + threadIdx.x; t < total; t += (I)gridDim.x * blockDim.x) {
        const I plane = t / (I)PP;
        const int o = (int)(t - plane * PP), py = o / PW, px = o - py * PW;
        const float *p = y + (long long)plane * Ho * Wo + (long long)(2 * py) * Wo + 2 * px;
        float bv;
        Q[t] = (uint8_t)pool2x2_pick(p[0], p[1], p[Wo], p[Wo + 1], &bv);
    }
}
// Two windows a thread, as k_ps_gradient2 (where ps_gradient_pairs' alignment holds).
template <typename I>
static __global__ void k_ps_picks2(uint8_t *__restrict__ Q, const float *__restrict__ y, int Ho, int Wo, int PH, int PW,
                                   I pairs) {
    const int HP = PW / 2, PP2 = PH * HP;
    for (I t = blockIdx.x * (I)blockDim.x + threadIdx.x; t < pairs; t += (I)gridDim.x * blockDim.x) {
        const I plane = t / (I)PP2;
        const int o = (int)(t - plane * PP2), py = o / HP, px = 2 * (o - py * HP);
        const float *p = y + (long long)plane * Ho * Wo + (long long)(2 * py) * Wo + 2 * px;
        const float4 a = *reinterpret_cast<const float4 *>(p), b = *reinterpret_cast<const float4 *>(p + Wo);
        float v0, v1;
        const int q0 = pool2x2_pick(a.x, a.y, b.x, b.y, &v0), q1 = pool2x2_pick(a.z, a.w, b.z, b.w, &v1);
        *reinterpret_cast<uint16_t *>(Q + (long long)plane * PH * PW + py * PW + px) = (uint16_t)(q0 | q1 << 8);
    }
}
static __global__ void k_ps_gate(float *__restrict__ G, const float *__restrict__ dy, const float *__restrict__ pooled,
                                 long long total) {
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < total;
         t += (long long)gridDim.x * blockDim.x)
        G[t] = !(pooled[t] > 0.0f) ? 0.0f : __fadd_rn(0.0f, dy[t]);
}

// ------------------------------------------------------------------ data gradient
// A block per (image, row pair, 13 columns, 32 input channels), lane = input channel: every
// window's g and pick are the same for the whole warp, so a window's taps land at places known at
// compile time, either once a switch on the pick has chosen them (psd_taps, a test hook's) or as
// the taps of all four cells of the window, three of them zero (DENSE, the default), and the 2 x 13
// sums stay in registers. Its PSD_PARTS warps each sum one contiguous part of the output channels
// (more warps than one a strip: session 38's runs found the kernel latency-bound at 1 or 2 warps a
// scheduler, 94 us at batch 64 on an H100 with one warp an 8 x 8 tile; 52 us so); the parts are
// added in order through shared memory. A warp stages its windows' (g, q) for PSD_KC channels at a
// time in shared memory (two windows a 16-byte load), the next chunk's and the next channel's 9
// weights loading during the current one's taps. The strip's windows: rows y0/2 - 1 and y0/2,
// columns from ceil((X0 - 3) / 2), PSD_NJ of them (one past an edge holds g = 0).
constexpr int PSD_CT = 13, PSD_NJ = 8, PSD_KC = 8, PSD_PARTS = 4;

template <int ODD>
static __device__ __forceinline__ void psd_taps(float (&acc)[2][PSD_CT], const float (&w)[9], float gv, int ii, int jj,
                                                unsigned q) {
    auto taps = [&](int qy, int qx) {
#pragma unroll
        for (int r = 0; r < 3; r++)
#pragma unroll
            for (int s = 0; s < 3; s++) {
                const int ly = 2 * ii - 2 + qy + r, lx = 2 * jj - 2 - ODD + qx + s;
                if (ly >= 0 && ly < 2 && lx >= 0 && lx < PSD_CT) acc[ly][lx] = fmaf(gv, w[r * 3 + s], acc[ly][lx]);
            }
    };
    switch (q) {
        case 0: taps(0, 0); break;
        case 1: taps(0, 1); break;
        case 2: taps(1, 0); break;
        default: taps(1, 1); break;
    }
}

// A warp's part of a strip. Without DENSE, a switch on each window's pick issues only its taps
// (psd_taps; ff_gpu_debug_force_pool_sparse_dgrad_switch). With DENSE (the default), the warp
// stages each window's four cells of the conv's output gradient, the pick's g and three zeros, and
// every output of the strip gathers all 9 taps from registers, the covering windows row-major,
// with fmas only: 4x the fmas of the picks, no branch, 26 independent chains a lane. A zero cell
// adds +0 (the weights finite; see the orders above), so the bits are the switch's. Why: PC
// samples put the switch's warps mostly waiting on fixed latencies and branch resolution; the
// gather keeps the schedulers issuing (fma-bound) and took 51.5 against 53.7 us at batch 64 and
// 190.8 against 202.9 at 256 on an H100 (bench/results/issue15-s40, run 2).
template <int ODD, bool DENSE>  // ODD: X0's parity (2 * ceil((X0 - 3) / 2) - X0 = -2 - ODD: the column offset)
static __device__ __forceinline__ void psd_part(float (&acc)[2][PSD_CT], float *stage_mem, const float *__restrict__ G,
                                                const uint8_t *__restrict__ Q, const float *__restrict__ w,
                                                const PsGeom &g, long long img, int i0, int J0, int c, int kb, int ke) {
    float2(*stage)[2][PSD_NJ] = reinterpret_cast<float2(*)[2][PSD_NJ]>(stage_mem);        // (g, q) a window
    float(*cells)[4][2 * PSD_NJ] = reinterpret_cast<float(*)[4][2 * PSD_NJ]>(stage_mem);  // DENSE: 4 a window
    const int lane = threadIdx.x & 31;
    const int cw = c < g.C ? c : 0;
    float gv[4];
    unsigned qv[4];
    auto fetch = [&](int k0) {
#pragma unroll
        for (int u = 0; u < 4; u++) {
            const int e = lane + 32 * u, k = k0 + (e >> 4), i = i0 + ((e >> 3) & 1), j = J0 + (e & 7);
            const bool ok = k < ke && i >= 0 && i < g.PH && j >= 0 && j < g.PW;
            const long long at = ok ? ((img * g.K + k) * g.PH + i) * (long long)g.PW + j : 0;
            gv[u] = ok ? __ldg(G + at) : 0.0f;
            qv[u] = ok ? __ldg(Q + at) : 0u;
        }
    };
    fetch(kb);
    float wn[9];
#pragma unroll
    for (int t = 0; t < 9; t++) wn[t] = __ldg(w + ((long long)(kb < ke ? kb : 0) * g.C + cw) * 9 + t);
    for (int k0 = kb; k0 < ke; k0 += PSD_KC) {
        __syncwarp();
#pragma unroll
        for (int u = 0; u < 4; u++) {
            const int e = lane + 32 * u, kk = e >> 4, ii = (e >> 3) & 1, jj = e & 7;
            if constexpr (DENSE) {  // window (ii, jj)'s cells: rows 2 ii + qy, columns 2 jj + qx
                const float z = 0.0f, v = gv[u];
                const unsigned q = qv[u];
                *reinterpret_cast<float2 *>(&cells[kk][2 * ii][2 * jj]) = make_float2(q == 0 ? v : z, q == 1 ? v : z);
                *reinterpret_cast<float2 *>(&cells[kk][2 * ii + 1][2 * jj]) =
                    make_float2(q == 2 ? v : z, q == 3 ? v : z);
            } else {
                stage[kk][ii][jj] = make_float2(gv[u], __uint_as_float(qv[u]));
            }
        }
        __syncwarp();
        if (k0 + PSD_KC < ke) fetch(k0 + PSD_KC);
        const int kn = min(PSD_KC, ke - k0);
        for (int kk = 0; kk < kn; kk++) {
            float wv[9];
#pragma unroll
            for (int t = 0; t < 9; t++) wv[t] = wn[t];
            const int kx = k0 + kk + 1 < ke ? k0 + kk + 1 : k0 + kk;
#pragma unroll
            for (int t = 0; t < 9; t++) wn[t] = __ldg(w + ((long long)kx * g.C + cw) * 9 + t);
            if constexpr (DENSE) {
#pragma unroll
                for (int ii = 0; ii < 2; ii++) {  // a window row: its two cell rows, then every tap it has
                    float cell[2][2 * PSD_NJ];
#pragma unroll
                    for (int a = 0; a < 2; a++)
#pragma unroll
                        for (int v4 = 0; v4 < PSD_NJ / 2; v4++) {
                            const float4 f = *reinterpret_cast<const float4 *>(&cells[kk][2 * ii + a][4 * v4]);
                            cell[a][4 * v4] = f.x, cell[a][4 * v4 + 1] = f.y, cell[a][4 * v4 + 2] = f.z,
                                        cell[a][4 * v4 + 3] = f.w;
                        }
#pragma unroll
                    for (int ly = 0; ly < 2; ly++)
#pragma unroll
                        for (int lx = 0; lx < PSD_CT; lx++)
#pragma unroll
                            for (int jj = 0; jj < PSD_NJ; jj++)  // the windows in order, each's cells
#pragma unroll
                                for (int a = 0; a < 2; a++)
#pragma unroll
                                    for (int b = 0; b < 2; b++) {
                                        const int r = ly - 2 * ii + 2 - a, s = lx - 2 * jj - b + 2 + ODD;
                                        if (r >= 0 && r <= 2 && s >= 0 && s <= 2)
                                            acc[ly][lx] = fmaf(cell[a][2 * jj + b], wv[r * 3 + s], acc[ly][lx]);
                                    }
                }
            } else {
#pragma unroll
                for (int ii = 0; ii < 2; ii++) {
                    float4 two[PSD_NJ / 2];
#pragma unroll
                    for (int jp = 0; jp < PSD_NJ / 2; jp++)
                        two[jp] = *reinterpret_cast<const float4 *>(&stage[kk][ii][2 * jp]);
#pragma unroll
                    for (int jp = 0; jp < PSD_NJ / 2; jp++) {
                        psd_taps<ODD>(acc, wv, two[jp].x, ii, 2 * jp, __float_as_uint(two[jp].y));
                        psd_taps<ODD>(acc, wv, two[jp].z, ii, 2 * jp + 1, __float_as_uint(two[jp].w));
                    }
                }
            }
        }
    }
}

static bool g_force_dgrad_switch = false;  // ff_gpu_debug_force_pool_sparse_dgrad_switch

template <bool DENSE>
static __global__ void __launch_bounds__(PSD_PARTS * 32)
    k_ps_dgrad(float *__restrict__ dx, const float *__restrict__ G, const uint8_t *__restrict__ Q,
               const float *__restrict__ w, const float *__restrict__ gate, PsGeom g, int tiles_y, int tiles_x) {
    __shared__ __align__(16) float stage[PSD_PARTS][PSD_KC * 4 * 2 * PSD_NJ];  // (either part's layout)
    __shared__ float part[PSD_PARTS][32][2 * PSD_CT + 1];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    long long b = blockIdx.x;
    const int tx = (int)(b % tiles_x);
    b /= tiles_x;
    const int ty = (int)(b % tiles_y);
    const long long img = b / tiles_y;
    const int c0 = blockIdx.y * 32, c = c0 + lane;
    const int y0 = 2 * ty, X0 = PSD_CT * tx, i0 = ty - 1;
    const int KS = (g.K + PSD_PARTS - 1) / PSD_PARTS, kb = min(g.K, warp * KS), ke = min(g.K, kb + KS);
    float acc[2][PSD_CT];
#pragma unroll
    for (int u = 0; u < 2; u++)
#pragma unroll
        for (int v = 0; v < PSD_CT; v++) acc[u][v] = 0.0f;
    const int J0 = X0 & 1 ? (X0 - 3) / 2 : X0 / 2 - 1;
    if (X0 & 1)
        psd_part<1, DENSE>(acc, stage[warp], G, Q, w, g, img, i0, J0, c, kb, ke);
    else
        psd_part<0, DENSE>(acc, stage[warp], G, Q, w, g, img, i0, J0, c, kb, ke);
#pragma unroll
    for (int u = 0; u < 2; u++)
#pragma unroll
        for (int v = 0; v < PSD_CT; v++) part[warp][lane][u * PSD_CT + v] = acc[u][v];
    __syncthreads();
    for (int o = threadIdx.x; o < 32 * 2 * PSD_CT; o += PSD_PARTS * 32) {
        const int cl = o / (2 * PSD_CT), p = o - cl * (2 * PSD_CT), ly = p / PSD_CT, lx = p - ly * PSD_CT;
        const int yy = y0 + ly, xx = X0 + lx, cc = c0 + cl;
        if (yy >= g.H || xx >= g.W || cc >= g.C) continue;
        float sum = part[0][cl][p];
#pragma unroll
        for (int t = 1; t < PSD_PARTS; t++) sum = __fadd_rn(sum, part[t][cl][p]);
        const long long at = ((img * g.C + cc) * g.H + yy) * (long long)g.W + xx;
        dx[at] = gate ? relu_pass(gate[at], sum) : sum;
    }
}

// ------------------------------------------------------------------ weight gradient
// A block per (image, PSW_WARPS * KPW output channels, 32 input channels): the image's channels in
// shared memory, a row each of an odd stride (H*W | 1: lane c's row starts in bank c * stride mod
// 32, all 32 distinct, so a warp reading one pixel of every channel has no conflict), copied by
// warps a channel at a time, four loads in flight a lane (a copy that waited on each load took most
// of the kernel's 105 us at batch 64: bench/results/issue15-s37 run 2); for
// each window and output channel of the block, g and where its pick's 3x3 patch starts in that
// memory. A warp holds KPW output channels' 3x3 taps for its lane's input channel: per window and
// channel, 9 loads at the pick's (warp-uniform) offset and 9 fmas, no branch, so the channels'
// chains overlap. Every window's term is added, a zero g too (it adds +0: the same bits as skipping
// it where x is finite; the dense kernels multiply every zero as well).
// The gradient comes in either form: the sparse one (g, q), or the dense (n, K, Ho, Wo) one the
// maxpool backward wrote (at most one nonzero a window, the pick's: g and q are read off it).
constexpr int PSW_WARPS = 8;

__host__ __device__ constexpr long long psw_smem(int H, int W, int PP, int KPW) {
    return 32LL * ((H * W) | 1) * 4 + (long long)PSW_WARPS * KPW * PP * 8;
}

template <int KPW, int WT, bool DENSE>
static __global__ void __launch_bounds__(PSW_WARPS * 32)
    k_ps_wgrad(float *__restrict__ part, const float *__restrict__ dy, const uint8_t *__restrict__ Q,
               const float *__restrict__ x, PsGeom g, long long pstride) {
    constexpr int KB = PSW_WARPS * KPW;
    extern __shared__ float smem[];
    const int W = WT > 0 ? WT : g.W;
    const int HW = g.H * W, HWP = HW | 1, PP = g.PH * g.PW;
    float *sx = smem;                                            // (32, HWP)
    float *sg = sx + 32LL * HWP;                                 // (PSW_WARPS, PP, KPW): g
    int *so = reinterpret_cast<int *>(sg + (long long)KB * PP);  // the same: the pick's patch in sx
    const long long img = blockIdx.x;
    const int k0 = blockIdx.y * KB, c0 = blockIdx.z * 32;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int cc = warp; cc < 32; cc += PSW_WARPS) {
        const float *src = x + (img * g.C + c0 + cc) * HW;
        float *dst = sx + cc * HWP;
        const bool have = c0 + cc < g.C;
        for (int p0 = lane; p0 < HW; p0 += 128) {
            float v[4];
#pragma unroll
            for (int u = 0; u < 4; u++) v[u] = have && p0 + 32 * u < HW ? src[p0 + 32 * u] : 0.0f;
#pragma unroll
            for (int u = 0; u < 4; u++)
                if (p0 + 32 * u < HW) dst[p0 + 32 * u] = v[u];
        }
    }
    for (int e = threadIdx.x; e < KB * PP; e += blockDim.x) {
        const int kb = e / PP, o = e - kb * PP, k = k0 + kb, py = o / g.PW, px = o - py * g.PW;
        float gv = 0.0f;
        int q = 0;
        if (k < g.K) {
            if (DENSE) {  // the window's one nonzero, if any (a NaN counts)
                const float *d = dy + ((img * g.K + k) * g.Ho + 2 * py) * (long long)g.Wo + 2 * px;
                const float v[4] = {d[0], d[1], d[g.Wo], d[g.Wo + 1]};
#pragma unroll
                for (int t = 3; t >= 0; t--)
                    if (v[t] != 0.0f) gv = v[t], q = t;
            } else {
                const long long at = (img * g.K + k) * PP + o;
                gv = dy[at], q = Q[at];
            }
        }
        const int at = ((kb / KPW) * PP + o) * KPW + kb % KPW;
        sg[at] = gv;
        so[at] = (2 * py + (q >> 1)) * W + 2 * px + (q & 1);
    }
    __syncthreads();
    float acc[KPW][9];
#pragma unroll
    for (int kk = 0; kk < KPW; kk++)
#pragma unroll
        for (int t = 0; t < 9; t++) acc[kk][t] = 0.0f;
    const float *sgw = sg + warp * PP * KPW, *sxl = sx + lane * HWP;
    const int *sow = so + warp * PP * KPW;
    for (int o = 0; o < PP; o++) {
#pragma unroll
        for (int kk = 0; kk < KPW; kk++) {
            const float gv = sgw[o * KPW + kk];
            const float *b = sxl + sow[o * KPW + kk];
#pragma unroll
            for (int r = 0; r < 3; r++)
#pragma unroll
                for (int t = 0; t < 3; t++) acc[kk][r * 3 + t] = fmaf(gv, b[r * W + t], acc[kk][r * 3 + t]);
        }
    }
    float *pi = part + img * pstride;
    const int c = c0 + lane;
    const long long CRS = (long long)g.C * 9;
    if (c < g.C)
#pragma unroll
        for (int kk = 0; kk < KPW; kk++) {
            const int k = k0 + warp * KPW + kk;
            if (k >= g.K) break;
#pragma unroll
            for (int t = 0; t < 9; t++) pi[k * CRS + c * 9 + t] = acc[kk][t];
        }
    if (blockIdx.z == 0)  // the bias: a thread per output channel of the block, windows in order
        for (int kb = threadIdx.x; kb < KB && k0 + kb < g.K; kb += blockDim.x) {
            float b = 0.0f;
            for (int o = 0; o < PP; o++) b = __fadd_rn(b, sg[((kb / KPW) * PP + o) * KPW + kb % KPW]);
            pi[g.K * CRS + k0 + kb] = b;
        }
}

// Every instantiation: output channels a warp, the input width (26: mnist's conv2, its 9 loads at
// immediate offsets; 0: any), the gradient's form.
#define PSW_KERNELS(X) \
    X(2, 26, true)     \
    X(2, 26, false) X(4, 26, true) X(4, 26, false) X(2, 0, true) X(2, 0, false) X(4, 0, true) X(4, 0, false)

static bool g_force_dense = false;
static int g_force_kpw = 0;
static bool g_force_gradient1 = false;                 // ff_gpu_debug_force_pool_sparse_gradient1
constexpr long long PSW_SMEM_TWO_BLOCKS = 113 * 1024;  // (228 KB a multiprocessor, 1 KB of it reserved a block)

extern "C" void ff_gpu_debug_force_pool_dense(bool on) {
    g_force_dense = on;
}
extern "C" void ff_gpu_debug_force_pool_sparse_dgrad_switch(bool on) {
    g_force_dgrad_switch = on;
}
extern "C" void ff_gpu_debug_force_pool_sparse_gradient1(bool on) {
    g_force_gradient1 = on;
}
extern "C" void ff_gpu_debug_force_pool_sparse_kpw(int kpw) {
    g_force_kpw = kpw == 2 || kpw == 4 ? kpw : 0;
}
extern "C" bool ff_gpu_pool_sparse_on(void) {
    return !g_force_dense;
}

extern "C" ff_status ff_gpu_pool_sparse_init(void) {
#define PSW_SET(kpw, wt, dense)                                                                                 \
    FF_CUDA_CHECK(cudaFuncSetAttribute(k_ps_wgrad<kpw, wt, dense>, cudaFuncAttributeMaxDynamicSharedMemorySize, \
                                       FF_GPU_POOL_SPARSE_SMEM_MAX));
    PSW_KERNELS(PSW_SET)
#undef PSW_SET
    return FF_OK;
}

static ff_status ps_check(const char *what, const ff_layer *conv, const ff_layer *pool, int64_t n) {
    if (!ff_gpu_pool_sparse_applies(conv, pool))
        return FF_FAIL(FF_ERR_INPUT,
                       "%s of %s through %s: expected a 3x3 conv of stride 1, pad 0 (it is %dx%d, stride %d, pad %d) "
                       "under a 2x2 max-pool of stride 2, pad 0 over its output (it is %dx%d, stride %d, pad %d, "
                       "on %lldx%lldx%lld; the conv gives %lldx%lldx%lld), an image of at most %d bytes of shared "
                       "memory (gpu.h ff_gpu_pool_sparse_applies)",
                       what, conv->name, pool->name, conv->kh, conv->kw, conv->stride, conv->pad, pool->kh, pool->kw,
                       pool->stride, pool->pad, (long long)pool->in.c, (long long)pool->in.h, (long long)pool->in.w,
                       (long long)conv->out_c, (long long)conv->out.h, (long long)conv->out.w,
                       FF_GPU_POOL_SPARSE_SMEM_MAX);
    if (n < 0 || n > 0x7fffffff)
        return FF_FAIL(FF_ERR_INPUT, "%s of %s: %lld images, expected 0 .. 2^31-1", what, conv->name, (long long)n);
    return FF_OK;
}

extern "C" ff_status ff_gpu_pool_sparse_gradient(float *gq, const float *dy, const float *y, const ff_layer *conv,
                                                 const ff_layer *pool, int64_t n, ff_gpu_stream s) {
    FF_TRY(ps_check("the sparse pool gradient", conv, pool, n));
    if (n == 0) return FF_OK;
    const PsGeom g = ps_geom(conv, pool);
    const long long total = n * (long long)g.K * g.PH * g.PW;
    uint8_t *q = reinterpret_cast<uint8_t *>(gq + total);
    // Two windows a thread where every pair's rows, dy, g and picks are aligned: even pooled rows
    // (so pairs never straddle a row or plane), rows of a multiple of 4 floats, aligned buffers.
    const bool pairs = g.PW % 2 == 0 && g.Wo % 4 == 0 && ((uintptr_t)y & 15) == 0 && ((uintptr_t)dy & 7) == 0 &&
                       ((uintptr_t)gq & 7) == 0 && total % 2 == 0 && !g_force_gradient1;
    if (pairs) {
        const long long np = total / 2;
        long long blocks = (np + 255) / 256;
        if (blocks > (1 << 20)) blocks = 1 << 20;
        if (np <= INT32_MAX && blocks * 256 <= INT32_MAX)
            k_ps_gradient2<unsigned>
                <<<(unsigned)blocks, 256, 0, ff_cu_stream(s)>>>(gq, q, dy, y, g.Ho, g.Wo, g.PH, g.PW, (unsigned)np);
        else
            k_ps_gradient2<long long>
                <<<(unsigned)blocks, 256, 0, ff_cu_stream(s)>>>(gq, q, dy, y, g.Ho, g.Wo, g.PH, g.PW, np);
        FF_LAUNCH_CHECK("k_ps_gradient2");
        return FF_OK;
    }
    long long blocks = (total + 255) / 256;
    if (blocks > (1 << 20)) blocks = 1 << 20;
    if (total <= INT32_MAX && blocks * 256 <= INT32_MAX)
        k_ps_gradient<unsigned>
            <<<(unsigned)blocks, 256, 0, ff_cu_stream(s)>>>(gq, q, dy, y, g.Ho, g.Wo, g.PH, g.PW, (unsigned)total);
    else
        k_ps_gradient<long long>
            <<<(unsigned)blocks, 256, 0, ff_cu_stream(s)>>>(gq, q, dy, y, g.Ho, g.Wo, g.PH, g.PW, total);
    FF_LAUNCH_CHECK("k_ps_gradient");
    return FF_OK;
}

extern "C" ff_status ff_gpu_pool_sparse_picks(float *gq, const float *y, const ff_layer *conv, const ff_layer *pool,
                                              int64_t n, ff_gpu_stream s) {
    FF_TRY(ps_check("the pool's picks", conv, pool, n));
    if (n == 0) return FF_OK;
    const PsGeom g = ps_geom(conv, pool);
    const long long total = n * (long long)g.K * g.PH * g.PW;
    uint8_t *q = reinterpret_cast<uint8_t *>(gq + total);
    const bool pairs = g.PW % 2 == 0 && g.Wo % 4 == 0 && ((uintptr_t)y & 15) == 0 && ((uintptr_t)gq & 7) == 0 &&
                       total % 2 == 0 && !g_force_gradient1;
    const long long items = pairs ? total / 2 : total;
    long long blocks = (items + 255) / 256;
    if (blocks > (1 << 20)) blocks = 1 << 20;
    const bool narrow = items <= INT32_MAX && blocks * 256 <= INT32_MAX;
    if (pairs && narrow)
        k_ps_picks2<unsigned>
            <<<(unsigned)blocks, 256, 0, ff_cu_stream(s)>>>(q, y, g.Ho, g.Wo, g.PH, g.PW, (unsigned)items);
    else if (pairs)
        k_ps_picks2<long long><<<(unsigned)blocks, 256, 0, ff_cu_stream(s)>>>(q, y, g.Ho, g.Wo, g.PH, g.PW, items);
    else if (narrow)
        k_ps_picks<unsigned>
            <<<(unsigned)blocks, 256, 0, ff_cu_stream(s)>>>(q, y, g.Ho, g.Wo, g.PH, g.PW, (unsigned)items);
    else
        k_ps_picks<long long><<<(unsigned)blocks, 256, 0, ff_cu_stream(s)>>>(q, y, g.Ho, g.Wo, g.PH, g.PW, items);
    FF_LAUNCH_CHECK("k_ps_picks");
    return FF_OK;
}

extern "C" ff_status ff_gpu_pool_sparse_gate(float *gq, const float *dy, const float *pooled, const ff_layer *conv,
                                             const ff_layer *pool, int64_t n, ff_gpu_stream s) {
    FF_TRY(ps_check("the sparse gradient's gate", conv, pool, n));
    if (n == 0) return FF_OK;
    const PsGeom g = ps_geom(conv, pool);
    const long long total = n * (long long)g.K * g.PH * g.PW;
    long long blocks = (total + 255) / 256;
    if (blocks > (1 << 20)) blocks = 1 << 20;
    k_ps_gate<<<(unsigned)blocks, 256, 0, ff_cu_stream(s)>>>(gq, dy, pooled, total);
    FF_LAUNCH_CHECK("k_ps_gate");
    return FF_OK;
}

extern "C" ff_status ff_gpu_pool_sparse_backward_data(float *dx, const float *gq, const float *w, const float *gate,
                                                      const ff_layer *conv, const ff_layer *pool, int64_t n,
                                                      ff_gpu_stream s) {
    FF_TRY(ps_check("the sparse data gradient", conv, pool, n));
    if (n == 0) return FF_OK;
    const PsGeom g = ps_geom(conv, pool);
    const long long total = n * (long long)g.K * g.PH * g.PW;
    const long long tiles_y = (g.H + 1) / 2, tiles_x = (g.W + PSD_CT - 1) / PSD_CT;
    const long long blocks = n * tiles_y * tiles_x, chunks = (g.C + 31) / 32;
    if (blocks > 0x7fffffffLL || chunks > 65535)
        return FF_FAIL(FF_ERR_INPUT, "the sparse data gradient of %s: a grid of %lld x %lld blocks, too large",
                       conv->name, blocks, chunks);
    const uint8_t *q = reinterpret_cast<const uint8_t *>(gq + total);
    if (g_force_dgrad_switch)
        k_ps_dgrad<false><<<dim3((unsigned)blocks, (unsigned)chunks), PSD_PARTS * 32, 0, ff_cu_stream(s)>>>(
            dx, gq, q, w, gate, g, (int)tiles_y, (int)tiles_x);
    else
        k_ps_dgrad<true><<<dim3((unsigned)blocks, (unsigned)chunks), PSD_PARTS * 32, 0, ff_cu_stream(s)>>>(
            dx, gq, q, w, gate, g, (int)tiles_y, (int)tiles_x);
    FF_LAUNCH_CHECK("k_ps_dgrad");
    return FF_OK;
}

extern "C" ff_status ff_gpu_pool_sparse_backward_weights(float *dw, float *db, int64_t grad_stride, const float *dy,
                                                         bool dy_sparse, const float *x, const ff_layer *conv,
                                                         const ff_layer *pool, int64_t n, int64_t group, float *work,
                                                         ff_gpu_stream s) {
    FF_TRY(ps_check("the sparse weight gradient", conv, pool, n));
    if (group < 1)
        return FF_FAIL(FF_ERR_INPUT, "the sparse weight gradient of %s: groups of %lld images, expected >= 1",
                       conv->name, (long long)group);
    if (!work)
        return FF_FAIL(FF_ERR_INPUT, "the sparse weight gradient of %s: no workspace (expected %lld floats)",
                       conv->name, (long long)ff_gpu_conv2d_backward_weights_workspace_floats(conv, n));
    if (n == 0) return FF_OK;
    const PsGeom g = ps_geom(conv, pool);
    const long long total = n * (long long)g.K * g.PH * g.PW;
    const long long KCRS = (long long)g.K * g.C * 9, pstride = KCRS + g.K;
    // 4 output channels a warp (fewer copies of the image in shared memory) where two such blocks
    // fit a multiprocessor and the grid gives each two; else 2 (mnist's conv2: 126 KB a block with
    // 4). The same bits either way (ff_gpu_debug_force_pool_sparse_kpw).
    int kpw = psw_smem(g.H, g.W, g.PH * g.PW, 4) <= PSW_SMEM_TWO_BLOCKS &&
                      n * ((g.K + PSW_WARPS * 4 - 1) / (PSW_WARPS * 4)) >= 2LL * ff_gpu_multiprocessors()
                  ? 4
                  : 2;
    if (g_force_kpw) kpw = g_force_kpw;
    const long long kblocks = (g.K + PSW_WARPS * kpw - 1) / (PSW_WARPS * kpw), chunks = (g.C + 31) / 32;
    if (kblocks > 65535 || chunks > 65535)
        return FF_FAIL(FF_ERR_INPUT, "the sparse weight gradient of %s: %d output and %d input channels, too many",
                       conv->name, g.K, g.C);
    const dim3 grid((unsigned)n, (unsigned)kblocks, (unsigned)chunks);
    const size_t smem = (size_t)psw_smem(g.H, g.W, g.PH * g.PW, kpw);
    const uint8_t *q = dy_sparse ? reinterpret_cast<const uint8_t *>(dy + total) : NULL;
    cudaStream_t st = ff_cu_stream(s);
#define PSW_LAUNCH(kpw_, wt, dense)                                                                    \
    if (kpw == kpw_ && (wt == 0 || g.W == wt) && dense == !dy_sparse) {                                \
        k_ps_wgrad<kpw_, wt, dense><<<grid, PSW_WARPS * 32, smem, st>>>(work, dy, q, x, g, pstride);   \
        FF_LAUNCH_CHECK("k_ps_wgrad");                                                                 \
        return ff_gpu_conv_wgrad_group_sums(dw, db, grad_stride, work, KCRS, pstride, n, group, 1, s); \
    }
    PSW_KERNELS(PSW_LAUNCH)
#undef PSW_LAUNCH
    return FF_FAIL(FF_ERR_INPUT, "the sparse weight gradient of %s: no kernel for its shape", conv->name);
}
