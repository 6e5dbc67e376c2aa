// The executor front door: mode registry, option parsing, dispatch (see executor.h).
#include "fivefold/executor.h"
#include "fivefold/layers_cpu.h"

#include <math.h>
#include <string.h>

static const struct {
    const char *name, *alias;
} mode_names[FF_N_MODES] = {
    {"serial", "v1"}, {"mpi", "v2"}, {"cuda", "v3"}, {"hybrid", "v4"}, {"direct", "v5"},
};

static const ff_mode_impl *impl_of(ff_mode m) {
    switch (m) {
        case FF_MODE_SERIAL: return &ff_mode_serial_impl;
        case FF_MODE_MPI: return &ff_mode_mpi_impl;
        case FF_MODE_CUDA: return &ff_mode_cuda_impl;
        case FF_MODE_HYBRID:
        case FF_MODE_DIRECT:
        case FF_N_MODES: break;
    }
    return NULL;
}

ff_status ff_mode_parse(ff_mode *out, const char *s) {
    for (int i = 0; i < FF_N_MODES; i++) {
        if (s && (strcmp(s, mode_names[i].name) == 0 || strcmp(s, mode_names[i].alias) == 0)) {
            *out = (ff_mode)i;
            return FF_OK;
        }
    }
    return FF_FAIL(FF_ERR_INPUT, "unknown mode '%s': expected serial|mpi|cuda|hybrid|direct (or v1..v5)",
                   s ? s : "(none)");
}

const char *ff_mode_name(ff_mode m) {
    return (unsigned)m < FF_N_MODES ? mode_names[m].name : "?";
}

static const char *split_names[] = {"none", "batch", "rows", "replicate"};

ff_status ff_split_parse(ff_split *out, const char *s) {
    for (int i = 0; i < 4; i++) {
        if (s && strcmp(s, split_names[i]) == 0) {
            *out = (ff_split)i;
            return FF_OK;
        }
    }
    return FF_FAIL(FF_ERR_INPUT, "unknown split '%s': expected batch|rows|replicate", s ? s : "(none)");
}

const char *ff_split_name(ff_split s) {
    return (unsigned)s < 4 ? split_names[s] : "?";
}

bool ff_mode_is_multirank(ff_mode m) {
    return m == FF_MODE_MPI || m == FF_MODE_HYBRID || m == FF_MODE_DIRECT;
}

void ff_exec_options_default(ff_exec_options *o) {
    memset(o, 0, sizeof *o);
    o->mode = FF_MODE_SERIAL;
    o->split = FF_SPLIT_NONE;
    o->max_batch = 1;
    o->fault_layer = -1;
}

ff_status ff_exec_create(ff_executor **out, const ff_model *m, const ff_weights *w, const ff_exec_options *o) {
    *out = NULL;
    const ff_mode_impl *impl = impl_of(o->mode);
    if (!impl)
        return FF_FAIL(FF_ERR_INPUT,
                       "mode '%s' is not implemented in this version of fivefold "
                       "(available: serial, mpi, cuda)",
                       ff_mode_name(o->mode));
    if (o->max_batch < 1) return FF_FAIL(FF_ERR_INPUT, "max batch %lld: expected at least 1", (long long)o->max_batch);
    if (ff_mode_is_multirank(o->mode) && !o->comm)
        return FF_FAIL(FF_ERR_INPUT, "mode '%s' needs a communicator (run it through the CLI or pass opt.comm)",
                       ff_mode_name(o->mode));
    if (ff_mode_is_multirank(o->mode) && o->split == FF_SPLIT_NONE)
        return FF_FAIL(FF_ERR_INPUT, "mode '%s' needs --split batch|rows%s", ff_mode_name(o->mode),
                       o->mode == FF_MODE_MPI ? "|replicate" : "");
    if (o->fault_layer >= m->n_layers)
        return FF_FAIL(FF_ERR_INPUT, "fault layer %d: model %s has layers 0..%d", o->fault_layer, m->name,
                       m->n_layers - 1);
    bool wide;
    FF_TRY(ff_cpu_vector_choose(&wide));  // FF_CPU_VECTOR: refused here, before any work, when bad
    FF_TRY(impl->create(out, m, w, o));
    (*out)->impl = impl;
    (*out)->model = m;
    (*out)->opt = *o;
    ff_trace_reset(&(*out)->trace);
    return FF_OK;
}

void ff_exec_destroy(ff_executor *e) {
    if (e) e->impl->destroy(e);
}

ff_status ff_exec_forward(ff_executor *e, float *out, const float *in, int64_t n, int first, int last) {
    const ff_model *m = e->model;
    if (first < 0 || last >= m->n_layers || first > last)
        return FF_FAIL(FF_ERR_INPUT, "layer range [%d, %d]: expected 0 <= first <= last < %d", first, last,
                       m->n_layers);
    if (n < 1 || n > e->opt.max_batch)
        return FF_FAIL(FF_ERR_INPUT, "batch %lld: this executor was created for 1..%lld images", (long long)n,
                       (long long)e->opt.max_batch);
    if (e->rank == 0 && (!out || !in))
        return FF_FAIL(FF_ERR_INPUT, "forward: input and output buffers are required on rank 0");
    ff_status st = e->impl->forward(e, out, in, n, first, last);
    if (st == FF_OK && e->opt.trace) e->trace.calls++;
    return st;
}

const char *ff_exec_layer_algorithm(ff_executor *e, int layer) {
    const char *a = NULL;
    if (e && e->ext && e->ext->layer_algorithm && layer >= 0 && layer < e->model->n_layers)
        a = e->ext->layer_algorithm(e, layer);
    return a ? a : "direct";
}

ff_status ff_exec_time_resident(ff_executor *e, int64_t n, int iters, double *ms_out) {
    if (!e->ext || !e->ext->time_resident)
        return FF_FAIL(FF_ERR_INPUT, "mode '%s': device-resident timing is not supported", e->impl->name);
    if (n < 1 || n > e->opt.max_batch || iters < 1)
        return FF_FAIL(FF_ERR_INPUT, "resident timing: batch %lld (1..%lld), iters %d (>= 1)", (long long)n,
                       (long long)e->opt.max_batch, iters);
    return e->ext->time_resident(e, n, iters, ms_out);
}

ff_status ff_exec_resident_output(ff_executor *e, float *out, int64_t n) {
    if (!e->ext || !e->ext->resident_output)
        return FF_FAIL(FF_ERR_INPUT, "mode '%s': device-resident timing is not supported", e->impl->name);
    return e->ext->resident_output(e, out, n);
}

ff_trace *ff_exec_trace(ff_executor *e) {
    return e->opt.trace ? &e->trace : NULL;
}
int ff_exec_rank(const ff_executor *e) {
    return e->rank;
}
int ff_exec_ranks(const ff_executor *e) {
    return e->ranks;
}

float ff_fault_value(float x) {
    return x + 1.0f + 2.0f * fabsf(x);
}
