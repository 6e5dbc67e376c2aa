// Every GPU layer of both models against the CPU reference (docs/ARCHITECTURE.md §6.1, §11: the CPU is the spec):
// conv and linear within the derived gamma_K bound, relu/maxpool bit-exact, lrn/softmax within 1
// ULP (pow/exp in double by two libraries); linear also bit for bit against the CPU emulation of
// its split-K order (linear_split.h); and the position independence of docs/ARCHITECTURE.md §5: every tile
// configuration, the GEMV path, a row band and a sub-batch give identical bits.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "fivefold/executor.h"
#include "fivefold/layers_cpu.h"
#include "fivefold/linear_split.h"
#include "fivefold/model.h"
#include "fivefold/tolerance.h"
#include "fivefold/weights.h"
#include "fivefold/winograd.h"
#include "gpu_test_util.h"
#include "ref_conv64.h"

static ff_gpu_stream S;

static size_t numel(ff_shape s, int64_t n) {
    return (size_t)(n * ff_shape_numel(s));
}

// GPU layer i of model m (weights generated) on n random images vs the CPU; returns the violations.
static size_t check_layer(const ff_model *m, const ff_weights *wt, int i, int64_t n) {
    const ff_layer *L = &m->layers[i];
    const size_t nin = numel(L->in, n), nout = numel(L->out, n);
    float *x = tu_rand(nin, 1000 + (uint64_t)i, L->op == FF_OP_SOFTMAX ? 8.0f : 1.0f);
    float *cpu = malloc(nout * sizeof(float));
    ff_rows rows = ff_rows_full(L);
    ff_cpu_layer_forward(cpu, x, wt->w[i], wt->b[i], L, &rows, n);

    float *dx = tu_dev_from(x, nin, S), *dy = tu_dev_from(NULL, nout, S);
    float *dw = NULL, *db = NULL, *dwork = tu_linear_work(L, n, S);
    if (L->n_weight) {
        dw = tu_dev_from(wt->w[i], (size_t)L->n_weight, S);
        db = tu_dev_from(wt->b[i], (size_t)L->n_bias, S);
    }
    assert_int_equal(ff_gpu_layer_forward(dy, dx, dw, db, L, false, &rows, n, dwork, S), FF_OK);
    float *gpu = tu_host_from(dy, nout, S);

    char what[96];
    snprintf(what, sizeof what, "%s.%s(%s, N=%lld)", m->name, L->name, ff_op_name(L->op), (long long)n);
    size_t bad;
    if (L->n_weight) {
        float *ax = tu_abs(x, nin), *aw = tu_abs(wt->w[i], (size_t)L->n_weight),
              *ab = tu_abs(wt->b[i], (size_t)L->n_bias);
        float *asum = malloc(nout * sizeof(float));
        ff_cpu_layer_forward(asum, ax, aw, ab, L, &rows, n);
        bad = tu_check_dot(what, gpu, cpu, asum, nout, L->fan_in);
        free(ax), free(aw), free(ab), free(asum);
        ff_gpu_free(dw), ff_gpu_free(db);
        if (L->op == FF_OP_LINEAR) {  // and the GPU's own order (linear_split.h), bit for bit
            const int split = ff_linear_split(ff_shape_numel(L->in));
            float *emu = malloc(nout * sizeof(float));
            assert_int_equal(ff_linear_split_cpu(emu, x, wt->w[i], wt->b[i], L, split, false, n), FF_OK);
            snprintf(what, sizeof what, "%s.%s(N=%lld) vs emulation, S=%d", m->name, L->name, (long long)n, split);
            bad += tu_check_ulp(what, gpu, emu, nout, 0);
            free(emu);
        }
    } else {
        const uint64_t ulp = (L->op == FF_OP_LRN || L->op == FF_OP_SOFTMAX) ? 1 : 0;
        bad = tu_check_ulp(what, gpu, cpu, nout, ulp);
    }
    ff_gpu_free(dx), ff_gpu_free(dy), ff_gpu_free(dwork);
    free(x), free(cpu), free(gpu);
    return bad;
}

static void run_model_layers(const char *model, const int64_t *batches, int nb) {
    ff_model m;
    ff_weights wt;
    assert_int_equal(ff_model_init(&m, model), FF_OK);
    assert_int_equal(ff_weights_alloc(&wt, &m), FF_OK);
    ff_weights_generate(&wt, &m, 7);
    size_t bad = 0;
    for (int b = 0; b < nb; b++)
        for (int i = 0; i < m.n_layers; i++) {
            // Linear layers run at every batch size (GEMV path for n <= 8, GEMM above); the others once.
            if (b > 0 && m.layers[i].op != FF_OP_LINEAR) continue;
            bad += check_layer(&m, &wt, i, batches[b]);
        }
    ff_weights_free(&wt);
    assert_int_equal(bad, 0);
}

static void mnist_layers_match_cpu(void **state) {
    (void)state;
    const int64_t nb[] = {5, 3, 40};
    run_model_layers("mnist-cnn", nb, 3);
}

static void alexnet_layers_match_cpu(void **state) {
    (void)state;
    const int64_t nb[] = {2, 3, 20};
    run_model_layers("alexnet", nb, 3);
}

// The checks themselves must fail on broken input: a conv computed with its weights shifted by one
// element (a wrong index) breaks the dot bound, and one ULP in one element breaks the exact check.
static void checks_fail_on_broken_input(void **state) {
    (void)state;
    ff_model m;
    ff_weights wt;
    assert_int_equal(ff_model_init(&m, "mnist-cnn"), FF_OK);
    assert_int_equal(ff_weights_alloc(&wt, &m), FF_OK);
    ff_weights_generate(&wt, &m, 7);
    const int i = ff_model_find_layer(&m, "conv2");
    const ff_layer *L = &m.layers[i];
    const int64_t n = 2;
    const size_t nin = numel(L->in, n), nout = numel(L->out, n);
    float *x = tu_rand(nin, 77, 1.0f);
    float *good = malloc(nout * sizeof(float)), *broken = malloc(nout * sizeof(float)),
          *asum = malloc(nout * sizeof(float));
    ff_rows rows = ff_rows_full(L);
    ff_cpu_conv2d(good, x, wt.w[i], wt.b[i], L, &rows, n);
    float *wshift = malloc((size_t)L->n_weight * sizeof(float));
    memcpy(wshift, wt.w[i] + 1, (size_t)(L->n_weight - 1) * sizeof(float));
    wshift[L->n_weight - 1] = wt.w[i][0];
    ff_cpu_conv2d(broken, x, wshift, wt.b[i], L, &rows, n);
    float *ax = tu_abs(x, nin), *aw = tu_abs(wt.w[i], (size_t)L->n_weight), *ab = tu_abs(wt.b[i], (size_t)L->n_bias);
    ff_cpu_conv2d(asum, ax, aw, ab, L, &rows, n);
    printf("  (negative: the next check must FAIL)\n");
    assert_true(tu_check_dot("conv2 with weights shifted by one", broken, good, asum, nout, L->fan_in) > nout / 2);
    assert_int_equal(tu_check_dot("conv2 against itself", good, good, asum, nout, L->fan_in), 0);
    memcpy(broken, good, nout * sizeof(float));
    broken[nout / 3] = nextafterf(broken[nout / 3], INFINITY);
    printf("  (negative: the next check must FAIL)\n");
    assert_int_equal(tu_check_ulp("one element one ulp off", broken, good, nout, 0), 1);
    broken[nout / 3] = NAN;
    assert_int_equal(tu_check_ulp("one element NaN", broken, good, nout, 1), 1);
    free(x), free(good), free(broken), free(asum), free(wshift), free(ax), free(aw), free(ab);
    ff_weights_free(&wt);
}

// Every tile configuration (and the GEMV path for linear) gives the same bits: each thread owns
// whole summation chains, so the tile shape cannot change a value. With the tuner on, the fastest
// configuration is picked per shape; that is safe only because of this.
static void tiles_give_identical_bits(void **state) {
    (void)state;
    ff_model m;
    ff_weights wt;
    assert_int_equal(ff_model_init(&m, "alexnet"), FF_OK);
    assert_int_equal(ff_weights_alloc(&wt, &m), FF_OK);
    ff_weights_generate(&wt, &m, 7);
    const char *names[] = {"conv1", "conv2", "conv3", "fc6", "fc8"};
    size_t bad = 0;
    for (int t = 0; t < 5; t++) {
        const int i = ff_model_find_layer(&m, names[t]);
        const ff_layer *L = &m.layers[i];
        const int64_t n = L->op == FF_OP_LINEAR ? 5 : 2;
        const size_t nin = numel(L->in, n), nout = numel(L->out, n);
        float *x = tu_rand(nin, 500 + (uint64_t)t, 1.0f);
        float *dx = tu_dev_from(x, nin, S), *dy = tu_dev_from(NULL, nout, S);
        float *dw = tu_dev_from(wt.w[i], (size_t)L->n_weight, S), *db = tu_dev_from(wt.b[i], (size_t)L->n_bias, S);
        float *dwork = tu_linear_work(L, n, S);  // the GEMM configurations of a split linear layer use it
        ff_rows rows = ff_rows_full(L);
        float *ref = NULL;
        const int ntiles = ff_gpu_debug_tile_count();
        assert_true(ntiles >= 4);
        for (int tile = 0; tile < ntiles; tile++) {
            ff_gpu_debug_force_tile(tile);
            assert_int_equal(ff_gpu_fill(dy, NAN, nout, S), FF_OK);
            assert_int_equal(ff_gpu_layer_forward(dy, dx, dw, db, L, true, &rows, n, dwork, S), FF_OK);
            float *y = tu_host_from(dy, nout, S);
            if (!ref) {
                ref = y;
                if (L->op == FF_OP_LINEAR) {  // tile 0 (a split GEMM for fc6, fc8) = the emulation
                    float *emu = malloc(nout * sizeof(float));
                    const int split = ff_linear_split(ff_shape_numel(L->in));
                    assert_int_equal(ff_linear_split_cpu(emu, x, wt.w[i], wt.b[i], L, split, true, n), FF_OK);
                    char what[64];
                    snprintf(what, sizeof what, "%s tile 0 vs emulation, S=%d", L->name, split);
                    bad += tu_check_ulp(what, y, emu, nout, 0);
                    free(emu);
                }
                continue;
            }
            char what[64];
            snprintf(what, sizeof what, "%s tile %d vs tile 0", L->name, tile);
            bad += tu_check_ulp(what, y, ref, nout, 0);
            free(y);
        }
        ff_gpu_debug_force_tile(-1);
        free(ref), free(x);
        ff_gpu_free(dx), ff_gpu_free(dy), ff_gpu_free(dw), ff_gpu_free(db), ff_gpu_free(dwork);
    }
    ff_weights_free(&wt);
    assert_int_equal(bad, 0);
}

// A linear layer of in_features K and out_features J (shapes only; weights come from the caller).
static ff_layer linear_layer(const char *name, int64_t K, int64_t J) {
    ff_layer L;
    memset(&L, 0, sizeof L);
    L.name = name, L.op = FF_OP_LINEAR, L.out_c = J, L.kh = L.kw = L.stride = 1;
    L.in = (ff_shape){K, 1, 1}, L.out = (ff_shape){J, 1, 1};
    L.param_index = 0, L.n_weight = J * K, L.n_bias = J, L.fan_in = K, L.flops = 2 * J * K;
    return L;
}

// The split-K order (linear_split.h) on the GPU equals ff_linear_split_cpu bit for bit, for a layer
// that is not split (S = 1: K = 128 as mnist fc2; K = 1030, not a multiple of 4, so that even n <= 8
// runs the GEMM) and split ones (K = 3072: 2 x 1536 with J = 200, a multiple of no tile; fc6's
// K = 9216: 8 x 1152, with J = 1000), at n = 1 and 7 (the GEMV path) and 20 (the GEMM), automatic
// and under forced tile configurations (3 is the GEMV where it applies: at n = 20 the split GEMV,
// a block per chunk and group of 8 images; the linear tiles, k_lin, where rows load in quads: every
// n, partial row and image tiles), with and without relu.
// Every image of every batch equals the emulation, so image i alone equals image i of a batch.
// Then the negative checks: the emulation with a wrong split (S/2, 1) or a wrong order (bias added
// after the chunk sums instead of starting chunk 0's chain) differs from the GPU's bits in most
// elements, so the bit comparison catches a kernel that does either.
static void linear_split_equals_cpu_emulation(void **state) {
    (void)state;
    assert_int_equal(ff_linear_split(128), 1);
    assert_int_equal(ff_linear_split(1030), 1);
    assert_int_equal(ff_linear_split(3072), 2);
    assert_int_equal(ff_linear_split(4096), 4);
    assert_int_equal(ff_linear_split(9216), 8);
    const struct {
        const char *name;
        int64_t K, J;
    } cases[] = {{"lin128", 128, 10}, {"lin1030", 1030, 96}, {"lin3072", 3072, 200}, {"lin9216", 9216, 1000}};
    const int64_t ns[] = {1, 7, 20}, nmax = 20;
    // the linear tiles: the first (16 chains a thread), 2 (4 chains, 256 threads), the last (4 x 2)
    const int lt = ff_gpu_debug_lin_tile_first(), nt = ff_gpu_debug_tile_count();
    assert_true(lt > 3 && nt > lt + 2);
    const int tiles[] = {-1, 0, 2, 10, 3, lt, lt + 2, nt - 1};
    const int ntile = (int)(sizeof tiles / sizeof tiles[0]);
    size_t bad = 0;
    for (int c = 0; c < 4; c++) {
        const int64_t K = cases[c].K, J = cases[c].J;
        const ff_layer L = linear_layer(cases[c].name, K, J);
        const int split = ff_linear_split(K);
        float *w = tu_rand((size_t)(J * K), 40 + (uint64_t)c, 1.0f), *b = tu_rand((size_t)J, 50 + (uint64_t)c, 1.0f);
        float *x = tu_rand((size_t)(nmax * K), 60 + (uint64_t)c, 1.0f);
        float *dw = tu_dev_from(w, (size_t)(J * K), S), *db = tu_dev_from(b, (size_t)J, S);
        float *dx = tu_dev_from(x, (size_t)(nmax * K), S), *dy = tu_dev_from(NULL, (size_t)(nmax * J), S);
        float *dwork = tu_linear_work(&L, nmax, S);
        assert_true((split > 1) == (dwork != NULL));
        float *emu = malloc((size_t)(nmax * J) * sizeof(float)), *emu_r = malloc((size_t)(nmax * J) * sizeof(float));
        for (int ni = 0; ni < 3; ni++) {
            const int64_t n = ns[ni], count = n * J;
            assert_int_equal(ff_linear_split_cpu(emu, x, w, b, &L, split, false, n), FF_OK);
            for (int64_t k = 0; k < count; k++) emu_r[k] = emu[k] < 0.0f ? 0.0f : emu[k];  // relu's rule
            for (int relu = 0; relu < 2; relu++)
                for (int t = 0; t < ntile; t++) {
                    ff_gpu_debug_force_tile(tiles[t]);
                    assert_int_equal(ff_gpu_fill(dy, NAN, (size_t)count, S), FF_OK);
                    assert_int_equal(ff_gpu_linear(dy, dx, dw, db, &L, relu, n, dwork, S), FF_OK);
                    const int ran = ff_gpu_debug_last_tile();
                    // A forced 3 runs the GEMV (beyond its 8 images the split GEMV: blocks per chunk
                    // and image group) where the rows load in quads; K = 1030's do not: a GEMM tile.
                    if (tiles[t] == 3) assert_true((ran == 3) == (K % 4 == 0));
                    // A forced linear tile runs where rows load in quads; K = 1030 the automatic choice.
                    if (tiles[t] >= lt) assert_true((ran == tiles[t]) == (K % 4 == 0));
                    float *y = tu_host_from(dy, (size_t)count, S);
                    char what[96];
                    snprintf(what, sizeof what, "K=%lld S=%d N=%lld relu=%d tile %d (ran %d) = emu", (long long)K,
                             split, (long long)n, relu, tiles[t], ran);
                    bad += tu_check_ulp(what, y, relu ? emu_r : emu, (size_t)count, 0);
                    free(y);
                }
            ff_gpu_debug_force_tile(-1);
        }
        if (split > 1) {  // negative checks at n = 7 (GEMV) and n = 20 (GEMM), automatic choice
            float *zero = calloc((size_t)J, sizeof(float));
            for (int ni = 1; ni < 3; ni++) {
                const int64_t n = ns[ni], count = n * J;
                assert_int_equal(ff_gpu_linear(dy, dx, dw, db, &L, false, n, dwork, S), FF_OK);
                float *y = tu_host_from(dy, (size_t)count, S);
                const int wrong[] = {split / 2, 1};
                for (int v = 0; v < 3; v++) {
                    if (v < 2) {
                        assert_int_equal(ff_linear_split_cpu(emu, x, w, b, &L, wrong[v], false, n), FF_OK);
                    } else {  // bias last: chains all from +0, then (sum of chunks) + b
                        assert_int_equal(ff_linear_split_cpu(emu, x, w, zero, &L, split, false, n), FF_OK);
                        for (int64_t k = 0; k < count; k++) emu[k] = emu[k] + b[k % J];
                    }
                    char what[96];
                    snprintf(what, sizeof what, "K=%lld N=%lld vs %s", (long long)K, (long long)n,
                             v == 0   ? "split S/2"
                             : v == 1 ? "split 1"
                                      : "bias added last");
                    printf("  (negative: the next check must FAIL in most elements)\n");
                    const size_t diff = tu_check_ulp(what, y, emu, (size_t)count, 0);
                    assert_true(diff > (size_t)count / 2);
                }
                free(y);
            }
            free(zero);
        }
        free(w), free(b), free(x), free(emu), free(emu_r);
        ff_gpu_free(dw), ff_gpu_free(db), ff_gpu_free(dx), ff_gpu_free(dy), ff_gpu_free(dwork);
    }
    assert_int_equal(bad, 0);
}

// A split linear layer without its workspace is refused on the GEMM path (clear error, no launch);
// the GEMV path (n <= 8) needs none.
static void linear_split_needs_workspace(void **state) {
    (void)state;
    const ff_layer L = linear_layer("lin4096", 4096, 64);
    const int64_t n = 16;
    float *dw = tu_dev_from(NULL, 4096 * 64, S), *db = tu_dev_from(NULL, 64, S);
    float *dx = tu_dev_from(NULL, (size_t)(n * 4096), S), *dy = tu_dev_from(NULL, (size_t)(n * 64), S);
    assert_int_equal(ff_gpu_linear_workspace_floats(&L, n), 4 * n * 64);
    assert_int_equal(ff_gpu_linear(dy, dx, dw, db, &L, false, n, NULL, S), FF_ERR_INPUT);
    printf("  no workspace: %s\n", ff_last_error());
    assert_non_null(strstr(ff_last_error(), "workspace"));
    ff_clear_error();
    assert_int_equal(ff_gpu_linear(dy, dx, dw, db, &L, false, 4, NULL, S), FF_OK);
    assert_int_equal(ff_gpu_stream_sync(S), FF_OK);
    ff_gpu_free(dw), ff_gpu_free(db), ff_gpu_free(dx), ff_gpu_free(dy);
}

// Winograd (winograd.h) on the GPU equals the CPU emulation bit for bit (same transforms, same
// chains) for AlexNet's conv1 (space-to-depth: k_space_to_depth, then F(m x m, 3x3) on L') and
// conv2..conv5, with and without the fused relu, under several forced GEMM tile configurations; a
// band starting mid-tile (fed ff_winograd_input_rows) equals those rows of the full result (conv1:
// any band that is not the whole layer is refused instead); one image alone equals its row of the
// batch; a band without the tile halo is refused.
static void winograd_equals_cpu_emulation(void **state) {
    (void)state;
    ff_model m;
    ff_weights wt;
    assert_int_equal(ff_model_init(&m, "alexnet"), FF_OK);
    assert_int_equal(ff_weights_alloc(&wt, &m), FF_OK);
    ff_weights_generate(&wt, &m, 9);
    const char *names[] = {"conv2", "conv3", "conv4", "conv5", "conv2", "conv3", "conv4", "conv5", "conv1", "conv1"};
    const int ms[] = {2, 2, 2, 2, 4, 4, 4, 4, 4, 2};
    const int tiles[] = {-1, 0, 2, 10, 16};
    size_t bad = 0;
    for (int t = 0; t < 10; t++) {
        const int i = ff_model_find_layer(&m, names[t]);
        const ff_layer *L = &m.layers[i];
        const int wm = ff_winograd_m(L, ms[t]);
        assert_int_equal(wm, ms[t]);
        const int64_t n = 3;
        const size_t nin = numel(L->in, n), nout = numel(L->out, n), nu = (size_t)ff_winograd_weight_floats(L, wm);
        float *x = tu_rand(nin, 700 + (uint64_t)t, 1.0f);
        float *u = malloc(nu * sizeof(float)), *cpu = malloc(nout * sizeof(float));
        assert_int_equal(ff_winograd_weights(u, wt.w[i], L, wm), FF_OK);
        ff_rows rows = ff_rows_full(L);
        float *dx = tu_dev_from(x, nin, S), *dy = tu_dev_from(NULL, nout, S);
        float *du = tu_dev_from(u, nu, S), *db = tu_dev_from(wt.b[i], (size_t)L->n_bias, S);
        float *dwork = tu_dev_from(NULL, (size_t)ff_winograd_workspace_floats(L, wm, 0, L->out.h, n), S);
        for (int relu = 0; relu < 2; relu++) {
            assert_int_equal(ff_winograd_conv_cpu(cpu, x, u, wt.b[i], L, wm, relu, &rows, n), FF_OK);
            for (int k = 0; k < 5; k++) {
                ff_gpu_debug_force_tile(tiles[k]);
                assert_int_equal(ff_gpu_fill(dy, NAN, nout, S), FF_OK);
                assert_int_equal(ff_gpu_conv2d_winograd(dy, dx, du, db, L, wm, relu, &rows, n, dwork, S), FF_OK);
                float *y = tu_host_from(dy, nout, S);
                char what[96];
                snprintf(what, sizeof what, "%s F(%d) relu=%d tile %d vs CPU emulation", L->name, wm, relu, tiles[k]);
                bad += tu_check_ulp(what, y, cpu, nout, 0);
                free(y);
            }
            ff_gpu_debug_force_tile(-1);
        }
        const size_t per_in = numel(L->in, 1), per_out = numel(L->out, 1);
        if (ff_winograd_equiv(NULL, L) > 1) {
            // Space-to-depth: the whole layer only. A band (its input rows given in full) is refused,
            // and so is the whole output from fewer input rows; image 1 alone equals its batch row.
            const ff_rows refused[] = {
                {0, L->in.h, 3, 9}, {0, L->in.h, 0, L->out.h - 1}, {0, L->in.h - 1, 0, L->out.h}};
            for (int k = 0; k < 3; k++) {
                assert_int_equal(ff_gpu_conv2d_winograd(dy, dx, du, db, L, wm, true, &refused[k], n, dwork, S),
                                 FF_ERR_INPUT);
                assert_non_null(strstr(ff_last_error(), "whole layer"));
                ff_clear_error();
            }
            assert_int_equal(ff_gpu_conv2d_winograd(dy, dx + per_in, du, db, L, wm, true, &rows, 1, dwork, S), FF_OK);
            float *y1 = tu_host_from(dy, per_out, S);
            bad += tu_check_ulp("winograd s2d image 1 alone vs in the batch", y1, cpu + per_out, per_out, 0);
            free(y1), free(x), free(u), free(cpu);
            ff_gpu_free(dx), ff_gpu_free(dy), ff_gpu_free(du), ff_gpu_free(db), ff_gpu_free(dwork);
            continue;
        }
        // cpu now holds the relu'd full result. The band [3, 9) starts mid-tile for m = 2 and m = 4.
        const int64_t o0 = 3, o1 = 9, C = L->in.c, H = L->in.h, W = L->in.w, K = L->out_c, Wo = L->out.w;
        ff_range ir = ff_winograd_input_rows(L, wm, o0, o1);
        const int64_t in_rows = ir.hi - ir.lo, out_rows = o1 - o0;
        float *xb = malloc((size_t)(n * C * in_rows * W) * sizeof(float));
        for (int64_t p = 0; p < n * C; p++)
            memcpy(xb + p * in_rows * W, x + (p * H + ir.lo) * W, (size_t)(in_rows * W) * sizeof(float));
        float *dxb = tu_dev_from(xb, (size_t)(n * C * in_rows * W), S);
        float *dyb = tu_dev_from(NULL, (size_t)(n * K * out_rows * Wo), S);
        ff_rows band = {ir.lo, ir.hi, o0, o1};
        assert_int_equal(ff_gpu_conv2d_winograd(dyb, dxb, du, db, L, wm, true, &band, n, dwork, S), FF_OK);
        float *yb = tu_host_from(dyb, (size_t)(n * K * out_rows * Wo), S);
        for (int64_t p = 0; p < n * K; p++)
            bad += tu_check_ulp("winograd band [3, 9) vs full rows", yb + p * out_rows * Wo,
                                cpu + (p * L->out.h + o0) * Wo, (size_t)(out_rows * Wo), 0);
        ff_range dr = ff_layer_input_rows(L, o0, o1);
        ff_rows short_band = {dr.lo, dr.hi, o0, o1};
        if (dr.lo > ir.lo) {  // the direct halo lacks the first tile's rows: refused
            assert_int_equal(ff_gpu_conv2d_winograd(dyb, dxb, du, db, L, wm, true, &short_band, n, dwork, S),
                             FF_ERR_INPUT);
            ff_clear_error();
        }
        // image 1 alone
        assert_int_equal(ff_gpu_conv2d_winograd(dy, dx + per_in, du, db, L, wm, true, &rows, 1, dwork, S), FF_OK);
        float *y1 = tu_host_from(dy, per_out, S);
        bad += tu_check_ulp("winograd image 1 alone vs in the batch", y1, cpu + per_out, per_out, 0);
        free(y1), free(yb), free(xb), free(x), free(u), free(cpu);
        ff_gpu_free(dx), ff_gpu_free(dy), ff_gpu_free(du), ff_gpu_free(db), ff_gpu_free(dwork);
        ff_gpu_free(dxb), ff_gpu_free(dyb);
    }
    ff_weights_free(&wt);
    assert_int_equal(bad, 0);
}

// A band of output rows computed from its input rows (its halo included) equals those rows of the
// full result, bit for bit: what hybrid/direct `rows` splits rely on. Also a sub-batch.
static void bands_and_subbatches_give_identical_bits(void **state) {
    (void)state;
    ff_model m;
    ff_weights wt;
    assert_int_equal(ff_model_init(&m, "alexnet"), FF_OK);
    assert_int_equal(ff_weights_alloc(&wt, &m), FF_OK);
    ff_weights_generate(&wt, &m, 7);
    const char *names[] = {"conv1", "pool1", "conv2", "conv3", "pool5", "lrn2"};
    size_t bad = 0;
    for (int t = 0; t < 6; t++) {
        const int i = ff_model_find_layer(&m, names[t]);
        const ff_layer *L = &m.layers[i];
        const int64_t n = 3;
        const size_t nin = numel(L->in, n), nout = numel(L->out, n);
        float *x = tu_rand(nin, 900 + (uint64_t)t, 1.0f);
        float *dx = tu_dev_from(x, nin, S), *dy = tu_dev_from(NULL, nout, S);
        float *dw = L->n_weight ? tu_dev_from(wt.w[i], (size_t)L->n_weight, S) : NULL;
        float *db = L->n_weight ? tu_dev_from(wt.b[i], (size_t)L->n_bias, S) : NULL;
        ff_rows full = ff_rows_full(L);
        assert_int_equal(ff_gpu_layer_forward(dy, dx, dw, db, L, false, &full, n, NULL, S), FF_OK);
        float *y = tu_host_from(dy, nout, S);

        // band: output rows [o0, o1) from input rows ff_layer_input_rows
        const int64_t o0 = L->out.h / 3, o1 = L->out.h / 3 + L->out.h / 4 + 1;
        ff_range ir = ff_layer_input_rows(L, o0, o1);
        ff_rows band = {ir.lo, ir.hi, o0, o1};
        const int64_t C = L->in.c, H = L->in.h, W = L->in.w, K = L->out.c, Wo = L->out.w;
        const int64_t brow = ir.hi - ir.lo, orow = o1 - o0;
        float *xb = malloc((size_t)(n * C * brow * W) * sizeof(float));
        for (int64_t p = 0; p < n * C; p++)
            memcpy(xb + p * brow * W, x + (p * H + ir.lo) * W, (size_t)(brow * W) * sizeof(float));
        float *dxb = tu_dev_from(xb, (size_t)(n * C * brow * W), S);
        float *dyb = tu_dev_from(NULL, (size_t)(n * K * orow * Wo), S);
        assert_int_equal(ff_gpu_layer_forward(dyb, dxb, dw, db, L, false, &band, n, NULL, S), FF_OK);
        float *yb = tu_host_from(dyb, (size_t)(n * K * orow * Wo), S);
        float *yref = malloc((size_t)(n * K * orow * Wo) * sizeof(float));
        const int64_t Ho = L->out.h;
        for (int64_t p = 0; p < n * K; p++)
            memcpy(yref + p * orow * Wo, y + (p * Ho + o0) * Wo, (size_t)(orow * Wo) * sizeof(float));
        char what[80];
        snprintf(what, sizeof what, "%s rows [%lld,%lld) vs full", L->name, (long long)o0, (long long)o1);
        bad += tu_check_ulp(what, yb, yref, (size_t)(n * K * orow * Wo), 0);

        // sub-batch: image 1 alone equals image 1 of the batch of 3
        float *y1 = tu_dev_from(NULL, numel(L->out, 1), S);
        assert_int_equal(ff_gpu_layer_forward(y1, dx + numel(L->in, 1), dw, db, L, false, &full, 1, NULL, S), FF_OK);
        float *h1 = tu_host_from(y1, numel(L->out, 1), S);
        snprintf(what, sizeof what, "%s image 1 alone vs in N=3", L->name);
        bad += tu_check_ulp(what, h1, y + numel(L->out, 1), numel(L->out, 1), 0);

        free(x), free(y), free(xb), free(yb), free(yref), free(h1);
        ff_gpu_free(dx), ff_gpu_free(dy), ff_gpu_free(dxb), ff_gpu_free(dyb), ff_gpu_free(y1);
        ff_gpu_free(dw), ff_gpu_free(db);
    }
    ff_weights_free(&wt);
    assert_int_equal(bad, 0);
}

// Fused relu equals relu applied to the unfused output, bit for bit; fault kernel = ff_fault_value.
static void fused_relu_and_fault_rule(void **state) {
    (void)state;
    ff_model m;
    ff_weights wt;
    assert_int_equal(ff_model_init(&m, "mnist-cnn"), FF_OK);
    assert_int_equal(ff_weights_alloc(&wt, &m), FF_OK);
    ff_weights_generate(&wt, &m, 7);
    const int i = ff_model_find_layer(&m, "conv1");
    const ff_layer *L = &m.layers[i];
    const int64_t n = 4;
    const size_t nin = numel(L->in, n), nout = numel(L->out, n);
    float *x = tu_rand(nin, 31, 1.0f);
    float *dx = tu_dev_from(x, nin, S), *da = tu_dev_from(NULL, nout, S), *dr = tu_dev_from(NULL, nout, S),
          *df = tu_dev_from(NULL, nout, S);
    float *dw = tu_dev_from(wt.w[i], (size_t)L->n_weight, S), *db = tu_dev_from(wt.b[i], (size_t)L->n_bias, S);
    ff_rows rows = ff_rows_full(L);
    assert_int_equal(ff_gpu_conv2d(da, dx, dw, db, L, false, &rows, n, S), FF_OK);
    assert_int_equal(ff_gpu_relu(dr, da, (int64_t)nout, S), FF_OK);
    assert_int_equal(ff_gpu_conv2d(df, dx, dw, db, L, true, &rows, n, S), FF_OK);
    float *a = tu_host_from(da, nout, S), *r = tu_host_from(dr, nout, S), *f = tu_host_from(df, nout, S);
    size_t negatives = 0;
    for (size_t k = 0; k < nout; k++) negatives += a[k] < 0;
    assert_true(negatives > nout / 10);  // the relu has work to do
    assert_int_equal(tu_check_ulp("conv1+relu fused vs separate", f, r, nout, 0), 0);
    const float v0 = a[0];
    assert_int_equal(ff_gpu_fault(da, S), FF_OK);
    float *a2 = tu_host_from(da, nout, S);
    assert_true(memcmp(&a2[0], &(float){ff_fault_value(v0)}, sizeof(float)) == 0);
    assert_int_equal(memcmp(a2 + 1, a + 1, (nout - 1) * sizeof(float)), 0);
    free(x), free(a), free(r), free(f), free(a2);
    ff_gpu_free(dx), ff_gpu_free(da), ff_gpu_free(dr), ff_gpu_free(df), ff_gpu_free(dw), ff_gpu_free(db);
    ff_weights_free(&wt);
}

// Input rows ir of every image and channel of x (n, C, H, W), as a rows split hands them to a band:
// (n, C, ir.hi - ir.lo, W), malloc'ed.
static float *band_rows(const float *x, const ff_layer *L, int64_t n, ff_range ir) {
    const int64_t C = L->in.c, H = L->in.h, W = L->in.w, bi = ir.hi - ir.lo;
    float *xb = malloc((size_t)(n * C * bi * W) * sizeof(float));
    for (int64_t im = 0; im < n * C; im++)
        memcpy(xb + im * bi * W, x + (im * H + ir.lo) * W, (size_t)(bi * W) * sizeof(float));
    return xb;
}

// --precision tf32x3 (k_conv_x3): every output within the derived bound (tolerance.h,
// FF_TOL_TF32X3_PRODUCT with K * FF_TOL_TF32X3_TERMS additions) of the float64 conv, on random
// signed data and on the low-bits data above, for mnist's two convs and AlexNet's conv1 (stride 4,
// 11 x 11, Kd = 363: a partial last k-chunk) and conv3 (pad 1, Kd = 2304); the results differ from
// the fp32 chains (so the tensor cores ran; the short-conv kernel is off, as by default: mnist's conv1
// has 9 terms a chain, short_convs_equal_chains below); every tf32x3 tile configuration gives the same bits,
// an image computed alone equals the same image in a batch, and a band of output rows (the rows
// split's input: the rows it needs) equals those rows of the whole, in every configuration.
static void conv_tf32x3_within_bound(void **state) {
    (void)state;
    ff_gpu_set_short_conv(false);
    struct {
        const char *model, *layer;
        int64_t n;
    } cases[] = {
        {"mnist-cnn", "conv1", 5}, {"mnist-cnn", "conv2", 3}, {"alexnet", "conv1", 1}, {"alexnet", "conv3", 1}};
    size_t bad = 0;
    for (int ci = 0; ci < 4; ci++) {
        ff_model m;
        ff_weights wt;
        assert_int_equal(ff_model_init(&m, cases[ci].model), FF_OK);
        assert_int_equal(ff_weights_alloc(&wt, &m), FF_OK);
        ff_weights_generate(&wt, &m, 11);
        const int i = ff_model_find_layer(&m, cases[ci].layer);
        const ff_layer *L = &m.layers[i];
        const int64_t n = cases[ci].n, K = L->fan_in + 1;
        const size_t nin = numel(L->in, n), nout = numel(L->out, n);
        const ff_rows rows = ff_rows_full(L);
        double *ref = malloc(nout * sizeof(double)), *A = malloc(nout * sizeof(double));
        for (int data = 0; data < 2; data++) {
            float *x = data ? tu_low_bits(nin, 1) : tu_rand(nin, 700 + (uint64_t)ci, 1.0f);
            float *w = data ? tu_low_bits((size_t)L->n_weight, 2) : wt.w[i];
            float *b = data ? tu_low_bits((size_t)L->n_bias, 3) : wt.b[i];
            ff_ref_conv64(ref, A, NULL, x, w, b, L, n);
            float *dx = tu_dev_from(x, nin, S), *dy = tu_dev_from(NULL, nout, S);
            float *dw = tu_dev_from(w, (size_t)L->n_weight, S), *db = tu_dev_from(b, (size_t)L->n_bias, S);
            ff_gpu_set_conv_math(false);
            assert_int_equal(ff_gpu_conv2d(dy, dx, dw, db, L, false, &rows, n, S), FF_OK);
            float *fp32 = tu_host_from(dy, nout, S);
            ff_gpu_set_conv_math(true);
            assert_int_equal(ff_gpu_fill(dy, NAN, nout, S), FF_OK);
            assert_int_equal(ff_gpu_conv2d(dy, dx, dw, db, L, false, &rows, n, S), FF_OK);
            float *y = tu_host_from(dy, nout, S);
            size_t over = 0, differ = 0;
            double worst = 0;
            for (size_t k = 0; k < nout; k++) {
                const double bnd = ff_tol_dot_bound_p(A[k], K * FF_TOL_TF32X3_TERMS, FF_TOL_TF32X3_PRODUCT);
                const double err = fabs((double)y[k] - ref[k]);
                if (!(err <= bnd)) over++;
                if (A[k] > 0 && err / A[k] > worst) worst = err / A[k];
                differ += memcmp(&y[k], &fp32[k], sizeof(float)) != 0;
            }
            printf(
                "  tf32x3 %s.%s %s data, N=%lld: %zu outputs, %zu over the bound, worst |err|/A 2^%.1f, "
                "%zu differ from fp32\n",
                m.name, L->name, data ? "low-bits" : "random", (long long)n, nout, over, log2(worst), differ);
            bad += over;
            if (differ == 0) bad++;  // the fp32 chains ran: the switch did nothing
            // every configuration the same bits; image n-1 alone the same as in the batch
            const int ntiles = ff_gpu_debug_x3_tile_count();
            assert_true(ntiles >= 2);
            const long long fell0 = ff_gpu_debug_presplit_fallbacks();
            for (int tile = 0; tile < ntiles; tile++) {
                ff_gpu_debug_force_tile(tile);
                assert_int_equal(ff_gpu_fill(dy, NAN, nout, S), FF_OK);
                assert_int_equal(ff_gpu_conv2d(dy, dx, dw, db, L, false, &rows, n, S), FF_OK);
                float *yt = tu_host_from(dy, nout, S);
                char what[96];
                snprintf(what, sizeof what, "tf32x3 %s.%s tile %d vs automatic", m.name, L->name, tile);
                bad += tu_check_ulp(what, yt, y, nout, 0);
                free(yt);
            }
            // the pre-split configurations ran their own kernel above (none fell back), and without
            // a scratch for the split operands (as inside a capture) each falls back to
            // k_conv_x3_wg where it applies (3 x 3, stride 1): the same bits
            const long long fell1 = ff_gpu_debug_presplit_fallbacks();
            if (fell1 != fell0)
                printf("  %s.%s: %lld pre-split launches fell back with a scratch\n", m.name, L->name, fell1 - fell0);
            bad += fell1 != fell0;
            const int pre = ff_gpu_debug_x3_presplit_first();
            ff_gpu_debug_split_scratch_off(true);
            for (int tile = pre; pre >= 0 && tile < ntiles; tile++) {
                ff_gpu_debug_force_tile(tile);
                assert_int_equal(ff_gpu_fill(dy, NAN, nout, S), FF_OK);
                assert_int_equal(ff_gpu_conv2d(dy, dx, dw, db, L, false, &rows, n, S), FF_OK);
                float *yt = tu_host_from(dy, nout, S);
                char what[96];
                snprintf(what, sizeof what, "tf32x3 %s.%s tile %d without scratch vs automatic", m.name, L->name, tile);
                bad += tu_check_ulp(what, yt, y, nout, 0);
                free(yt);
            }
            ff_gpu_debug_split_scratch_off(false);
            const long long want = pre >= 0 && L->kh == 3 && L->kw == 3 && L->stride == 1 ? ntiles - pre : 0;
            const long long fell2 = ff_gpu_debug_presplit_fallbacks() - fell1;
            printf("  %s.%s: %lld of the pre-split launches fell back without a scratch (want %lld)\n", m.name, L->name,
                   fell2, want);
            bad += fell2 != want;
            ff_gpu_debug_force_tile(-1);
            const size_t in1 = numel(L->in, 1), out1 = numel(L->out, 1);
            assert_int_equal(ff_gpu_conv2d(dy, dx + (n - 1) * in1, dw, db, L, false, &rows, 1, S), FF_OK);
            float *y1 = tu_host_from(dy, out1, S);
            bad += tu_check_ulp("tf32x3 last image alone vs in the batch", y1, y + (n - 1) * out1, out1, 0);
            // a band of output rows from the input rows it needs (the rows split): the whole's rows
            const ff_range ir = ff_layer_input_rows(L, L->out.h / 4, L->out.h / 2 + 1);
            const ff_rows band = {ir.lo, ir.hi, L->out.h / 4, L->out.h / 2 + 1};
            const int64_t bo = band.out_hi - band.out_lo, Ko = L->out.c, HWo = L->out.h * L->out.w, Wo = L->out.w;
            float *xb = band_rows(x, L, n, ir);
            float *dxb = tu_dev_from(xb, (size_t)(n * L->in.c * (ir.hi - ir.lo) * L->in.w), S);
            for (int tile = -1; tile < ntiles; tile++) {
                ff_gpu_debug_force_tile(tile);
                assert_int_equal(ff_gpu_fill(dy, NAN, nout, S), FF_OK);
                assert_int_equal(ff_gpu_conv2d(dy, dxb, dw, db, L, false, &band, n, S), FF_OK);
                float *yb = tu_host_from(dy, (size_t)(n * Ko * bo * Wo), S);
                for (int64_t ik = 0; ik < n * Ko; ik++) {
                    char what[96];
                    snprintf(what, sizeof what, "tf32x3 %s.%s rows %lld..%lld tile %d, image/channel %lld", m.name,
                             L->name, (long long)band.out_lo, (long long)band.out_hi, tile, (long long)ik);
                    bad += tu_check_ulp(what, yb + ik * bo * Wo, y + ik * HWo + band.out_lo * Wo, (size_t)(bo * Wo), 0);
                }
                free(yb);
            }
            ff_gpu_debug_force_tile(-1);
            ff_gpu_free(dxb), free(xb);
            ff_gpu_set_conv_math(false);
            free(y1), free(y), free(fp32), free(x);
            if (data) free(w), free(b);
            ff_gpu_free(dx), ff_gpu_free(dy), ff_gpu_free(dw), ff_gpu_free(db);
        }
        free(ref), free(A);
        ff_weights_free(&wt);
    }
    assert_int_equal(bad, 0);
}

// gpu.h's conv order on the host: acc = b[k], then (c, r, s) ascending acc = fmaf(w, x, acc), a
// padding tap as x = +0; relu as the GPU's (only values below zero become +0). bias_last: the
// negative control's other order (the chain from +0, the bias added at the end).
static void conv_chains_host(float *y, const float *x, const float *w, const float *b, const ff_layer *L, int64_t n,
                             bool relu, bool bias_last) {
    const int64_t C = L->in.c, H = L->in.h, W = L->in.w, K = L->out.c, Ho = L->out.h, Wo = L->out.w;
    for (int64_t i = 0; i < n; i++)
        for (int64_t k = 0; k < K; k++)
            for (int64_t oh = 0; oh < Ho; oh++)
                for (int64_t ow = 0; ow < Wo; ow++) {
                    float acc = bias_last ? 0.0f : b[k];
                    for (int64_t c = 0; c < C; c++)
                        for (int r = 0; r < L->kh; r++)
                            for (int t = 0; t < L->kw; t++) {
                                const int64_t ih = oh * L->stride - L->pad + r, iw = ow * L->stride - L->pad + t;
                                const bool v = ih >= 0 && ih < H && iw >= 0 && iw < W;
                                acc = fmaf(w[((k * C + c) * L->kh + r) * L->kw + t],
                                           v ? x[((i * C + c) * H + ih) * W + iw] : 0.0f, acc);
                            }
                    if (bias_last) acc += b[k];
                    y[((i * K + k) * Ho + oh) * Wo + ow] = relu && acc < 0.0f ? 0.0f : acc;
                }
}

// Convs of short chains (C*R*S <= FF_GPU_SHORT_CONV_KD: k_conv_short, gpu.h) give the host
// emulation of gpu.h's conv order bit for bit, and so every GEMM tile's bits (a forced tile runs
// the tile), under --precision tf32x3 too; with and without relu; on mnist's conv1 (9 taps), a
// padded stride-2 conv of 27 taps and 13 output channels (a part group), a padded 5 x 5 of 25 and
// a 1 x 1 of 20 channels; a band of output rows from the rows it needs equals those rows of the
// whole, and the last image alone equals it in the batch. The emulation with the bias added last
// must differ (the comparison sees the order).
static ff_layer short_conv_layer(int64_t K, int64_t C, int64_t H, int64_t W, int k, int stride, int pad) {
    ff_layer L = {
        .name = "short-conv-test", .op = FF_OP_CONV2D, .out_c = K, .kh = k, .kw = k, .stride = stride, .pad = pad};
    L.in = (ff_shape){C, H, W};
    L.out = (ff_shape){K, (H + 2 * pad - k) / stride + 1, (W + 2 * pad - k) / stride + 1};
    L.n_weight = K * C * k * k, L.n_bias = K, L.fan_in = C * k * k, L.param_index = 0;
    return L;
}
static void short_convs_equal_chains(void **state) {
    (void)state;
    ff_gpu_set_short_conv(true);  // (off by default: gpu.h)
    ff_model m;
    assert_int_equal(ff_model_init(&m, "mnist-cnn"), FF_OK);
    const ff_layer cases[4] = {m.layers[ff_model_find_layer(&m, "conv1")], short_conv_layer(13, 3, 17, 15, 3, 2, 1),
                               short_conv_layer(6, 1, 12, 12, 5, 1, 2), short_conv_layer(5, 20, 7, 9, 1, 1, 0)};
    const int64_t ns[4] = {5, 3, 2, 4};
    size_t bad = 0;
    for (int ci = 0; ci < 4; ci++) {
        const ff_layer *L = &cases[ci];
        assert_true(L->fan_in <= FF_GPU_SHORT_CONV_KD);
        const int64_t n = ns[ci];
        const size_t nin = numel(L->in, n), nout = numel(L->out, n);
        float *x = tu_rand(nin, 900 + (uint64_t)ci, 1.0f), *w = tu_rand((size_t)L->n_weight, 910 + (uint64_t)ci, 0.5f),
              *b = tu_rand((size_t)L->n_bias, 920 + (uint64_t)ci, 0.5f);
        float *emu = malloc(nout * sizeof(float));
        float *dx = tu_dev_from(x, nin, S), *dy = tu_dev_from(NULL, nout, S);
        float *dw = tu_dev_from(w, (size_t)L->n_weight, S), *db = tu_dev_from(b, (size_t)L->n_bias, S);
        const ff_rows rows = ff_rows_full(L);
        for (int relu = 0; relu < 2; relu++) {
            conv_chains_host(emu, x, w, b, L, n, relu, false);
            char what[112];
            for (int x3 = 0; x3 < 2; x3++) {
                ff_gpu_set_conv_math(x3);
                assert_int_equal(ff_gpu_fill(dy, NAN, nout, S), FF_OK);
                assert_int_equal(ff_gpu_conv2d(dy, dx, dw, db, L, relu, &rows, n, S), FF_OK);
                const int ran = ff_gpu_debug_last_tile();
                float *y = tu_host_from(dy, nout, S);
                snprintf(what, sizeof what, "short conv %lldx%lldx%lld k%d s%d p%d%s%s (ran %d) vs emulation",
                         (long long)L->in.c, (long long)L->in.h, (long long)L->in.w, L->kh, L->stride, L->pad,
                         relu ? " relu" : "", x3 ? " tf32x3" : "", ran);
                bad += tu_check_ulp(what, y, emu, nout, 0);
                bad += ran != FF_GPU_TILE_SHORT_CONV;
                free(y);
            }
            ff_gpu_set_conv_math(false);
            for (int tile = 0; tile < ff_gpu_debug_tile_count(); tile++) {
                ff_gpu_debug_force_tile(tile);
                assert_int_equal(ff_gpu_fill(dy, NAN, nout, S), FF_OK);
                assert_int_equal(ff_gpu_conv2d(dy, dx, dw, db, L, relu, &rows, n, S), FF_OK);
                float *y = tu_host_from(dy, nout, S);
                snprintf(what, sizeof what, "short conv case %d%s GEMM tile %d (ran %d) vs emulation", ci,
                         relu ? " relu" : "", tile, ff_gpu_debug_last_tile());
                bad += tu_check_ulp(what, y, emu, nout, 0);
                free(y);
            }
            ff_gpu_debug_force_tile(-1);
        }
        // a band of output rows (its input rows only) and the last image alone: the whole's bits
        const ff_range ir = ff_layer_input_rows(L, L->out.h / 3, L->out.h / 2 + 1);
        const ff_rows band = {ir.lo, ir.hi, L->out.h / 3, L->out.h / 2 + 1};
        const int64_t bo = band.out_hi - band.out_lo, Ko = L->out.c, HWo = L->out.h * L->out.w, Wo = L->out.w;
        float *xb = band_rows(x, L, n, ir);
        float *dxb = tu_dev_from(xb, (size_t)(n * L->in.c * (ir.hi - ir.lo) * L->in.w), S);
        assert_int_equal(ff_gpu_fill(dy, NAN, nout, S), FF_OK);
        assert_int_equal(ff_gpu_conv2d(dy, dxb, dw, db, L, true, &band, n, S), FF_OK);
        float *yb = tu_host_from(dy, (size_t)(n * Ko * bo * Wo), S);
        for (int64_t ik = 0; ik < n * Ko; ik++) {
            char what[96];
            snprintf(what, sizeof what, "short conv case %d rows %lld..%lld, image/channel %lld", ci,
                     (long long)band.out_lo, (long long)band.out_hi, (long long)ik);
            bad += tu_check_ulp(what, yb + ik * bo * Wo, emu + ik * HWo + band.out_lo * Wo, (size_t)(bo * Wo), 0);
        }
        const size_t in1 = numel(L->in, 1), out1 = numel(L->out, 1);
        assert_int_equal(ff_gpu_conv2d(dy, dx + (n - 1) * in1, dw, db, L, true, &rows, 1, S), FF_OK);
        float *y1 = tu_host_from(dy, out1, S);
        bad += tu_check_ulp("short conv last image alone vs the emulation", y1, emu + (n - 1) * out1, out1, 0);
        // negative: the other order differs
        float *other = malloc(nout * sizeof(float));
        conv_chains_host(other, x, w, b, L, n, true, true);
        printf("  (negative: the next check must FAIL)\n");
        const size_t d = tu_check_ulp("short conv emulation with the bias added last", other, emu, nout, 0);
        printf("  short conv case %d: %zu of %zu outputs differ under the other order\n", ci, d, nout);
        bad += d == 0;
        free(other), free(y1), free(yb), free(xb), ff_gpu_free(dxb);
        free(x), free(w), free(b), free(emu);
        ff_gpu_free(dx), ff_gpu_free(dy), ff_gpu_free(dw), ff_gpu_free(db);
    }
    ff_gpu_set_short_conv(false);
    assert_int_equal(bad, 0);
}

// NaN propagates through maxpool and relu as on the CPU (the exact checks would catch a kernel
// that drops it).
static void nan_propagates_like_cpu(void **state) {
    (void)state;
    ff_model m;
    assert_int_equal(ff_model_init(&m, "alexnet"), FF_OK);
    const int i = ff_model_find_layer(&m, "pool1");
    const ff_layer *L = &m.layers[i];
    const size_t nin = numel(L->in, 1), nout = numel(L->out, 1);
    float *x = tu_rand(nin, 3, 1.0f);
    x[1000] = NAN, x[5] = -0.0f, x[6] = -0.0f;
    float *cpu = malloc(nout * sizeof(float));
    ff_rows rows = ff_rows_full(L);
    ff_cpu_maxpool(cpu, x, L, &rows, 1);
    float *dx = tu_dev_from(x, nin, S), *dy = tu_dev_from(NULL, nout, S);
    assert_int_equal(ff_gpu_maxpool(dy, dx, L, &rows, 1, S), FF_OK);
    float *gpu = tu_host_from(dy, nout, S);
    size_t nans = 0;
    for (size_t k = 0; k < nout; k++) nans += isnan(gpu[k]);
    assert_true(nans >= 1);
    assert_int_equal(tu_check_ulp("pool1 with a NaN", gpu, cpu, nout, 0), 0);
    free(x), free(cpu), free(gpu);
    ff_gpu_free(dx), ff_gpu_free(dy);
}

// mnist's pool1 (2x2, stride 2: two outputs a thread) on NaN, -0 beside +0, -inf and ties, whole
// and as a band of rows [5, 9) from its input rows: the CPU's bits, and those of the one-output
// kernel (ff_gpu_debug_force_maxpool1).
static void maxpool_pairs_like_cpu(void **state) {
    (void)state;
    ff_model m;
    assert_int_equal(ff_model_init(&m, "mnist-cnn"), FF_OK);
    const ff_layer *L = &m.layers[ff_model_find_layer(&m, "pool1")];
    assert_true(L->kh == 2 && L->stride == 2 && L->in.w % 4 == 0);
    const int64_t n = 3, C = L->in.c, H = L->in.h, W = L->in.w, Wo = L->out.w;
    const size_t nin = numel(L->in, n), nout = numel(L->out, n);
    float *x = tu_rand(nin, 31, 1.0f);
    for (size_t k = 0; k < nin; k += 7) x[k] = roundf(x[k] * 2.0f) * 0.5f;  // ties
    for (size_t k = 3; k < nin; k += 101) x[k] = NAN;
    for (size_t k = 8; k + 1 < nin; k += 61) x[k] = -0.0f, x[k + 1] = 0.0f;
    for (size_t k = 50; k < nin; k += 97) x[k] = -INFINITY;
    const ff_rows full = ff_rows_full(L);
    const ff_range ir = ff_layer_input_rows(L, 5, 9);
    const ff_rows band = {ir.lo, ir.hi, 5, 9};
    const int64_t brow = ir.hi - ir.lo;
    float *xb = malloc((size_t)(n * C * brow * W) * sizeof(float));
    for (int64_t p = 0; p < n * C; p++) memcpy(xb + p * brow * W, x + (p * H + ir.lo) * W, (size_t)(brow * W) * 4);
    float *cpu = malloc(nout * sizeof(float)), *cpub = malloc((size_t)(n * C * 4 * Wo) * sizeof(float));
    ff_cpu_maxpool(cpu, x, L, &full, n);
    ff_cpu_maxpool(cpub, xb, L, &band, n);
    float *dx = tu_dev_from(x, nin, S), *dxb = tu_dev_from(xb, (size_t)(n * C * brow * W), S);
    float *dy = tu_dev_from(NULL, nout, S);
    size_t bad = 0;
    for (int one = 0; one < 2; one++) {
        ff_gpu_debug_force_maxpool1(one);
        char what[80];
        assert_int_equal(ff_gpu_maxpool(dy, dx, L, &full, n, S), FF_OK);
        float *gpu = tu_host_from(dy, nout, S);
        snprintf(what, sizeof what, "mnist pool1 (%s a thread) vs CPU", one ? "one output" : "two outputs");
        bad += tu_check_ulp(what, gpu, cpu, nout, 0);
        assert_int_equal(ff_gpu_maxpool(dy, dxb, L, &band, n, S), FF_OK);
        float *gb = tu_host_from(dy, (size_t)(n * C * 4 * Wo), S);
        snprintf(what, sizeof what, "mnist pool1 rows [5, 9) (%s a thread) vs CPU", one ? "one output" : "two outputs");
        bad += tu_check_ulp(what, gb, cpub, (size_t)(n * C * 4 * Wo), 0);
        size_t nans = 0;
        for (size_t k = 0; k < nout; k++) nans += isnan(gpu[k]);
        assert_true(nans >= 1);
        free(gpu), free(gb);
    }
    ff_gpu_debug_force_maxpool1(false);
    assert_int_equal(bad, 0);
    free(x), free(xb), free(cpu), free(cpub);
    ff_gpu_free(dx), ff_gpu_free(dxb), ff_gpu_free(dy);
}

// The softmax max is a tree on the GPU, sequential on the CPU: rows whose maximum is a tie of +0
// and -0, and rows holding a NaN, must still give the CPU's outputs (NaN rows: NaN everywhere).
static void softmax_ties_and_nan_like_cpu(void **state) {
    (void)state;
    const int64_t classes = 1000, n = 3;
    float *x = tu_rand((size_t)(n * classes), 8, 1.0f);
    for (int64_t i = 0; i < classes; i++) x[i] = -fabsf(x[i]) - 1.0f;  // row 0: max is a +-0 tie
    x[10] = -0.0f, x[700] = 0.0f, x[999] = -0.0f;
    x[classes + 500] = NAN;  // row 1: a NaN
    float *cpu = malloc((size_t)(n * classes) * sizeof(float));
    ff_cpu_softmax(cpu, x, classes, n);
    float *dx = tu_dev_from(x, (size_t)(n * classes), S), *dy = tu_dev_from(NULL, (size_t)(n * classes), S);
    assert_int_equal(ff_gpu_softmax(dy, dx, classes, n, S), FF_OK);
    float *gpu = tu_host_from(dy, (size_t)(n * classes), S);
    for (int64_t i = 0; i < classes; i++) assert_true(isnan(gpu[classes + i]));
    assert_int_equal(tu_check_ulp("softmax: +-0 tie, NaN row, plain row", gpu, cpu, (size_t)(n * classes), 0), 0);
    free(x), free(cpu), free(gpu);
    ff_gpu_free(dx), ff_gpu_free(dy);
}

static void out_of_memory_says_bytes(void **state) {
    (void)state;
    void *p = NULL;
    const size_t huge = (size_t)1 << 50;  // 1 PiB
    assert_int_equal(ff_gpu_alloc(&p, huge, "a test buffer"), FF_ERR_OOM);
    assert_null(p);
    printf("  OOM message: %s\n", ff_last_error());
    assert_non_null(strstr(ff_last_error(), "1125899906842624"));
    assert_non_null(strstr(ff_last_error(), "free"));
    assert_non_null(strstr(ff_last_error(), "a test buffer"));
}

// A registered (page-locked) host buffer round-trips through the device unchanged.
static void host_register_round_trip(void **state) {
    (void)state;
    const size_t n = 1 << 20;
    float *h = tu_rand(n, 5, 1.0f), *back = calloc(n, sizeof(float));
    assert_int_equal(ff_gpu_host_register(h, n * sizeof(float)), FF_OK);
    assert_int_equal(ff_gpu_host_register(back, n * sizeof(float)), FF_OK);
    float *d = tu_dev_from(h, n, S);
    assert_int_equal(ff_gpu_copy_d2h(back, d, n * sizeof(float), S), FF_OK);
    assert_int_equal(ff_gpu_stream_sync(S), FF_OK);
    assert_int_equal(memcmp(back, h, n * sizeof(float)), 0);
    ff_gpu_host_unregister(h);
    ff_gpu_host_unregister(back);
    ff_gpu_free(d);
    free(h), free(back);
}

static int group_setup(void **state) {
    (void)state;
    return ff_gpu_stream_create(&S) == FF_OK ? 0 : -1;
}
static int group_teardown(void **state) {
    (void)state;
    ff_gpu_stream_destroy(S);
    return 0;
}

int main(void) {
    int rc = tu_gpu_or_skip();
    if (rc) return rc;
    // FF_TEST_FILTER=PATTERN runs only the matching tests (cmocka's glob), e.g. for a mutant run
    if (getenv("FF_TEST_FILTER")) cmocka_set_test_filter(getenv("FF_TEST_FILTER"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(checks_fail_on_broken_input),
        cmocka_unit_test(mnist_layers_match_cpu),
        cmocka_unit_test(alexnet_layers_match_cpu),
        cmocka_unit_test(tiles_give_identical_bits),
        cmocka_unit_test(linear_split_equals_cpu_emulation),
        cmocka_unit_test(linear_split_needs_workspace),
        cmocka_unit_test(bands_and_subbatches_give_identical_bits),
        cmocka_unit_test(winograd_equals_cpu_emulation),
        cmocka_unit_test(fused_relu_and_fault_rule),
        cmocka_unit_test(conv_tf32x3_within_bound),
        cmocka_unit_test(short_convs_equal_chains),
        cmocka_unit_test(nan_propagates_like_cpu),
        cmocka_unit_test(maxpool_pairs_like_cpu),
        cmocka_unit_test(softmax_ties_and_nan_like_cpu),
        cmocka_unit_test(out_of_memory_says_bytes),
        cmocka_unit_test(host_register_round_trip),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
