// The executor (executor.h): a mode's device, decomposition and communicator composed per the
// mode table (modes.c). Opaque outside this file: callers ask for capabilities and the plan.
#include "fivefold/executor.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fivefold/comm.h"
#include "fivefold/decomp.h"
#include "fivefold/device.h"
#include "fivefold/layers_cpu.h"
#include "modes.h"

struct ff_executor {
    ff_mode mode;
    const ff_model *model;  // &own_model
    ff_model own_model;     // a copy: the executor may outlive the caller's model (the gate times the
                            // executor the verifier built)
    ff_exec_options opt;
    ff_plan plan;
    ff_device *dev;
    ff_decomp *decomp;
    ff_comm *comm;      // multi-rank modes (bound to dev's memory on a GPU); NULL otherwise
    ff_comm *own_comm;  // the direct mode's NCCL or CUDA IPC comm over opt.comm (e->comm then)
    ff_trace trace;
    int rank, ranks;
};

ff_status ff_mode_parse(ff_mode *out, const char *s) {
    for (int i = 0; i < FF_N_MODES; i++) {
        const ff_mode_desc *d = ff_mode_desc_of((ff_mode)i);
        if (s && (strcmp(s, d->name) == 0 || strcmp(s, d->alias) == 0)) {
            *out = (ff_mode)i;
            return FF_OK;
        }
    }
    return FF_FAIL(FF_ERR_INPUT, "unknown mode '%s': expected serial|mpi|cuda|hybrid|direct (or v1..v5)",
                   s ? s : "(none)");
}

const char *ff_mode_name(ff_mode m) {
    const ff_mode_desc *d = ff_mode_desc_of(m);
    return d ? d->name : "?";
}

bool ff_mode_is_multirank(ff_mode m) {
    const ff_mode_desc *d = ff_mode_desc_of(m);
    return d && d->multirank;
}

ff_status ff_transport_parse(ff_transport *out, const char *s) {
    static const char *names[] = {"auto", "nccl", "mpi", "ipc"};
    for (int i = 0; i < 4; i++)
        if (s && strcmp(s, names[i]) == 0) {
            *out = (ff_transport)i;
            return FF_OK;
        }
    return FF_FAIL(FF_ERR_INPUT, "--transport '%s': expected nccl, mpi, ipc or auto", s ? s : "(none)");
}

const char *ff_transport_name(ff_transport t) {
    static const char *names[] = {"auto", "nccl", "mpi", "ipc"};
    return (unsigned)t < 4 ? names[t] : "?";
}

void ff_exec_options_default(ff_exec_options *o) {
    memset(o, 0, sizeof *o);
    o->mode = FF_MODE_SERIAL;
    o->split = FF_SPLIT_NONE;
    o->max_batch = 1;
    o->fault_layer = -1;
    o->gpu = -1;
    o->comm_timeout_s = -1;
    o->crash_rank = o->crash_layer = -1;
    // A bad FF_CUDA_* value leaves the built-in default here; the command line reports it
    // (ff_plan_options_default is what the CLI calls before parsing its flags).
    (void)ff_plan_options_default(&o->plan);
}

void ff_mode_caps(ff_exec_caps *out, ff_mode m) {
    memset(out, 0, sizeof *out);
    const ff_mode_desc *d = ff_mode_desc_of(m);
    if (!d) return;
    out->device = d->device;
    out->digest_class = d->device == FF_DEVICE_CUDA ? "gpu" : "cpu";
    out->needs_comm = d->multirank;
    out->default_split = d->default_split;
    out->resident_timing = d->device == FF_DEVICE_CUDA;
    out->pins_host = d->device == FF_DEVICE_CUDA;
    out->transport = !d->multirank                 ? "none"
                     : d->device != FF_DEVICE_CUDA ? "mpi"
                     : m == FF_MODE_DIRECT         ? "nccl (device buffers)"
                                                   : "mpi (staged through pinned host memory)";
}

// Rank 0's weights reach every rank: the size and each tensor's offset first, then the data, into
// *own (allocated here on ranks != 0; the caller frees it once the device holds its copy).
static ff_status share_weights(ff_weights *view, float **own, ff_comm *comm, const ff_model *m, const ff_weights *w) {
    int64_t hdr[1 + 2 * FF_MAX_LAYERS];
    const int rank = ff_comm_rank(comm);
    *own = NULL;
    if (rank == 0) {
        if (!w || (!w->data && w->n_total > 0)) return FF_FAIL(FF_ERR_INPUT, "rank 0 has no weights");
        hdr[0] = w->n_total;
        for (int i = 0; i < FF_MAX_LAYERS; i++) {
            hdr[1 + 2 * i] = i < m->n_layers && w->w[i] ? w->w[i] - w->data : -1;
            hdr[2 + 2 * i] = i < m->n_layers && w->b[i] ? w->b[i] - w->data : -1;
        }
    }
    FF_TRY(ff_comm_bcast(comm, hdr, sizeof hdr, 0));
    if (rank == 0) {
        *view = *w;
    } else {
        memset(view, 0, sizeof *view);
        view->n_total = hdr[0];
        *own = malloc((size_t)(hdr[0] > 0 ? hdr[0] : 1) * sizeof(float));
        if (!*own) return FF_FAIL(FF_ERR_OOM, "weights copy of %lld bytes", (long long)hdr[0] * 4);
        view->data = *own;
        for (int i = 0; i < FF_MAX_LAYERS; i++) {
            view->w[i] = hdr[1 + 2 * i] >= 0 ? *own + hdr[1 + 2 * i] : NULL;
            view->b[i] = hdr[2 + 2 * i] >= 0 ? *own + hdr[2 + 2 * i] : NULL;
        }
    }
    return ff_comm_bcast(comm, view->data, (size_t)view->n_total * sizeof(float), 0);
}

// The direct mode's transport, chosen once the device (and so the GPU) is set: NCCL or CUDA IPC
// over the rank's communicator, or that communicator itself when it is a CUDA-aware MPI (auto:
// the first of those that fits the ranks' GPUs and hosts).
static ff_status direct_transport(ff_executor *e) {
    ff_transport t = e->opt.transport;
    if (t == FF_TRANSPORT_AUTO) {
        bool own = false, node = false, aware = false;
        char shared[160] = "", why[256] = "";
        FF_TRY(ff_comm_gpu_layout(e->comm, &own, &node, shared, sizeof shared));
        FF_TRY(ff_comm_mpi_cuda_aware(&aware, why, sizeof why));
        if (own && ff_comm_nccl_built())
            t = FF_TRANSPORT_NCCL;
        else if (node && strcmp(ff_comm_transport_name(e->comm), "mpi") == 0)
            t = FF_TRANSPORT_IPC;
        else if (aware)
            t = FF_TRANSPORT_MPI;
        else
            return FF_FAIL(FF_ERR_INPUT,
                           "direct mode: no transport fits: NCCL %s, CUDA IPC needs the ranks on one node, and the "
                           "MPI library is not CUDA-aware (%s); use --mode hybrid",
                           ff_comm_nccl_built() ? (*shared ? shared : "needs one GPU per rank") : "is not built", why);
    }
    if (t == FF_TRANSPORT_MPI) return ff_comm_mpi_device_direct(e->comm);
    if (t == FF_TRANSPORT_IPC)
        FF_TRY(ff_comm_ipc_create(&e->own_comm, e->comm));
    else
        FF_TRY(ff_comm_nccl_create(&e->own_comm, e->comm));
    e->comm = e->own_comm;
    return FF_OK;
}

static ff_status compose(ff_executor *e, const ff_model *m, const ff_weights *w) {
    const ff_exec_options *o = &e->opt;
    const ff_mode_desc *d = ff_mode_desc_of(o->mode);
    FF_TRY(ff_plan_build(&e->plan, m, d->device, &o->plan));
    ff_weights shared;
    float *own = NULL;
    const ff_weights *use = w;
    if (d->multirank) {
        ff_status st = share_weights(&shared, &own, e->comm, m, w);
        if (st != FF_OK) {
            free(own);
            return st;
        }
        use = &shared;
    }
    const ff_device_options dopt = {.max_batch = o->max_batch,
                                    .gpu = o->gpu,
                                    .local_rank = e->comm ? ff_comm_local_rank(e->comm) : 0,
                                    .train_only = o->train_only};
    ff_status st = ff_device_create(&e->dev, m, use, &e->plan, &dopt);
    free(own);
    FF_TRY(st);
    if (o->mode == FF_MODE_DIRECT) FF_TRY(direct_transport(e));
    if (e->comm) FF_TRY(ff_comm_bind_device(e->comm, e->dev));
    return ff_decomp_create(&e->decomp, d->multirank ? o->split : FF_SPLIT_NONE, m, e->dev, e->comm);
}

ff_status ff_exec_create(ff_executor **out, const ff_model *m, const ff_weights *w, const ff_exec_options *o) {
    *out = NULL;
    const ff_mode_desc *d = ff_mode_desc_of(o->mode);
    if (!d) return FF_FAIL(FF_ERR_INPUT, "mode %d: expected serial|mpi|cuda|hybrid|direct", (int)o->mode);
    if (!d->built)
        return FF_FAIL(FF_ERR_INPUT, "mode '%s' is not available in this version of fivefold: %s", d->name, d->missing);
    if (o->max_batch < 1) return FF_FAIL(FF_ERR_INPUT, "max batch %lld: expected at least 1", (long long)o->max_batch);
    if (d->multirank && !o->comm)
        return FF_FAIL(FF_ERR_INPUT, "mode '%s' needs a communicator (run it through the CLI or pass opt.comm)",
                       d->name);
    if (d->multirank && !(d->splits & (1u << o->split)))
        return FF_FAIL(FF_ERR_INPUT, "mode %s: split '%s': expected %s (--split)", d->name, ff_split_name(o->split),
                       o->mode == FF_MODE_MPI ? "batch, rows or replicate" : "batch or rows");
    if (o->fault_layer < -1 || o->fault_layer >= m->n_layers)
        return FF_FAIL(FF_ERR_INPUT, "fault layer %d: model %s has layers 0..%d", o->fault_layer, m->name,
                       m->n_layers - 1);
    if (o->crash_rank != -1 || o->crash_layer != -1) {  // test hooks --inject-crash / --inject-hang
        const char *hook = o->crash_hang ? "--inject-hang" : "--inject-crash";
        if (!d->multirank)
            return FF_FAIL(FF_ERR_INPUT,
                           "%s: mode %s runs one process: expected a multi-rank mode (mpi, hybrid, direct)", hook,
                           d->name);
        if (o->crash_rank < 0 || o->crash_rank >= ff_comm_size(o->comm))
            return FF_FAIL(FF_ERR_INPUT, "%s: rank %d: expected 0..%d (the job has %d rank%s)", hook, o->crash_rank,
                           ff_comm_size(o->comm) - 1, ff_comm_size(o->comm), ff_comm_size(o->comm) == 1 ? "" : "s");
        if (o->crash_layer < 0 || o->crash_layer >= m->n_layers)
            return FF_FAIL(FF_ERR_INPUT, "%s: layer %d: model %s has layers 0..%d", hook, o->crash_layer, m->name,
                           m->n_layers - 1);
    }
    // The deadline first: the weights' broadcast in compose waits under it (and an NCCL comm
    // bootstrapped over o->comm takes it from there).
    if (d->multirank && o->comm_timeout_s >= 0) ff_comm_set_timeout(o->comm, o->comm_timeout_s);
    int vector_bits;
    FF_TRY(ff_cpu_vector_choose(&vector_bits));  // FF_CPU_VECTOR: refused here, before any work, when bad
    ff_cpu_set_vector(vector_bits);              // decided here, before any thread runs a kernel
    ff_executor *e = calloc(1, sizeof *e);
    if (!e) return FF_FAIL(FF_ERR_OOM, "executor: %zu bytes", sizeof *e);
    e->mode = o->mode;
    e->own_model = *m;
    e->model = m = &e->own_model;
    e->opt = *o;
    e->comm = d->multirank ? o->comm : NULL;
    e->rank = e->comm ? ff_comm_rank(e->comm) : 0;
    e->ranks = e->comm ? ff_comm_size(e->comm) : 1;
    ff_trace_reset(&e->trace);
    ff_status st = compose(e, m, w);
    if (st != FF_OK) {
        ff_exec_destroy(e);
        return ff_fail_context(st, "%s mode", d->name);
    }
    if (o->crash_rank >= 0) ff_decomp_set_crash(e->decomp, o->crash_rank, o->crash_layer, o->crash_hang);
    *out = e;
    return FF_OK;
}

void ff_exec_destroy(ff_executor *e) {
    if (!e) return;
    ff_decomp_destroy(e->decomp);
    if (e->comm && e->dev) ff_comm_bind_device(e->comm, NULL);
    if (e->opt.comm) ff_comm_bind_device(e->opt.comm, NULL);  // also forgets a CUDA-aware MPI's device mode
    ff_comm_destroy(e->own_comm);                             // before the device: its stream is on that GPU
    ff_device_destroy(e->dev);
    free(e);
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
    ff_status st =
        ff_decomp_forward(e->decomp, out, in, n, first, last, e->opt.fault_layer, e->opt.trace ? &e->trace : NULL);
    if (st == FF_OK && e->opt.trace) e->trace.calls++;
    return st;
}

void ff_exec_caps_of(ff_exec_caps *out, const ff_executor *e) {
    ff_mode_caps(out, e->mode);
    out->digest_class = e->plan.digest_class;
    if (e->comm) out->transport = ff_comm_transport_name(e->comm);
}

const ff_plan *ff_exec_plan(const ff_executor *e) {
    return &e->plan;
}
const ff_model *ff_exec_model(const ff_executor *e) {
    return e->model;
}
const ff_exec_options *ff_exec_options_of(const ff_executor *e) {
    return &e->opt;
}

void ff_exec_set_trace(ff_executor *e, bool on) {
    e->opt.trace = on;
    ff_trace_reset(&e->trace);
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

ff_status ff_exec_time_resident(ff_executor *e, int64_t n, int iters, double *ms_out) {
    ff_exec_caps caps;
    ff_exec_caps_of(&caps, e);
    if (!caps.resident_timing)
        return FF_FAIL(FF_ERR_INPUT, "mode '%s': device-resident timing is not supported", ff_mode_name(e->mode));
    if (!e->comm) return ff_device_time_resident(e->dev, n, iters, ms_out);
    // Several ranks: each replay starts from a barrier and ends when rank 0 holds the output (its
    // gather waits for every rank); the caller takes each replay's maximum over ranks.
    const int last = e->model->n_layers - 1;
    for (int i = 0; i < iters; i++) {
        FF_TRY(ff_comm_barrier(e->comm));
        const double t0 = ff_now();
        FF_TRY(ff_decomp_replay(e->decomp, n, 0, last));
        ms_out[i] = 1e3 * (ff_now() - t0);
    }
    return FF_OK;
}

ff_status ff_exec_resident_output(ff_executor *e, float *out, int64_t n) {
    ff_exec_caps caps;
    ff_exec_caps_of(&caps, e);
    if (!caps.resident_timing)
        return FF_FAIL(FF_ERR_INPUT, "mode '%s': device-resident timing is not supported", ff_mode_name(e->mode));
    if (!e->comm) return ff_device_resident_output(e->dev, out, n);
    return ff_decomp_resident_output(e->decomp, out, n, e->model->n_layers - 1);
}

ff_status ff_exec_pin_host(ff_executor *e, void *p, size_t bytes) {
    return ff_device_pin_host(e->dev, p, bytes);
}
void ff_exec_unpin_host(ff_executor *e, void *p) {
    ff_device_unpin_host(e->dev, p);
}

struct ff_device *ff_exec_device(ff_executor *e) {
    return e->dev;
}
struct ff_comm *ff_exec_comm(ff_executor *e) {
    return e->comm;
}

float ff_fault_value(float x) {
    return x + 1.0f + 2.0f * fabsf(x);
}
