// Private to the CUDA sources: the check macros (docs/ARCHITECTURE.md §4). Each returns an ff_status with
// file:line and the CUDA error's name and text; a failed allocation maps to FF_ERR_OOM.
#pragma once
#include <cuda_runtime.h>

#include "fivefold/status.h"

#define FF_CUDA_CHECK(call)                                                                                            \
    do {                                                                                                               \
        cudaError_t ff_cuda_e_ = (call);                                                                               \
        if (ff_cuda_e_ != cudaSuccess)                                                                                 \
            return ff_fail(ff_cuda_e_ == cudaErrorMemoryAllocation ? FF_ERR_OOM : FF_ERR_CUDA, __FILE__, __LINE__,     \
                           "%s failed: %s (%s)", #call, cudaGetErrorString(ff_cuda_e_), cudaGetErrorName(ff_cuda_e_)); \
    } while (0)

// After every kernel launch: a bad configuration (too many threads, too much shared memory) or a
// sticky error from an earlier kernel is reported here, naming the kernel.
#define FF_LAUNCH_CHECK(kernel_name)                                                                     \
    do {                                                                                                 \
        cudaError_t ff_cuda_e_ = cudaGetLastError();                                                     \
        if (ff_cuda_e_ != cudaSuccess)                                                                   \
            return ff_fail(FF_ERR_CUDA, __FILE__, __LINE__, "launch of %s failed: %s (%s)", kernel_name, \
                           cudaGetErrorString(ff_cuda_e_), cudaGetErrorName(ff_cuda_e_));                \
    } while (0)

static inline cudaStream_t ff_cu_stream(struct ff_gpu_stream_s *s) {
    return (cudaStream_t)s;
}

// One-time per-process kernel setup (shared-memory limits), called by ff_gpu_select.
extern "C" ff_status ff_gpu_kernels_init(void);
