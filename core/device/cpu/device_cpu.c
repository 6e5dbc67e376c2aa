// The cpu device (device.h): host memory and the reference layers (layers_cpu.h). Every other
// device is checked against what this one computes. Work runs at once (there is no stream), so
// sync has nothing to wait for.
#include <stdlib.h>
#include <string.h>

#include "../device_internal.h"
#include "fivefold/executor.h"
#include "fivefold/layers_cpu_backward.h"
#include "fivefold/train.h"

typedef struct {
    ff_device base;
    float *params;                  // (n_total): the device's copy of the weights (NULL: borrowed)
    const float *w[FF_MAX_LAYERS];  // views into params; NULL for layers without parameters
    const float *b[FF_MAX_LAYERS];
    float *act[2];         // (max_batch, max_act) each: ping-pong activations of run
    ff_conv_segment *seg;  // [seg_cap] scratch of run_bands
    int seg_cap;
    float *weights;        // params, or the borrowed weights: what ff_device_params hands the trainer
    float *train_scratch;  // train_backward: per group two data-gradient buffers and an im2col
    size_t train_scratch_floats;
} cpu_device;

static void cpu_destroy(ff_device *d) {
    cpu_device *c = (cpu_device *)d;
    free(c->params);
    free(c->act[0]);
    free(c->act[1]);
    free(c->seg);
    free(c->train_scratch);
    free(c);
}

static ff_status cpu_alloc(ff_device *d, float **p, size_t floats, const char *what) {
    (void)d;
    *p = malloc((floats ? floats : 1) * sizeof(float));
    if (!*p) return FF_FAIL(FF_ERR_OOM, "%s: %zu bytes of host memory", what, floats * sizeof(float));
    return FF_OK;
}

static void cpu_free(ff_device *d, float *p) {
    (void)d;
    free(p);
}

static ff_status cpu_copy(ff_device *d, float *dst, const float *src, size_t floats) {
    (void)d;
    if (dst != src) memmove(dst, src, floats * sizeof(float));
    return FF_OK;
}

static ff_status cpu_copy_bytes(ff_device *d, void *dst, const void *src, size_t bytes) {
    (void)d;
    memmove(dst, src, bytes);
    return FF_OK;
}

static ff_status cpu_copy_rows(ff_device *d, float *dst, int64_t dst_lo, int64_t dst_rows, const float *src,
                               int64_t src_lo, int64_t src_rows, int64_t n, int64_t C, int64_t W, int64_t lo,
                               int64_t hi) {
    (void)d;
    const size_t len = (size_t)((hi - lo) * W) * sizeof(float);
    for (int64_t i = 0; i < n * C; i++)
        memcpy(dst + (i * dst_rows + (lo - dst_lo)) * W, src + (i * src_rows + (lo - src_lo)) * W, len);
    return FF_OK;
}

static ff_status cpu_sync(ff_device *d) {
    (void)d;
    return FF_OK;
}

static ff_status cpu_run(ff_device *d, const float **out, const float *in, int64_t n, int first, int last,
                         int fault_layer, ff_trace *trace) {
    cpu_device *c = (cpu_device *)d;
    const float *src = in;
    for (int i = first; i <= last; i++) {
        const ff_layer *L = &d->model->layers[i];
        float *dst = c->act[(i - first) & 1];
        const double t0 = trace ? ff_now() : 0;
        const ff_rows rows = ff_rows_full(L);
        ff_cpu_layer_forward(dst, src, c->w[i], c->b[i], L, &rows, n);
        if (i == fault_layer) dst[0] = ff_fault_value(dst[0]);
        if (trace) trace->seconds[i][FF_PHASE_COMPUTE] += ff_now() - t0;
        src = dst;
    }
    *out = src;
    return FF_OK;
}

static ff_status cpu_run_bands(ff_device *d, const ff_band_job *jobs, int n_jobs, int layer) {
    cpu_device *c = (cpu_device *)d;
    const ff_layer *L = &d->model->layers[layer];
    if (L->op != FF_OP_CONV2D) {
        for (int q = 0; q < n_jobs; q++)
            if (jobs[q].n > 0 && jobs[q].rows.out_hi > jobs[q].rows.out_lo)
                ff_cpu_layer_forward(jobs[q].out, jobs[q].in, c->w[layer], c->b[layer], L, &jobs[q].rows, jobs[q].n);
        return FF_OK;
    }
    // One conv call for every band: the weights are packed once (layers_cpu.h).
    if (n_jobs > c->seg_cap) {
        ff_conv_segment *s = realloc(c->seg, (size_t)n_jobs * sizeof *s);
        if (!s) return FF_FAIL(FF_ERR_OOM, "cpu device: %d band jobs", n_jobs);
        c->seg = s;
        c->seg_cap = n_jobs;
    }
    for (int q = 0; q < n_jobs; q++) {
        const bool empty = jobs[q].rows.out_hi <= jobs[q].rows.out_lo;
        c->seg[q] = (ff_conv_segment){jobs[q].out, jobs[q].in, jobs[q].rows, empty ? 0 : jobs[q].n};
    }
    ff_cpu_conv2d_segments(c->seg, n_jobs, c->w[layer], c->b[layer], L);
    return FF_OK;
}

static ff_status cpu_run_features(ff_device *d, float *out, const float *in, int layer, int64_t f_lo, int64_t f_hi,
                                  int64_t n) {
    cpu_device *c = (cpu_device *)d;
    const ff_layer *L = &d->model->layers[layer];
    const int64_t in_el = ff_shape_numel(L->in);
    const ff_layer sub = ff_linear_features(L, f_lo, f_hi);
    ff_cpu_linear(out, in, c->w[layer] + f_lo * in_el, c->b[layer] + f_lo, &sub, n);
    return FF_OK;
}

static ff_status cpu_fault(ff_device *d, float *x) {
    (void)d;
    x[0] = ff_fault_value(x[0]);
    return FF_OK;
}

// ---------------------------------------------------------------- training (device.h)
// The micro-batch groups run on OpenMP threads, each through the reference layers in their
// documented orders: the bits do not depend on the thread count or on which thread runs a group.

static float *cpu_params(ff_device *d) {
    return ((cpu_device *)d)->weights;
}

static ff_status cpu_alloc_bytes(ff_device *d, void **p, size_t bytes, const char *what) {
    (void)d;
    *p = malloc(bytes ? bytes : 1);
    if (!*p) return FF_FAIL(FF_ERR_OOM, "%s: %zu bytes of host memory", what, bytes);
    return FF_OK;
}

static ff_status cpu_upload_bytes(ff_device *d, void *dst, const void *src_host, size_t bytes) {
    (void)d;
    if (dst != src_host) memmove(dst, src_host, bytes);
    return FF_OK;
}

static ff_status cpu_gather(ff_device *d, float *x, int32_t *labels, const float *images, const int32_t *all_labels,
                            const int64_t *idx, int64_t per, int64_t n) {
    (void)d;
    for (int64_t i = 0; i < n; i++) {
        memcpy(x + i * per, images + idx[i] * per, (size_t)per * sizeof(float));
        labels[i] = all_labels[idx[i]];
    }
    return FF_OK;
}

static ff_status cpu_synth(ff_device *d, float *x, const ff_synth *s, int64_t first, int64_t n) {
    (void)d;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < s->dim; j++) x[i * s->dim + j] = ff_synth_x(s, first + i, j);
    return FF_OK;
}

static ff_status cpu_train_forward(ff_device *d, float *const *act, int first, int last, int64_t n, int64_t group) {
    cpu_device *c = (cpu_device *)d;
    const ff_model *m = d->model;
    const int64_t ngroups = (n + group - 1) / group;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t g = 0; g < ngroups; g++) {
        const int64_t i0 = g * group, ng = i0 + group <= n ? group : n - i0;
        for (int l = first; l <= last; l++) {
            const ff_layer *L = &m->layers[l];
            const ff_rows rows = ff_rows_full(L);
            ff_cpu_layer_forward(act[l + 1] + i0 * ff_shape_numel(L->out), act[l] + i0 * ff_shape_numel(L->in), c->w[l],
                                 c->b[l], L, &rows, ng);
        }
    }
    return FF_OK;
}

static ff_status cpu_softmax_xent(ff_device *d, float *dz, float *loss, const float *z, const int32_t *labels,
                                  float scale, int64_t classes, int64_t n) {
    (void)d;
    ff_cpu_softmax_xent_backward(dz, loss, z, labels, scale, classes, n);
    return FF_OK;
}

// One group's backward (images [i0, i0 + ng)): gradient ping-pong in ga/gb, conv im2col in scratch.
static void backward_group(const cpu_device *c, float *grad_row, float *dz, const float *const *act, int last,
                           int64_t i0, int64_t ng, float *ga, float *gb, float *scratch) {
    const ff_model *m = c->base.model;
    const float *cur = dz + i0 * ff_shape_numel(m->layers[last].out);
    float *bufs[2] = {ga, gb};
    int next = 0;
    for (int l = last; l >= 0; l--) {
        const ff_layer *L = &m->layers[l];
        const float *x = act[l] + i0 * ff_shape_numel(L->in), *y = act[l + 1] + i0 * ff_shape_numel(L->out);
        float *dx = bufs[next];
        const bool need_dx = l > 0;  // the data's own gradient is never needed
        switch (L->op) {
            case FF_OP_CONV2D:
            case FF_OP_LINEAR: {
                float *gw = grad_row + (c->w[l] - c->weights), *gbias = grad_row + (c->b[l] - c->weights);
                if (L->op == FF_OP_CONV2D) {
                    ff_cpu_conv2d_backward_weights(gw, gbias, cur, x, L, ng, scratch);
                    if (need_dx) ff_cpu_conv2d_backward_data(dx, cur, c->w[l], L, ng);
                } else {
                    ff_cpu_linear_backward_weights(gw, gbias, cur, x, L, ng);
                    if (need_dx) ff_cpu_linear_backward_data(dx, cur, c->w[l], L, ng);
                }
                break;
            }
            case FF_OP_RELU:
                if (need_dx) ff_cpu_relu_backward(dx, cur, y, ng * ff_shape_numel(L->out));
                break;
            case FF_OP_MAXPOOL:
                if (need_dx) ff_cpu_maxpool_backward(dx, cur, x, L, ng);
                break;
            default: continue;  // flatten: same memory layout, the gradient passes through
        }
        cur = dx;
        next ^= 1;
    }
}

static ff_status cpu_train_backward(ff_device *d, float *grads, int64_t grad_stride, float *dz, const float *const *act,
                                    int last, int64_t n, int64_t group) {
    cpu_device *c = (cpu_device *)d;
    const ff_model *m = d->model;
    int64_t im2col = 1;
    for (int l = 0; l <= last; l++)
        if (m->layers[l].op == FF_OP_CONV2D) {
            const int64_t s = ff_cpu_conv2d_backward_weights_scratch(&m->layers[l]);
            if (s > im2col) im2col = s;
        }
    const int64_t ngroups = (n + group - 1) / group;
    const size_t per_group = (size_t)(2 * group * m->max_act + im2col);
    if (c->train_scratch_floats < (size_t)ngroups * per_group) {
        free(c->train_scratch);
        c->train_scratch_floats = 0;
        c->train_scratch = malloc((size_t)ngroups * per_group * sizeof(float));
        if (!c->train_scratch)
            return FF_FAIL(FF_ERR_OOM, "cpu device: %zu bytes of training scratch for %lld groups of %lld images",
                           (size_t)ngroups * per_group * sizeof(float), (long long)ngroups, (long long)group);
        c->train_scratch_floats = (size_t)ngroups * per_group;
    }
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t g = 0; g < ngroups; g++) {
        const int64_t i0 = g * group, ng = i0 + group <= n ? group : n - i0;
        float *ga = c->train_scratch + (size_t)g * per_group, *gb = ga + group * m->max_act;
        backward_group(c, grads + g * grad_stride, dz, act, last, i0, ng, ga, gb, gb + group * m->max_act);
    }
    return FF_OK;
}

// In place on the rows (train.c's reference tree), then row 0 to out.
static ff_status cpu_tree_reduce(ff_device *d, float *out, float *rows, int64_t nrows, int64_t stride, int64_t len) {
    (void)d;
    float **r = malloc((size_t)nrows * sizeof *r);
    if (!r) return FF_FAIL(FF_ERR_OOM, "tree reduce: %lld row pointers", (long long)nrows);
    for (int64_t j = 0; j < nrows; j++) r[j] = rows + j * stride;
    ff_tree_reduce(r, nrows, len);
    free(r);
    if (out != rows) memmove(out, rows, (size_t)len * sizeof *out);
    return FF_OK;
}

// train.h's rule for one element; float32, no fma (the build's -ffp-contract=off): every device
// gives these bits. mom[i] updated in place; returns the updated weight.
static inline float sgd_rule(float w, float g, float *mom, int64_t i, float lr, float momentum, float weight_decay,
                             bool first) {
    if (weight_decay != 0.0f) g = g + weight_decay * w;
    float b = g;
    if (momentum != 0.0f) {
        b = first ? g : momentum * mom[i] + g;
        mom[i] = b;
    }
    return w - lr * b;
}

static ff_status cpu_sgd(ff_device *d, float *w, float *mom, const float *g, int64_t count, float lr, float momentum,
                         float weight_decay, bool first) {
    (void)d;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; i++) w[i] = sgd_rule(w[i], g[i], mom, i, lr, momentum, weight_decay, first);
    return FF_OK;
}

// Keeping the sum: an own row elsewhere (tree_rows.h) is copied into its place and the tree runs in
// place (row 0 ends with the sum). Without: element by element, the rows read into a local array
// (at most FF_TREE_UNKEPT_ROWS) and added there in the same order, nothing written to them.
static ff_status cpu_tree_sgd(ff_device *d, float *w_out, const float *w, float *mom, const ff_tree_rows *r,
                              int64_t count, float lr, float momentum, float weight_decay, bool first) {
    float *rows = r->at;
    if (r->keep_sum || r->n == 1) {
        if (r->own_at) memcpy(rows + r->own * r->stride, r->own_at, (size_t)count * sizeof(float));
        FF_TRY(cpu_tree_reduce(d, rows, rows, r->n, r->stride, count));
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < count; i++)
            w_out[i] = sgd_rule(w[i], rows[i], mom, i, lr, momentum, weight_decay, first);
        return FF_OK;
    }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; i++) {
        float v[FF_TREE_UNKEPT_ROWS];
        for (int64_t j = 0; j < r->n; j++) v[j] = j == r->own ? r->own_at[i] : rows[j * r->stride + i];
        for (int64_t s = 1; s < r->n; s *= 2)
            for (int64_t j = 0; j + s < r->n; j += 2 * s) v[j] = v[j] + v[j + s];
        w_out[i] = sgd_rule(w[i], v[0], mom, i, lr, momentum, weight_decay, first);
    }
    return FF_OK;
}

static const ff_device_ops cpu_ops = {
    .destroy = cpu_destroy,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .copy_rows = cpu_copy_rows,
    .copy_bytes = cpu_copy_bytes,
    .sync = cpu_sync,
    .run = cpu_run,
    .run_bands = cpu_run_bands,
    .run_features = cpu_run_features,
    .fault = cpu_fault,
    .params = cpu_params,
    .alloc_bytes = cpu_alloc_bytes,
    .upload_bytes = cpu_upload_bytes,
    .gather = cpu_gather,
    .synth = cpu_synth,
    .train_forward = cpu_train_forward,
    .softmax_xent = cpu_softmax_xent,
    .train_backward = cpu_train_backward,
    .tree_reduce = cpu_tree_reduce,
    .sgd = cpu_sgd,
    .tree_sgd = cpu_tree_sgd,
};

ff_status ff_device_cpu_create(ff_device **out, const ff_model *m, const ff_weights *w, const ff_plan *p,
                               const ff_device_options *o) {
    (void)p;
    cpu_device *c = calloc(1, sizeof *c);
    if (!c) return FF_FAIL(FF_ERR_OOM, "cpu device: out of host memory");
    c->base.ops = &cpu_ops;
    c->base.host_memory = true;
    // A training-only device runs no forward of its own: 1 float each, never read.
    const size_t abytes = (o->train_only ? 1 : (size_t)o->max_batch * (size_t)m->max_act) * sizeof(float);
    if (!o->borrow_weights) c->params = malloc((size_t)(w->n_total > 0 ? w->n_total : 1) * sizeof(float));
    c->act[0] = malloc(abytes);
    c->act[1] = malloc(abytes);
    c->seg = malloc(sizeof *c->seg);  // one band job never reallocates: run_bands of one cannot fail
    c->seg_cap = 1;
    if ((!o->borrow_weights && !c->params) || !c->act[0] || !c->act[1] || !c->seg) {
        cpu_destroy(&c->base);
        return FF_FAIL(FF_ERR_OOM, "cpu device: %lld bytes of weights and 2 x %zu bytes of activations for batch %lld",
                       (long long)w->n_total * 4, abytes, (long long)o->max_batch);
    }
    float *base = (float *)w->data;  // borrowed: the caller's buffer, which its trainer updates
    if (c->params) {
        if (w->n_total > 0) memcpy(c->params, w->data, (size_t)w->n_total * sizeof(float));
        base = c->params;
    }
    c->weights = base;
    for (int i = 0; i < m->n_layers; i++) {
        if (w->w[i]) c->w[i] = base + (w->w[i] - w->data);
        if (w->b[i]) c->b[i] = base + (w->b[i] - w->data);
    }
    *out = &c->base;
    return FF_OK;
}
