// The decompositions' front door and shared helpers (decomp.h, decomp_internal.h).
#include <stdlib.h>
#include <string.h>

#include "decomp_internal.h"

static const char *buf_names[N_BUFS] = {"activation 0", "activation 1", "activation 2", "send",
                                        "receive",      "whole-tensor", "input"};

ff_status ff_decomp_create(ff_decomp **out, ff_split split, const ff_model *m, ff_device *dev, ff_comm *comm) {
    *out = NULL;
    if (split != FF_SPLIT_NONE && !comm)
        return FF_FAIL(FF_ERR_INPUT, "split %s needs a communicator (run under mpiexec)", ff_split_name(split));
    if (comm && !ff_device_is_host(dev) && ff_comm_device(comm) != dev)
        return FF_FAIL(FF_ERR_INTERNAL, "split %s: the communicator is not bound to the device's memory",
                       ff_split_name(split));
    ff_decomp *x = calloc(1, sizeof *x);
    if (!x) return FF_FAIL(FF_ERR_OOM, "decomposition: %zu bytes", sizeof *x);
    x->split = split;
    x->model = m;
    x->dev = dev;
    x->plan = ff_device_plan(dev);
    x->comm = split == FF_SPLIT_NONE ? NULL : comm;
    x->rank = x->comm ? ff_comm_rank(comm) : 0;
    x->ranks = x->comm ? ff_comm_size(comm) : 1;
    for (int k = 0; k < N_BUFS; k++) {
        x->buf[k].name = buf_names[k];
        x->buf[k].dev = dev;
    }
    const int P = x->ranks;
    x->counts = calloc((size_t)P, sizeof(size_t));
    x->displs = calloc((size_t)P, sizeof(size_t));
    x->sends = calloc((size_t)P, sizeof(ff_comm_msg));
    x->recvs = calloc((size_t)P, sizeof(ff_comm_msg));
    if (!x->counts || !x->displs || !x->sends || !x->recvs) {
        ff_decomp_destroy(x);
        return FF_FAIL(FF_ERR_OOM, "decomposition: scratch for %d ranks", P);
    }
    *out = x;
    return FF_OK;
}

void ff_decomp_destroy(ff_decomp *x) {
    if (!x) return;
    for (int k = 0; k < N_BUFS; k++) ff_guarded_free(&x->buf[k]);
    ff_decomp_rows_free(x);
    free(x->counts);
    free(x->displs);
    free(x->sends);
    free(x->recvs);
    free(x);
}

ff_status ff_decomp_forward(ff_decomp *x, float *out, const float *in, int64_t n, int first, int last, int fault_layer,
                            ff_trace *trace) {
    const ff_model *m = x->model;
    if (first < 0 || last >= m->n_layers || first > last)
        return FF_FAIL(FF_ERR_INPUT, "layer range [%d, %d]: expected 0 <= first <= last < %d", first, last,
                       m->n_layers);
    if (n < 0) return FF_FAIL(FF_ERR_INPUT, "batch %lld: expected >= 0", (long long)n);
    if (x->rank == 0 && n > 0 && (!in || !out)) return FF_FAIL(FF_ERR_INPUT, "rank 0 needs input and output buffers");
    x->fault_layer = fault_layer;
    x->trace = trace;
    switch (x->split) {
        case FF_SPLIT_NONE: return ff_decomp_forward_none(x, out, in, n, first, last);
        case FF_SPLIT_BATCH: return ff_decomp_forward_batch(x, out, in, n, first, last);
        case FF_SPLIT_REPLICATE: return ff_decomp_forward_replicate(x, out, in, n, first, last);
        case FF_SPLIT_ROWS: return ff_decomp_forward_rows(x, out, in, n, first, last);
    }
    return FF_FAIL(FF_ERR_INPUT, "split %d: expected none, batch, rows or replicate", (int)x->split);
}

ff_mark ff_decomp_mark(ff_decomp *x) {
    ff_mark m = {x->trace ? ff_now() : 0, x->comm ? ff_comm_bytes_sent(x->comm) : 0};
    return m;
}

ff_status ff_decomp_account(ff_decomp *x, int row, ff_phase ph, ff_mark m) {
    if (!x->trace) return FF_OK;
    FF_TRY(ff_device_sync(x->dev));
    x->trace->seconds[row][ph] += ff_now() - m.t;
    if (x->comm) x->trace->comm_bytes[row] += ff_comm_bytes_sent(x->comm) - m.bytes;
    return FF_OK;
}

ff_status ff_decomp_comm_ready(ff_decomp *x) {
    return ff_device_sync(x->dev);
}

ff_status ff_decomp_reserve(ff_guarded *g, size_t floats) {
    FF_TRY(ff_guarded_reserve(g, floats));
    return ff_guarded_arm(g, floats);
}

ff_status ff_decomp_import(ff_decomp *x, const float **out, const float *in_host, size_t floats, int row) {
    *out = NULL;
    if (x->rank != 0) return FF_OK;
    if (ff_device_is_host(x->dev)) {
        *out = in_host;
        return FF_OK;
    }
    // Only reserved (guards armed once, at allocation): the input is written by one upload, never
    // by an exchange, and arming on a GPU would cost a synchronisation per forward.
    ff_guarded *g = &x->buf[INPUT];
    FF_TRY(ff_guarded_reserve(g, floats));
    ff_mark t = ff_decomp_mark(x);
    FF_TRY(ff_device_upload(x->dev, ff_guarded_data(g), in_host, floats));
    FF_TRY(ff_decomp_account(x, row, FF_PHASE_H2D, t));
    *out = ff_guarded_data(g);
    return FF_OK;
}

ff_status ff_decomp_export(ff_decomp *x, float *out_host, const float *src, size_t floats, int row) {
    if (x->rank != 0 || out_host == src) return FF_OK;
    ff_mark t = ff_decomp_mark(x);
    FF_TRY(ff_device_download(x->dev, out_host, src, floats));
    FF_TRY(ff_device_sync(x->dev));
    return ff_decomp_account(x, row, FF_PHASE_D2H, t);
}
