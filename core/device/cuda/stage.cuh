// Staging into shared memory that more than one kernel runs: the cp.async primitives (layers_cuda.cu
// and train_cuda.cu both copy with them), a row-major tile copied with zero fill, and the
// zero-padded input rows the staged-rows conv kernels read their taps from (k_conv_x3_rows and
// k_conv_x3_wg in layers_cuda.cu, k_conv_wgrad_x3 and k_conv_wgrad_x3wg in train_cuda.cu).
#pragma once

__device__ __forceinline__ void cp_async4(float *smem, const float *gmem, bool valid) {
    const unsigned sa = (unsigned)__cvta_generic_to_shared(smem);
    const int src_size = valid ? 4 : 0;  // 0: nothing is read, the 4 bytes are zero-filled
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(sa), "l"(gmem), "r"(src_size));
}
__device__ __forceinline__ void cp_async8(void *smem, const void *gmem, bool valid) {
    const unsigned sa = (unsigned)__cvta_generic_to_shared(smem);
    const int src_size = valid ? 8 : 0;
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(sa), "l"(gmem), "r"(src_size));
}
// One element of a staged row: a float (4 bytes) or a pre-split TF32 pair (uint2, 8 bytes).
__device__ __forceinline__ void cp_async_elem(float *smem, const float *gmem, bool valid) {
    cp_async4(smem, gmem, valid);
}
__device__ __forceinline__ void cp_async_elem(uint2 *smem, const uint2 *gmem, bool valid) {
    cp_async8(smem, gmem, valid);
}
__device__ __forceinline__ void cp_async16(float *smem, const float *gmem, bool valid) {
    const unsigned sa = (unsigned)__cvta_generic_to_shared(smem);
    const int src_size = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(sa), "l"(gmem), "r"(src_size));
}
__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// The ST-stage cp.async pipeline of the tiled kernels (k_gemm, k_lin, k_conv_x3, k_gemv):
// load(buffer, tile) issues tile's copies into stage buffer `buffer`. pipe_begin puts tiles
// 0 .. ST-2 in flight; pipe_next(t), at the top of iteration t, returns with tile t landed and
// visible to the whole block (every thread is past the barrier, so the buffer tile t - 1 was read
// from is free) and tile t + ST - 1 issued into it. One commit group a tile, empty ones past the
// last, so that waiting for all but ST - 2 groups always means "tile t has landed".
template <int ST, typename Load>
__device__ __forceinline__ void pipe_begin(int ntiles, const Load &load) {
#pragma unroll
    for (int s = 0; s < ST - 1; s++) {
        if (s < ntiles) load(s, s);
        cp_async_commit();
    }
}
template <int ST, typename Load>
__device__ __forceinline__ void pipe_next(int t, int ntiles, const Load &load) {
    cp_async_wait<ST - 2>();
    __syncthreads();
    const int tn = t + ST - 1;
    if (tn < ntiles) load(tn % ST, tn);
    cp_async_commit();
}

// dst[r][c] = src[(row0 + r) * ld + col0 + c] for a ROWS x COLS tile (T threads, this one tid),
// +0 where row0 + r >= nrows or col0 + c >= ncols (none: any readable address, never read). quad:
// 16-byte copies, for callers whose ld, col0, ncols and src keep every quad 16-byte aligned and
// wholly in or past ncols (COLS % 4 == 0).
template <int ROWS, int COLS, int T>
__device__ __forceinline__ void stage_tile(float *dst, const float *src, const float *none, long long ld, int row0,
                                           int nrows, int col0, int ncols, bool quad, int tid) {
    if (quad) {
        static_assert(COLS % 4 == 0, "whole quads");
        for (int e = tid; e < ROWS * COLS / 4; e += T) {
            const int r = e / (COLS / 4), c = (e % (COLS / 4)) * 4;
            const bool v = row0 + r < nrows && col0 + c < ncols;
            cp_async16(dst + 4 * e, v ? src + (long long)(row0 + r) * ld + col0 + c : none, v);
        }
    } else {
        for (int e = tid; e < ROWS * COLS; e += T) {
            const int r = e / COLS, c = e % COLS;
            const bool v = row0 + r < nrows && col0 + c < ncols;
            cp_async4(dst + e, v ? src + (long long)(row0 + r) * ld + col0 + c : none, v);
        }
    }
}

// The input rows a stage reaches, zero-padded, a warp a row: dst[(cl NR + rr) WP + col] =
// x[c0 + cl][ih_lo + rr][col - pad] for cl < CS channels, rr < NR rows, col < WP = W + 2 pad; +0
// for channels past C, rows outside [0, H) or outside the band held ([in_lo, in_lo + in_rows):
// x_img holds those rows, chan elements apart), and the padding columns. E: float (the raw input)
// or uint2 (its pre-split TF32 pairs, k_split_pairs: a zero pair is +0's split).
template <typename E>
__device__ __forceinline__ void stage_padded_rows(E *dst, const E *x_img, const E *none, int CS, int NR, int WP, int c0,
                                                  int C, int ih_lo, int H, int W, int pad, int in_lo, int in_rows,
                                                  long long chan, int warp, int nwarps, int lane) {
    for (int row = warp; row < CS * NR; row += nwarps) {
        const int cl = row / NR, ih = ih_lo + row % NR, c = c0 + cl;
        const bool rv = c < C && (unsigned)ih < (unsigned)H && (unsigned)(ih - in_lo) < (unsigned)in_rows;
        const E *src = x_img + (long long)c * chan + (long long)(ih - in_lo) * W - pad;
        for (int col = lane; col < WP; col += 32) {
            const bool v = rv && (unsigned)(col - pad) < (unsigned)W;
            cp_async_elem(dst + row * WP + col, v ? src + col : none, v);
        }
    }
}
