// Private to the device implementations (device.c, cpu/device_cpu.c, cuda/device_cuda.c): every
// ff_device starts with this header; the public functions in device.c check arguments and
// dispatch through its ops table. An op a device does not offer is NULL (device.c answers
// FF_ERR_INPUT "not supported on the <kind> device").
#pragma once
#include "fivefold/device.h"

typedef struct {
    void (*destroy)(ff_device *d);
    ff_status (*alloc)(ff_device *d, float **p, size_t floats, const char *what);
    void (*free)(ff_device *d, float *p);
    ff_status (*upload)(ff_device *d, float *dst, const float *src_host, size_t floats);
    ff_status (*download)(ff_device *d, float *dst_host, const float *src, size_t floats);
    ff_status (*copy_rows)(ff_device *d, float *dst, int64_t dst_lo, int64_t dst_rows, const float *src, int64_t src_lo,
                           int64_t src_rows, int64_t n, int64_t C, int64_t W, int64_t lo, int64_t hi);
    ff_status (*copy_bytes)(ff_device *d, void *dst, const void *src, size_t bytes);
    ff_status (*sync)(ff_device *d);
    ff_status (*run)(ff_device *d, const float **out, const float *in, int64_t n, int first, int last, int fault_layer,
                     ff_trace *trace);
    ff_status (*run_bands)(ff_device *d, const ff_band_job *jobs, int n_jobs, int layer);
    ff_status (*run_features)(ff_device *d, float *out, const float *in, int layer, int64_t f_lo, int64_t f_hi,
                              int64_t n);
    ff_status (*fault)(ff_device *d, float *x);
    ff_status (*time_resident)(ff_device *d, int64_t n, int iters, double *ms_out);
    ff_status (*resident_output)(ff_device *d, float *out_host, int64_t n);
    ff_status (*pin_host)(ff_device *d, void *p, size_t bytes);
    void (*unpin_host)(ff_device *d, void *p);
    ff_status (*host_mapped)(ff_device *d, void **dev, void *p);  // NULL: no kernel reaches host memory
    ff_status (*fence)(ff_device *d, int k);                      // NULL: a synchronous device (nothing to wait for)
    ff_status (*wait_fence)(ff_device *d, int k);                 // NULL likewise
    ff_status (*side_lane)(ff_device *d, bool side);              // NULL likewise
    ff_status (*lane_wait_fence)(ff_device *d, int k);            // NULL likewise
    ff_status (*join_side)(ff_device *d);                         // NULL likewise
    struct ff_gpu_stream_s *(*gpu_stream)(ff_device *d);          // NULL: not a GPU
    // training (device.h): NULL where a device does not train
    float *(*params)(ff_device *d);
    ff_status (*adopt_params)(ff_device *d, float *buf);  // NULL: the device keeps its own memory
    ff_status (*alloc_bytes)(ff_device *d, void **p, size_t bytes, const char *what);
    ff_status (*upload_bytes)(ff_device *d, void *dst, const void *src_host, size_t bytes);
    ff_status (*gather)(ff_device *d, float *x, int32_t *labels, const float *images, const int32_t *all_labels,
                        const int64_t *idx, int64_t per, int64_t n);
    ff_status (*train_forward)(ff_device *d, float *const *act, int first, int last, int64_t n, int64_t group);
    ff_status (*softmax_xent)(ff_device *d, float *dz, float *loss, const float *z, const int32_t *labels, float scale,
                              int64_t classes, int64_t n);
    ff_status (*train_backward)(ff_device *d, float *grads, int64_t grad_stride, float *dz, const float *const *act,
                                int last, int64_t n, int64_t group);
    // NULL: device.c runs train_backward, then tree_reduce over the rows
    ff_status (*train_backward_reduced)(ff_device *d, float *grad, float *grads, int64_t grad_stride, float *dz,
                                        const float *const *act, int last, int64_t n, int64_t group, int64_t count);
    // NULL (both): the device backs up in one pass only
    ff_status (*train_backward_data)(ff_device *d, float *dz, const float *const *act, int last, int64_t n,
                                     int64_t group);
    ff_status (*train_backward_params)(ff_device *d, float *grads, int64_t grad_stride, const float *const *act, int hi,
                                       int lo, int64_t n, int64_t group);
    ff_status (*tree_reduce)(ff_device *d, float *out, float *rows, int64_t nrows, int64_t stride, int64_t len);
    ff_status (*synth)(ff_device *d, float *x, const ff_synth *s, int64_t first, int64_t n);
    size_t (*train_work_bytes)(const ff_device *d, int last, int64_t n, bool two_pass);  // NULL: none
    ff_status (*sgd)(ff_device *d, float *w, float *mom, const float *g, int64_t count, float lr, float momentum,
                     float weight_decay, bool first);
    ff_status (*tree_sgd)(ff_device *d, float *w_out, const float *w, float *mom, const ff_tree_rows *rows,
                          int64_t count, float lr, float momentum, float weight_decay, bool first);
    // captured work (device.h): NULL where a device cannot capture
    ff_status (*capture_begin)(ff_device *d);
    ff_status (*capture_end)(ff_device *d, ff_device_graph **out);
    ff_status (*graph_launch)(ff_device *d, ff_device_graph *g);
    void (*graph_destroy)(ff_device *d, ff_device_graph *g);
} ff_device_ops;

struct ff_device {
    const ff_device_ops *ops;
    ff_device_kind kind;
    bool train_only;   // ff_device_options.train_only: no run buffers
    bool host_memory;  // device memory is host memory (cpu)
    const ff_model *model;
    ff_plan plan;  // a copy: the device's algorithm choices
    int64_t max_batch;
};

// The implementations' constructors (device.c picks one by plan->device).
ff_status ff_device_cpu_create(ff_device **out, const ff_model *m, const ff_weights *w, const ff_plan *p,
                               const ff_device_options *o);
ff_status ff_device_cuda_create(ff_device **out, const ff_model *m, const ff_weights *w, const ff_plan *p,
                                const ff_device_options *o);
