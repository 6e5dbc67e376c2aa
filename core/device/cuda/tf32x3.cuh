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
