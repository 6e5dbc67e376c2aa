// The tf32x3 arithmetic (docs/ARCHITECTURE.md §9) that more than one kernel runs: the split of a
// float into two TF32 halves, the m16n8k8 product, a k-chunk's three products in the order that
// makes tf32x3's bits, and the epilogue through shared memory. layers_cuda.cu's forward/data
// gradient kernels (k_conv_x3, k_conv_x3_rows) and train_cuda.cu's weight gradient
// (k_conv_wgrad_x3) include it, so a change here changes all of them at once.
#pragma once
#include <stdint.h>

// relu with PyTorch's rule: only values below zero become +0 (-0.0 and NaN are kept).
__device__ __forceinline__ float relu_f(float v) {
    return v < 0.0f ? 0.0f : v;
}

// --precision tf32x3 (docs/ARCHITECTURE.md §9): convolutions (layers_cuda.cu: forward and data gradient;
// train_cuda.cu: weight gradient) with the products on tensor cores with fp32-class accuracy. Each factor is split into
// two TF32 halves, x = big + small (big = x rounded to TF32's 10 explicit bits, small = the remainder rounded again; x
// - big - small is below 2^-22 |x|), and w x is taken as three exact TF32 products, w_small x_big + w_big x_small +
// w_big x_big (the smallest first), accumulated in fp32 by mma.sync m16n8k8; w_small x_small (below 2^-22 |w x|) is
// left out. The bits are their own class: an output's value depends only on its weights row, its input column, the bias
// and the fixed sequence of k-chunks of 8 (ascending; the last one zero-padded, never a chunk past Kd), so every tile
// configuration, batch size and band gives the same bits, as k_gemm's chains do. small: the remainder is finite or NaN
// (x = +-inf or NaN: big carries it, and inf - inf would make a NaN, so small = 0), and for a finite one cvt.rna.tf32
// is adding half the unit of the 13 dropped bits to the magnitude and clearing them (ties away from zero; |rest| <=
// 2^-11 |x| cannot overflow): the conversion's own inf/NaN guard is left out, two instructions of the eleven a split
// took. The same halves: session 24 ran both forms side by side, every configuration the same bits
// and the training digests unchanged (bench/results/issue15-s24/REPORT.md).
__device__ __forceinline__ void split_tf32(float x, uint32_t &big, uint32_t &small) {
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(big) : "f"(x));
    const float rest = __fsub_rn(x, __uint_as_float(big));
    small = isfinite(rest) ? (__float_as_uint(rest) + 0x1000u) & 0xffffe000u : 0u;
}
__device__ __forceinline__ void mma_tf32(float *c, const uint32_t *a, const uint32_t *b) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// The accumulators of a warp's MI x NI mma tiles (rows m0 + mi * 16 + gq and + 8) start at their
// rows' bias, or at +0 without one.
template <int MI, int NI>
__device__ __forceinline__ void x3_acc_init(float (&acc)[MI][NI][4], const float *bias, int m0, int M, int gq) {
#pragma unroll
    for (int mi = 0; mi < MI; mi++) {
        const int m = m0 + mi * 16 + gq;
        const float b0 = bias && m < M ? bias[m] : 0.0f, b8 = bias && m + 8 < M ? bias[m + 8] : 0.0f;
#pragma unroll
        for (int ni = 0; ni < NI; ni++) acc[mi][ni][0] = acc[mi][ni][1] = b0, acc[mi][ni][2] = acc[mi][ni][3] = b8;
    }
}
// One k-chunk of 8: each accumulator's three exact TF32 products, the smallest first (w_small
// x_big, w_big x_small, w_big x_big), the order that makes tf32x3's bits.
template <int MI, int NI>
__device__ __forceinline__ void x3_mma_chunk(float (&acc)[MI][NI][4], uint32_t (&ab)[MI][4], uint32_t (&al)[MI][4],
                                             uint32_t (&bb)[NI][2], uint32_t (&bl)[NI][2]) {
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int ni = 0; ni < NI; ni++) {
            mma_tf32(acc[mi][ni], al[mi], bb[ni]);
            mma_tf32(acc[mi][ni], ab[mi], bl[ni]);
            mma_tf32(acc[mi][ni], ab[mi], bb[ni]);
        }
}
// The epilogue, through shared memory: acc[mi][ni][h * 2 + q] is block row wm0 + mi * 16 + gq + 8 h
// and block column wn0 + ni * 8 + 2 tq + q; the block's BM x BN outputs are first written to tile
// ([BM][BN + 8] floats: the staging memory, free once every warp is past its loop), then each
// output row goes out as consecutive 4-byte stores (a warp's store one 128-byte run; written from
// the registers, a warp's store touched 8 rows at every other column, and the stores' register
// waits were 10 % of k_conv_x3_rows' samples, bench/results/issue15-s26 run 7). col(c) gives block
// column c's offset in out (image and pixel), or -1 past the end; rows from m0 (the block's). The
// same values, only the store order differs.
#define X3_TILE_PAD 8
template <int BM, int BN>
constexpr int x3_tile_floats() {
    return BM * (BN + X3_TILE_PAD);
}
// M: the output's rows (rows m0 + ml >= M are not written); ld: floats from one row to the next.
template <int BM, int BN, int T, int MI, int NI, typename Col>
__device__ __forceinline__ void x3_store(float *__restrict__ out, float *tile, const float (&acc)[MI][NI][4], int m0,
                                         int wm0, int wn0, int M, long long ld, int gq, int tq, int relu, Col col) {
    constexpr int TP = BN + X3_TILE_PAD;
    __syncthreads();  // every warp is done with the staged operands
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
            for (int ni = 0; ni < NI; ni++)
#pragma unroll
                for (int q = 0; q < 2; q++)
                    tile[(wm0 + mi * 16 + gq + h * 8) * TP + wn0 + ni * 8 + 2 * tq + q] = acc[mi][ni][h * 2 + q];
    __syncthreads();
    for (int e = threadIdx.x; e < BM * BN; e += T) {
        const int ml = e / BN, c = e - ml * BN, m = m0 + ml;
        const long long off = col(c);
        if (m >= M || off < 0) continue;
        const float v = tile[ml * TP + c];
        out[off + (long long)m * ld] = relu ? relu_f(v) : v;
    }
}
__device__ __forceinline__ uint2 split_pair(float x) {
    uint2 p;
    split_tf32(x, p.x, p.y);
    return p;
}
// Fragment registers from (big, small) pairs in shared memory: the big halves to b, the small to l.
// A's four: (row gq, k tq), (row gq + 8, k tq), (row gq, k tq + 4), (row gq + 8, k tq + 4) (mma.sync
// m16n8k8's and wgmma's A alike); B's two: (k tq, column gq), (k tq + 4, column gq).
template <int N>
__device__ __forceinline__ void x3_pairs(uint32_t (&b)[N], uint32_t (&l)[N], const uint2 (&p)[N]) {
#pragma unroll
    for (int i = 0; i < N; i++) b[i] = p[i].x, l[i] = p[i].y;
}
// A from a row-major matrix of pairs, S pairs a row; a points at (row gq, k tq).
__device__ __forceinline__ void x3_a_rows(uint32_t (&b)[4], uint32_t (&l)[4], const uint2 *a, int S) {
    const uint2 p[4] = {a[0], a[8 * S], a[4], a[8 * S + 4]};
    x3_pairs(b, l, p);
}
// A gathered from staged rows: element (row, k) is rows[k offset + row offset]; r0, r1 the offsets
// of rows gq and gq + 8, k0, k1 those of k tq and tq + 4.
__device__ __forceinline__ void x3_a_taps(uint32_t (&b)[4], uint32_t (&l)[4], const uint2 *rows, int k0, int k1, int r0,
                                          int r1) {
    const uint2 p[4] = {rows[k0 + r0], rows[k0 + r1], rows[k1 + r0], rows[k1 + r1]};
    x3_pairs(b, l, p);
}
// B gathered the same way: c the offset of column gq.
__device__ __forceinline__ void x3_b_taps(uint32_t (&b)[2], uint32_t (&l)[2], const uint2 *rows, int k0, int k1,
                                          int c) {
    const uint2 p[2] = {rows[k0 + c], rows[k1 + c]};
    x3_pairs(b, l, p);
}

// ------------------------------------------------------------------ Hopper's warpgroup MMA (sm_90a)
// wgmma.mma_async m64nNk8 tf32 with A (64 x 8) from registers and B (N x 8, K-major) from shared
// memory through a descriptor: a warpgroup (4 warps, 128 threads) adds A B^T to its 64 x N
// accumulators. A's registers per thread are mma.sync m16n8k8's for the warp's 16 rows (warp w of
// the group: rows 16 w + gq and + 8, k tq and tq + 4); the accumulators are m16n8k8's C fragment
// for each n-tile of 8 (d[4 j] and d[4 j + 1]: row gq, columns 8 j + 2 tq and + 1; d[4 j + 2..3]:
// row gq + 8). The three products of tf32x3 run as A = x, B = w in the order x_big w_small,
// x_small w_big, x_big w_big: the bits of x3_mma_chunk's mma.sync order, element for element
// (bench/results/issue15-s27/wgmma_probe.cu: 0 of 4096 sums over 576 terms differ, and plain TF32
// neither) at three times the products a second (488 against 162 TFLOP/s of TF32 on an H200).
// B's layout, no swizzle: core matrices of 8 rows (n) x 16 bytes (4 k), the next one along k
// WG_LBO bytes on, the next along n WG_SBO bytes on (a k-chunk of N columns: N * 32 bytes).
#define WG_LBO 128
#define WG_SBO 256
__device__ __forceinline__ int wg_b_index(int n, int k) {  // float index of B(n, k) in a k-chunk
    return (n >> 3) * (WG_SBO / 4) + (k >> 2) * (WG_LBO / 4) + (n & 7) * 4 + (k & 3);
}
// A row-major N x COLS block of raw B values (B's rows, k along them) split into the B tiles of
// COLS / 8 k-chunks: big halves at bt[chunk][N * 8] in that layout, small halves COLS * N floats
// further (T threads, this one tid).
template <int N, int COLS, int T>
__device__ __forceinline__ void wg_split_b(float *bt, const float *raw, int tid) {
    static_assert(COLS % 8 == 0, "whole k-chunks");
    for (int e = tid; e < N * COLS; e += T) {
        const int n = e / COLS, k = e - n * COLS, at = (k >> 3) * N * 8 + wg_b_index(n, k & 7);
        uint32_t hi, lo;
        split_tf32(raw[e], hi, lo);
        bt[at] = __uint_as_float(hi), bt[COLS * N + at] = __uint_as_float(lo);
    }
}
__device__ __forceinline__ uint64_t wg_desc(const float *smem) {
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(smem);
    return (uint64_t)((a >> 4) & 0x3fff) | (uint64_t)((WG_LBO >> 4) & 0x3fff) << 16 |
           (uint64_t)((WG_SBO >> 4) & 0x3fff) << 32;
}
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FF_WG_ASM 1
#endif
__device__ __forceinline__ void wg_fence() {
#ifdef FF_WG_ASM
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wg_commit() {
#ifdef FF_WG_ASM
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void wg_wait() {
#ifdef FF_WG_ASM
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
// Keeps the compiler from moving other instructions' reads or writes of the accumulators across
// this point (wgmma reads and writes them asynchronously; ptxas serializes the MMAs otherwise).
template <int N>
__device__ __forceinline__ void wg_fence_operands(float (&d)[N]) {
#pragma unroll
    for (int i = 0; i < N; i++) asm volatile("" : "+f"(d[i])::"memory");
}
// Shared-memory writes of the generic proxy (st.shared) made visible to wgmma's async proxy.
__device__ __forceinline__ void fence_proxy_async() {
#ifdef FF_WG_ASM
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void wgmma_tf32(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc);
template <>
__device__ __forceinline__ void wgmma_tf32<64>(float (&d)[32], const uint32_t (&a)[4], uint64_t desc) {
#ifdef FF_WG_ASM
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,"
        "%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
          "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
          "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
          "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
#else
    (void)d, (void)a, (void)desc;
    __trap();  // built without sm_90a: the host never launches this (FF_HAVE_WGMMA)
#endif
}
template <>
__device__ __forceinline__ void wgmma_tf32<32>(float (&d)[16], const uint32_t (&a)[4], uint64_t desc) {
#ifdef FF_WG_ASM
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, {%16,%17,%18,%19}, %20, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
          "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
#else
    (void)d, (void)a, (void)desc;
    __trap();
#endif
}
// One k-chunk's three tf32x3 products for each of a warpgroup's MT tiles, A = x and B = w in the
// order x_big w_small, x_small w_big, x_big w_big (x3_mma_chunk's bits), issued asynchronously as
// one committed group; big, small: the chunk's B tiles.
template <int N, int MT>
__device__ __forceinline__ void wg_x3_chunk(float (&d)[MT][N / 2], const uint32_t (&ab)[MT][4],
                                            const uint32_t (&al)[MT][4], uint64_t big, uint64_t small) {
#pragma unroll
    for (int mt = 0; mt < MT; mt++) wg_fence_operands(d[mt]);
    wg_fence();
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
        wgmma_tf32<N>(d[mt], ab[mt], small);  // x_big w_small
        wgmma_tf32<N>(d[mt], al[mt], big);    // x_small w_big
        wgmma_tf32<N>(d[mt], ab[mt], big);    // x_big w_big
    }
    wg_commit();
#pragma unroll
    for (int mt = 0; mt < MT; mt++) wg_fence_operands(d[mt]);
}
// Every product issued so far done, the accumulators readable again.
template <int N, int MT>
__device__ __forceinline__ void wg_drain(float (&d)[MT][N / 2]) {
    wg_wait<0>();
#pragma unroll
    for (int mt = 0; mt < MT; mt++) wg_fence_operands(d[mt]);
}
// A warpgroup's MT tiles into a shared-memory tile transposed (the GEMM's columns as its rows, TP
// floats apart): the accumulator of row r0 + 64 mt + gq (+ 8) and column 8 j + 2 tq (+ 1) goes to
// tile[column * TP + row]; r0 = the warpgroup's first row + 16 warp. Then each column (an output
// channel) leaves in whole rows.
template <int N, int MT>
__device__ __forceinline__ void wg_tile_transposed(float *tile, int TP, const float (&d)[MT][N / 2], int r0, int gq,
                                                   int tq) {
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int j = 0; j < N / 8; j++)
#pragma unroll
            for (int h = 0; h < 2; h++)
#pragma unroll
                for (int q = 0; q < 2; q++)
                    tile[(8 * j + 2 * tq + q) * TP + r0 + 64 * mt + gq + 8 * h] = d[mt][4 * j + 2 * h + q];
}
