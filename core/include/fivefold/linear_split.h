// The fixed split of a linear layer's reduction on the GPU (split-K), part of what makes the `cuda`
// digest class (gpu.h, docs/ARCHITECTURE.md §5). A chain of 9216 serial FMAs per output (AlexNet fc6) leaves the
// GEMM with 32 blocks of 128x128 at N = 128 for 132 multiprocessors; cutting the reduction into S
// chunks summed separately gives S times the blocks and S times shorter chains. The split must not
// make the bits depend on anything but the inputs, so S is a pure function of in_features K alone:
// never of the batch size, the tile configuration, the path (GEMM or GEMV) or the GPU.
//
// The rule: S = ff_linear_split(K) is the largest power of two S <= FF_LINEAR_MAX_SPLIT such that
// K is a multiple of FF_LINEAR_CHUNK_ALIGN * S and the chunk K / S is at least FF_LINEAR_MIN_CHUNK;
// S = 1 when no S >= 2 qualifies (in particular whenever K < 2048 or K is not a multiple of 256).
//   K = 128 (mnist fc2)                 -> S = 1 (not split)
//   K = 2048                            -> S = 2 x 1024
//   K = 4096 (alexnet fc7, fc8)         -> S = 4 x 1024
//   K = 9216 (alexnet fc6, mnist fc1)   -> S = 8 x 1152
// A chunk is then a multiple of 128 (the GEMV kernel's stage depth: chunk borders fall on stage
// borders) and long enough that the extra traffic of the partial sums (S floats per output) stays
// small next to the K-long weight rows.
//
// The computation of one output element out[img, j] (w: (J, K), in: (n, K), chunk c = K / S):
//   p_0 = b[j];   for k in [0, c) ascending:        p_0 = fma(w[j, k], in[img, k], p_0)
//   p_s = +0;     for k in [s c, (s+1) c) ascending: p_s = fma(w[j, k], in[img, k], p_s)   (s >= 1)
//   out = ((p_0 + p_1) + p_2) + ... + p_{S-1}      (float32 additions, round to nearest, this order)
//   then relu (v < 0 ? +0 : v) if fused.
// With S = 1 this is the single chain b[j], k ascending: layers that are not split keep the bits
// they had before the split existed. Each p_s is one chain in one thread, whatever the kernel.
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "fivefold/model.h"
#include "fivefold/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FF_LINEAR_CHUNK_ALIGN 128  // a chunk is a multiple of this many terms
#define FF_LINEAR_MIN_CHUNK 1024   // and at least this long
#define FF_LINEAR_MAX_SPLIT 16     // at most this many chunks (bounds the workspace: S * n * J floats)

// S, the number of chunks the reduction of in_features K is cut into (the rule above); >= 1.
int ff_linear_split(int64_t K);

// Device workspace (floats) ff_gpu_linear needs for n images of L: S * n * out_features for a split
// layer (the partial sums p_s of the GEMM path), 0 for S = 1.
int64_t ff_gpu_linear_workspace_floats(const ff_layer *L, int64_t n);

// CPU emulation of the order above with `split` chunks (pass ff_linear_split(K) for the GPU's bits;
// tests pass other values to see that a different split is detected): fmaf chains, then float32
// additions in order. Bit-identical to ff_gpu_linear (GEMM and GEMV paths) when split is the rule's.
// out: (n, J); in: (n, K); w: (J, K); b: (J). FF_ERR_INPUT when split does not divide K.
ff_status ff_linear_split_cpu(float *out, const float *in, const float *w, const float *b, const ff_layer *L, int split,
                              bool relu, int64_t n);

#ifdef __cplusplus
}
#endif
