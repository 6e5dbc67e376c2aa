// Winograd convolution F(m x m, r x r) for stride-1 square 3x3 and 5x5 convolutions (docs/ARCHITECTURE.md §5;
// issue 6: cuDNN's Winograd/FFT choices beat any direct fp32 kernel on AlexNet's conv2..conv5), and
// for strided convolutions that space-to-depth turns into a stride-1 3x3 one (AlexNet's conv1).
// Host side: which variant a layer uses, the weight transform (done once, at create), the band
// geometry, the CPU emulation the tests compare the GPU with bit for bit, and the error bound's
// absolute sum (tolerance.h: ff_tol_winograd_bound). The GPU pipeline is ff_gpu_conv2d_winograd.
//
// The computation of one output element y[k, oh, ow] (what makes the `cuda` digest class of a
// Winograd layer):
//   tiles are anchored at ABSOLUTE output coordinates: tile (th, tw) covers output rows
//   th*m .. th*m+m-1 and columns tw*m .. tw*m+m-1, and reads input rows th*m - pad .. th*m - pad +
//   alpha - 1 (alpha = m + r - 1; outside [0, H) or [0, W): +0). For every channel c:
//     V_c = B^T d_c B                     (core/device/cuda/winograd_tf.h, fixed order, float32)
//   U_c = G g_c G^T, computed in float64 from the float32 weights and rounded once (create).
//   For each of the alpha^2 positions xi: M[xi] = 0; for c ascending: M[xi] = fma(U_c[xi], V_c[xi],
//   M[xi]) (one chain in one thread: the GEMM kernel with the bias replaced by +0).
//   Y = A^T M A (winograd_tf.h, float32); y = Y[oh - th*m, ow - tw*m] + b[k]; relu if fused.
// Nothing depends on the batch size, the band or the launch shape. A row band whose first output
// row is not a multiple of m still computes whole tiles: it needs the input rows of the whole
// first tile, i.e. up to (out_lo mod m) rows more than ff_layer_input_rows gives (and likewise at
// the bottom): ff_winograd_input_rows says which; the GPU launcher refuses a band that lacks them.
//
// Space-to-depth (s2d). A conv with stride s > 1, pad 0 and a square k x k kernel with
// ceil(k/s) = 3 is EXACTLY the stride-1, pad-0 3x3 conv of the rearranged input and weights
//   X'[c*s*s + i*s + j][h'][w'] = x[c][s*h' + i][s*w' + j]    (+0 where s*h'+i >= H or s*w'+j >= W)
//   W'[k][c*s*s + i*s + j][a][b] = w[k][c][s*a + i][s*b + j]   (+0 where s*a+i >= k or s*b+j >= k)
// with C' = C*s*s channels over H' = ceil(H/s), W' = ceil(W/s): y[k][oh][ow] = b[k] + sum over
// (c', a, b) of W'[k][c'][a][b] X'[c'][oh + a][ow + b] (every original product w x appears once,
// every other product has a zero factor; the copies are exact). ff_winograd_equiv gives that
// stride-1 layer L' (its output must be the original Ho x Wo: H' - 2 == Ho, W' - 2 == Wo), and a
// s2d layer's Winograd output is, bit for bit, the stride-1 F(m x m, 3 x 3) computation above run
// on L' with X' and W' (the zero taps enter the transforms like any other weight): AlexNet's conv1
// (11x11, stride 4, C = 3 -> C' = 48, 57x57 -> 55x55) is in the `cuda` digest class of a
// F(4x4, 3x3) layer with 48 channels. Its error rule is computed on L' (ff_winograd_absdot,
// ff_winograd_roundings; golden/README.md §1b). Only the whole layer is supported: the band
// functions answer the full input and the full tile range for any band, and the CPU emulation and
// the GPU pipeline refuse a band that is not the whole output (no mode splits conv1 into bands on
// the GPU).
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "fivefold/layers_cpu.h"
#include "fivefold/model.h"
#include "fivefold/status.h"

#ifdef __cplusplus
extern "C" {
#endif

// The stride-1 layer the Winograd formula runs on. Returns 1 (and *E = *L) for a stride-1 square
// 3x3 or 5x5 conv; s (> 1) for a space-to-depth layer: conv2d, stride s > 1, pad 0, square k x k
// kernel with ceil(k/s) == 3, ceil(H/s) - 2 == Ho and ceil(W/s) - 2 == Wo; then *E is L' (same
// name and output, in = {C*s*s, ceil(H/s), ceil(W/s)}, kh = kw = 3, stride 1, pad 0, fan_in,
// n_weight and flops of L'). 0 for any other layer (*E untouched). E may be NULL. Pure.
int ff_winograd_equiv(ff_layer *E, const ff_layer *L);
// Output tile size m of the variant used for L, 0 if L has none: the eligibility rule every caller
// uses (the cuda executor, the GPU launcher, the benchmark). L qualifies when ff_winograd_equiv
// gives it a stride-1 layer L' with at least 16 channels (C' = C for stride 1, C*s*s for s2d;
// fewer: the transforms cost more than they save). `m` asks for F(m x m, r x r) (r of L'): 2 or 4;
// 0 is the default, 4 (F(4x4, 3x3), alpha 6, and F(4x4, 5x5), alpha 8: 4x and 6.25x fewer
// multiplications than direct, against 2.25x and 2.8x for m = 2).
int ff_winograd_m(const ff_layer *L, int m);
// alpha = m + r - 1 of that variant, r of L' (0 when m is 0).
int ff_winograd_alpha(const ff_layer *L, int m);
// Floats of the transformed weights: alpha^2 * K * C', laid out (alpha^2, K, C').
int64_t ff_winograd_weight_floats(const ff_layer *L, int m);
// u: (alpha^2, K, C'); w: (K, C, R, S), L's own weights (rearranged to W' first for a s2d layer).
// U = G g G^T in float64, rounded once to float32.
ff_status ff_winograd_weights(float *u, const float *w, const ff_layer *L, int m);
// The s2d rearrangements (see above; s = ff_winograd_equiv(NULL, L) > 1):
// xp (n, C', H', W') from x (n, C, H, W); wp (K, C', 3, 3) from w (K, C, k, k).
void ff_winograd_s2d_input(float *xp, const float *x, const ff_layer *L, int64_t n);
void ff_winograd_s2d_weights(float *wp, const float *w, const ff_layer *L);
// Floats the GPU pipeline keeps X' in at the start of its workspace: n * C' * H' * W' rounded up
// to a multiple of 64 (256 bytes: the rest of the workspace stays aligned); 0 unless L is s2d.
int64_t ff_winograd_s2d_floats(const ff_layer *L, int64_t n);
// Tiles of a band: tile rows [th_lo, th_hi), tiles per row tw; tiles per image (th_hi-th_lo)*tw.
// (A s2d layer: the tiles of the whole output, whatever the band.)
typedef struct {
    int64_t th_lo, th_hi, tw;
} ff_wg_tiles;
ff_wg_tiles ff_winograd_tiles(const ff_layer *L, int m, int64_t out_lo, int64_t out_hi);
// Input rows the band's whole tiles read (clipped to [0, H)): a superset of ff_layer_input_rows.
// (A s2d layer: [0, H), whatever the band.)
ff_range ff_winograd_input_rows(const ff_layer *L, int m, int64_t out_lo, int64_t out_hi);
// Workspace floats of the GPU pipeline for n images of the band: ff_winograd_s2d_floats (X', s2d
// layers only) + alpha^2 * P * (C' + K) (V, then the GEMM's output M), P = n * tiles per image.
int64_t ff_winograd_workspace_floats(const ff_layer *L, int m, int64_t out_lo, int64_t out_hi, int64_t n);

// CPU emulation, bit-identical to the GPU pipeline (same transform code, fmaf chains):
// out (n, K, out_hi-out_lo, Wo); in (n, C, in_hi-in_lo, W) holding at least
// ff_winograd_input_rows; u from ff_winograd_weights. Allocates its scratch (a test tool).
// A s2d layer: rows must be ff_rows_full(L) (FF_ERR_INPUT otherwise); in is rearranged to X'.
ff_status ff_winograd_conv_cpu(float *out, const float *in, const float *u, const float *b, const ff_layer *L, int m,
                               bool relu, const ff_rows *rows, int64_t n);

// The absolute sum of every product path of the Winograd formula (float64), per output element:
//   Ybar = |b| + sum_c |A^T| [ (|G| |g_c| |G^T|) (.) (|B^T| |d_c| |B|) ] |A|
// out (n, K, Ho, Wo) for the full layer; x (n, C, H, W); w (K, C, R, S); b may be NULL.
// A s2d layer: computed on L' with X' and W' (the zero taps and zero inputs add exact zeros).
// The Winograd rule (tolerance.h) bounds the error by gamma_n(u32) * Ybar.
ff_status ff_winograd_absdot(double *out, const float *x, const float *w, const float *b, const ff_layer *L, int m,
                             int64_t n);
// n of that rule: the most roundings on any path from an input/weight to an output element (L').
int64_t ff_winograd_roundings(const ff_layer *L, int m);
// K of that rule: the dot length of the float64 direct reference (ff_tol_winograd_bound's
// gamma_K(2^-53) term). The reference is the original layer's direct conv: fan_in + 1 terms; for a
// s2d layer max(fan_in, C'*9) + 1 (L' has more, zero, taps; gamma_K grows with K, so the larger K
// bounds a reference computed either way).
int64_t ff_winograd_ref_terms(const ff_layer *L);

#ifdef __cplusplus
}
#endif
