// Data-parallel SGD with the deterministic micro-batch reduction described in train.h.
#include "fivefold/train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fivefold/device.h"
#include "fivefold/layers_cpu.h"
#include "fivefold/layers_cpu_backward.h"
#include "fivefold/plan.h"
#include "fivefold/trace.h"

// The device work of one step (enqueue_step): what a captured graph replays, so also its key.
typedef struct {
    int64_t b, nimg, nloc;  // global batch, this rank's images and micro-batches
    bool resident;          // the batch is gathered from the resident set (else uploaded)
    bool local;             // the tree over this rank's micro-batches into t->grad
    bool update;            // the SGD step too (one process: nothing to exchange first)
    bool first;             // the first SGD step (momentum = gradient)
    int slot;               // the pinned staging slot (ff_train_steps)
    bool parts;             // the backward and the buckets' preparation are left out (overlap: step_core)
    bool exchange;          // the queued exchange too (t->capture_exchange: captured with the step)
} step_work;
// Steps ff_train_steps enqueues before it waits for the device: each has its own pinned index and
// loss slot (and so its own captured graph), so the host never writes what a queued step reads.
#define FF_TRAIN_INFLIGHT 4
// One process's step hands all its micro-batches to ff_device_train_backward_reduced.
_Static_assert(FF_MAX_MICROBATCHES <= FF_DEVICE_TREE_MAX_GROUPS, "the device sums every micro-batch count a step has");
_Static_assert(1 + 2 * FF_MAX_LAYERS <= FF_DEVICE_FENCES, "every bucket a fence on each lane (tail_fence)");
// Captured graphs kept: one per in-flight slot, for a full batch and for an epoch's short last one.
#define FF_TRAIN_GRAPH_SLOTS (2 * FF_TRAIN_INFLIGHT)

// Everything lives on the executor's device (device.h): the host only cuts the batch, reads the
// losses and (for P > 1) hands device buffers to the executor's communicator.
struct ff_trainer {
    const ff_model *m;
    ff_weights *w;   // the caller's weights: ff_trainer_sync writes them, ff_trainer_load reads them
    ff_weights mom;  // host copy of the momentum buffers (the same two ways)
    ff_train_options o;
    ff_executor *exec;
    ff_device *dev;  // the executor's device
    ff_comm *comm;   // the executor's communicator (bound to dev's memory); NULL for one process
    int rank, P;
    int last;  // index of the logits layer (the last non-softmax layer)
    int64_t N, classes, per;
    int64_t cap;  // images one rank computes per step: nslots micro-batches of M
    int64_t nslots, nmb_max;
    int64_t share_below[FF_MAX_RANKS_TRAIN + 1];  // prefix sums of the ranks' shares; [P] = total
    // Gradient buckets (make_buckets), top down: parameter range [lo, hi) in ff_weights' layout and
    // the layers [layer_lo, layer_hi] whose backward completes it.
    int nbuckets;
    struct {
        int64_t lo, hi;
        int layer_lo, layer_hi;
        int64_t recv_root;  // where in recvbuf my reduced slice of it lies once gather_sharded has summed it
        // The last step fused the tree with the update without keeping the sum (exchange_bucket):
        // gather_sharded adds these rows again (own row from own_at) before it gathers row 0.
        ff_tree_rows unsummed;
        // ... and the communicator's fused exchange (ff_comm_fused_tree_sgd) read the peers' rows
        // where they lay, so gather_sharded first fetches them (fetch_fused_rows).
        bool rows_not_here;
    } bucket[FF_MAX_LAYERS];
    // The deterministic exchange with P > 1 updates by slices (exchange_bucket): each rank's SGD
    // covers only its slice of each bucket and the updated weights are all-gathered, so the
    // momentum and t->grad are whole on a rank only after ff_trainer_sync gathers them.
    bool sharded;
    bool overlap;  // buckets exchanged during the backward (options, P > 1, a device that can)
    // The deterministic exchange queued on the device (a comm that can, ff_comm_set_queued: NCCL):
    // a step's collectives are ordered with its kernels by the GPU's streams, and the host waits
    // once per FF_TRAIN_INFLIGHT steps (queued_steps) instead of several times per step.
    bool queued;
    // ... and captured with the rest of the step (NCCL's collectives inside the step's CUDA graph:
    // one launch per step); FF_CAPTURE_EXCHANGE=0 enqueues the exchange call by call after the
    // captured forward and backward instead.
    bool capture_exchange;
    // ff_train_options.overlap_steps where it applies (overlap, queued): the step's exchange is not
    // joined at its end; tail_pending: the last step's exchange may still run on the side lane,
    // each bucket's end marked by fence tail_fence(b) (the next forward waits bucket by bucket;
    // join_tail before anything else reads what it writes).
    bool pipelined, tail_pending;
    // device memory
    float *act[FF_MAX_LAYERS + 1];  // act[0]: input (cap, input); act[l+1]: output of layer l (cap, out)
    float *dz;                      // (cap, classes): logits' gradient, then backward scratch
    float *loss;                    // (cap): per-image loss
    int32_t *labels;                // (cap)
    int64_t *idx;                   // (cap): sample indices into the resident set
    float *grads;                   // (nslots, N): each micro-batch's gradient
    float *grad;                    // (N): the reduced gradient (one process, one slot: grads itself)
    float *d_mom;                   // (N): momentum buffers
    float *sendbuf;                 // (nslots * N): block sums' slices, packed per bucket (P > 1)
    float *recvbuf;                 // (nmb_max * slice_room): every block sum's copy of my slices
    // Which of these (and the weights) live in the communicator's registered windows (comm.h,
    // ff_comm_alloc_window): the comm frees those, the trainer the rest.
    void *windowed[8];
    int n_windowed;
    float *res_images;           // (res_n, per): the resident training set, normalised
    int32_t *res_labels;         // (res_n)
    const ff_dataset *resident;  // the set held there (ff_trainer_set_resident), NULL none
    // host memory
    float *x_host;         // (cap, per): a batch normalised on the host (no resident set)
    int32_t *labels_host;  // (cap)
    int64_t *idx_host;     // (FF_TRAIN_INFLIGHT, cap): one slot per step in flight (ff_train_steps)
    float *loss_host;      // (FF_TRAIN_INFLIGHT, cap)
    // the same two buffers as the device's kernels reach them (ff_device_host_mapped): the gather
    // reads a step's indices and the loss kernel writes its losses there, with no copy in the
    // step; NULL where the device cannot (the cpu device) or FF_TRAIN_HOST_COPIES=1
    const int64_t *idx_mapped;
    float *loss_mapped;
    int slot;          // the slot the step being enqueued stages through
    double *losses;    // (FF_TRAIN_INFLIGHT, B): each step's global per-image losses, in batch order
    float *grad_host;  // (N): the reduced gradient at the last ff_trainer_sync
    // captured steps (run_step_work): key, whether seen once, the graph once captured
    struct {
        step_work key;
        bool seen;
        ff_device_graph *g;
    } graph[FF_TRAIN_GRAPH_SLOTS];
    int graph_next;
    bool no_graphs;  // FF_TRAIN_GRAPHS=0 in the environment: every step eager (A/B timing, debugging)
    int64_t steps;
    int64_t samples;  // images trained on since creation (sum of every step's b)
    ff_train_phases phases;
};

ff_status ff_reduce_parse(ff_reduce *out, const char *s) {
    if (strcmp(s, "deterministic") == 0)
        *out = FF_REDUCE_DETERMINISTIC;
    else if (strcmp(s, "allreduce") == 0)
        *out = FF_REDUCE_ALLREDUCE;
    else
        return FF_FAIL(FF_ERR_INPUT, "--reduce '%s': expected 'deterministic' or 'allreduce'", s);
    return FF_OK;
}

const char *ff_reduce_name(ff_reduce r) {
    return r == FF_REDUCE_ALLREDUCE ? "allreduce" : "deterministic";
}

void ff_train_options_default(ff_train_options *o) {
    memset(o, 0, sizeof *o);  // equal shares, and no field left undefined
    o->batch = 64;
    o->microbatch = 8;
    o->lr = 0.01f;
    o->momentum = 0.9f;
    o->weight_decay = 0.0f;
    o->reduce = FF_REDUCE_DETERMINISTIC;
    o->overlap = true;
    o->overlap_steps = FF_OVERLAP_STEPS_AUTO;
    o->bucket_floats = 0;  // auto (train.h)
    ff_exec_options_default(&o->exec);
    o->exec.plan.conv = FF_CONV_DIRECT;
}

int64_t ff_train_default_bucket_floats(ff_mode mode, int64_t params) {
    if (mode != FF_MODE_DIRECT) return FF_TRAIN_BUCKET_FLOATS;
    const int64_t quarter = params / 4 + (params % 4 != 0);  // ceil(params / 4)
    return quarter < FF_TRAIN_DIRECT_BUCKET_FLOATS ? quarter : FF_TRAIN_DIRECT_BUCKET_FLOATS;
}

bool ff_train_overlaps_steps(const ff_train_options *o, int P, int64_t params) {
    if (!o->overlap) return false;
    if (o->overlap_steps == FF_OVERLAP_STEPS_ON) return true;
    return o->overlap_steps == FF_OVERLAP_STEPS_AUTO && P >= FF_TRAIN_STEPS_AUTO_RANKS &&
           params >= FF_TRAIN_STEPS_AUTO_FLOATS;
}

// ceil(a / b) for a >= 0, b >= 1, without the overflow of (a + b - 1) / b at a near INT64_MAX.
static int64_t ceil_div(int64_t a, int64_t b) {
    return a / b + (a % b != 0);
}

static void *xcalloc(size_t n, size_t sz, ff_status *st, const char *what) {
    void *p = calloc(n ? n : 1, sz);
    if (!p && *st == FF_OK) *st = FF_FAIL(FF_ERR_OOM, "trainer: cannot allocate %zu bytes for %s", n * sz, what);
    return p;
}

static bool windowed(const ff_trainer *t, const void *p) {
    for (int i = 0; i < t->n_windowed; i++)
        if (t->windowed[i] == p) return true;
    return false;
}

// The fence that marks bucket b's weights gathered on the side lane (t->pipelined): after the
// buckets' own fences b + 1 (b < FF_MAX_LAYERS) in the device's FF_DEVICE_FENCES.
static int tail_fence(int b) {
    return 1 + FF_MAX_LAYERS + b;
}

// Whatever is enqueued next on the main lane runs after the last step's exchange (t->tail_pending).
static ff_status join_tail(ff_trainer *t) {
    if (!t->tail_pending) return FF_OK;
    t->tail_pending = false;
    return ff_device_join_side(t->dev);
}

void ff_trainer_destroy(ff_trainer *t) {
    if (!t) return;
    if (t->dev && t->tail_pending) {  // the last step's exchange may still write these buffers
        (void)join_tail(t);
        (void)ff_device_sync(t->dev);
    }
    if (t->dev) {
        for (int i = 0; i < FF_TRAIN_GRAPH_SLOTS; i++) ff_device_graph_destroy(t->dev, t->graph[i].g);
        for (int l = 0; l <= FF_MAX_LAYERS; l++)
            if (l == 0 || t->act[l] != t->act[l - 1]) ff_device_free(t->dev, t->act[l]);
        float *bufs[] = {t->dz,
                         t->loss,
                         t->grads,
                         t->grad != t->grads ? t->grad : NULL,
                         t->d_mom,
                         t->sendbuf,
                         t->recvbuf,
                         t->res_images,
                         (float *)t->labels,
                         (float *)t->idx,
                         (float *)t->res_labels};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
            if (!windowed(t, bufs[i])) ff_device_free(t->dev, bufs[i]);
        ff_device_unpin_host(t->dev, t->x_host);
        ff_device_unpin_host(t->dev, t->labels_host);
        ff_device_unpin_host(t->dev, t->idx_host);
        ff_device_unpin_host(t->dev, t->loss_host);
    }
    ff_exec_destroy(t->exec);
    free(t->x_host);
    free(t->labels_host);
    free(t->idx_host);
    free(t->loss_host);
    free(t->losses);
    free(t->grad_host);
    ff_weights_free(&t->mom);
    free(t);
}

ff_status ff_train_options_check(const ff_train_options *o) {
    if (o->n_shares < 0 || o->n_shares > FF_MAX_RANKS_TRAIN)
        return FF_FAIL(FF_ERR_INPUT, "--shares: %d values, expected 1..%d (one per rank)", o->n_shares,
                       FF_MAX_RANKS_TRAIN);
    for (int r = 0; r < o->n_shares; r++)
        if (o->shares[r] < 1 || o->shares[r] > FF_TRAIN_SHARE_MAX)
            return FF_FAIL(FF_ERR_INPUT, "--shares: rank %d's share %d, expected 1..%d", r, (int)o->shares[r],
                           FF_TRAIN_SHARE_MAX);
    if (o->batch < 1) return FF_FAIL(FF_ERR_INPUT, "--batch %lld: expected >= 1", (long long)o->batch);
    if (o->overlap_steps != FF_OVERLAP_STEPS_OFF && o->overlap_steps != FF_OVERLAP_STEPS_ON &&
        o->overlap_steps != FF_OVERLAP_STEPS_AUTO)
        return FF_FAIL(FF_ERR_INPUT, "overlap_steps %d (--overlap): expected off, on or auto (train.h)",
                       (int)o->overlap_steps);
    if (o->bucket_floats < 0)
        return FF_FAIL(FF_ERR_INPUT, "gradient bucket of %lld floats (--bucket-mb): expected at least 1 (0: auto)",
                       (long long)o->bucket_floats);
    if (o->microbatch < 1 || o->microbatch > o->batch)
        return FF_FAIL(FF_ERR_INPUT, "--microbatch %lld: expected 1..batch (%lld)", (long long)o->microbatch,
                       (long long)o->batch);
    if (ceil_div(o->batch, o->microbatch) > FF_MAX_MICROBATCHES)
        return FF_FAIL(FF_ERR_INPUT,
                       "--batch %lld / --microbatch %lld makes more than %d "
                       "micro-batches (raise --microbatch)",
                       (long long)o->batch, (long long)o->microbatch, FF_MAX_MICROBATCHES);
    // !(x > lo && x <= hi) is also true for NaN, so NaN is refused by the same test.
    if (!(o->lr > 0.0f && o->lr <= FF_TRAIN_LR_MAX))
        return FF_FAIL(FF_ERR_INPUT, "--lr %g: expected a finite learning rate in (0, %g]", (double)o->lr,
                       (double)FF_TRAIN_LR_MAX);
    if (!(o->momentum >= 0.0f && o->momentum < 1.0f))
        return FF_FAIL(FF_ERR_INPUT, "--momentum %g: expected a finite momentum in [0, 1)", (double)o->momentum);
    if (!(o->weight_decay >= 0.0f && o->weight_decay < 1.0f))
        return FF_FAIL(FF_ERR_INPUT, "--weight-decay %g: expected a finite weight decay in [0, 1)",
                       (double)o->weight_decay);
    if (o->reduce != FF_REDUCE_DETERMINISTIC && o->reduce != FF_REDUCE_ALLREDUCE)
        return FF_FAIL(FF_ERR_INPUT, "--reduce %d: expected deterministic or allreduce", (int)o->reduce);
    return FF_OK;
}

// Element count a * b of a buffer, refused (not wrapped) when it does not fit in int64 or size_t
// bytes of `elem` each.
static ff_status checked_count(int64_t *out, int64_t a, int64_t b, size_t elem, const char *what) {
    int64_t n;
    size_t bytes;
    if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &n) || __builtin_mul_overflow((size_t)n, elem, &bytes))
        return FF_FAIL(FF_ERR_INPUT, "trainer: %s of %lld x %lld elements overflows the address space", what,
                       (long long)a, (long long)b);
    *out = n;
    return FF_OK;
}

// The multi-rank twin of a single-process mode (a trainer given a communicator).
static ff_mode multirank_mode(ff_mode m) {
    return m == FF_MODE_SERIAL ? FF_MODE_MPI : m == FF_MODE_CUDA ? FF_MODE_HYBRID : m;
}

// Gradient buckets: runs of consecutive parameterised layers, top down (the order the backward
// finishes them), each closed once it holds FF_TRAIN_BUCKET_FLOATS or more (a large layer is a
// bucket alone; the small top layers go together, so each collective moves enough bytes to run at
// the link's speed; ff_train_options.bucket_floats). The last bucket's layers reach down to layer 0.
static void make_buckets(ff_trainer *t) {
    const ff_weights *w = t->w;
    int nb = 0, layer_hi = t->last;
    int64_t hi = t->N, lo = t->N;
    for (int l = t->last; l >= 0; l--) {
        if (!w->w[l]) continue;
        lo = w->w[l] - w->data;
        if (hi - lo >= t->o.bucket_floats && l > 0) {
            t->bucket[nb].lo = lo;
            t->bucket[nb].hi = hi;
            t->bucket[nb].layer_lo = l;
            t->bucket[nb].layer_hi = layer_hi;
            nb++;
            hi = lo;
            layer_hi = l - 1;
        }
    }
    if (hi > 0 || nb == 0) {  // what is left (the bottom layers' parameters), down to layer 0
        t->bucket[nb].lo = 0;
        t->bucket[nb].hi = hi;
        t->bucket[nb].layer_hi = layer_hi;
        nb++;
    }
    t->bucket[nb - 1].layer_lo = 0;
    t->nbuckets = nb;
}

// Floats one rank's slices of every bucket take when each bucket's slice gets the largest slice's
// room, ceil(len / P) (exchange_bucket: the same offsets on every rank): at most ceil(N / P) plus
// one per bucket.
static int64_t slice_room(const ff_trainer *t) {
    return ceil_div(t->N, t->P) + t->nbuckets;
}

// One of the communicator's registered windows for `floats` (P > 1; the comm's collectives move
// those fastest and take fewer SMs from the backward beside them), noted so that destroy leaves
// it to the comm; *p = NULL where there is none. Every rank asks for the same sizes in the same
// order (a collective).
static ff_status take_window(ff_trainer *t, float **p, int64_t floats, const char *what) {
    void *w = NULL;
    if (t->P > 1 && t->n_windowed < (int)(sizeof t->windowed / sizeof t->windowed[0]))
        FF_TRY(ff_comm_alloc_window(t->comm, &w, (size_t)floats * sizeof(float), what));
    if (w) t->windowed[t->n_windowed++] = w;
    *p = w;
    return FF_OK;
}

// A buffer NCCL moves: a window where there is one, else the device's memory.
static ff_status alloc_exchanged(ff_trainer *t, float **p, int64_t floats, const char *what) {
    FF_TRY(take_window(t, p, floats, what));
    return *p ? FF_OK : ff_device_alloc(t->dev, p, (size_t)floats, what);
}

// Device buffers of the trainer (sizes checked by the caller).
static ff_status alloc_device(ff_trainer *t) {
    ff_device *d = t->dev;
    const ff_model *m = t->m;
    const int64_t cap = t->cap, N = t->N;
    FF_TRY(ff_device_alloc(d, &t->act[0], (size_t)(cap * t->per), "training input"));
    for (int l = 0; l <= t->last; l++) {
        if (m->layers[l].op == FF_OP_FLATTEN) {  // same memory layout: the flatten's output is its input
            t->act[l + 1] = t->act[l];
            continue;
        }
        FF_TRY(ff_device_alloc(d, &t->act[l + 1], (size_t)(cap * ff_shape_numel(m->layers[l].out)), "activations"));
    }
    FF_TRY(ff_device_alloc(d, &t->dz, (size_t)(cap * t->classes), "logits' gradient"));
    FF_TRY(ff_device_alloc(d, &t->loss, (size_t)cap, "losses"));
    FF_TRY(ff_device_alloc_bytes(d, (void **)&t->labels, (size_t)cap * sizeof(int32_t), "labels"));
    FF_TRY(ff_device_alloc_bytes(d, (void **)&t->idx, (size_t)cap * sizeof(int64_t), "sample indices"));
    FF_TRY(ff_device_alloc(d, &t->d_mom, (size_t)N, "momentum buffers"));
    float *w = NULL;  // the weights too, where windows exist: the all-gather of the updated slices writes them
    FF_TRY(take_window(t, &w, N, "the weights"));
    if (w) FF_TRY(ff_device_adopt_params(d, w));
    FF_TRY(alloc_exchanged(t, &t->grads, t->nslots * N, "micro-batch gradients"));
    if (t->P == 1 && t->nslots == 1)  // one micro-batch a step: its row is the tree's sum (a copy
        t->grad = t->grads;           // of N floats a step saved: 0.49 ms of the MLP's 27.8 on an H200)
    else
        FF_TRY(alloc_exchanged(t, &t->grad, N, "the reduced gradient"));
    if (t->P > 1) {
        FF_TRY(alloc_exchanged(t, &t->sendbuf, t->nslots * N, "reduce send buffer"));
        FF_TRY(alloc_exchanged(t, &t->recvbuf, t->nmb_max * slice_room(t), "reduce receive buffer"));
    }
    return FF_OK;
}

// Micro-batches [*j0, *j1) of a step's nmb belong to rank r: in proportion to the shares (train.h).
static void owned(int64_t *j0, int64_t *j1, const ff_trainer *t, int64_t nmb, int64_t r) {
    const int64_t total = t->share_below[t->P];
    *j0 = nmb * t->share_below[r] / total;
    *j1 = nmb * t->share_below[r + 1] / total;
}

// Slots: the most micro-batches any rank owns in any step of up to nmb_max micro-batches (a short
// last batch has fewer; with shares the largest owner is not always the same).
static int64_t slots_for(const ff_trainer *t, int64_t nmb_max) {
    int64_t most = 1;
    for (int64_t nmb = 1; nmb <= nmb_max; nmb++)
        for (int64_t r = 0; r < t->P; r++) {
            int64_t j0, j1;
            owned(&j0, &j1, t, nmb, r);
            if (j1 - j0 > most) most = j1 - j0;
        }
    return most;
}

// Device bytes a step of global batch B takes on one rank beyond the executor's own (the weights):
// what alloc_device allocates and the backward's scratch (its data-gradient buffers and GEMM
// workspaces, as the device reports them).
static double train_device_bytes(const ff_trainer *t, int64_t B) {
    const ff_model *m = t->m;
    const double N = (double)t->N, M = (double)t->o.microbatch;
    const int64_t nmb = ceil_div(B, t->o.microbatch), slots = slots_for(t, nmb);
    const double cap = (double)slots * M;
    double floats = cap * (double)t->per;
    for (int l = 0; l <= t->last; l++)
        if (m->layers[l].op != FF_OP_FLATTEN) floats += cap * (double)ff_shape_numel(m->layers[l].out);
    floats += cap * ((double)t->classes + 1 + 1 + 2);  // dz, losses, labels, indices
    floats += (double)slots * N + 2 * N;               // gradient rows, the reduced gradient, momentum
    if (t->P > 1)                                      // reduce buffers
        floats += (double)slots * N + (double)nmb * (double)slice_room(t);
    return floats * sizeof(float) + (double)ff_device_train_work_bytes(t->dev, t->last, (int64_t)cap, t->overlap);
}

// A GPU: refuse, before anything is allocated, a batch whose buffers would take more than 95 % of
// the free device memory, naming the largest --batch that fits (same --microbatch and ranks).
static ff_status check_device_memory(const ff_trainer *t) {
    size_t free_b = 0, total_b = 0;
    FF_TRY(ff_device_memory(t->dev, &free_b, &total_b));
    if (!total_b) return FF_OK;  // the host: nothing to ask
    const double budget = 0.95 * (double)free_b, need = train_device_bytes(t, t->o.batch);
    if (need <= budget) return FF_OK;
    int64_t lo = 0, hi = t->o.batch;  // largest B with bytes(B) <= budget: bytes grow with B
    while (hi - lo > 1) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (train_device_bytes(t, mid) <= budget)
            lo = mid;
        else
            hi = mid;
    }
    char fits[96];
    if (lo >= 1)
        snprintf(fits, sizeof fits, "the largest that fits is --batch %lld", (long long)lo);
    else
        snprintf(fits, sizeof fits, "no batch fits with --microbatch %lld", (long long)t->o.microbatch);
    return FF_FAIL(FF_ERR_OOM,
                   "rank %d: --batch %lld needs about %.2f GiB of GPU memory for training (%.2f GiB free of %.2f "
                   "GiB; at most 95 %% of the free memory is used): %s",
                   t->rank, (long long)t->o.batch, need / 1073741824.0, (double)free_b / 1073741824.0,
                   (double)total_b / 1073741824.0, fits);
}

// The trainer's A/B switches in the environment (train --help): unset, 0 or 1 (or `host`, where
// allowed); anything else is refused naming the variable before any step, not silently ignored.
static ff_status check_env_switch(const char *name, bool host_allowed, const char *expected) {
    const char *v = getenv(name);
    if (!v || !strcmp(v, "0") || !strcmp(v, "1") || (host_allowed && !strcmp(v, "host"))) return FF_OK;
    return FF_FAIL(FF_ERR_INPUT, "%s='%s': expected %s", name, v, expected);
}

ff_status ff_trainer_create(ff_trainer **out, const ff_model *m, ff_weights *w, const ff_train_options *o,
                            ff_comm *comm) {
    *out = NULL;
    FF_TRY(ff_train_options_check(o));
    FF_TRY(check_env_switch("FF_TRAIN_GRAPHS", false,
                            "0 (every step eager, one wait per step) or 1 (captured steps, the default)"));
    FF_TRY(check_env_switch("FF_QUEUED_COMM", true,
                            "0 (the host waits around each collective), 1 (queued on the GPU where the transport "
                            "can, the default) or host (the test hook: a host comm too)"));
    FF_TRY(check_env_switch("FF_CAPTURE_EXCHANGE", false,
                            "0 (the queued exchange outside the step's graph) or 1 (captured, the default)"));
    FF_TRY(check_env_switch("FF_TRAIN_HOST_COPIES", false,
                            "0 (the device's kernels read the indices and write the losses in pinned host "
                            "memory, the default) or 1 (a copy each way in every step)"));
    FF_TRY(check_env_switch("FF_TRAIN_CONCURRENT_BACKWARD", false,
                            "1 (a GPU's weight gradients on a second stream beside the data gradients, the "
                            "default) or 0 (the whole backward on one stream)"));
    FF_TRY(check_env_switch("FF_TRAIN_WGRAD_LANES", false,
                            "0 (a few-column conv weight gradient, mnist's conv1, a block a strip in shared memory, "
                            "the default) or 1 (a warp a strip, no shared memory: the same bits)"));
    const char *pool_env = getenv("FF_TRAIN_POOL_SPARSE");
    if (pool_env && strcmp(pool_env, "0") && strcmp(pool_env, "1") && strcmp(pool_env, "2"))
        return FF_FAIL(FF_ERR_INPUT,
                       "FF_TRAIN_POOL_SPARSE='%s': expected 0 (a GPU's conv under a relu and a 2x2 max-pool on the "
                       "dense kernels), 1 (its weight gradient pool-sparse) or 2 (its data gradient too, the default)",
                       pool_env);
    const char *graphs_env = getenv("FF_TRAIN_GRAPHS");
    int last = m->n_layers - 1;
    if (last >= 0 && m->layers[last].op == FF_OP_SOFTMAX) last--;
    if (last < 0) return FF_FAIL(FF_ERR_INPUT, "model %s: no layers to train", m->name);
    for (int l = 0; l <= last; l++) {
        ff_op op = m->layers[l].op;
        if (op != FF_OP_CONV2D && op != FF_OP_RELU && op != FF_OP_MAXPOOL && op != FF_OP_FLATTEN && op != FF_OP_LINEAR)
            return FF_FAIL(FF_ERR_INPUT,
                           "model %s: layer %s is %s; training supports conv2d, relu, "
                           "maxpool, flatten and linear (then softmax cross-entropy)",
                           m->name, m->layers[l].name, ff_op_name(op));
    }
    const ff_plan_options *po = &o->exec.plan;
    // --backend vendor is allowed: it runs the linear layers through cuBLAS (fp32) in the GPU modes
    // (the plan refuses it on the cpu device); convolutions are always fivefold's own.
    if (po->conv != FF_CONV_DIRECT || po->precision == FF_PRECISION_TF32)
        return FF_FAIL(FF_ERR_INPUT,
                       "training runs fivefold's own direct convolutions in fp32 or tf32x3 (--conv direct, no "
                       "tf32): the update changes the weights every step, which Winograd's transformed copies would "
                       "not follow, and tf32 would change the recipe");
    ff_status st = FF_OK;
    ff_trainer *t = xcalloc(1, sizeof *t, &st, "the trainer");
    if (!t) return st;
    t->m = m;
    t->w = w;
    t->o = *o;
    t->o.exec.mode = comm ? multirank_mode(o->exec.mode) : o->exec.mode;
    if (ff_mode_is_multirank(t->o.exec.mode) && !comm) {
        const ff_mode mode = t->o.exec.mode;
        free(t);
        return FF_FAIL(FF_ERR_INPUT, "mode %s trains over several ranks: it needs a communicator (mpiexec)",
                       ff_mode_name(mode));
    }
    t->rank = comm ? ff_comm_rank(comm) : 0;
    t->P = comm ? ff_comm_size(comm) : 1;
    t->last = last;
    t->N = w->n_total;
    t->classes = ff_shape_numel(m->layers[last].out);
    t->per = ff_shape_numel(m->input);
    const int64_t M = o->microbatch, P = t->P;
    t->nmb_max = ceil_div(o->batch, M);  // <= FF_MAX_MICROBATCHES (checked above)
    if (o->n_shares && o->n_shares != P) {
        free(t);
        return FF_FAIL(FF_ERR_INPUT, "--shares has %d value(s), expected one per rank (%lld ranks)", o->n_shares,
                       (long long)P);
    }
    t->share_below[0] = 0;
    for (int64_t r = 0; r < P; r++) t->share_below[r + 1] = t->share_below[r] + (o->n_shares ? o->shares[r] : 1);
    t->nslots = slots_for(t, t->nmb_max);
    t->cap = t->nslots * M;
    // Every buffer size below is a product of a user-chosen count (M, B) and a model size: check
    // each once here, so the allocations can use the plain products.
    int64_t cnt;
    st = checked_count(&cnt, t->cap, m->max_act, sizeof(float), "micro-batch activations (--batch x largest layer)");
    if (st == FF_OK) st = checked_count(&cnt, o->batch, FF_TRAIN_INFLIGHT, sizeof(double), "losses (--batch)");
    if (st == FF_OK) st = checked_count(&cnt, t->nslots, t->N, sizeof(float), "micro-batch gradients");
    if (t->o.bucket_floats == 0) {  // auto (train.h)
        t->o.bucket_floats = ff_train_default_bucket_floats(t->o.exec.mode, t->N);
    }
    make_buckets(t);
    if (st == FF_OK) st = checked_count(&cnt, t->nmb_max, slice_room(t), sizeof(float), "reduce buffer");
    if (st == FF_OK) st = ff_weights_alloc(&t->mom, m);
    if (st != FF_OK) {
        free(t);
        return st;
    }
    memset(t->mom.data, 0, (size_t)t->N * sizeof(float));
    // The mode's executor: its device runs the step, its communicator (bound to the device's
    // memory) carries the gradients. The batch split is the trainer's own (micro-batches by rank).
    ff_exec_options eo = t->o.exec;
    eo.split = ff_mode_is_multirank(eo.mode) ? FF_SPLIT_BATCH : FF_SPLIT_NONE;
    eo.max_batch = t->cap;
    eo.train_only = true;  // no inference buffers: what a step needs is checked, then allocated here
    eo.comm = comm;
    eo.fault_layer = -1;
    eo.trace = false;
    t->no_graphs = graphs_env && strcmp(graphs_env, "0") == 0;
    st = ff_exec_create(&t->exec, m, w, &eo);
    if (st == FF_OK) {
        t->dev = ff_exec_device(t->exec);
        t->comm = ff_exec_comm(t->exec);
        t->overlap = o->overlap && P > 1 && t->nbuckets > 1 && ff_device_is_async(t->dev) &&
                     ff_device_can_backward_in_passes(t->dev);
        st = check_device_memory(t);
        if (st == FF_OK) st = alloc_device(t);
        t->phases.overlapped = t->overlap;
        t->phases.buckets = t->nbuckets;
        t->phases.windows = t->n_windowed;
        t->queued = st == FF_OK && P > 1 && o->reduce == FF_REDUCE_DETERMINISTIC && ff_comm_can_queue(t->comm);
        t->phases.queued = t->queued;
        const char *cx = getenv("FF_CAPTURE_EXCHANGE");
        t->pipelined = ff_train_overlaps_steps(o, P, t->N) && t->overlap && t->queued;
        t->phases.overlapped_steps = t->pipelined;
        t->capture_exchange = t->queued && ff_device_can_capture(t->dev) && !t->no_graphs && !t->pipelined &&
                              !(cx && strcmp(cx, "0") == 0);
    }
    t->x_host = xcalloc((size_t)(t->cap * t->per), sizeof(float), &st, "input staging");
    t->labels_host = xcalloc((size_t)t->cap, sizeof(int32_t), &st, "labels");
    t->idx_host = xcalloc((size_t)(FF_TRAIN_INFLIGHT * t->cap), sizeof(int64_t), &st, "sample indices");
    t->loss_host = xcalloc((size_t)(FF_TRAIN_INFLIGHT * t->cap), sizeof(float), &st, "losses");
    t->losses = xcalloc((size_t)(FF_TRAIN_INFLIGHT * o->batch), sizeof(double), &st, "losses");
    t->grad_host = xcalloc((size_t)t->N, sizeof(float), &st, "the gradient");
    if (st == FF_OK) st = ff_device_pin_host(t->dev, t->x_host, (size_t)(t->cap * t->per) * sizeof(float));
    if (st == FF_OK) st = ff_device_pin_host(t->dev, t->labels_host, (size_t)t->cap * sizeof(int32_t));
    if (st == FF_OK)
        st = ff_device_pin_host(t->dev, t->idx_host, (size_t)(FF_TRAIN_INFLIGHT * t->cap) * sizeof(int64_t));
    if (st == FF_OK)
        st = ff_device_pin_host(t->dev, t->loss_host, (size_t)(FF_TRAIN_INFLIGHT * t->cap) * sizeof(float));
    const char *copies = getenv("FF_TRAIN_HOST_COPIES");
    if (st == FF_OK && !(copies && !strcmp(copies, "1"))) {
        void *im = NULL, *lm = NULL;
        st = ff_device_host_mapped(t->dev, &im, t->idx_host);
        if (st == FF_OK) st = ff_device_host_mapped(t->dev, &lm, t->loss_host);
        if (im && lm) t->idx_mapped = im, t->loss_mapped = lm;  // both or neither
    }
    if (st == FF_OK) st = ff_trainer_load(t);  // every rank's weights are rank 0's (the executor's broadcast)
    if (st != FF_OK) {
        ff_trainer_destroy(t);
        return st;
    }
    *out = t;
    return FF_OK;
}

// Bucket b's slices over P ranks (train.h): rank q's [lo + displ[q], + count[q]) in bytes' terms,
// this rank's slice [*my_lo, *my_lo + *my_len) relative to the bucket's start.
static void bucket_slices(const ff_trainer *t, int b, size_t *count, size_t *displ, int64_t *my_lo, int64_t *my_len);

// The rows the fused exchange of bucket b read from the peers (every rank one micro-batch, its
// gradient row sent from where the backward wrote it: exchange_bucket), received into recvbuf as
// the all-to-all of the unfused exchange would have, for gather_sharded's tree.
static ff_status fetch_fused_rows(ff_trainer *t, int b) {
    size_t gcount[FF_MAX_RANKS_TRAIN], gdispl[FF_MAX_RANKS_TRAIN], rcount[FF_MAX_RANKS_TRAIN],
        rdispl[FF_MAX_RANKS_TRAIN];
    int64_t my_lo, my_len;
    bucket_slices(t, b, gcount, gdispl, &my_lo, &my_len);
    for (int q = 0; q < t->P; q++) {
        rcount[q] = q == t->rank ? 0 : (size_t)my_len * sizeof(float);
        rdispl[q] = (size_t)q * (size_t)my_len * sizeof(float);
    }
    gcount[t->rank] = 0;
    FF_TRY(ff_comm_alltoallv(t->comm, t->recvbuf + t->bucket[b].recv_root, rcount, rdispl, t->grads + t->bucket[b].lo,
                             gcount, gdispl));
    t->bucket[b].rows_not_here = false;
    return FF_OK;
}

// The sharded state made whole (every rank calls this together): each rank's slice of the
// momentum and of the last reduced gradient, all-gathered bucket by bucket.
static ff_status gather_sharded(ff_trainer *t) {
    size_t count[FF_MAX_RANKS_TRAIN], displ[FF_MAX_RANKS_TRAIN];
    for (int b = 0; b < t->nbuckets; b++) {
        const int64_t lo = t->bucket[b].lo;
        int64_t my_lo, my_len;
        bucket_slices(t, b, count, displ, &my_lo, &my_len);
        const ff_tree_rows *u = &t->bucket[b].unsummed;
        if (t->bucket[b].rows_not_here) FF_TRY(fetch_fused_rows(t, b));
        if (u->n > 1) {  // the same tree as the step's, into row 0 (which is recv_root)
            if (u->own_at)
                FF_TRY(ff_device_copy_bytes(t->dev, u->at + u->own * u->stride, u->own_at,
                                            (size_t)my_len * sizeof(float)));
            FF_TRY(ff_device_tree_reduce(t->dev, u->at, u->at, u->n, u->stride, my_len));
            t->bucket[b].unsummed.n = 0;
        }
        FF_TRY(ff_device_sync(t->dev));  // the communicator reads what the device wrote
        FF_TRY(ff_comm_allgatherv(t->comm, t->d_mom + lo, count, displ, t->d_mom + lo + my_lo,  // in place
                                  (size_t)my_len * sizeof(float)));
        FF_TRY(ff_comm_allgatherv(t->comm, t->grad + lo, count, displ, t->recvbuf + t->bucket[b].recv_root,
                                  (size_t)my_len * sizeof(float)));
    }
    t->sharded = false;
    return FF_OK;
}

ff_status ff_trainer_sync(ff_trainer *t) {
    FF_TRY(join_tail(t));
    if (t->sharded) FF_TRY(gather_sharded(t));
    FF_TRY(ff_device_download(t->dev, t->w->data, ff_device_params(t->dev), (size_t)t->N));
    FF_TRY(ff_device_download(t->dev, t->mom.data, t->d_mom, (size_t)t->N));
    FF_TRY(ff_device_download(t->dev, t->grad_host, t->grad, (size_t)t->N));
    return ff_device_sync(t->dev);
}

ff_status ff_trainer_load(ff_trainer *t) {
    // The executor broadcast rank 0's weights into the device; a resume loads the checkpoint's on
    // every rank (identical files), so uploading this rank's copy is the same.
    FF_TRY(join_tail(t));
    FF_TRY(ff_device_upload(t->dev, ff_device_params(t->dev), t->w->data, (size_t)t->N));
    FF_TRY(ff_device_upload(t->dev, t->d_mom, t->mom.data, (size_t)t->N));
    t->sharded = false;  // every rank holds the whole momentum again
    return ff_device_sync(t->dev);
}

ff_status ff_trainer_set_resident(ff_trainer *t, const ff_dataset *ds) {
    if (ff_device_is_host(t->dev) || t->resident == ds) return FF_OK;  // the host reads ds directly
    FF_TRY(ff_train_check_dataset(t->m, ds));
    ff_device_free(t->dev, t->res_images);
    ff_device_free(t->dev, (float *)t->res_labels);
    t->res_images = NULL;
    t->res_labels = NULL;
    t->resident = NULL;
    int64_t cnt = 0;
    FF_TRY(checked_count(&cnt, ds->n, t->per, sizeof(float), "resident training set"));
    FF_TRY(ff_device_alloc(t->dev, &t->res_images, (size_t)cnt, "the resident training set"));
    FF_TRY(ff_device_alloc_bytes(t->dev, (void **)&t->res_labels, (size_t)ds->n * sizeof(int32_t), "its labels"));
    if (ds->synthetic) {  // the features are made on the device; only the labels travel
        FF_TRY(ff_device_synth(t->dev, t->res_images, &ds->synth, 0, ds->n));
        FF_TRY(ff_device_upload_bytes(t->dev, t->res_labels, ds->labels, (size_t)ds->n * sizeof(int32_t)));
        FF_TRY(ff_device_sync(t->dev));
        t->resident = ds;
        return FF_OK;
    }
    // Normalised on the host in chunks (the same function as every other batch: same bits), each
    // uploaded through the pinned staging buffer: one pass, once per run.
    for (int64_t s0 = 0; s0 < ds->n; s0 += t->cap) {
        const int64_t cnt_i = ds->n - s0 < t->cap ? ds->n - s0 : t->cap;
        for (int64_t i = 0; i < cnt_i; i++) t->idx_host[i] = s0 + i;
        ff_dataset_batch(t->x_host, t->labels_host, ds, t->idx_host, 0, cnt_i);
        FF_TRY(ff_device_upload(t->dev, t->res_images + s0 * t->per, t->x_host, (size_t)(cnt_i * t->per)));
        FF_TRY(ff_device_upload_bytes(t->dev, t->res_labels + s0, t->labels_host, (size_t)cnt_i * sizeof(int32_t)));
        FF_TRY(ff_device_sync(t->dev));
    }
    t->resident = ds;
    return FF_OK;
}

const float *ff_trainer_grad(const ff_trainer *t) {
    return t->grad_host;
}
ff_train_phases ff_trainer_phases(const ff_trainer *t) {
    return t->phases;
}
const char *ff_trainer_transport(const ff_trainer *t) {
    return t->comm ? ff_comm_transport_name(t->comm) : NULL;
}
ff_weights *ff_trainer_momentum(ff_trainer *t) {
    return &t->mom;
}
int64_t ff_trainer_steps(const ff_trainer *t) {
    return t->steps;
}
int64_t ff_trainer_samples(const ff_trainer *t) {
    return t->samples;
}
void ff_trainer_set_steps(ff_trainer *t, int64_t steps) {
    t->steps = steps;
}

// ---------------------------------------------------------------- the step

// rows[0] += rows[1] + ... in the fixed tree of train.h, element-wise over [lo, hi).
static void tree_reduce(float *const *rows, int64_t nrows, int64_t lo, int64_t hi) {
    for (int64_t s = 1; s < nrows; s *= 2)
        for (int64_t j = 0; j + s < nrows; j += 2 * s) {
            float *a = rows[j];
            const float *b = rows[j + s];
            for (int64_t i = lo; i < hi; i++) a[i] += b[i];
        }
}

// Element-wise work in parallel: chunks of elements are independent, so any thread split gives
// the same bits.
void ff_tree_reduce(float *const *rows, int64_t nrows, int64_t len) {
    const int64_t chunk = 1 << 14;
    const int64_t nchunks = (len + chunk - 1) / chunk;
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < nchunks; c++) {
        int64_t lo = c * chunk, hi = lo + chunk < len ? lo + chunk : len;
        tree_reduce(rows, nrows, lo, hi);
    }
}

typedef struct {
    const ff_dataset *ds;
    const int64_t *idx;
    const float *x;
    const int32_t *labels;
} batch_source;

// Images [start, start + n) of the global batch into act[0] and labels on the device, in two
// halves: stage_host does the host's part (indices, or normalised images, into the pinned staging
// buffers; on a host device straight into act[0]); stage_device enqueues the device's part
// (uploads, or the gather from the resident set, which reads the indices in their pinned slot
// where the device maps it), which a captured step replays.
static bool from_resident(const ff_trainer *t, const batch_source *src) {
    return src->ds && src->ds == t->resident;
}
static void stage_host(ff_trainer *t, const batch_source *src, int64_t start, int64_t n) {
    const bool host = ff_device_is_host(t->dev);
    if (from_resident(t, src)) {
        memcpy(t->idx_host + t->slot * t->cap, src->idx + start, (size_t)n * sizeof(int64_t));
        return;
    }
    float *x = host ? t->act[0] : t->x_host;
    int32_t *lab = host ? t->labels : t->labels_host;
    if (src->ds) {
        ff_dataset_batch(x, lab, src->ds, src->idx, start, n);
    } else {
        memcpy(x, src->x + start * t->per, (size_t)(n * t->per) * sizeof(float));
        memcpy(lab, src->labels + start, (size_t)n * sizeof(int32_t));
    }
}
static ff_status stage_device(ff_trainer *t, bool resident, int64_t n) {
    if (resident) {
        const int64_t *idx = t->idx_mapped ? t->idx_mapped + t->slot * t->cap : t->idx;
        if (!t->idx_mapped)
            FF_TRY(ff_device_upload_bytes(t->dev, t->idx, t->idx_host + t->slot * t->cap, (size_t)n * sizeof(int64_t)));
        return ff_device_gather(t->dev, t->act[0], t->labels, t->res_images, t->res_labels, idx, t->per, n);
    }
    if (ff_device_is_host(t->dev)) return FF_OK;
    FF_TRY(ff_device_upload(t->dev, t->act[0], t->x_host, (size_t)(n * t->per)));
    return ff_device_upload_bytes(t->dev, t->labels, t->labels_host, (size_t)n * sizeof(int32_t));
}
static ff_status fetch(ff_trainer *t, const batch_source *src, int64_t start, int64_t n) {
    stage_host(t, src, start, n);
    return stage_device(t, from_resident(t, src), n);
}

// At most 2 log2(FF_MAX_MICROBATCHES) + 1 dyadic blocks (dyadic_blocks) in any range of micro-batches.
#define FF_MAX_BLOCKS 32
_Static_assert(FF_MAX_MICROBATCHES <= 1 << 15, "FF_MAX_BLOCKS covers ranges of up to 2^15 micro-batches");

// The dyadic blocks of micro-batches [j0, j1), in order: [a, a + size) with size a power of two,
// a a multiple of size, each as large as fits. Each is a whole subtree of the fixed tree (train.h),
// so its owner can sum it alone with the same additions in the same order; returns the count
// (at most 2 log2(j1 - j0) + 1).
static int dyadic_blocks(int64_t *start, int64_t *size, int64_t j0, int64_t j1) {
    int n = 0;
    for (int64_t a = j0; a < j1; n++) {
        int64_t sz = 1;
        while (a % (2 * sz) == 0 && a + 2 * sz <= j1) sz *= 2;
        start[n] = a;
        size[n] = sz;
        a += sz;
    }
    return n;
}

// Who holds which block sum in a step of nmb micro-batches: every rank's dyadic blocks in
// micro-batch order (ranks own ascending ranges), root_row[j] the row of the block starting at j
// among all of them (-1: j starts no block), nb[q] rank q's count.
typedef struct {
    int64_t root_row[FF_MAX_MICROBATCHES];
    int64_t nb[FF_MAX_RANKS_TRAIN];
    int64_t nroots, nmb;
    bool fixed_tree;  // the joining additions are the fixed tree over the nroots rows (finishing_is_fixed_tree)
} block_map;

// Whether the finishing additions (exchange_bucket) are the fixed tree over the nroots rows
// (train.h: at each level s, row j += row j + s): they are when the roots lie at micro-batches
// 0, z, 2z, ... for one power of two z (every rank one block of z micro-batches, or one root).
static bool finishing_is_fixed_tree(const block_map *bm) {
    int64_t z = 1;
    while (z < bm->nmb && bm->root_row[z] < 0) z *= 2;
    for (int64_t j = 0; j < bm->nmb; j++)
        if ((bm->root_row[j] >= 0) != (j % z == 0) || (bm->root_row[j] >= 0 && bm->root_row[j] != j / z)) return false;
    return true;
}

static void map_blocks(block_map *bm, const ff_trainer *t, int64_t nmb) {
    bm->nmb = nmb;
    bm->nroots = 0;
    for (int64_t j = 0; j < nmb; j++) bm->root_row[j] = -1;
    for (int64_t q = 0; q < t->P; q++) {
        int64_t j0, j1, start[FF_MAX_BLOCKS], size[FF_MAX_BLOCKS];
        owned(&j0, &j1, t, nmb, q);
        bm->nb[q] = dyadic_blocks(start, size, j0, j1);
        for (int64_t k = 0; k < bm->nb[q]; k++) bm->root_row[start[k]] = bm->nroots++;
    }
    bm->fixed_tree = finishing_is_fixed_tree(bm);
}

// Slice q of a bucket's len parameters: [len * q / P, len * (q + 1) / P), relative to its start.
static int64_t slice_lo(int64_t len, int64_t q, int64_t P) {
    return len * q / P;
}

// Device work before bucket b can be exchanged (captured with the step, or queued after the
// bucket's backward under overlap). Deterministic: the sum of each of this rank's dyadic blocks over
// slice q of the bucket, packed for rank q at sendbuf + (this rank's roots) * lo (one pass: the
// tree writes there); a rank with one micro-batch sends its row as it is. allreduce: the tree over
// this rank's micro-batches into t->grad's range.
static ff_status prepare_bucket(ff_trainer *t, const step_work *k, int b) {
    const int64_t P = t->P, N = t->N, lo = t->bucket[b].lo, len = t->bucket[b].hi - lo;
    if (k->local) {
        if (k->nloc == 0) return FF_OK;
        return ff_device_tree_reduce(t->dev, t->grad + lo, t->grads + lo, k->nloc, N, len);
    }
    if (k->nloc == 1) return FF_OK;  // one micro-batch: its row is the block sum, sent as it is
    int64_t j0, j1, start[FF_MAX_BLOCKS], size[FF_MAX_BLOCKS];
    owned(&j0, &j1, t, ceil_div(k->b, t->o.microbatch), t->rank);
    const int nb = dyadic_blocks(start, size, j0, j1);
    float *dst = t->sendbuf + nb * lo;
    for (int64_t q = 0; q < P; q++) {
        const int64_t s0 = lo + slice_lo(len, q, P), s1 = lo + slice_lo(len, q + 1, P);
        for (int r = 0; r < nb; r++, dst += s1 - s0)  // root r's sum over [s0, s1), packed for rank q
            FF_TRY(ff_device_tree_reduce(t->dev, dst, t->grads + (start[r] - j0) * N + s0, size[r], N, s1 - s0));
    }
    return FF_OK;
}

static void bucket_slices(const ff_trainer *t, int b, size_t *count, size_t *displ, int64_t *my_lo, int64_t *my_len) {
    const int64_t P = t->P, len = t->bucket[b].hi - t->bucket[b].lo;
    for (int64_t q = 0; q < P; q++) {
        const int64_t s0 = slice_lo(len, q, P), s1 = slice_lo(len, q + 1, P);
        count[q] = (size_t)(s1 - s0) * sizeof(float);
        displ[q] = (size_t)s0 * sizeof(float);
    }
    *my_lo = slice_lo(len, t->rank, P);
    *my_len = slice_lo(len, t->rank + 1, P) - *my_lo;
}

// Bucket b's exchange (P > 1), its device work prepared (prepare_bucket) and done. allreduce: the
// communicator's float sum over t->grad's range. Deterministic (train.h): rank q receives slice q
// of every rank's block sums, in micro-batch order, and finishes the fixed tree on them: at each
// level s the tree adds g_{j+s} into g_j; where j and j + s lie in one block the owner has done it,
// and otherwise both are roots (blocks are dyadic), so the same additions run in the same order as
// one rank's tree over all nmb rows. What crosses the network is a few rows per rank (one with
// equal shares and power-of-two counts), not every micro-batch's. Then each rank runs the SGD step
// on its slice only (weights, momentum; the rule is element-wise, so the bits are those of the
// whole update), writing the weights in place, and the updated weight slices are all-gathered in
// place: as many bytes as gathering the gradient, and the update's memory traffic divided by P
// (ZeRO's stage 1 over the deterministic tree). *recv_at: where in recvbuf this bucket's rows go
// (advanced past them). side: the finishing additions and the update go to the
// device's side lane (the backward still runs on the main one; it reads no weight of this
// bucket any more).
static ff_status exchange_bucket(ff_trainer *t, const step_work *k, const block_map *bm, int b, int64_t *recv_at,
                                 bool side, bool queued) {
    const int64_t P = t->P, lo = t->bucket[b].lo, len = t->bucket[b].hi - lo;
    if (k->local) return ff_comm_allreduce_sum_f32(t->comm, t->grad + lo, (size_t)len);
    int64_t my_lo, my_len;
    size_t gcount[FF_MAX_RANKS_TRAIN], gdispl[FF_MAX_RANKS_TRAIN];
    bucket_slices(t, b, gcount, gdispl, &my_lo, &my_len);
    const int64_t mine = bm->nb[t->rank];
    size_t scount[FF_MAX_RANKS_TRAIN], sdispl[FF_MAX_RANKS_TRAIN];
    size_t rcount[FF_MAX_RANKS_TRAIN], rdispl[FF_MAX_RANKS_TRAIN];
    size_t roff = 0, soff = 0;
    for (int64_t q = 0; q < P; q++) {
        rcount[q] = (size_t)(bm->nb[q] * my_len) * sizeof(float);
        rdispl[q] = roff;
        roff += rcount[q];
        scount[q] = (size_t)mine * gcount[q];
        sdispl[q] = soff;
        soff += scount[q];
    }
    // My own block sum is read by the fused tree where it lies (the fixed tree, one block of mine:
    // its row among the roots follows the lower ranks' roots) and not sent to myself: the
    // all-to-all's local copy was 240 MB a step for the MLP at P = 2.
    int64_t own_row = -1;
    if (bm->fixed_tree && bm->nroots > 1 && mine == 1) {
        own_row = 0;
        for (int64_t q = 0; q < t->rank; q++) own_row += bm->nb[q];
        rcount[t->rank] = scount[t->rank] = 0;
    }
    float *rows = t->recvbuf + *recv_at;
    t->bucket[b].recv_root = *recv_at;  // root row 0: my reduced slice, once summed (gather_sharded)
    // Each bucket's rows start at the same offset on every rank: each gets the largest slice's
    // room, ceil(len / P) (slice_room in all), because NCCL's symmetric kernels find a peer's buffer
    // at the offset of one's own in the window.
    *recv_at += bm->nroots * ceil_div(len, P);
    // The update writes my slice of the weights in place, and the all-gather sends it from there
    // (in place, comm.h: no copy of it to the weights, 240 MB a step for the MLP at P = 2).
    float *wmine = ff_device_params(t->dev) + lo + my_lo;
    // One micro-batch of mine: its gradient row is the block sum, laid out as the packing would
    // (slices in rank order, contiguous), so it is sent from where the backward wrote it.
    const float *send = k->nloc == 1 ? t->grads + lo : t->sendbuf + mine * lo;
    const float *own_at = own_row >= 0 ? send + sdispl[t->rank] / sizeof(float) : NULL;
    ff_status st = FF_OK;
    // Every rank one micro-batch (so each sends its gradient row from where its backward wrote it,
    // at the same offset on every rank): the communicator may run the all-to-all, the fused tree
    // and update and the all-gather below as one kernel (ff_comm_fused_tree_sgd), the same bits.
    const bool fusable = queued && bm->fixed_tree && bm->nroots == P && bm->nmb == P && own_row >= 0 && k->nloc == 1;
    bool fused = false;
    if (queued) {  // all of it on the side lane, after the bucket's backward (fence b + 1), on the device
        if (side) FF_TRY(ff_device_side_lane(t->dev, true));
        if (side) st = ff_device_lane_wait_fence_at(t->dev, b + 1);
        if (st == FF_OK && fusable)
            st = ff_comm_fused_tree_sgd(t->comm, &fused, wmine, t->d_mom + lo + my_lo, own_at, my_len, t->o.lr,
                                        t->o.momentum, t->o.weight_decay, t->steps == 0);
        if (st == FF_OK && !fused) st = ff_comm_alltoallv(t->comm, rows, rcount, rdispl, send, scount, sdispl);
    } else {
        FF_TRY(ff_comm_alltoallv(t->comm, rows, rcount, rdispl, send, scount, sdispl));
        if (side) FF_TRY(ff_device_side_lane(t->dev, true));
    }
    // The finishing tree, then the update of my slice (what the all-gather sends). When the roots' additions are the
    // fixed tree over the nroots rows (every rank one block sum: equal power-of-two shares), the device fuses that tree
    // with the update; otherwise they run one by one first.
    for (int64_t s = 1; !bm->fixed_tree && s < bm->nmb && st == FF_OK; s *= 2)
        for (int64_t j = 0; j + s < bm->nmb && st == FF_OK; j += 2 * s)
            if (bm->root_row[j + s] >= 0) {  // then j is a root too (see above): g_j += g_{j+s}
                const int64_t ra = bm->root_row[j], rb = bm->root_row[j + s];
                float *a = rows + ra * my_len;
                st = ff_device_tree_reduce(t->dev, a, a, 2, (rb - ra) * my_len, my_len);
            }
    // The fused tree keeps no sum: only ff_trainer_sync reads it, and adds the rows again then
    // (gather_sharded), instead of every step writing my slice of the gradient (0.07 ms of the
    // MLP's step at P = 2, session 17's run 4).
    const int64_t n_fused = bm->fixed_tree && bm->nroots > 1 ? bm->nroots : 1;
    const ff_tree_rows tr = {.at = rows,
                             .n = n_fused,
                             .stride = my_len,
                             .own = own_row,
                             .own_at = own_at,
                             .keep_sum = n_fused > FF_TREE_UNKEPT_ROWS};
    t->bucket[b].unsummed = tr;
    t->bucket[b].rows_not_here = fused;
    if (st == FF_OK && !fused)
        st = ff_device_tree_sgd(t->dev, wmine, wmine, t->d_mom + lo + my_lo, &tr, my_len, t->o.lr, t->o.momentum,
                                t->o.weight_decay, t->steps == 0);
    if (st == FF_OK && !queued) st = ff_device_sync(t->dev);  // the communicator reads what the device wrote
    if (st == FF_OK && queued && !fused)                      // on the lane, after the update
        st = ff_comm_allgatherv(t->comm, ff_device_params(t->dev) + lo, gcount, gdispl, wmine,
                                (size_t)my_len * sizeof(float));
    if (st == FF_OK && queued && t->pipelined) st = ff_device_fence_at(t->dev, tail_fence(b));  // weights in
    if (side) {
        const ff_status back = ff_device_side_lane(t->dev, false);
        if (st == FF_OK) st = back;
    }
    FF_TRY(st);
    t->sharded = true;
    if (queued) return FF_OK;
    return ff_comm_allgatherv(t->comm, ff_device_params(t->dev) + lo, gcount, gdispl, wmine,
                              (size_t)my_len * sizeof(float));
}

// The i-th bucket to be exchanged (i = 0, 1, ..): from the bottom layers up. Under overlap the
// parameter gradients are computed in this order too (enqueue_backward_parts): the bottom bucket
// (the MLP's fc1, 134 MB) goes first and the last exchange, the one the step waits for, is the top
// layers' small bucket; the next forward also needs the bottom weights first. Every rank takes the
// same order, and each bucket's exchange is its own, so the order changes no bit.
static int exchange_order(const ff_trainer *t, int i) {
    return t->nbuckets - 1 - i;
}

// Overlap (t->overlap): after the captured forward, the backward in two passes (device.h): every
// data gradient first (they read the weights, which the buckets' all-gathers overwrite), then the
// parameter gradients bucket by bucket in exchange order, each followed by its preparation and
// fence b + 1, all queued at once; the exchange of bucket b then waits for its fence only, so it
// runs while the device computes the next buckets' gradients.
static ff_status enqueue_backward_parts(ff_trainer *t, const step_work *k) {
    if (k->nimg > 0)
        FF_TRY(ff_device_train_backward_data(t->dev, t->dz, (const float *const *)t->act, t->last, k->nimg,
                                             t->o.microbatch));
    for (int i = 0; i < t->nbuckets; i++) {
        const int b = exchange_order(t, i);
        if (k->nimg > 0)
            FF_TRY(ff_device_train_backward_params(t->dev, t->grads, t->N, (const float *const *)t->act,
                                                   t->bucket[b].layer_hi, t->bucket[b].layer_lo, k->nimg,
                                                   t->o.microbatch));
        FF_TRY(prepare_bucket(t, k, b));
        FF_TRY(ff_device_fence_at(t->dev, b + 1));
    }
    return FF_OK;
}

// The queued exchange of a step (t->queued), after its forward: with overlap the backward bucket
// by bucket (fences), then each bucket's all-to-all, finishing tree, update and all-gather queued
// on the side lane after its fence, and the main lane joining the side lane (the next step's
// forward reads the updated weights); without, all of it on the main lane after the backward.
// Nothing here waits on the host, so a capture can hold the whole step, collectives included.
static ff_status enqueue_exchange(ff_trainer *t, const step_work *k) {
    if (k->parts) FF_TRY(enqueue_backward_parts(t, k));
    block_map bm;
    map_blocks(&bm, t, ceil_div(k->b, t->o.microbatch));
    int64_t recv_at = 0;
    int fused = 0;
    for (int i = 0; i < t->nbuckets; i++) {
        FF_TRY(exchange_bucket(t, k, &bm, exchange_order(t, i), &recv_at, k->parts, true));
        fused += t->bucket[exchange_order(t, i)].rows_not_here;
    }
    // the most of any step: a short last batch (fewer micro-batches than ranks) fuses none
    if (fused > t->phases.fused_buckets) t->phases.fused_buckets = fused;
    if (k->parts && t->pipelined) {  // left running: the next forward waits bucket by bucket
        t->tail_pending = true;
        return FF_OK;
    }
    return k->parts ? ff_device_join_side(t->dev) : FF_OK;
}

// The step after a pipelined one (t->tail_pending): its forward bucket by bucket from the bottom
// layers up, each bucket's layers once the last step's all-gather of that bucket is in (fence
// tail_fence(b) on the side lane), so the exchange of the top buckets, which ends the last step and
// which nothing in it overlaps, runs beside the bottom layers' forward (0.2 ms of the MLP's 14.45
// ms step on two H200s, bench/results/issue16-s18 run 4). Then the main lane joins the side lane
// whole: the backward rewrites the gradient rows the last exchange read.
static ff_status forward_after_tail(ff_trainer *t, int64_t nimg) {
    for (int b = t->nbuckets - 1; b >= 0; b--) {
        FF_TRY(ff_device_lane_wait_fence_at(t->dev, tail_fence(b)));
        FF_TRY(ff_device_train_forward(t->dev, t->act, t->bucket[b].layer_lo, t->bucket[b].layer_hi, nimg,
                                       t->o.microbatch));
    }
    return join_tail(t);
}

// The device work of a step that needs no communication, enqueued (or captured): the batch onto the
// device, forward, loss, backward, the losses to the host (written there by the loss kernel where
// the device maps the slot, else copied); with `local` also the tree over this
// rank's micro-batch gradients into t->grad, and with `update` the SGD step after it. Several
// ranks: each bucket's preparation (prepare_bucket). With k->parts the backward and the
// preparations are left to step_core (overlap).
static ff_status enqueue_step(ff_trainer *t, const step_work *k) {
    const int64_t M = t->o.microbatch, N = t->N;
    t->slot = k->slot;
    if (k->nimg > 0) {
        FF_TRY(stage_device(t, k->resident, k->nimg));
        if (t->tail_pending)
            FF_TRY(forward_after_tail(t, k->nimg));
        else
            FF_TRY(ff_device_train_forward(t->dev, t->act, 0, t->last, k->nimg, M));
        float *loss = t->loss_mapped ? t->loss_mapped + k->slot * t->cap : t->loss;
        FF_TRY(ff_device_softmax_xent(t->dev, t->dz, loss, t->act[t->last + 1], t->labels, 1.0f / (float)k->b,
                                      t->classes, k->nimg));
        if (t->P == 1)  // the backward and the tree over the micro-batches in one (device.h)
            FF_TRY(ff_device_train_backward_reduced(t->dev, t->grad, t->grads, N, t->dz, (const float *const *)t->act,
                                                    t->last, k->nimg, M, N));
        else if (!k->parts)
            FF_TRY(ff_device_train_backward(t->dev, t->grads, N, t->dz, (const float *const *)t->act, t->last, k->nimg,
                                            M));
        if (!t->loss_mapped)
            FF_TRY(ff_device_download(t->dev, t->loss_host + k->slot * t->cap, t->loss, (size_t)k->nimg));
    }
    FF_TRY(join_tail(t));  // (a rank without images this step)
    if (t->P > 1 && !k->parts)
        for (int b = 0; b < t->nbuckets; b++) FF_TRY(prepare_bucket(t, k, b));
    if (k->update)
        FF_TRY(ff_device_sgd(t->dev, ff_device_params(t->dev), t->d_mom, t->grad, N, t->o.lr, t->o.momentum,
                             t->o.weight_decay, k->first));
    if (k->exchange) FF_TRY(enqueue_exchange(t, k));
    return FF_OK;
}

static bool same_work(const step_work *a, const step_work *b) {
    return a->b == b->b && a->nimg == b->nimg && a->nloc == b->nloc && a->resident == b->resident &&
           a->local == b->local && a->update == b->update && a->first == b->first && a->slot == b->slot &&
           a->parts == b->parts && a->exchange == b->exchange;
}

// Runs the step's device work through a CUDA graph where the device can capture: the first time a
// shape of work is seen it runs eagerly (lazily sized buffers are made then, outside any capture),
// the second time it is captured, afterwards replayed: one launch instead of dozens. Bits are
// unchanged (the same kernels on the same buffers). Two shapes are kept: a full batch and an
// epoch's short last one.
static ff_status run_step_work(ff_trainer *t, const step_work *k) {
    if (!ff_device_can_capture(t->dev) || t->no_graphs || t->pipelined) return enqueue_step(t, k);
    for (int i = 0; i < FF_TRAIN_GRAPH_SLOTS; i++)
        if (t->graph[i].g && same_work(&t->graph[i].key, k)) return ff_device_graph_launch(t->dev, t->graph[i].g);
    int seen = -1;
    for (int i = 0; i < FF_TRAIN_GRAPH_SLOTS; i++)
        if (t->graph[i].seen && !t->graph[i].g && same_work(&t->graph[i].key, k)) seen = i;
    if (seen < 0) {  // first sight: remember it (replacing the oldest entry), run eagerly
        const int i = t->graph_next;
        t->graph_next = (t->graph_next + 1) % FF_TRAIN_GRAPH_SLOTS;
        ff_device_graph_destroy(t->dev, t->graph[i].g);
        t->graph[i].g = NULL;
        t->graph[i].key = *k;
        t->graph[i].seen = true;
        return enqueue_step(t, k);
    }
    FF_TRY(ff_device_capture_begin(t->dev));
    const ff_status st = enqueue_step(t, k);
    ff_device_graph *g = NULL;
    const ff_status end = ff_device_capture_end(t->dev, &g);
    FF_TRY(st);
    FF_TRY(end);
    t->graph[seen].g = g;
    return ff_device_graph_launch(t->dev, g);
}

// This rank's part of a step of b images: micro-batches [*j0, *j1) of nmb, images [*start, + *nimg).
static void my_share(int64_t *j0, int64_t *j1, int64_t *start, int64_t *nimg, const ff_trainer *t, int64_t b) {
    const int64_t M = t->o.microbatch;
    owned(j0, j1, t, ceil_div(b, M), t->rank);
    *start = *j0 * M < b ? *j0 * M : b;
    *nimg = (*j1 * M < b ? *j1 * M : b) - *start;
}

// One step of b images from images [first, first + b) of src, enqueued with its whole exchange
// (t->queued; enqueue_exchange): one captured graph for the whole step where the collectives are
// captured too (t->capture_exchange), else the captured forward and backward, then the exchange
// enqueued call by call. The same kernels on the same buffers in the same order as step_core's
// exchange: the same bits. Slot: the staging slot (and graph) of the step.
static ff_status queue_step(ff_trainer *t, const batch_source *src, int64_t first, int64_t b, int slot) {
    int64_t j0, j1, start, nimg;
    my_share(&j0, &j1, &start, &nimg, t, b);
    const step_work k = {
        b, nimg, j1 - j0, from_resident(t, src), false, false, t->steps == 0, slot, t->overlap, t->capture_exchange};
    t->slot = slot;
    if (nimg > 0) stage_host(t, src, first + start, nimg);
    FF_TRY(run_step_work(t, &k));
    if (!k.exchange) FF_TRY(enqueue_exchange(t, &k));
    t->steps++;
    t->samples += b;
    return FF_OK;
}

// Steps over the images of src (n of them, cut into batches of B) with the exchange queued on
// the device (t->queued): FF_TRAIN_INFLIGHT steps are enqueued (each its staging slot and graph)
// before one wait, which polls the peers against the comm's deadline (ff_comm_wait_queued). On a
// GPU, a source other than the resident set stages through one host buffer: one step per wait (a
// synchronous device has done a step's work when it is enqueued). Then the losses as step_core
// has them: each rank its images', zeros elsewhere, summed over ranks (exact).
static ff_status queued_steps(ff_trainer *t, double *losses, const batch_source *src, int64_t n) {
    const int64_t B = t->o.batch, count = ceil_div(n, B);
    const int64_t inflight = from_resident(t, src) || !ff_device_is_async(t->dev) ? FF_TRAIN_INFLIGHT : 1;
    for (int64_t j0 = 0; j0 < count; j0 += inflight) {
        const int64_t j1 = count - j0 < inflight ? count : j0 + inflight;
        const bool counted = t->steps >= FF_TRAIN_WARMUP_STEPS;  // a chunk with a warm-up step is left out whole
        const double t_begin = ff_now();
        ff_status st = ff_comm_set_queued(t->comm, true);
        for (int64_t j = j0; j < j1 && st == FF_OK; j++)
            st = queue_step(t, src, j * B, n - j * B < B ? n - j * B : B, (int)(j - j0));
        const ff_status off = ff_comm_set_queued(t->comm, false);
        if (st == FF_OK) st = off;
        const double t_enqueued = ff_now();
        if (st == FF_OK) st = ff_comm_wait_queued(t->comm);
        FF_TRY(st);
        FF_TRY(ff_device_sync(t->dev));  // done already: this reports the device's own errors
        double *l = t->losses;
        memset(l, 0, (size_t)((j1 - j0) * B) * sizeof(double));
        for (int64_t j = j0; j < j1; j++) {
            const int64_t b = n - j * B < B ? n - j * B : B;
            int64_t m0, m1, start, nimg;
            my_share(&m0, &m1, &start, &nimg, t, b);
            for (int64_t i = 0; i < nimg; i++) l[(j - j0) * B + start + i] = t->loss_host[(j - j0) * t->cap + i];
        }
        FF_TRY(ff_comm_allreduce_sum_f64(t->comm, l, (size_t)((j1 - j0) * B)));
        for (int64_t j = j0; j < j1; j++) {
            const int64_t b = n - j * B < B ? n - j * B : B;
            double sum = 0.0;
            for (int64_t i = 0; i < b; i++) sum += l[(j - j0) * B + i];
            losses[j] = sum / (double)b;
        }
        if (counted) {
            t->phases.compute_s += ff_now() - t_begin;
            t->phases.enqueue_s += t_enqueued - t_begin;
            t->phases.steps += j1 - j0;
        }
    }
    return FF_OK;
}

static ff_status step_core(ff_trainer *t, double *loss, const batch_source *src, int64_t b) {
    const int64_t B = t->o.batch, M = t->o.microbatch, P = t->P, N = t->N;
    if (b < 1 || b > B)
        return FF_FAIL(FF_ERR_INPUT, "train step: batch of %lld images, expected 1..%lld", (long long)b, (long long)B);
    if (t->queued) return queued_steps(t, loss, src, b);
    const int64_t nmb = (b + M - 1) / M;
    int64_t j0, j1;
    owned(&j0, &j1, t, nmb, t->rank);
    const int64_t nloc = j1 - j0;
    const int64_t start = j0 * M < b ? j0 * M : b, nimg = (j1 * M < b ? j1 * M : b) - start;
    const bool local = P == 1 || t->o.reduce == FF_REDUCE_ALLREDUCE;
    // One process: the whole step is device work (and one graph); several: the update waits for
    // the gradient exchange.
    const step_work k = {b, nimg, nloc, from_resident(t, src), local, P == 1, t->steps == 0, 0, t->overlap, false};

    // ---- this rank's micro-batches: forward, loss, backward (one gradient row per micro-batch)
    double t_begin = ff_now();
    const bool counted = t->steps >= FF_TRAIN_WARMUP_STEPS;  // phases: steady state only
    t->slot = k.slot;
    if (nimg > 0) stage_host(t, src, start, nimg);
    if (P > 1 && local && nloc == 0) {  // nothing of mine to sum: my part of the all-reduce is zeros
        memset(t->grad_host, 0, (size_t)N * sizeof(float));
        FF_TRY(ff_device_upload(t->dev, t->grad, t->grad_host, (size_t)N));
    }
    FF_TRY(run_step_work(t, &k));
    if (k.parts) FF_TRY(enqueue_backward_parts(t, &k));

    // ---- gradients across ranks, bucket by bucket
    if (P > 1) {
        block_map bm;
        map_blocks(&bm, t, nmb);  // (unused by allreduce)
        double t_computed = 0.0, in_comm = 0.0;
        if (!k.parts) {  // the device's work of this rank ends here
            FF_TRY(ff_device_sync(t->dev));
            t_computed = ff_now();
        }
        int64_t recv_at = 0;
        for (int i = 0; i < t->nbuckets; i++) {
            const int bk = exchange_order(t, i);
            if (k.parts) {
                FF_TRY(ff_device_wait_fence_at(t->dev, bk + 1));  // this bucket's gradients are in
                if (i == t->nbuckets - 1) t_computed = ff_now();  // and with the last, the backward
            }
            const double t0 = ff_now();
            FF_TRY(exchange_bucket(t, &k, &bm, bk, &recv_at, k.parts, false));
            in_comm += ff_now() - t0;
        }
        FF_TRY(ff_device_sync(t->dev));
        const double t_exchanged = ff_now();
        if (counted) {
            t->phases.compute_s += t_computed - t_begin;
            t->phases.exchange_s += t_exchanged - t_computed;
            t->phases.exchange_total_s += in_comm;
        }
        t_begin = t_exchanged;
        // SGD with momentum (PyTorch's rule), on the device; the deterministic exchange has done it
        // slice by slice
        if (local)
            FF_TRY(ff_device_sgd(t->dev, ff_device_params(t->dev), t->d_mom, t->grad, N, t->o.lr, t->o.momentum,
                                 t->o.weight_decay, t->steps == 0));
    }

    // ---- losses: every image's loss, in batch order, on every rank. Each rank writes its own
    // images' losses and zeros elsewhere; the sum over ranks adds only zeros to each value, so it
    // is exact whatever the order.
    FF_TRY(ff_device_sync(t->dev));
    memset(t->losses, 0, (size_t)b * sizeof(double));
    for (int64_t i = 0; i < nimg; i++) t->losses[start + i] = t->loss_host[i];
    if (P > 1) FF_TRY(ff_comm_allreduce_sum_f64(t->comm, t->losses, (size_t)b));
    double sum = 0.0;
    for (int64_t i = 0; i < b; i++) sum += t->losses[i];
    *loss = sum / (double)b;
    if (counted) {
        if (P > 1)
            t->phases.update_s += ff_now() - t_begin;  // the update and the losses' exchange
        else
            t->phases.compute_s += ff_now() - t_begin;  // one process: the whole step is device work
        t->phases.steps++;
    }
    t->steps++;
    t->samples += b;
    return FF_OK;
}

static ff_status check_ranks(const ff_trainer *t) {
    if (t->P > FF_MAX_RANKS_TRAIN)
        return FF_FAIL(FF_ERR_INPUT, "training on %d ranks: at most %d supported", t->P, FF_MAX_RANKS_TRAIN);
    return FF_OK;
}

// The logits layer's width: the number of classes the model tells apart.
static int64_t model_classes(const ff_model *m) {
    int last = m->n_layers - 1;
    if (last >= 0 && m->layers[last].op == FF_OP_SOFTMAX) last--;
    return last >= 0 ? ff_shape_numel(m->layers[last].out) : 0;
}

static const char *or_memory(const char *path) {
    return path[0] ? path : "(in memory)";
}

// Sample shape only (O(1)): what every step re-checks before it indexes ds->pixels.
static ff_status check_image_shape(const ff_model *m, const ff_dataset *ds) {
    const ff_shape in = m->input;
    if (ds->synthetic) {
        if (in.c != ds->cols || in.h != 1 || in.w != 1)
            return FF_FAIL(FF_ERR_INPUT, "synthetic data has %lld features, model %s expects %lldx%lldx%lld",
                           (long long)ds->cols, m->name, (long long)in.c, (long long)in.h, (long long)in.w);
        return FF_OK;
    }
    if (in.c != 1 || in.h != ds->rows || in.w != ds->cols)
        return FF_FAIL(FF_ERR_INPUT, "IDX images '%s' are %lldx%lld, model %s expects %lldx%lldx%lld",
                       or_memory(ds->images_path), (long long)ds->rows, (long long)ds->cols, m->name, (long long)in.c,
                       (long long)in.h, (long long)in.w);
    return FF_OK;
}

ff_status ff_train_check_dataset(const ff_model *m, const ff_dataset *ds) {
    if (ds->n < 1 || (!ds->pixels && !ds->synthetic) || !ds->labels)
        return FF_FAIL(FF_ERR_INPUT, "IDX data '%s': %lld samples, expected at least 1", or_memory(ds->images_path),
                       (long long)ds->n);
    FF_TRY(check_image_shape(m, ds));
    const int64_t classes = model_classes(m);
    for (int64_t i = 0; i < ds->n; i++)
        if (ds->labels[i] >= classes)
            return FF_FAIL(FF_ERR_INPUT,
                           "IDX labels '%s': label %d of sample %lld, expected 0..%lld (model %s has %lld classes)",
                           or_memory(ds->labels_path), ds->labels[i], (long long)i, (long long)classes - 1, m->name,
                           (long long)classes);
    return FF_OK;
}

ff_status ff_train_plan_make(ff_train_plan *out, int64_t n, int64_t batch, int64_t epochs, int64_t max_steps) {
    memset(out, 0, sizeof *out);
    if (n < 1) return FF_FAIL(FF_ERR_INPUT, "training set of %lld images, expected at least 1", (long long)n);
    if (batch < 1) return FF_FAIL(FF_ERR_INPUT, "--batch %lld: expected >= 1", (long long)batch);
    if (epochs < 1) return FF_FAIL(FF_ERR_INPUT, "--epochs %lld: expected >= 1", (long long)epochs);
    if (max_steps < 0)
        return FF_FAIL(FF_ERR_INPUT, "--steps %lld: expected >= 1 (or 0: no limit)", (long long)max_steps);
    const int64_t spe = ceil_div(n, batch);
    int64_t total;
    if (__builtin_mul_overflow(epochs, spe, &total))
        return FF_FAIL(FF_ERR_INPUT,
                       "--epochs %lld x %lld steps per epoch (%lld images / --batch %lld) overflows a 64-bit step "
                       "count; expected --epochs <= %lld",
                       (long long)epochs, (long long)spe, (long long)n, (long long)batch, (long long)(INT64_MAX / spe));
    out->steps_per_epoch = spe;
    out->total = max_steps > 0 && max_steps < total ? max_steps : total;
    return FF_OK;
}

// The checks of one step's batch (before any work is enqueued).
static ff_status check_batch(const ff_trainer *t, const ff_dataset *ds, const int64_t *idx, int64_t b) {
    FF_TRY(check_ranks(t));
    FF_TRY(check_image_shape(t->m, ds));
    if (b < 1 || b > t->o.batch)
        return FF_FAIL(FF_ERR_INPUT, "train step: batch of %lld images, expected 1..%lld", (long long)b,
                       (long long)t->o.batch);
    const int64_t classes = model_classes(t->m);
    for (int64_t i = 0; i < b; i++) {
        if (idx[i] < 0 || idx[i] >= ds->n)
            return FF_FAIL(FF_ERR_INPUT, "train step: sample index %lld out of range [0, %lld)", (long long)idx[i],
                           (long long)ds->n);
        // Only this batch's labels: O(b) per step (ff_train_check_dataset scans the whole set once).
        if (ds->labels[idx[i]] >= classes)
            return FF_FAIL(FF_ERR_INPUT,
                           "IDX labels '%s': label %d of sample %lld, expected 0..%lld (model %s has %lld classes)",
                           or_memory(ds->labels_path), ds->labels[idx[i]], (long long)idx[i], (long long)classes - 1,
                           t->m->name, (long long)classes);
    }
    return FF_OK;
}

ff_status ff_train_step(ff_trainer *t, double *loss, const ff_dataset *ds, const int64_t *idx, int64_t b) {
    FF_TRY(check_batch(t, ds, idx, b));
    batch_source src = {ds, idx, NULL, NULL};
    return step_core(t, loss, &src, b);
}

ff_status ff_train_steps(ff_trainer *t, double *losses, const ff_dataset *ds, const int64_t *idx, int64_t n) {
    const int64_t B = t->o.batch;
    if (n < 1) return FF_FAIL(FF_ERR_INPUT, "train steps: %lld images, expected >= 1", (long long)n);
    const int64_t count = ceil_div(n, B);
    if (t->queued) {  // several ranks, the exchange queued on the device: several steps per wait too
        for (int64_t j = 0; j < count; j++) FF_TRY(check_batch(t, ds, idx + j * B, n - j * B < B ? n - j * B : B));
        const batch_source src = {ds, idx, NULL, NULL};
        return queued_steps(t, losses, &src, n);
    }
    // One process on a device that captures, from the resident set: FF_TRAIN_INFLIGHT steps are
    // enqueued (each its graph, its staging slot) before one wait. Anything else: step by step.
    if (t->P > 1 || ds != t->resident || !ff_device_can_capture(t->dev) || t->no_graphs) {
        for (int64_t j = 0; j < count; j++)
            FF_TRY(ff_train_step(t, &losses[j], ds, idx + j * B, n - j * B < B ? n - j * B : B));
        return FF_OK;
    }
    const int64_t M = t->o.microbatch;
    const batch_source src = {ds, idx, NULL, NULL};
    const double t_begin = ff_now();
    const int64_t steps_before = t->steps;
    for (int64_t j0 = 0; j0 < count; j0 += FF_TRAIN_INFLIGHT) {
        const int64_t j1 = count - j0 < FF_TRAIN_INFLIGHT ? count : j0 + FF_TRAIN_INFLIGHT;
        for (int64_t j = j0; j < j1; j++) {
            const int64_t b = n - j * B < B ? n - j * B : B;
            FF_TRY(check_batch(t, ds, idx + j * B, b));
            const step_work k = {b, b, ceil_div(b, M), true, true, true, t->steps == 0, (int)(j - j0), false, false};
            t->slot = k.slot;
            stage_host(t, &src, j * B, b);
            FF_TRY(run_step_work(t, &k));
            t->steps++;
            t->samples += b;
        }
        FF_TRY(ff_device_sync(t->dev));
        for (int64_t j = j0; j < j1; j++) {  // each step's loss: its images' in order, in double
            const int64_t b = n - j * B < B ? n - j * B : B;
            const float *l = t->loss_host + (j - j0) * t->cap;
            double sum = 0.0;
            for (int64_t i = 0; i < b; i++) sum += (double)l[i];
            losses[j] = sum / (double)b;
        }
    }
    if (steps_before >= FF_TRAIN_WARMUP_STEPS) {  // a chunk with a warm-up step is left out whole
        t->phases.compute_s += ff_now() - t_begin;
        t->phases.steps += count;
    }
    return FF_OK;
}

ff_status ff_train_step_tensor(ff_trainer *t, double *loss, const float *x, const int32_t *labels, int64_t b) {
    FF_TRY(check_ranks(t));
    const int64_t classes = ff_shape_numel(t->m->layers[t->last].out);
    for (int64_t i = 0; i < b; i++)
        if (labels[i] < 0 || labels[i] >= classes)
            return FF_FAIL(FF_ERR_INPUT, "train step: label %d of image %lld, expected 0..%lld", labels[i],
                           (long long)i, (long long)classes - 1);
    batch_source src = {NULL, NULL, x, labels};
    return step_core(t, loss, &src, b);
}

ff_status ff_train_evaluate(ff_trainer *t, int64_t *correct, const ff_dataset *ds, int64_t n) {
    *correct = 0;
    if (n < 0) return FF_FAIL(FF_ERR_INPUT, "evaluate: %lld samples, expected >= 0", (long long)n);
    // The test set is read here for the first time in a run: without this, 64x64 images would be
    // normalised into 28x28 slots (a heap overflow) and a label >= classes counted as a miss.
    FF_TRY(check_ranks(t));
    FF_TRY(ff_train_check_dataset(t->m, ds));
    if (n > ds->n) n = ds->n;
    FF_TRY(join_tail(t));  // the weights of the last step's exchange
    const int64_t M = t->o.microbatch, P = t->P, classes = t->classes;
    // Chunks of M images, dealt to ranks in contiguous runs; each rank runs up to cap at a time.
    const int64_t nch = (n + M - 1) / M;
    const int64_t lo = nch * t->rank / P * M, hi_ch = nch * (t->rank + 1) / P * M, hi = hi_ch < n ? hi_ch : n;
    float *z = NULL;
    if (hi > lo) z = malloc((size_t)(t->cap * classes) * sizeof(float));
    if (hi > lo && !z) return FF_FAIL(FF_ERR_OOM, "evaluate: %lld logits", (long long)(t->cap * classes));
    ff_status st = FF_OK;
    int64_t count = 0;
    int64_t *order = hi > lo ? malloc((size_t)t->cap * sizeof *order) : NULL;
    if (hi > lo && !order) st = FF_FAIL(FF_ERR_OOM, "evaluate: %lld indices", (long long)t->cap);
    const batch_source src = {ds, order, NULL, NULL};
    for (int64_t s0 = lo; s0 < hi && st == FF_OK; s0 += t->cap) {
        const int64_t m = hi - s0 < t->cap ? hi - s0 : t->cap;
        for (int64_t i = 0; i < m; i++) order[i] = s0 + i;
        st = fetch(t, &src, 0, m);
        if (st == FF_OK) st = ff_device_train_forward(t->dev, t->act, 0, t->last, m, M);
        if (st == FF_OK) st = ff_device_download(t->dev, z, t->act[t->last + 1], (size_t)(m * classes));
        // labels are int32: downloaded as floats of the same size
        if (st == FF_OK) st = ff_device_download(t->dev, (float *)t->labels_host, (const float *)t->labels, (size_t)m);
        if (st == FF_OK) st = ff_device_sync(t->dev);
        for (int64_t i = 0; i < m && st == FF_OK; i++) {
            int64_t best = 0;
            for (int64_t k = 1; k < classes; k++)
                if (z[i * classes + k] > z[i * classes + best]) best = k;
            count += best == t->labels_host[i];
        }
    }
    free(order);
    free(z);
    FF_TRY(st);
    double total = (double)count;
    if (P > 1) FF_TRY(ff_comm_allreduce_sum_f64(t->comm, &total, 1));
    *correct = (int64_t)total;
    return FF_OK;
}
