// ff_gpu_train_bench N [N...]: times the pieces of one mnist-cnn training step on the cuda device
// through the device interface the trainer uses (device.h, "training"): the forward that keeps
// every activation, softmax cross-entropy, the backward (per micro-batch gradient rows, M = 8),
// the tree over those rows, the two in one (train_backward_reduced, what one process's step runs:
// the linear layers sum their micro-batches in the tree as they go), the SGD update, and the whole
// step (forward, loss, the backward with its tree, SGD) enqueued eagerly and replayed as one CUDA
// graph. Each figure is the median of 30 timed runs, each ended by a device sync; the
// TFLOP/s column counts 2 FLOPs per multiply-add of the forward (train_forward), twice that for the
// backward (data and weight gradients), three times for the step. What it says: which piece bounds
// the step (compute, memory, launches), the "say what bounds each configuration" of issue 15.
// One JSON line per batch size. Exit 77 without a GPU, as the tests.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fivefold/device.h"
#include "fivefold/model.h"
#include "fivefold/plan.h"
#include "fivefold/rng.h"
#include "fivefold/trace.h"
#include "fivefold/weights.h"

#include "bench_util.h"

#define ITERS 30
#define GROUP 8

typedef struct {
    ff_device *d;
    const ff_model *m;
    int last;
    int64_t n, classes, N;
    float *act[FF_MAX_LAYERS + 1], *dz, *loss, *grads, *grad, *mom;
    int32_t *labels;
} step_bufs;

typedef enum { P_FORWARD, P_SOFTMAX, P_BACKWARD, P_TREE, P_BACKWARD_REDUCED, P_SGD, P_STEP } piece;
static const char *piece_name[] = {
    "train_forward", "softmax_xent", "train_backward", "tree_reduce", "train_backward_reduced", "sgd", "step"};

static ff_status run_piece(step_bufs *b, piece p) {
    const int64_t ngroups = (b->n + GROUP - 1) / GROUP;
    float *params = ff_device_params(b->d);
    switch (p) {
        case P_FORWARD: return ff_device_train_forward(b->d, b->act, 0, b->last, b->n, GROUP);
        case P_SOFTMAX:
            return ff_device_softmax_xent(b->d, b->dz, b->loss, b->act[b->last + 1], b->labels, 1.0f / (float)b->n,
                                          b->classes, b->n);
        case P_BACKWARD:
            return ff_device_train_backward(b->d, b->grads, b->N, b->dz, (const float *const *)b->act, b->last, b->n,
                                            GROUP);
        case P_TREE: return ff_device_tree_reduce(b->d, b->grads, b->grads, ngroups, b->N, b->N);
        case P_BACKWARD_REDUCED:  // the two above in one (what one process's step runs)
            return ff_device_train_backward_reduced(b->d, b->grad, b->grads, b->N, b->dz, (const float *const *)b->act,
                                                    b->last, b->n, GROUP, b->N);
        case P_SGD:
            // a tiny learning rate: the weights stay what the other pieces were timed with
            return ff_device_sgd(b->d, params, b->mom, b->grads, b->N, 1e-12f, 0.9f, 0.0f, false);
        case P_STEP:  // the trainer's one-process step: forward, loss, the backward with its tree, SGD
            for (piece q = P_FORWARD; q < P_STEP; q++)
                if (q != P_BACKWARD && q != P_TREE) FF_TRY(run_piece(b, q));
            return FF_OK;
    }
    return FF_OK;
}

static double median_ms(step_bufs *b, piece p, ff_device_graph *g) {
    double ms[ITERS];
    for (int i = 0; i < ITERS + 3; i++) {
        const double t0 = ff_now();
        if (g)
            CHECK(ff_device_graph_launch(b->d, g));
        else
            CHECK(run_piece(b, p));
        CHECK(ff_device_sync(b->d));
        if (i >= 3) ms[i - 3] = 1e3 * (ff_now() - t0);
    }
    qsort(ms, ITERS, sizeof ms[0], cmp_d);
    return ms[ITERS / 2];
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help")) {
        printf(
            "usage: ff_gpu_train_bench N [N...]\n"
            "Times each piece of one mnist-cnn training step on the GPU (median of %d runs) and the\n"
            "whole step eagerly and as one CUDA graph; a table and one JSON line per N.\n",
            ITERS);
        return argc < 2 ? 2 : 0;
    }
    ff_model m;
    CHECK(ff_model_init(&m, "mnist-cnn"));
    ff_weights w;
    CHECK(ff_weights_alloc(&w, &m));
    ff_weights_generate(&w, &m, 1);
    ff_plan_options po;
    CHECK(ff_plan_options_default(&po));
    po.conv = FF_CONV_DIRECT;
    ff_plan plan;
    CHECK(ff_plan_build(&plan, &m, FF_DEVICE_CUDA, &po));
    int last = m.n_layers - 1;
    if (m.layers[last].op == FF_OP_SOFTMAX) last--;
    double fwd_flops_img = 0;  // multiply-adds x 2 of conv and linear layers up to the logits
    for (int l = 0; l <= last; l++) {
        const ff_layer *L = &m.layers[l];
        if (L->op == FF_OP_CONV2D)
            fwd_flops_img += 2.0 * (double)ff_shape_numel(L->out) * (double)(L->in.c * L->kh * L->kw);
        else if (L->op == FF_OP_LINEAR)
            fwd_flops_img += 2.0 * (double)ff_shape_numel(L->out) * (double)ff_shape_numel(L->in);
    }
    printf("%-6s %-16s %10s %10s\n", "N", "piece", "ms", "TFLOP/s");
    for (int a = 1; a < argc; a++) {
        const int64_t n = atoll(argv[a]);
        if (n < 1 || n > 8192) {
            fprintf(stderr, "N '%s': expected 1..8192\n", argv[a]);
            return 2;
        }
        ff_device *d;
        const ff_device_options dopt = {.max_batch = n, .gpu = -1};
        CHECK(ff_device_create(&d, &m, &w, &plan, &dopt));
        step_bufs b = {.d = d, .m = &m, .last = last, .n = n, .N = w.n_total};
        b.classes = ff_shape_numel(m.layers[last].out);
        CHECK(ff_device_alloc(d, &b.act[0], (size_t)(n * ff_shape_numel(m.input)), "input"));
        for (int l = 0; l <= last; l++)
            if (m.layers[l].op == FF_OP_FLATTEN)
                b.act[l + 1] = b.act[l];
            else
                CHECK(ff_device_alloc(d, &b.act[l + 1], (size_t)(n * ff_shape_numel(m.layers[l].out)), "act"));
        const int64_t ngroups = (n + GROUP - 1) / GROUP;
        CHECK(ff_device_alloc(d, &b.dz, (size_t)(n * b.classes), "dz"));
        CHECK(ff_device_alloc(d, &b.loss, (size_t)n, "loss"));
        CHECK(ff_device_alloc(d, &b.grads, (size_t)(ngroups * b.N), "grads"));
        CHECK(ff_device_alloc(d, &b.mom, (size_t)b.N, "momentum"));
        CHECK(ff_device_alloc(d, &b.grad, (size_t)b.N, "the reduced gradient"));
        CHECK(ff_device_alloc_bytes(d, (void **)&b.labels, (size_t)n * sizeof(int32_t), "labels"));
        // inputs: normal-ish pixels, labels i % classes
        float *x = malloc((size_t)(n * ff_shape_numel(m.input)) * sizeof(float));
        int32_t *lab = malloc((size_t)n * sizeof(int32_t));
        if (!x || !lab) return 1;
        for (int64_t i = 0; i < n * ff_shape_numel(m.input); i++) x[i] = (float)((i * 7919) % 255) / 255.0f - 0.3f;
        for (int64_t i = 0; i < n; i++) lab[i] = (int32_t)(i % b.classes);
        CHECK(ff_device_upload(d, b.act[0], x, (size_t)(n * ff_shape_numel(m.input))));
        CHECK(ff_device_upload_bytes(d, b.labels, lab, (size_t)n * sizeof(int32_t)));
        CHECK(ff_device_sync(d));
        CHECK(run_piece(&b, P_STEP));  // lazily sized buffers exist before any capture
        CHECK(ff_device_sync(d));
        double t[P_STEP + 2];
        for (piece p = P_FORWARD; p <= P_STEP; p++) t[p] = median_ms(&b, p, NULL);
        ff_device_graph *g = NULL;
        CHECK(ff_device_capture_begin(d));
        const ff_status cs = run_piece(&b, P_STEP);
        CHECK(ff_device_capture_end(d, &g));
        CHECK(cs);
        t[P_STEP + 1] = median_ms(&b, P_STEP, g);
        ff_device_graph_destroy(d, g);
        const double f = fwd_flops_img * (double)n;
        const double fl[P_STEP + 2] = {f, 0, 2 * f, 0, 2 * f, 0, 3 * f, 3 * f};
        for (int p = 0; p <= P_STEP + 1; p++) {
            const char *name = p <= P_STEP ? piece_name[p] : "step (graph)";
            if (fl[p] > 0)
                printf("%-6lld %-16s %10.4f %10.2f\n", (long long)n, name, t[p], fl[p] / (t[p] * 1e-3) / 1e12);
            else
                printf("%-6lld %-16s %10.4f %10s\n", (long long)n, name, t[p], "-");
        }
        printf(
            "{\"bench\": \"gpu-train-pieces\", \"model\": \"mnist-cnn\", \"n\": %lld, \"microbatch\": %d, "
            "\"forward_flops_per_image\": %.0f, \"ms\": {",
            (long long)n, GROUP, fwd_flops_img);
        for (int p = 0; p <= P_STEP + 1; p++)
            printf("%s\"%s\": %.5f", p ? ", " : "", p <= P_STEP ? piece_name[p] : "step_graph", t[p]);
        printf("}, \"epoch_s_at_60000\": %.4f}\n", t[P_STEP + 1] * 1e-3 * (double)((60000 + n - 1) / n));
        free(x);
        free(lab);
        for (int l = 0; l <= last + 1; l++)
            if (l == 0 || b.act[l] != b.act[l - 1]) ff_device_free(d, b.act[l]);
        ff_device_free(d, b.dz);
        ff_device_free(d, b.loss);
        ff_device_free(d, b.grads);
        ff_device_free(d, b.mom);
        ff_device_free(d, b.grad);
        ff_device_free(d, (float *)b.labels);
        ff_device_destroy(d);
    }
    ff_weights_free(&w);
    return 0;
}
