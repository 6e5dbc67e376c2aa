// The CPU reference layers (docs/ARCHITECTURE.md §4, §5): plain C, one thread, readable before fast. They are the
// spec every other mode is checked against. Outputs first, then inputs, then parameters, then
// sizes. Callers own memory; no function here allocates.
//
// Summation order (defines the reference's bits; compiled with -ffp-contract=off):
//   conv2d: out = b[k]; then for c, for r, for s (ascending): out += w[k,c,r,s] * in[c, ., .]
//           (padding taps are skipped, not added as zeros: adding +0.0f is not always a no-op
//            for -0.0f, and skipping keeps the order well defined)
//   linear: out = b[j]; then for i ascending: out += w[j,i] * in[i]
// Every output element's value depends only on its own inputs: computing a band of rows, a
// sub-batch, or the whole tensor gives identical bits for the elements computed.
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "fivefold/model.h"
#include "fivefold/status.h"

#ifdef __cplusplus
extern "C" {
#endif

// A band of rows: the buffer `in` holds input rows [in_lo, in_hi) of the layer's full input
// height, and the function computes output rows [out_lo, out_hi) into `out`, which holds exactly
// those rows. For the whole tensor: {0, L->in.h, 0, L->out.h} (ff_rows_full).
typedef struct {
    int64_t in_lo, in_hi;
    int64_t out_lo, out_hi;
} ff_rows;

static inline ff_rows ff_rows_full(const ff_layer *L) {
    ff_rows r = {0, L->in.h, 0, L->out.h};
    return r;
}

// out: (n, K, out_hi-out_lo, Wo); in: (n, C, in_hi-in_lo, W); w: (K, C, R, S); b: (K)
void ff_cpu_conv2d(float *out, const float *in, const float *w, const float *b, const ff_layer *L, const ff_rows *rows,
                   int64_t n);
// One conv2d over several independent pieces of the same layer (the mpi rows split's image
// groups, each with its own row band): segment q is ff_cpu_conv2d(out, in, w, b, L, &rows, n) and
// gets exactly those bits; the weights are repacked once for all segments instead of once each.
typedef struct {
    float *out;       // (n, K, rows.out_hi - rows.out_lo, Wo)
    const float *in;  // (n, C, rows.in_hi - rows.in_lo, W)
    ff_rows rows;
    int64_t n;
} ff_conv_segment;
void ff_cpu_conv2d_segments(const ff_conv_segment *segs, int n_segs, const float *w, const float *b, const ff_layer *L);
// The conv2d kernel's copy in effect, by vector width in bits: 512 (AVX-512F), 256 (AVX2) or 128
// (the baseline every x86-64 has). All give the same bits. ff_exec_create decides it before any
// thread runs a kernel (else the first call does): the widest the CPU has, or what FF_CPU_VECTOR
// asks for.
int ff_cpu_vector(void);
// The copy FF_CPU_VECTOR asks for (unset or empty: the widest the CPU has; 128; 256; 512), or
// FF_ERR_INPUT naming the value when it is something else or asks for a width the CPU lacks.
// ff_exec_create calls it, so a bad value stops every command before anything runs.
ff_status ff_cpu_vector_choose(int *bits);
// The copy's name for people: "AVX-512", "AVX2", "128-bit baseline" ("?" for another width).
const char *ff_cpu_vector_name(int bits);
// Chooses the copy (tests compare them): the widest of 512, 256, 128 that is at most `bits` and
// that the CPU has. Returns the width in effect. Not for use while convs run.
int ff_cpu_set_vector(int bits);
// out, in: (n, C, out_hi-out_lo, W) — rows must be an identity band (in_lo == out_lo, ...)
void ff_cpu_relu(float *out, const float *in, int64_t count);
// out: (n, C, out_hi-out_lo, Wo); in: (n, C, in_hi-in_lo, W). Max over the window, first max wins;
// NaN propagates (a NaN input makes the output NaN, as in PyTorch).
void ff_cpu_maxpool(float *out, const float *in, const ff_layer *L, const ff_rows *rows, int64_t n);
// out, in: (n, C, rows, W): across channels, per pixel, in float32 with PyTorch's definition.
void ff_cpu_lrn(float *out, const float *in, const ff_layer *L, int64_t rows, int64_t n);
// out: (n, out_features); in: (n, in_features); w: (out_features, in_features); b: (out_features)
void ff_cpu_linear(float *out, const float *in, const float *w, const float *b, const ff_layer *L, int64_t n);
// out, in: (n, classes): max-subtracted (float32), exp computed in double and rounded once to float
// (glibc's expf differs in the last bit between CPUs), sum ascending in float32, divide.
void ff_cpu_softmax(float *out, const float *in, int64_t classes, int64_t n);

// Runs one layer of any kind on a band (flatten is a copy). w/b may be NULL for layers without
// parameters. For non-spatial layers rows must be ff_rows_full.
void ff_cpu_layer_forward(float *out, const float *in, const float *w, const float *b, const ff_layer *L,
                          const ff_rows *rows, int64_t n);

#ifdef __cplusplus
}
#endif
