// GPU runtime entry points of gpu.h: devices, memory, copies, streams, events, graphs, cuBLAS.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fivefold/gpu.h"
#include "gpu_check.cuh"

ff_status ff_gpu_device_count(int *count) {
    *count = 0;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver || (e == cudaSuccess && n == 0)) {
        cudaGetLastError();  // clear the sticky error
        return FF_FAIL(FF_ERR_NO_CUDA,
                       "no CUDA device found (%s); the cuda, hybrid and direct modes "
                       "need an NVIDIA GPU and its driver",
                       e == cudaSuccess ? "0 devices" : cudaGetErrorString(e));
    }
    if (e != cudaSuccess) {
        cudaGetLastError();
        return FF_FAIL(FF_ERR_NO_CUDA, "no CUDA device found: cudaGetDeviceCount: %s (%s)", cudaGetErrorString(e),
                       cudaGetErrorName(e));
    }
    *count = n;
    return FF_OK;
}

ff_status ff_gpu_select(int device) {
    int n = 0;
    FF_TRY(ff_gpu_device_count(&n));
    if (device < 0 || device >= n) return FF_FAIL(FF_ERR_INPUT, "GPU %d: this machine has GPUs 0..%d", device, n - 1);
    FF_CUDA_CHECK(cudaSetDevice(device));
    return ff_gpu_kernels_init();
}

ff_status ff_gpu_device_info(int device, char *name, size_t name_cap, int *sms, int *cc_major, int *cc_minor,
                             size_t *total_bytes) {
    cudaDeviceProp p;
    FF_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
    if (name && name_cap) snprintf(name, name_cap, "%s", p.name);
    if (sms) *sms = p.multiProcessorCount;
    if (cc_major) *cc_major = p.major;
    if (cc_minor) *cc_minor = p.minor;
    if (total_bytes) *total_bytes = p.totalGlobalMem;
    return FF_OK;
}

ff_status ff_gpu_pci_bus_id(int device, char *buf, size_t cap) {
    FF_CUDA_CHECK(cudaDeviceGetPCIBusId(buf, (int)cap, device));
    return FF_OK;
}

ff_status ff_gpu_mem_info(size_t *free_bytes, size_t *total_bytes) {
    FF_CUDA_CHECK(cudaMemGetInfo(free_bytes, total_bytes));
    return FF_OK;
}

ff_status ff_gpu_versions(int *runtime, int *driver) {
    FF_CUDA_CHECK(cudaRuntimeGetVersion(runtime));
    FF_CUDA_CHECK(cudaDriverGetVersion(driver));
    return FF_OK;
}

ff_status ff_gpu_alloc(void **p, size_t bytes, const char *what) {
    *p = NULL;
    cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);
    if (e == cudaSuccess) return FF_OK;
    cudaGetLastError();
    *p = NULL;
    size_t fr = 0, tot = 0;
    cudaMemGetInfo(&fr, &tot);
    if (e == cudaErrorMemoryAllocation)
        return FF_FAIL(FF_ERR_OOM,
                       "GPU out of memory allocating %s: asked for %zu bytes (%.1f MiB), "
                       "%zu bytes (%.1f MiB) free of %zu; hint: lower --batch",
                       what, bytes, bytes / 1048576.0, fr, fr / 1048576.0, tot);
    return FF_FAIL(FF_ERR_CUDA, "cudaMalloc of %zu bytes for %s failed: %s (%s)", bytes, what, cudaGetErrorString(e),
                   cudaGetErrorName(e));
}

void ff_gpu_free(void *p) {
    if (p) cudaFree(p);
}

ff_status ff_gpu_alloc_host(void **p, size_t bytes, const char *what) {
    *p = NULL;
    cudaError_t e = cudaMallocHost(p, bytes ? bytes : 1);
    if (e == cudaSuccess) return FF_OK;
    cudaGetLastError();
    *p = NULL;
    return FF_FAIL(FF_ERR_OOM, "pinned host allocation of %zu bytes for %s failed: %s", bytes, what,
                   cudaGetErrorString(e));
}

void ff_gpu_free_host(void *p) {
    if (p) cudaFreeHost(p);
}

ff_status ff_gpu_host_register(void *p, size_t bytes) {
    cudaError_t e = cudaHostRegister(p, bytes, cudaHostRegisterDefault);
    if (e == cudaSuccess) return FF_OK;
    cudaGetLastError();
    return FF_FAIL(FF_ERR_CUDA, "cudaHostRegister of %zu bytes at %p failed: %s (%s)", bytes, p, cudaGetErrorString(e),
                   cudaGetErrorName(e));
}

void ff_gpu_host_unregister(void *p) {
    if (p && cudaHostUnregister(p) != cudaSuccess) cudaGetLastError();
}

ff_status ff_gpu_host_mapped(void **dev, void *p) {
    *dev = NULL;
    if (cudaHostGetDevicePointer(dev, p, 0) != cudaSuccess) {
        cudaGetLastError();  // not mapped (no unified addressing): the caller copies instead
        *dev = NULL;
    }
    return FF_OK;
}

ff_status ff_gpu_copy_h2d(void *dst, const void *src, size_t bytes, ff_gpu_stream s) {
    FF_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, ff_cu_stream(s)));
    return FF_OK;
}

ff_status ff_gpu_copy_d2h(void *dst, const void *src, size_t bytes, ff_gpu_stream s) {
    FF_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, ff_cu_stream(s)));
    return FF_OK;
}

ff_status ff_gpu_copy_d2d(void *dst, const void *src, size_t bytes, ff_gpu_stream s) {
    FF_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ff_cu_stream(s)));
    return FF_OK;
}

ff_status ff_gpu_copy_any(void *dst, const void *src, size_t bytes) {
    if (!bytes) return FF_OK;
    // cudaMemcpy may return before a device-to-device copy has finished (it only orders the copy on
    // the legacy default stream): synchronise that stream so the copy has landed for every kind.
    FF_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
    FF_CUDA_CHECK(cudaStreamSynchronize(0));
    return FF_OK;
}

ff_status ff_gpu_copy_2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                         ff_gpu_stream s) {
    if (!width || !height) return FF_OK;
    FF_CUDA_CHECK(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, cudaMemcpyDefault, ff_cu_stream(s)));
    return FF_OK;
}

ff_status ff_gpu_stream_create(ff_gpu_stream *s) {
    cudaStream_t cs;
    FF_CUDA_CHECK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
    *s = (ff_gpu_stream)cs;
    return FF_OK;
}

bool ff_gpu_urgent_streams(void) {
    const char *e = getenv("FF_URGENT_STREAMS");
    return !(e && strcmp(e, "0") == 0);
}

ff_status ff_gpu_stream_create_urgent(ff_gpu_stream *s) {
    if (!ff_gpu_urgent_streams()) return ff_gpu_stream_create(s);
    int least = 0, greatest = 0;  // CUDA's priorities: lower numbers are higher
    FF_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    cudaStream_t cs;
    FF_CUDA_CHECK(cudaStreamCreateWithPriority(&cs, cudaStreamNonBlocking, greatest));
    *s = (ff_gpu_stream)cs;
    return FF_OK;
}

void ff_gpu_stream_destroy(ff_gpu_stream s) {
    if (s) cudaStreamDestroy(ff_cu_stream(s));
}

ff_status ff_gpu_stream_sync(ff_gpu_stream s) {
    FF_CUDA_CHECK(cudaStreamSynchronize(ff_cu_stream(s)));
    return FF_OK;
}

ff_status ff_gpu_event_create(ff_gpu_event *ev) {
    cudaEvent_t e;
    FF_CUDA_CHECK(cudaEventCreate(&e));
    *ev = (ff_gpu_event)e;
    return FF_OK;
}

void ff_gpu_event_destroy(ff_gpu_event ev) {
    if (ev) cudaEventDestroy((cudaEvent_t)ev);
}

ff_status ff_gpu_event_record(ff_gpu_event ev, ff_gpu_stream s) {
    FF_CUDA_CHECK(cudaEventRecord((cudaEvent_t)ev, ff_cu_stream(s)));
    return FF_OK;
}

ff_status ff_gpu_event_sync(ff_gpu_event ev) {
    FF_CUDA_CHECK(cudaEventSynchronize((cudaEvent_t)ev));
    return FF_OK;
}

ff_status ff_gpu_stream_wait_event(ff_gpu_stream s, ff_gpu_event ev) {
    FF_CUDA_CHECK(cudaStreamWaitEvent(ff_cu_stream(s), (cudaEvent_t)ev, 0));
    return FF_OK;
}

ff_status ff_gpu_event_elapsed(double *seconds, ff_gpu_event start, ff_gpu_event stop) {
    float ms = 0;
    FF_CUDA_CHECK(cudaEventSynchronize((cudaEvent_t)stop));
    FF_CUDA_CHECK(cudaEventElapsedTime(&ms, (cudaEvent_t)start, (cudaEvent_t)stop));
    *seconds = ms * 1e-3;
    return FF_OK;
}

ff_status ff_gpu_capture_begin(ff_gpu_stream s) {
    FF_CUDA_CHECK(cudaStreamBeginCapture(ff_cu_stream(s), cudaStreamCaptureModeThreadLocal));
    return FF_OK;
}

ff_status ff_gpu_capture_end(ff_gpu_graph *g, ff_gpu_stream s) {
    *g = NULL;
    cudaGraph_t graph;
    FF_CUDA_CHECK(cudaStreamEndCapture(ff_cu_stream(s), &graph));
    cudaGraphExec_t exec;
    // Each node keeps the priority of the stream it was captured from (the trainer's side lane and
    // NCCL's kernels on it are urgent, gpu.h): launched into one stream, a graph would otherwise
    // run every node at that stream's priority.
    cudaError_t e = cudaGraphInstantiate(&exec, graph, cudaGraphInstantiateFlagUseNodePriority);
    cudaGraphDestroy(graph);
    FF_CUDA_CHECK(e);
    *g = (ff_gpu_graph)exec;
    return FF_OK;
}

ff_status ff_gpu_graph_launch(ff_gpu_graph g, ff_gpu_stream s) {
    FF_CUDA_CHECK(cudaGraphLaunch((cudaGraphExec_t)g, ff_cu_stream(s)));
    return FF_OK;
}

void ff_gpu_graph_destroy(ff_gpu_graph g) {
    if (g) cudaGraphExecDestroy((cudaGraphExec_t)g);
}

#define FF_CUBLAS_CHECK(call)                                                                                         \
    do {                                                                                                              \
        cublasStatus_t ff_cb_s_ = (call);                                                                             \
        if (ff_cb_s_ != CUBLAS_STATUS_SUCCESS)                                                                        \
            return ff_fail(FF_ERR_CUDA, __FILE__, __LINE__, "%s failed: cuBLAS status %d (%s)", #call, (int)ff_cb_s_, \
                           cublasGetStatusString(ff_cb_s_));                                                          \
    } while (0)

ff_status ff_gpu_blas_create(ff_gpu_blas *h, ff_gpu_stream s, bool tf32) {
    *h = NULL;
    cublasHandle_t b;
    FF_CUBLAS_CHECK(cublasCreate(&b));
    cublasStatus_t st = cublasSetStream(b, ff_cu_stream(s));
    if (st == CUBLAS_STATUS_SUCCESS) st = cublasSetMathMode(b, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
    if (st != CUBLAS_STATUS_SUCCESS) {
        cublasDestroy(b);
        FF_CUBLAS_CHECK(st);
    }
    *h = (ff_gpu_blas)b;
    return FF_OK;
}

void ff_gpu_blas_destroy(ff_gpu_blas h) {
    if (h) cublasDestroy((cublasHandle_t)h);
}
