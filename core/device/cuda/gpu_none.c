// The GPU entry points of gpu.h for a build without a CUDA toolkit (CMake links this file instead
// of the .cu sources). Every call that would touch a GPU returns FF_ERR_NO_CUDA with the same
// message, so `fivefold --mode cuda` says what to do and exits 77 (CTest's skip code).
#include "fivefold/gpu.h"

#define FF_NO_CUDA_MSG                                                                         \
    "fivefold was built without CUDA (no nvcc found at configure time); rebuild on a machine " \
    "with the CUDA toolkit"
#define FF_NO_CUDA() FF_FAIL(FF_ERR_NO_CUDA, FF_NO_CUDA_MSG)

ff_status ff_gpu_device_count(int *count) {
    *count = 0;
    return FF_NO_CUDA();
}
ff_status ff_gpu_select(int device) {
    (void)device;
    return FF_NO_CUDA();
}
ff_status ff_gpu_device_info(int device, char *name, size_t name_cap, int *sms, int *cc_major, int *cc_minor,
                             size_t *total_bytes) {
    (void)device, (void)sms, (void)cc_major, (void)cc_minor, (void)total_bytes;
    if (name && name_cap) name[0] = 0;
    return FF_NO_CUDA();
}
ff_status ff_gpu_pci_bus_id(int device, char *buf, size_t cap) {
    (void)device;
    if (cap) buf[0] = 0;
    return FF_NO_CUDA();
}

ff_status ff_gpu_mem_info(size_t *free_bytes, size_t *total_bytes) {
    *free_bytes = *total_bytes = 0;
    return FF_NO_CUDA();
}
ff_status ff_gpu_versions(int *runtime, int *driver) {
    *runtime = *driver = 0;
    return FF_NO_CUDA();
}
ff_status ff_gpu_alloc(void **p, size_t bytes, const char *what) {
    (void)bytes, (void)what;
    *p = NULL;
    return FF_NO_CUDA();
}
void ff_gpu_free(void *p) {
    (void)p;
}
ff_status ff_gpu_alloc_host(void **p, size_t bytes, const char *what) {
    (void)bytes, (void)what;
    *p = NULL;
    return FF_NO_CUDA();
}
void ff_gpu_free_host(void *p) {
    (void)p;
}
ff_status ff_gpu_copy_h2d(void *dst, const void *src, size_t bytes, ff_gpu_stream s) {
    (void)dst, (void)src, (void)bytes, (void)s;
    return FF_NO_CUDA();
}
ff_status ff_gpu_copy_d2h(void *dst, const void *src, size_t bytes, ff_gpu_stream s) {
    (void)dst, (void)src, (void)bytes, (void)s;
    return FF_NO_CUDA();
}
ff_status ff_gpu_copy_d2d(void *dst, const void *src, size_t bytes, ff_gpu_stream s) {
    (void)dst, (void)src, (void)bytes, (void)s;
    return FF_NO_CUDA();
}
ff_status ff_gpu_copy_any(void *dst, const void *src, size_t bytes) {
    (void)dst, (void)src, (void)bytes;
    return FF_NO_CUDA();
}
ff_status ff_gpu_copy_2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                         ff_gpu_stream s) {
    (void)dst, (void)dpitch, (void)src, (void)spitch, (void)width, (void)height, (void)s;
    return FF_NO_CUDA();
}
ff_status ff_gpu_fill(float *dst, float value, size_t count, ff_gpu_stream s) {
    (void)dst, (void)value, (void)count, (void)s;
    return FF_NO_CUDA();
}
ff_status ff_gpu_stream_create(ff_gpu_stream *s) {
    *s = NULL;
    return FF_NO_CUDA();
}
ff_status ff_gpu_stream_create_urgent(ff_gpu_stream *s) {
    *s = NULL;
    return FF_NO_CUDA();
}
bool ff_gpu_urgent_streams(void) {
    return false;
}
void ff_gpu_stream_destroy(ff_gpu_stream s) {
    (void)s;
}
ff_status ff_gpu_stream_sync(ff_gpu_stream s) {
    (void)s;
    return FF_NO_CUDA();
}
ff_status ff_gpu_event_create(ff_gpu_event *ev) {
    *ev = NULL;
    return FF_NO_CUDA();
}
void ff_gpu_event_destroy(ff_gpu_event ev) {
    (void)ev;
}
ff_status ff_gpu_event_record(ff_gpu_event ev, ff_gpu_stream s) {
    (void)ev, (void)s;
    return FF_NO_CUDA();
}
ff_status ff_gpu_event_sync(ff_gpu_event ev) {
    (void)ev;
    return FF_NO_CUDA();
}
ff_status ff_gpu_stream_wait_event(ff_gpu_stream s, ff_gpu_event ev) {
    (void)s, (void)ev;
    return FF_NO_CUDA();
}
ff_status ff_gpu_event_elapsed(double *seconds, ff_gpu_event start, ff_gpu_event stop) {
    (void)start, (void)stop;
    *seconds = 0;
    return FF_NO_CUDA();
}
ff_status ff_gpu_capture_begin(ff_gpu_stream s) {
    (void)s;
    return FF_NO_CUDA();
}
ff_status ff_gpu_capture_end(ff_gpu_graph *g, ff_gpu_stream s) {
    (void)s;
    *g = NULL;
    return FF_NO_CUDA();
}
ff_status ff_gpu_graph_launch(ff_gpu_graph g, ff_gpu_stream s) {
    (void)g, (void)s;
    return FF_NO_CUDA();
}
void ff_gpu_graph_destroy(ff_gpu_graph g) {
    (void)g;
}
ff_status ff_gpu_blas_create(ff_gpu_blas *h, ff_gpu_stream s, bool tf32) {
    (void)s, (void)tf32;
    *h = NULL;
    return FF_NO_CUDA();
}
void ff_gpu_blas_destroy(ff_gpu_blas h) {
    (void)h;
}

ff_status ff_gpu_conv2d(float *out, const float *in, const float *w, const float *b, const ff_layer *L, bool relu,
                        const ff_rows *rows, int64_t n, ff_gpu_stream s) {
    (void)out, (void)in, (void)w, (void)b, (void)L, (void)relu, (void)rows, (void)n, (void)s;
    return FF_NO_CUDA();
}
ff_status ff_gpu_conv2d_winograd(float *out, const float *in, const float *u, const float *b, const ff_layer *L, int m,
                                 bool relu, const ff_rows *rows, int64_t n, float *work, ff_gpu_stream s) {
    (void)out, (void)in, (void)u, (void)b, (void)L, (void)m, (void)relu, (void)rows, (void)n, (void)work, (void)s;
    return FF_NO_CUDA();
}
ff_status ff_gpu_relu(float *out, const float *in, int64_t count, ff_gpu_stream s) {
    (void)out, (void)in, (void)count, (void)s;
    return FF_NO_CUDA();
}
ff_status ff_gpu_maxpool(float *out, const float *in, const ff_layer *L, const ff_rows *rows, int64_t n,
                         ff_gpu_stream s) {
    (void)out, (void)in, (void)L, (void)rows, (void)n, (void)s;
    return FF_NO_CUDA();
}
ff_status ff_gpu_lrn(float *out, const float *in, const ff_layer *L, int64_t rows, int64_t n, ff_gpu_stream s) {
    (void)out, (void)in, (void)L, (void)rows, (void)n, (void)s;
    return FF_NO_CUDA();
}
ff_status ff_gpu_linear(float *out, const float *in, const float *w, const float *b, const ff_layer *L, bool relu,
                        int64_t n, float *work, ff_gpu_stream s) {
    (void)out, (void)in, (void)w, (void)b, (void)L, (void)relu, (void)n, (void)work, (void)s;
    return FF_NO_CUDA();
}
ff_status ff_gpu_linear_vendor_backward(float *gw, float *gb, int64_t grad_stride, float *dx, const float *dy,
                                        const float *x, const float *w, const ff_layer *L, int64_t n, int64_t group,
                                        const float *ones, ff_gpu_blas h, ff_gpu_stream s) {
    (void)gw, (void)gb, (void)grad_stride, (void)dx, (void)dy, (void)x, (void)w, (void)L, (void)n, (void)group;
    (void)ones, (void)h, (void)s;
    return FF_NO_CUDA();
}
ff_status ff_gpu_linear_vendor(float *out, const float *in, const float *w, const float *b, const ff_layer *L,
                               bool relu, int64_t n, ff_gpu_blas h, ff_gpu_stream s) {
    (void)out, (void)in, (void)w, (void)b, (void)L, (void)relu, (void)n, (void)h, (void)s;
    return FF_NO_CUDA();
}
ff_status ff_gpu_softmax(float *out, const float *in, int64_t classes, int64_t n, ff_gpu_stream s) {
    (void)out, (void)in, (void)classes, (void)n, (void)s;
    return FF_NO_CUDA();
}
ff_status ff_gpu_fault(float *x, ff_gpu_stream s) {
    (void)x, (void)s;
    return FF_NO_CUDA();
}
ff_status ff_gpu_layer_forward(float *out, const float *in, const float *w, const float *b, const ff_layer *L,
                               bool relu, const ff_rows *rows, int64_t n, float *work, ff_gpu_stream s) {
    (void)out, (void)in, (void)w, (void)b, (void)L, (void)relu, (void)rows, (void)n, (void)work, (void)s;
    return FF_NO_CUDA();
}
void ff_gpu_debug_force_tile(int tile) {
    (void)tile;
}
void ff_gpu_debug_force_wgrad_tiled(bool on) {
    (void)on;
}
void ff_gpu_debug_force_maxpool_general(bool on) {
    (void)on;
}
void ff_gpu_debug_force_maxpool1(bool on) {
    (void)on;
}
void ff_gpu_set_conv_math(bool tf32x3) {
    (void)tf32x3;
}
bool ff_gpu_conv_math_tf32x3(void) {
    return false;
}
void ff_gpu_set_short_conv(bool on) {
    (void)on;
}
void ff_gpu_set_wgrad_lanes(bool on) {
    (void)on;
}
void ff_gpu_debug_force_wgrad_x3(int config) {
    (void)config;
}
int ff_gpu_debug_wgrad_x3_count(void) {
    return 0;
}
int ff_gpu_debug_last_wgrad_x3(void) {
    return -1;
}
void ff_gpu_set_wgrad_beside(bool beside) {
    (void)beside;
}
void ff_gpu_set_tuning(bool on) {
    (void)on;
}
int ff_gpu_debug_tile_count(void) {
    return 0;
}
int ff_gpu_debug_x3_tile_count(void) {
    return 0;
}
int ff_gpu_debug_x3_presplit_first(void) {
    return -1;
}
int ff_gpu_debug_lin_tile_first(void) {
    return -1;
}
void ff_gpu_debug_split_scratch_off(bool off) {
    (void)off;
}
long long ff_gpu_debug_presplit_fallbacks(void) {
    return 0;
}
int ff_gpu_debug_last_tile(void) {
    return -1;
}
ff_status ff_gpu_host_register(void *p, size_t bytes) {
    (void)p, (void)bytes;
    return FF_NO_CUDA();
}
void ff_gpu_host_unregister(void *p) {
    (void)p;
}
ff_status ff_gpu_host_mapped(void **dev, void *p) {
    (void)p;
    *dev = NULL;
    return FF_NO_CUDA();
}

// ---- training
ff_status ff_gpu_conv2d_backward_weights(float *dw, float *db, int64_t grad_stride, const float *dy, const float *x,
                                         const ff_layer *L, int64_t n, int64_t group, float *work, ff_gpu_stream s) {
    (void)dw, (void)db, (void)grad_stride, (void)dy, (void)x, (void)L, (void)n, (void)group, (void)work, (void)s;
    return FF_NO_CUDA();
}
ff_status ff_gpu_conv2d_backward_data(float *dx, const float *dy, const float *w, const ff_layer *L, int64_t n,
                                      float *work, ff_gpu_stream s) {
    (void)dx, (void)dy, (void)w, (void)L, (void)n, (void)work, (void)s;
    return FF_NO_CUDA();
}
ff_status ff_gpu_linear_backward_weights(float *dw, float *db, int64_t grad_stride, const float *dy, const float *x,
                                         const ff_layer *L, int64_t n, int64_t group, ff_gpu_stream s) {
    (void)dw, (void)db, (void)grad_stride, (void)dy, (void)x, (void)L, (void)n, (void)group, (void)s;
    return FF_NO_CUDA();
}
ff_status ff_gpu_linear_backward_weights_tree(float *dw, float *db, int64_t grad_stride, const float *dy,
                                              const float *x, const ff_layer *L, int64_t n, int64_t group,
                                              ff_gpu_stream s) {
    (void)dw, (void)db, (void)grad_stride, (void)dy, (void)x, (void)L, (void)n, (void)group, (void)s;
    return FF_NO_CUDA();
}
ff_status ff_gpu_linear_backward_data(float *dx, const float *dy, const float *w, const ff_layer *L, int64_t n,
                                      float *work, ff_gpu_stream s) {
    (void)dx, (void)dy, (void)w, (void)L, (void)n, (void)work, (void)s;
    return FF_NO_CUDA();
}
ff_status ff_gpu_backward_data_weights(float *wd, const float *w, const ff_layer *L, ff_gpu_stream s) {
    (void)wd, (void)w, (void)L, (void)s;
    return FF_NO_CUDA();
}
ff_status ff_gpu_backward_data_from(float *dx, const float *dy, const float *wd, const ff_layer *L, int64_t n,
                                    float *split, ff_gpu_stream s) {
    (void)dx, (void)dy, (void)wd, (void)L, (void)n, (void)split, (void)s;
    return FF_NO_CUDA();
}
ff_status ff_gpu_stream_capturing(ff_gpu_stream s, bool *capturing) {
    (void)s;
    *capturing = false;
    return FF_NO_CUDA();
}
ff_status ff_gpu_relu_backward(float *dx, const float *dy, const float *y, int64_t count, ff_gpu_stream s) {
    (void)dx, (void)dy, (void)y, (void)count, (void)s;
    return FF_NO_CUDA();
}
ff_status ff_gpu_maxpool_backward(float *dx, const float *dy, const float *x, const ff_layer *L, int64_t n, bool relu,
                                  ff_gpu_stream s) {
    (void)dx, (void)dy, (void)x, (void)L, (void)n, (void)relu, (void)s;
    return FF_NO_CUDA();
}
ff_status ff_gpu_pool_sparse_gradient(float *gq, const float *dy, const float *y, const ff_layer *conv,
                                      const ff_layer *pool, int64_t n, ff_gpu_stream s) {
    (void)gq, (void)dy, (void)y, (void)conv, (void)pool, (void)n, (void)s;
    return FF_NO_CUDA();
}
ff_status ff_gpu_pool_sparse_picks(float *gq, const float *y, const ff_layer *conv, const ff_layer *pool, int64_t n,
                                   ff_gpu_stream s) {
    (void)gq, (void)y, (void)conv, (void)pool, (void)n, (void)s;
    return FF_NO_CUDA();
}
ff_status ff_gpu_pool_sparse_gate(float *gq, const float *dy, const float *pooled, const ff_layer *conv,
                                  const ff_layer *pool, int64_t n, ff_gpu_stream s) {
    (void)gq, (void)dy, (void)pooled, (void)conv, (void)pool, (void)n, (void)s;
    return FF_NO_CUDA();
}
ff_status ff_gpu_pool_sparse_backward_data(float *dx, const float *gq, const float *w, const float *gate,
                                           const ff_layer *conv, const ff_layer *pool, int64_t n, ff_gpu_stream s) {
    (void)dx, (void)gq, (void)w, (void)gate, (void)conv, (void)pool, (void)n, (void)s;
    return FF_NO_CUDA();
}
ff_status ff_gpu_pool_sparse_backward_weights(float *dw, float *db, int64_t grad_stride, const float *dy,
                                              bool dy_sparse, const float *x, const ff_layer *conv,
                                              const ff_layer *pool, int64_t n, int64_t group, float *work,
                                              ff_gpu_stream s) {
    (void)dw, (void)db, (void)grad_stride, (void)dy, (void)dy_sparse, (void)x, (void)conv, (void)pool, (void)n,
        (void)group, (void)work, (void)s;
    return FF_NO_CUDA();
}
bool ff_gpu_pool_sparse_on(void) {
    return false;
}
void ff_gpu_debug_force_pool_dense(bool on) {
    (void)on;
}
void ff_gpu_debug_force_pool_sparse_kpw(int kpw) {
    (void)kpw;
}
void ff_gpu_debug_force_pool_sparse_gradient1(bool on) {
    (void)on;
}
void ff_gpu_debug_force_pool_sparse_dgrad_switch(bool on) {
    (void)on;
}
ff_status ff_gpu_softmax_xent(float *dz, float *loss, const float *z, const int32_t *labels, float scale,
                              int64_t classes, int64_t n, ff_gpu_stream s) {
    (void)dz, (void)loss, (void)z, (void)labels, (void)scale, (void)classes, (void)n, (void)s;
    return FF_NO_CUDA();
}
ff_status ff_gpu_tree_reduce(float *out, float *rows, int64_t nrows, int64_t stride, int64_t len, ff_gpu_stream s) {
    (void)out, (void)rows, (void)nrows, (void)stride, (void)len, (void)s;
    return FF_NO_CUDA();
}
ff_status ff_gpu_sgd(float *w, float *mom, const float *g, int64_t count, float lr, float momentum, float weight_decay,
                     bool first, ff_gpu_stream s) {
    (void)w, (void)mom, (void)g, (void)count, (void)lr, (void)momentum, (void)weight_decay, (void)first, (void)s;
    return FF_NO_CUDA();
}
ff_status ff_gpu_tree_sgd(float *w_out, const float *w, float *mom, const ff_tree_rows *rows, int64_t count, float lr,
                          float momentum, float weight_decay, bool first, ff_gpu_stream s) {
    (void)w_out, (void)w, (void)mom, (void)rows, (void)count, (void)lr, (void)momentum, (void)weight_decay, (void)first,
        (void)s;
    return FF_NO_CUDA();
}
ff_status ff_gpu_synth(float *x, const ff_synth *sy, int64_t first, int64_t n, ff_gpu_stream s) {
    (void)x, (void)sy, (void)first, (void)n, (void)s;
    return FF_NO_CUDA();
}
ff_status ff_gpu_gather(float *x, int32_t *labels, const float *images, const int32_t *all_labels, const int64_t *idx,
                        int64_t per, int64_t n, ff_gpu_stream s) {
    (void)x, (void)labels, (void)images, (void)all_labels, (void)idx, (void)per, (void)n, (void)s;
    return FF_NO_CUDA();
}
