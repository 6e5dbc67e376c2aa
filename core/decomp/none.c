// Split none: one process, the device's undivided run (serial = cpu device, cuda = cuda device).
// On a GPU: upload, run (a captured graph replayed), download, one synchronisation.
#include "decomp_internal.h"

ff_status ff_decomp_forward_none(ff_decomp *x, float *out, const float *in, int64_t n, int first, int last) {
    const ff_model *m = x->model;
    if (n == 0) return FF_OK;
    const size_t in_floats = (size_t)(n * ff_shape_numel(m->layers[first].in));
    const size_t out_floats = (size_t)(n * ff_shape_numel(m->layers[last].out));
    const float *din = NULL, *res = NULL;
    FF_TRY(ff_decomp_import(x, &din, in, in_floats, first));
    FF_TRY(ff_device_run(x->dev, &res, din, n, first, last, x->fault_layer, x->trace));
    return ff_decomp_export(x, out, res, out_floats, last);
}
