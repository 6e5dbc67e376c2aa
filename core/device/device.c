// The device interface (device.h): argument checks, then dispatch to the implementation.
#include <string.h>

#include "device_internal.h"
#include "fivefold/gpu.h"

ff_status ff_device_create(ff_device **out, const ff_model *m, const ff_weights *w, const ff_plan *p,
                           const ff_device_options *o) {
    *out = NULL;
    if (o->max_batch < 1)
        return FF_FAIL(FF_ERR_INPUT, "device: max batch %lld: expected at least 1", (long long)o->max_batch);
    if (p->n_layers != m->n_layers)
        return FF_FAIL(FF_ERR_INPUT, "device: the plan has %d layers, model %s %d", p->n_layers, m->name, m->n_layers);
    if (!w || (w->n_total > 0 && !w->data) || w->n_total != m->n_weights_total)
        return FF_FAIL(FF_ERR_INPUT, "device: weights hold %lld floats; model %s needs %lld",
                       w ? (long long)w->n_total : 0LL, m->name, (long long)m->n_weights_total);
    for (int i = 0; i < m->n_layers; i++)  // buffers are sized by max_act: a model must say it
        if (ff_shape_numel(m->layers[i].in) > m->max_act || ff_shape_numel(m->layers[i].out) > m->max_act)
            return FF_FAIL(FF_ERR_INPUT, "device: model %s: layer %s has more elements than max_act %lld", m->name,
                           m->layers[i].name, (long long)m->max_act);
    ff_status st =
        p->device == FF_DEVICE_CUDA ? ff_device_cuda_create(out, m, w, p, o) : ff_device_cpu_create(out, m, w, p, o);
    if (st != FF_OK) return st;
    (*out)->kind = p->device;
    (*out)->model = m;
    (*out)->plan = *p;
    (*out)->max_batch = o->max_batch;
    (*out)->train_only = o->train_only;
    return FF_OK;
}

void ff_device_destroy(ff_device *d) {
    if (d) d->ops->destroy(d);
}

ff_device_kind ff_device_kind_of(const ff_device *d) {
    return d->kind;
}
const ff_plan *ff_device_plan(const ff_device *d) {
    return &d->plan;
}
bool ff_device_is_host(const ff_device *d) {
    return d->host_memory;
}

static ff_status unsupported(const ff_device *d, const char *what) {
    return FF_FAIL(FF_ERR_INPUT, "%s is not supported on the %s device", what, ff_device_kind_name(d->kind));
}

ff_status ff_device_alloc(ff_device *d, float **p, size_t floats, const char *what) {
    *p = NULL;
    return d->ops->alloc(d, p, floats, what);
}
void ff_device_free(ff_device *d, float *p) {
    if (p) d->ops->free(d, p);
}
ff_status ff_device_upload(ff_device *d, float *dst, const float *src_host, size_t floats) {
    if (!floats) return FF_OK;
    return d->ops->upload(d, dst, src_host, floats);
}
ff_status ff_device_download(ff_device *d, float *dst_host, const float *src, size_t floats) {
    if (!floats) return FF_OK;
    return d->ops->download(d, dst_host, src, floats);
}
ff_status ff_device_copy_rows(ff_device *d, float *dst, int64_t dst_lo, int64_t dst_rows, const float *src,
                              int64_t src_lo, int64_t src_rows, int64_t n, int64_t C, int64_t W, int64_t lo,
                              int64_t hi) {
    if (hi <= lo || n <= 0 || C <= 0 || W <= 0) return FF_OK;
    if (lo < dst_lo || hi > dst_lo + dst_rows || lo < src_lo || hi > src_lo + src_rows)
        return FF_FAIL(FF_ERR_INTERNAL, "copy rows [%lld, %lld): source holds [%lld, %lld), destination [%lld, %lld)",
                       (long long)lo, (long long)hi, (long long)src_lo, (long long)(src_lo + src_rows),
                       (long long)dst_lo, (long long)(dst_lo + dst_rows));
    return d->ops->copy_rows(d, dst, dst_lo, dst_rows, src, src_lo, src_rows, n, C, W, lo, hi);
}
ff_status ff_device_copy_bytes(ff_device *d, void *dst, const void *src, size_t bytes) {
    if (!bytes || dst == src) return FF_OK;
    return d->ops->copy_bytes(d, dst, src, bytes);
}
ff_status ff_device_sync(ff_device *d) {
    return d->ops->sync(d);
}
ff_status ff_device_fence(ff_device *d) {
    return ff_device_fence_at(d, 0);
}
ff_status ff_device_wait_fence(ff_device *d) {
    return ff_device_wait_fence_at(d, 0);
}
static ff_status check_fence(int k) {
    if (k < 0 || k >= FF_DEVICE_FENCES)
        return FF_FAIL(FF_ERR_INPUT, "fence %d: expected 0..%d", k, FF_DEVICE_FENCES - 1);
    return FF_OK;
}
ff_status ff_device_fence_at(ff_device *d, int k) {
    FF_TRY(check_fence(k));
    return d->ops->fence ? d->ops->fence(d, k) : FF_OK;
}
ff_status ff_device_wait_fence_at(ff_device *d, int k) {
    FF_TRY(check_fence(k));
    return d->ops->wait_fence ? d->ops->wait_fence(d, k) : FF_OK;
}
ff_status ff_device_side_lane(ff_device *d, bool side) {
    return d->ops->side_lane ? d->ops->side_lane(d, side) : FF_OK;
}
ff_status ff_device_lane_wait_fence_at(ff_device *d, int k) {
    FF_TRY(check_fence(k));
    return d->ops->lane_wait_fence ? d->ops->lane_wait_fence(d, k) : FF_OK;
}
ff_status ff_device_join_side(ff_device *d) {
    return d->ops->join_side ? d->ops->join_side(d) : FF_OK;
}
struct ff_gpu_stream_s *ff_device_gpu_stream(ff_device *d) {
    return d->ops->gpu_stream ? d->ops->gpu_stream(d) : NULL;
}
bool ff_device_is_async(const ff_device *d) {
    return d->ops->fence != NULL;
}

ff_status ff_device_run(ff_device *d, const float **out, const float *in, int64_t n, int first, int last,
                        int fault_layer, ff_trace *trace) {
    if (first < 0 || last >= d->model->n_layers || first > last)
        return FF_FAIL(FF_ERR_INPUT, "layer range [%d, %d]: expected 0 <= first <= last < %d", first, last,
                       d->model->n_layers);
    if (d->train_only) return FF_FAIL(FF_ERR_INTERNAL, "device run: this device was made for training ops only");
    if (n < 1 || n > d->max_batch)
        return FF_FAIL(FF_ERR_INPUT, "device run: batch %lld: expected 1..%lld", (long long)n, (long long)d->max_batch);
    return d->ops->run(d, out, in, n, first, last, fault_layer, trace);
}

ff_status ff_device_run_bands(ff_device *d, const ff_band_job *jobs, int n_jobs, int layer) {
    if (d->train_only) return FF_FAIL(FF_ERR_INTERNAL, "this device was made for training ops only");
    if (layer < 0 || layer >= d->model->n_layers)
        return FF_FAIL(FF_ERR_INPUT, "run bands: layer %d: expected 0..%d", layer, d->model->n_layers - 1);
    const ff_layer *L = &d->model->layers[layer];
    for (int q = 0; q < n_jobs; q++) {
        const ff_rows *r = &jobs[q].rows;
        if (jobs[q].n > d->max_batch)
            return FF_FAIL(FF_ERR_INPUT, "run bands: %s: batch %lld: expected <= %lld", L->name, (long long)jobs[q].n,
                           (long long)d->max_batch);
        if (d->plan.layer[layer].band != FF_BAND_ROWS &&
            (r->in_lo != 0 || r->in_hi != L->in.h || r->out_lo != 0 || r->out_hi != L->out.h))
            return FF_FAIL(FF_ERR_INPUT, "run bands: %s is planned as a whole layer (%s): band [%lld, %lld) refused",
                           L->name, d->plan.layer[layer].name, (long long)r->out_lo, (long long)r->out_hi);
    }
    return d->ops->run_bands(d, jobs, n_jobs, layer);
}

ff_status ff_device_run_features(ff_device *d, float *out, const float *in, int layer, int64_t f_lo, int64_t f_hi,
                                 int64_t n) {
    if (d->train_only) return FF_FAIL(FF_ERR_INTERNAL, "this device was made for training ops only");
    const ff_layer *L = &d->model->layers[layer];
    if (L->op != FF_OP_LINEAR || f_lo < 0 || f_hi > L->out.c || f_lo > f_hi)
        return FF_FAIL(FF_ERR_INPUT, "run features: %s [%lld, %lld): expected a linear layer and 0 <= lo <= hi <= %lld",
                       L->name, (long long)f_lo, (long long)f_hi, (long long)L->out.c);
    if (f_hi == f_lo || n == 0) return FF_OK;
    return d->ops->run_features(d, out, in, layer, f_lo, f_hi, n);
}

ff_status ff_device_fault(ff_device *d, float *x) {
    return d->ops->fault(d, x);
}

ff_status ff_device_time_resident(ff_device *d, int64_t n, int iters, double *ms_out) {
    if (d->train_only) return FF_FAIL(FF_ERR_INTERNAL, "this device was made for training ops only");
    if (!d->ops->time_resident) return unsupported(d, "device-resident timing");
    if (n < 1 || n > d->max_batch || iters < 1)
        return FF_FAIL(FF_ERR_INPUT, "resident timing: batch %lld (1..%lld), iters %d (>= 1)", (long long)n,
                       (long long)d->max_batch, iters);
    return d->ops->time_resident(d, n, iters, ms_out);
}
ff_status ff_device_resident_output(ff_device *d, float *out_host, int64_t n) {
    if (!d->ops->resident_output) return unsupported(d, "device-resident timing");
    return d->ops->resident_output(d, out_host, n);
}
ff_status ff_device_pin_host(ff_device *d, void *p, size_t bytes) {
    return d->ops->pin_host && p && bytes ? d->ops->pin_host(d, p, bytes) : FF_OK;
}
void ff_device_unpin_host(ff_device *d, void *p) {
    if (d->ops->unpin_host && p) d->ops->unpin_host(d, p);
}
ff_status ff_device_host_mapped(ff_device *d, void **dev, void *p) {
    *dev = NULL;
    return d->ops->host_mapped && p ? d->ops->host_mapped(d, dev, p) : FF_OK;
}

// ---------------------------------------------------------------- training
// Argument checks shared by every device; the ops assume them.

float *ff_device_params(ff_device *d) {
    return d->ops->params ? d->ops->params(d) : NULL;
}

ff_status ff_device_adopt_params(ff_device *d, float *buf) {
    if (!buf) return FF_FAIL(FF_ERR_INPUT, "adopting weights: no buffer given");
    if (!d->ops->adopt_params)
        return FF_FAIL(FF_ERR_INPUT, "the %s device keeps its weights in its own memory (adopting them is for GPUs)",
                       ff_device_kind_name(d->kind));
    return d->ops->adopt_params(d, buf);
}
ff_status ff_device_alloc_bytes(ff_device *d, void **p, size_t bytes, const char *what) {
    *p = NULL;
    if (!d->ops->alloc_bytes) return unsupported(d, "byte allocation");
    return d->ops->alloc_bytes(d, p, bytes, what);
}
ff_status ff_device_upload_bytes(ff_device *d, void *dst, const void *src_host, size_t bytes) {
    if (!bytes) return FF_OK;
    if (!d->ops->upload_bytes) return unsupported(d, "byte upload");
    return d->ops->upload_bytes(d, dst, src_host, bytes);
}
ff_status ff_device_synth(ff_device *d, float *x, const ff_synth *s, int64_t first, int64_t n) {
    if (!d->ops->synth) return unsupported(d, "synthetic data");
    if (first < 0 || n < 0 || s->dim < 1)
        return FF_FAIL(FF_ERR_INPUT, "synthetic data: samples [%lld, +%lld) of %lld features", (long long)first,
                       (long long)n, (long long)s->dim);
    return n ? d->ops->synth(d, x, s, first, n) : FF_OK;
}

ff_status ff_device_gather(ff_device *d, float *x, int32_t *labels, const float *images, const int32_t *all_labels,
                           const int64_t *idx, int64_t per, int64_t n) {
    if (!d->ops->gather) return unsupported(d, "training (gather)");
    if (n < 0 || per < 1)
        return FF_FAIL(FF_ERR_INPUT, "gather: %lld samples of %lld floats", (long long)n, (long long)per);
    return n ? d->ops->gather(d, x, labels, images, all_labels, idx, per, n) : FF_OK;
}

// Layers [0, last] must be ones training supports, every conv direct; n and group in range.
static ff_status check_train(const ff_device *d, int last, int64_t n, int64_t group, const char *what) {
    const ff_model *m = d->model;
    if (last < 0 || last >= m->n_layers)
        return FF_FAIL(FF_ERR_INPUT, "%s: last layer %d: expected 0..%d", what, last, m->n_layers - 1);
    if (n < 1 || n > d->max_batch || group < 1)
        return FF_FAIL(FF_ERR_INPUT, "%s: %lld images in groups of %lld: expected 1..%lld images, groups >= 1", what,
                       (long long)n, (long long)group, (long long)d->max_batch);
    for (int l = 0; l <= last; l++) {
        const ff_op op = m->layers[l].op;
        if (op != FF_OP_CONV2D && op != FF_OP_RELU && op != FF_OP_MAXPOOL && op != FF_OP_FLATTEN && op != FF_OP_LINEAR)
            return FF_FAIL(FF_ERR_INPUT, "%s: layer %s is %s; training supports conv2d, relu, maxpool, flatten, linear",
                           what, m->layers[l].name, ff_op_name(op));
        if (op == FF_OP_CONV2D && d->plan.layer[l].alg != FF_CONV_DIRECT)
            return FF_FAIL(FF_ERR_INPUT,
                           "%s: layer %s is planned %s; training runs direct convolutions (--conv direct)", what,
                           m->layers[l].name, d->plan.layer[l].name);
    }
    return FF_OK;
}

ff_status ff_device_train_forward(ff_device *d, float *const *act, int first, int last, int64_t n, int64_t group) {
    if (!d->ops->train_forward) return unsupported(d, "training");
    FF_TRY(check_train(d, last, n, group, "train forward"));
    if (first < 0 || first > last)
        return FF_FAIL(FF_ERR_INPUT, "train forward: layers [%d, %d]: expected 0 <= first <= last", first, last);
    return d->ops->train_forward(d, act, first, last, n, group);
}
ff_status ff_device_softmax_xent(ff_device *d, float *dz, float *loss, const float *z, const int32_t *labels,
                                 float scale, int64_t classes, int64_t n) {
    if (!d->ops->softmax_xent) return unsupported(d, "training (softmax cross-entropy)");
    if (n < 1 || classes < 1)
        return FF_FAIL(FF_ERR_INPUT, "softmax cross-entropy: %lld images of %lld classes", (long long)n,
                       (long long)classes);
    return d->ops->softmax_xent(d, dz, loss, z, labels, scale, classes, n);
}
ff_status ff_device_train_backward(ff_device *d, float *grads, int64_t grad_stride, float *dz, const float *const *act,
                                   int last, int64_t n, int64_t group) {
    if (!d->ops->train_backward) return unsupported(d, "training");
    FF_TRY(check_train(d, last, n, group, "train backward"));
    return d->ops->train_backward(d, grads, grad_stride, dz, act, last, n, group);
}
ff_status ff_device_train_backward_data(ff_device *d, float *dz, const float *const *act, int last, int64_t n,
                                        int64_t group) {
    if (!d->ops->train_backward_data) return unsupported(d, "a backward in two passes");
    FF_TRY(check_train(d, last, n, group, "train backward (data gradients)"));
    return d->ops->train_backward_data(d, dz, act, last, n, group);
}
ff_status ff_device_train_backward_params(ff_device *d, float *grads, int64_t grad_stride, const float *const *act,
                                          int hi, int lo, int64_t n, int64_t group) {
    if (!d->ops->train_backward_params) return unsupported(d, "a backward in two passes");
    FF_TRY(check_train(d, hi, n, group, "train backward (parameter gradients)"));
    if (lo < 0 || lo > hi)
        return FF_FAIL(FF_ERR_INPUT, "train backward (parameter gradients): layers [%d, %d], expected lo <= hi", lo,
                       hi);
    return d->ops->train_backward_params(d, grads, grad_stride, act, hi, lo, n, group);
}
ff_status ff_device_train_backward_reduced(ff_device *d, float *grad, float *grads, int64_t grad_stride, float *dz,
                                           const float *const *act, int last, int64_t n, int64_t group, int64_t count) {
    if (!d->ops->train_backward) return unsupported(d, "training");
    FF_TRY(check_train(d, last, n, group, "train backward reduced"));
    if (count < 0 || count > grad_stride || (n + group - 1) / group > FF_DEVICE_TREE_MAX_GROUPS)
        return FF_FAIL(FF_ERR_INPUT,
                       "train backward reduced: %lld parameters in rows of %lld, %lld groups: expected at most a "
                       "row's length and at most %d groups",
                       (long long)count, (long long)grad_stride, (long long)((n + group - 1) / group),
                       FF_DEVICE_TREE_MAX_GROUPS);
    if (d->ops->train_backward_reduced)
        return d->ops->train_backward_reduced(d, grad, grads, grad_stride, dz, act, last, n, group, count);
    FF_TRY(d->ops->train_backward(d, grads, grad_stride, dz, act, last, n, group));
    return ff_device_tree_reduce(d, grad, grads, (n + group - 1) / group, grad_stride, count);
}
bool ff_device_can_backward_in_passes(const ff_device *d) {
    return d->ops->train_backward_data && d->ops->train_backward_params;
}
ff_status ff_device_tree_reduce(ff_device *d, float *out, float *rows, int64_t nrows, int64_t stride, int64_t len) {
    if (!d->ops->tree_reduce) return unsupported(d, "training (tree reduction)");
    if (nrows < 1 || len < 0 || stride < len)
        return FF_FAIL(FF_ERR_INPUT, "tree reduce: %lld rows of %lld floats, stride %lld", (long long)nrows,
                       (long long)len, (long long)stride);
    return (nrows > 1 || out != rows) && len > 0 ? d->ops->tree_reduce(d, out, rows, nrows, stride, len) : FF_OK;
}
ff_status ff_device_sgd(ff_device *d, float *w, float *mom, const float *g, int64_t count, float lr, float momentum,
                        float weight_decay, bool first) {
    if (!d->ops->sgd) return unsupported(d, "training (SGD)");
    if (count > 0 && (!w || !mom || !g))
        return FF_FAIL(FF_ERR_INPUT, "SGD of %lld floats: the %s buffer is NULL: expected one of %lld floats",
                       (long long)count,
                       !w     ? "weights"
                       : !mom ? "momentum"
                              : "gradient",
                       (long long)count);
    return count > 0 ? d->ops->sgd(d, w, mom, g, count, lr, momentum, weight_decay, first) : FF_OK;
}

ff_status ff_device_tree_sgd(ff_device *d, float *w_out, const float *w, float *mom, const ff_tree_rows *rows,
                             int64_t count, float lr, float momentum, float weight_decay, bool first) {
    if (!d->ops->tree_sgd) return unsupported(d, "training (tree and SGD)");
    const ff_tree_rows *r = rows;
    if (r->n < 1 || count < 0 || (r->n > 1 && r->stride < count))
        return FF_FAIL(FF_ERR_INPUT,
                       "tree and SGD: %lld rows of %lld floats, stride %lld: expected at least 1 row, a count of at "
                       "least 0 and, with several rows, a stride of at least the count",
                       (long long)r->n, (long long)count, (long long)r->stride);
    if (r->own < -1 || r->own >= r->n || (r->own >= 0) != (r->own_at != NULL))
        return FF_FAIL(FF_ERR_INPUT,
                       "tree and SGD: own row %lld %s: expected -1 without a place, or a row in [0, %lld) with one",
                       (long long)r->own, r->own_at ? "with a place" : "without a place", (long long)r->n);
    if (count > 0 && (!w_out || !w || !mom || !r->at))
        return FF_FAIL(FF_ERR_INPUT, "tree and SGD of %lld floats: the %s buffer is NULL: expected one of %lld floats",
                       (long long)count,
                       !w_out ? "output weights"
                       : !w   ? "weights"
                       : !mom ? "momentum"
                              : "rows",
                       (long long)count);
    if (!r->keep_sum && r->n > FF_TREE_UNKEPT_ROWS)
        return FF_FAIL(FF_ERR_INPUT, "tree and SGD: %lld rows without keeping the sum: expected at most %d",
                       (long long)r->n, FF_TREE_UNKEPT_ROWS);
    return count > 0 ? d->ops->tree_sgd(d, w_out, w, mom, rows, count, lr, momentum, weight_decay, first) : FF_OK;
}

// ---------------------------------------------------------------- captured work

size_t ff_device_train_work_bytes(const ff_device *d, int last, int64_t n, bool two_pass) {
    return d->ops->train_work_bytes ? d->ops->train_work_bytes(d, last, n, two_pass) : 0;
}

ff_status ff_device_memory(const ff_device *d, size_t *free_bytes, size_t *total_bytes) {
    *free_bytes = *total_bytes = 0;
    if (d->kind != FF_DEVICE_CUDA) return FF_OK;
    return ff_gpu_mem_info(free_bytes, total_bytes);
}

bool ff_device_can_capture(const ff_device *d) {
    return d->ops->capture_begin != NULL;
}
ff_status ff_device_capture_begin(ff_device *d) {
    if (!d->ops->capture_begin) return unsupported(d, "capturing work (graphs)");
    return d->ops->capture_begin(d);
}
ff_status ff_device_capture_end(ff_device *d, ff_device_graph **out) {
    *out = NULL;
    if (!d->ops->capture_end) return unsupported(d, "capturing work (graphs)");
    return d->ops->capture_end(d, out);
}
ff_status ff_device_graph_launch(ff_device *d, ff_device_graph *g) {
    if (!d->ops->graph_launch) return unsupported(d, "capturing work (graphs)");
    if (!g) return FF_FAIL(FF_ERR_INPUT, "graph launch: no graph");
    return d->ops->graph_launch(d, g);
}
void ff_device_graph_destroy(ff_device *d, ff_device_graph *g) {
    if (g && d->ops->graph_destroy) d->ops->graph_destroy(d, g);
}
