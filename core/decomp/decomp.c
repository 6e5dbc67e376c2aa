// The decompositions' front door and shared helpers (decomp.h, decomp_internal.h).
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    x->last_n = -1;  // no forward yet: nothing to replay
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
    x->replay = false;
    x->crash_armed = x->crash_on && x->rank == x->crash_rank && first <= x->crash_layer && x->crash_layer <= last;
    ff_status st = FF_FAIL(FF_ERR_INPUT, "split %d: expected none, batch, rows or replicate", (int)x->split);
    switch (x->split) {
        case FF_SPLIT_NONE: st = ff_decomp_forward_none(x, out, in, n, first, last); break;
        case FF_SPLIT_BATCH: st = ff_decomp_forward_batch(x, out, in, n, first, last); break;
        case FF_SPLIT_REPLICATE: st = ff_decomp_forward_replicate(x, out, in, n, first, last); break;
        case FF_SPLIT_ROWS: st = ff_decomp_forward_rows(x, out, in, n, first, last); break;
    }
    if (st == FF_OK) ff_decomp_crash_point(x, last);  // no communication came after the layer
    x->crash_armed = false;
    x->last_n = st == FF_OK ? n : -1;
    x->last_first = first;
    x->last_last = last;
    return st;
}

void ff_decomp_set_crash(ff_decomp *x, int rank, int layer, bool hang) {
    x->crash_on = rank >= 0 && layer >= 0;
    x->crash_rank = rank;
    x->crash_layer = layer;
    x->crash_hang = hang;
}

// A test hook, not error handling (the library never ends the process on an error): the others
// must meet a rank that vanished (SIGKILL: the launcher sees it die) or went silent (a sleep that
// never answers: only their communication deadline notices).
void ff_decomp_crash_point(ff_decomp *x, int layer) {
    if (!x->crash_armed || layer < x->crash_layer) return;
    if (!x->crash_hang) raise(SIGKILL);
    for (;;) {
        struct timespec ts = {3600, 0};
        nanosleep(&ts, NULL);
    }
}

ff_status ff_decomp_replay(ff_decomp *x, int64_t n, int first, int last) {
    if (ff_device_is_host(x->dev))
        return FF_FAIL(FF_ERR_INPUT, "device-resident replay: the %s split runs on host memory here",
                       ff_split_name(x->split));
    // The input a replay reuses is the last forward's: same images, same layers, or nothing.
    if (x->last_n < 0 || (x->rank == 0 && !x->out_dev))
        return FF_FAIL(FF_ERR_INPUT, "device-resident replay before any forward of these images");
    if (n != x->last_n || first != x->last_first || last != x->last_last)
        return FF_FAIL(FF_ERR_INPUT,
                       "device-resident replay of %lld images, layers %d..%d: expected the last forward's %lld "
                       "images, layers %d..%d (its input is what a replay reuses)",
                       (long long)n, first, last, (long long)x->last_n, x->last_first, x->last_last);
    x->fault_layer = -1;
    x->trace = NULL;
    x->replay = true;
    ff_status st = FF_FAIL(FF_ERR_INPUT, "split %s: no device-resident replay", ff_split_name(x->split));
    switch (x->split) {
        case FF_SPLIT_NONE: st = ff_decomp_forward_none(x, NULL, NULL, n, first, last); break;
        case FF_SPLIT_BATCH: st = ff_decomp_forward_batch(x, NULL, NULL, n, first, last); break;
        case FF_SPLIT_ROWS: st = ff_decomp_forward_rows(x, NULL, NULL, n, first, last); break;
        case FF_SPLIT_REPLICATE: break;
    }
    x->replay = false;
    if (st == FF_OK) st = ff_device_sync(x->dev);
    return st;
}

ff_status ff_decomp_resident_output(ff_decomp *x, float *out_host, int64_t n, int last) {
    if (x->rank != 0) return FF_OK;
    if (!x->out_dev) return FF_FAIL(FF_ERR_INPUT, "no device-resident output yet");
    FF_TRY(ff_device_download(x->dev, out_host, x->out_dev, (size_t)(n * ff_shape_numel(x->model->layers[last].out))));
    return ff_device_sync(x->dev);
}

ff_mark ff_decomp_mark(ff_decomp *x) {
    ff_mark m = {x->trace ? ff_now() : 0, 0, 0, 0};
    if (x->comm) {
        m.bytes = ff_comm_bytes_sent(x->comm);
        m.halo = ff_comm_p2p_bytes(x->comm);
        m.bus = ff_comm_bus_bytes(x->comm);
    }
    return m;
}

ff_status ff_decomp_account(ff_decomp *x, int row, ff_phase ph, ff_mark m) {
    if (!x->trace) return FF_OK;
    FF_TRY(ff_device_sync(x->dev));
    x->trace->seconds[row][ph] += ff_now() - m.t;
    if (x->comm) {
        x->trace->comm_bytes[row] += ff_comm_bytes_sent(x->comm) - m.bytes;
        x->trace->halo_bytes[row] += ff_comm_p2p_bytes(x->comm) - m.halo;
        x->trace->bus_bytes[row] += ff_comm_bus_bytes(x->comm) - m.bus;
    }
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
    if (x->replay) {  // the last forward's upload is still there
        *out = ff_guarded_data(&x->buf[INPUT]);
        return FF_OK;
    }
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
    if (x->rank != 0) return FF_OK;
    x->out_dev = src;
    if (x->replay || out_host == src) return FF_OK;
    ff_mark t = ff_decomp_mark(x);
    FF_TRY(ff_device_download(x->dev, out_host, src, floats));
    FF_TRY(ff_device_sync(x->dev));
    return ff_decomp_account(x, row, FF_PHASE_D2H, t);
}
