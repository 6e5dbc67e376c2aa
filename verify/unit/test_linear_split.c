// The GPU linear layers' fixed split of the reduction (linear_split.h), checked without a GPU: the
// rule S = ff_linear_split(K) against its definition for every K up to 2^17, its values for the
// models' layers and their workspace sizes; the CPU emulation (the bits the GPU must give, compared
// on the GPU by test_gpu_layers) against the documented order written out plainly, S = 1 equal to
// the single fma chain from the bias (layers that are not split keep their bits); and the negative
// checks: a different split or the bias added last changes the bits of most elements, so a bit
// comparison with the emulation catches a kernel that does either.
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fivefold/linear_split.h"
#include "fivefold/model.h"
#include "fivefold/rng.h"

static ff_layer linear_layer(int64_t K, int64_t J) {
    ff_layer L;
    memset(&L, 0, sizeof L);
    L.name = "lin";
    L.op = FF_OP_LINEAR;
    L.out_c = J;
    L.kh = L.kw = L.stride = 1;
    L.in = (ff_shape){K, 1, 1};
    L.out = (ff_shape){J, 1, 1};
    L.n_weight = J * K;
    L.n_bias = J;
    L.fan_in = K;
    return L;
}

static float *rand_floats(size_t n, uint64_t id) {
    float *x = malloc(n * sizeof(float));
    assert_non_null(x);
    ff_rng_fill(x, n, 99, id, 1.0f);
    return x;
}

static size_t count_diff(const float *a, const float *b, size_t n) {
    size_t d = 0;
    for (size_t i = 0; i < n; i++) d += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    return d;
}

// S qualifies: a power of two <= the cap, K a multiple of 128 S, chunk >= 1024 (S = 1 always does).
static bool qualifies(int64_t K, int64_t s) {
    if (s == 1) return true;
    return s <= FF_LINEAR_MAX_SPLIT && K % (FF_LINEAR_CHUNK_ALIGN * s) == 0 && K / s >= FF_LINEAR_MIN_CHUNK;
}

static void rule_matches_definition(void **state) {
    (void)state;
    const int64_t table[][2] = {{0, 1},    {1, 1},    {128, 1},  {1024, 1}, {1030, 1},  {2048, 2},   {2176, 1},
                                {2304, 2}, {3072, 2}, {4096, 4}, {9216, 8}, {25088, 4}, {65536, 16}, {1 << 20, 16}};
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        printf("  K = %-8lld S = %d\n", (long long)table[i][0], ff_linear_split(table[i][0]));
        assert_int_equal(ff_linear_split(table[i][0]), table[i][1]);
    }
    for (int64_t K = 1; K <= (1 << 17); K++) {
        const int s = ff_linear_split(K);
        assert_true(s >= 1 && (s & (s - 1)) == 0);  // a power of two
        assert_true(qualifies(K, s));
        assert_false(qualifies(K, 2 * (int64_t)s));  // the largest (qualifying is closed downwards)
        if (K < 2048 || K % 256 != 0) assert_int_equal(s, 1);
    }
}

// The models' linear layers: fc6 8 x 1152, fc7/fc8 4 x 1024, mnist fc1 8 x 1152, fc2 not split.
static void model_layers_and_workspace(void **state) {
    (void)state;
    const struct {
        const char *model, *layer;
        int split;
    } want[] = {{"alexnet", "fc6", 8},
                {"alexnet", "fc7", 4},
                {"alexnet", "fc8", 4},
                {"mnist-cnn", "fc1", 8},
                {"mnist-cnn", "fc2", 1}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        ff_model m;
        assert_int_equal(ff_model_init(&m, want[i].model), FF_OK);
        const int li = ff_model_find_layer(&m, want[i].layer);
        assert_true(li >= 0);
        const ff_layer *L = &m.layers[li];
        const int s = ff_linear_split(ff_shape_numel(L->in));
        printf("  %s %s: K = %lld, S = %d x %lld\n", want[i].model, want[i].layer, (long long)ff_shape_numel(L->in), s,
               (long long)(ff_shape_numel(L->in) / s));
        assert_int_equal(s, want[i].split);
        const int64_t n = 128;
        assert_int_equal(ff_gpu_linear_workspace_floats(L, n), s > 1 ? s * n * L->out.c : 0);
    }
}

// The order of linear_split.h written out plainly (double-checking the library's loop structure).
static void plain_order(float *out, const float *x, const float *w, const float *b, int64_t K, int64_t J, int S,
                        int64_t n) {
    const int64_t c = K / S;
    float p[FF_LINEAR_MAX_SPLIT];
    for (int64_t img = 0; img < n; img++)
        for (int64_t j = 0; j < J; j++) {
            for (int s = 0; s < S; s++) {
                p[s] = s == 0 ? b[j] : +0.0f;
                for (int64_t k = 0; k < c; k++) p[s] = fmaf(w[j * K + s * c + k], x[img * K + s * c + k], p[s]);
            }
            float v = p[0];
            for (int s = 1; s < S; s++) v = v + p[s];
            out[img * J + j] = v;
        }
}

static void emulation_follows_the_order(void **state) {
    (void)state;
    const int64_t Ks[] = {300, 4096, 9216}, J = 37, n = 3;
    for (int t = 0; t < 3; t++) {
        const int64_t K = Ks[t];
        const ff_layer L = linear_layer(K, J);
        const int S = ff_linear_split(K);
        float *w = rand_floats((size_t)(J * K), 1 + t), *b = rand_floats((size_t)J, 2 + t);
        float *x = rand_floats((size_t)(n * K), 3 + t);
        x[5] = -0.0f, w[7] = -0.0f;
        float *y = malloc((size_t)(n * J) * sizeof(float)), *r = malloc((size_t)(n * J) * sizeof(float)),
              *z = malloc((size_t)(n * J) * sizeof(float));
        assert_int_equal(ff_linear_split_cpu(y, x, w, b, &L, S, false, n), FF_OK);
        plain_order(r, x, w, b, K, J, S, n);
        printf("  K = %lld, S = %d: emulation vs the order written out: %zu of %lld differ\n", (long long)K, S,
               count_diff(y, r, (size_t)(n * J)), (long long)(n * J));
        assert_int_equal(count_diff(y, r, (size_t)(n * J)), 0);
        // relu: the rule v < 0 ? +0 : v on the same values
        assert_int_equal(ff_linear_split_cpu(z, x, w, b, &L, S, true, n), FF_OK);
        for (int64_t i = 0; i < n * J; i++) r[i] = r[i] < 0.0f ? 0.0f : r[i];
        assert_int_equal(count_diff(z, r, (size_t)(n * J)), 0);
        // S = 1 is the single chain acc = b[j], k ascending (the bits of a layer that is not split)
        assert_int_equal(ff_linear_split_cpu(y, x, w, b, &L, 1, false, n), FF_OK);
        for (int64_t img = 0; img < n; img++)
            for (int64_t j = 0; j < J; j++) {
                float acc = b[j];
                for (int64_t k = 0; k < K; k++) acc = fmaf(w[j * K + k], x[img * K + k], acc);
                r[img * J + j] = acc;
            }
        assert_int_equal(count_diff(y, r, (size_t)(n * J)), 0);
        // one image alone gives its row of the batch
        assert_int_equal(ff_linear_split_cpu(z, x + 2 * K, w, b, &L, S, false, 1), FF_OK);
        assert_int_equal(ff_linear_split_cpu(y, x, w, b, &L, S, false, n), FF_OK);
        assert_int_equal(count_diff(z, y + 2 * J, (size_t)J), 0);
        free(w), free(b), free(x), free(y), free(r), free(z);
    }
}

// A wrong split, or the bias added after the chunk sums, changes most elements' bits: the GPU test
// (bit comparison with the emulation) would catch a kernel that did either.
static void wrong_split_or_order_is_detected(void **state) {
    (void)state;
    const int64_t K = 9216, J = 64, n = 4, count = n * J;
    const ff_layer L = linear_layer(K, J);
    const int S = ff_linear_split(K);
    assert_int_equal(S, 8);
    float *w = rand_floats((size_t)(J * K), 11), *b = rand_floats((size_t)J, 12), *x = rand_floats((size_t)(n * K), 13);
    float *zero = calloc((size_t)J, sizeof(float));
    float *good = malloc((size_t)count * sizeof(float)), *bad = malloc((size_t)count * sizeof(float));
    assert_int_equal(ff_linear_split_cpu(good, x, w, b, &L, S, false, n), FF_OK);
    const int wrong[] = {4, 1, 16};
    for (int v = 0; v < 4; v++) {
        if (v < 3) {
            assert_int_equal(ff_linear_split_cpu(bad, x, w, b, &L, wrong[v], false, n), FF_OK);
        } else {  // bias last: every chain from +0, then (sum of the chunks) + b
            assert_int_equal(ff_linear_split_cpu(bad, x, w, zero, &L, S, false, n), FF_OK);
            for (int64_t i = 0; i < count; i++) bad[i] = bad[i] + b[i % J];
        }
        const size_t d = count_diff(good, bad, (size_t)count);
        printf("  %-16s differs in %zu of %lld elements\n",
               v == 0   ? "split 4"
               : v == 1 ? "split 1"
               : v == 2 ? "split 16"
                        : "bias last",
               d, (long long)count);
        assert_true(d > (size_t)count / 2);
    }
    // a split that does not divide K is refused
    assert_int_equal(ff_linear_split_cpu(bad, x, w, b, &L, 7, false, n), FF_ERR_INPUT);
    assert_int_equal(ff_linear_split_cpu(bad, x, w, b, &L, 0, false, n), FF_ERR_INPUT);
    ff_clear_error();
    free(w), free(b), free(x), free(zero), free(good), free(bad);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rule_matches_definition),
        cmocka_unit_test(model_layers_and_workspace),
        cmocka_unit_test(emulation_follows_the_order),
        cmocka_unit_test(wrong_split_or_order_is_detected),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
