// Split replicate: the input is broadcast and every rank computes everything (the seed's V2.1
// counter-example: slower than serial, kept to measure it). Rank 0's result is the answer.
#include "decomp_internal.h"

ff_status ff_decomp_forward_replicate(ff_decomp *x, float *out, const float *in, int64_t n, int first, int last) {
    const ff_model *m = x->model;
    const size_t in_floats = (size_t)(n * ff_shape_numel(m->layers[first].in));
    const size_t out_floats = (size_t)(n * ff_shape_numel(m->layers[last].out));
    const float *din = NULL;
    FF_TRY(ff_decomp_import(x, &din, in, in_floats, FF_MAX_LAYERS));
    ff_guarded *act = &x->buf[ACT0];
    FF_TRY(ff_decomp_reserve(act, in_floats));
    if (x->rank == 0) FF_TRY(ff_device_copy_bytes(x->dev, ff_guarded_data(act), din, in_floats * sizeof(float)));
    FF_TRY(ff_decomp_comm_ready(x));
    ff_decomp_crash_point(x, first);  // the test hooks: later layers stop at the forward's end
    ff_mark t = ff_decomp_mark(x);
    FF_TRY(ff_comm_bcast(x->comm, ff_guarded_data(act), in_floats * sizeof(float), 0));
    FF_TRY(ff_decomp_account(x, FF_MAX_LAYERS, FF_PHASE_COMM, t));
    FF_TRY(ff_guarded_check(act, in_floats, "after the broadcast", m->layers[first].name));
    if (n == 0) return FF_OK;
    const float *res = NULL;
    FF_TRY(ff_device_run(x->dev, &res, ff_guarded_data(act), n, first, last, x->fault_layer, x->trace));
    return ff_decomp_export(x, out, res, out_floats, FF_MAX_LAYERS);
}
