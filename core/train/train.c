// Data-parallel SGD with the deterministic micro-batch reduction described in train.h.
#include "fivefold/train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fivefold/device.h"
#include "fivefold/layers_cpu.h"
#include "fivefold/layers_cpu_backward.h"
#include "fivefold/plan.h"

// One micro-batch's working set: the activations of every layer (kept for the backward), two
// gradient ping-pong buffers, the conv im2col scratch and the micro-batch's own parameter gradient.
typedef struct {
    float *act[FF_MAX_LAYERS + 1];  // act[0]: input (M, input); act[l+1]: output of layer l (M, out)
    float *ga, *gb;                 // (M, max_act)
    float *scratch;                 // largest conv im2col of one image
    float *g;                       // (n_total) gradient of this micro-batch, weights layout
    int32_t *labels;                // (M)
    float *loss;                    // (M) per-image loss
    int64_t correct;                // evaluate(): matches in this slot
    ff_device *dev;                 // the forward's device (cpu, on the trainer's weights in place)
} slot;

struct ff_trainer {
    const ff_model *m;
    ff_weights *w;
    ff_weights mom;
    ff_train_options o;
    ff_comm *comm;
    int rank, P;
    int last;  // index of the logits layer (the last non-softmax layer)
    int64_t N;
    float *grad;  // (N) reduced gradient of the last step
    int64_t nslots;
    slot *slots;
    float *sendbuf;  // (nslots * N) packed slices for the reduce-scatter
    float *recvbuf;  // (nmb_max * (N/P + 1)) every micro-batch's copy of this rank's slice
    double *losses;  // (B) per-image losses of the global batch, in batch order
    int64_t steps;
    int64_t samples;  // images trained on since creation (sum of every step's b)
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
    o->batch = 64;
    o->microbatch = 8;
    o->lr = 0.01f;
    o->momentum = 0.9f;
    o->weight_decay = 0.0f;
    o->reduce = FF_REDUCE_DETERMINISTIC;
}

static void *xcalloc(size_t n, size_t sz, ff_status *st, const char *what) {
    void *p = calloc(n ? n : 1, sz);
    if (!p && *st == FF_OK) *st = FF_FAIL(FF_ERR_OOM, "trainer: cannot allocate %zu bytes for %s", n * sz, what);
    return p;
}

void ff_trainer_destroy(ff_trainer *t) {
    if (!t) return;
    for (int64_t s = 0; t->slots && s < t->nslots; s++) {
        slot *sl = &t->slots[s];
        for (int l = 0; l <= FF_MAX_LAYERS; l++) free(sl->act[l]);
        free(sl->ga);
        free(sl->gb);
        free(sl->scratch);
        free(sl->g);
        free(sl->labels);
        free(sl->loss);
        ff_device_destroy(sl->dev);
    }
    free(t->slots);
    free(t->grad);
    free(t->sendbuf);
    free(t->recvbuf);
    free(t->losses);
    ff_weights_free(&t->mom);
    free(t);
}

// ceil(a / b) for a >= 0, b >= 1, without the overflow of (a + b - 1) / b at a near INT64_MAX.
static int64_t ceil_div(int64_t a, int64_t b) {
    return a / b + (a % b != 0);
}

ff_status ff_train_options_check(const ff_train_options *o) {
    if (o->batch < 1) return FF_FAIL(FF_ERR_INPUT, "--batch %lld: expected >= 1", (long long)o->batch);
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

ff_status ff_trainer_create(ff_trainer **out, const ff_model *m, ff_weights *w, const ff_train_options *o,
                            ff_comm *comm) {
    *out = NULL;
    FF_TRY(ff_train_options_check(o));
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
    ff_status st = FF_OK;
    ff_trainer *t = xcalloc(1, sizeof *t, &st, "the trainer");
    if (!t) return st;
    t->m = m;
    t->w = w;
    t->o = *o;
    t->comm = comm;
    t->rank = comm ? ff_comm_rank(comm) : 0;
    t->P = comm ? ff_comm_size(comm) : 1;
    t->last = last;
    t->N = w->n_total;
    const int64_t M = o->microbatch, P = t->P;
    const int64_t nmb_max = ceil_div(o->batch, M);  // <= FF_MAX_MICROBATCHES (checked above)
    t->nslots = ceil_div(nmb_max, P);
    if (t->nslots < 1) t->nslots = 1;
    // Every buffer size below is a product of a user-chosen count (M, B) and a model size: check
    // each once here, so the allocations can use the plain products.
    int64_t cnt;
    st = checked_count(&cnt, M, m->max_act, sizeof(float), "micro-batch activations (--microbatch x largest layer)");
    if (st == FF_OK) st = checked_count(&cnt, o->batch, 1, sizeof(double), "losses (--batch)");
    if (st == FF_OK) st = checked_count(&cnt, t->nslots, t->N, sizeof(float), "micro-batch gradients");
    if (st == FF_OK) st = checked_count(&cnt, nmb_max, t->N / P + 1, sizeof(float), "reduce buffer");
    if (st == FF_OK) st = ff_weights_alloc(&t->mom, m);
    if (st != FF_OK) {
        free(t);
        return st;
    }
    memset(t->mom.data, 0, (size_t)t->N * sizeof(float));
    t->grad = xcalloc((size_t)t->N, sizeof(float), &st, "the gradient");
    t->losses = xcalloc((size_t)o->batch, sizeof(double), &st, "losses");
    t->slots = xcalloc((size_t)t->nslots, sizeof(slot), &st, "micro-batch slots");
    int64_t scratch = 1;
    for (int l = 0; l <= last; l++)
        if (m->layers[l].op == FF_OP_CONV2D) {
            int64_t s = ff_cpu_conv2d_backward_weights_scratch(&m->layers[l]);
            if (s > scratch) scratch = s;
        }
    for (int64_t s = 0; t->slots && s < t->nslots && st == FF_OK; s++) {
        slot *sl = &t->slots[s];
        sl->act[0] = xcalloc((size_t)(M * ff_shape_numel(m->input)), sizeof(float), &st, "input");
        for (int l = 0; l <= last; l++)
            sl->act[l + 1] = xcalloc((size_t)(M * ff_shape_numel(m->layers[l].out)), sizeof(float), &st, "activations");
        sl->ga = xcalloc((size_t)(M * m->max_act), sizeof(float), &st, "gradients");
        sl->gb = xcalloc((size_t)(M * m->max_act), sizeof(float), &st, "gradients");
        sl->scratch = xcalloc((size_t)scratch, sizeof(float), &st, "im2col scratch");
        sl->g = xcalloc((size_t)t->N, sizeof(float), &st, "micro-batch gradient");
        sl->labels = xcalloc((size_t)M, sizeof(int32_t), &st, "labels");
        sl->loss = xcalloc((size_t)M, sizeof(float), &st, "losses");
        // The forward runs through the device interface (device.h), one device per slot since the
        // slots run in parallel; the cpu device borrows the weights the SGD update writes.
        if (st == FF_OK) {
            ff_plan_options po;
            ff_plan plan;
            const ff_device_options dopt = {.max_batch = M, .gpu = -1, .borrow_weights = true};
            st = ff_plan_options_default(&po);
            if (st != FF_OK) {  // a bad FF_CUDA_* default does not concern the cpu device
                ff_clear_error();
                memset(&po, 0, sizeof po);
                po.winograd_m = 4;
                st = FF_OK;
            }
            st = ff_plan_build(&plan, m, FF_DEVICE_CPU, &po);
            if (st == FF_OK) st = ff_device_create(&sl->dev, m, w, &plan, &dopt);
        }
    }
    if (st == FF_OK && P > 1) {
        t->sendbuf = xcalloc((size_t)(t->nslots * t->N), sizeof(float), &st, "reduce send buffer");
        t->recvbuf = xcalloc((size_t)(nmb_max * (t->N / P + 1)), sizeof(float), &st, "reduce receive buffer");
    }
    if (st != FF_OK) {
        ff_trainer_destroy(t);
        return st;
    }
    *out = t;
    return FF_OK;
}

const float *ff_trainer_grad(const ff_trainer *t) {
    return t->grad;
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

// ---------------------------------------------------------------- one micro-batch

// Every activation is kept for the backward: one layer at a time, whole (device.h run_bands).
static ff_status forward(const ff_trainer *t, slot *sl, int64_t n) {
    for (int l = 0; l <= t->last; l++) {
        const ff_band_job job = {sl->act[l + 1], sl->act[l], ff_rows_full(&t->m->layers[l]), n};
        FF_TRY(ff_device_run_bands(sl->dev, &job, 1, l));
    }
    return FF_OK;
}

// Gradient of scale * (sum of the n images' losses) into sl->g; per-image losses into sl->loss.
static void backward(const ff_trainer *t, slot *sl, int64_t n, float scale) {
    const ff_model *m = t->m;
    float *cur = sl->ga, *other = sl->gb;
    ff_cpu_softmax_xent_backward(cur, sl->loss, sl->act[t->last + 1], sl->labels, scale,
                                 ff_shape_numel(m->layers[t->last].out), n);
    for (int l = t->last; l >= 0; l--) {
        const ff_layer *L = &m->layers[l];
        const float *x = sl->act[l], *y = sl->act[l + 1];
        const int need_dx = l > 0;  // the data's own gradient is never needed
        float *tmp;
        switch (L->op) {
            case FF_OP_CONV2D:
            case FF_OP_LINEAR: {
                float *gw = sl->g + (t->w->w[l] - t->w->data);
                float *gbias = sl->g + (t->w->b[l] - t->w->data);
                if (L->op == FF_OP_CONV2D) {
                    ff_cpu_conv2d_backward_weights(gw, gbias, cur, x, L, n, sl->scratch);
                    if (need_dx) ff_cpu_conv2d_backward_data(other, cur, t->w->w[l], L, n);
                } else {
                    ff_cpu_linear_backward_weights(gw, gbias, cur, x, L, n);
                    if (need_dx) ff_cpu_linear_backward_data(other, cur, t->w->w[l], L, n);
                }
                break;
            }
            case FF_OP_RELU:
                if (need_dx) ff_cpu_relu_backward(other, cur, y, n * ff_shape_numel(L->out));
                break;
            case FF_OP_MAXPOOL:
                if (need_dx) ff_cpu_maxpool_backward(other, cur, x, L, n);
                break;
            case FF_OP_FLATTEN: continue;  // same memory layout: the gradient passes through unchanged
            default: continue;             // excluded by ff_trainer_create
        }
        tmp = cur;
        cur = other;
        other = tmp;
    }
}

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

static void fetch(const ff_trainer *t, slot *sl, const batch_source *src, int64_t start, int64_t n) {
    if (src->ds) {
        ff_dataset_batch(sl->act[0], sl->labels, src->ds, src->idx, start, n);
    } else {
        const int64_t per = ff_shape_numel(t->m->input);
        memcpy(sl->act[0], src->x + start * per, (size_t)(n * per) * sizeof(float));
        memcpy(sl->labels, src->labels + start, (size_t)n * sizeof(int32_t));
    }
}

static ff_status step_core(ff_trainer *t, double *loss, const batch_source *src, int64_t b) {
    const int64_t B = t->o.batch, M = t->o.microbatch, P = t->P, N = t->N;
    if (b < 1 || b > B)
        return FF_FAIL(FF_ERR_INPUT, "train step: batch of %lld images, expected 1..%lld", (long long)b, (long long)B);
    const int64_t nmb = (b + M - 1) / M;
    const int64_t j0 = nmb * t->rank / P, j1 = nmb * (t->rank + 1) / P, nloc = j1 - j0;
    const float scale = 1.0f / (float)b;

    // Each micro-batch on its own slot; OpenMP across them keeps every one's sums in order.
    int failed = 0;  // a forward's status (cpu run_bands of one whole layer cannot fail: its
                     // argument checks hold by construction and it allocates nothing)
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t jj = 0; jj < nloc; jj++) {
        slot *sl = &t->slots[jj];
        const int64_t start = (j0 + jj) * M, n = start + M <= b ? M : b - start;
        fetch(t, sl, src, start, n);
        if (forward(t, sl, n) != FF_OK) {
#pragma omp atomic write
            failed = 1;
            continue;
        }
        backward(t, sl, n, scale);
    }
    if (failed) return FF_FAIL(FF_ERR_INTERNAL, "train step: a micro-batch's forward failed on the cpu device");

    // ---- losses: every image's loss, in batch order, on every rank
    for (int64_t jj = 0; jj < nloc; jj++) {
        const int64_t start = (j0 + jj) * M, n = start + M <= b ? M : b - start;
        for (int64_t i = 0; i < n; i++) t->losses[start + i] = t->slots[jj].loss[i];
    }
    if (P > 1) {
        size_t counts[FF_MAX_RANKS_TRAIN], displs[FF_MAX_RANKS_TRAIN];
        for (int64_t q = 0; q < P; q++) {
            int64_t a = nmb * q / P * M, e = nmb * (q + 1) / P * M;
            if (a > b) a = b;
            if (e > b) e = b;
            counts[q] = (size_t)(e - a) * sizeof(double);
            displs[q] = (size_t)a * sizeof(double);
        }
        double *mine = t->losses + (j0 * M < b ? j0 * M : b);
        // allgatherv reads sendbuf and writes recvbuf; our block is already in place, so send a
        // copy to keep the two buffers disjoint.
        double tmp[1024];
        size_t nb = counts[t->rank];
        double *sendp = nb <= sizeof tmp ? tmp : malloc(nb);
        if (!sendp) return FF_FAIL(FF_ERR_OOM, "train step: cannot allocate %zu bytes", nb);
        memcpy(sendp, mine, nb);
        ff_status st = ff_comm_allgatherv(t->comm, t->losses, counts, displs, sendp, nb);
        if (sendp != tmp) free(sendp);
        FF_TRY(st);
    }
    double sum = 0.0;
    for (int64_t i = 0; i < b; i++) sum += t->losses[i];
    *loss = sum / (double)b;

    // ---- gradients
    float *rows[FF_MAX_MICROBATCHES];  // nmb <= FF_MAX_MICROBATCHES: checked by ff_trainer_create
    if (P == 1 || t->o.reduce == FF_REDUCE_ALLREDUCE) {
        for (int64_t jj = 0; jj < nloc; jj++) rows[jj] = t->slots[jj].g;
        if (nloc > 0) {
            ff_tree_reduce(rows, nloc, N);
            memcpy(t->grad, rows[0], (size_t)N * sizeof(float));
        } else {
            memset(t->grad, 0, (size_t)N * sizeof(float));
        }
        if (P > 1) FF_TRY(ff_comm_allreduce_sum_f32(t->comm, t->grad, (size_t)N));
    } else {
        // Reduce-scatter by parameter slices: slice q = [N*q/P, N*(q+1)/P) goes to rank q, which
        // receives it from every micro-batch in j order, reduces it with the tree, and the
        // reduced slices are all-gathered.
        size_t scount[FF_MAX_RANKS_TRAIN], sdispl[FF_MAX_RANKS_TRAIN];
        size_t rcount[FF_MAX_RANKS_TRAIN], rdispl[FF_MAX_RANKS_TRAIN];
        const int64_t my_lo = N * t->rank / P, my_len = N * (t->rank + 1) / P - my_lo;
        size_t off = 0;
        for (int64_t q = 0; q < P; q++) {
            const int64_t lo = N * q / P, len = N * (q + 1) / P - lo;
            scount[q] = (size_t)(nloc * len) * sizeof(float);
            sdispl[q] = off;
            for (int64_t jj = 0; jj < nloc; jj++)
                memcpy((char *)t->sendbuf + off + (size_t)(jj * len) * sizeof(float), t->slots[jj].g + lo,
                       (size_t)len * sizeof(float));
            off += scount[q];
        }
        off = 0;
        for (int64_t q = 0; q < P; q++) {
            const int64_t nq = nmb * (q + 1) / P - nmb * q / P;
            rcount[q] = (size_t)(nq * my_len) * sizeof(float);
            rdispl[q] = off;
            off += rcount[q];
        }
        FF_TRY(ff_comm_alltoallv(t->comm, t->recvbuf, rcount, rdispl, t->sendbuf, scount, sdispl));
        for (int64_t j = 0; j < nmb; j++) rows[j] = t->recvbuf + j * my_len;
        ff_tree_reduce(rows, nmb, my_len);
        size_t gcount[FF_MAX_RANKS_TRAIN], gdispl[FF_MAX_RANKS_TRAIN];
        for (int64_t q = 0; q < P; q++) {
            const int64_t lo = N * q / P, len = N * (q + 1) / P - lo;
            gcount[q] = (size_t)len * sizeof(float);
            gdispl[q] = (size_t)lo * sizeof(float);
        }
        FF_TRY(ff_comm_allgatherv(t->comm, t->grad, gcount, gdispl, rows[0], (size_t)my_len * sizeof(float)));
    }

    // ---- SGD with momentum (PyTorch's rule), element-wise
    const float lr = t->o.lr, mu = t->o.momentum, wd = t->o.weight_decay;
    const int first = t->steps == 0;
    float *w = t->w->data, *buf = t->mom.data;
    const float *g = t->grad;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < N; i++) {
        float gi = g[i];
        if (wd != 0.0f) gi = gi + wd * w[i];
        float bi;
        if (mu != 0.0f) {
            bi = first ? gi : mu * buf[i] + gi;
            buf[i] = bi;
        } else {
            bi = gi;
        }
        w[i] = w[i] - lr * bi;
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

// Image shape only (O(1)): what every step re-checks before it indexes ds->pixels.
static ff_status check_image_shape(const ff_model *m, const ff_dataset *ds) {
    const ff_shape in = m->input;
    if (in.c != 1 || in.h != ds->rows || in.w != ds->cols)
        return FF_FAIL(FF_ERR_INPUT, "IDX images '%s' are %lldx%lld, model %s expects %lldx%lldx%lld",
                       or_memory(ds->images_path), (long long)ds->rows, (long long)ds->cols, m->name, (long long)in.c,
                       (long long)in.h, (long long)in.w);
    return FF_OK;
}

ff_status ff_train_check_dataset(const ff_model *m, const ff_dataset *ds) {
    if (ds->n < 1 || !ds->pixels || !ds->labels)
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

ff_status ff_train_step(ff_trainer *t, double *loss, const ff_dataset *ds, const int64_t *idx, int64_t b) {
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
    batch_source src = {ds, idx, NULL, NULL};
    return step_core(t, loss, &src, b);
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
    const int64_t M = t->o.microbatch, P = t->P;
    const int64_t classes = ff_shape_numel(t->m->layers[t->last].out);
    const int64_t nch = (n + M - 1) / M;
    const int64_t c0 = nch * t->rank / P, c1 = nch * (t->rank + 1) / P;
    int64_t *order = malloc((size_t)(n > 0 ? n : 1) * sizeof *order);
    if (!order) return FF_FAIL(FF_ERR_OOM, "evaluate: cannot allocate %lld indices", (long long)n);
    for (int64_t i = 0; i < n; i++) order[i] = i;
    for (int64_t s = 0; s < t->nslots; s++) t->slots[s].correct = 0;
    int failed = 0;
    for (int64_t c = c0; c < c1 && !failed; c += t->nslots) {
        const int64_t cnt = c1 - c < t->nslots ? c1 - c : t->nslots;
#pragma omp parallel for schedule(dynamic, 1)
        for (int64_t jj = 0; jj < cnt; jj++) {
            slot *sl = &t->slots[jj];
            const int64_t start = (c + jj) * M, m = start + M <= n ? M : n - start;
            ff_dataset_batch(sl->act[0], sl->labels, ds, order, start, m);
            if (forward(t, sl, m) != FF_OK) {
#pragma omp atomic write
                failed = 1;
                continue;
            }
            const float *z = sl->act[t->last + 1];
            for (int64_t i = 0; i < m; i++) {
                int64_t best = 0;
                for (int64_t k = 1; k < classes; k++)
                    if (z[i * classes + k] > z[i * classes + best]) best = k;
                sl->correct += best == sl->labels[i];
            }
        }
    }
    free(order);
    if (failed) return FF_FAIL(FF_ERR_INTERNAL, "evaluate: a forward failed on the cpu device");
    double total = 0;
    for (int64_t s = 0; s < t->nslots; s++) total += (double)t->slots[s].correct;
    if (P > 1) FF_TRY(ff_comm_allreduce_sum_f64(t->comm, &total, 1));
    *correct = (int64_t)total;
    return FF_OK;
}
