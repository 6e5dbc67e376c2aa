// Winograd convolution F(m x m, r x r) for stride-1 square 3x3 and 5x5 convolutions (DESIGN §5;
// issue 6: cuDNN's Winograd/FFT choices beat any direct fp32 kernel on AlexNet's conv2..conv5).
// Host side: which variant a layer uses, the weight transform (done once, at create), the band
// geometry, the CPU emulation the tests compare the GPU with bit for bit, and the error bound's
// absolute sum (tolerance.h: ff_tol_winograd_bound). The GPU pipeline is ff_gpu_conv2d_winograd.
//
// The computation of one output element y[k, oh, ow] (what makes the `cuda` digest class of a
// Winograd layer):
//   tiles are anchored at ABSOLUTE output coordinates: tile (th, tw) covers output rows
//   th*m .. th*m+m-1 and columns tw*m .. tw*m+m-1, and reads input rows th*m - pad .. th*m - pad +
//   alpha - 1 (alpha = m + r - 1; outside [0, H) or [0, W): +0). For every channel c:
//     V_c = B^T d_c B                     (core/winograd_tf.h, fixed order, float32)
//   U_c = G g_c G^T, computed in float64 from the float32 weights and rounded once (create).
//   For each of the alpha^2 positions xi: M[xi] = 0; for c ascending: M[xi] = fma(U_c[xi], V_c[xi],
//   M[xi]) (one chain in one thread: the GEMM kernel with the bias replaced by +0).
//   Y = A^T M A (winograd_tf.h, float32); y = Y[oh - th*m, ow - tw*m] + b[k]; relu if fused.
// Nothing depends on the batch size, the band or the launch shape. A row band whose first output
// row is not a multiple of m still computes whole tiles: it needs the input rows of the whole
// first tile, i.e. up to (out_lo mod m) rows more than ff_layer_input_rows gives (and likewise at
// the bottom): ff_winograd_input_rows says which; the GPU launcher refuses a band that lacks them.
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "fivefold/layers_cpu.h"
#include "fivefold/model.h"
#include "fivefold/status.h"

#ifdef __cplusplus
extern "C" {
#endif

// Output tile size m of the variant used for L, 0 if L is not a stride-1 square 3x3 or 5x5 conv.
// `m` asks for F(m x m, r x r): 2 or 4; 0 is the default, 4 (F(4x4, 3x3), alpha 6, and F(4x4, 5x5),
// alpha 8: 4x and 6.25x fewer multiplications than direct, against 2.25x and 2.8x for m = 2).
int ff_winograd_m(const ff_layer *L, int m);
// alpha = m + r - 1 of that variant (0 when m is 0).
int ff_winograd_alpha(const ff_layer *L, int m);
// Floats of the transformed weights: alpha^2 * K * C, laid out (alpha^2, K, C).
int64_t ff_winograd_weight_floats(const ff_layer *L, int m);
// u: (alpha^2, K, C); w: (K, C, R, S). U = G g G^T in float64, rounded once to float32.
ff_status ff_winograd_weights(float *u, const float *w, const ff_layer *L, int m);
// Tiles of a band: tile rows [th_lo, th_hi), tiles per row tw; tiles per image (th_hi-th_lo)*tw.
typedef struct {
    int64_t th_lo, th_hi, tw;
} ff_wg_tiles;
ff_wg_tiles ff_winograd_tiles(const ff_layer *L, int m, int64_t out_lo, int64_t out_hi);
// Input rows the band's whole tiles read (clipped to [0, H)): a superset of ff_layer_input_rows.
ff_range ff_winograd_input_rows(const ff_layer *L, int m, int64_t out_lo, int64_t out_hi);
// Workspace floats of the GPU pipeline for n images of the band: alpha^2 * P * (C + K),
// P = n * tiles per image.
int64_t ff_winograd_workspace_floats(const ff_layer *L, int m, int64_t out_lo, int64_t out_hi, int64_t n);

// CPU emulation, bit-identical to the GPU pipeline (same transform code, fmaf chains):
// out (n, K, out_hi-out_lo, Wo); in (n, C, in_hi-in_lo, W) holding at least
// ff_winograd_input_rows; u from ff_winograd_weights. Allocates its scratch (a test tool).
ff_status ff_winograd_conv_cpu(float *out, const float *in, const float *u, const float *b, const ff_layer *L, int m,
                               bool relu, const ff_rows *rows, int64_t n);

// The absolute sum of every product path of the Winograd formula (float64), per output element:
//   Ybar = |b| + sum_c |A^T| [ (|G| |g_c| |G^T|) (.) (|B^T| |d_c| |B|) ] |A|
// out (n, K, Ho, Wo) for the full layer; x (n, C, H, W); w (K, C, R, S); b may be NULL.
// The Winograd rule (tolerance.h) bounds the error by gamma_n(u32) * Ybar.
ff_status ff_winograd_absdot(double *out, const float *x, const float *w, const float *b, const ff_layer *L, int m,
                             int64_t n);
// n of that rule: the most roundings on any path from an input/weight to an output element.
int64_t ff_winograd_roundings(const ff_layer *L, int m);

#ifdef __cplusplus
}
#endif
