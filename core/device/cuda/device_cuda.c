// The cuda device (device.h): one GPU, one stream, fivefold's kernels (gpu.h). Plain C over gpu.h
// (no CUDA header), so this file compiles everywhere; without a toolkit gpu_none.c makes create
// fail with FF_ERR_NO_CUDA.
//
// Weights are uploaded once, at create, with one copy of the contiguous parameter buffer, and the
// Winograd layers' transformed weights next to them. Activations stay on the device between
// layers: a run reads the caller's device buffer and leaves its result in one of the device's own
// activation buffers. The layer sequence of a (batch, first, last, input, fault) key is captured
// once into a CUDA graph and replayed (a whole AlexNet forward is one launch). Per the plan, a
// conv/linear followed by relu inside the range is fused (one kernel writes relu(conv)); a
// per-layer run (first == last) computes each layer's own output. The fault hook and the trace use
// the same kernels: the fault is one more tiny kernel (captured too), the trace runs without a
// graph, with an event pair around each layer.
//
// Which algorithm each layer runs is the plan's (plan.h: direct, Winograd with tile m, space-to-
// depth; the vendor library for linear layers with --backend vendor), never an environment
// variable read here. Band runs (ff_device_run_bands) and feature runs (ff_device_run_features)
// are eager, unfused, and use the same kernels, which are position-independent (gpu.h): a band's
// rows get exactly the bits a whole-layer run gives them.
//
// Training (device.h "training"): the ops enqueue gpu.h's training kernels on the same stream,
// all n images per launch; train_forward keeps the activations the backward reads, with the run's
// kernels (a relu fused into the conv/linear before it, as a run fuses them);
// train_backward ping-pongs its data gradients through two buffers of its own.
//
// Threads: a device belongs to one thread at a time, and its ops run on the thread's current GPU
// (create selects o->gpu for the creating thread; a thread on a one-GPU machine always has GPU 0
// current). Several devices may live in one process, each on its own thread (the loopback
// transport's simulated ranks on one GPU): capture is thread-local (ff_gpu_capture_begin), the
// tuning switch is per thread and the tuned choices are shared under a lock (gpu.h,
// ff_gpu_set_tuning), so each device tunes and captures its own graphs independently.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../device_internal.h"
#include "fivefold/gpu.h"
#include "fivefold/winograd.h"

#define CUDA_GRAPHS 16    // cached graphs; the least recently used is replaced
#define CUDA_RESIDENT 16  // remembered inputs of whole-model runs, one per batch size

typedef struct {
    int64_t n;
    int first, last;
    const float *in;      // the input buffer the graph reads (its address is part of the graph)
    int fault;            // the fault layer captured with it, -1 none
    ff_gpu_graph graph;   // NULL: empty slot
    const float *result;  // device buffer holding layer `last`'s output after a replay
    uint64_t used;
} graph_slot;

// The last whole-model run of batch n: what ff_device_time_resident replays.
typedef struct {
    int64_t n;  // 0: empty
    const float *in;
    int fault;
    uint64_t used;
} resident_src;

typedef struct {
    ff_device base;                   // first: device.c sees the header
    ff_gpu_stream stream;             // where work is enqueued now: main, or side while the side lane is on
    ff_gpu_stream main;               // the device's stream (the cuBLAS handle is bound to it)
    ff_gpu_stream side;               // ff_device_side_lane's (made at the first use)
    ff_gpu_event side_done;           // ff_device_join_side's mark on the side stream
    ff_gpu_blas blas;                 // --backend vendor only
    float *d_params;                  // (n_total): the parameter buffer, uploaded once
    size_t param_bytes;               // n_total floats
    bool params_adopted;              // d_params is the caller's (ff_device_adopt_params): not freed here
    const float *d_w[FF_MAX_LAYERS];  // views into d_params; NULL for layers without parameters
    const float *d_b[FF_MAX_LAYERS];
    // Activations: a run writes layer after layer into these, ping-pong, never into its input.
    // Two suffice when the input is the caller's; a run whose input is one of them (a previous
    // run's output handed back) uses the other two, so the third is made the first time that
    // happens. (max_batch, max_act) each.
    float *d_buf[3];
    size_t act_floats;  // max_batch * max_act: the floats of each d_buf
    graph_slot graphs[CUDA_GRAPHS];
    resident_src resident_in[CUDA_RESIDENT];
    uint64_t tick;
    ff_gpu_event ev[2 * FF_MAX_LAYERS];  // trace: start/stop per layer
    bool ev_used[FF_MAX_LAYERS];         // trace: layer i's pair was recorded by the last traced run
    int n_events;
    // Winograd layers (winograd.h, the plan's alg/wg_m): transformed weights, and one workspace
    // shared by all of them, sized for a whole layer at max_batch (a band has a subset of the
    // layer's tiles, so it needs no more).
    float *d_wg[FF_MAX_LAYERS];  // (alpha^2, K, C') (C' = C*s*s for a space-to-depth layer)
    float *d_work;
    int64_t work_floats;
    // The split-K linear layers' partial sums (linear_split.h), one buffer shared by all of them,
    // sized for max_batch; NULL when no linear layer is split (or the vendor library runs them).
    float *d_lin_work;
    int64_t lin_work_floats;
    ff_gpu_event tev[2];                   // resident timing
    ff_gpu_event fence[FF_DEVICE_FENCES];  // ff_device_fence_at (each made at its first use)
    const float *resident;                 // output of the last resident replay
    int64_t resident_n;                    // its batch
    // Training: the backward's data gradients, ping-pong (layer l reads one and writes the other),
    // n * max_act floats each, and one workspace the backward kernels share layer after layer (the
    // conv weight gradients' per-image partials, the flipped conv and transposed linear weights of
    // the data gradients: gpu.h "Workspaces"), the largest any layer needs at n. Made at the first
    // ff_device_train_backward, grown when a larger n comes (never for an n seen before, so never
    // inside a capture of a step that ran eagerly first).
    float *d_grad[2];
    size_t grad_floats;
    // A backward in two passes (ff_device_train_backward_data, then _params): the output gradient
    // of each parameterized layer as the data pass left it (dz for the top layer, the others in
    // d_kept, kept_floats floats), the images, groups and top layer of that pass (bw_n -1: none, or
    // a later one-pass backward has reused the buffers).
    const float *bw_dy[FF_MAX_LAYERS];
    bool bw_pool[FF_MAX_LAYERS];    // layer l's weight gradient takes the pool-sparse kernel (gpu.h)
    bool bw_sparse[FF_MAX_LAYERS];  // bw_dy[l] holds the pool-sparse gradient (gpu.h), not a dense one
    int64_t bw_n, bw_group;
    int bw_top;
    float *d_kept;
    size_t kept_floats;
    float *d_train_work;
    size_t train_work_floats;
    float *d_ones;  // --backend vendor's bias gradients: ones_n floats of 1.0 (a GEMM with a ones vector)
    // cuda_train_backward_reduced: where the own linear kernels write their tree-summed gradients
    // (the parameter buffer's layout), NULL in an ordinary backward (a row per group)
    float *tree_into;
    // The gradient lane (train_backward): a second stream on which a one-pass backward computes
    // each layer's parameter gradients beside the data gradients below it, forked from the stream
    // once the layer's output gradient is there and joined at the end of the backward. Made at its
    // first use; off with FF_TRAIN_CONCURRENT_BACKWARD=0. lane_seen: the batch sizes whose backward
    // has run once (its kernels tuned, on the stream alone: the lane waits until then, so that no
    // timing of the tuner shares the GPU with the lane's kernels).
    ff_gpu_stream lane;
    ff_gpu_event lane_fork, lane_join;
    ff_gpu_event prep_done[FF_MAX_LAYERS];  // layer l's rearranged weights made on the lane (prep_floats)
    ff_gpu_event picks_done;                // the pool-sparse picks made on the lane (pool_picks_early)
    bool lane_off;
    // FF_TRAIN_POOL_SPARSE: where the pool-sparse backward applies (gpu.h), 0 the dense kernels, 1 the
    // pool-sparse weight gradient, 2 (the default) the data gradient too (the pool writing the sparse form)
    int pool_mode;
    int64_t lane_seen[4];
    int64_t ones_n;
    bool conv_x3;      // --precision tf32x3: the convs on tensor cores (gpu.h, ff_gpu_set_conv_math)
    bool short_conv;   // convs of short chains on k_conv_short (gpu.h, ff_gpu_set_short_conv)
    bool wgrad_lanes;  // FF_TRAIN_WGRAD_LANES: few-column weight gradients a warp a strip (gpu.h)
} cuda_device;

// Every op starts here, so the calling thread's conv math (a per-thread switch, like tuning) is
// this device's before the op launches anything.
static cuda_device *cuda_of(ff_device *d) {
    cuda_device *c = (cuda_device *)d;
    ff_gpu_set_conv_math(c->conv_x3);
    ff_gpu_set_short_conv(c->short_conv);
    ff_gpu_set_wgrad_lanes(c->wgrad_lanes);
    return c;
}

// ---------------------------------------------------------------- create / destroy

static void cuda_destroy(ff_device *d) {
    cuda_device *c = cuda_of(d);
    for (int i = 0; i < CUDA_GRAPHS; i++) ff_gpu_graph_destroy(c->graphs[i].graph);
    for (int i = 0; i < c->n_events; i++) ff_gpu_event_destroy(c->ev[i]);
    for (int i = 0; i < 2; i++) ff_gpu_event_destroy(c->tev[i]);
    for (int i = 0; i < FF_DEVICE_FENCES; i++)
        if (c->fence[i]) ff_gpu_event_destroy(c->fence[i]);
    for (int i = 0; i < FF_MAX_LAYERS; i++) ff_gpu_free(c->d_wg[i]);
    ff_gpu_free(c->d_work);
    ff_gpu_free(c->d_lin_work);
    ff_gpu_blas_destroy(c->blas);
    if (!c->params_adopted) ff_gpu_free(c->d_params);
    for (int i = 0; i < 3; i++) ff_gpu_free(c->d_buf[i]);
    for (int i = 0; i < 2; i++) ff_gpu_free(c->d_grad[i]);
    ff_gpu_free(c->d_kept);
    ff_gpu_free(c->d_train_work);
    ff_gpu_free(c->d_ones);
    if (c->side) ff_gpu_stream_destroy(c->side);
    if (c->side_done) ff_gpu_event_destroy(c->side_done);
    if (c->lane_fork) ff_gpu_event_destroy(c->lane_fork);
    if (c->lane_join) ff_gpu_event_destroy(c->lane_join);
    if (c->picks_done) ff_gpu_event_destroy(c->picks_done);
    for (int i = 0; i < FF_MAX_LAYERS; i++)
        if (c->prep_done[i]) ff_gpu_event_destroy(c->prep_done[i]);
    if (c->lane) ff_gpu_stream_destroy(c->lane);
    ff_gpu_stream_destroy(c->main);
    free(c);
}

static bool is_winograd(const ff_plan *p, const ff_model *m, int i) {
    return m->layers[i].op == FF_OP_CONV2D && p->layer[i].alg == FF_CONV_WINOGRAD;
}

// The Winograd layers the plan names: their weights transformed once (U = G g G^T, winograd.h) and
// uploaded, and one workspace for the largest of them at max_batch. The plan (plan.c) picks
// Winograd for every layer ff_winograd_m accepts (stride-1 3x3/5x5 convs, and strided convs that
// space-to-depth makes stride-1 3x3 ones, such as AlexNet's conv1, with at least 16 channels after
// the rewrite) unless told --conv direct; m = 2 instead of the default 4 means smaller tiles (fewer
// wasted outputs on 13x13 maps) but 1.8x (3x3) and 2.25x (5x5) more multiplications. The choice is
// per layer and never depends on the batch, so image i's bits are the same at every N.
static ff_status winograd_setup(cuda_device *c, const ff_model *m, const ff_weights *w, const ff_plan *p,
                                int64_t max_batch) {
    int64_t work = 0;
    for (int i = 0; i < m->n_layers; i++) {
        if (!is_winograd(p, m, i)) continue;
        const ff_layer *L = &m->layers[i];
        const int wm = p->layer[i].wg_m;
        if (wm == 0 || ff_winograd_m(L, wm) != wm)
            return FF_FAIL(FF_ERR_INPUT, "plan: %s as Winograd F(%dx%d): expected a tile size the layer has (%s)",
                           L->name, wm, wm, ff_winograd_m(L, 4) ? "2 or 4" : "none: direct only");
        const int64_t nf = ff_winograd_weight_floats(L, wm);
        float *u = malloc((size_t)nf * sizeof(float));
        if (!u) return FF_FAIL(FF_ERR_OOM, "%s: %lld floats for the Winograd weights", L->name, (long long)nf);
        ff_status st = ff_winograd_weights(u, w->w[i], L, wm);
        if (st == FF_OK) st = ff_gpu_alloc((void **)&c->d_wg[i], (size_t)nf * sizeof(float), "Winograd weights");
        if (st == FF_OK) st = ff_gpu_copy_h2d(c->d_wg[i], u, (size_t)nf * sizeof(float), c->stream);
        if (st == FF_OK) st = ff_gpu_stream_sync(c->stream);  // u is freed next
        free(u);
        FF_TRY(st);
        const int64_t wf = ff_winograd_workspace_floats(L, wm, 0, L->out.h, max_batch);
        if (wf > work) work = wf;
    }
    if (work) FF_TRY(ff_gpu_alloc((void **)&c->d_work, (size_t)work * sizeof(float), "the Winograd workspace"));
    c->work_floats = work;
    return FF_OK;
}

static ff_status cuda_setup(cuda_device *c, const ff_model *m, const ff_weights *w, const ff_plan *p,
                            const ff_device_options *o) {
    int count = 0;
    FF_TRY(ff_gpu_device_count(&count));
    // -1: the node's ranks spread over its GPUs (device.h); 0 for a single process.
    const int gpu = o->gpu >= 0 ? o->gpu : (o->local_rank > 0 ? o->local_rank : 0) % count;
    if (gpu >= count)
        return FF_FAIL(FF_ERR_INPUT, "GPU %d: expected 0..%d (this machine has %d CUDA device%s)", gpu, count - 1,
                       count, count == 1 ? "" : "s");
    FF_TRY(ff_gpu_select(gpu));
    if (p->opt.precision == FF_PRECISION_TF32 && p->opt.backend != FF_BACKEND_VENDOR)
        return FF_FAIL(FF_ERR_INPUT,
                       "--precision tf32 needs --backend vendor: fivefold's own GPU kernels "
                       "run fp32 or tf32x3");
    const bool vendor = p->opt.backend == FF_BACKEND_VENDOR;
    FF_TRY(ff_gpu_stream_create(&c->main));
    c->stream = c->main;
    c->conv_x3 = p->opt.precision == FF_PRECISION_TF32X3;
    c->short_conv = p->opt.short_conv;
    ff_gpu_set_conv_math(c->conv_x3);
    ff_gpu_set_short_conv(c->short_conv);
    if (vendor) FF_TRY(ff_gpu_blas_create(&c->blas, c->stream, p->opt.precision == FF_PRECISION_TF32));

    // Weights: one upload of the contiguous buffer (device.c checked its size); per-layer views at
    // the same offsets as on the host.
    const size_t wbytes = (size_t)w->n_total * sizeof(float);
    FF_TRY(ff_gpu_alloc((void **)&c->d_params, wbytes, "the model's weights"));
    c->param_bytes = wbytes;
    FF_TRY(ff_gpu_copy_h2d(c->d_params, w->data, wbytes, c->stream));
    for (int i = 0; i < m->n_layers; i++) {
        if (w->w[i]) c->d_w[i] = c->d_params + (w->w[i] - w->data);
        if (w->b[i]) c->d_b[i] = c->d_params + (w->b[i] - w->data);
    }

    FF_TRY(winograd_setup(c, m, w, p, o->max_batch));
    if (o->train_only) return ff_gpu_stream_sync(c->stream);  // training sizes its own scratch
    if (!vendor) {                                            // the vendor path (cuBLAS) needs no workspace
        int64_t lin = 0;
        for (int i = 0; i < m->n_layers; i++)
            if (m->layers[i].op == FF_OP_LINEAR) {
                const int64_t f = ff_gpu_linear_workspace_floats(&m->layers[i], o->max_batch);
                if (f > lin) lin = f;
            }
        if (lin)
            FF_TRY(ff_gpu_alloc((void **)&c->d_lin_work, (size_t)lin * sizeof(float), "the split-K linear workspace"));
        c->lin_work_floats = lin;
    }

    if (m->max_act > 0 && o->max_batch > (int64_t)(SIZE_MAX / sizeof(float) / (size_t)m->max_act))
        return FF_FAIL(FF_ERR_INPUT, "max batch %lld x %lld floats per image: expected a size that fits memory",
                       (long long)o->max_batch, (long long)m->max_act);
    c->act_floats = (size_t)o->max_batch * (size_t)m->max_act;
    FF_TRY(ff_gpu_alloc((void **)&c->d_buf[0], c->act_floats * sizeof(float), "activations (buffer 1 of 2)"));
    FF_TRY(ff_gpu_alloc((void **)&c->d_buf[1], c->act_floats * sizeof(float), "activations (buffer 2 of 2)"));
    return ff_gpu_stream_sync(c->stream);  // the weight upload has landed before create returns
}

static const ff_device_ops cuda_ops;  // defined at the end

ff_status ff_device_cuda_create(ff_device **out, const ff_model *m, const ff_weights *w, const ff_plan *p,
                                const ff_device_options *o) {
    *out = NULL;
    cuda_device *c = calloc(1, sizeof *c);
    if (!c) return FF_FAIL(FF_ERR_OOM, "cuda device: out of host memory");
    c->bw_n = -1;  // no backward in two passes under way
    // The trainer refuses other values before it makes a device (train.c); a library caller that
    // makes one itself is refused here rather than given the default silently.
    const char *lane_env = getenv("FF_TRAIN_CONCURRENT_BACKWARD");
    const char *sparse_env = getenv("FF_TRAIN_POOL_SPARSE");
    const char *wl_env = getenv("FF_TRAIN_WGRAD_LANES");
    const bool lane_ok = !lane_env || !strcmp(lane_env, "0") || !strcmp(lane_env, "1");
    const bool sparse_ok =
        !sparse_env || !strcmp(sparse_env, "0") || !strcmp(sparse_env, "1") || !strcmp(sparse_env, "2");
    const bool wl_ok = !wl_env || !strcmp(wl_env, "0") || !strcmp(wl_env, "1");
    if (!lane_ok || !sparse_ok || !wl_ok) {
        free(c);
        return !lane_ok
                   ? FF_FAIL(FF_ERR_INPUT, "cuda device: FF_TRAIN_CONCURRENT_BACKWARD='%s': expected 0 or 1", lane_env)
               : !sparse_ok
                   ? FF_FAIL(FF_ERR_INPUT, "cuda device: FF_TRAIN_POOL_SPARSE='%s': expected 0, 1 or 2 (the default)",
                             sparse_env)
                   : FF_FAIL(FF_ERR_INPUT, "cuda device: FF_TRAIN_WGRAD_LANES='%s': expected 0 (the default) or 1",
                             wl_env);
    }
    c->wgrad_lanes = wl_env && !strcmp(wl_env, "1");
    c->lane_off = lane_env && !strcmp(lane_env, "0");
    c->pool_mode = sparse_env ? sparse_env[0] - '0' : 2;
    ff_status st = cuda_setup(c, m, w, p, o);
    if (st != FF_OK) {
        cuda_destroy(&c->base);
        return ff_fail_context(st, "cuda device");
    }
    c->base.ops = &cuda_ops;
    c->base.host_memory = false;
    *out = &c->base;
    return FF_OK;
}

// ---------------------------------------------------------------- memory

static ff_status cuda_alloc(ff_device *d, float **p, size_t floats, const char *what) {
    (void)d;
    if (floats > SIZE_MAX / sizeof(float))
        return FF_FAIL(FF_ERR_INPUT, "%s: %zu floats: expected at most %zu", what, floats, SIZE_MAX / sizeof(float));
    return ff_gpu_alloc((void **)p, floats * sizeof(float), what);
}

static void cuda_free(ff_device *d, float *p) {
    (void)d;
    ff_gpu_free(p);
}

// Enqueued on the stream like everything else (device.h): the host buffer is the caller's to keep
// until the next ff_device_sync, so a forward is upload, run, download and one synchronisation.
// (A pinned buffer, ff_device_pin_host, makes the copies truly asynchronous; a pageable one is
// staged by the driver.)
static ff_status cuda_upload(ff_device *d, float *dst, const float *src_host, size_t floats) {
    return ff_gpu_copy_h2d(dst, src_host, floats * sizeof(float), cuda_of(d)->stream);
}

static ff_status cuda_download(ff_device *d, float *dst_host, const float *src, size_t floats) {
    return ff_gpu_copy_d2h(dst_host, src, floats * sizeof(float), cuda_of(d)->stream);
}

// Rows [lo, hi) of each of the n*C planes: one strided copy, a plane's rows being contiguous.
static ff_status cuda_copy_rows(ff_device *d, float *dst, int64_t dst_lo, int64_t dst_rows, const float *src,
                                int64_t src_lo, int64_t src_rows, int64_t n, int64_t C, int64_t W, int64_t lo,
                                int64_t hi) {
    cuda_device *c = cuda_of(d);
    const size_t row = (size_t)W * sizeof(float);
    return ff_gpu_copy_2d(dst + (lo - dst_lo) * W, (size_t)dst_rows * row, src + (lo - src_lo) * W,
                          (size_t)src_rows * row, (size_t)(hi - lo) * row, (size_t)(n * C), c->stream);
}

// Synchronous, outside the stream (ff_gpu_copy_any: host or any device buffer of this process, so
// the loopback ranks sharing a GPU copy between each other's buffers). It does not wait for the
// stream's pending work: the callers (the transports, comm.h) synchronise their devices first.
static ff_status cuda_copy_bytes(ff_device *d, void *dst, const void *src, size_t bytes) {
    (void)d;
    return ff_gpu_copy_any(dst, src, bytes);
}

static ff_status cuda_sync(ff_device *d) {
    return ff_gpu_stream_sync(cuda_of(d)->stream);
}

static ff_status cuda_fence(ff_device *d, int k) {
    cuda_device *c = cuda_of(d);
    if (!c->fence[k]) FF_TRY(ff_gpu_event_create(&c->fence[k]));
    return ff_gpu_event_record(c->fence[k], c->stream);
}

static ff_status cuda_wait_fence(ff_device *d, int k) {
    cuda_device *c = cuda_of(d);
    return c->fence[k] ? ff_gpu_event_sync(c->fence[k]) : ff_gpu_stream_sync(c->stream);
}

// Every op enqueues on c->stream, so switching it moves the work that follows. Not while a capture
// records the main stream (the side stream is not part of it).
static ff_status cuda_side_lane(ff_device *d, bool side) {
    cuda_device *c = cuda_of(d);
    if (side && !c->side) FF_TRY(ff_gpu_stream_create_urgent(&c->side));  // ahead of the backward's blocks
    c->stream = side ? c->side : c->main;
    return FF_OK;
}

static ff_status cuda_lane_wait_fence(ff_device *d, int k) {
    cuda_device *c = cuda_of(d);
    if (!c->fence[k]) return FF_FAIL(FF_ERR_INPUT, "lane wait for fence %d: it was never set", k);
    return ff_gpu_stream_wait_event(c->stream, c->fence[k]);
}

static ff_status cuda_join_side(ff_device *d) {
    cuda_device *c = cuda_of(d);
    if (!c->side) return FF_OK;  // no side work was ever enqueued
    if (!c->side_done) FF_TRY(ff_gpu_event_create(&c->side_done));
    FF_TRY(ff_gpu_event_record(c->side_done, c->side));
    return ff_gpu_stream_wait_event(c->main, c->side_done);
}

static struct ff_gpu_stream_s *cuda_gpu_stream(ff_device *d) {
    return cuda_of(d)->stream;
}

static ff_status cuda_pin_host(ff_device *d, void *p, size_t bytes) {
    (void)d;
    return ff_gpu_host_register(p, bytes);
}

static void cuda_unpin_host(ff_device *d, void *p) {
    (void)d;
    ff_gpu_host_unregister(p);
}

static ff_status cuda_host_mapped(ff_device *d, void **dev, void *p) {
    (void)d;
    return ff_gpu_host_mapped(dev, p);
}

static ff_status cuda_fault(ff_device *d, float *x) {
    return ff_gpu_fault(x, cuda_of(d)->stream);
}

// ---------------------------------------------------------------- whole-image runs

static bool within(const float *p, const float *buf, size_t floats) {
    const uintptr_t a = (uintptr_t)p, b = (uintptr_t)buf;
    return buf && a >= b && a < b + floats * sizeof(float);
}

// The activation buffer d_buf[k] holding `p`, -1 if none does.
static int own_buffer(const cuda_device *c, const float *p) {
    for (int k = 0; k < 3; k++)
        if (within(p, c->d_buf[k], c->act_floats)) return k;
    return -1;
}

// The buffer the next layer writes: neither its source nor the run's input.
static float *next_buffer(const cuda_device *c, const float *src, const float *in) {
    const int s = own_buffer(c, src), i = own_buffer(c, in);
    for (int k = 0; k < 3; k++)
        if (k != s && k != i) return c->d_buf[k];
    return NULL;  // not reached: three buffers, two excluded
}

// A run whose input lies in one of the activation buffers needs the third (made once, before any
// capture: allocation is not allowed while capturing).
static ff_status ensure_buffers(cuda_device *c, const float *in) {
    if (c->d_buf[2] || own_buffer(c, in) < 0) return FF_OK;
    return ff_gpu_alloc((void **)&c->d_buf[2], c->act_floats * sizeof(float), "activations (buffer 3 of 3)");
}

// Enqueues layers [first, last] on the stream, reading `in`; *result receives the device buffer
// that holds layer `last`'s output. With `timed`, records an event pair around each layer that
// does work (ev_used says which).
static ff_status enqueue(cuda_device *c, const float **result, const float *in, int64_t n, int first, int last,
                         int fault, bool timed) {
    const ff_model *m = c->base.model;
    const ff_plan *p = &c->base.plan;
    const bool vendor = p->opt.backend == FF_BACKEND_VENDOR;
    const float *src = in;
    for (int i = first; i <= last; i++) {
        const ff_layer *L = &m->layers[i];
        if (timed) c->ev_used[i] = false;
        // conv/linear + relu in one kernel where the plan fuses them, unless the caller wants the
        // conv's own output (range ends at it) or the fault hook must perturb the conv's output
        // before the relu.
        const bool fuse = p->layer[i].fuse_relu && i < last && m->layers[i + 1].op == FF_OP_RELU && fault != i;
        const int produced = fuse ? i + 1 : i;
        if (timed && fuse) c->ev_used[i + 1] = false;
        float *dst;
        if (L->op == FF_OP_FLATTEN && !(fault == i && src == in)) {
            dst = (float *)src;  // (n, C, H, W) is already (n, C*H*W): no work
        } else {
            // (a flatten whose output the fault hook perturbs is copied first: the caller's input,
            // read again by every replay of the graph, must stay as it was.)
            dst = next_buffer(c, src, in);
            if (timed) FF_TRY(ff_gpu_event_record(c->ev[2 * i], c->stream));
            ff_rows rows = ff_rows_full(L);
            if (is_winograd(p, m, i))
                FF_TRY(ff_gpu_conv2d_winograd(dst, src, c->d_wg[i], c->d_b[i], L, p->layer[i].wg_m, fuse, &rows, n,
                                              c->d_work, c->stream));
            else if (L->op == FF_OP_LINEAR && vendor)
                FF_TRY(ff_gpu_linear_vendor(dst, src, c->d_w[i], c->d_b[i], L, fuse, n, c->blas, c->stream));
            else
                FF_TRY(
                    ff_gpu_layer_forward(dst, src, c->d_w[i], c->d_b[i], L, fuse, &rows, n, c->d_lin_work, c->stream));
            if (timed) FF_TRY(ff_gpu_event_record(c->ev[2 * i + 1], c->stream));
            if (timed) c->ev_used[i] = true;
        }
        if (fault >= i && fault <= produced) FF_TRY(ff_gpu_fault(dst, c->stream));
        src = dst;
        i = produced;
    }
    *result = src;
    return FF_OK;
}

static ff_status graph_for(cuda_device *c, graph_slot **out, const float *in, int64_t n, int first, int last,
                           int fault) {
    graph_slot *victim = &c->graphs[0];
    for (int i = 0; i < CUDA_GRAPHS; i++) {
        graph_slot *g = &c->graphs[i];
        if (g->graph && g->n == n && g->first == first && g->last == last && g->in == in && g->fault == fault) {
            g->used = ++c->tick;
            *out = g;
            return FF_OK;
        }
        if (!g->graph || (victim->graph && g->used < victim->used)) victim = g;
    }
    ff_gpu_graph_destroy(victim->graph);
    memset(victim, 0, sizeof *victim);
    // One eager run with tuning on first: each conv/linear shape not seen before picks its fastest
    // tile configuration (no value changes with it); the capture then records those choices. The
    // switch is the calling thread's own (gpu.h), so devices on other threads are not affected.
    const float *ignored = NULL;
    ff_gpu_set_tuning(true);
    ff_status st_tune = enqueue(c, &ignored, in, n, first, last, fault, false);
    ff_gpu_set_tuning(false);
    FF_TRY(st_tune);
    FF_TRY(ff_gpu_stream_sync(c->stream));
    FF_TRY(ff_gpu_capture_begin(c->stream));
    const float *result = NULL;
    ff_status st = enqueue(c, &result, in, n, first, last, fault, false);
    ff_gpu_graph g = NULL;
    ff_status st_end = ff_gpu_capture_end(&g, c->stream);  // always end the capture
    if (st != FF_OK) {
        ff_gpu_graph_destroy(g);
        return st;
    }
    FF_TRY(st_end);
    victim->n = n, victim->first = first, victim->last = last;
    victim->in = in, victim->fault = fault;
    victim->graph = g;
    victim->result = result;
    victim->used = ++c->tick;
    *out = victim;
    return FF_OK;
}

// Remembers the input of a whole-model run of batch n (ff_device_time_resident replays it).
static void remember_whole(cuda_device *c, const float *in, int64_t n, int fault) {
    resident_src *slot = &c->resident_in[0];
    for (int i = 0; i < CUDA_RESIDENT; i++) {
        resident_src *r = &c->resident_in[i];
        if (r->n == n) {
            slot = r;
            break;
        }
        if (!r->n || (slot->n && r->used < slot->used)) slot = r;
    }
    slot->n = n, slot->in = in, slot->fault = fault;
    slot->used = ++c->tick;
}

// The trace's events, made at the first traced run (fivefold bench traces a separate pass after the
// timed ones, so untraced use never pays for them).
static ff_status make_events(cuda_device *c) {
    for (int i = c->n_events; i < 2 * FF_MAX_LAYERS; i++) {
        FF_TRY(ff_gpu_event_create(&c->ev[i]));
        c->n_events = i + 1;
    }
    return FF_OK;
}

// *out is one of the activation buffers, valid until the next run (run_bands and run_features do
// not touch them); a range that does no work (flatten alone) answers `in` itself. The input may
// be a previous run's output: the run then writes into the two other buffers.
static ff_status cuda_run(ff_device *d, const float **out, const float *in, int64_t n, int first, int last,
                          int fault_layer, ff_trace *trace) {
    cuda_device *c = cuda_of(d);
    *out = NULL;
    FF_TRY(ensure_buffers(c, in));
    if (first == 0 && last == d->model->n_layers - 1) remember_whole(c, in, n, fault_layer);
    if (!trace) {
        graph_slot *g;
        FF_TRY(graph_for(c, &g, in, n, first, last, fault_layer));
        FF_TRY(ff_gpu_graph_launch(g->graph, c->stream));
        *out = g->result;
        return FF_OK;
    }
    // Traced: eager (no graph), an event pair around each layer; a fused relu's time is in its
    // conv/linear's row. Copies to and from the host are the caller's (and so are their phases).
    FF_TRY(make_events(c));
    const float *result = NULL;
    FF_TRY(enqueue(c, &result, in, n, first, last, fault_layer, true));
    FF_TRY(ff_gpu_stream_sync(c->stream));
    for (int i = first; i <= last; i++) {
        if (!c->ev_used[i]) continue;
        double t;
        FF_TRY(ff_gpu_event_elapsed(&t, c->ev[2 * i], c->ev[2 * i + 1]));
        trace->seconds[i][FF_PHASE_COMPUTE] += t;
    }
    *out = result;
    return FF_OK;
}

// ---------------------------------------------------------------- bands and features

// One layer on each job's band, eagerly and unfused: the same kernels as a whole-layer run, which
// are position-independent (gpu.h: a Winograd band computes whole tiles anchored at absolute
// rows; the direct conv's and the pool's output elements depend only on their inputs), so the rows
// of a band get the whole run's bits.
static ff_status cuda_run_bands(ff_device *d, const ff_band_job *jobs, int n_jobs, int layer) {
    cuda_device *c = cuda_of(d);
    const ff_model *m = d->model;
    const ff_layer *L = &m->layers[layer];
    const ff_plan *p = &d->plan;
    const bool wg = is_winograd(p, m, layer);
    for (int q = 0; q < n_jobs; q++) {
        const ff_band_job *j = &jobs[q];
        const ff_rows *r = &j->rows;
        if (j->n <= 0 || r->out_hi <= r->out_lo) continue;
        if (L->op == FF_OP_RELU || L->op == FF_OP_LRN) {
            if (r->in_lo != r->out_lo || r->in_hi != r->out_hi)
                return FF_FAIL(FF_ERR_INPUT,
                               "run bands: %s band [%lld, %lld) given input rows [%lld, %lld): expected the same rows",
                               L->name, (long long)r->out_lo, (long long)r->out_hi, (long long)r->in_lo,
                               (long long)r->in_hi);
        } else if (ff_layer_is_spatial(L)) {
            const ff_range need = ff_plan_input_rows(p, m, layer, r->out_lo, r->out_hi);
            if (need.lo < r->in_lo || need.hi > r->in_hi)
                return FF_FAIL(FF_ERR_INPUT,
                               "run bands: %s (%s) band [%lld, %lld) needs input rows [%lld, %lld); got [%lld, %lld)",
                               L->name, p->layer[layer].name, (long long)r->out_lo, (long long)r->out_hi,
                               (long long)need.lo, (long long)need.hi, (long long)r->in_lo, (long long)r->in_hi);
        }
        if (wg) {
            const int wm = p->layer[layer].wg_m;
            const int64_t need = ff_winograd_workspace_floats(L, wm, r->out_lo, r->out_hi, j->n);
            if (need > c->work_floats)
                return FF_FAIL(FF_ERR_INTERNAL, "run bands: %s band needs %lld workspace floats; %lld allocated",
                               L->name, (long long)need, (long long)c->work_floats);
            FF_TRY(ff_gpu_conv2d_winograd(j->out, j->in, c->d_wg[layer], c->d_b[layer], L, wm, false, r, j->n,
                                          c->d_work, c->stream));
        } else if (L->op == FF_OP_LINEAR && p->opt.backend == FF_BACKEND_VENDOR) {
            FF_TRY(
                ff_gpu_linear_vendor(j->out, j->in, c->d_w[layer], c->d_b[layer], L, false, j->n, c->blas, c->stream));
        } else {
            if (L->op == FF_OP_LINEAR && ff_gpu_linear_workspace_floats(L, j->n) > c->lin_work_floats)
                return FF_FAIL(
                    FF_ERR_INTERNAL, "run bands: %s at batch %lld needs %lld workspace floats; %lld allocated", L->name,
                    (long long)j->n, (long long)ff_gpu_linear_workspace_floats(L, j->n), (long long)c->lin_work_floats);
            FF_TRY(ff_gpu_layer_forward(j->out, j->in, c->d_w[layer], c->d_b[layer], L, false, r, j->n, c->d_lin_work,
                                        c->stream));
        }
    }
    return FF_OK;
}

// The linear layer restricted to output features [f_lo, f_hi), as the mpi rows split does on the
// CPU: the same layer with out_features = f_hi - f_lo, weight rows from f_lo, bias from f_lo. The
// split-K (linear_split.h) depends on in_features only, so each feature's chain is the whole
// layer's: the bits equal the whole layer's for these features.
static ff_status cuda_run_features(ff_device *d, float *out, const float *in, int layer, int64_t f_lo, int64_t f_hi,
                                   int64_t n) {
    cuda_device *c = cuda_of(d);
    const ff_layer *L = &d->model->layers[layer];
    const int64_t in_el = ff_shape_numel(L->in);
    const ff_layer sub = ff_linear_features(L, f_lo, f_hi);
    const float *w = c->d_w[layer] + f_lo * in_el, *b = c->d_b[layer] + f_lo;
    if (d->plan.opt.backend == FF_BACKEND_VENDOR)
        return ff_gpu_linear_vendor(out, in, w, b, &sub, false, n, c->blas, c->stream);
    const int64_t need = ff_gpu_linear_workspace_floats(&sub, n);
    if (need > c->lin_work_floats)
        return FF_FAIL(FF_ERR_INPUT, "run features: %s at batch %lld: expected a batch <= %lld (max batch)", L->name,
                       (long long)n, (long long)d->max_batch);
    return ff_gpu_linear(out, in, w, b, &sub, false, n, c->d_lin_work, c->stream);
}

// ---------------------------------------------------------------- device-resident timing

// Event-timed replays of the whole model's graph on the input of the last whole-model run of batch
// n (that buffer must still hold its batch): what PyTorch's device-resident figure measures.
static ff_status cuda_time_resident(ff_device *d, int64_t n, int iters, double *ms_out) {
    cuda_device *c = cuda_of(d);
    const resident_src *src = NULL;
    for (int i = 0; i < CUDA_RESIDENT; i++)
        if (c->resident_in[i].n == n) src = &c->resident_in[i];
    if (!src)
        return FF_FAIL(FF_ERR_INPUT,
                       "resident timing at batch %lld: no run of the whole model at that batch yet (expected "
                       "ff_device_run of layers 0..%d first)",
                       (long long)n, d->model->n_layers - 1);
    for (int i = 0; i < 2; i++)
        if (!c->tev[i]) FF_TRY(ff_gpu_event_create(&c->tev[i]));
    graph_slot *g;
    FF_TRY(graph_for(c, &g, src->in, n, 0, d->model->n_layers - 1, src->fault));
    for (int it = 0; it < iters; it++) {
        FF_TRY(ff_gpu_event_record(c->tev[0], c->stream));
        FF_TRY(ff_gpu_graph_launch(g->graph, c->stream));
        FF_TRY(ff_gpu_event_record(c->tev[1], c->stream));
        double sec;
        FF_TRY(ff_gpu_event_elapsed(&sec, c->tev[0], c->tev[1]));
        ms_out[it] = sec * 1e3;
    }
    c->resident = g->result;
    c->resident_n = n;
    return FF_OK;
}

static ff_status cuda_resident_output(ff_device *d, float *out_host, int64_t n) {
    cuda_device *c = cuda_of(d);
    if (!c->resident) return FF_FAIL(FF_ERR_INPUT, "resident output: no resident replay has run");
    if (n != c->resident_n)
        return FF_FAIL(FF_ERR_INPUT, "resident output of batch %lld: the last resident replay ran batch %lld",
                       (long long)n, (long long)c->resident_n);
    const size_t bytes = (size_t)n * (size_t)d->model->classes * sizeof(float);
    FF_TRY(ff_gpu_copy_d2h(out_host, c->resident, bytes, c->stream));
    return ff_gpu_stream_sync(c->stream);
}

// ---------------------------------------------------------------- training (device.h)
// Every op only enqueues on the device's stream (gpu.h "training" states the kernels' orders);
// nothing here synchronises, except growing the gradient buffers and the workspace (below), once
// per new largest batch, and tuning a conv/linear shape at its first eager launch (tuning_begin).
// Both happen at the first eager call of a step shape, never in a capture of a shape run before.

static float *cuda_params(ff_device *d) {
    return cuda_of(d)->d_params;
}

// device.h: the weights copied into buf (on the stream, ordered before any later work), the views
// moved there, the old buffer freed once the copy has run.
static ff_status cuda_adopt_params(ff_device *d, float *buf) {
    cuda_device *c = cuda_of(d);
    for (int i = 0; i < CUDA_GRAPHS; i++)
        if (c->graphs[i].graph)
            return FF_FAIL(FF_ERR_INPUT,
                           "adopting weights after a forward was captured (the graph holds the "
                           "old addresses): expected before any run");
    if (buf == c->d_params) return FF_OK;
    FF_TRY(ff_gpu_copy_d2d(buf, c->d_params, c->param_bytes, c->stream));
    FF_TRY(ff_gpu_stream_sync(c->stream));
    for (int i = 0; i < FF_MAX_LAYERS; i++) {
        if (c->d_w[i]) c->d_w[i] = buf + (c->d_w[i] - c->d_params);
        if (c->d_b[i]) c->d_b[i] = buf + (c->d_b[i] - c->d_params);
    }
    if (!c->params_adopted) ff_gpu_free(c->d_params);
    c->d_params = buf;
    c->params_adopted = true;
    return FF_OK;
}

// ff_gpu_alloc's FF_ERR_OOM names `what`, the bytes asked for and the bytes free.
static ff_status cuda_alloc_bytes(ff_device *d, void **p, size_t bytes, const char *what) {
    (void)d;
    return ff_gpu_alloc(p, bytes, what);
}

static ff_status cuda_upload_bytes(ff_device *d, void *dst, const void *src_host, size_t bytes) {
    return ff_gpu_copy_h2d(dst, src_host, bytes, cuda_of(d)->stream);
}

static ff_status cuda_synth(ff_device *d, float *x, const ff_synth *s, int64_t first, int64_t n) {
    return ff_gpu_synth(x, s, first, n, cuda_of(d)->stream);
}

static ff_status cuda_gather(ff_device *d, float *x, int32_t *labels, const float *images, const int32_t *all_labels,
                             const int64_t *idx, int64_t per, int64_t n) {
    return ff_gpu_gather(x, labels, images, all_labels, idx, per, n, cuda_of(d)->stream);
}

// Layer by layer over all n images at once (the images are independent on the GPU: `group` does
// not change a bit, so it is not needed), a relu fused into the conv/linear before it (below),
// with the kernels ff_device_run uses: conv
// direct (device.c refused the others), the linear layers' own kernels (or the vendor library
// under --backend vendor, as a run would). A run's fused conv+relu applies the same relu to the
// same conv output, so every act[l + 1] holds the bits a run up to layer l gives. Flatten: a copy
// unless act[l + 1] == act[l] (ff_gpu_layer_forward).
// The split-K workspace the linear layers [0, last] need at n images (0 under the vendor backend).
static size_t lin_work_need(const ff_device *d, int last, int64_t n) {
    if (d->plan.opt.backend == FF_BACKEND_VENDOR) return 0;
    int64_t need = 0;
    for (int l = 0; l <= last; l++)
        if (d->model->layers[l].op == FF_OP_LINEAR) {
            const int64_t f = ff_gpu_linear_workspace_floats(&d->model->layers[l], n);
            if (f > need) need = f;
        }
    return (size_t)need;
}

// Training sizes its batches itself (the executor it runs on is made for a batch of 1): the linear
// workspace grows to the largest n a training op has seen. A new largest n comes on an eager run
// (the trainer captures a shape of work the second time it sees it), never inside a capture, and
// the stream is synchronised before the old buffer is freed.
static ff_status ensure_lin_work(cuda_device *c, size_t floats) {
    if (floats <= (size_t)c->lin_work_floats) return FF_OK;
    FF_TRY(ff_gpu_stream_sync(c->stream));
    ff_gpu_free(c->d_lin_work);
    c->d_lin_work = NULL;
    c->lin_work_floats = 0;
    FF_TRY(ff_gpu_alloc((void **)&c->d_lin_work, floats * sizeof(float), "the split-K linear workspace"));
    c->lin_work_floats = (int64_t)floats;
    return FF_OK;
}

// Under --backend vendor each linear layer runs one cuBLAS call per micro-batch group, all of one
// shape (group rows; a last partial group is the same on every rank count): cuBLAS may pick another
// algorithm, and so another summation order, for another shape, so one call over a rank's n rows
// would make the bits depend on how the batch is dealt (--shares, P). Per group they do not.
static ff_status train_forward(cuda_device *c, float *const *act, int first, int last, int64_t n, int64_t group) {
    ff_device *d = &c->base;
    const ff_model *m = d->model;
    const bool vendor = d->plan.opt.backend == FF_BACKEND_VENDOR;
    FF_TRY(ensure_lin_work(c, lin_work_need(d, last, n)));
    for (int l = first; l <= last; l++) {
        const ff_layer *L = &m->layers[l];
        const ff_rows rows = ff_rows_full(L);
        if (L->op == FF_OP_LINEAR && vendor) {
            const int64_t in_floats = ff_shape_numel(L->in), out_floats = L->out.c;
            for (int64_t at = 0; at < n; at += group) {
                const int64_t rows_here = n - at < group ? n - at : group;
                FF_TRY(ff_gpu_linear_vendor(act[l + 1] + at * out_floats, act[l] + at * in_floats, c->d_w[l], c->d_b[l],
                                            L, false, rows_here, c->blas, c->stream));
            }
            continue;
        }
        if (L->op == FF_OP_LINEAR && ff_gpu_linear_workspace_floats(L, n) > c->lin_work_floats)
            return FF_FAIL(
                FF_ERR_INTERNAL, "train forward: %s at batch %lld needs %lld workspace floats; %lld allocated", L->name,
                (long long)n, (long long)ff_gpu_linear_workspace_floats(L, n), (long long)c->lin_work_floats);
        // A conv/linear with a relu after it in the range writes relu(output) straight into the
        // relu's act[l + 2] (the same bits: the relu of the same values), and act[l + 1] is not
        // written: the backward reads a conv/linear's input and the relu's output, never the
        // pre-activation (device.h). Saves the relu's pass over the activation (conv2's at batch
        // 64: 9.4 MB read and written).
        const bool fuse =
            (L->op == FF_OP_CONV2D || L->op == FF_OP_LINEAR) && l < last && m->layers[l + 1].op == FF_OP_RELU;
        FF_TRY(ff_gpu_layer_forward(act[l + 1 + fuse], act[l], c->d_w[l], c->d_b[l], L, fuse, &rows, n, c->d_lin_work,
                                    c->stream));
        l += fuse;
    }
    return FF_OK;
}

// Tuning (gpu.h, ff_gpu_set_tuning) for the forward and backward GEMMs a training op launches, as a
// run tunes before it captures a graph: each conv/linear shape not seen before times every tile
// configuration on its first eager launch (which synchronises, so never while the stream is being
// captured: the capture then records the remembered choice). No value changes with the choice.
static ff_status tuning_begin(cuda_device *c, bool *on) {
    bool capturing = true;
    FF_TRY(ff_gpu_stream_capturing(c->stream, &capturing));
    *on = !capturing;
    if (*on) ff_gpu_set_tuning(true);
    return FF_OK;
}

static ff_status cuda_train_forward(ff_device *d, float *const *act, int first, int last, int64_t n, int64_t group) {
    cuda_device *c = cuda_of(d);
    bool tuning = false;
    FF_TRY(tuning_begin(c, &tuning));
    const ff_status st = train_forward(c, act, first, last, n, group > 0 ? group : n);
    if (tuning) ff_gpu_set_tuning(false);
    return st;
}

static ff_status cuda_softmax_xent(ff_device *d, float *dz, float *loss, const float *z, const int32_t *labels,
                                   float scale, int64_t classes, int64_t n) {
    return ff_gpu_softmax_xent(dz, loss, z, labels, scale, classes, n, cuda_of(d)->stream);
}

static bool has_params(const ff_layer *L) {
    return L->op == FF_OP_CONV2D || L->op == FF_OP_LINEAR;
}

// The backward workspace layers [0, last] need at n (gpu.h "Workspaces"), in three regions: the
// data gradients' (the conv data gradients' flipped weights, the linear ones' transposed weights and
// split-K sums; layer 0 computes no data gradient, and under the lane its weight gradient's
// partials go here) from its start; after it, at
// train_work_params_at, the conv weight gradients' per-image partials; after that, at
// train_work_prep_at, one slot per layer whose rearranged weights the gradient lane makes ahead
// (prep_floats). The kernels of the first two regions use them one layer after the other on their
// stream, so one region serves all layers; the regions apart let the gradient lane
// (train_backward) run a weight gradient beside a data one.
static int64_t train_work_data_need(const ff_model *m, int last, int64_t n) {
    // (layer 0's weight gradient runs on the stream, in this region, beside the lane's: backward_layers)
    int64_t need =
        m->layers[0].op == FF_OP_CONV2D ? ff_gpu_conv2d_backward_weights_workspace_floats(&m->layers[0], n) : 0;
    for (int l = 1; l <= last; l++) {
        const ff_layer *L = &m->layers[l];
        const int64_t f = L->op == FF_OP_CONV2D   ? ff_gpu_conv2d_backward_data_workspace_floats(L)
                          : L->op == FF_OP_LINEAR ? ff_gpu_linear_backward_data_workspace_floats(L, n)
                                                  : 0;
        if (f > need) need = f;
    }
    return need;
}
// Where the weight gradients' region starts: after the data region, on a 256-byte boundary (the
// buffer's own alignment, so the float4 kernels of every region find theirs).
static int64_t train_work_params_at(const ff_model *m, int last, int64_t n) {
    return (train_work_data_need(m, last, n) + 63) / 64 * 64;
}
static int64_t train_work_prep_at(const ff_model *m, int last, int64_t n) {
    int64_t params = 0;
    for (int l = 0; l <= last; l++) {
        const ff_layer *L = &m->layers[l];
        const int64_t f = L->op == FF_OP_CONV2D ? ff_gpu_conv2d_backward_weights_workspace_floats(L, n) : 0;
        if (f > params) params = f;
    }
    return train_work_params_at(m, last, n) + (params + 63) / 64 * 64;
}
// The floats of layer l's slot for rearranged weights made ahead on the lane (0: none; 256-byte
// multiples): a layer whose data gradient takes a fast path with such weights (a flipping conv,
// a linear layer of the own backend), below the topmost parameterized layer of [0, last] (the
// backward's first data gradient, which has nothing to run beside) and above layer 0 (which
// computes none).
static int64_t prep_floats(const ff_device *d, int last, int l) {
    const ff_model *m = d->model;
    int top = last;
    while (top > 0 && !has_params(&m->layers[top])) top--;
    const ff_layer *L = &m->layers[l];
    if (l <= 0 || l >= top) return 0;
    int64_t f = 0;
    if (L->op == FF_OP_CONV2D && ff_gpu_conv2d_backward_data_flips(L))
        f = ff_gpu_conv2d_backward_data_workspace_floats(L);
    if (L->op == FF_OP_LINEAR && d->plan.opt.backend != FF_BACKEND_VENDOR)
        f = ff_gpu_linear_backward_data_split_offset(L);
    return (f + 63) / 64 * 64;
}
// Where layer l's slot starts (prep_floats(d, last, l) > 0).
static int64_t prep_at(const ff_device *d, int last, int64_t n, int l) {
    int64_t at = train_work_prep_at(d->model, last, n);
    for (int q = 1; q < l; q++) at += prep_floats(d, last, q);
    return at;
}
static size_t train_work_need(const ff_device *d, int last, int64_t n) {
    return (size_t)prep_at(d, last, n, last + 1);
}

// The backward in two passes keeps, per image, the output gradient of every parameterized layer
// below the top one (the top's is dz), one after the other from layer 0 up. kept_offset: where the
// gradient of layer l's input goes when that input is, through flattens, the output of such a layer
// (-1: it is not; it goes through the ping-pong buffers). kept_per_image: all of them, layers [0, last].
static int64_t kept_offset(const ff_model *m, int l) {
    int p = l - 1;
    while (p >= 0 && m->layers[p].op == FF_OP_FLATTEN) p--;
    if (p < 0 || !has_params(&m->layers[p])) return -1;
    int64_t at = 0;
    for (int q = 0; q < p; q++)
        if (has_params(&m->layers[q])) at += ff_shape_numel(m->layers[q].out);
    return at;
}
static int64_t kept_per_image(const ff_model *m, int last) {
    int64_t f = 0;
    for (int q = 0; q < last; q++)
        if (has_params(&m->layers[q])) f += ff_shape_numel(m->layers[q].out);
    return f;
}

static size_t cuda_train_work_bytes(const ff_device *d, int last, int64_t n, bool two_pass) {
    const ff_model *m = d->model;
    // (the gradient lane keeps the output gradients as the two-pass backward does: train_backward)
    const bool kept_too = two_pass || !((const cuda_device *)d)->lane_off;
    const size_t kept = kept_too ? (size_t)n * (size_t)kept_per_image(m, last) : 0;
    return (train_work_need(d, last, n) + 2 * (size_t)n * (size_t)m->max_act + kept + lin_work_need(d, last, n)) *
           sizeof(float);
}

// The two data-gradient buffers, at least `floats` each, and the workspace, at least `work` floats.
// Growing frees buffers that work still pending on the stream may use: the stream is synchronised
// first (a grow happens once per new largest batch, never in steady state).
static ff_status ensure_train_buffers(cuda_device *c, size_t floats, size_t work) {
    const bool grads_ok = c->grad_floats >= floats && c->d_grad[0] && c->d_grad[1];
    const bool work_ok = work == 0 || (c->train_work_floats >= work && c->d_train_work);
    if (grads_ok && work_ok) return FF_OK;
    FF_TRY(ff_gpu_stream_sync(c->stream));
    if (!grads_ok) {
        for (int i = 0; i < 2; i++) {
            ff_gpu_free(c->d_grad[i]);
            c->d_grad[i] = NULL;
        }
        c->grad_floats = 0;
        FF_TRY(ff_gpu_alloc((void **)&c->d_grad[0], floats * sizeof(float), "training data gradients (buffer 1 of 2)"));
        FF_TRY(ff_gpu_alloc((void **)&c->d_grad[1], floats * sizeof(float), "training data gradients (buffer 2 of 2)"));
        c->grad_floats = floats;
    }
    if (!work_ok) {
        ff_gpu_free(c->d_train_work);
        c->d_train_work = NULL;
        c->train_work_floats = 0;
        FF_TRY(ff_gpu_alloc((void **)&c->d_train_work, work * sizeof(float), "the training backward's workspace"));
        c->train_work_floats = work;
    }
    return FF_OK;
}

// The two-pass backward's kept output gradients: at least `floats` (grown as ensure_train_buffers).
static ff_status ensure_kept(cuda_device *c, size_t floats) {
    if (c->kept_floats >= floats && c->d_kept) return FF_OK;
    FF_TRY(ff_gpu_stream_sync(c->stream));
    ff_gpu_free(c->d_kept);
    c->d_kept = NULL;
    c->kept_floats = 0;
    FF_TRY(ff_gpu_alloc((void **)&c->d_kept, floats * sizeof(float), "the backward's kept output gradients"));
    c->kept_floats = floats;
    return FF_OK;
}

// At least n ones on the device (grown on an eager step, as ensure_train_buffers).
static ff_status ensure_ones(cuda_device *c, int64_t n) {
    if (c->ones_n >= n && c->d_ones) return FF_OK;
    FF_TRY(ff_gpu_stream_sync(c->stream));
    ff_gpu_free(c->d_ones);
    c->d_ones = NULL;
    c->ones_n = 0;
    FF_TRY(ff_gpu_alloc((void **)&c->d_ones, (size_t)n * sizeof(float), "a ones vector (vendor bias gradients)"));
    FF_TRY(ff_gpu_fill(c->d_ones, 1.0f, (size_t)n, c->stream));
    c->ones_n = n;
    return FF_OK;
}

// Whether a linear layer's weight gradient is summed over the groups inside its kernel
// (ff_gpu_linear_backward_weights_tree) when the backward is reduced: for layers of at least 64 K
// weights. A small one (mnist's fc2: 1280) gives that kernel a block or two, which walk every image
// stage after stage (20 us at batch 64, as long as fc1's 576 blocks); its rows and the tree over
// them take two short launches and give the same bits (test_gpu_train backward_reduced_bits).
static bool linear_summed_in_kernel(const ff_layer *L) {
    return L->op == FF_OP_LINEAR && L->out_c * ff_shape_numel(L->in) >= 65536;
}

// Which part of the backward train_backward runs: all of it, layer by layer (a layer's parameter
// gradients, then its data gradient); only the data gradients, keeping every parameterized layer's
// output gradient (device.h ff_device_train_backward_data); or only the parameter gradients of
// layers [lo, hi] from those (ff_device_train_backward_params). Each kernel gets the same inputs in
// every pass, so the passes give the bits of the whole.
typedef enum { BACKWARD_ALL, BACKWARD_DATA, BACKWARD_PARAMS } backward_pass;

// Whether a one-pass backward of n images runs its parameter gradients on the gradient lane: unless
// switched off, once a backward of n images has run on the stream alone (lane_seen).
static bool lane_applies(const cuda_device *c, int64_t n) {
    if (c->lane_off) return false;
    for (int i = 0; i < (int)(sizeof c->lane_seen / sizeof c->lane_seen[0]); i++)
        if (c->lane_seen[i] == n) return true;
    return false;
}
static void lane_remember(cuda_device *c, int64_t n) {
    const int k = (int)(sizeof c->lane_seen / sizeof c->lane_seen[0]);
    if (lane_applies(c, n) || c->lane_off) return;
    memmove(c->lane_seen + 1, c->lane_seen, (size_t)(k - 1) * sizeof c->lane_seen[0]);  // the oldest goes
    c->lane_seen[0] = n;
}

// The stream the parameter gradients of the layer whose output gradient the stream has just
// finished go to: the stream itself, or the gradient lane, ordered after everything enqueued on the
// stream so far (the lane's kernels read that gradient and the forward's activations, which the
// stream does not write again before the join).
static ff_status lane_fork(cuda_device *c, bool lanes, ff_gpu_stream *ps) {
    *ps = c->stream;
    if (!lanes) return FF_OK;
    FF_TRY(ff_gpu_event_record(c->lane_fork, c->stream));
    FF_TRY(ff_gpu_stream_wait_event(c->lane, c->lane_fork));
    *ps = c->lane;
    return FF_OK;
}

// Layer l's (conv or own linear) data gradient on the stream: from the weights the lane made in
// `slot` once its event is in, else in one call that rearranges them in the data region first. A
// linear layer's split-K sums go to the data region either way (a conv's call ignores it).
static ff_status data_gradient(cuda_device *c, float *dx, const float *dy, int l, const float *slot, int64_t n,
                               float *work_data) {
    const ff_layer *L = &c->base.model->layers[l];
    if (slot) {
        FF_TRY(ff_gpu_stream_wait_event(c->stream, c->prep_done[l]));
        return ff_gpu_backward_data_from(dx, dy, slot, L, n, work_data, c->stream);
    }
    return L->op == FF_OP_CONV2D ? ff_gpu_conv2d_backward_data(dx, dy, c->d_w[l], L, n, work_data, c->stream)
                                 : ff_gpu_linear_backward_data(dx, dy, c->d_w[l], L, n, work_data, c->stream);
}

// Whether conv layer l of a backward through layers [lo, hi] takes the pool-sparse path (gpu.h):
// a relu and a 2x2/2 max-pool above it in the same backward, the shapes it applies to, not turned
// off. Its weight gradient then reads the pool's structure; with pool_mode 2 the pool's backward
// also writes the sparse form in place of the dense gradient, and its data gradient reads that.
static bool pool_sparse_conv(const cuda_device *c, int l, int lo, int hi) {
    const ff_model *m = c->base.model;
    return l >= lo && l >= 0 && l + 2 <= hi && c->pool_mode > 0 && ff_gpu_pool_sparse_on() &&
           m->layers[l + 1].op == FF_OP_RELU && ff_gpu_pool_sparse_applies(&m->layers[l], &m->layers[l + 2]);
}

// Whether maxpool layer l of a backward through [lo, hi] writes the pool-sparse form (a relu below
// it, a conv below that where the path applies, pool_mode 2) into a kept gradient (kept_offset,
// where backward_layers puts it under lanes): its picks, which read only the forward's activations,
// can then be made on the lane at the start of the backward, beside the layers above.
static bool pool_picks_early(const cuda_device *c, int l, int lo, int hi) {
    const ff_model *m = c->base.model;
    return l - 2 >= lo && l - 1 > 0 && m->layers[l].op == FF_OP_MAXPOOL && m->layers[l - 1].op == FF_OP_RELU &&
           c->pool_mode == 2 && pool_sparse_conv(c, l - 2, lo, hi) && kept_offset(m, l - 1) >= 0;
}

// From layer hi down to lo, all n images per launch: conv/linear write group g's weight and bias
// gradients into row g of grads at the layer's offsets in ff_weights' layout (the weight kernels
// keep each group's sums apart), then the data gradient (not for layer 0: the input's gradient is
// never needed); relu and maxpool pass the gradient back; flatten passes it through unchanged (same
// memory layout). Data gradients ping-pong between d_grad[0] and d_grad[1], except those kept
// (d_kept): the output gradients of the parameterized layers, for the data pass (the parameter pass
// reads them later) and under lanes (the lane reads them while the stream goes on). dz is only
// read. The conv weight and the conv/linear data gradients run their fast paths (gpu.h) with the
// shared workspace's regions (train_work_need). *forked: whether work went to the lane (to be joined).
static ff_status backward_layers(cuda_device *c, bool *forked, backward_pass pass, bool lanes, float *grads,
                                 int64_t grad_stride, const float *dz, const float *const *act, int hi, int lo,
                                 int64_t n, int64_t group) {
    const ff_model *m = c->base.model;
    const bool params = pass != BACKWARD_DATA, data = pass != BACKWARD_PARAMS;
    float *work_data = c->d_train_work, *work_params = c->d_train_work + train_work_params_at(m, hi, n);
    // Under lanes the lane first makes the rearranged weights of the data gradients below the top
    // layer (they read only the weights, which nothing writes before the join), each slot with its
    // event, so that the stream runs only the data gradient itself when it gets there.
    const float *slot[FF_MAX_LAYERS] = {NULL};  // layer l's weights made on the lane, NULL: none
    bool picks[FF_MAX_LAYERS] = {false};        // maxpool l's picks made on the lane
    if (lanes && data) {
        ff_gpu_stream ls = c->stream;
        for (int l = hi; l > lo; l--) {
            if (prep_floats(&c->base, hi, l) == 0 || (c->pool_mode == 2 && pool_sparse_conv(c, l, lo, hi)))
                continue;  // (none to make)
            if (!*forked) FF_TRY(lane_fork(c, true, &ls));
            *forked = true;
            float *at = c->d_train_work + prep_at(&c->base, hi, n, l);
            FF_TRY(ff_gpu_backward_data_weights(at, c->d_w[l], &m->layers[l], c->lane));
            FF_TRY(ff_gpu_event_record(c->prep_done[l], c->lane));
            slot[l] = at;
        }
        // Then the picks of the pool-sparse gradients, into the kept gradient each pool's backward
        // fills (their q part; the stream gates dy into the g part once picks_done is in).
        bool any = false;
        for (int l = hi; l > lo; l--) {
            if (!pool_picks_early(c, l, lo, hi)) continue;
            if (!*forked) FF_TRY(lane_fork(c, true, &ls));
            *forked = true;
            float *gq = c->d_kept + kept_offset(m, l - 1) * n;  // the pool's dx below (keep_at)
            FF_TRY(ff_gpu_pool_sparse_picks(gq, act[l], &m->layers[l - 2], &m->layers[l], n, c->lane));
            picks[l] = any = true;
        }
        if (any) FF_TRY(ff_gpu_event_record(c->picks_done, c->lane));
    }
    const float *cur = dz;
    bool cur_sparse = false;  // cur holds the pool-sparse gradient (gpu.h) of the conv below
    int next = 0;
    for (int l = hi; l >= lo; l--) {
        const ff_layer *L = &m->layers[l];
        const float *x = act[l], *y = act[l + 1];
        // A maxpool on a relu's output (mnist's pool1 on relu2) passes the gradient back through
        // both in one kernel: dx is then the relu's (its input's gradient), and the relu is done.
        // Over a conv where the pool-sparse path applies, that dx is the sparse form (pool_sparse_conv).
        const bool pool_relu = data && L->op == FF_OP_MAXPOOL && l - 1 >= lo && m->layers[l - 1].op == FF_OP_RELU;
        const bool to_sparse = pool_relu && c->pool_mode == 2 && pool_sparse_conv(c, l - 2, lo, hi);
        // A conv reading the sparse form computes its data gradient through the relu below it
        // too (the relu's output is the conv's input): dx is then that relu's input gradient.
        const bool from_sparse = L->op == FF_OP_CONV2D && (pass == BACKWARD_PARAMS ? c->bw_sparse[l] : cur_sparse);
        // Its weight gradient through the pool's structure, from either form (gpu.h)
        const bool under_pool =
            L->op == FF_OP_CONV2D && (pass == BACKWARD_PARAMS ? c->bw_pool[l] : pool_sparse_conv(c, l, lo, hi));
        const bool conv_relu = data && from_sparse && l - 1 >= lo && m->layers[l - 1].op == FF_OP_RELU;
        const int dl = l - pool_relu - conv_relu;  // the layer whose input gradient dx is
        const bool need_dx = data && dl > 0;
        const int64_t keep_at = (pass == BACKWARD_DATA || lanes) && need_dx ? kept_offset(m, dl) : -1;
        float *dx = !need_dx ? NULL : keep_at >= 0 ? c->d_kept + keep_at * n : c->d_grad[next];
        switch (L->op) {
            case FF_OP_CONV2D:
            case FF_OP_LINEAR: {
                if (pass == BACKWARD_DATA) c->bw_dy[l] = cur, c->bw_pool[l] = under_pool, c->bw_sparse[l] = from_sparse;
                if (pass == BACKWARD_PARAMS) cur = c->bw_dy[l];
                // (the data pass has no grads: no pointer is formed from it)
                float *gw = params ? grads + (c->d_w[l] - c->d_params) : NULL;
                float *gb = params ? grads + (c->d_b[l] - c->d_params) : NULL;
                const bool vendor_linear = L->op == FF_OP_LINEAR && c->base.plan.opt.backend == FF_BACKEND_VENDOR;
                // The parameter gradients' stream: the lane, beside the data gradients that follow
                // on the stream; the bottom layer's (no data gradient follows) on the stream
                // itself, which has nothing else left to run, beside what the lane still holds
                // (at batch 256 conv1's weight gradient then runs beside conv2's, not after it).
                ff_gpu_stream ps = c->stream;
                if (params && !vendor_linear && need_dx) {
                    FF_TRY(lane_fork(c, lanes, &ps));
                    *forked |= lanes;
                }
                if (under_pool) {
                    const ff_layer *pool = &m->layers[l + 2];
                    if (params)  // on the lane (or the stream for the bottom layer), as below
                        FF_TRY(ff_gpu_pool_sparse_backward_weights(gw, gb, grad_stride, cur, from_sparse, x, L, pool, n,
                                                                   group, lanes && !need_dx ? work_data : work_params,
                                                                   ps));
                    if (need_dx && from_sparse)
                        FF_TRY(ff_gpu_pool_sparse_backward_data(dx, cur, c->d_w[l], conv_relu ? x : NULL, L, pool, n,
                                                                c->stream));
                    else if (need_dx)
                        FF_TRY(data_gradient(c, dx, cur, l, slot[l], n, work_data));
                } else if (L->op == FF_OP_CONV2D) {
                    if (params) {  // on the lane beside the data gradient: its kernel for that (gpu.h)
                        ff_gpu_set_wgrad_beside(lanes);
                        // (the bottom layer's on the stream: the data region, which the lane's
                        // weight gradients never touch and the stream's data gradients are done with)
                        float *work = lanes && !need_dx ? work_data : work_params;
                        const ff_status w =
                            ff_gpu_conv2d_backward_weights(gw, gb, grad_stride, cur, x, L, n, group, work, ps);
                        ff_gpu_set_wgrad_beside(false);
                        FF_TRY(w);
                    }
                    if (need_dx) FF_TRY(data_gradient(c, dx, cur, l, slot[l], n, work_data));
                } else if (vendor_linear) {  // cuBLAS (gpu.h), both gradients in one call on the stream
                    if (params) FF_TRY(ensure_ones(c, group < n ? group : n));
                    FF_TRY(ff_gpu_linear_vendor_backward(gw, gb, grad_stride, dx, cur, x, c->d_w[l], L, n, group,
                                                         c->d_ones, c->blas, c->stream));
                } else {
                    if (params && c->tree_into && linear_summed_in_kernel(L))  // summed as they are computed
                        FF_TRY(ff_gpu_linear_backward_weights_tree(c->tree_into + (c->d_w[l] - c->d_params), gb,
                                                                   grad_stride, cur, x, L, n, group, ps));
                    else if (params)
                        FF_TRY(ff_gpu_linear_backward_weights(gw, gb, grad_stride, cur, x, L, n, group, ps));
                    if (need_dx) FF_TRY(data_gradient(c, dx, cur, l, slot[l], n, work_data));
                }
                break;
            }
            case FF_OP_RELU:
                if (need_dx) FF_TRY(ff_gpu_relu_backward(dx, cur, y, n * ff_shape_numel(L->out), c->stream));
                break;
            case FF_OP_MAXPOOL:
                if (need_dx && to_sparse && picks[l]) {  // dx is the kept gradient the lane put q in
                    FF_TRY(ff_gpu_stream_wait_event(c->stream, c->picks_done));
                    FF_TRY(ff_gpu_pool_sparse_gate(dx, cur, y, &m->layers[l - 2], L, n, c->stream));
                } else if (need_dx && to_sparse)
                    FF_TRY(ff_gpu_pool_sparse_gradient(dx, cur, x, &m->layers[l - 2], L, n, c->stream));
                else if (need_dx)
                    FF_TRY(ff_gpu_maxpool_backward(dx, cur, x, L, n, pool_relu, c->stream));
                break;
            default: continue;  // flatten (device.c admits no other op)
        }
        l -= pool_relu + conv_relu;
        if (!need_dx) continue;
        cur = dx;
        cur_sparse = to_sparse;
        if (keep_at < 0) next ^= 1;  // the ping-pong buffer not holding cur
    }
    return FF_OK;
}

// A backward pass (backward_layers) with its buffers made. A one-pass backward (BACKWARD_ALL) runs
// its parameter gradients on the gradient lane where lane_applies, and the stream joins the lane
// before returning, also after an error (a capture must end joined): whatever follows on the
// stream (the tree, the update, the next forward) sees every gradient, and the bits are those of
// one stream (each kernel reads and writes the same buffers; nothing is summed across kernels).
static ff_status train_backward(cuda_device *c, backward_pass pass, float *grads, int64_t grad_stride, const float *dz,
                                const float *const *act, int hi, int lo, int64_t n, int64_t group) {
    const ff_model *m = c->base.model;
    const bool data = pass != BACKWARD_PARAMS;
    // (cuBLAS's data gradients are per group: another group size would not give one pass's bits)
    if (pass == BACKWARD_PARAMS && (c->bw_n != n || c->bw_group != group || hi > c->bw_top))
        return FF_FAIL(FF_ERR_INPUT,
                       "train backward: parameter gradients of layers [%d, %d] for %lld images in groups of %lld, "
                       "expected a data pass of as many images and groups through layer %d first",
                       lo, hi, (long long)n, (long long)group, hi);
    // What the lane needs (its stream and events, the kept gradients) is made by every one-pass
    // backward while the lane is on, also by those on one stream: the first backward of a batch
    // size runs eagerly (lane_applies), and a later one may be captured, which must not allocate
    // (session 30: a resumed run's first captured step did, and its capture failed).
    const bool lane_on = pass == BACKWARD_ALL && !c->lane_off;
    // (An ordinary stream: as an urgent one its blocks went first to a free SM, conv2's two
    // gradients at batch 256 then shared the GPU, and the step took 0.865 ms against 0.845,
    // bench/results/issue15-s32: the data gradient, on the critical path, was held back.)
    if (lane_on && !c->lane) FF_TRY(ff_gpu_stream_create(&c->lane));
    if (lane_on && !c->lane_fork) FF_TRY(ff_gpu_event_create(&c->lane_fork));
    if (lane_on && !c->lane_join) FF_TRY(ff_gpu_event_create(&c->lane_join));
    if (lane_on && !c->picks_done) FF_TRY(ff_gpu_event_create(&c->picks_done));
    for (int l = lo + 1; lane_on && l <= hi; l++)
        if (prep_floats(&c->base, hi, l) > 0 && !c->prep_done[l]) FF_TRY(ff_gpu_event_create(&c->prep_done[l]));
    const size_t kept_need = (size_t)n * (size_t)kept_per_image(m, hi);
    if (data) {
        FF_TRY(ensure_train_buffers(c, (size_t)n * (size_t)m->max_act, train_work_need(&c->base, hi, n)));
        if (pass == BACKWARD_DATA || lane_on) FF_TRY(ensure_kept(c, kept_need));
        c->bw_n = -1;  // the kept gradients are (re)written now
    }
    const bool lanes = lane_on && lane_applies(c, n) && c->kept_floats >= kept_need;
    bool forked = false;
    ff_status st = backward_layers(c, &forked, pass, lanes, grads, grad_stride, dz, act, hi, lo, n, group);
    if (forked) {
        ff_status j = ff_gpu_event_record(c->lane_join, c->lane);
        if (j == FF_OK) j = ff_gpu_stream_wait_event(c->stream, c->lane_join);
        if (st == FF_OK) st = j;
    }
    FF_TRY(st);
    if (pass == BACKWARD_DATA) {
        c->bw_n = n;
        c->bw_group = group;
        c->bw_top = hi;
    }
    if (pass == BACKWARD_ALL) lane_remember(c, n);
    return FF_OK;
}

// A pass runs with the fast paths' tuning switched on around it (tuning_begin).
static ff_status run_backward(cuda_device *c, backward_pass pass, float *grads, int64_t grad_stride, const float *dz,
                              const float *const *act, int hi, int lo, int64_t n, int64_t group) {
    bool tuning = false;
    FF_TRY(tuning_begin(c, &tuning));
    const ff_status st = train_backward(c, pass, grads, grad_stride, dz, act, hi, lo, n, group);
    if (tuning) ff_gpu_set_tuning(false);
    return st;
}

static ff_status cuda_train_backward(ff_device *d, float *grads, int64_t grad_stride, float *dz,
                                     const float *const *act, int last, int64_t n, int64_t group) {
    return run_backward(cuda_of(d), BACKWARD_ALL, grads, grad_stride, dz, act, last, 0, n, group);
}
static ff_status cuda_train_backward_data(ff_device *d, float *dz, const float *const *act, int last, int64_t n,
                                          int64_t group) {
    return run_backward(cuda_of(d), BACKWARD_DATA, NULL, 0, dz, act, last, 0, n, group);
}
static ff_status cuda_train_backward_params(ff_device *d, float *grads, int64_t grad_stride, const float *const *act,
                                            int hi, int lo, int64_t n, int64_t group) {
    return run_backward(cuda_of(d), BACKWARD_PARAMS, grads, grad_stride, NULL, act, hi, lo, n, group);
}

_Static_assert(FF_DEVICE_TREE_MAX_GROUPS <= FF_GPU_TREE_MAX_GROUPS,
               "the fused kernel takes every group count the op admits");
// device.h ff_device_train_backward_reduced: the own linear kernels sum their groups in the tree
// as they go (ff_gpu_linear_backward_weights_tree), every other parameter's rows are written as in
// a backward and then reduced, one tree per run of adjacent such parameters.
static ff_status cuda_train_backward_reduced(ff_device *d, float *grad, float *grads, int64_t grad_stride, float *dz,
                                             const float *const *act, int last, int64_t n, int64_t group,
                                             int64_t count) {
    cuda_device *c = cuda_of(d);
    const ff_model *m = d->model;
    const bool fuse = d->plan.opt.backend != FF_BACKEND_VENDOR;
    c->tree_into = fuse ? grad : NULL;
    const ff_status st = cuda_train_backward(d, grads, grad_stride, dz, act, last, n, group);
    c->tree_into = NULL;
    FF_TRY(st);
    // The row-written tensors (weights, biases) in the parameter buffer's order, joined where one
    // ends where the next begins: one tree per run. count: where the last run ends at most.
    const int64_t rows = (n + group - 1) / group;
    if (rows == 1 && grad == grads) return FF_OK;  // one group written where its sum belongs: done
    int64_t run_lo = 0, run_hi = 0;                // the run gathered so far: [run_lo, run_hi)
    for (int l = 0; l <= last; l++) {
        const ff_layer *L = &m->layers[l];
        if (!c->d_w[l]) continue;
        const bool summed = fuse && linear_summed_in_kernel(L);  // its weights are (its bias: a row per group)
        const int64_t t_lo[2] = {c->d_w[l] - c->d_params, c->d_b[l] ? c->d_b[l] - c->d_params : 0};
        const int64_t t_len[2] = {summed ? 0 : L->n_weight, c->d_b[l] ? L->n_bias : 0};
        for (int k = 0; k < 2; k++) {
            if (t_len[k] == 0) continue;
            if (t_lo[k] != run_hi || run_hi == run_lo) {  // not adjacent (or nothing gathered): flush
                if (run_hi > run_lo)
                    FF_TRY(ff_gpu_tree_reduce(grad + run_lo, grads + run_lo, rows, grad_stride, run_hi - run_lo,
                                              c->stream));
                run_lo = t_lo[k];
            }
            run_hi = t_lo[k] + t_len[k];
        }
    }
    if (run_hi > count)
        return FF_FAIL(FF_ERR_INTERNAL, "train backward reduced: parameters up to %lld, %lld summed", (long long)run_hi,
                       (long long)count);
    if (run_hi > run_lo)
        FF_TRY(ff_gpu_tree_reduce(grad + run_lo, grads + run_lo, rows, grad_stride, run_hi - run_lo, c->stream));
    return FF_OK;
}

static ff_status cuda_tree_reduce(ff_device *d, float *out, float *rows, int64_t nrows, int64_t stride, int64_t len) {
    return ff_gpu_tree_reduce(out, rows, nrows, stride, len, cuda_of(d)->stream);
}

static ff_status cuda_sgd(ff_device *d, float *w, float *mom, const float *g, int64_t count, float lr, float momentum,
                          float weight_decay, bool first) {
    return ff_gpu_sgd(w, mom, g, count, lr, momentum, weight_decay, first, cuda_of(d)->stream);
}

static ff_status cuda_tree_sgd(ff_device *d, float *w_out, const float *w, float *mom, const ff_tree_rows *rows,
                               int64_t count, float lr, float momentum, float weight_decay, bool first) {
    return ff_gpu_tree_sgd(w_out, w, mom, rows, count, lr, momentum, weight_decay, first, cuda_of(d)->stream);
}

// Captured work (device.h): the device's stream captured into a CUDA graph. An ff_device_graph is
// the instantiated graph itself.
static ff_status cuda_capture_begin(ff_device *d) {
    return ff_gpu_capture_begin(cuda_of(d)->stream);
}
static ff_status cuda_capture_end(ff_device *d, ff_device_graph **out) {
    ff_gpu_graph g = NULL;
    FF_TRY(ff_gpu_capture_end(&g, cuda_of(d)->stream));
    *out = (ff_device_graph *)g;
    return FF_OK;
}
static ff_status cuda_graph_launch(ff_device *d, ff_device_graph *g) {
    return ff_gpu_graph_launch((ff_gpu_graph)g, cuda_of(d)->stream);
}
static void cuda_graph_destroy(ff_device *d, ff_device_graph *g) {
    (void)d;
    ff_gpu_graph_destroy((ff_gpu_graph)g);
}

static const ff_device_ops cuda_ops = {
    .destroy = cuda_destroy,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .upload = cuda_upload,
    .download = cuda_download,
    .copy_rows = cuda_copy_rows,
    .copy_bytes = cuda_copy_bytes,
    .sync = cuda_sync,
    .run = cuda_run,
    .run_bands = cuda_run_bands,
    .run_features = cuda_run_features,
    .fault = cuda_fault,
    .time_resident = cuda_time_resident,
    .resident_output = cuda_resident_output,
    .pin_host = cuda_pin_host,
    .host_mapped = cuda_host_mapped,
    .unpin_host = cuda_unpin_host,
    .fence = cuda_fence,
    .wait_fence = cuda_wait_fence,
    .side_lane = cuda_side_lane,
    .lane_wait_fence = cuda_lane_wait_fence,
    .join_side = cuda_join_side,
    .gpu_stream = cuda_gpu_stream,
    .params = cuda_params,
    .adopt_params = cuda_adopt_params,
    .alloc_bytes = cuda_alloc_bytes,
    .upload_bytes = cuda_upload_bytes,
    .gather = cuda_gather,
    .synth = cuda_synth,
    .capture_begin = cuda_capture_begin,
    .capture_end = cuda_capture_end,
    .graph_launch = cuda_graph_launch,
    .graph_destroy = cuda_graph_destroy,
    .train_forward = cuda_train_forward,
    .softmax_xent = cuda_softmax_xent,
    .train_backward = cuda_train_backward,
    .train_backward_reduced = cuda_train_backward_reduced,
    .train_backward_data = cuda_train_backward_data,
    .train_backward_params = cuda_train_backward_params,
    .train_work_bytes = cuda_train_work_bytes,
    .tree_reduce = cuda_tree_reduce,
    .sgd = cuda_sgd,
    .tree_sgd = cuda_tree_sgd,
};
