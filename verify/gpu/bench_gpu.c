// ff_gpu_bench MODEL N [N...]: times the GPU kernels of fivefold's library (the same code the cuda
// mode runs) with CUDA events, per layer and for the whole forward replayed as one CUDA graph, and
// the cuda executor's forward (host in, host out) from pinned and from pageable host memory.
// Prints one row per layer (ms, achieved TFLOP/s) and one JSON line per batch size.
// Exit 77 without a GPU, as the tests.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fivefold/executor.h"
#include "fivefold/gpu.h"
#include "fivefold/model.h"
#include "fivefold/rng.h"
#include "fivefold/trace.h"
#include "fivefold/weights.h"
#include "fivefold/winograd.h"

#include "bench_util.h"

typedef struct {
    const ff_model *m;
    float *dw[FF_MAX_LAYERS], *db[FF_MAX_LAYERS];
    float *x, *buf[2];
    ff_gpu_stream s;
    // Winograd: transformed weights for m = 2 and m = 4 (index m / 4), the workspace, and which
    // variant enqueue uses for the 3x3 layers (0: the direct kernel everywhere).
    float *du[FF_MAX_LAYERS][2], *work;
    int wg;
    float *lin_work;  // the split-K linear layers' partial sums (linear_split.h), sized for nmax
} ctx;

// The variant enqueue runs for layer L: as the executor chooses (ff_winograd_m's eligibility rule),
// F(m x m) with m = c->wg.
static int wg_of(const ctx *c, const ff_layer *L) {
    return c->wg ? ff_winograd_m(L, c->wg) : 0;
}

// Enqueues layers [first, last] with the executor's fusion rule; returns the output buffer.
static const float *enqueue(ctx *c, int64_t n, int first, int last) {
    const float *src = c->x;
    for (int i = first; i <= last; i++) {
        const ff_layer *L = &c->m->layers[i];
        const bool fuse =
            (L->op == FF_OP_CONV2D || L->op == FF_OP_LINEAR) && i < last && c->m->layers[i + 1].op == FF_OP_RELU;
        if (L->op == FF_OP_FLATTEN) continue;
        float *dst = src == c->buf[0] ? c->buf[1] : c->buf[0];
        ff_rows rows = ff_rows_full(L);
        const int wm = wg_of(c, L);
        if (wm)
            CHECK(ff_gpu_conv2d_winograd(dst, src, c->du[i][wm / 4], c->db[i], L, wm, fuse, &rows, n, c->work, c->s));
        else
            CHECK(ff_gpu_layer_forward(dst, src, c->dw[i], c->db[i], L, fuse, &rows, n, c->lin_work, c->s));
        src = dst;
        if (fuse) i++;
    }
    return src;
}

// Median seconds per replay of `reps` launches of g (or of layers [first,last] when g is NULL).
static double time_it(ctx *c, ff_gpu_graph g, int64_t n, int first, int last, int reps) {
    ff_gpu_event a, b;
    CHECK(ff_gpu_event_create(&a));
    CHECK(ff_gpu_event_create(&b));
    double t[7];
    ff_gpu_set_tuning(true);       // the first warm-up picks each shape's fastest tile configuration
    for (int w = 0; w < 2; w++) {  // warm-up
        if (w == 1) ff_gpu_set_tuning(false);
        if (g)
            CHECK(ff_gpu_graph_launch(g, c->s));
        else
            enqueue(c, n, first, last);
    }
    for (int k = 0; k < 7; k++) {
        CHECK(ff_gpu_event_record(a, c->s));
        for (int r = 0; r < reps; r++) {
            if (g)
                CHECK(ff_gpu_graph_launch(g, c->s));
            else
                enqueue(c, n, first, last);
        }
        CHECK(ff_gpu_event_record(b, c->s));
        CHECK(ff_gpu_event_elapsed(&t[k], a, b));
        t[k] /= reps;
    }
    ff_gpu_event_destroy(a);
    ff_gpu_event_destroy(b);
    qsort(t, 7, sizeof t[0], cmp_d);
    return t[3];
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: ff_gpu_bench MODEL N [N...]\n");
        return 2;
    }
    int ndev = 0;
    CHECK(ff_gpu_device_count(&ndev));
    CHECK(ff_gpu_select(0));
    char dev[128];
    int sms = 0, ccM = 0, ccm = 0;
    size_t mem = 0;
    CHECK(ff_gpu_device_info(0, dev, sizeof dev, &sms, &ccM, &ccm, &mem));
    ff_model m;
    CHECK(ff_model_init(&m, argv[1]));
    ff_weights wt;
    CHECK(ff_weights_alloc(&wt, &m));
    ff_weights_generate(&wt, &m, 1);
    int64_t nmax = 1;
    for (int a = 2; a < argc; a++)
        if (atoll(argv[a]) > nmax) nmax = atoll(argv[a]);

    ctx c = {.m = &m};
    CHECK(ff_gpu_stream_create(&c.s));
    for (int i = 0; i < m.n_layers; i++) {
        if (!m.layers[i].n_weight) continue;
        CHECK(ff_gpu_alloc((void **)&c.dw[i], (size_t)m.layers[i].n_weight * 4, "w"));
        CHECK(ff_gpu_alloc((void **)&c.db[i], (size_t)m.layers[i].n_bias * 4, "b"));
        CHECK(ff_gpu_copy_h2d(c.dw[i], wt.w[i], (size_t)m.layers[i].n_weight * 4, c.s));
        CHECK(ff_gpu_copy_h2d(c.db[i], wt.b[i], (size_t)m.layers[i].n_bias * 4, c.s));
    }
    int64_t work = 0;
    for (int i = 0; i < m.n_layers; i++) {
        const ff_layer *L = &m.layers[i];
        for (int m3 = 2; m3 <= 4; m3 += 2) {
            const int wm = ff_winograd_m(L, m3);
            if (!wm || c.du[i][wm / 4]) continue;
            const int64_t nf = ff_winograd_weight_floats(L, wm);
            float *u = malloc((size_t)nf * 4);
            CHECK(ff_winograd_weights(u, wt.w[i], L, wm));
            CHECK(ff_gpu_alloc((void **)&c.du[i][wm / 4], (size_t)nf * 4, "u"));
            CHECK(ff_gpu_copy_h2d(c.du[i][wm / 4], u, (size_t)nf * 4, c.s));
            CHECK(ff_gpu_stream_sync(c.s));
            free(u);
            const int64_t wf = ff_winograd_workspace_floats(L, wm, 0, L->out.h, nmax);
            if (wf > work) work = wf;
        }
    }
    if (work) CHECK(ff_gpu_alloc((void **)&c.work, (size_t)work * 4, "winograd workspace"));
    int64_t lin_work = 0;
    for (int i = 0; i < m.n_layers; i++)
        if (m.layers[i].op == FF_OP_LINEAR && ff_gpu_linear_workspace_floats(&m.layers[i], nmax) > lin_work)
            lin_work = ff_gpu_linear_workspace_floats(&m.layers[i], nmax);
    if (lin_work) CHECK(ff_gpu_alloc((void **)&c.lin_work, (size_t)lin_work * 4, "split-K linear workspace"));
    const size_t act = (size_t)nmax * (size_t)m.max_act;
    float *hx = malloc((size_t)nmax * (size_t)ff_shape_numel(m.input) * 4);
    ff_input_generate(hx, &m, nmax, 2);
    CHECK(ff_gpu_alloc((void **)&c.x, act * 4, "x"));
    CHECK(ff_gpu_alloc((void **)&c.buf[0], act * 4, "buf0"));
    CHECK(ff_gpu_alloc((void **)&c.buf[1], act * 4, "buf1"));
    {  // every layer's timed input is random data, never zeros (they can run faster than real data)
        float *r = malloc(act * 4);
        ff_rng_fill(r, act, 3, 77, 1.0f);
        CHECK(ff_gpu_copy_h2d(c.x, r, act * 4, c.s));
        CHECK(ff_gpu_stream_sync(c.s));
        free(r);
    }

    ff_exec_options o;
    ff_exec_options_default(&o);
    o.mode = FF_MODE_CUDA;
    o.max_batch = nmax;
    ff_executor *e;
    CHECK(ff_exec_create(&e, &m, &wt, &o));
    float *pin_in, *pin_out;
    CHECK(ff_gpu_alloc_host((void **)&pin_in, (size_t)nmax * (size_t)ff_shape_numel(m.input) * 4, "in"));
    CHECK(ff_gpu_alloc_host((void **)&pin_out, (size_t)nmax * (size_t)m.classes * 4, "out"));
    memcpy(pin_in, hx, (size_t)nmax * (size_t)ff_shape_numel(m.input) * 4);
    float *page_out = malloc((size_t)nmax * (size_t)m.classes * 4);

    printf("device: %s, %d SMs, sm_%d%d, %.1f GiB\n", dev, sms, ccM, ccm, mem / 1073741824.0);
    for (int a = 2; a < argc; a++) {
        const int64_t n = atoll(argv[a]);
        printf("\n%s N=%lld        layer       ms     TFLOP/s\n", m.name, (long long)n);
        double sum = 0;
        for (int i = 0; i < m.n_layers; i++) {
            const ff_layer *L = &m.layers[i];
            if (L->op == FF_OP_FLATTEN) continue;
            const bool fuse = (L->op == FF_OP_CONV2D || L->op == FF_OP_LINEAR) && i + 1 < m.n_layers &&
                              m.layers[i + 1].op == FF_OP_RELU;
            const int last = fuse ? i + 1 : i;
            // direct, then each Winograd variant the layer has ("TFLOP/s" of the direct algorithm's
            // FLOP count, as PyTorch's per-layer figures)
            double best = 0;
            for (int v = 0; v < 3; v++) {
                c.wg = v == 0 ? 0 : v == 1 ? 2 : 4;
                const int wm = wg_of(&c, L);
                if (v > 0 && (!wm || (v == 2 && wm != 4))) continue;
                const double t = time_it(&c, NULL, n, i, last, 5);
                if (v == 0 || t < best) best = t;
                const double tf = L->flops ? (double)L->flops * n / t * 1e-12 : 0;
                char tile[16] = "";
                const int ran = ff_gpu_debug_last_tile();
                if (L->n_weight && ran == FF_GPU_TILE_SHORT_CONV)
                    snprintf(tile, sizeof tile, "short");
                else if (L->n_weight)
                    snprintf(tile, sizeof tile, "tile %d", ran);
                char alg[16];
                snprintf(alg, sizeof alg, wm ? "winograd-%d" : "direct", wm);
                printf("  %-8s%-6s %10.4f %9.2f  %-11s %s\n", L->name, fuse ? "+relu" : "", t * 1e3, tf, alg, tile);
                printf(
                    "JSON {\"kind\":\"layer\",\"model\":\"%s\",\"n\":%lld,\"layer\":\"%s\",\"alg\":\"%s\","
                    "\"ms\":%.5f,\"tflops\":%.3f}\n",
                    m.name, (long long)n, L->name, alg, t * 1e3, tf);
            }
            c.wg = 0;
            sum += best;
            if (fuse) i++;
        }
        c.wg = 0;  // the whole graph below: direct kernels everywhere (the executor's figure follows)
        CHECK(ff_gpu_capture_begin(c.s));
        enqueue(&c, n, 0, m.n_layers - 1);
        ff_gpu_graph g;
        CHECK(ff_gpu_capture_end(&g, c.s));
        const double tg = time_it(&c, g, n, 0, 0, 10);
        ff_gpu_graph_destroy(g);
        // the executor: host input (pinned / pageable) -> host output, synchronised
        double te[2];
        for (int pinned = 0; pinned < 2; pinned++) {
            double ts[7];
            for (int k = 0; k < 9; k++) {
                const double t0 = ff_now();
                CHECK(ff_exec_forward(e, pinned ? pin_out : page_out, pinned ? pin_in : hx, n, 0, m.n_layers - 1));
                if (k >= 2) ts[k - 2] = ff_now() - t0;
            }
            qsort(ts, 7, sizeof ts[0], cmp_d);
            te[pinned] = ts[3];
        }
        // the executor's own graph (its default algorithms) on the device-resident batch
        double tr[9];
        CHECK(ff_exec_time_resident(e, n, 9, tr));
        qsort(tr, 9, sizeof tr[0], cmp_d);
        printf("  executor graph, device-resident input: %.4f ms (median of 9)\n", tr[4]);
        const double tflops = (double)m.flops_total * n / tg * 1e-12;
        printf(
            "  sum of the fastest algorithm per layer %.4f ms; direct-only forward as one graph %.4f ms (%.2f "
            "TFLOP/s); executor "
            "forward host->host %.4f ms pinned, %.4f ms pageable\n",
            sum * 1e3, tg * 1e3, tflops, te[1] * 1e3, te[0] * 1e3);
        printf(
            "JSON {\"model\":\"%s\",\"n\":%lld,\"device\":\"%s\",\"graph_ms\":%.5f,\"layers_sum_ms\":%.5f,"
            "\"exec_pinned_ms\":%.5f,\"exec_pageable_ms\":%.5f,\"tflops\":%.3f,\"exec_resident_ms\":%.5f,"
            "\"best_layers_sum_ms\":%.5f}\n",
            m.name, (long long)n, dev, tg * 1e3, sum * 1e3, te[1] * 1e3, te[0] * 1e3, tflops, tr[4], sum * 1e3);
    }
    ff_exec_destroy(e);
    return 0;
}
