// Private to the CUDA training sources: pieces one kernel file lends another.
#pragma once
#include "fivefold/gpu.h"

// The weight-gradient partials of n images (part: n rows of pstride floats, (K, C, R, S) weights then
// K biases, KCRS = K*C*R*S; with strips > 1 that many rows an image, added in order first) summed
// in image order per group of `group` images into row g of dw and db (gpu.h "Groups"):
// train_cuda.cu's k_conv_wgrad_sum, which the dense and the pool-sparse weight gradients
// (pool_sparse.cu) both end with.
ff_status ff_gpu_conv_wgrad_group_sums(float *dw, float *db, int64_t grad_stride, float *part, long long KCRS,
                                       long long pstride, int64_t n, int64_t group, int strips, ff_gpu_stream s);

// Multiprocessors of the current GPU, asked once (a process drives one GPU; 132 if the query fails):
// kernels size their grids by it, never their bits.
int ff_gpu_multiprocessors();

// pool_sparse.cu's one-time setup (its weight kernel's shared memory), called by ff_gpu_train_kernels_init.
extern "C" ff_status ff_gpu_pool_sparse_init(void);
