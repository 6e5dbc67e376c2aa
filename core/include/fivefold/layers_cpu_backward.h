// Backward of the CPU reference layers that training needs (docs/ARCHITECTURE.md §9): conv2d, relu, maxpool,
// linear, softmax cross-entropy. Same conventions as layers_cpu.h: outputs first, then inputs,
// then parameters, then sizes; callers own memory (a function that needs scratch takes it as an
// argument and says how much); nothing here allocates. Whole tensors only (no row bands).
//
// Every output element is a sum in a fixed, documented order (built with -ffp-contract=off), so its
// bits depend only on the inputs and n: the training reduction (train.h) relies on that. Gradient
// outputs are OVERWRITTEN (not accumulated into): dw = sum over the n images of this call.
//
// Summation orders:
//   conv2d weights: dw[k,c,r,s] = 0; for image i ascending, for output position p = (oh, ow)
//                   ascending (row-major): dw += dy[i,k,p] * x[i,c,oh*st-pad+r,ow*st-pad+s]
//                   (padding taps contribute nothing). db[k] = 0; for i, p ascending: db += dy[i,k,p].
//   conv2d data:    dx[i,c,h,w] = 0; for k ascending, for r ascending, for s ascending:
//                   dx += w[k,c,r,s] * dy[i,k,oh,ow] for the one (oh, ow) with
//                   oh*st-pad+r = h, ow*st-pad+s = w, if it exists.
//   linear weights: dw[j,i] = 0; for image n ascending: dw += dy[n,j] * x[n,i];
//                   db[j] = 0; for n ascending: db += dy[n,j].
//   linear data:    dx[n,i] = 0; for j ascending: dx += dy[n,j] * w[j,i].
//   relu:           dx = y > 0 ? dy : 0 (y the forward output; PyTorch's threshold_backward).
//   maxpool:        dx = 0; for each output position ascending, dx[argmax] += dy where argmax is the
//                   first maximum of the window (the forward's tie rule; a NaN wins as in PyTorch).
//   softmax xent:   m = max_c z; e_c = exp(z_c - m); s = sum ascending e_c; p_c = e_c / s;
//                   loss = log(s) - (z_y - m); dz_c = (p_c - [c == y]) * scale. Everything in
//                   float32 except exp and log, computed in double and rounded once to float
//                   (glibc's expf/logf may differ in the last bit between CPUs; this does not).
#pragma once
#include <stdint.h>

#include "fivefold/model.h"

#ifdef __cplusplus
extern "C" {
#endif

// Scratch floats ff_cpu_conv2d_backward_weights needs: one image's im2col matrix, (Ho*Wo, C*R*S).
int64_t ff_cpu_conv2d_backward_weights_scratch(const ff_layer *L);

// dw: (K, C, R, S); db: (K); dy: (n, K, Ho, Wo); x: (n, C, H, W); scratch: (Ho*Wo, C*R*S)
void ff_cpu_conv2d_backward_weights(float *dw, float *db, const float *dy, const float *x, const ff_layer *L, int64_t n,
                                    float *scratch);
// dx: (n, C, H, W); dy: (n, K, Ho, Wo); w: (K, C, R, S)
void ff_cpu_conv2d_backward_data(float *dx, const float *dy, const float *w, const ff_layer *L, int64_t n);
// dx, dy, y: (count) — y is the relu's forward output
void ff_cpu_relu_backward(float *dx, const float *dy, const float *y, int64_t count);
// dx: (n, C, H, W); dy: (n, C, Ho, Wo); x: (n, C, H, W) the forward input
void ff_cpu_maxpool_backward(float *dx, const float *dy, const float *x, const ff_layer *L, int64_t n);
// dw: (out, in); db: (out); dy: (n, out); x: (n, in)
void ff_cpu_linear_backward_weights(float *dw, float *db, const float *dy, const float *x, const ff_layer *L,
                                    int64_t n);
// dx: (n, in); dy: (n, out); w: (out, in)
void ff_cpu_linear_backward_data(float *dx, const float *dy, const float *w, const ff_layer *L, int64_t n);
// Softmax cross-entropy on logits. dz: (n, classes) gradient of (scale * sum of per-image losses);
// loss: (n) per-image loss (may be NULL); z: (n, classes); labels: (n) in [0, classes).
// For the mean over a global batch of B images, scale = 1.0f / B.
void ff_cpu_softmax_xent_backward(float *dz, float *loss, const float *z, const int32_t *labels, float scale,
                                  int64_t classes, int64_t n);

#ifdef __cplusplus
}
#endif
