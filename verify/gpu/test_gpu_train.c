// The cuda device's training ops (device.h "training", gpu.h "training") against the cpu device and
// a float64 reference, on mnist-cnn (conv planned direct) with a batch of 13 images in groups of 4
// (so the last group is shorter):
//   - train_forward keeps every activation with ff_device_run's bits (each layer's output equals a
//     run of layers 0..l);
//   - softmax cross-entropy, relu and maxpool backward (ties, NaN, -0, overlapping windows), the
//     tree reduction, SGD and gather give the cpu device's (or the CPU reference's) bits exactly
//     (a NaN that softmax creates only has to be NaN: check_bits_nan says why);
//   - the fast data gradients (gpu.h: the forward conv on flipped weights, the forward linear on
//     transposed weights) and the direct kernels lie within the bound of a float64 reference on
//     mnist's conv2, fc1, fc2 and on padded, 5x5 and split-K layers; the fast path's bits do not
//     change with the tile configuration or the batch; a stride-2 conv takes the direct kernel;
//   - train_backward: every group's weight and bias gradient rows of both devices lie within a
//     derived bound of a float64 reference computed from the same activations and dz (the bound
//     follows the rounding errors of the data gradients down through the layers, then adds the
//     weight gradient's own chain: below); the same for the conv kernels on a strided, padded layer
//     (the weight gradient both ways: per-image GEMM partials, and the direct kernels);
//   - determinism: a second run, and each group computed alone, give the same bits row by row;
//   - a mutant: one dz element perturbed by 1e-4 (relative) is caught, in its own group only.
// Every check prints a line (PASS/FAIL, the share of the bound used).
//
// The bound. Every chain (a dot product of T terms in any order, fma or not) is within
// gamma_T * sum|terms| of its exact value (Higham, Lemma 3.1; gamma_T = T u / (1 - T u), u = 2^-24).
// With g the exact gradient at a layer's output (float64 reference) and e a bound on the computed
// gradient's distance to it, a data-gradient layer (dx = W^T dy, T terms per element) gives
//     e_in = |W|^T ((1 + gamma_T) e + gamma_T |g|)
// (|W^T (dy~ - g)| <= |W|^T e, plus the chain's own error on |dy~| <= |g| + e); relu masks g and e
// with the same y > 0 (the activations are the same on both devices); maxpool routes both to the
// same argmax, its additions adding gamma_{R*S}. A weight gradient over a group (T = images * Ho*Wo
// terms) is then within sum(((1 + gamma_T) e + gamma_T |g|) |x|) of the reference. The reference's
// own float64 error is ~2^-29 of that: the bound is widened by 2^-20 of itself, plus T * 2^-149 for
// underflow.
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "fivefold/device.h"
#include "fivefold/layers_cpu_backward.h"
#include "fivefold/model.h"
#include "fivefold/plan.h"
#include "fivefold/tolerance.h"
#include "fivefold/weights.h"
#include "gpu_test_util.h"

#define N_IMG 13
#define GROUP 4
#define NGROUPS ((N_IMG + GROUP - 1) / GROUP)

#define CHECK_OK(call)                                                         \
    do {                                                                       \
        ff_status st_ = (call);                                                \
        if (st_ != FF_OK) fprintf(stderr, "%s: %s\n", #call, ff_last_error()); \
        assert_int_equal(st_, FF_OK);                                          \
    } while (0)

typedef struct {
    ff_model m;
    ff_weights w;
    int last;  // the logits layer (the one before softmax)
    int64_t classes;
    ff_device *cpu, *gpu;
    ff_gpu_stream s;                 // direct kernel launches
    float *cact[FF_MAX_LAYERS + 1];  // the cpu device's activations (host memory)
    float *gact[FF_MAX_LAYERS + 1];  // the cuda device's; flatten's output aliases its input
    int32_t *labels;                 // (N_IMG) host
    int32_t *glabels;                // on the GPU
    float *dz;                       // (N_IMG, classes) host: the cpu device's softmax gradient
} fixture;

static fixture F;

// Floats of act[l] for N_IMG images: layer l's input for l <= last, the logits for l = last + 1.
static size_t act_floats(int l) {
    if (l < 0 || F.last < 0 || F.last >= FF_MAX_LAYERS) return 0;  // (not reached; keeps gcc's bounds check calm)
    const ff_shape s = l <= F.last ? F.m.layers[l].in : F.m.layers[F.last].out;
    return (size_t)(N_IMG * ff_shape_numel(s));
}

static bool is_alias(int l) {  // gact[l] is gact[l - 1] (flatten's output)
    return l > 0 && F.gact[l] == F.gact[l - 1];
}

// ---------------------------------------------------------------- comparison helpers

// Bitwise: elements of 4 bytes whose bit patterns differ (a NaN must keep its payload too).
static size_t check_bits(const char *what, const void *a, const void *b, size_t count) {
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < count; i++)
        if (memcmp((const char *)a + 4 * i, (const char *)b + 4 * i, 4) != 0) {
            if (!bad) first = i;
            bad++;
        }
    printf("  %-52s %8zu elems  %zu differ%s  %s\n", what, count, bad, bad ? " (first shown below)" : "",
           bad ? "FAIL" : "PASS");
    if (bad) {
        uint32_t ua, ub;
        memcpy(&ua, (const char *)a + 4 * first, 4), memcpy(&ub, (const char *)b + 4 * first, 4);
        printf("    [%zu]: 0x%08x vs 0x%08x\n", first, ua, ub);
    }
    return bad;
}

// Bit for bit except that any NaN equals any NaN. For results an operation CREATES as NaN (softmax
// cross-entropy of a NaN logit: exp, log, division of NaN): IEEE 754 leaves the payload of such a
// NaN to the implementation, and the two differ here (the GPU's arithmetic returns its canonical
// NaN 0x7fffffff, the CPU's the x86 default 0x7fc00000), so only "is NaN" is part of the contract.
// Copies and selections (relu, maxpool) keep their input's payload and stay on check_bits.
static size_t check_bits_nan(const char *what, const float *a, const float *b, size_t count) {
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < count; i++) {
        if (isnan(a[i]) && isnan(b[i])) continue;
        if (memcmp(&a[i], &b[i], 4) != 0) {
            if (!bad) first = i;
            bad++;
        }
    }
    printf("  %-52s %8zu elems  %zu differ%s  %s\n", what, count, bad, bad ? " (first shown below)" : "",
           bad ? "FAIL" : "PASS");
    if (bad) {
        uint32_t ua, ub;
        memcpy(&ua, &a[first], 4), memcpy(&ub, &b[first], 4);
        printf("    [%zu]: 0x%08x vs 0x%08x\n", first, ua, ub);
    }
    return bad;
}

// |got - ref| <= bnd per element (NaN fails); *worst receives the largest share of a bound used.
static size_t count_outside(const float *got, const double *ref, const double *bnd, int64_t count, double *worst) {
    size_t bad = 0;
    for (int64_t i = 0; i < count; i++) {
        const double err = fabs((double)got[i] - ref[i]);
        const double frac = bnd[i] > 0 ? err / bnd[i] : (err > 0 ? INFINITY : 0);
        if (!(err <= bnd[i])) bad++;
        if (isnan(frac) || frac > *worst) *worst = isnan(frac) ? INFINITY : frac;
    }
    return bad;
}

static double gam(int64_t k) {
    return ff_tol_gamma(k, FF_TOL_U32);
}

static double *dalloc(size_t count) {
    double *p = calloc(count ? count : 1, sizeof(double));
    if (!p) abort();
    return p;
}

// ---------------------------------------------------------------- float64 reference layers
// Plain loops, scatter form (any order: float64 is the reference). abs: |w| or |x| instead.

static void conv_data_d(double *gx, const double *gy, const float *w, const ff_layer *L, int64_t n, bool abs) {
    const int64_t K = L->out_c, C = L->in.c, H = L->in.h, W = L->in.w, R = L->kh, S = L->kw;
    const int64_t Ho = L->out.h, Wo = L->out.w, st = L->stride, pad = L->pad;
    memset(gx, 0, (size_t)(n * C * H * W) * sizeof(double));
    for (int64_t i = 0; i < n; i++)
        for (int64_t k = 0; k < K; k++)
            for (int64_t oh = 0; oh < Ho; oh++)
                for (int64_t ow = 0; ow < Wo; ow++) {
                    const double v = gy[((i * K + k) * Ho + oh) * Wo + ow];
                    if (v == 0) continue;
                    for (int64_t c = 0; c < C; c++)
                        for (int64_t r = 0; r < R; r++) {
                            const int64_t ih = oh * st - pad + r;
                            if (ih < 0 || ih >= H) continue;
                            for (int64_t s = 0; s < S; s++) {
                                const int64_t iw = ow * st - pad + s;
                                if (iw < 0 || iw >= W) continue;
                                const double wv = w[((k * C + c) * R + r) * S + s];
                                gx[((i * C + c) * H + ih) * W + iw] += (abs ? fabs(wv) : wv) * v;
                            }
                        }
                }
}

// dw (K, C, R, S), db (K): sums over images [i0, i1).
static void conv_weights_d(double *dw, double *db, const double *gy, const float *x, const ff_layer *L, int64_t i0,
                           int64_t i1, bool abs) {
    const int64_t K = L->out_c, C = L->in.c, H = L->in.h, W = L->in.w, R = L->kh, S = L->kw;
    const int64_t Ho = L->out.h, Wo = L->out.w, st = L->stride, pad = L->pad;
    memset(dw, 0, (size_t)(K * C * R * S) * sizeof(double));
    memset(db, 0, (size_t)K * sizeof(double));
    for (int64_t i = i0; i < i1; i++)
        for (int64_t k = 0; k < K; k++)
            for (int64_t oh = 0; oh < Ho; oh++)
                for (int64_t ow = 0; ow < Wo; ow++) {
                    const double v = gy[((i * K + k) * Ho + oh) * Wo + ow];
                    db[k] += v;
                    if (v == 0) continue;
                    for (int64_t c = 0; c < C; c++)
                        for (int64_t r = 0; r < R; r++) {
                            const int64_t ih = oh * st - pad + r;
                            if (ih < 0 || ih >= H) continue;
                            for (int64_t s = 0; s < S; s++) {
                                const int64_t iw = ow * st - pad + s;
                                if (iw < 0 || iw >= W) continue;
                                const double xv = x[((i * C + c) * H + ih) * W + iw];
                                dw[((k * C + c) * R + r) * S + s] += v * (abs ? fabs(xv) : xv);
                            }
                        }
                }
}

static void linear_data_d(double *gx, const double *gy, const float *w, const ff_layer *L, int64_t n, bool abs) {
    const int64_t O = L->out_c, I = ff_shape_numel(L->in);
    memset(gx, 0, (size_t)(n * I) * sizeof(double));
    for (int64_t s = 0; s < n; s++)
        for (int64_t j = 0; j < O; j++) {
            const double v = gy[s * O + j];
            if (v == 0) continue;
            for (int64_t i = 0; i < I; i++) gx[s * I + i] += (abs ? fabs((double)w[j * I + i]) : w[j * I + i]) * v;
        }
}

static void linear_weights_d(double *dw, double *db, const double *gy, const float *x, const ff_layer *L, int64_t i0,
                             int64_t i1, bool abs) {
    const int64_t O = L->out_c, I = ff_shape_numel(L->in);
    memset(dw, 0, (size_t)(O * I) * sizeof(double));
    memset(db, 0, (size_t)O * sizeof(double));
    for (int64_t s = i0; s < i1; s++)
        for (int64_t j = 0; j < O; j++) {
            const double v = gy[s * O + j];
            db[j] += v;
            for (int64_t i = 0; i < I; i++) dw[j * I + i] += v * (abs ? fabs((double)x[s * I + i]) : x[s * I + i]);
        }
}

// dy of each window to its first maximum (the CPU's rule: greater or NaN replaces).
static void maxpool_route_d(double *gx, const double *gy, const float *x, const ff_layer *L, int64_t n) {
    const int64_t C = L->in.c, H = L->in.h, W = L->in.w, R = L->kh, S = L->kw;
    const int64_t Ho = L->out.h, Wo = L->out.w, st = L->stride, pad = L->pad;
    memset(gx, 0, (size_t)(n * C * H * W) * sizeof(double));
    for (int64_t p = 0; p < n * C; p++)
        for (int64_t oh = 0; oh < Ho; oh++)
            for (int64_t ow = 0; ow < Wo; ow++) {
                int64_t best = -1;
                float bv = 0;
                for (int64_t r = 0; r < R; r++)
                    for (int64_t s = 0; s < S; s++) {
                        const int64_t ih = oh * st - pad + r, iw = ow * st - pad + s;
                        if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                        const float v = x[p * H * W + ih * W + iw];
                        if (best < 0 || v > bv || isnan(v)) best = ih * W + iw, bv = v;
                    }
                if (best >= 0) gx[p * H * W + best] += gy[(p * Ho + oh) * Wo + ow];
            }
}

// h = (1 + gamma) e + gamma |g|: the quantity the next bound propagates (header comment).
static double *bound_input(const double *g, const double *e, size_t count, double gamma) {
    double *h = dalloc(count);
    for (size_t i = 0; i < count; i++) h[i] = (1 + gamma) * e[i] + gamma * fabs(g[i]);
    return h;
}

static void widen(double *b, int64_t count, int64_t T) {
    for (int64_t i = 0; i < count; i++) b[i] = b[i] * (1 + 0x1p-20) + (double)T * 0x1p-149;
}

// ---------------------------------------------------------------- setup

static ff_device *make_device_with(ff_device_kind kind, ff_backend backend) {
    ff_plan_options po;
    if (ff_plan_options_default(&po) != FF_OK) return NULL;
    po.conv = FF_CONV_DIRECT;  // training runs direct convolutions (train.h)
    po.backend = backend;
    ff_plan plan;
    if (ff_plan_build(&plan, &F.m, kind, &po) != FF_OK) return NULL;
    ff_device_options o = {.max_batch = N_IMG, .gpu = 0, .local_rank = 0, .borrow_weights = false};
    ff_device *d = NULL;
    if (ff_device_create(&d, &F.m, &F.w, &plan, &o) != FF_OK) {
        fprintf(stderr, "device create: %s\n", ff_last_error());
        return NULL;
    }
    return d;
}
static ff_device *make_device(ff_device_kind kind) {
    return make_device_with(kind, FF_BACKEND_OWN);
}

#define SETUP_OK(call)                                                         \
    do {                                                                       \
        if ((call) != FF_OK) {                                                 \
            fprintf(stderr, "setup: %s failed: %s\n", #call, ff_last_error()); \
            return -1;                                                         \
        }                                                                      \
    } while (0)

static int group_setup(void **state) {
    (void)state;
    SETUP_OK(ff_model_init(&F.m, "mnist-cnn"));
    SETUP_OK(ff_weights_alloc(&F.w, &F.m));
    ff_weights_generate(&F.w, &F.m, 7);
    F.last = F.m.n_layers - 1;
    if (F.m.layers[F.last].op == FF_OP_SOFTMAX) F.last--;
    F.classes = ff_shape_numel(F.m.layers[F.last].out);
    SETUP_OK(ff_gpu_stream_create(&F.s));
    F.cpu = make_device(FF_DEVICE_CPU);
    F.gpu = make_device(FF_DEVICE_CUDA);
    if (!F.cpu || !F.gpu) return -1;
    for (int l = 0; l <= F.last + 1; l++) {
        SETUP_OK(ff_device_alloc(F.cpu, &F.cact[l], act_floats(l), "cpu activations"));
        if (l > 0 && F.m.layers[l - 1].op == FF_OP_FLATTEN)
            F.gact[l] = F.gact[l - 1];  // ff_device_train_forward: act[l + 1] may equal act[l]
        else
            SETUP_OK(ff_device_alloc(F.gpu, &F.gact[l], act_floats(l), "gpu activations"));
    }
    ff_input_generate(F.cact[0], &F.m, N_IMG, 21);
    F.labels = malloc(N_IMG * sizeof(int32_t));
    F.dz = malloc(act_floats(F.last + 1) * sizeof(float));
    if (!F.labels || !F.dz) return -1;
    for (int i = 0; i < N_IMG; i++) F.labels[i] = (int32_t)(ff_mix64((uint64_t)i + 77) % (uint64_t)F.classes);
    SETUP_OK(ff_device_alloc_bytes(F.gpu, (void **)&F.glabels, N_IMG * sizeof(int32_t), "labels"));
    SETUP_OK(ff_device_upload_bytes(F.gpu, F.glabels, F.labels, N_IMG * sizeof(int32_t)));
    // The activations and dz every backward check starts from: the cpu device's.
    SETUP_OK(ff_device_train_forward(F.cpu, F.cact, 0, F.last, N_IMG, GROUP));
    SETUP_OK(ff_device_softmax_xent(F.cpu, F.dz, NULL, F.cact[F.last + 1], F.labels, 1.0f / N_IMG, F.classes, N_IMG));
    return ff_device_sync(F.gpu) == FF_OK ? 0 : -1;
}

static int group_teardown(void **state) {
    (void)state;
    for (int l = 0; l <= F.last + 1; l++) {
        if (F.cact[l]) ff_device_free(F.cpu, F.cact[l]);
        if (F.gact[l] && !is_alias(l)) ff_device_free(F.gpu, F.gact[l]);
    }
    if (F.glabels) ff_device_free(F.gpu, (float *)F.glabels);
    ff_device_destroy(F.gpu);
    ff_device_destroy(F.cpu);
    ff_gpu_stream_destroy(F.s);
    free(F.labels), free(F.dz);
    ff_weights_free(&F.w);
    return 0;
}

static float *download(const float *dev, size_t count) {
    float *h = malloc(count * sizeof(float));
    assert_non_null(h);
    CHECK_OK(ff_device_download(F.gpu, h, dev, count));
    CHECK_OK(ff_device_sync(F.gpu));
    return h;
}

static float *gpu_from(const void *host, size_t floats) {
    float *d = NULL;
    CHECK_OK(ff_device_alloc(F.gpu, &d, floats, "test buffer"));
    if (host) CHECK_OK(ff_device_upload(F.gpu, d, host, floats));
    return d;
}

// ---------------------------------------------------------------- forward

// Each activation train_forward keeps equals ff_device_run of layers 0..l on the same input, bit for
// bit (the run fuses conv+relu and replays a graph; train_forward does neither).
static bool fused_pre(int l, int first, int last) {  // act[l + 1], a pre-activation the cuda device skips
    const ff_op op = F.m.layers[l].op;
    return (op == FF_OP_CONV2D || op == FF_OP_LINEAR) && l >= first && l < last && F.m.layers[l + 1].op == FF_OP_RELU;
}

static void train_forward_equals_run(void **state) {
    (void)state;
    CHECK_OK(ff_device_upload(F.gpu, F.gact[0], F.cact[0], act_floats(0)));
    // the pre-activations of conv/linear + relu are not written (device.h): poisoned, they stay NaN
    size_t fused = 0, written = 0;
    for (int l = 0; l < F.last; l++)
        if (fused_pre(l, 0, F.last)) {
            CHECK_OK(ff_gpu_fill(F.gact[l + 1], NAN, act_floats(l + 1), F.s));
            fused++;
        }
    CHECK_OK(ff_gpu_stream_sync(F.s));
    CHECK_OK(ff_device_train_forward(F.gpu, F.gact, 0, F.last, N_IMG, GROUP));
    size_t bad = 0;
    for (int l = 0; l <= F.last; l++) {
        if (fused_pre(l, 0, F.last)) {
            float *pre = download(F.gact[l + 1], act_floats(l + 1));
            for (size_t i = 0; i < act_floats(l + 1); i++) written += !isnan(pre[i]);
            free(pre);
            continue;
        }
        const float *out = NULL;
        CHECK_OK(ff_device_run(F.gpu, &out, F.gact[0], N_IMG, 0, l, -1, NULL));
        float *run = download(out, act_floats(l + 1));
        float *kept = download(F.gact[l + 1], act_floats(l + 1));
        char what[96];
        snprintf(what, sizeof what, "train_forward act[%d] (%s) vs run 0..%d", l + 1, F.m.layers[l].name, l);
        bad += check_bits(what, kept, run, act_floats(l + 1));
        free(run), free(kept);
    }
    // and the cuda logits are close to the cpu's (different orders): same top-1 on every image
    float *gl = download(F.gact[F.last + 1], act_floats(F.last + 1));
    int same = 0;
    for (int i = 0; i < N_IMG; i++) {
        int ag = 0, ac = 0;
        for (int k = 1; k < F.classes; k++) {
            if (gl[i * F.classes + k] > gl[i * F.classes + ag]) ag = k;
            if (F.cact[F.last + 1][i * F.classes + k] > F.cact[F.last + 1][i * F.classes + ac]) ac = k;
        }
        same += ag == ac;
    }
    printf("  cuda vs cpu logits (information: other orders): top-1 equal on %d of %d images\n", same, N_IMG);
    // the forward in consecutive ranges of layers (the trainer's forward bucket by bucket when the
    // next step overlaps the exchange's tail) equals the one call, every activation
    float *whole[FF_MAX_LAYERS + 1];
    for (int l = 1; l <= F.last + 1; l++) whole[l] = download(F.gact[l], act_floats(l));
    for (int l = 1; l <= F.last + 1; l++) {
        if (F.gact[l] == F.gact[0]) continue;  // (a flatten's output is its input)
        float *nan_fill = malloc(act_floats(l) * sizeof(float));
        for (size_t i = 0; i < act_floats(l); i++) nan_fill[i] = NAN;
        CHECK_OK(ff_device_upload(F.gpu, F.gact[l], nan_fill, act_floats(l)));
        CHECK_OK(ff_device_sync(F.gpu));
        free(nan_fill);
    }
    const int cut = F.last / 2;
    CHECK_OK(ff_device_train_forward(F.gpu, F.gact, 0, cut, N_IMG, GROUP));
    CHECK_OK(ff_device_train_forward(F.gpu, F.gact, cut + 1, F.last, N_IMG, GROUP));
    printf("  train_forward: %zu conv/linear outputs fused with their relu, %zu of their floats written  %s\n", fused,
           written, fused == 3 && written == 0 ? "PASS" : "FAIL");
    bad += fused != 3 || written != 0;  // mnist-cnn: conv1, conv2, fc1
    for (int l = 1; l <= F.last + 1; l++) {
        if (fused_pre(l - 1, 0, cut) || fused_pre(l - 1, cut + 1, F.last)) {
            free(whole[l]);
            continue;
        }
        float *part = download(F.gact[l], act_floats(l));
        char what[96];
        snprintf(what, sizeof what, "train_forward [0, %d] + [%d, %d]: act[%d]", cut, cut + 1, F.last, l);
        bad += check_bits(what, part, whole[l], act_floats(l));
        free(part), free(whole[l]);
    }
    assert_int_equal(ff_device_train_forward(F.gpu, F.gact, 2, 1, N_IMG, GROUP), FF_ERR_INPUT);
    assert_non_null(strstr(ff_last_error(), "layers [2, 1]: expected 0 <= first <= last"));
    free(gl);
    assert_int_equal(bad, 0);
}

// ff_device_train_backward_reduced (one process's step: the own linear kernels sum their groups in
// the fixed tree as they compute them) against the backward's rows followed by the tree, bit for
// bit over every parameter, at 1, 4, 7 and 13 groups (the tree's odd shapes: a short last group,
// leftovers at its right end); the cpu device's fallback (the two calls) likewise; and a mutant:
// the rows of one more group than the backward wrote (a NaN row) must show.
static void upload_cpu_acts(void);  // (below, with the backward checks)
static void backward_reduced_bits(void **state) {
    (void)state;
    const int64_t nt = F.w.n_total;
    upload_cpu_acts();
    const int64_t groups[] = {13, 4, 2, 1};  // 1, 4, 7, 13 groups of the 13 images
    size_t bad = 0;
    for (size_t c = 0; c < sizeof groups / sizeof groups[0]; c++) {
        const int64_t G = groups[c], ng = (N_IMG + G - 1) / G;
        const size_t rows_n = (size_t)(ng * nt), ndz = act_floats(F.last + 1);
        float *rows = gpu_from(NULL, rows_n), *sum = gpu_from(NULL, (size_t)nt), *fused = gpu_from(NULL, (size_t)nt);
        float *dz1 = gpu_from(F.dz, ndz), *dz2 = gpu_from(F.dz, ndz);
        CHECK_OK(ff_gpu_fill(fused, NAN, (size_t)nt, F.s));  // an element left unwritten would show
        CHECK_OK(ff_gpu_stream_sync(F.s));
        CHECK_OK(ff_device_train_backward(F.gpu, rows, nt, dz1, (const float *const *)F.gact, F.last, N_IMG, G));
        CHECK_OK(ff_device_tree_reduce(F.gpu, sum, rows, ng, nt, nt));
        CHECK_OK(ff_device_train_backward_reduced(F.gpu, fused, rows, nt, dz2, (const float *const *)F.gact, F.last,
                                                  N_IMG, G, nt));
        float *a = download(sum, (size_t)nt), *b = download(fused, (size_t)nt);
        char what[96];
        snprintf(what, sizeof what, "backward reduced, %lld group(s) of %lld: vs rows + tree", (long long)ng,
                 (long long)G);
        bad += check_bits(what, b, a, (size_t)nt);
        if (ng == 4) {  // the mutant: a fifth (NaN) row in the tree gives other values
            float *rows5 = gpu_from(NULL, (size_t)(5 * nt)), *m5 = gpu_from(NULL, (size_t)nt);
            CHECK_OK(ff_gpu_fill(rows5, NAN, (size_t)(5 * nt), F.s));
            CHECK_OK(ff_gpu_stream_sync(F.s));
            float *dz3 = gpu_from(F.dz, ndz);
            CHECK_OK(ff_device_train_backward(F.gpu, rows5, nt, dz3, (const float *const *)F.gact, F.last, N_IMG, G));
            CHECK_OK(ff_device_tree_reduce(F.gpu, m5, rows5, 5, nt, nt));
            float *m = download(m5, (size_t)nt);
            size_t differ = 0;
            for (int64_t i = 0; i < nt; i++) differ += memcmp(&m[i], &b[i], 4) != 0;
            printf("  mutant (a fifth, NaN row in the tree): %zu of %lld elements differ\n", differ, (long long)nt);
            assert_true(differ == (size_t)nt);
            free(m);
            ff_device_free(F.gpu, rows5), ff_device_free(F.gpu, m5), ff_device_free(F.gpu, dz3);
        }
        free(a), free(b);
        ff_device_free(F.gpu, rows), ff_device_free(F.gpu, sum), ff_device_free(F.gpu, fused);
        ff_device_free(F.gpu, dz1), ff_device_free(F.gpu, dz2);
    }
    // the cpu device: the fallback (backward, then the tree) is the same two calls
    const int64_t ng = NGROUPS;
    float *crows = NULL, *csum = NULL, *cfused = NULL, *cdz1 = malloc(act_floats(F.last + 1) * sizeof(float));
    float *cdz2 = malloc(act_floats(F.last + 1) * sizeof(float));
    memcpy(cdz1, F.dz, act_floats(F.last + 1) * sizeof(float));
    memcpy(cdz2, F.dz, act_floats(F.last + 1) * sizeof(float));
    CHECK_OK(ff_device_alloc(F.cpu, &crows, (size_t)(ng * nt), "cpu rows"));
    CHECK_OK(ff_device_alloc(F.cpu, &csum, (size_t)nt, "cpu sum"));
    CHECK_OK(ff_device_alloc(F.cpu, &cfused, (size_t)nt, "cpu fused"));
    CHECK_OK(ff_device_train_backward(F.cpu, crows, nt, cdz1, (const float *const *)F.cact, F.last, N_IMG, GROUP));
    CHECK_OK(ff_device_tree_reduce(F.cpu, csum, crows, ng, nt, nt));
    CHECK_OK(ff_device_train_backward_reduced(F.cpu, cfused, crows, nt, cdz2, (const float *const *)F.cact, F.last,
                                              N_IMG, GROUP, nt));
    bad += check_bits("cpu: backward reduced vs rows + tree", cfused, csum, (size_t)nt);
    ff_device_free(F.cpu, crows), ff_device_free(F.cpu, csum), ff_device_free(F.cpu, cfused);
    free(cdz1), free(cdz2);
    // a count past the rows is refused
    assert_int_equal(ff_device_train_backward_reduced(F.gpu, NULL, NULL, nt, NULL, (const float *const *)F.gact, F.last,
                                                      N_IMG, GROUP, nt + 1),
                     FF_ERR_INPUT);
    printf("  refused: %s\n", ff_last_error());
    ff_clear_error();
    assert_int_equal(bad, 0);
}

// device.h's backward in two passes (the trainer's overlap): the data pass, then the parameter
// gradients one parameterized layer a part, bottom part first (the trainer's exchange order), give
// the rows of the one-pass backward bit for bit, on the own kernels and on cuBLAS (--backend vendor),
// at 1, 4 and 13 groups. The parameter pass reads no weight: the device's weights are NaN while it
// runs. Mutants: dz changed between the passes must show in the top layer; a parameter pass in
// other groups than its data pass, one whose data pass a one-pass backward has since replaced, and
// the cpu device are refused.
static void two_passes(ff_device *dev, float *rows, float *dz, int64_t nt, int64_t G, bool nan_weights) {
    CHECK_OK(ff_device_train_backward_data(dev, dz, (const float *const *)F.gact, F.last, N_IMG, G));
    CHECK_OK(ff_device_sync(dev));  // (the fill below runs on another stream)
    float *params = ff_device_params(dev), *saved = NULL;
    if (nan_weights) {
        saved = download(params, (size_t)nt);
        CHECK_OK(ff_gpu_fill(params, NAN, (size_t)nt, F.s));
        CHECK_OK(ff_gpu_stream_sync(F.s));
    }
    int hi = F.last, lo[FF_MAX_LAYERS], his[FF_MAX_LAYERS], parts = 0;
    for (int l = F.last; l >= 0; l--)  // a part per parameterized layer, reaching up to the next one
        if (F.m.layers[l].op == FF_OP_CONV2D || F.m.layers[l].op == FF_OP_LINEAR || l == 0) {
            lo[parts] = l, his[parts] = hi, parts++;
            hi = l - 1;
        }
    for (int i = parts - 1; i >= 0; i--)  // bottom up
        CHECK_OK(ff_device_train_backward_params(dev, rows, nt, (const float *const *)F.gact, his[i], lo[i], N_IMG, G));
    if (saved) {
        CHECK_OK(ff_device_upload(dev, params, saved, (size_t)nt));
        CHECK_OK(ff_device_sync(dev));
        free(saved);
    }
}

static void backward_two_pass_bits(void **state) {
    (void)state;
    const int64_t nt = F.w.n_total;
    upload_cpu_acts();
    ff_device *vendor = make_device_with(FF_DEVICE_CUDA, FF_BACKEND_VENDOR);
    assert_non_null(vendor);
    assert_true(ff_device_can_backward_in_passes(F.gpu) && !ff_device_can_backward_in_passes(F.cpu));
    const size_t ndz = act_floats(F.last + 1);
    size_t bad = 0;
    const int64_t groups[] = {13, 4, 1};
    for (int v = 0; v < 2; v++)
        for (size_t c = 0; c < sizeof groups / sizeof groups[0]; c++) {
            ff_device *dev = v ? vendor : F.gpu;
            const int64_t G = groups[c], ng = (N_IMG + G - 1) / G, n = ng * nt;
            float *one = gpu_from(NULL, (size_t)n), *two = gpu_from(NULL, (size_t)n);
            float *dz1 = gpu_from(F.dz, ndz), *dz2 = gpu_from(F.dz, ndz);
            CHECK_OK(ff_gpu_fill(two, NAN, (size_t)n, F.s));  // an element left unwritten would show
            CHECK_OK(ff_gpu_stream_sync(F.s));
            CHECK_OK(ff_device_train_backward(dev, one, nt, dz1, (const float *const *)F.gact, F.last, N_IMG, G));
            two_passes(dev, two, dz2, nt, G, true);
            CHECK_OK(ff_device_sync(dev));
            float *a = download(one, (size_t)n), *b = download(two, (size_t)n);
            char what[96];
            snprintf(what, sizeof what, "two passes (%s), %lld group(s): vs one pass", v ? "vendor" : "own",
                     (long long)ng);
            bad += check_bits(what, b, a, (size_t)n);
            if (ng == 4 && !v) {  // mutant: dz scaled after the data pass, before the parameter pass
                float *dz3 = gpu_from(F.dz, ndz);
                CHECK_OK(ff_device_train_backward_data(dev, dz3, (const float *const *)F.gact, F.last, N_IMG, G));
                float *dzx = malloc(ndz * sizeof(float));
                for (size_t i = 0; i < ndz; i++) dzx[i] = 2.0f * F.dz[i];
                CHECK_OK(ff_device_upload(dev, dz3, dzx, ndz));
                CHECK_OK(ff_device_train_backward_params(dev, two, nt, (const float *const *)F.gact, F.last, F.last,
                                                         N_IMG, G));
                float *m = download(two, (size_t)n);
                const int64_t w_at = F.w.w[F.last] - F.w.data;
                size_t differ = 0;
                for (int64_t i = w_at; i < w_at + F.m.layers[F.last].n_weight; i++)
                    differ += memcmp(&m[i], &a[i], 4) != 0;
                printf("  mutant (dz doubled between the passes): %zu of %lld top-layer weight gradients differ\n",
                       differ, (long long)F.m.layers[F.last].n_weight);
                assert_true(differ > 0);
                free(m), free(dzx);
                // a parameter pass in other groups than its data pass's is refused
                assert_int_equal(ff_device_train_backward_params(dev, two, nt, (const float *const *)F.gact, F.last, 0,
                                                                 N_IMG, G + 1),
                                 FF_ERR_INPUT);
                printf("  refused: %s\n", ff_last_error());
                ff_clear_error();
                // a one-pass backward replaces the data pass: a parameter pass is refused, naming it
                CHECK_OK(ff_device_train_backward(dev, one, nt, dz3, (const float *const *)F.gact, F.last, N_IMG, G));
                assert_int_equal(
                    ff_device_train_backward_params(dev, two, nt, (const float *const *)F.gact, F.last, 0, N_IMG, G),
                    FF_ERR_INPUT);
                printf("  refused: %s\n", ff_last_error());
                ff_clear_error();
                ff_device_free(F.gpu, dz3);
            }
            free(a), free(b);
            ff_device_free(F.gpu, one), ff_device_free(F.gpu, two), ff_device_free(F.gpu, dz1),
                ff_device_free(F.gpu, dz2);
        }
    assert_int_equal(ff_device_train_backward_data(F.cpu, F.dz, (const float *const *)F.cact, F.last, N_IMG, GROUP),
                     FF_ERR_INPUT);
    printf("  refused (cpu): %s\n", ff_last_error());
    ff_clear_error();
    ff_device_destroy(vendor);
    assert_int_equal(bad, 0);
}

// ---------------------------------------------------------------- exact ops

static void softmax_xent_bits(void **state) {
    (void)state;
    const size_t cnt = act_floats(F.last + 1);
    float *z = malloc(cnt * sizeof(float)), *dz_c = malloc(cnt * sizeof(float)), *loss_c = malloc(N_IMG * 4);
    memcpy(z, F.cact[F.last + 1], cnt * sizeof(float));
    const int64_t C = F.classes;
    for (int64_t c = 0; c < C; c++) {
        z[10 * C + c] += 80.0f;                     // large logits (exp of max-subtracted)
        z[11 * C + c] = c % 3 == 0 ? 0.5f : -0.0f;  // ties and -0
        if (c == 4) z[12 * C + c] = NAN;            // NaN: the CPU's max rule, NaN out
    }
    CHECK_OK(ff_device_softmax_xent(F.cpu, dz_c, loss_c, z, F.labels, 1.0f / N_IMG, C, N_IMG));
    float *gz = gpu_from(z, cnt), *gdz = gpu_from(NULL, cnt), *gloss = gpu_from(NULL, N_IMG);
    CHECK_OK(ff_device_softmax_xent(F.gpu, gdz, gloss, gz, F.glabels, 1.0f / N_IMG, C, N_IMG));
    float *dz_g = download(gdz, cnt), *loss_g = download(gloss, N_IMG);
    // (NaN payloads: check_bits_nan says why they may differ)
    size_t bad = check_bits_nan("softmax_xent dz (ties, -0, +80, NaN rows)", dz_g, dz_c, cnt);
    bad += check_bits_nan("softmax_xent loss", loss_g, loss_c, N_IMG);
    // loss NULL is accepted
    CHECK_OK(ff_device_softmax_xent(F.gpu, gdz, NULL, gz, F.glabels, 1.0f / N_IMG, C, N_IMG));
    free(dz_g);
    dz_g = download(gdz, cnt);
    bad += check_bits_nan("softmax_xent dz, loss NULL", dz_g, dz_c, cnt);
    ff_device_free(F.gpu, gz), ff_device_free(F.gpu, gdz), ff_device_free(F.gpu, gloss);
    free(z), free(dz_c), free(loss_c), free(dz_g), free(loss_g);
    assert_int_equal(bad, 0);
}

// Wide rows take the warp-per-image kernel (32 classes and more: the MLP's 512, AlexNet's 1000):
// the same bits as the cpu device, on 70 images (more than one block, the last block short) with
// the same special rows, plus a row of only +0 and -0 (the max's tie) and one with two NaNs.
static void softmax_xent_wide_bits(void **state) {
    (void)state;
    const int64_t widths[] = {32, 33, 512, 1000}, n = 70;
    size_t bad = 0;
    for (size_t t = 0; t < sizeof widths / sizeof widths[0]; t++) {
        const int64_t C = widths[t];
        const size_t cnt = (size_t)(n * C);
        float *z = malloc(cnt * 4), *dz_c = malloc(cnt * 4), *loss_c = malloc((size_t)n * 4);
        int32_t *lab = malloc((size_t)n * 4);
        assert_true(z && dz_c && loss_c && lab);
        for (size_t i = 0; i < cnt; i++)
            z[i] = (float)((double)(ff_mix64(i * 31 + (uint64_t)C) >> 11) * 0x1p-53 * 16 - 8);
        for (int64_t s = 0; s < n; s++) lab[s] = (int32_t)(ff_mix64((uint64_t)(s + 5 * C)) % (uint64_t)C);
        for (int64_t c = 0; c < C; c++) {
            z[10 * C + c] += 80.0f;
            z[11 * C + c] = c % 3 == 0 ? 0.5f : -0.0f;
            z[13 * C + c] = c % 2 ? 0.0f : -0.0f;
        }
        z[12 * C + 4] = NAN;
        z[14 * C + 1] = NAN, z[14 * C + C - 1] = -NAN;
        CHECK_OK(ff_device_softmax_xent(F.cpu, dz_c, loss_c, z, lab, 1.0f / (float)n, C, n));
        float *gz = gpu_from(z, cnt), *gdz = gpu_from(NULL, cnt), *gloss = gpu_from(NULL, (size_t)n);
        int32_t *glab = NULL;
        CHECK_OK(ff_device_alloc_bytes(F.gpu, (void **)&glab, (size_t)n * 4, "labels"));
        CHECK_OK(ff_device_upload_bytes(F.gpu, glab, lab, (size_t)n * 4));
        CHECK_OK(ff_device_softmax_xent(F.gpu, gdz, gloss, gz, glab, 1.0f / (float)n, C, n));
        float *dz_g = download(gdz, cnt), *loss_g = download(gloss, (size_t)n);
        char what[64];
        snprintf(what, sizeof what, "softmax_xent dz, %lld classes", (long long)C);
        bad += check_bits_nan(what, dz_g, dz_c, cnt);
        snprintf(what, sizeof what, "softmax_xent loss, %lld classes", (long long)C);
        bad += check_bits_nan(what, loss_g, loss_c, (size_t)n);
        ff_device_free(F.gpu, gz), ff_device_free(F.gpu, gdz), ff_device_free(F.gpu, gloss);
        ff_device_free(F.gpu, (float *)glab);
        free(z), free(dz_c), free(loss_c), free(lab), free(dz_g), free(loss_g);
    }
    assert_int_equal(bad, 0);
}

static ff_layer pool_layer(int64_t C, int64_t H, int64_t W, int k, int stride, int pad) {
    ff_layer L = {.name = "pool-test", .op = FF_OP_MAXPOOL, .kh = k, .kw = k, .stride = stride, .pad = pad};
    L.in = (ff_shape){C, H, W};
    L.out = (ff_shape){C, (H + 2 * pad - k) / stride + 1, (W + 2 * pad - k) / stride + 1};
    L.param_index = -1;
    return L;
}

// relu and maxpool backward through the gpu.h launchers vs layers_cpu_backward.h, bit for bit; the
// maxpool fused with the relu below it against the two CPU functions in turn.
static void relu_maxpool_backward_bits(void **state) {
    (void)state;
    size_t bad = 0;
    // relu: y with +0, -0, NaN, inf, subnormals; dy with a NaN (passed through where y > 0)
    const size_t cnt = 4099;
    float *y = tu_rand(cnt, 501, 2.0f), *dy = tu_rand(cnt, 502, 1.0f), *dx_c = malloc(cnt * sizeof(float));
    for (size_t i = 0; i < cnt; i += 97) y[i] = -0.0f, y[i + 1] = 0.0f, y[i + 2] = NAN, y[i + 3] = 0x1p-140f;
    for (size_t i = 5; i < cnt; i += 211) y[i] = INFINITY, dy[i] = NAN, dy[i + 1] = -0.0f;
    ff_cpu_relu_backward(dx_c, dy, y, (int64_t)cnt);
    float *gy = tu_dev_from(y, cnt, F.s), *gdy = tu_dev_from(dy, cnt, F.s), *gdx = tu_dev_from(NULL, cnt, F.s);
    CHECK_OK(ff_gpu_relu_backward(gdx, gdy, gy, (int64_t)cnt, F.s));
    float *dx_g = tu_host_from(gdx, cnt, F.s);
    bad += check_bits("relu backward (+-0, NaN, inf, subnormal y)", dx_g, dx_c, cnt);
    free(dx_g);
    // one element on: no buffer 16-byte aligned, so the launcher takes its float-a-thread loop
    CHECK_OK(ff_gpu_relu_backward(gdx + 1, gdy + 1, gy + 1, (int64_t)cnt - 1, F.s));
    dx_g = tu_host_from(gdx, cnt, F.s);
    bad += check_bits("relu backward, unaligned buffers", dx_g + 1, dx_c + 1, cnt - 1);
    ff_gpu_free(gy), ff_gpu_free(gdy), ff_gpu_free(gdx);
    free(y), free(dy), free(dx_c), free(dx_g);

    // maxpool: mnist's pool1 on the real relu2 output (many zero ties), an overlapping 3x3
    // stride-2 pad-1 pool on quantized inputs (ties everywhere, NaNs, -0) where up to four windows
    // add into one element (the additions' order shows in the bits), and pool1 on such inputs. The
    // two pool1 cases run twice: in k_maxpool_bwd_2x2 (the 2x2 windows' float2 kernel) and with
    // the general tiled kernel forced.
    const int pool = ff_model_find_layer(&F.m, "pool1");
    ff_layer Ls[5] = {F.m.layers[pool], pool_layer(3, 9, 8, 3, 2, 1), F.m.layers[pool], F.m.layers[pool],
                      F.m.layers[pool]};
    for (int t = 0; t < 5; t++) {
        const ff_layer *L = &Ls[t];
        ff_gpu_debug_force_maxpool_general(t >= 3);
        const int64_t n = t == 0 || t == 3 ? N_IMG : 5;
        const size_t nin = (size_t)(n * ff_shape_numel(L->in)), nout = (size_t)(n * ff_shape_numel(L->out));
        float *x = t == 0 || t == 3 ? F.cact[pool] : tu_rand(nin, 503, 1.0f);
        if (t == 1 || t == 2 || t == 4) {
            for (size_t i = 0; i < nin; i++) x[i] = roundf(x[i] * 2.0f) * 0.5f;
            for (size_t i = 0; i < nin; i += 37) x[i] = -0.0f;
            for (size_t i = 11; i + 1 < nin; i += 53) x[i] = NAN, x[i + 1] = NAN;  // two NaNs in a window
        }
        float *g = tu_rand(nout, 504, 1.0f);
        for (size_t i = 0; i < nout; i++) g[i] = ldexpf(g[i], (int)(i % 9) - 4);  // magnitudes: order shows
        float *ref = malloc(nin * sizeof(float));
        ff_cpu_maxpool_backward(ref, g, x, L, n);
        float *gx = tu_dev_from(x, nin, F.s), *gg = tu_dev_from(g, nout, F.s), *gd = tu_dev_from(NULL, nin, F.s);
        CHECK_OK(ff_gpu_maxpool_backward(gd, gg, gx, L, n, false, F.s));
        float *got = tu_host_from(gd, nin, F.s);
        static const char *const what[5] = {"mnist pool1 (relu2 output)", "3x3/2 pad 1 (ties, NaN, -0)",
                                            "mnist pool1 (ties, NaN, -0)", "mnist pool1 (relu2 output), general",
                                            "mnist pool1 (ties, NaN, -0), general"};
        char name[128];
        snprintf(name, sizeof name, "maxpool backward %s", what[t]);
        bad += check_bits(name, got, ref, nin);
        // fused with the relu below it (x that relu's output): the pool's bits, then the relu's mask
        float *ref_relu = malloc(nin * sizeof(float));
        ff_cpu_relu_backward(ref_relu, ref, x, (int64_t)nin);
        CHECK_OK(ff_gpu_fill(gd, NAN, nin, F.s));
        CHECK_OK(ff_gpu_maxpool_backward(gd, gg, gx, L, n, true, F.s));
        float *got_relu = tu_host_from(gd, nin, F.s);
        snprintf(name, sizeof name, "maxpool + relu backward in one pass, %s", what[t]);
        bad += check_bits(name, got_relu, ref_relu, nin);
        ff_gpu_free(gx), ff_gpu_free(gg), ff_gpu_free(gd);
        if (x != F.cact[pool]) free(x);
        free(g), free(ref), free(got), free(ref_relu), free(got_relu);
    }
    ff_gpu_debug_force_maxpool_general(false);
    assert_int_equal(bad, 0);
}

static void tree_reduce_sgd_gather_bits(void **state) {
    (void)state;
    size_t bad = 0;
    // tree reduction: several row counts (uneven trees, up to the most micro-batches a step has),
    // rows of very different magnitudes so that a different tree would change the bits; stride >
    // len. The sum in place (row 0; the gap after it stays untouched) and into a buffer of its own
    // (the GPU keeps partial sums in registers: the rows are scratch, only the result is compared).
    const int64_t len = 1000, stride = 1003;
    const int64_t nrows_list[] = {1, 2, 3, 5, 7, 13, 32, 100, 1023, 1024};
    for (size_t t = 0; t < sizeof nrows_list / sizeof nrows_list[0]; t++) {
        const int64_t nr = nrows_list[t];
        const size_t cnt = (size_t)(nr * stride);
        float *rows = tu_rand(cnt, 600 + (uint64_t)t, 1.0f);
        for (int64_t j = 0; j < nr; j++)
            for (int64_t i = 0; i < stride; i++)
                rows[j * stride + i] = ldexpf(rows[j * stride + i], (int)(3 * (j % 5)));
        float *grows = gpu_from(rows, cnt), *grows2 = gpu_from(rows, cnt), *gout = NULL;
        CHECK_OK(ff_device_alloc(F.gpu, &gout, (size_t)len, "tree output"));
        CHECK_OK(ff_device_tree_reduce(F.cpu, rows, rows, nr, stride, len));
        CHECK_OK(ff_device_tree_reduce(F.gpu, grows, grows, nr, stride, len));
        CHECK_OK(ff_device_tree_reduce(F.gpu, gout, grows2, nr, stride, len));
        float *got = download(grows, (size_t)stride), *got2 = download(gout, (size_t)len);
        char what[64];
        snprintf(what, sizeof what, "tree_reduce %lld rows (in place, row 0 and gap)", (long long)nr);
        bad += check_bits(what, got, rows, (size_t)stride);
        snprintf(what, sizeof what, "tree_reduce %lld rows (into a buffer)", (long long)nr);
        bad += check_bits(what, got2, rows, (size_t)len);
        ff_device_free(F.gpu, grows), ff_device_free(F.gpu, grows2), ff_device_free(F.gpu, gout);
        free(rows), free(got), free(got2);
    }

    // SGD: train.h's rule, every branch; fma would change the bits (shown, so the check is sharp).
    // 20003 elements: the float4 loop and its tail; case 3 one element on (the float loop).
    const int64_t cnt = 20003;
    struct {
        float lr, mu, wd;
        bool first;
    } cases[] = {
        {0.01f, 0.9f, 1e-3f, false}, {0.01f, 0.9f, 1e-3f, true}, {0.05f, 0.0f, 0.0f, false}, {0.1f, 0.5f, 0.0f, false}};
    for (int c = 0; c < 4; c++) {
        float *w = tu_rand((size_t)cnt, 700, 1.0f), *mom = tu_rand((size_t)cnt, 701, 0.1f);
        float *g = tu_rand((size_t)cnt, 702, 0.01f);
        float *gw = gpu_from(w, (size_t)cnt), *gm = gpu_from(mom, (size_t)cnt), *gg = gpu_from(g, (size_t)cnt);
        size_t fma_diff = 0;
        if (c == 0)
            for (int64_t i = 0; i < cnt; i++) {
                const float gi = g[i] + cases[c].wd * w[i], bi = cases[c].mu * mom[i] + gi;
                fma_diff += fmaf(-cases[c].lr, bi, w[i]) != w[i] - cases[c].lr * bi;
            }
        const int64_t o = c == 3;  // unaligned
        CHECK_OK(ff_device_sgd(F.cpu, w + o, mom + o, g + o, cnt - o, cases[c].lr, cases[c].mu, cases[c].wd,
                               cases[c].first));
        CHECK_OK(ff_device_sgd(F.gpu, gw + o, gm + o, gg + o, cnt - o, cases[c].lr, cases[c].mu, cases[c].wd,
                               cases[c].first));
        float *w_g = download(gw, (size_t)cnt), *m_g = download(gm, (size_t)cnt);
        char what[96];
        snprintf(what, sizeof what, "sgd lr %g momentum %g wd %g first %d: w", (double)cases[c].lr, (double)cases[c].mu,
                 (double)cases[c].wd, (int)cases[c].first);
        bad += check_bits(what, w_g, w, (size_t)cnt);
        snprintf(what, sizeof what, "sgd case %d: momentum buffer", c);
        bad += check_bits(what, m_g, mom, (size_t)cnt);
        if (c == 0) {
            printf("  (an fma in w - lr*b would change %zu of %lld updates)\n", fma_diff, (long long)cnt);
            assert_true(fma_diff > 0);
        }
        ff_device_free(F.gpu, gw), ff_device_free(F.gpu, gm), ff_device_free(F.gpu, gg);
        free(w), free(mom), free(g), free(w_g), free(m_g);
    }

    // tree and SGD fused (ff_device_tree_sgd, the deterministic exchange's last step): the GPU's one
    // kernel (up to 8 rows) and its fallback (the tree first, more rows) against the cpu device,
    // which runs the tree then the rule; the updated weights into their own buffer (w untouched) and
    // in place; row 0 keeps the reduced gradient. Two shapes: a row stride of 3011 (the kernel one
    // float at a time) and of 600004 with 600003 floats (16-byte aligned: float4s from a grid of one
    // block per multiprocessor, several passes of it, and three floats past the last float4). Each
    // again with an own row (tree_rows.h; the exchange's own block sum where the backward left it),
    // row 0 or the last: read from its own buffer, its place in the rows NaN, against the cpu device
    // with every row in place; and, up to 8 rows, without keeping the sum (what the trainer does):
    // then the GPU's rows must be as they were. Bad shapes are refused naming them.
    const int64_t tr_rows[] = {1, 2, 3, 4, 8, 9, 13};
    const size_t n_tr = sizeof tr_rows / sizeof tr_rows[0];
    for (size_t t = 0; t < 6 * n_tr; t++) {
        const bool wide = t % (2 * n_tr) >= n_tr, with_own = t >= 2 * n_tr, keep = t < 4 * n_tr;
        const int64_t nr = tr_rows[t % n_tr], tl = wide ? 600003 : 3000, ts = wide ? 600004 : 3011;
        const bool in_place = t % 2 == 1;
        const int64_t own = with_own ? (t % 4 < 2 ? 0 : nr - 1) : -1;
        if (with_own && nr == 1) continue;  // (an exchange's own row is one of several)
        if (!keep && nr > FF_TREE_UNKEPT_ROWS) continue;
        float *rows = tu_rand((size_t)(nr * ts), 1000 + (uint64_t)t, 0.01f);
        for (int64_t j = 0; j < nr; j++)
            for (int64_t i = 0; i < ts; i++) rows[j * ts + i] = ldexpf(rows[j * ts + i], (int)(3 * (j % 5)));
        float *w = tu_rand((size_t)tl, 1100 + (uint64_t)t, 1.0f), *mom = tu_rand((size_t)tl, 1200 + (uint64_t)t, 0.1f);
        float *w_before = malloc((size_t)tl * sizeof(float)), *w_out = malloc((size_t)tl * sizeof(float));
        memcpy(w_before, w, (size_t)tl * sizeof(float));
        float *grows = gpu_from(rows, (size_t)(nr * ts)), *gw = gpu_from(w, (size_t)tl),
              *gm = gpu_from(mom, (size_t)tl);
        float *gout = in_place ? gw : gpu_from(NULL, (size_t)tl), *gown = NULL;
        if (own >= 0) {
            gown = gpu_from(rows + own * ts, (size_t)tl);
            float *nan_row = malloc((size_t)tl * sizeof(float));
            for (int64_t i = 0; i < tl; i++) nan_row[i] = NAN;
            CHECK_OK(ff_device_upload(F.gpu, grows + own * ts, nan_row, (size_t)tl));
            CHECK_OK(ff_device_sync(F.gpu));  // (the upload is enqueued)
            free(nan_row);
        }
        float *grows_before = download(grows, (size_t)(nr * ts));
        const ff_tree_rows cpu_rows = {.at = rows, .n = nr, .stride = ts, .own = -1, .keep_sum = true};
        const ff_tree_rows gpu_rows = {
            .at = grows, .n = nr, .stride = ts, .own = own, .own_at = gown, .keep_sum = keep};
        CHECK_OK(ff_device_tree_sgd(F.cpu, in_place ? w : w_out, w, mom, &cpu_rows, tl, 0.01f, 0.9f, 1e-3f, false));
        CHECK_OK(ff_device_tree_sgd(F.gpu, gout, gw, gm, &gpu_rows, tl, 0.01f, 0.9f, 1e-3f, false));
        float *out_g = download(gout, (size_t)tl), *m_g = download(gm, (size_t)tl), *r_g = download(grows, (size_t)tl);
        char what[128];
        snprintf(what, sizeof what, "tree_sgd %lld rows (%s, stride %lld, own row %lld, sum %s): weights",
                 (long long)nr, in_place ? "in place" : "apart", (long long)ts, (long long)own,
                 keep ? "kept" : "not kept");
        bad += check_bits(what, out_g, in_place ? w : w_out, (size_t)tl);
        snprintf(what, sizeof what, "tree_sgd %lld rows: momentum", (long long)nr);
        bad += check_bits(what, m_g, mom, (size_t)tl);
        if (keep) {
            snprintf(what, sizeof what, "tree_sgd %lld rows: row 0 (the reduced gradient)", (long long)nr);
            bad += check_bits(what, r_g, rows, (size_t)tl);
        } else {
            float *all_g = download(grows, (size_t)(nr * ts));
            snprintf(what, sizeof what, "tree_sgd %lld rows, sum not kept: the rows untouched", (long long)nr);
            bad += check_bits(what, all_g, grows_before, (size_t)(nr * ts));
            free(all_g);
        }
        free(grows_before);
        if (!in_place) {
            float *w_g = download(gw, (size_t)tl);
            bad += check_bits("tree_sgd: w untouched when the output is apart", w_g, w_before, (size_t)tl);
            free(w_g);
        }
        ff_device_free(F.gpu, grows), ff_device_free(F.gpu, gw), ff_device_free(F.gpu, gm), ff_device_free(F.gpu, gown);
        if (!in_place) ff_device_free(F.gpu, gout);
        free(rows), free(w), free(mom), free(w_before), free(w_out), free(out_g), free(m_g), free(r_g);
    }
    float one = 1.0f, m1 = 0.0f, r1[2] = {1.0f, 2.0f};
    assert_int_equal(
        ff_device_tree_sgd(F.gpu, &one, &one, &m1, &(ff_tree_rows){.at = r1, .n = 0, .stride = 1, .own = -1}, 1, 0.1f,
                           0.9f, 0.0f, false),
        FF_ERR_INPUT);
    assert_int_equal(
        ff_device_tree_sgd(F.gpu, &one, &one, &m1, &(ff_tree_rows){.at = r1, .n = 2, .stride = 1, .own = -1}, 2, 0.1f,
                           0.9f, 0.0f, false),
        FF_ERR_INPUT);
    assert_int_equal(
        ff_device_tree_sgd(F.gpu, &one, &one, &m1, &(ff_tree_rows){.at = r1, .n = 9, .stride = 2, .own = -1}, 2, 0.1f,
                           0.9f, 0.0f, false),
        FF_ERR_INPUT);

    // gather: 13 samples (repeats included) of a 40-image set
    const int64_t count = 40, per = ff_shape_numel(F.m.input), n = N_IMG;
    float *images = tu_rand((size_t)(count * per), 800, 1.0f);
    int32_t all_labels[40], lab_c[N_IMG], lab_g[N_IMG];
    int64_t idx[N_IMG];
    for (int i = 0; i < count; i++) all_labels[i] = (int32_t)(ff_mix64((uint64_t)i + 900) % 10);
    for (int i = 0; i < n; i++) idx[i] = (int64_t)(ff_mix64((uint64_t)i + 901) % (uint64_t)count);
    idx[3] = idx[7];
    float *x_c = malloc((size_t)(n * per) * sizeof(float));
    CHECK_OK(ff_device_gather(F.cpu, x_c, lab_c, images, all_labels, idx, per, n));
    float *gimages = gpu_from(images, (size_t)(count * per)), *gx = gpu_from(NULL, (size_t)(n * per));
    int32_t *gall = NULL, *glab = NULL;
    int64_t *gidx = NULL;
    CHECK_OK(ff_device_alloc_bytes(F.gpu, (void **)&gall, sizeof all_labels, "labels"));
    CHECK_OK(ff_device_alloc_bytes(F.gpu, (void **)&glab, sizeof lab_g, "batch labels"));
    CHECK_OK(ff_device_alloc_bytes(F.gpu, (void **)&gidx, sizeof idx, "indices"));
    CHECK_OK(ff_device_upload_bytes(F.gpu, gall, all_labels, sizeof all_labels));
    CHECK_OK(ff_device_upload_bytes(F.gpu, gidx, idx, sizeof idx));
    CHECK_OK(ff_device_gather(F.gpu, gx, glab, gimages, gall, gidx, per, n));
    float *x_g = download(gx, (size_t)(n * per));
    CHECK_OK(ff_device_copy_bytes(F.gpu, lab_g, glab, sizeof lab_g));
    bad += check_bits("gather images", x_g, x_c, (size_t)(n * per));
    bad += check_bits("gather labels", lab_g, lab_c, (size_t)n);
    ff_device_free(F.gpu, gimages), ff_device_free(F.gpu, gx);
    ff_device_free(F.gpu, (float *)gall), ff_device_free(F.gpu, (float *)glab), ff_device_free(F.gpu, (float *)gidx);
    free(images), free(x_c), free(x_g);

    // synthetic features (issue 16): the GPU kernel computes synthetic.h's values with the host's
    // bits, at the full MLP's width, for samples far into a set (large counters)
    ff_synth sy;
    ff_synth_init(&sy, 1, 0, 4096, 512);
    const int64_t sn = 7, sfirst = 123456;
    float *s_c = malloc((size_t)(sn * sy.dim) * sizeof(float));
    CHECK_OK(ff_device_synth(F.cpu, s_c, &sy, sfirst, sn));
    float *gs = gpu_from(NULL, (size_t)(sn * sy.dim));
    CHECK_OK(ff_device_synth(F.gpu, gs, &sy, sfirst, sn));
    float *s_g = download(gs, (size_t)(sn * sy.dim));
    bad += check_bits("synthetic features", s_g, s_c, (size_t)(sn * sy.dim));
    s_c[5] = ff_synth_x(&sy, sfirst, 5);  // the host function itself agrees with the cpu device
    assert_true(memcmp(&s_c[5], &s_g[5], sizeof(float)) == 0);
    ff_device_free(F.gpu, gs);
    free(s_c), free(s_g);
    assert_int_equal(bad, 0);
}

// ---------------------------------------------------------------- conv kernels on a strided layer

// mnist's convs are stride 1 without padding: the gpu.h conv launchers on a stride-2, pad-1 layer
// (5 images in groups of 2, rows at a stride larger than the gradient) against the float64
// reference, the CPU reference against the same bound. The weight gradient both ways (the GEMM
// path with a NaN-poisoned workspace, and the direct kernels); the data gradient must take the
// direct kernel (a stride-2 conv does not flip), with or without a workspace.
static void conv_backward_strided_padded(void **state) {
    (void)state;
    ff_layer L = {.name = "conv-test", .op = FF_OP_CONV2D, .out_c = 4, .kh = 3, .kw = 3, .stride = 2, .pad = 1};
    L.in = (ff_shape){3, 9, 9};
    L.out = (ff_shape){4, 5, 5};
    L.n_weight = 4 * 3 * 3 * 3, L.n_bias = 4, L.fan_in = 27, L.param_index = 0;
    const int64_t n = 5, group = 2, ng = (n + group - 1) / group, P = 25;
    const int64_t nx = n * 243, ny = n * 100, nw = L.n_weight, stride = nw + L.n_bias + 3;
    float *x = tu_rand((size_t)nx, 900, 1.0f), *dy = tu_rand((size_t)ny, 901, 1.0f),
          *w = tu_rand((size_t)nw, 902, 0.5f);
    for (int64_t i = 0; i < ny; i += 7) dy[i] = 0.0f;  // skipped terms
    double *g = dalloc((size_t)ny), *h = dalloc((size_t)ny);
    for (int64_t i = 0; i < ny; i++) g[i] = dy[i];

    float *gxd = tu_dev_from(x, (size_t)nx, F.s), *gdy = tu_dev_from(dy, (size_t)ny, F.s);
    float *gw = tu_dev_from(w, (size_t)nw, F.s), *gwork = NULL;
    float *grad[2] = {tu_dev_from(NULL, (size_t)(ng * stride), F.s), tu_dev_from(NULL, (size_t)(ng * stride), F.s)};
    float *gdx[2] = {tu_dev_from(NULL, (size_t)nx, F.s), tu_dev_from(NULL, (size_t)nx, F.s)};
    gwork = tu_dev_from(NULL, (size_t)ff_gpu_conv2d_backward_weights_workspace_floats(&L, n), F.s);
    CHECK_OK(ff_gpu_conv2d_backward_weights(grad[0], grad[0] + nw, stride, gdy, gxd, &L, n, group, gwork, F.s));
    CHECK_OK(ff_gpu_conv2d_backward_weights(grad[1], grad[1] + nw, stride, gdy, gxd, &L, n, group, NULL, F.s));
    assert_false(ff_gpu_conv2d_backward_data_flips(&L));
    assert_int_equal(ff_gpu_conv2d_backward_data_workspace_floats(&L), 0);
    assert_int_equal(ff_gpu_backward_data_weights(gwork, gw, &L, F.s), FF_ERR_INPUT);  // nothing to flip
    ff_clear_error();
    CHECK_OK(ff_gpu_conv2d_backward_data(gdx[0], gdy, gw, &L, n, gwork, F.s));  // ignored: direct
    CHECK_OK(ff_gpu_conv2d_backward_data(gdx[1], gdy, gw, &L, n, NULL, F.s));
    float *rows[2], *dx[2];
    for (int v = 0; v < 2; v++)
        rows[v] = tu_host_from(grad[v], (size_t)(ng * stride), F.s), dx[v] = tu_host_from(gdx[v], (size_t)nx, F.s);

    size_t bad_g[2] = {0, 0}, bad_c = 0, gap = 0;
    double worst_g[2] = {0, 0}, worst_c = 0;
    double *ref = dalloc((size_t)(nw + 4)), *bnd = dalloc((size_t)(nw + 4));
    float *cpu = malloc((size_t)(nw + 4) * sizeof(float));
    float *scratch = malloc((size_t)ff_cpu_conv2d_backward_weights_scratch(&L) * sizeof(float));
    for (int64_t grp = 0; grp < ng; grp++) {
        const int64_t i0 = grp * group, i1 = i0 + group < n ? i0 + group : n, T = (i1 - i0) * P;
        for (int64_t i = 0; i < ny; i++) h[i] = gam(T) * fabs(g[i]);
        conv_weights_d(ref, ref + nw, g, x, &L, i0, i1, false);
        conv_weights_d(bnd, bnd + nw, h, x, &L, i0, i1, true);
        widen(bnd, nw + 4, T);
        for (int v = 0; v < 2; v++) {
            bad_g[v] += count_outside(rows[v] + grp * stride, ref, bnd, nw + 4, &worst_g[v]);
            for (int64_t k = nw + 4; k < stride; k++) gap += !isnan(rows[v][grp * stride + k]);  // not written
        }
        ff_cpu_conv2d_backward_weights(cpu, cpu + nw, dy + i0 * 100, x + i0 * 243, &L, i1 - i0, scratch);
        bad_c += count_outside(cpu, ref, bnd, nw + 4, &worst_c);
    }
    printf("  %-52s cuda GEMM worst %.2f%%, direct %.2f%%, cpu %.2f%% of bound  %s\n",
           "conv 3x3/2 pad 1 dw, db (3 groups)", 100 * worst_g[0], 100 * worst_g[1], 100 * worst_c,
           bad_g[0] || bad_g[1] || bad_c || gap ? "FAIL" : "PASS");

    double *dref = dalloc((size_t)nx), *dbnd = dalloc((size_t)nx);
    const int64_t Td = L.out_c * L.kh * L.kw;
    for (int64_t i = 0; i < ny; i++) h[i] = gam(Td) * fabs(g[i]);
    conv_data_d(dref, g, w, &L, n, false);
    conv_data_d(dbnd, h, w, &L, n, true);
    widen(dbnd, nx, Td);
    double worst_dg = 0, worst_dc = 0;
    float *dx_c = malloc((size_t)nx * sizeof(float));
    ff_cpu_conv2d_backward_data(dx_c, dy, w, &L, n);
    const size_t bad_dg = count_outside(dx[1], dref, dbnd, nx, &worst_dg);
    const size_t bad_dc = count_outside(dx_c, dref, dbnd, nx, &worst_dc);
    printf("  %-52s cuda worst %.2f%%, cpu worst %.2f%% of bound  %s\n", "conv 3x3/2 pad 1 dx (direct kernel)",
           100 * worst_dg, 100 * worst_dc, bad_dg || bad_dc ? "FAIL" : "PASS");
    const size_t bad_dw = check_bits("conv 3x3/2 pad 1 dx: workspace given = direct", dx[0], dx[1], (size_t)nx);

    ff_gpu_free(gxd), ff_gpu_free(gdy), ff_gpu_free(gw), ff_gpu_free(gwork);
    for (int v = 0; v < 2; v++) ff_gpu_free(grad[v]), ff_gpu_free(gdx[v]), free(rows[v]), free(dx[v]);
    free(x), free(dy), free(w), free(g), free(h), free(ref), free(bnd), free(cpu);
    free(scratch), free(dref), free(dbnd), free(dx_c);
    assert_int_equal(bad_g[0] + bad_g[1] + bad_c + gap + bad_dg + bad_dc + bad_dw, 0);
}

// ---------------------------------------------------------------- conv weight gradient: two kernels

// The host model of the few-column kernel's order (train_cuda.cu k_conv_wgrad_img): per image and
// strip of `rows` output rows, every (k, c, r, s) chain over the strip's positions ascending from +0
// (fmaf(dy, x, acc), a padding tap as fmaf(dy, +0, acc)) and every bias chain (acc + dy); an image's
// strips added in order, then the images of a group in order. rows = Ho: one chain over the whole
// image, the tiled kernel's (k_conv_wgrad_part). rows_out: (ng, stride) floats, dw then db.
static void conv_wgrad_strip_host(float *rows_out, const float *x, const float *dy, const ff_layer *L, int64_t n,
                                  int64_t group, int64_t stride, int64_t rows) {
    const int64_t K = L->out_c, C = L->in.c, H = L->in.h, W = L->in.w, R = L->kh, S = L->kw, Ho = L->out.h,
                  Wo = L->out.w, CRS = C * R * S, PW = K * CRS + K, strips = (Ho + rows - 1) / rows;
    float *img = malloc((size_t)(n * PW) * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        for (int64_t k = 0; k < K; k++)
            for (int64_t e = 0; e <= CRS; e++) {  // e = CRS: the bias
                const int64_t c = e / (R * S), r = e / S % R, sc = e % S;
                float v = 0.0f;
                for (int64_t st = 0; st < strips; st++) {
                    float acc = 0.0f;
                    for (int64_t oh = st * rows; oh < Ho && oh < (st + 1) * rows; oh++)
                        for (int64_t ow = 0; ow < Wo; ow++) {
                            const float d = dy[((i * K + k) * Ho + oh) * Wo + ow];
                            if (e == CRS) {
                                acc = acc + d;
                                continue;
                            }
                            const int64_t h = oh * L->stride - L->pad + r, w = ow * L->stride - L->pad + sc;
                            const float xv =
                                h >= 0 && h < H && w >= 0 && w < W ? x[((i * C + c) * H + h) * W + w] : 0.0f;
                            acc = fmaf(d, xv, acc);
                        }
                    v = st == 0 ? acc : v + acc;
                }
                img[i * PW + (e == CRS ? K * CRS + k : k * CRS + e)] = v;
            }
    for (int64_t g = 0; g * group < n; g++) {
        const int64_t i0 = g * group, i1 = i0 + group < n ? i0 + group : n;
        for (int64_t e = 0; e < PW; e++) {
            float v = img[i0 * PW + e];
            for (int64_t i = i0 + 1; i < i1; i++) v = v + img[i * PW + e];
            rows_out[g * stride + e] = v;
        }
    }
    free(img);
}

// The fast conv weight gradient has two kernels (train_cuda.cu): one for few columns (mnist's
// conv1: 9), a block per image and strip of FF_GPU_WGRAD_STRIP_ROWS output rows, and the tiles of
// k_conv_wgrad_part, a chain over the whole image. On layers that take the first (gpu.h
// ff_gpu_conv2d_backward_weights_per_image) each equals its host model bit for bit
// (conv_wgrad_strip_host: strips of that many rows, and one strip, under
// ff_gpu_debug_force_wgrad_tiled), and where an image is one strip the two kernels give the same
// rows: mnist's conv1 (13 strips), the stride-2 pad-1 layer above (3 strips), a 5x5 pad-2 layer (6)
// and a 2 x 3 output (one strip); dy with zeros and -0 (a padding tap is fma(dy, +0, acc): -0 + +0
// is +0, so a kernel that skipped those taps would keep a -0), x with -0; 13 images in groups of
// 4, NaN-poisoned workspaces. The two host orders differ on conv1 (the check can tell them apart).
// The strip kernel's warp-a-strip form (ff_gpu_set_wgrad_lanes: k_conv_wgrad_lanes, no shared
// memory) equals the same strip model bit for bit (40 channels: two warps of lanes, one part-full).
static void conv_wgrad_image_kernel_bits(void **state) {
    (void)state;
    ff_layer Ls[4] = {
        F.m.layers[0],
        {.name = "conv 3x3/2 pad 1", .op = FF_OP_CONV2D, .out_c = 40, .kh = 3, .kw = 3, .stride = 2, .pad = 1},
        {.name = "conv 5x5 pad 2", .op = FF_OP_CONV2D, .out_c = 8, .kh = 5, .kw = 5, .stride = 1, .pad = 2},
        {.name = "conv 3x3 to 2x3", .op = FF_OP_CONV2D, .out_c = 6, .kh = 3, .kw = 3, .stride = 1, .pad = 0}};
    Ls[1].in = (ff_shape){3, 9, 9}, Ls[1].out = (ff_shape){40, 5, 5};  // channel groups 32 + 8
    Ls[2].in = (ff_shape){1, 11, 11}, Ls[2].out = (ff_shape){8, 11, 11};
    Ls[3].in = (ff_shape){2, 4, 5}, Ls[3].out = (ff_shape){6, 2, 3};
    const int64_t n = 13, group = 4, ng = (n + group - 1) / group;
    size_t bad = 0;
    for (int c = 0; c < 4; c++) {
        const ff_layer *L = &Ls[c];
        assert_true(ff_gpu_conv2d_backward_weights_per_image(L, n));
        assert_int_equal(ff_gpu_conv2d_wgrad_strips(L),
                         (L->out.h + FF_GPU_WGRAD_STRIP_ROWS - 1) / FF_GPU_WGRAD_STRIP_ROWS);
        const int64_t nw = L->out_c * L->in.c * L->kh * L->kw, stride = nw + L->out_c + 5;
        const int64_t nx = n * ff_shape_numel(L->in), ny = n * ff_shape_numel(L->out);
        float *x = tu_rand((size_t)nx, 950 + (uint64_t)c, 1.0f), *dy = tu_rand((size_t)ny, 960 + (uint64_t)c, 1.0f);
        for (int64_t i = 0; i < ny; i += 5) dy[i] = (i / 5) % 2 ? -0.0f : 0.0f;
        for (int64_t i = 0; i < ny / n; i++) dy[i] = -0.0f;  // image 0: every term -0
        for (int64_t i = 3; i < nx; i += 11) x[i] = -0.0f;
        // v: 0 the strip kernel, 1 the tiled one, 2 the strips a warp each (ff_gpu_set_wgrad_lanes)
        float *gx = tu_dev_from(x, (size_t)nx, F.s), *gdy = tu_dev_from(dy, (size_t)ny, F.s), *rows[3], *host[3];
        for (int v = 0; v < 3; v++) {
            float *grad = tu_dev_from(NULL, (size_t)(ng * stride), F.s);
            float *work = tu_dev_from(NULL, (size_t)ff_gpu_conv2d_backward_weights_workspace_floats(L, n), F.s);
            CHECK_OK(ff_gpu_fill(grad, NAN, (size_t)(ng * stride), F.s));
            CHECK_OK(ff_gpu_fill(work, NAN, (size_t)ff_gpu_conv2d_backward_weights_workspace_floats(L, n), F.s));
            ff_gpu_debug_force_wgrad_tiled(v == 1);
            ff_gpu_set_wgrad_lanes(v == 2);
            const ff_status st =
                ff_gpu_conv2d_backward_weights(grad, grad + nw, stride, gdy, gx, L, n, group, work, F.s);
            ff_gpu_debug_force_wgrad_tiled(false);
            ff_gpu_set_wgrad_lanes(false);
            CHECK_OK(st);
            rows[v] = tu_host_from(grad, (size_t)(ng * stride), F.s);
            host[v] = malloc((size_t)(ng * stride) * sizeof(float));
            for (int64_t i = 0; i < ng * stride; i++) host[v][i] = rows[v][i];  // the gaps as the GPU left them
            conv_wgrad_strip_host(host[v], x, dy, L, n, group, stride, v != 1 ? FF_GPU_WGRAD_STRIP_ROWS : L->out.h);
            ff_gpu_free(grad), ff_gpu_free(work);
        }
        size_t unwritten = 0;
        for (int64_t gi = 0; gi < ng; gi++)
            for (int64_t e = 0; e < nw + L->out_c; e++)
                unwritten += isnan(rows[0][gi * stride + e]) + isnan(rows[2][gi * stride + e]);
        char what[96];
        snprintf(what, sizeof what, "conv dw, db %s: strips = host model", L->name);
        bad += check_bits(what, rows[0], host[0], (size_t)(ng * stride)) + unwritten;
        snprintf(what, sizeof what, "conv dw, db %s: tiled = host model", L->name);
        bad += check_bits(what, rows[1], host[1], (size_t)(ng * stride));
        snprintf(what, sizeof what, "conv dw, db %s: strips a warp each = host model", L->name);
        bad += check_bits(what, rows[2], host[2], (size_t)(ng * stride));
        if (L->out.h <= FF_GPU_WGRAD_STRIP_ROWS) {
            snprintf(what, sizeof what, "conv dw, db %s (one strip): strips = tiled", L->name);
            bad += check_bits(what, rows[0], rows[1], (size_t)(ng * stride));
        }
        if (c == 0) {  // the two orders are told apart
            size_t differ = 0;
            for (int64_t i = 0; i < ng * stride; i++) differ += memcmp(&host[0][i], &host[1][i], 4) != 0;
            printf("  conv1: %zu of %lld values differ between the strip and whole-image orders\n", differ,
                   (long long)(ng * stride));
            assert_true(differ > (size_t)(ng * (nw + L->out_c)) / 4);
        }
        ff_gpu_free(gx), ff_gpu_free(gdy);
        free(x), free(dy), free(rows[0]), free(rows[1]), free(rows[2]), free(host[0]), free(host[1]), free(host[2]);
    }
    assert_int_equal(bad, 0);
}

// ---------------------------------------------------------------- conv weight gradient, tf32x3

// One ff_gpu_conv2d_backward_weights call into NaN-poisoned rows (ng groups of `stride` floats),
// under the given conv math and tf32x3 configuration (-1: automatic); the rows back on the host.
static float *wgrad_rows(const ff_layer *L, const float *gdy, const float *gx, int64_t n, int64_t group, int64_t stride,
                         bool x3, int config) {
    const int64_t ng = (n + group - 1) / group, nw = L->out_c * L->in.c * L->kh * L->kw;
    float *grad = tu_dev_from(NULL, (size_t)(ng * stride), F.s);
    float *work = tu_dev_from(NULL, (size_t)ff_gpu_conv2d_backward_weights_workspace_floats(L, n), F.s);
    ff_gpu_set_conv_math(x3);
    ff_gpu_debug_force_wgrad_x3(config);
    const ff_status st = ff_gpu_conv2d_backward_weights(grad, grad + nw, stride, gdy, gx, L, n, group, work, F.s);
    ff_gpu_debug_force_wgrad_x3(-1);
    ff_gpu_set_conv_math(false);
    CHECK_OK(st);
    float *rows = tu_host_from(grad, (size_t)(ng * stride), F.s);
    ff_gpu_free(grad), ff_gpu_free(work);
    return rows;
}

// --precision tf32x3: the stride-1 conv weight gradient's per-image partials on tensor cores
// (train_cuda.cu k_conv_wgrad_x3), summed in image order per group as in fp32. Per group, against
// the float64 reference: dw within the tf32x3 dot bound (each term FF_TOL_TF32X3_PRODUCT, a chain
// of Q * FF_TOL_TF32X3_TERMS tensor-core additions, then the group's image additions), db bit for
// bit the fp32 path's (its chains stay fp32); dw differs from the fp32 path's (the tensor cores
// ran); every configuration gives the same bits; the last image alone gives the partial it gives
// in the batch; nothing outside a row is written. Layers: mnist's conv2 (6 images in groups of
// 4); 3x3 pad 1 with 70 output channels (two row tiles, the second partial) on 13 x 13 (Q = 169:
// 4-byte dy copies, stages that start mid-row, a partial last chunk); 5x5 pad 2 whose 200 columns
// split mid-channel into two column tiles. Random signed data, and tu_low_bits data, on which a
// kernel that left out a cross product or ran plain TF32 errs by about 2^-11.4 (far over).
static void conv_wgrad_tf32x3_within_bound(void **state) {
    (void)state;
    const int c2 = ff_model_find_layer(&F.m, "conv2");
    assert_true(c2 >= 0);
    ff_layer Ls[3] = {
        F.m.layers[c2],
        {.name = "conv 3x3 pad 1, 70 channels",
         .op = FF_OP_CONV2D,
         .out_c = 70,
         .kh = 3,
         .kw = 3,
         .stride = 1,
         .pad = 1},
        {.name = "conv 5x5 pad 2", .op = FF_OP_CONV2D, .out_c = 16, .kh = 5, .kw = 5, .stride = 1, .pad = 2}};
    Ls[1].in = (ff_shape){5, 13, 13}, Ls[1].out = (ff_shape){70, 13, 13};
    Ls[2].in = (ff_shape){8, 11, 11}, Ls[2].out = (ff_shape){16, 11, 11};
    const int64_t n = 6, group = 4, ng = (n + group - 1) / group;
    const int ncfg = ff_gpu_debug_wgrad_x3_count();
    assert_true(ncfg >= 2);
    size_t bad = 0;
    for (int c = 0; c < 3; c++)
        for (int data = 0; data < 2; data++) {
            const ff_layer *L = &Ls[c];
            const int64_t nw = L->out_c * L->in.c * L->kh * L->kw, nb = L->out_c, stride = nw + nb + 3;
            const int64_t in1 = ff_shape_numel(L->in), out1 = ff_shape_numel(L->out), Q = L->out.h * L->out.w;
            float *x = data ? tu_low_bits((size_t)(n * in1), 970 + (uint64_t)c)
                            : tu_rand((size_t)(n * in1), 970 + (uint64_t)c, 1.0f);
            float *dy = data ? tu_low_bits((size_t)(n * out1), 980 + (uint64_t)c)
                             : tu_rand((size_t)(n * out1), 980 + (uint64_t)c, 1.0f);
            float *gx = tu_dev_from(x, (size_t)(n * in1), F.s), *gdy = tu_dev_from(dy, (size_t)(n * out1), F.s);
            float *fp32 = wgrad_rows(L, gdy, gx, n, group, stride, false, -1);
            float *x3 = wgrad_rows(L, gdy, gx, n, group, stride, true, -1);
            double *g = dalloc((size_t)(n * out1)), *ga = dalloc((size_t)(n * out1));
            for (int64_t i = 0; i < n * out1; i++) g[i] = dy[i], ga[i] = fabs(dy[i]);
            double *ref = dalloc((size_t)(nw + nb)), *A = dalloc((size_t)(nw + nb)), *bnd = dalloc((size_t)(nw + nb));
            size_t over = 0, differ = 0, db_differ = 0, unwritten = 0;
            double worst = 0;
            for (int64_t gi = 0; gi < ng; gi++) {
                const int64_t i0 = gi * group, i1 = i0 + group < n ? i0 + group : n;
                conv_weights_d(ref, ref + nw, g, x, L, i0, i1, false);
                conv_weights_d(A, A + nw, ga, x, L, i0, i1, true);
                const double P = FF_TOL_TF32X3_PRODUCT, gm = gam(Q * FF_TOL_TF32X3_TERMS + (i1 - i0));
                for (int64_t e = 0; e < nw; e++) bnd[e] = A[e] * (P + gm * (1 + P));
                for (int64_t e = nw; e < nw + nb; e++) bnd[e] = 0;  // db: compared bit for bit below
                widen(bnd, nw, Q * FF_TOL_TF32X3_TERMS + (i1 - i0));
                const float *r3 = x3 + gi * stride, *rf = fp32 + gi * stride;
                over += count_outside(r3, ref, bnd, nw, &worst);
                for (int64_t e = 0; e < nw; e++) differ += memcmp(&r3[e], &rf[e], sizeof(float)) != 0;
                db_differ += memcmp(r3 + nw, rf + nw, (size_t)nb * sizeof(float)) != 0;
                for (int64_t e = 0; e < stride; e++) unwritten += (e < nw + nb) == isnan(r3[e]);
            }
            printf(
                "  tf32x3 conv dw %-28s %s data: %zu over the bound (worst %.1f%%), %zu of %lld differ from "
                "fp32, db %s fp32's  %s\n",
                L->name, data ? "low-bits" : "random  ", over, 100 * worst, differ, (long long)(ng * nw),
                db_differ ? "NOT" : "=", over || !differ || db_differ || unwritten ? "FAIL" : "PASS");
            bad += over + (differ == 0) + db_differ + unwritten;
            for (int cfg = 0; cfg < ncfg; cfg++) {
                float *rc = wgrad_rows(L, gdy, gx, n, group, stride, true, cfg);
                char what[96];
                snprintf(what, sizeof what, "tf32x3 conv dw %s configuration %d = automatic", L->name, cfg);
                bad += check_bits(what, rc, x3, (size_t)(ng * stride));
                free(rc);
            }
            // the last image alone: its partial (a group of one) as in the batch
            float *each = wgrad_rows(L, gdy, gx, n, 1, stride, true, -1);
            float *alone = wgrad_rows(L, gdy + (n - 1) * out1, gx + (n - 1) * in1, 1, 1, stride, true, -1);
            bad += check_bits("tf32x3 conv dw: last image alone = in the batch", alone, each + (n - 1) * stride,
                              (size_t)stride);
            free(each), free(alone);
            ff_gpu_free(gx), ff_gpu_free(gdy);
            free(x), free(dy), free(fp32), free(x3), free(g), free(ga), free(ref), free(A), free(bnd);
        }
    assert_int_equal(bad, 0);
}

// ff_gpu_set_wgrad_beside: mnist's conv2 weight gradient for 6 images under tf32x3 runs the
// 12-warp mma.sync kernel (configuration 1) alone and, in a build with the warpgroup kernels, the
// 320-column one (configuration 3) beside other work, with the same bits; off again after the
// switch is cleared. (Where the choice is made train_cuda.cu conv_wgrad_x3; the speed it buys is
// measured, not tested: bench/results/issue15-s31.)
static void conv_wgrad_beside_choice(void **state) {
    (void)state;
    const int c2 = ff_model_find_layer(&F.m, "conv2");
    assert_true(c2 >= 0);
    const ff_layer *L = &F.m.layers[c2];
    const int64_t n = 6, nw = L->out_c * L->in.c * L->kh * L->kw, stride = nw + L->out_c;
    float *x = tu_rand((size_t)(n * ff_shape_numel(L->in)), 991, 1.0f);
    float *dy = tu_rand((size_t)(n * ff_shape_numel(L->out)), 992, 1.0f);
    float *gx = tu_dev_from(x, (size_t)(n * ff_shape_numel(L->in)), F.s);
    float *gdy = tu_dev_from(dy, (size_t)(n * ff_shape_numel(L->out)), F.s);
    const bool wgmma = ff_gpu_debug_wgrad_x3_count() > 3;
    float *alone = wgrad_rows(L, gdy, gx, n, n, stride, true, -1);
    const int cfg_alone = ff_gpu_debug_last_wgrad_x3();
    ff_gpu_set_wgrad_beside(true);
    float *beside = wgrad_rows(L, gdy, gx, n, n, stride, true, -1);
    const int cfg_beside = ff_gpu_debug_last_wgrad_x3();
    ff_gpu_set_wgrad_beside(false);
    float *again = wgrad_rows(L, gdy, gx, n, n, stride, true, -1);
    const int cfg_again = ff_gpu_debug_last_wgrad_x3();
    printf("  conv2 dw, 6 images: configuration %d alone, %d beside, %d after the switch is cleared\n", cfg_alone,
           cfg_beside, cfg_again);
    assert_int_equal(cfg_alone, 1);
    assert_int_equal(cfg_beside, wgmma ? 3 : 1);
    assert_int_equal(cfg_again, 1);
    assert_int_equal(check_bits("tf32x3 conv dw beside = alone", beside, alone, (size_t)stride), 0);
    ff_gpu_free(gx), ff_gpu_free(gdy);
    free(x), free(dy), free(alone), free(beside), free(again);
}

// ---------------------------------------------------------------- linear weight gradient in the tree

// ff_gpu_linear_backward_weights_tree (the groups summed in the tree as the kernel computes them,
// on a binary counter of partial sums in shared memory) against the rows of
// ff_gpu_linear_backward_weights followed by ff_gpu_tree_reduce, bit for bit, at every group count
// that shapes the tree differently up to 33 and at 64 and 100 (the tree in place past 32 rows; 7
// levels): a layer of 40 x 100 (partial tiles), groups of 11 (a group spans two stages of 8
// images) with a short last one, dy with zeros and -0 (skipped terms), x with -0; NaN-poisoned
// outputs. backward_reduced_bits covers mnist's fc1 through the device.
static void linear_tree_kernel_bits(void **state) {
    (void)state;
    const int64_t O = 40, I = 100, group = 11, stride = O * I + O;
    ff_layer L = {.name = "linear 100 -> 40", .op = FF_OP_LINEAR, .out_c = O};
    L.in = (ff_shape){I, 1, 1}, L.out = (ff_shape){O, 1, 1};
    const int counts[] = {1, 2, 3, 5, 7, 8, 9, 13, 16, 17, 31, 32, 33, 64, 100};
    size_t bad = 0;
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        const int64_t ng = counts[c], n = ng * group - (ng > 1 ? 4 : 0);  // a short last group from 2 on
        float *x = tu_rand((size_t)(n * I), 970 + c, 1.0f), *dy = tu_rand((size_t)(n * O), 990 + c, 1.0f);
        for (int64_t i = 0; i < n * O; i += 7) dy[i] = (i / 7) % 2 ? -0.0f : 0.0f;
        for (int64_t i = 5; i < n * I; i += 13) x[i] = -0.0f;
        float *gx = tu_dev_from(x, (size_t)(n * I), F.s), *gdy = tu_dev_from(dy, (size_t)(n * O), F.s);
        float *gw = tu_dev_from(NULL, (size_t)(O * I), F.s), *gb = tu_dev_from(NULL, (size_t)(ng * O), F.s);
        float *rows = tu_dev_from(NULL, (size_t)(ng * stride), F.s), *sum = tu_dev_from(NULL, (size_t)(O * I), F.s);
        CHECK_OK(ff_gpu_linear_backward_weights_tree(gw, gb, O, gdy, gx, &L, n, group, F.s));
        CHECK_OK(ff_gpu_linear_backward_weights(rows, rows + O * I, stride, gdy, gx, &L, n, group, F.s));
        CHECK_OK(ff_gpu_tree_reduce(sum, rows, ng, stride, O * I, F.s));
        float *a = tu_host_from(gw, (size_t)(O * I), F.s), *b = tu_host_from(sum, (size_t)(O * I), F.s);
        size_t unwritten = 0;
        for (int64_t e = 0; e < O * I; e++) unwritten += isnan(a[e]);
        char what[96];
        snprintf(what, sizeof what, "linear dw in the tree, %lld groups: = rows + tree", (long long)ng);
        bad += check_bits(what, a, b, (size_t)(O * I)) + unwritten;
        ff_gpu_free(gx), ff_gpu_free(gdy), ff_gpu_free(gw), ff_gpu_free(gb), ff_gpu_free(rows), ff_gpu_free(sum);
        free(x), free(dy), free(a), free(b);
    }
    assert_int_equal(bad, 0);
}

// ---------------------------------------------------------------- data gradients via the forward kernels

// One data-gradient case (conv when L is a conv, linear otherwise) on n images: the fast path
// (gpu.h: the forward kernel on flipped / transposed weights, NaN-poisoned workspace) and the
// direct kernel, both within the bound of the float64 reference; the fast path deterministic: run
// twice, under every forced tile configuration, and the first n2 images of a smaller batch (the
// small-batch GEMV path for a linear layer) give the same bits.
static size_t data_fast_case(const char *what, const ff_layer *L, int64_t n, int64_t n2, uint64_t seed) {
    const bool conv = L->op == FF_OP_CONV2D;
    const int64_t per_x = ff_shape_numel(L->in), per_y = ff_shape_numel(L->out);
    const int64_t nx = n * per_x, ny = n * per_y, nw = conv ? L->out_c * L->in.c * L->kh * L->kw : L->out_c * per_x;
    const int64_t T = conv ? L->out_c * L->kh * L->kw : L->out_c;  // terms per chain
    float *dy = tu_rand((size_t)ny, seed, 1.0f), *w = tu_rand((size_t)nw, seed + 1, 0.5f);
    for (int64_t i = 0; i < ny; i += 7) dy[i] = 0.0f;  // zero terms (relu-masked gradients)
    double *g = dalloc((size_t)ny), *h = dalloc((size_t)ny), *ref = dalloc((size_t)nx), *bnd = dalloc((size_t)nx);
    for (int64_t i = 0; i < ny; i++) g[i] = dy[i], h[i] = gam(T) * fabs((double)dy[i]);
    if (conv) {
        conv_data_d(ref, g, w, L, n, false);
        conv_data_d(bnd, h, w, L, n, true);
    } else {
        linear_data_d(ref, g, w, L, n, false);
        linear_data_d(bnd, h, w, L, n, true);
    }
    widen(bnd, nx, T);

    const int64_t wf =
        conv ? ff_gpu_conv2d_backward_data_workspace_floats(L) : ff_gpu_linear_backward_data_workspace_floats(L, n);
    if (conv) assert_true(ff_gpu_conv2d_backward_data_flips(L));
    assert_true(wf > 0);
    float *gdy = tu_dev_from(dy, (size_t)ny, F.s), *gw = tu_dev_from(w, (size_t)nw, F.s);
    float *gwork = tu_dev_from(NULL, (size_t)wf, F.s), *gdx = tu_dev_from(NULL, (size_t)nx, F.s);
#define RUN_DATA(out, work, count)                                                       \
    CHECK_OK(conv ? ff_gpu_conv2d_backward_data((out), gdy, gw, L, (count), (work), F.s) \
                  : ff_gpu_linear_backward_data((out), gdy, gw, L, (count), (work), F.s))
    RUN_DATA(gdx, gwork, n);
    float *fast = tu_host_from(gdx, (size_t)nx, F.s);
    RUN_DATA(gdx, NULL, n);
    float *direct = tu_host_from(gdx, (size_t)nx, F.s);
    double worst_f = 0, worst_d = 0;
    const size_t bad_f = count_outside(fast, ref, bnd, nx, &worst_f),
                 bad_d = count_outside(direct, ref, bnd, nx, &worst_d);
    printf("  %-52s fast worst %.2f%%, direct %.2f%% of bound  %s\n", what, 100 * worst_f, 100 * worst_d,
           bad_f || bad_d ? "FAIL" : "PASS");

    size_t differ = 0;
    CHECK_OK(ff_gpu_fill(gdx, NAN, (size_t)nx, F.s));
    RUN_DATA(gdx, gwork, n);
    float *again = tu_host_from(gdx, (size_t)nx, F.s);
    differ += memcmp(again, fast, (size_t)nx * sizeof(float)) != 0;
    free(again);
    int tiles = 0;
    for (int t = 0; t < ff_gpu_debug_tile_count(); t++) {
        ff_gpu_debug_force_tile(t);
        CHECK_OK(ff_gpu_fill(gdx, NAN, (size_t)nx, F.s));
        RUN_DATA(gdx, gwork, n);
        float *got = tu_host_from(gdx, (size_t)nx, F.s);
        differ += memcmp(got, fast, (size_t)nx * sizeof(float)) != 0;
        free(got);
        tiles++;
    }
    ff_gpu_debug_force_tile(-1);
    CHECK_OK(ff_gpu_fill(gdx, NAN, (size_t)nx, F.s));
    RUN_DATA(gdx, gwork, n2);
    float *small = tu_host_from(gdx, (size_t)(n2 * per_x), F.s);
    differ += memcmp(small, fast, (size_t)(n2 * per_x) * sizeof(float)) != 0;
    free(small);
#undef RUN_DATA
    printf("  %-52s twice, %d tile configurations, batch %lld vs %lld: %zu differ  %s\n", "  (fast path bits)", tiles,
           (long long)n2, (long long)n, differ, differ ? "FAIL" : "PASS");

    // In two steps (gpu.h), the rearranged weights in a buffer of their own and the split-K sums in
    // another, as the gradient lane makes them ahead (device_cuda.c): the same bits.
    const int64_t wd_floats = conv ? wf : ff_gpu_linear_backward_data_split_offset(L);
    float *gwd = tu_dev_from(NULL, (size_t)wd_floats, F.s);
    float *gsplit = conv ? NULL : tu_dev_from(NULL, (size_t)(wf - wd_floats + 4), F.s);
    CHECK_OK(ff_gpu_fill(gdx, NAN, (size_t)nx, F.s));
    CHECK_OK(ff_gpu_backward_data_weights(gwd, gw, L, F.s));
    CHECK_OK(ff_gpu_backward_data_from(gdx, gdy, gwd, L, n, gsplit, F.s));
    float *two = tu_host_from(gdx, (size_t)nx, F.s);
    const bool two_differ = memcmp(two, fast, (size_t)nx * sizeof(float)) != 0;
    printf("  %-52s %s  %s\n", "  (weights made apart, then the data gradient)", two_differ ? "differ" : "same bits",
           two_differ ? "FAIL" : "PASS");
    differ += two_differ;
    free(two);
    ff_gpu_free(gwd), ff_gpu_free(gsplit);

    ff_gpu_free(gdy), ff_gpu_free(gw), ff_gpu_free(gwork), ff_gpu_free(gdx);
    free(dy), free(w), free(g), free(h), free(ref), free(bnd), free(fast), free(direct);
    return bad_f + bad_d + differ;
}

static ff_layer conv_layer(int64_t K, int64_t C, int64_t H, int64_t W, int k, int pad) {
    ff_layer L = {.name = "conv-flip-test", .op = FF_OP_CONV2D, .out_c = K, .kh = k, .kw = k, .stride = 1, .pad = pad};
    L.in = (ff_shape){C, H, W};
    L.out = (ff_shape){K, H + 2 * pad - k + 1, W + 2 * pad - k + 1};
    L.n_weight = K * C * k * k, L.n_bias = K, L.fan_in = C * k * k, L.param_index = 0;
    return L;
}

// ---------------------------------------------------------------- pool-sparse backward

// The host model of pool_sparse.cu's orders (gpu.h "pool-sparse backward"): each window's pick and
// relu gate, dx in 4 parts of the output channels (each a chain of k ascending, then the covering
// windows row-major; the parts added in order), per-image weight chains
// over the windows row-major, the bias +0 + g + ..., the group sums in image order. dx (n, C, H, W);
// dw, db: rows (ngroups, K*C*9) and (ngroups, K). Explicit fmaf and separate adds: no contraction.
static void pool_sparse_host(float *dx, float *dw, float *db, const float *dy, const float *y, const float *x,
                             const float *w, bool gate, const ff_layer *conv, const ff_layer *pool, int64_t n,
                             int64_t group) {
    const int64_t C = conv->in.c, H = conv->in.h, W = conv->in.w, K = conv->out_c;
    const int64_t Ho = conv->out.h, Wo = conv->out.w, PH = pool->out.h, PW = pool->out.w, PP = PH * PW;
    const int64_t KCRS = K * C * 9, PS = KCRS + K, nw = n * K * PP;
    float *G = malloc((size_t)nw * sizeof(float)), *part = malloc((size_t)(n * PS) * sizeof(float));
    int *Q = malloc((size_t)nw * sizeof(int));
    assert_true(G && part && Q);
    for (int64_t t = 0; t < nw; t++) {
        const int64_t plane = t / PP, o = t % PP, py = o / PW, px = o % PW;
        const float *p = y + plane * Ho * Wo + 2 * py * Wo + 2 * px;
        const float v[4] = {p[0], p[1], p[Wo], p[Wo + 1]};
        int best = 0;
        for (int q = 1; q < 4; q++)
            if (v[q] > v[best] || isnan(v[q])) best = q;
        G[t] = !(v[best] > 0.0f) ? 0.0f : 0.0f + dy[t];
        Q[t] = best;
    }
    for (int64_t i = 0; i < n; i++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t yy = 0; yy < H; yy++)
                for (int64_t xx = 0; xx < W; xx++) {
                    const int64_t KS = (K + 3) / 4;
                    float acc = 0.0f;
                    for (int64_t part = 0; part < 4; part++) {
                        float s = 0.0f;
                        for (int64_t k = part * KS; k < K && k < (part + 1) * KS; k++)
                            for (int64_t wy = yy / 2 - 2; wy <= yy / 2; wy++)
                                for (int64_t wx = xx / 2 - 2; wx <= xx / 2; wx++) {
                                    if (wy < 0 || wy >= PH || wx < 0 || wx >= PW) continue;
                                    const int64_t t = ((i * K + k) * PH + wy) * PW + wx;
                                    const int64_t r = yy - (2 * wy + Q[t] / 2), sc = xx - (2 * wx + Q[t] % 2);
                                    if (G[t] == 0.0f || r < 0 || r > 2 || sc < 0 || sc > 2) continue;
                                    s = fmaf(G[t], w[((k * C + c) * 3 + r) * 3 + sc], s);
                                }
                        acc = part == 0 ? s : acc + s;
                    }
                    const int64_t at = ((i * C + c) * H + yy) * W + xx;
                    dx[at] = gate && !(x[at] > 0.0f) ? 0.0f : acc;
                }
    for (int64_t i = 0; i < n; i++)
        for (int64_t k = 0; k < K; k++) {
            float *pk = part + i * PS + k * C * 9;
            for (int64_t e = 0; e < C * 9; e++) pk[e] = 0.0f;
            float b = 0.0f;
            for (int64_t o = 0; o < PP; o++) {
                const int64_t t = (i * K + k) * PP + o, ay = 2 * (o / PW) + Q[t] / 2, ax = 2 * (o % PW) + Q[t] % 2;
                b = b + G[t];  // (every window's term: a zero g adds +0, x being finite here)
                for (int64_t c = 0; c < C; c++)
                    for (int64_t r = 0; r < 3; r++)
                        for (int64_t sc = 0; sc < 3; sc++)
                            pk[(c * 3 + r) * 3 + sc] =
                                fmaf(G[t], x[((i * C + c) * H + ay + r) * W + ax + sc], pk[(c * 3 + r) * 3 + sc]);
            }
            part[i * PS + KCRS + k] = b;
        }
    for (int64_t g0 = 0; g0 * group < n; g0++) {
        const int64_t i0 = g0 * group, i1 = i0 + group < n ? i0 + group : n;
        for (int64_t e = 0; e < PS; e++) {
            float v = part[i0 * PS + e];
            for (int64_t i = i0 + 1; i < i1; i++) v = v + part[i * PS + e];
            if (e < KCRS)
                dw[g0 * KCRS + e] = v;
            else
                db[g0 * K + e - KCRS] = v;
        }
    }
    free(G), free(Q), free(part);
}

// The pool-sparse kernels against their host model, bit for bit: mnist's conv2 under pool1 on the
// real activations (relu1's output as the data gradient's gate), and a layer with two blocks of
// input channels (40), a partial block of output channels (37) and odd sizes (a row and a column
// no window covers) on quantized inputs with ties, NaN and -0, and the same channels on 10 x 10
// (8 x 8 under the pool: the sparse gradient two windows a thread, as mnist's, on those inputs;
// it equals the one-window kernel's G and picks byte for byte). The sparse gradient must also fit
// where the dense one lies, and the dense launchers must give other bits (the kernels ran).
static void pool_sparse_backward_bits(void **state) {
    (void)state;
    size_t bad = 0;
    const int conv2 = ff_model_find_layer(&F.m, "conv2"), pool = ff_model_find_layer(&F.m, "pool1");
    const ff_layer cv[3] = {F.m.layers[conv2], conv_layer(37, 40, 11, 13, 3, 0), conv_layer(37, 40, 10, 10, 3, 0)};
    const ff_layer pl[3] = {F.m.layers[pool], pool_layer(37, 9, 11, 2, 2, 0), pool_layer(37, 8, 8, 2, 2, 0)};
    for (int t = 0; t < 3; t++) {
        const ff_layer *L = &cv[t], *P = &pl[t];
        assert_true(ff_gpu_pool_sparse_applies(L, P));
        const int64_t n = t == 0 ? N_IMG : 5, group = t == 0 ? GROUP : 2, ng = (n + group - 1) / group;
        const size_t nx = (size_t)(n * ff_shape_numel(L->in)), ny = (size_t)(n * ff_shape_numel(L->out));
        const size_t ndy = (size_t)(n * ff_shape_numel(P->out)), KCRS = (size_t)L->n_weight, K = (size_t)L->out_c;
        assert_true(ff_gpu_pool_sparse_floats(P, n) <= (int64_t)ny);
        float *x = t == 0 ? F.cact[conv2] : tu_rand(nx, 601, 1.0f);
        float *y = t == 0 ? F.cact[pool] : tu_rand(ny, 602, 1.0f);
        const float *w = t == 0 ? F.w.w[conv2] : NULL;
        float *wt = t == 0 ? NULL : tu_rand(KCRS, 603, 0.2f);
        if (t >= 1) {
            w = wt;
            for (size_t i = 0; i < ny; i++) y[i] = roundf(y[i] * 2.0f) * 0.5f;  // ties, zeros, negatives
            for (size_t i = 0; i < ny; i += 37) y[i] = -0.0f;
            for (size_t i = 11; i + 1 < ny; i += 53) y[i] = NAN, y[i + 1] = NAN;
        }
        float *dy = tu_rand(ndy, 604, 1.0f);
        for (size_t i = 0; i < ndy; i++) dy[i] = ldexpf(dy[i], (int)(i % 9) - 4);  // magnitudes: order shows
        float *dx_h = malloc(nx * sizeof(float)), *dw_h = malloc((size_t)ng * KCRS * sizeof(float));
        float *db_h = malloc((size_t)ng * K * sizeof(float));
        const bool gate = t == 0;
        pool_sparse_host(dx_h, dw_h, db_h, dy, y, x, w, gate, L, P, n, group);

        float *gx = tu_dev_from(x, nx, F.s), *gy = tu_dev_from(y, ny, F.s), *gdy = tu_dev_from(dy, ndy, F.s);
        float *gw = tu_dev_from(w, KCRS, F.s), *gq = tu_dev_from(NULL, ny, F.s), *gdx = tu_dev_from(NULL, nx, F.s);
        const size_t stride = KCRS + K + 5;  // rows with a gap: the kernels write only their own
        float *grows = tu_dev_from(NULL, (size_t)ng * stride, F.s);
        float *work = tu_dev_from(NULL, (size_t)ff_gpu_conv2d_backward_weights_workspace_floats(L, n), F.s);
        CHECK_OK(ff_gpu_pool_sparse_gradient(gq, gdy, gy, L, P, n, F.s));
        {  // the one-window kernel: the same G and picks, byte for byte
            float *gq1 = tu_dev_from(NULL, ny, F.s);
            const size_t gq_bytes = ndy * (sizeof(float) + 1);  // g, then a pick a window
            ff_gpu_debug_force_pool_sparse_gradient1(true);
            CHECK_OK(ff_gpu_pool_sparse_gradient(gq1, gdy, gy, L, P, n, F.s));
            ff_gpu_debug_force_pool_sparse_gradient1(false);
            unsigned char *a = (unsigned char *)tu_host_from(gq, ny, F.s),
                          *b = (unsigned char *)tu_host_from(gq1, ny, F.s);
            size_t differ = 0;
            for (size_t i = 0; i < gq_bytes; i++) differ += a[i] != b[i];
            printf("  %-52s %zu of %zu bytes differ  %s\n", "pool-sparse gradient: two windows a thread vs one", differ,
                   gq_bytes, differ ? "FAIL" : "PASS");
            bad += differ;
            free(a), free(b);
            ff_gpu_free(gq1);
        }
        {  // in two halves (the picks from y, then the gate from dy and the pool's forward output): the
           // same bytes, two windows a thread and one (the picks) over NaN-poisoned buffers
            const ff_rows prow = ff_rows_full(P);
            float *gpooled = tu_dev_from(NULL, ndy, F.s);
            CHECK_OK(ff_gpu_maxpool(gpooled, gy, P, &prow, n, F.s));
            const size_t gq_bytes = ndy * (sizeof(float) + 1);
            unsigned char *a = (unsigned char *)tu_host_from(gq, ny, F.s);
            for (int one = 0; one < 2; one++) {
                float *gq2 = tu_dev_from(NULL, ny, F.s);
                CHECK_OK(ff_gpu_fill(gq2, NAN, ny, F.s));
                ff_gpu_debug_force_pool_sparse_gradient1(one);
                CHECK_OK(ff_gpu_pool_sparse_picks(gq2, gy, L, P, n, F.s));
                ff_gpu_debug_force_pool_sparse_gradient1(false);
                CHECK_OK(ff_gpu_pool_sparse_gate(gq2, gdy, gpooled, L, P, n, F.s));
                unsigned char *b = (unsigned char *)tu_host_from(gq2, ny, F.s);
                size_t differ = 0;
                for (size_t i = 0; i < gq_bytes; i++) differ += a[i] != b[i];
                printf(
                    "  %-52s %zu of %zu bytes differ  %s\n",
                    one ? "pool-sparse picks (one window) + gate vs gradient" : "pool-sparse picks + gate vs gradient",
                    differ, gq_bytes, differ ? "FAIL" : "PASS");
                bad += differ;
                free(b);
                ff_gpu_free(gq2);
            }
            free(a);
            ff_gpu_free(gpooled);
        }
        CHECK_OK(ff_gpu_pool_sparse_backward_data(gdx, gq, gw, gate ? gx : NULL, L, P, n, F.s));
        CHECK_OK(ff_gpu_pool_sparse_backward_weights(grows, grows + KCRS, (int64_t)stride, gq, true, gx, L, P, n, group,
                                                     work, F.s));
        float *dx_g = tu_host_from(gdx, nx, F.s), *rows = tu_host_from(grows, (size_t)ng * stride, F.s);
        float *dw_g = malloc((size_t)ng * KCRS * sizeof(float)), *db_g = malloc((size_t)ng * K * sizeof(float));
        for (int64_t g = 0; g < ng; g++) {
            memcpy(dw_g + g * KCRS, rows + g * stride, KCRS * sizeof(float));
            memcpy(db_g + g * K, rows + g * stride + KCRS, K * sizeof(float));
        }
        static const char *const what[3] = {"mnist conv2 / pool1", "40 -> 37 channels, 11x13 (ties, NaN, -0)",
                                            "40 -> 37 channels, 10x10 (ties, NaN, -0)"};
        char name[128];
        snprintf(name, sizeof name, "pool-sparse dx%s, %s", gate ? " (relu gate)" : "", what[t]);
        bad += check_bits(name, dx_g, dx_h, nx);
        snprintf(name, sizeof name, "pool-sparse dw rows, %s", what[t]);
        bad += check_bits(name, dw_g, dw_h, (size_t)ng * KCRS);
        snprintf(name, sizeof name, "pool-sparse db rows, %s", what[t]);
        bad += check_bits(name, db_g, db_h, (size_t)ng * K);
        {  // the data gradient's switch on the pick = its dense gather (the default), byte for byte
            float *gdx2 = tu_dev_from(NULL, nx, F.s);
            CHECK_OK(ff_gpu_fill(gdx2, NAN, nx, F.s));
            ff_gpu_debug_force_pool_sparse_dgrad_switch(true);
            CHECK_OK(ff_gpu_pool_sparse_backward_data(gdx2, gq, gw, gate ? gx : NULL, L, P, n, F.s));
            ff_gpu_debug_force_pool_sparse_dgrad_switch(false);
            float *dx2 = tu_host_from(gdx2, nx, F.s);
            size_t dd = 0;
            for (size_t i = 0; i < nx; i++) dd += memcmp(&dx2[i], &dx_g[i], 4) != 0;
            snprintf(name, sizeof name, "pool-sparse dx, switch vs dense gather, %s", what[t]);
            printf("  %-52s %zu of %zu values differ  %s\n", name, dd, nx, dd ? "FAIL" : "PASS");
            bad += dd;
            ff_gpu_free(gdx2);
            free(dx2);
        }
        // the dense launchers on the same gradient (scattered by the maxpool backward): other bits
        float *gdense = tu_dev_from(NULL, ny, F.s);
        CHECK_OK(ff_gpu_maxpool_backward(gdense, gdy, gy, P, n, true, F.s));
        // the pool-sparse weight kernel reading the dense form, with 2 and 4 output channels a warp: the same bits
        for (int kpw = 2; kpw <= 4; kpw += 2) {
            ff_gpu_debug_force_pool_sparse_kpw(kpw);
            CHECK_OK(ff_gpu_pool_sparse_backward_weights(grows, grows + KCRS, (int64_t)stride, gdense, false, gx, L, P,
                                                         n, group, work, F.s));
            float *rows_f = tu_host_from(grows, (size_t)ng * stride, F.s);
            snprintf(name, sizeof name, "pool-sparse dw, db from the dense form, kpw %d, %s", kpw, what[t]);
            bad += check_bits(name, rows_f, rows, (size_t)ng * stride);
            free(rows_f);
        }
        ff_gpu_debug_force_pool_sparse_kpw(0);
        CHECK_OK(
            ff_gpu_conv2d_backward_weights(grows, grows + KCRS, (int64_t)stride, gdense, gx, L, n, group, work, F.s));
        float *rows_d = tu_host_from(grows, (size_t)ng * stride, F.s);
        size_t differ = 0;
        for (size_t i = 0; i < (size_t)ng * stride; i++) differ += memcmp(&rows_d[i], &rows[i], 4) != 0;
        printf("  %-52s %zu of %zu weight-row values differ from the dense kernels'  %s\n", "pool-sparse vs dense",
               differ, (size_t)ng * stride, differ ? "PASS" : "FAIL");
        bad += differ == 0;
        ff_gpu_free(gx), ff_gpu_free(gy), ff_gpu_free(gdy), ff_gpu_free(gw), ff_gpu_free(gq), ff_gpu_free(gdx);
        ff_gpu_free(grows), ff_gpu_free(work), ff_gpu_free(gdense);
        if (t >= 1) free(x), free(y);
        free(wt), free(dy), free(dx_h), free(dw_h), free(db_h), free(dx_g), free(rows), free(dw_g), free(db_g);
        free(rows_d);
    }
    // a shape it does not take is refused with a message, not run
    const ff_layer pad1 = conv_layer(8, 4, 10, 10, 3, 1), p8 = pool_layer(8, 10, 10, 2, 2, 0);
    assert_false(ff_gpu_pool_sparse_applies(&pad1, &p8));
    assert_int_equal(ff_gpu_pool_sparse_gradient(NULL, NULL, NULL, &pad1, &p8, 1, F.s), FF_ERR_INPUT);
    assert_int_equal(bad, 0);
}

static ff_layer linear_layer(int64_t O, int64_t I) {
    ff_layer L = {.name = "linear-test", .op = FF_OP_LINEAR, .out_c = O};
    L.in = (ff_shape){I, 1, 1};
    L.out = (ff_shape){O, 1, 1};
    L.n_weight = O * I, L.n_bias = O, L.fan_in = I, L.param_index = 0;
    return L;
}

// The conv data gradient through the flipped forward conv on mnist's conv2 (3x3, pad 0), a padded
// 3x3 (pad 1) and a 5x5 (pad 2) on non-square maps; the linear data gradient through the
// transposed forward linear on mnist's fc1 and fc2, and on a layer of 2048 outputs (the transposed
// layer is split-K: linear_split.h).
static void data_gradients_fast_paths(void **state) {
    (void)state;
    size_t bad = 0;
    const ff_layer conv2 = F.m.layers[ff_model_find_layer(&F.m, "conv2")];
    bad += data_fast_case("conv dx, mnist conv2 (flipped forward)", &conv2, N_IMG, 3, 1000);
    const ff_layer p1 = conv_layer(6, 5, 9, 11, 3, 1), p2 = conv_layer(4, 3, 8, 7, 5, 2);
    bad += data_fast_case("conv dx, 3x3 pad 1, 9x11 (flipped forward)", &p1, 7, 2, 1010);
    bad += data_fast_case("conv dx, 5x5 pad 2, 8x7 (flipped forward)", &p2, 7, 2, 1020);
    const ff_layer fc1 = F.m.layers[ff_model_find_layer(&F.m, "fc1")];
    const ff_layer fc2 = F.m.layers[ff_model_find_layer(&F.m, "fc2")];
    bad += data_fast_case("linear dx, mnist fc1 (transposed forward)", &fc1, N_IMG, 3, 1030);
    bad += data_fast_case("linear dx, mnist fc2 (transposed forward)", &fc2, N_IMG, 3, 1040);
    const ff_layer wide = linear_layer(2048, 96);
    const ff_layer wide_t = ff_gpu_linear_backward_data_layer(&wide);
    assert_true(ff_gpu_linear_workspace_floats(&wide_t, N_IMG) > 0);  // the split-K path is used
    bad += data_fast_case("linear dx, 96 -> 2048 layer (transposed: split-K)", &wide, N_IMG, 3, 1050);
    assert_int_equal(bad, 0);
}

// ---------------------------------------------------------------- train_backward

// The float64 reference of every group's parameter gradients (ref) and the bound (bnd), both
// (NGROUPS, n_total) in ff_weights' layout, from the cpu activations and dz (header comment).
static void reference_grads(double *ref, double *bnd) {
    const int64_t nt = F.w.n_total;
    size_t cnt = act_floats(F.last + 1);
    double *g = dalloc(cnt), *e = dalloc(cnt);
    for (size_t i = 0; i < cnt; i++) g[i] = F.dz[i];
    for (int l = F.last; l >= 0; l--) {
        const ff_layer *L = &F.m.layers[l];
        const float *x = F.cact[l], *y = F.cact[l + 1];
        const size_t nin = act_floats(l), nout = cnt;
        const bool conv = L->op == FF_OP_CONV2D;
        if (conv || L->op == FF_OP_LINEAR) {
            const int64_t woff = F.w.w[l] - F.w.data, boff = F.w.b[l] - F.w.data;
            const int64_t P = conv ? L->out.h * L->out.w : 1;
            for (int64_t grp = 0; grp < NGROUPS; grp++) {
                const int64_t i0 = grp * GROUP, i1 = i0 + GROUP < N_IMG ? i0 + GROUP : N_IMG, T = (i1 - i0) * P;
                double *h = bound_input(g, e, nout, gam(T));
                double *r = ref + grp * nt, *b = bnd + grp * nt;
                if (conv) {
                    conv_weights_d(r + woff, r + boff, g, x, L, i0, i1, false);
                    conv_weights_d(b + woff, b + boff, h, x, L, i0, i1, true);
                } else {
                    linear_weights_d(r + woff, r + boff, g, x, L, i0, i1, false);
                    linear_weights_d(b + woff, b + boff, h, x, L, i0, i1, true);
                }
                widen(b + woff, L->n_weight, T);
                widen(b + boff, L->n_bias, T);
                free(h);
            }
        }
        if (l == 0) break;
        double *gi = dalloc(nin), *ei = dalloc(nin);
        switch (L->op) {
            case FF_OP_CONV2D:
            case FF_OP_LINEAR: {
                const int64_t terms = conv ? L->out_c * L->kh * L->kw : L->out_c;
                double *h = bound_input(g, e, nout, gam(terms));
                if (conv) {
                    conv_data_d(gi, g, F.w.w[l], L, N_IMG, false);
                    conv_data_d(ei, h, F.w.w[l], L, N_IMG, true);
                } else {
                    linear_data_d(gi, g, F.w.w[l], L, N_IMG, false);
                    linear_data_d(ei, h, F.w.w[l], L, N_IMG, true);
                }
                widen(ei, (int64_t)nin, terms);
                free(h);
                break;
            }
            case FF_OP_RELU:
                for (size_t i = 0; i < nin; i++) gi[i] = y[i] > 0.0f ? g[i] : 0, ei[i] = y[i] > 0.0f ? e[i] : 0;
                break;
            case FF_OP_MAXPOOL: {
                double *h = bound_input(g, e, nout, gam((int64_t)L->kh * L->kw));
                maxpool_route_d(gi, g, x, L, N_IMG);
                maxpool_route_d(ei, h, x, L, N_IMG);
                free(h);
                break;
            }
            default:  // flatten
                memcpy(gi, g, nin * sizeof(double)), memcpy(ei, e, nin * sizeof(double));
        }
        free(g), free(e);
        g = gi, e = ei, cnt = nin;
    }
    free(g), free(e);
}

// Violations of the bound in rows (NGROUPS, n_total); per_group (NGROUPS) receives each group's
// count; prints one line per parameter tensor when `who` is given.
static size_t check_rows(const char *who, const float *rows, const double *ref, const double *bnd, size_t *per_group) {
    const int64_t nt = F.w.n_total;
    size_t total = 0;
    for (int g = 0; g < NGROUPS; g++) per_group[g] = 0;
    for (int l = 0; l <= F.last; l++) {
        const ff_layer *L = &F.m.layers[l];
        if (!L->n_weight) continue;
        for (int part = 0; part < 2; part++) {
            const int64_t off = (part ? F.w.b[l] : F.w.w[l]) - F.w.data, len = part ? L->n_bias : L->n_weight;
            double worst = 0;
            size_t bad = 0;
            for (int g = 0; g < NGROUPS; g++) {
                const size_t b =
                    count_outside(rows + g * nt + off, ref + g * nt + off, bnd + g * nt + off, len, &worst);
                per_group[g] += b;
                bad += b;
            }
            total += bad;
            if (who) {
                char what[96];
                snprintf(what, sizeof what, "%s %s.%s, %d groups", who, L->name, part ? "b" : "w", NGROUPS);
                printf("  %-52s %8lld elems  worst %6.2f%% of bound, %zu outside  %s\n", what,
                       (long long)(len * NGROUPS), 100 * worst, bad, bad ? "FAIL" : "PASS");
            }
        }
    }
    return total;
}

static void upload_cpu_acts(void) {
    for (int l = 0; l <= F.last + 1; l++)
        if (!is_alias(l)) CHECK_OK(ff_device_upload(F.gpu, F.gact[l], F.cact[l], act_floats(l)));
}

// Per-group gradient rows of both devices within the bound of the float64 reference; the cuda
// backward deterministic (twice, and each group alone); a perturbed dz caught in its group.
static void train_backward_within_bound(void **state) {
    (void)state;
    const int64_t nt = F.w.n_total;
    const size_t rows_n = (size_t)(NGROUPS * nt), ndz = act_floats(F.last + 1);
    double *ref = dalloc(rows_n), *bnd = dalloc(rows_n);
    reference_grads(ref, bnd);

    // the same activations (the cpu device's) and dz on both devices
    upload_cpu_acts();
    float *cgrads = NULL, *ggrads = gpu_from(NULL, rows_n), *cdz = malloc(ndz * sizeof(float));
    CHECK_OK(ff_device_alloc(F.cpu, &cgrads, rows_n, "cpu grads"));
    memcpy(cdz, F.dz, ndz * sizeof(float));
    float *gdz = gpu_from(F.dz, ndz);
    float *nan_rows = malloc(rows_n * sizeof(float));
    for (size_t i = 0; i < rows_n; i++) nan_rows[i] = NAN;  // unwritten elements would show
    CHECK_OK(ff_device_upload(F.gpu, ggrads, nan_rows, rows_n));
    CHECK_OK(ff_device_train_backward(F.cpu, cgrads, nt, cdz, (const float *const *)F.cact, F.last, N_IMG, GROUP));
    CHECK_OK(ff_device_train_backward(F.gpu, ggrads, nt, gdz, (const float *const *)F.gact, F.last, N_IMG, GROUP));
    float *g1 = download(ggrads, rows_n);
    size_t per_group[NGROUPS];
    size_t bad = check_rows("cpu ", cgrads, ref, bnd, per_group);
    bad += check_rows("cuda", g1, ref, bnd, per_group);
    // the dense kernels in place of the pool-sparse path (gpu.h): within the same bound, other bits
    CHECK_OK(ff_device_upload(F.gpu, gdz, F.dz, ndz));
    CHECK_OK(ff_device_upload(F.gpu, ggrads, nan_rows, rows_n));
    ff_gpu_debug_force_pool_dense(true);
    CHECK_OK(ff_device_train_backward(F.gpu, ggrads, nt, gdz, (const float *const *)F.gact, F.last, N_IMG, GROUP));
    ff_gpu_debug_force_pool_dense(false);
    float *gd = download(ggrads, rows_n);
    bad += check_rows("cuda (dense pool)", gd, ref, bnd, per_group);
    size_t differ = 0;
    for (size_t i = 0; i < rows_n; i++) differ += memcmp(&gd[i], &g1[i], 4) != 0;
    printf("  %-52s %zu of %zu values differ  %s\n", "cuda pool-sparse vs dense pool rows", differ, rows_n,
           differ ? "PASS" : "FAIL");
    bad += differ == 0;
    free(gd);

    // determinism: again (dz re-uploaded: the backward may use it as scratch), and each group alone
    CHECK_OK(ff_device_upload(F.gpu, gdz, F.dz, ndz));
    CHECK_OK(ff_device_upload(F.gpu, ggrads, nan_rows, rows_n));
    CHECK_OK(ff_device_train_backward(F.gpu, ggrads, nt, gdz, (const float *const *)F.gact, F.last, N_IMG, GROUP));
    float *g2 = download(ggrads, rows_n);
    bad += check_bits("cuda train_backward run twice: every group row", g2, g1, rows_n);
    CHECK_OK(ff_device_upload(F.gpu, gdz, F.dz, ndz));
    CHECK_OK(ff_device_upload(F.gpu, ggrads, nan_rows, rows_n));
    for (int grp = 0; grp < NGROUPS; grp++) {
        const int64_t i0 = grp * GROUP, ng = i0 + GROUP <= N_IMG ? GROUP : N_IMG - i0;
        const float *act[FF_MAX_LAYERS + 1];
        for (int l = 0; l <= F.last + 1; l++) act[l] = F.gact[l] + i0 * (int64_t)(act_floats(l) / N_IMG);
        CHECK_OK(ff_device_train_backward(F.gpu, ggrads + grp * nt, nt, gdz + i0 * F.classes, act, F.last, ng, GROUP));
    }
    float *g3 = download(ggrads, rows_n);
    bad += check_bits("cuda train_backward, each group alone vs all at once", g3, g1, rows_n);

    // mutant: image 5 (group 1), one logit's gradient 1e-4 larger (relative): caught in group 1 only
    float *mut = malloc(ndz * sizeof(float));
    memcpy(mut, F.dz, ndz * sizeof(float));
    // (the label's logit: its gradient (p - 1) / 13 is large, so 1e-4 of it is far above the
    // rounding noise the bound allows)
    const size_t at = 5 * (size_t)F.classes + (size_t)F.labels[5];
    mut[at] = mut[at] * (1.0f + 1e-4f);
    assert_true(mut[at] != F.dz[at]);
    CHECK_OK(ff_device_upload(F.gpu, gdz, mut, ndz));
    CHECK_OK(ff_device_train_backward(F.gpu, ggrads, nt, gdz, (const float *const *)F.gact, F.last, N_IMG, GROUP));
    float *gm = download(ggrads, rows_n);
    size_t mut_group[NGROUPS];
    const size_t caught = check_rows(NULL, gm, ref, bnd, mut_group);
    printf("  %-52s group 1: %zu elements outside the bound; groups 0, 2, 3: %zu, %zu, %zu  %s\n",
           "mutant: dz[5][label 5] * (1 + 1e-4)", mut_group[1], mut_group[0], mut_group[2], mut_group[3],
           mut_group[1] > 0 && mut_group[0] + mut_group[2] + mut_group[3] == 0 ? "CAUGHT" : "MISSED");
    assert_true(caught > 0 && mut_group[1] == caught);

    ff_device_free(F.cpu, cgrads);
    ff_device_free(F.gpu, ggrads), ff_device_free(F.gpu, gdz);
    free(ref), free(bnd), free(cdz), free(nan_rows), free(g1), free(g2), free(g3), free(mut), free(gm);
    assert_int_equal(bad, 0);
}

// A library caller that makes a cuda device itself under a bad FF_TRAIN_POOL_SPARSE or
// FF_TRAIN_CONCURRENT_BACKWARD is refused, the variable and value named (the trainer checks them
// first; the device no longer falls back to the default silently); the good values are taken.
static void device_refuses_bad_switches(void **state) {
    (void)state;
    const struct {
        const char *var, *value;
        bool ok;
    } cases[] = {{"FF_TRAIN_POOL_SPARSE", "3", false},         {"FF_TRAIN_POOL_SPARSE", "", false},
                 {"FF_TRAIN_CONCURRENT_BACKWARD", "2", false}, {"FF_TRAIN_WGRAD_LANES", "yes", false},
                 {"FF_TRAIN_POOL_SPARSE", "1", true},          {"FF_TRAIN_CONCURRENT_BACKWARD", "0", true},
                 {"FF_TRAIN_WGRAD_LANES", "1", true}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        setenv(cases[i].var, cases[i].value, 1);
        ff_device *d = make_device(FF_DEVICE_CUDA);
        unsetenv(cases[i].var);
        if (cases[i].ok) {
            assert_non_null(d);
            ff_device_destroy(d);
            continue;
        }
        assert_null(d);
        printf("  %s='%s' refused: %s\n", cases[i].var, cases[i].value, ff_last_error());
        assert_non_null(strstr(ff_last_error(), cases[i].var));
        ff_clear_error();
    }
}

int main(void) {
    int rc = tu_gpu_or_skip();
    if (rc) return rc;
    // FF_TEST_FILTER=PATTERN runs only the matching tests (cmocka's glob), e.g. for a mutant run
    if (getenv("FF_TEST_FILTER")) cmocka_set_test_filter(getenv("FF_TEST_FILTER"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(train_forward_equals_run),     cmocka_unit_test(softmax_xent_bits),
        cmocka_unit_test(softmax_xent_wide_bits),       cmocka_unit_test(relu_maxpool_backward_bits),
        cmocka_unit_test(tree_reduce_sgd_gather_bits),  cmocka_unit_test(conv_backward_strided_padded),
        cmocka_unit_test(conv_wgrad_image_kernel_bits), cmocka_unit_test(conv_wgrad_tf32x3_within_bound),
        cmocka_unit_test(conv_wgrad_beside_choice),     cmocka_unit_test(linear_tree_kernel_bits),
        cmocka_unit_test(data_gradients_fast_paths),    cmocka_unit_test(train_backward_within_bound),
        cmocka_unit_test(backward_reduced_bits),        cmocka_unit_test(backward_two_pass_bits),
        cmocka_unit_test(pool_sparse_backward_bits),    cmocka_unit_test(device_refuses_bad_switches),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
