// ff_conv_tiles: every kernel configuration of one convolution timed on the GPU, one per line, and
// checked to give the automatic choice's bits; or the layer's weight gradient timed. With
// --stalls, PC sampling (tools/pc_stalls.c, CUPTI) of the tuner's choice: why its warps wait. For
// kernel writers: which tile shape a layer wants, by how much, and what bounds it, without the
// tuner's two-launch guesses or Nsight (the GPU machines have none). With --pool-sparse, the
// pool-sparse gradients of a conv under relu and 2x2 max-pool (mnist's conv2), each of their kernels
// timed and checked to give the automatic choice's bits. Usage: ff_conv_tiles --help.
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fivefold/digest.h"
#include "fivefold/gpu.h"
#include "fivefold/model.h"
#include "fivefold/plan.h"
#include "fivefold/rng.h"
#include "fivefold/weights.h"
#ifdef FF_HAVE_CUPTI
#include "pc_stalls.h"
#endif

static void usage(FILE *f) {
    fprintf(f,
            "usage: ff_conv_tiles [--model mnist-cnn|alexnet|mlp] [--layer NAME] [--batch N] [--iters K]\n"
            "                     [--precision fp32|tf32x3] [--data-grad | --weight-grad | --pool-sparse]\n"
            "                     [--stalls]\n"
            "Times every configuration of the GPU conv kernel for one layer (forced one at a time, --iters\n"
            "launches each after one untimed, on one stream between two events) and prints microseconds per\n"
            "call and TFLOP/s, then names the fastest; every configuration's output is compared bit for bit with\n"
            "the automatic choice's. A linear layer (--layer fc1) times the linear kernels the same way: the\n"
            "GEMM tiles, the split GEMV and the linear tiles (fp32 chains under every precision).\n"
            "--data-grad times the conv that the layer's data gradient runs (the forward conv on dy with\n"
            "flipped weights; stride-1 layers only; a linear layer's: the linear layer of dy with the weights\n"
            "transposed). --weight-grad times a conv's weight and bias gradient as training runs it (per-image\n"
            "partials, then the sums over micro-batches of 8 images), checks a second run gives the same bits\n"
            "and prints their FNV-1a digest (equal across builds with other tile sizes: train_cuda.cu's WG_*\n"
            "give the same bits); with tf32x3, each of its tensor-core configurations too, each compared bit\n"
            "for bit with the automatic choice.\n"
            "--pool-sparse times the pool-sparse backward of the layer under its relu and 2x2 max-pool (gpu.h;\n"
            "mnist's conv2): the sparse gradient, the data gradient as chosen and with a switch, and the\n"
            "weight gradient (with its group sums) as chosen and with 2 and 4 output channels a warp, those\n"
            "compared bit for bit with the automatic choice; --stalls then samples the automatic data and\n"
            "weight gradients and the switch. (Those kernels are fp32 under every precision: --precision has\n"
            "no effect there.)\n"
            "--stalls samples the program counters of the tuner's choice (or the weight gradient's kernels)\n"
            "over min(--iters, 20) launches through CUPTI and prints, per kernel, the share of samples in each\n"
            "stall reason and the hottest SASS offsets (match them with cuobjdump -sass on libfivefold.so).\n"
            "FF_CUDA_SHORT_CONV=1 (as for fivefold) lets a conv of at most 32 terms a chain take its own\n"
            "kernel (gpu.h): the automatic choice is then that kernel, timed beside the tiles.\n"
            "Defaults: --model mnist-cnn --layer conv2 --batch 64 --iters 50 --precision fp32.\n"
            "Exit status: 0 all configurations agree, 1 a GPU or CUPTI error or a configuration differs,\n"
            "2 usage.\n");
}

// A whole decimal integer in [lo, hi], or false (the caller names the flag and the text given).
static bool parse_long(const char *text, long lo, long hi, long *out) {
    char *end = NULL;
    errno = 0;
    const long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

#define WGRAD_GROUP 8  // training's default micro-batch (fivefold train --microbatch)

static int fail(const char *what) {
    fprintf(stderr, "ff_conv_tiles: %s: %s\n", what, ff_last_error());
    return 1;
}

// What a launch runs.
typedef enum { RUN_CONV, RUN_LINEAR, RUN_WEIGHT_GRAD, RUN_PS_GRAD, RUN_PS_DATA, RUN_PS_WEIGHTS } run_kind;

// One launch of what is being timed or sampled.
typedef struct {
    const ff_layer *L, *pool;  // pool: the max-pool over L's relu (the pool-sparse runs)
    long batch;
    // the conv: out = conv(in); the linear layer: out = in w^T + b, split-K sums in work; the
    // weight gradient: rows out, dy in, x w; the pool-sparse data
    // gradient: dx out, the sparse gradient in, weights w, relu gate b; its weight gradient: rows
    // out, the sparse gradient in, x w; the sparse gradient itself: (g, q) out, dy in, the relu's y w
    float *out, *in, *w, *b, *work;
    ff_gpu_stream s;
    run_kind what;
} launch;

static ff_status run_once(const launch *k) {
    const int64_t nw = k->L->out_c * k->L->in.c * k->L->kh * k->L->kw;
    if (k->what == RUN_PS_GRAD) return ff_gpu_pool_sparse_gradient(k->out, k->in, k->w, k->L, k->pool, k->batch, k->s);
    if (k->what == RUN_PS_DATA)
        return ff_gpu_pool_sparse_backward_data(k->out, k->in, k->w, k->b, k->L, k->pool, k->batch, k->s);
    if (k->what == RUN_PS_WEIGHTS)
        return ff_gpu_pool_sparse_backward_weights(k->out, k->out + nw, nw + k->L->out_c, k->in, true, k->w, k->L,
                                                   k->pool, k->batch, WGRAD_GROUP, k->work, k->s);
    if (k->what == RUN_WEIGHT_GRAD) {
        return ff_gpu_conv2d_backward_weights(k->out, k->out + nw, nw + k->L->out_c, k->in, k->w, k->L, k->batch,
                                              WGRAD_GROUP, k->work, k->s);
    }
    if (k->what == RUN_LINEAR) return ff_gpu_linear(k->out, k->in, k->w, k->b, k->L, false, k->batch, k->work, k->s);
    const ff_rows rows = ff_rows_full(k->L);
    return ff_gpu_conv2d(k->out, k->in, k->w, k->b, k->L, false, &rows, k->batch, k->s);
}

// --stalls: min(iters, 20) launches under PC sampling, each alone, then the report.
static int sample_stalls(const launch *k, long iters) {
#ifdef FF_HAVE_CUPTI
    pcs_session *pcs = NULL;
    char err[512] = "";
    int rc = pcs_open(&pcs, 8, err, sizeof err);
    for (long it = 0; rc == 0 && it < (iters < 20 ? iters : 20); it++) {
        rc = pcs_start(pcs, err, sizeof err);
        if (rc == 0 && (run_once(k) != FF_OK || ff_gpu_stream_sync(k->s) != FF_OK)) {
            snprintf(err, sizeof err, "launch: %s", ff_last_error());
            rc = -1;
        }
        if (rc == 0) rc = pcs_stop(pcs, err, sizeof err);
    }
    if (rc == 0) {
        printf("\n");
        pcs_report(pcs, stdout, 12);
    } else {
        fprintf(stderr, "ff_conv_tiles: --stalls: %s\n", err);
    }
    pcs_close(pcs);
    return rc ? 1 : 0;
#else
    (void)k, (void)iters;
    return 2;  // (refused at parsing)
#endif
}

// us: microseconds a launch of k over iters launches between two events on its stream; 0, or
// fail()'s 1 naming what did not run.
static int time_launches(const launch *k, long iters, ff_gpu_event e0, ff_gpu_event e1, const char *what, double *us) {
    if (ff_gpu_event_record(e0, k->s)) return fail("event");
    for (long it = 0; it < iters; it++)
        if (run_once(k)) return fail(what);
    double sec = 0;
    if (ff_gpu_event_record(e1, k->s) || ff_gpu_event_sync(e1) || ff_gpu_event_elapsed(&sec, e0, e1))
        return fail("timing");
    *us = sec / (double)iters * 1e6;
    return 0;
}

// --weight-grad: the training fast path timed; a second run must give the first's bits.
// ref: the automatic choice's rows to compare with (NULL: none); label: what runs.
static int time_weight_grad(const launch *k, long iters, ff_gpu_event e0, ff_gpu_event e1, size_t nrows, float *keep,
                            const float *ref, const char *label) {
    const ff_layer *L = k->L;
    const double flops =
        2.0 * (double)k->batch * (double)(L->out.h * L->out.w) * (double)L->out_c * (double)(L->in.c * L->kh * L->kw);
    float *r0 = malloc(nrows * sizeof(float)), *r1 = malloc(nrows * sizeof(float));
    if (!r0 || !r1) return fail("host memory");
    if (run_once(k) || ff_gpu_copy_d2h(r0, k->out, nrows * sizeof(float), k->s) || ff_gpu_stream_sync(k->s))
        return fail("weight gradient");
    double us = 0;
    if (time_launches(k, iters, e0, e1, "weight gradient", &us)) return 1;
    if (ff_gpu_copy_d2h(r1, k->out, nrows * sizeof(float), k->s) || ff_gpu_stream_sync(k->s)) return fail("copy back");
    const int same = memcmp(r0, r1, nrows * sizeof(float)) == 0;
    const int as_auto = !ref || memcmp(r1, ref, nrows * sizeof(float)) == 0;
    printf("%s weight gradient, batch %ld (%s, micro-batches of %d): %.3f GFLOP a call\n", L->name, k->batch, label,
           WGRAD_GROUP, flops * 1e-9);
    char hex[32];
    printf("  %9.2f us  %6.2f TFLOP/s  %s%s (digest %s)\n", us, flops / (us * 1e-6) * 1e-12,
           same ? "bits = first run" : "BITS DIFFER between two runs",
           !ref      ? ""
           : as_auto ? ", = automatic"
                     : ", BITS DIFFER from the automatic choice",
           ff_digest_hex(hex, ff_digest_f32(r1, nrows)));
    if (keep) memcpy(keep, r1, nrows * sizeof(float));
    free(r0), free(r1);
    return same && as_auto ? 0 : 1;
}

// --pool-sparse: one kernel variant of a pool-sparse gradient timed (iters launches after one
// untimed, the output poisoned with NaN first); ref: the automatic choice's output to compare with,
// or NULL to keep this one as that reference.
static int time_ps_variant(const launch *k, long iters, ff_gpu_event e0, ff_gpu_event e1, size_t count, float *ref,
                           float *got, const char *label, double flops) {
    if (ff_gpu_fill(k->out, NAN, count, k->s) || run_once(k) ||
        ff_gpu_copy_d2h(got, k->out, count * sizeof(float), k->s) || ff_gpu_stream_sync(k->s))
        return fail(label);
    double us = 0;
    if (time_launches(k, iters, e0, e1, label, &us)) return 1;
    const int same = !ref || memcmp(got, ref, count * sizeof(float)) == 0;
    printf("  %-44s %9.2f us  %6.2f TFLOP/s (the picks' fmas)  %s\n", label, us, flops / (us * 1e-6) * 1e-12,
           !ref   ? "(the reference)"
           : same ? "bits = automatic"
                  : "BITS DIFFER from the automatic choice");
    if (!ref) return 0;
    return same ? 0 : 1;
}

static int pool_sparse_times(const ff_model *m, int li, long batch, long iters, bool stalls) {
    const ff_layer *L = &m->layers[li], *P = &m->layers[li + 2];  // (main checked they apply)
    const size_t nx = (size_t)(batch * ff_shape_numel(L->in)), ny = (size_t)(batch * ff_shape_numel(L->out));
    const size_t ndy = (size_t)(batch * ff_shape_numel(P->out)), nw = (size_t)L->n_weight, K = (size_t)L->out_c;
    const size_t nrows = (size_t)((batch + WGRAD_GROUP - 1) / WGRAD_GROUP) * (nw + K);
    const size_t nh = nx > ny ? nx : ny, nmax = nh > nrows ? nh : nrows;
    float *h = malloc(nmax * sizeof(float)), *ref = malloc(nmax * sizeof(float)), *got = malloc(nmax * sizeof(float));
    float *x = NULL, *y = NULL, *dy = NULL, *w = NULL, *gq = NULL, *dx = NULL, *rows = NULL, *work = NULL;
    ff_gpu_stream s = NULL;
    ff_gpu_event e0 = NULL, e1 = NULL;
    if (!h || !ref || !got) return fail("host memory");
    if (ff_gpu_stream_create(&s) || ff_gpu_event_create(&e0) || ff_gpu_event_create(&e1) ||
        ff_gpu_alloc((void **)&x, nx * sizeof(float), "input") ||
        ff_gpu_alloc((void **)&y, ny * sizeof(float), "relu output") ||
        ff_gpu_alloc((void **)&dy, ndy * sizeof(float), "pool gradient") ||
        ff_gpu_alloc((void **)&w, nw * sizeof(float), "weights") ||
        ff_gpu_alloc((void **)&gq, ny * sizeof(float), "sparse gradient") ||
        ff_gpu_alloc((void **)&dx, nx * sizeof(float), "data gradient") ||
        ff_gpu_alloc((void **)&rows, nrows * sizeof(float), "gradient rows") ||
        ff_gpu_alloc((void **)&work, (size_t)ff_gpu_conv2d_backward_weights_workspace_floats(L, batch) * sizeof(float),
                     "workspace"))
        return fail("device set-up");
    // relu outputs (x, y: half zero), a gradient, weights
    ff_rng_fill(h, nx, 24, 1, 1.0f);
    for (size_t i = 0; i < nx; i++) h[i] = h[i] > 0.0f ? h[i] : 0.0f;
    if (ff_gpu_copy_h2d(x, h, nx * sizeof(float), s)) return fail("copy");
    ff_rng_fill(h, ny, 24, 2, 1.0f);
    for (size_t i = 0; i < ny; i++) h[i] = h[i] > 0.0f ? h[i] : 0.0f;
    if (ff_gpu_copy_h2d(y, h, ny * sizeof(float), s)) return fail("copy");
    ff_rng_fill(h, ndy, 24, 3, 1.0f);
    if (ff_gpu_copy_h2d(dy, h, ndy * sizeof(float), s)) return fail("copy");
    ff_rng_fill(h, nw, 24, 4, 0.1f);
    if (ff_gpu_copy_h2d(w, h, nw * sizeof(float), s)) return fail("copy");

    // the picks' fmas: 9 a window, input and output channel, for each gradient
    const double flops = 2.0 * 9.0 * (double)ndy * (double)L->in.c;
    printf("%s.%s under %s, batch %ld: pool-sparse backward, %.3f GFLOP of picks a gradient\n", m->name, L->name,
           P->name, batch, flops * 1e-9);
    int rc = 0;
    {  // the sparse gradient
        const launch kg = {.L = L, .pool = P, .batch = batch, .out = gq, .in = dy, .w = y, .s = s, .what = RUN_PS_GRAD};
        double us = 0;
        if (run_once(&kg) || ff_gpu_stream_sync(s)) return fail("sparse gradient");
        if (time_launches(&kg, iters, e0, e1, "sparse gradient", &us)) return 1;
        printf("  %-44s %9.2f us\n", "sparse gradient (g and picks)", us);
    }
    launch kd = {.L = L, .pool = P, .batch = batch, .out = dx, .in = gq, .w = w, .b = x, .s = s, .what = RUN_PS_DATA};
    rc |= time_ps_variant(&kd, iters, e0, e1, nx, NULL, ref, "data gradient: automatic", flops);
    ff_gpu_debug_force_pool_sparse_dgrad_switch(true);
    rc |= time_ps_variant(&kd, iters, e0, e1, nx, ref, got, "data gradient: a switch on each pick", flops);
    ff_gpu_debug_force_pool_sparse_dgrad_switch(false);
    launch kw = {
        .L = L, .pool = P, .batch = batch, .out = rows, .in = gq, .w = x, .work = work, .s = s, .what = RUN_PS_WEIGHTS};
    rc |= time_ps_variant(&kw, iters, e0, e1, nrows, NULL, ref, "weight gradient: automatic (with group sums)", flops);
    for (int kpw = 2; kpw <= 4 && rc == 0; kpw += 2) {
        char label[64];
        snprintf(label, sizeof label, "weight gradient: %d output channels a warp", kpw);
        ff_gpu_debug_force_pool_sparse_kpw(kpw);
        rc |= time_ps_variant(&kw, iters, e0, e1, nrows, ref, got, label, flops);
        ff_gpu_debug_force_pool_sparse_kpw(0);
    }
    if (rc == 0 && stalls) {
        printf("\nPC samples of the data gradient:");
        rc = sample_stalls(&kd, iters);
        if (rc == 0) {
            printf("\nPC samples of the data gradient with a switch on each pick:");
            ff_gpu_debug_force_pool_sparse_dgrad_switch(true);
            rc = sample_stalls(&kd, iters);
            ff_gpu_debug_force_pool_sparse_dgrad_switch(false);
        }
        if (rc == 0) {
            printf("\nPC samples of the weight gradient:");
            rc = sample_stalls(&kw, iters);
        }
    }
    free(h), free(ref), free(got);
    ff_gpu_free(x), ff_gpu_free(y), ff_gpu_free(dy), ff_gpu_free(w), ff_gpu_free(gq), ff_gpu_free(dx);
    ff_gpu_free(rows), ff_gpu_free(work);
    ff_gpu_event_destroy(e0), ff_gpu_event_destroy(e1), ff_gpu_stream_destroy(s);
    if (rc == 1) fprintf(stderr, "ff_conv_tiles: a pool-sparse kernel gave other bits or failed\n");
    return rc;
}

int main(int argc, char **argv) {
    const char *model = "mnist-cnn", *layer = "conv2", *precision = "fp32";
    long batch = 64, iters = 50;
    int data_grad = 0, weight_grad = 0, pool_sparse = 0, stalls = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--data-grad")) {
            data_grad = 1;
        } else if (!strcmp(a, "--weight-grad")) {
            weight_grad = 1;
        } else if (!strcmp(a, "--pool-sparse")) {
            pool_sparse = 1;
        } else if (!strcmp(a, "--stalls")) {
            stalls = 1;
        } else if (v && !strcmp(a, "--model")) {
            model = v, i++;
        } else if (v && !strcmp(a, "--layer")) {
            layer = v, i++;
        } else if (v && !strcmp(a, "--precision")) {
            precision = v, i++;
        } else if (v && (!strcmp(a, "--batch") || !strcmp(a, "--iters"))) {
            const bool is_batch = !strcmp(a, "--batch");
            if (!parse_long(v, 1, is_batch ? 4096 : 100000, is_batch ? &batch : &iters)) {
                fprintf(stderr, "ff_conv_tiles: %s '%s': expected a whole number in 1..%d\n", a, v,
                        is_batch ? 4096 : 100000);
                return 2;
            }
            i++;
        } else {
            fprintf(stderr, "ff_conv_tiles: unknown or incomplete argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (data_grad + weight_grad + pool_sparse > 1) {
        fprintf(stderr, "ff_conv_tiles: --data-grad, --weight-grad and --pool-sparse: expected one of them\n");
        return 2;
    }
#ifndef FF_HAVE_CUPTI
    if (stalls) {
        fprintf(stderr, "ff_conv_tiles: --stalls: this build has no CUPTI (the CUDA toolkit's profiling library)\n");
        return 2;
    }
#endif
    const int x3 = !strcmp(precision, "tf32x3");
    if (!x3 && strcmp(precision, "fp32")) {
        fprintf(stderr, "ff_conv_tiles: --precision %s: expected fp32 or tf32x3\n", precision);
        return 2;
    }
    ff_plan_options po;  // FF_CUDA_SHORT_CONV (and the other FF_CUDA_ defaults), as fivefold reads them
    if (ff_plan_options_default(&po) != FF_OK) {
        fprintf(stderr, "ff_conv_tiles: %s\n", ff_last_error());
        return 2;
    }
    ff_gpu_set_short_conv(po.short_conv);  // (the calling thread's: every launch below is on it)
    ff_model m;
    if (ff_model_init(&m, model) != FF_OK) {
        fprintf(stderr, "ff_conv_tiles: --model: %s\n", ff_last_error());
        return 2;
    }
    const int li = ff_model_find_layer(&m, layer);
    if (li < 0 || (m.layers[li].op != FF_OP_CONV2D && m.layers[li].op != FF_OP_LINEAR)) {
        fprintf(stderr, "ff_conv_tiles: %s has no conv or linear layer named '%s'\n", model, layer);
        return 2;
    }
    const ff_layer *L0 = &m.layers[li];
    const bool linear = L0->op == FF_OP_LINEAR;
    if (linear && (weight_grad || pool_sparse)) {
        fprintf(stderr, "ff_conv_tiles: %s: %s.%s is a linear layer (those time a conv's gradients)\n",
                weight_grad ? "--weight-grad" : "--pool-sparse", model, layer);
        return 2;
    }
    if (pool_sparse) {  // (refused before any GPU work, as every bad value)
        const ff_layer *P = li + 2 < m.n_layers ? &m.layers[li + 2] : NULL;
        if (!P || m.layers[li + 1].op != FF_OP_RELU || !ff_gpu_pool_sparse_applies(L0, P)) {
            fprintf(stderr,
                    "ff_conv_tiles: --pool-sparse: %s.%s is not a conv under a relu and a 2x2 max-pool where the "
                    "pool-sparse backward applies (gpu.h ff_gpu_pool_sparse_applies; mnist-cnn's conv2 is)\n",
                    model, layer);
            return 2;
        }
        int ngpu = 0;
        if (ff_gpu_device_count(&ngpu) != FF_OK || ngpu < 1) return fail("no GPU");
        if (ff_gpu_select(0) != FF_OK) return fail("ff_gpu_select");
        return pool_sparse_times(&m, li, batch, iters, stalls);
    }
    if (data_grad && !linear && !ff_gpu_conv2d_backward_data_flips(L0)) {
        fprintf(stderr, "ff_conv_tiles: %s.%s: its data gradient does not run through the forward conv\n", model,
                layer);
        return 2;
    }
    // (a linear layer's data gradient: the linear layer of dy with the weights transposed)
    const ff_layer L = !data_grad ? *L0
                       : linear   ? ff_gpu_linear_backward_data_layer(L0)
                                  : ff_gpu_conv2d_backward_data_layer(L0);
    int ngpu = 0;
    if (ff_gpu_device_count(&ngpu) != FF_OK || ngpu < 1) return fail("no GPU");
    if (ff_gpu_select(0) != FF_OK) return fail("ff_gpu_select");

    const size_t nin = (size_t)(batch * L.in.c * L.in.h * L.in.w), nout = (size_t)(batch * L.out.c * L.out.h * L.out.w);
    const size_t nw = (size_t)(L.out.c * (linear ? ff_shape_numel(L.in) : L.in.c * L.kh * L.kw)), nb = (size_t)L.out.c;
    const size_t nwork = linear ? (size_t)ff_gpu_linear_workspace_floats(&L, batch) : 0;
    float *h = malloc((nin > nw ? nin : nw) * sizeof(float)), *y0 = malloc(nout * sizeof(float)),
          *y = malloc(nout * sizeof(float));
    float *din = NULL, *dout = NULL, *dw = NULL, *db = NULL, *dwork = NULL;
    ff_gpu_stream s = NULL;
    ff_gpu_event e0 = NULL, e1 = NULL;
    if (!h || !y0 || !y) return fail("host memory");
    if (ff_gpu_stream_create(&s) || ff_gpu_event_create(&e0) || ff_gpu_event_create(&e1) ||
        ff_gpu_alloc((void **)&din, nin * sizeof(float), "input") ||
        ff_gpu_alloc((void **)&dout, nout * sizeof(float), "output") ||
        ff_gpu_alloc((void **)&dw, nw * sizeof(float), "weights") ||
        ff_gpu_alloc((void **)&db, nb * sizeof(float), "bias") ||
        (nwork && ff_gpu_alloc((void **)&dwork, nwork * sizeof(float), "split-K sums")))
        return fail("device set-up");
    ff_rng_fill(h, nin, 24, 1, 1.0f);
    if (ff_gpu_copy_h2d(din, h, nin * sizeof(float), s)) return fail("copy");
    ff_rng_fill(h, nw, 24, 2, 0.1f);
    if (ff_gpu_copy_h2d(dw, h, nw * sizeof(float), s)) return fail("copy");
    ff_rng_fill(h, nb, 24, 3, 0.1f);
    if (ff_gpu_copy_h2d(db, h, nb * sizeof(float), s)) return fail("copy");

    if (weight_grad) {  // dy (the output's shape) into dout, x stays in din; gradient rows and the workspace
        const size_t nrows = (size_t)(((batch + WGRAD_GROUP - 1) / WGRAD_GROUP) * (long)(nw + nb));
        float *rows_d = NULL, *work = NULL, *hy = malloc(nout * sizeof(float));
        if (!hy || ff_gpu_alloc((void **)&rows_d, nrows * sizeof(float), "gradient rows") ||
            ff_gpu_alloc((void **)&work,
                         (size_t)ff_gpu_conv2d_backward_weights_workspace_floats(&L, batch) * sizeof(float),
                         "weight-gradient workspace"))
            return fail("device set-up");
        ff_rng_fill(hy, nout, 24, 4, 1.0f);
        if (ff_gpu_copy_h2d(dout, hy, nout * sizeof(float), s)) return fail("copy");
        const launch k = {.L = &L,
                          .batch = batch,
                          .out = rows_d,
                          .in = dout,
                          .w = din,
                          .work = work,
                          .s = s,
                          .what = RUN_WEIGHT_GRAD};
        ff_gpu_set_conv_math(x3);
        float *autorows = malloc(nrows * sizeof(float));
        if (!autorows) return fail("host memory");
        const char *kind =
            ff_gpu_conv2d_backward_weights_per_image(&L, batch) ? "block-per-image kernel" : "tiled kernel";
        int rc = time_weight_grad(&k, iters, e0, e1, nrows, autorows, NULL, x3 ? "tf32x3, automatic" : kind);
        for (int cfg = 0; x3 && cfg < ff_gpu_debug_wgrad_x3_count(); cfg++) {
            char label[64];
            snprintf(label, sizeof label, "tf32x3, configuration %d", cfg);
            ff_gpu_debug_force_wgrad_x3(cfg);
            rc |= time_weight_grad(&k, iters, e0, e1, nrows, NULL, autorows, label);
            ff_gpu_debug_force_wgrad_x3(-1);
        }
        free(autorows);
        if (rc == 0 && stalls) rc = sample_stalls(&k, iters);
        ff_gpu_free(rows_d), ff_gpu_free(work), free(hy), free(h), free(y0), free(y);
        ff_gpu_free(din), ff_gpu_free(dout), ff_gpu_free(dw), ff_gpu_free(db);
        ff_gpu_event_destroy(e0), ff_gpu_event_destroy(e1), ff_gpu_stream_destroy(s);
        return rc;
    }
    const double flops = 2.0 * (double)nout * (double)(linear ? ff_shape_numel(L.in) : L.in.c * L.kh * L.kw);
    const launch k = {.L = &L,
                      .batch = batch,
                      .out = dout,
                      .in = din,
                      .w = dw,
                      .b = db,
                      .work = dwork,
                      .s = s,
                      .what = linear ? RUN_LINEAR : RUN_CONV};
    ff_gpu_set_conv_math(x3);
    // the automatic choice (tuned on this shape) is the reference for the bits
    ff_gpu_set_tuning(true);
    if (run_once(&k)) return fail("tuning");
    ff_gpu_set_tuning(false);
    const int tuned = ff_gpu_debug_last_tile();
    if (ff_gpu_copy_d2h(y0, dout, nout * sizeof(float), s) || ff_gpu_stream_sync(s)) return fail("copy back");
    const bool short_conv = tuned == FF_GPU_TILE_SHORT_CONV;  // gpu.h: fp32 chains under every precision
    if (short_conv)
        printf(
            "%s.%s%s, batch %ld, fp32 chains (a short conv: every precision): %.3f GFLOP a call; the automatic "
            "choice is the short-conv kernel, the configurations below its tiles\n",
            model, layer, data_grad ? " data gradient" : "", batch, flops * 1e-9);
    else
        printf("%s.%s%s, batch %ld, %s: %.3f GFLOP a call; the tuner picks configuration %d\n", model, layer,
               data_grad ? " data gradient" : "", batch,
               linear ? "fp32 chains (linear layers: every precision)" : precision, flops * 1e-9, tuned);
    double auto_us = 0;  // the automatic choice itself, timed as the configurations are
    if (time_launches(&k, iters, e0, e1, "launch", &auto_us)) return 1;
    printf("  automatic: %9.2f us  %6.2f TFLOP/s\n", auto_us, flops / (auto_us * 1e-6) * 1e-12);
    const int ncfg = x3 && !linear ? ff_gpu_debug_x3_tile_count() : ff_gpu_debug_tile_count();
    double best = 1e30;
    int best_cfg = -1, differ = 0;
    double *us = calloc((size_t)ncfg, sizeof(double));
    for (int c = 0; c < ncfg; c++) {
        ff_gpu_debug_force_tile(c);
        if (ff_gpu_fill(dout, NAN, nout, s) || run_once(&k)) {
            printf("  config %2d: does not run here (%s)\n", c, ff_last_error());
            ff_clear_error();
            us[c] = -1;
            continue;
        }
        const int ran = ff_gpu_debug_last_tile();
        if (ff_gpu_copy_d2h(y, dout, nout * sizeof(float), s) || ff_gpu_stream_sync(s)) return fail("copy back");
        const int same = memcmp(y, y0, nout * sizeof(float)) == 0;
        differ += !same;
        if (time_launches(&k, iters, e0, e1, "launch", &us[c])) return 1;
        if (ran == c && us[c] < best) best = us[c], best_cfg = c;
        printf("  config %2d%s: %9.2f us  %6.2f TFLOP/s  %s\n", c, ran == c ? "" : " (ran the fallback)", us[c],
               flops / (us[c] * 1e-6) * 1e-12, same ? "bits = automatic" : "BITS DIFFER from the automatic choice");
    }
    ff_gpu_debug_force_tile(-1);
    if (best_cfg >= 0)
        printf("fastest: configuration %d, %.2f us (%.2f TFLOP/s); the tuner's %d: %.2f us\n", best_cfg, best,
               flops / (best * 1e-6) * 1e-12, tuned, tuned >= 0 && tuned < ncfg ? us[tuned] : NAN);
    int rc = differ ? 1 : 0;
    if (stalls) {
        printf("\nPC samples of the tuner's configuration %d:", tuned);
        const int src = sample_stalls(&k, iters);
        if (src) rc = src;
    }
    free(us), free(h), free(y0), free(y);
    ff_gpu_free(din), ff_gpu_free(dout), ff_gpu_free(dw), ff_gpu_free(db), ff_gpu_free(dwork);
    ff_gpu_event_destroy(e0), ff_gpu_event_destroy(e1), ff_gpu_stream_destroy(s);
    if (differ) fprintf(stderr, "ff_conv_tiles: %d configuration(s) gave other bits\n", differ);
    return rc;
}
