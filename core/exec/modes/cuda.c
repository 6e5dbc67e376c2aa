// Mode `cuda` (v3): every layer on one GPU. Plain C over gpu.h (no CUDA header), so this file
// compiles everywhere; without a toolkit gpu_none.c makes create fail with FF_ERR_NO_CUDA.
//
// Weights are uploaded once, at create, with one copy of the contiguous parameter buffer.
// Activations stay on the device between layers: one host->device copy of the first layer's input,
// one device->host copy of the last layer's output. The layer sequence of a (batch, first, last)
// triple is captured once into a CUDA graph and replayed (a whole AlexNet forward is one launch).
// A conv/linear followed by relu inside the range is fused (one kernel writes relu(conv)); a
// per-layer run (first == last) computes each layer's own output. The fault hook and the trace use
// the same kernels: the fault is one more tiny kernel (captured too), the trace runs without a
// graph, with an event pair around each layer and each copy.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fivefold/executor.h"
#include "fivefold/gpu.h"
#include "fivefold/winograd.h"

#define CUDA_GRAPHS 16  // cached (n, first, last) graphs; least recently used is replaced

typedef struct {
    int64_t n;
    int first, last;
    ff_gpu_graph graph;   // NULL: empty slot
    const float *result;  // device buffer holding layer `last`'s output after a replay
    uint64_t used;
} graph_slot;

typedef struct {
    ff_executor base;
    ff_gpu_stream stream;
    ff_gpu_blas blas;                 // --backend vendor only
    float *d_params;                  // (n_total): the parameter buffer, uploaded once
    const float *d_w[FF_MAX_LAYERS];  // views into d_params; NULL for layers without parameters
    const float *d_b[FF_MAX_LAYERS];
    float *d_in;      // (max_batch, max_act): first layer's input
    float *d_buf[2];  // (max_batch, max_act) each: ping-pong activations
    graph_slot graphs[CUDA_GRAPHS];
    uint64_t tick;
    ff_gpu_event ev[2 * FF_MAX_LAYERS + 4];  // trace: start/stop per layer, then H2D and D2H pairs
    int n_events;
    // Winograd layers (winograd.h): tile size m (0: the direct kernel), transformed weights, and
    // one workspace shared by all of them (sized for max_batch).
    int wg_m[FF_MAX_LAYERS];
    float *d_wg[FF_MAX_LAYERS];  // (alpha^2, K, C') (C' = C*s*s for a space-to-depth layer)
    float *d_work;
    // The split-K linear layers' partial sums (linear_split.h), one buffer shared by all of them,
    // sized for max_batch; NULL when no linear layer is split.
    float *d_lin_work;
    char alg[FF_MAX_LAYERS][16];  // ff_exec_layer_algorithm's answer
    ff_gpu_event tev[2];          // resident timing
    const float *resident;        // output of the last resident replay
} cuda_exec;

static void cuda_destroy(ff_executor *e) {
    cuda_exec *c = (cuda_exec *)e;
    for (int i = 0; i < CUDA_GRAPHS; i++) ff_gpu_graph_destroy(c->graphs[i].graph);
    for (int i = 0; i < c->n_events; i++) ff_gpu_event_destroy(c->ev[i]);
    for (int i = 0; i < 2; i++) ff_gpu_event_destroy(c->tev[i]);
    for (int i = 0; i < FF_MAX_LAYERS; i++) ff_gpu_free(c->d_wg[i]);
    ff_gpu_free(c->d_work);
    ff_gpu_free(c->d_lin_work);
    ff_gpu_blas_destroy(c->blas);
    ff_gpu_free(c->d_params);
    ff_gpu_free(c->d_in);
    ff_gpu_free(c->d_buf[0]);
    ff_gpu_free(c->d_buf[1]);
    ff_gpu_stream_destroy(c->stream);
    free(c);
}

// The trace's events: made at create when tracing is asked for, or at the first traced forward
// when a caller turns e->opt.trace on later (fivefold bench does, for its separate traced pass).
static ff_status make_events(cuda_exec *c) {
    for (int i = c->n_events; i < 2 * FF_MAX_LAYERS + 4; i++) {
        FF_TRY(ff_gpu_event_create(&c->ev[i]));
        c->n_events = i + 1;
    }
    return FF_OK;
}

// The conv algorithm: Winograd (winograd.h) for every layer ff_winograd_m accepts (stride-1 3x3/5x5
// convs, and strided convs that space-to-depth makes stride-1 3x3 ones, such as AlexNet's conv1,
// with at least 16 channels after the rewrite), the direct kernel for the rest.
// FF_CUDA_CONV=direct keeps the direct kernel everywhere; FF_WINOGRAD_M=2 picks F(2x2, r x r)
// instead of the default F(4x4, r x r) (smaller tiles: fewer wasted outputs on 13x13 maps, but 1.8x
// (3x3) and 2.25x (5x5) more multiplications). The choice is per layer and never depends on the
// batch, so image i's bits are the same at every N. FF_CUDA_S2D=0 keeps strided convs (conv1) on
// the direct kernel (the space-to-depth rewrite is on by default: see verify/gpu/PERF.md).
static ff_status winograd_setup(cuda_exec *c, const ff_model *m, const ff_weights *w, const ff_exec_options *o) {
    const char *conv = getenv("FF_CUDA_CONV");
    const char *ms = getenv("FF_WINOGRAD_M");
    const bool direct_only = conv && strcmp(conv, "direct") == 0;
    if (conv && !direct_only && strcmp(conv, "winograd") != 0)
        return FF_FAIL(FF_ERR_INPUT, "FF_CUDA_CONV=%s: expected direct or winograd", conv);
    const int wmm = ms ? atoi(ms) : 4;
    if (wmm != 2 && wmm != 4) return FF_FAIL(FF_ERR_INPUT, "FF_WINOGRAD_M=%s: expected 2 or 4", ms);
    const char *s2d = getenv("FF_CUDA_S2D");
    if (s2d && strcmp(s2d, "0") != 0 && strcmp(s2d, "1") != 0)
        return FF_FAIL(FF_ERR_INPUT, "FF_CUDA_S2D=%s: expected 0 or 1", s2d);
    const bool s2d_on = !s2d || strcmp(s2d, "1") == 0;
    int64_t work = 0;
    for (int i = 0; i < m->n_layers; i++) {
        const ff_layer *L = &m->layers[i];
        snprintf(c->alg[i], sizeof c->alg[i], "direct");
        const int wm = direct_only || (L->stride > 1 && !s2d_on) ? 0 : ff_winograd_m(L, wmm);
        if (!wm) continue;
        const int64_t nf = ff_winograd_weight_floats(L, wm);
        float *u = malloc((size_t)nf * sizeof(float));
        if (!u) return FF_FAIL(FF_ERR_OOM, "%s: %lld floats for the Winograd weights", L->name, (long long)nf);
        ff_status st = ff_winograd_weights(u, w->w[i], L, wm);
        if (st == FF_OK) st = ff_gpu_alloc((void **)&c->d_wg[i], (size_t)nf * sizeof(float), "Winograd weights");
        if (st == FF_OK) st = ff_gpu_copy_h2d(c->d_wg[i], u, (size_t)nf * sizeof(float), c->stream);
        if (st == FF_OK) st = ff_gpu_stream_sync(c->stream);  // u is freed next
        free(u);
        FF_TRY(st);
        c->wg_m[i] = wm;
        snprintf(c->alg[i], sizeof c->alg[i], "winograd-%d", wm);
        const int64_t wf = ff_winograd_workspace_floats(L, wm, 0, L->out.h, o->max_batch);
        if (wf > work) work = wf;
    }
    if (work) FF_TRY(ff_gpu_alloc((void **)&c->d_work, (size_t)work * sizeof(float), "the Winograd workspace"));
    return FF_OK;
}

static ff_status cuda_setup(cuda_exec *c, const ff_model *m, const ff_weights *w, const ff_exec_options *o) {
    int count = 0;
    FF_TRY(ff_gpu_device_count(&count));
    FF_TRY(ff_gpu_select(0));
    if (o->precision == FF_PRECISION_TF32 && o->backend != FF_BACKEND_VENDOR)
        return FF_FAIL(FF_ERR_INPUT,
                       "--precision tf32 needs --backend vendor: fivefold's own GPU kernels "
                       "are fp32 only");
    FF_TRY(ff_gpu_stream_create(&c->stream));
    if (o->backend == FF_BACKEND_VENDOR)
        FF_TRY(ff_gpu_blas_create(&c->blas, c->stream, o->precision == FF_PRECISION_TF32));

    // Weights: one upload of the contiguous buffer; per-layer views at the same offsets as on the host.
    if (w->n_total != m->n_weights_total)
        return FF_FAIL(FF_ERR_INPUT, "weights hold %lld floats; model %s needs %lld", (long long)w->n_total, m->name,
                       (long long)m->n_weights_total);
    const size_t wbytes = (size_t)w->n_total * sizeof(float);
    FF_TRY(ff_gpu_alloc((void **)&c->d_params, wbytes, "the model's weights"));
    FF_TRY(ff_gpu_copy_h2d(c->d_params, w->data, wbytes, c->stream));
    for (int i = 0; i < m->n_layers; i++) {
        if (w->w[i]) c->d_w[i] = c->d_params + (w->w[i] - w->data);
        if (w->b[i]) c->d_b[i] = c->d_params + (w->b[i] - w->data);
    }

    FF_TRY(winograd_setup(c, m, w, o));
    if (o->backend != FF_BACKEND_VENDOR) {  // the vendor path (cuBLAS) needs no workspace
        int64_t lin = 0;
        for (int i = 0; i < m->n_layers; i++)
            if (m->layers[i].op == FF_OP_LINEAR) {
                const int64_t f = ff_gpu_linear_workspace_floats(&m->layers[i], o->max_batch);
                if (f > lin) lin = f;
            }
        if (lin)
            FF_TRY(ff_gpu_alloc((void **)&c->d_lin_work, (size_t)lin * sizeof(float), "the split-K linear workspace"));
    }

    const size_t abytes = (size_t)o->max_batch * (size_t)m->max_act * sizeof(float);
    FF_TRY(ff_gpu_alloc((void **)&c->d_in, abytes, "the input activations"));
    FF_TRY(ff_gpu_alloc((void **)&c->d_buf[0], abytes, "activations (buffer 1 of 2)"));
    FF_TRY(ff_gpu_alloc((void **)&c->d_buf[1], abytes, "activations (buffer 2 of 2)"));
    if (o->trace) FF_TRY(make_events(c));
    return ff_gpu_stream_sync(c->stream);  // the weight upload has landed before create returns
}

static const ff_mode_ext cuda_ext;  // the optional hooks, defined at the end

static ff_status cuda_create(ff_executor **out, const ff_model *m, const ff_weights *w, const ff_exec_options *o) {
    cuda_exec *c = calloc(1, sizeof *c);
    if (!c) return FF_FAIL(FF_ERR_OOM, "cuda executor: out of host memory");
    ff_status st = cuda_setup(c, m, w, o);
    if (st != FF_OK) {
        cuda_destroy(&c->base);
        return ff_fail_context(st, "cuda mode");
    }
    c->base.rank = 0;
    c->base.ranks = 1;
    c->base.ext = &cuda_ext;
    *out = &c->base;
    return FF_OK;
}

static bool has_params(const ff_layer *L) {
    return L->op == FF_OP_CONV2D || L->op == FF_OP_LINEAR;
}

// Enqueues layers [first, last] on the stream, reading c->d_in; *result receives the device buffer
// that holds layer `last`'s output. With `timed`, records an event pair around each layer.
static ff_status enqueue(cuda_exec *c, int64_t n, int first, int last, const float **result, bool timed) {
    const ff_model *m = c->base.model;
    const int fault = c->base.opt.fault_layer;
    const float *src = c->d_in;
    for (int i = first; i <= last; i++) {
        const ff_layer *L = &m->layers[i];
        // conv/linear + relu in one kernel, unless the caller wants the conv's own output (range ends
        // at it) or the fault hook must perturb the conv's output before the relu.
        const bool fuse = has_params(L) && i < last && m->layers[i + 1].op == FF_OP_RELU && fault != i;
        const int produced = fuse ? i + 1 : i;
        float *dst;
        if (L->op == FF_OP_FLATTEN) {
            dst = (float *)src;  // (n, C, H, W) is already (n, C*H*W): no work
        } else {
            dst = src == c->d_buf[0] ? c->d_buf[1] : c->d_buf[0];
            if (timed) FF_TRY(ff_gpu_event_record(c->ev[2 * i], c->stream));
            ff_rows rows = ff_rows_full(L);
            if (L->op == FF_OP_CONV2D && c->wg_m[i])
                FF_TRY(ff_gpu_conv2d_winograd(dst, src, c->d_wg[i], c->d_b[i], L, c->wg_m[i], fuse, &rows, n, c->d_work,
                                              c->stream));
            else if (L->op == FF_OP_LINEAR && c->base.opt.backend == FF_BACKEND_VENDOR)
                FF_TRY(ff_gpu_linear_vendor(dst, src, c->d_w[i], c->d_b[i], L, fuse, n, c->blas, c->stream));
            else
                FF_TRY(
                    ff_gpu_layer_forward(dst, src, c->d_w[i], c->d_b[i], L, fuse, &rows, n, c->d_lin_work, c->stream));
            if (timed) FF_TRY(ff_gpu_event_record(c->ev[2 * i + 1], c->stream));
        }
        if (fault >= i && fault <= produced) FF_TRY(ff_gpu_fault(dst, c->stream));
        src = dst;
        i = produced;
    }
    *result = src;
    return FF_OK;
}

static ff_status graph_for(cuda_exec *c, graph_slot **out, int64_t n, int first, int last) {
    graph_slot *victim = &c->graphs[0];
    for (int i = 0; i < CUDA_GRAPHS; i++) {
        graph_slot *g = &c->graphs[i];
        if (g->graph && g->n == n && g->first == first && g->last == last) {
            g->used = ++c->tick;
            *out = g;
            return FF_OK;
        }
        if (!g->graph || (victim->graph && g->used < victim->used)) victim = g;
    }
    ff_gpu_graph_destroy(victim->graph);
    memset(victim, 0, sizeof *victim);
    // One eager run with tuning on first: each conv/linear shape not seen before picks its fastest
    // tile configuration (no value changes with it); the capture then records those choices.
    const float *ignored = NULL;
    ff_gpu_set_tuning(true);
    ff_status st_tune = enqueue(c, n, first, last, &ignored, false);
    ff_gpu_set_tuning(false);
    FF_TRY(st_tune);
    FF_TRY(ff_gpu_stream_sync(c->stream));
    FF_TRY(ff_gpu_capture_begin(c->stream));
    const float *result = NULL;
    ff_status st = enqueue(c, n, first, last, &result, false);
    ff_gpu_graph g = NULL;
    ff_status st_end = ff_gpu_capture_end(&g, c->stream);  // always end the capture
    if (st != FF_OK) {
        ff_gpu_graph_destroy(g);
        return st;
    }
    FF_TRY(st_end);
    victim->n = n, victim->first = first, victim->last = last;
    victim->graph = g;
    victim->result = result;
    victim->used = ++c->tick;
    *out = victim;
    return FF_OK;
}

static ff_status cuda_forward(ff_executor *e, float *out, const float *in, int64_t n, int first, int last) {
    cuda_exec *c = (cuda_exec *)e;
    const ff_model *m = e->model;
    const size_t in_bytes = (size_t)n * (size_t)ff_shape_numel(m->layers[first].in) * sizeof(float);
    const size_t out_bytes = (size_t)n * (size_t)ff_shape_numel(m->layers[last].out) * sizeof(float);
    const float *result = NULL;
    if (!e->opt.trace) {
        graph_slot *g;
        FF_TRY(ff_gpu_copy_h2d(c->d_in, in, in_bytes, c->stream));
        FF_TRY(graph_for(c, &g, n, first, last));
        FF_TRY(ff_gpu_graph_launch(g->graph, c->stream));
        FF_TRY(ff_gpu_copy_d2h(out, g->result, out_bytes, c->stream));
        return ff_gpu_stream_sync(c->stream);
    }
    FF_TRY(make_events(c));
    ff_gpu_event *io = &c->ev[2 * FF_MAX_LAYERS];  // H2D start/stop, D2H start/stop
    FF_TRY(ff_gpu_event_record(io[0], c->stream));
    FF_TRY(ff_gpu_copy_h2d(c->d_in, in, in_bytes, c->stream));
    FF_TRY(ff_gpu_event_record(io[1], c->stream));
    FF_TRY(enqueue(c, n, first, last, &result, true));
    FF_TRY(ff_gpu_event_record(io[2], c->stream));
    FF_TRY(ff_gpu_copy_d2h(out, result, out_bytes, c->stream));
    FF_TRY(ff_gpu_event_record(io[3], c->stream));
    FF_TRY(ff_gpu_stream_sync(c->stream));
    double t;
    FF_TRY(ff_gpu_event_elapsed(&t, io[0], io[1]));
    e->trace.seconds[first][FF_PHASE_H2D] += t;
    FF_TRY(ff_gpu_event_elapsed(&t, io[2], io[3]));
    e->trace.seconds[last][FF_PHASE_D2H] += t;
    for (int i = first; i <= last; i++) {
        const ff_layer *L = &m->layers[i];
        const bool fused = has_params(L) && i < last && m->layers[i + 1].op == FF_OP_RELU && e->opt.fault_layer != i;
        if (L->op != FF_OP_FLATTEN) {  // a fused relu's time is in its conv/linear's row
            FF_TRY(ff_gpu_event_elapsed(&t, c->ev[2 * i], c->ev[2 * i + 1]));
            e->trace.seconds[i][FF_PHASE_COMPUTE] += t;
        }
        if (fused) i++;
    }
    return FF_OK;
}

static const char *cuda_layer_algorithm(ff_executor *e, int layer) {
    return ((cuda_exec *)e)->alg[layer];
}

// Event-timed replays of the whole forward's graph on the input already on the device (d_in holds
// the last forward's batch): what PyTorch's device-resident figure measures.
static ff_status cuda_time_resident(ff_executor *e, int64_t n, int iters, double *ms_out) {
    cuda_exec *c = (cuda_exec *)e;
    for (int i = 0; i < 2; i++)
        if (!c->tev[i]) FF_TRY(ff_gpu_event_create(&c->tev[i]));
    graph_slot *g;
    FF_TRY(graph_for(c, &g, n, 0, e->model->n_layers - 1));
    for (int it = 0; it < iters; it++) {
        FF_TRY(ff_gpu_event_record(c->tev[0], c->stream));
        FF_TRY(ff_gpu_graph_launch(g->graph, c->stream));
        FF_TRY(ff_gpu_event_record(c->tev[1], c->stream));
        double sec;
        FF_TRY(ff_gpu_event_elapsed(&sec, c->tev[0], c->tev[1]));
        ms_out[it] = sec * 1e3;
    }
    c->resident = g->result;
    return FF_OK;
}

static ff_status cuda_resident_output(ff_executor *e, float *out, int64_t n) {
    cuda_exec *c = (cuda_exec *)e;
    if (!c->resident) return FF_FAIL(FF_ERR_INPUT, "resident output: no resident replay has run");
    const size_t bytes = (size_t)n * (size_t)e->model->classes * sizeof(float);
    FF_TRY(ff_gpu_copy_d2h(out, c->resident, bytes, c->stream));
    return ff_gpu_stream_sync(c->stream);
}

static const ff_mode_ext cuda_ext = {cuda_layer_algorithm, cuda_time_resident, cuda_resident_output};

const ff_mode_impl ff_mode_cuda_impl = {"cuda", cuda_create, cuda_forward, cuda_destroy};
