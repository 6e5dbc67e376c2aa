// Mode `serial` (v1): the CPU reference layers, one process, one thread. Every other mode is
// checked against what this file computes.
#include <stdlib.h>
#include <string.h>

#include "fivefold/executor.h"
#include "fivefold/layers_cpu.h"

typedef struct {
    ff_executor base;
    const ff_weights *w;
    float *buf[2];  // ping-pong activations, each (max_batch, model->max_act)
} serial_exec;

static void serial_destroy(ff_executor *e) {
    serial_exec *s = (serial_exec *)e;
    free(s->buf[0]);
    free(s->buf[1]);
    free(s);
}

static ff_status serial_create(ff_executor **out, const ff_model *m, const ff_weights *w, const ff_exec_options *o) {
    serial_exec *s = calloc(1, sizeof *s);
    if (!s) return FF_FAIL(FF_ERR_OOM, "serial executor: out of memory");
    size_t bytes = (size_t)o->max_batch * (size_t)m->max_act * sizeof(float);
    for (int i = 0; i < 2; i++) {
        s->buf[i] = malloc(bytes);
        if (!s->buf[i]) {
            serial_destroy(&s->base);
            return FF_FAIL(FF_ERR_OOM, "serial executor: cannot allocate %zu bytes of activations for batch %lld",
                           bytes, (long long)o->max_batch);
        }
    }
    s->w = w;
    s->base.rank = 0;
    s->base.ranks = 1;
    *out = &s->base;
    return FF_OK;
}

static ff_status serial_forward(ff_executor *e, float *out, const float *in, int64_t n, int first, int last) {
    serial_exec *s = (serial_exec *)e;
    const ff_model *m = e->model;
    const float *src = in;
    for (int i = first; i <= last; i++) {
        const ff_layer *L = &m->layers[i];
        float *dst = i == last ? out : s->buf[(i - first) & 1];
        double t0 = ff_now();
        ff_rows rows = ff_rows_full(L);
        ff_cpu_layer_forward(dst, src, s->w->w[i], s->w->b[i], L, &rows, n);
        if (i == e->opt.fault_layer) dst[0] = ff_fault_value(dst[0]);
        if (e->opt.trace) e->trace.seconds[i][FF_PHASE_COMPUTE] += ff_now() - t0;
        src = dst;
    }
    return FF_OK;
}

const ff_mode_impl ff_mode_serial_impl = {"serial", serial_create, serial_forward, serial_destroy};
