// What layers_cpu.c lends layers_cpu_backward.c: its packed conv kernel, run for a data gradient.
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "fivefold/model.h"

// The data gradient of a stride-1 conv2d on the packed conv kernel (conv_cpu_kernel.h), in
// layers_cpu_backward.h's order (dx = +0; for k, r, s ascending: dx += w[k,c,r,s] * dy[...]), so
// with the bits of ff_cpu_conv2d_backward_data's loop nest, at conv speed. Returns false, having
// written nothing, for a conv it does not take (stride > 1, kernels wider than 64 columns or of
// more than 512 taps). dx: (n, C, H, W) overwritten; dy: (n, K, Ho, Wo); w: (K, C, R, S).
bool ff_cpu_conv2d_backward_data_packed(float *dx, const float *dy, const float *w, const ff_layer *L, int64_t n);
