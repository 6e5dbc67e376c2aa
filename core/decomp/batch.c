// Split batch: rank r computes images ff_band(n, P, r) through every layer — scatter the input,
// the device's undivided run on its images, gather the outputs on rank 0.
#include "decomp_internal.h"

ff_status ff_decomp_forward_batch(ff_decomp *x, float *out, const float *in, int64_t n, int first, int last) {
    const ff_model *m = x->model;
    const int P = x->ranks, me = x->rank;
    const int64_t in_el = ff_shape_numel(m->layers[first].in);
    const int64_t out_el = ff_shape_numel(m->layers[last].out);
    const ff_range mine = ff_band(n, P, me);
    const int64_t nl = ff_range_len(mine);
    const float *din = NULL;
    FF_TRY(ff_decomp_import(x, &din, in, (size_t)(n * in_el), FF_MAX_LAYERS));
    ff_guarded *act = &x->buf[ACT0];
    FF_TRY(ff_decomp_reserve(act, (size_t)(nl * in_el)));
    for (int r = 0; r < P; r++) {
        const ff_range b = ff_band(n, P, r);
        x->counts[r] = (size_t)(ff_range_len(b) * in_el) * sizeof(float);
        x->displs[r] = (size_t)(b.lo * in_el) * sizeof(float);
    }
    ff_mark t;
    if (!x->replay) {  // a replay's images are still on every rank's device (ff_decomp_replay)
        FF_TRY(ff_decomp_comm_ready(x));
        ff_decomp_crash_point(x, first);
        t = ff_decomp_mark(x);
        FF_TRY(ff_comm_scatterv(x->comm, ff_guarded_data(act), x->counts[me], din, x->counts, x->displs, 0));
        FF_TRY(ff_decomp_account(x, FF_MAX_LAYERS, FF_PHASE_COMM, t));
        FF_TRY(ff_guarded_check(act, (size_t)(nl * in_el), "after the scatter", m->layers[first].name));
    }
    // The fault hook perturbs image 0's output: on the rank that holds image 0.
    const int owner0 = n > 0 ? ff_band_owner(n, P, 0) : -1;
    const float *res = NULL;
    if (nl > 0)
        FF_TRY(ff_device_run(x->dev, &res, ff_guarded_data(act), nl, first, last, me == owner0 ? x->fault_layer : -1,
                             x->trace));
    for (int r = 0; r < P; r++) {
        const ff_range b = ff_band(n, P, r);
        x->counts[r] = (size_t)(ff_range_len(b) * out_el) * sizeof(float);
        x->displs[r] = (size_t)(b.lo * out_el) * sizeof(float);
    }
    // Rank 0 gathers into the caller's output on a host-memory device, else into a device buffer
    // that it then downloads.
    float *dst = out;
    if (me == 0 && !ff_device_is_host(x->dev)) {
        FF_TRY(ff_decomp_reserve(&x->buf[FULL], (size_t)(n * out_el)));
        dst = ff_guarded_data(&x->buf[FULL]);
    }
    FF_TRY(ff_decomp_comm_ready(x));
    ff_decomp_crash_point(x, last);  // the test hooks: a layer before `last` has no exchange of its own
    t = ff_decomp_mark(x);
    FF_TRY(ff_comm_gatherv(x->comm, dst, x->counts, x->displs, res, x->counts[me], 0));
    FF_TRY(ff_decomp_account(x, FF_MAX_LAYERS, FF_PHASE_COMM, t));
    if (me == 0 && dst != out) {
        FF_TRY(ff_guarded_check(&x->buf[FULL], (size_t)(n * out_el), "after the gather", m->layers[last].name));
        FF_TRY(ff_decomp_export(x, out, dst, (size_t)(n * out_el), FF_MAX_LAYERS));
    } else if (me == 0) {
        x->out_dev = dst;
    }
    return FF_OK;
}
