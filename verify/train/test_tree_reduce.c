// ff_tree_reduce: the fixed reduction tree of train.h, checked bit for bit. Serial and mpi runs
// share the tree, so comparing them cannot see its shape; here rows whose float sum depends on the
// order are reduced and every element must equal the tree computed independently (a recursive
// split at the largest power of two below n, which is the same tree written another way).
// ff_device_tree_sgd on the cpu device (the exchange's fused last step): the same bits as that tree
// followed by the SGD rule written out here, row 0 keeping the sum, w untouched when the output is
// apart; bad shapes refused naming them.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>

#include "fivefold/device.h"
#include "fivefold/model.h"
#include "fivefold/plan.h"
#include "fivefold/train.h"
#include "fivefold/weights.h"

#define MAXR 9
#define LEN (3 * (1 << 14) + 5)  // several of the trainer's 16384-element chunks, the last short

// The tree over rows [lo, hi) at element i: the first p rows (p the largest power of two below
// hi - lo) reduced as a tree, plus the rest reduced as a tree.
static float ref_tree(float *const *r, int64_t lo, int64_t hi, int64_t i) {
    if (hi - lo == 1) return r[lo][i];
    int64_t p = 1;
    while (2 * p < hi - lo) p *= 2;
    float a = ref_tree(r, lo, lo + p, i);
    float b = ref_tree(r, lo + p, hi, i);
    return a + b;
}

static float sequential(float *const *r, int64_t n, int64_t i) {
    float a = r[0][i];
    for (int64_t j = 1; j < n; j++) a += r[j][i];
    return a;
}

static uint64_t lcg(uint64_t *s) {
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 33;
}

// Element 0: 1, 1, 2^25, -2^25, 1, 1, ... (the tree gives (1 + 1) + (2^25 - 2^25) = 2 for four
// rows; left to right gives ((2 + 2^25) - 2^25) = 0, 2^25 + 2 rounding to 2^25). Other elements:
// values of mixed magnitudes and signs, so any other order changes many of them.
static void fill(float *r[MAXR], int64_t n) {
    const float e0[MAXR] = {1.0f, 1.0f, 33554432.0f, -33554432.0f, 1.0f, 1.0f, 3.0f, -16777216.0f, 0.5f};
    uint64_t s = 12345;
    for (int64_t j = 0; j < n; j++) {
        r[j][0] = e0[j];
        for (int64_t i = 1; i < LEN; i++) {
            float mant = (float)(lcg(&s) & 0xFFFFFF) / 16777216.0f + 0.5f;
            int ex = (int)(lcg(&s) % 40) - 20;
            float v = ldexpf(mant, ex);
            r[j][i] = (lcg(&s) & 1) ? -v : v;
        }
    }
}

static void tree_reduce_matches_the_fixed_tree(void **state) {
    (void)state;
    float *r[MAXR], *copy[MAXR];
    for (int j = 0; j < MAXR; j++) {
        r[j] = malloc(LEN * sizeof(float));
        copy[j] = malloc(LEN * sizeof(float));
        assert_non_null(r[j]);
        assert_non_null(copy[j]);
    }
    for (int64_t n = 1; n <= MAXR; n++) {
        fill(r, n);
        for (int64_t j = 0; j < n; j++) memcpy(copy[j], r[j], LEN * sizeof(float));
        ff_tree_reduce(r, n, LEN);
        int64_t order_sensitive = 0;
        for (int64_t i = 0; i < LEN; i++) {
            float want = ref_tree(copy, 0, n, i);
            if (memcmp(&r[0][i], &want, sizeof want) != 0)
                fail_msg("n = %lld, element %lld: got %a, the fixed tree gives %a", (long long)n, (long long)i,
                         (double)r[0][i], (double)want);
            order_sensitive += sequential(copy, n, i) != want;
        }
        printf("  n = %lld: every element is the tree's (%lld of %d differ from left to right)\n", (long long)n,
               (long long)order_sensitive, LEN);
        // The data must tell the shapes apart, or the check above proves nothing.
        if (n >= 4) assert_true(order_sensitive > 0);
        if (n == 4) {
            float two = 2.0f;
            assert_memory_equal(&r[0][0], &two, sizeof two);  // (1 + 1) + (2^25 - 2^25)
        }
    }
    // Hand-written trees for n = 4 and 5 at element 1 (same data as the loop's last fill).
    fill(copy, 5);
    for (int64_t n = 4; n <= 5; n++) {
        for (int64_t j = 0; j < n; j++) memcpy(r[j], copy[j], LEN * sizeof(float));
        ff_tree_reduce(r, n, LEN);
        float a = copy[0][1] + copy[1][1], b = copy[2][1] + copy[3][1];
        float want = a + b;
        if (n == 5) want = want + copy[4][1];
        assert_memory_equal(&r[0][1], &want, sizeof want);
    }
    for (int j = 0; j < MAXR; j++) {
        free(r[j]);
        free(copy[j]);
    }
}

// train.h's SGD rule, float32 without contraction (the build's -ffp-contract=off)
static float sgd_ref(float w, float g, float *mom, float lr, float mu, float wd, bool first) {
    if (wd != 0.0f) g = g + wd * w;
    const float b = first ? g : mu * *mom + g;
    *mom = b;
    return w - lr * b;
}

static void tree_sgd_is_the_tree_then_the_rule(void **state) {
    (void)state;
    ff_model m;
    ff_weights w;
    ff_plan plan;
    ff_plan_options po;
    ff_device *d = NULL;
    assert_int_equal(ff_model_init(&m, "mlp-small"), FF_OK);
    assert_int_equal(ff_weights_alloc(&w, &m), FF_OK);
    assert_int_equal(ff_plan_options_default(&po), FF_OK);
    assert_int_equal(ff_plan_build(&plan, &m, FF_DEVICE_CPU, &po), FF_OK);
    ff_device_options o = {.max_batch = 1};
    assert_int_equal(ff_device_create(&d, &m, &w, &plan, &o), FF_OK);
    const int64_t stride = LEN + 3;  // rows apart by more than the count
    const size_t bytes = LEN * sizeof(float);
    float *r[MAXR], *sums[MAXR], *rows = malloc((size_t)(MAXR * stride) * sizeof(float));
    float *wt = malloc(bytes), *w_before = malloc(bytes), *out = malloc(bytes), *mom = malloc(bytes);
    float *want_mom = malloc(bytes);
    assert_non_null(rows), assert_non_null(wt), assert_non_null(w_before), assert_non_null(out);
    assert_non_null(mom), assert_non_null(want_mom);
    for (int j = 0; j < MAXR; j++) {
        r[j] = rows + j * stride;
        sums[j] = malloc(bytes);
        assert_non_null(sums[j]);
    }
    float *own_buf = malloc(bytes);
    assert_non_null(own_buf);
    float *rows_before = malloc((size_t)(MAXR * stride) * sizeof(float));
    assert_non_null(rows_before);
    for (int64_t n = 1; n <= MAXR; n++)
        for (int k = 0; k < 12; k++) {
            const int apart = k % 2;
            // own row (tree_rows.h): none, row 0, the last row: read from own_buf, its place NaN;
            // each with the sum kept in row 0 and without (then the rows are left as they were)
            const int64_t own = k % 6 < 2 ? -1 : k % 6 < 4 ? 0 : n - 1;
            const bool keep = k < 6;
            if (own >= 0 && n == 1) continue;  // (an exchange's own row is one of several)
            if (!keep && n > FF_TREE_UNKEPT_ROWS) continue;
            const bool first = n == 2;
            fill(r, n);
            for (int64_t j = 0; j < n; j++) memcpy(sums[j], r[j], bytes);
            ff_tree_reduce(sums, n, LEN);  // the tree alone, on a copy
            if (own >= 0) {
                memcpy(own_buf, r[own], bytes);
                for (int64_t i = 0; i < LEN; i++) r[own][i] = NAN;
            }
            memcpy(rows_before, rows, (size_t)(n * stride) * sizeof(float));
            uint64_t s = 99 + (uint64_t)n;
            for (int64_t i = 0; i < LEN; i++) {
                wt[i] = (float)(lcg(&s) & 0xFFFF) / 65536.0f - 0.5f;
                mom[i] = want_mom[i] = (float)(lcg(&s) & 0xFFFF) / 1048576.0f;
            }
            memcpy(w_before, wt, bytes);
            float *w_out = apart ? out : wt;
            const ff_tree_rows tr = {.at = rows,
                                     .n = n,
                                     .stride = stride,
                                     .own = own,
                                     .own_at = own >= 0 ? own_buf : NULL,
                                     .keep_sum = keep};
            assert_int_equal(ff_device_tree_sgd(d, w_out, wt, mom, &tr, LEN, 0.01f, 0.9f, 1e-3f, first), FF_OK);
            for (int64_t i = 0; i < LEN; i++) {
                const float want = sgd_ref(w_before[i], sums[0][i], &want_mom[i], 0.01f, 0.9f, 1e-3f, first);
                const float row0_want = keep || n == 1 ? sums[0][i] : rows_before[i];
                if (memcmp(&w_out[i], &want, 4) || memcmp(&mom[i], &want_mom[i], 4) || memcmp(&r[0][i], &row0_want, 4))
                    fail_msg(
                        "%lld rows (%s, own row %lld, sum %s), element %lld: weight %a (want %a), momentum %a "
                        "(want %a), row 0 %a (want %a)",
                        (long long)n, apart ? "apart" : "in place", (long long)own, keep ? "kept" : "not kept",
                        (long long)i, (double)w_out[i], (double)want, (double)mom[i], (double)want_mom[i],
                        (double)r[0][i], (double)row0_want);
            }
            if (apart) assert_memory_equal(wt, w_before, bytes);                                      // w only read
            if (!keep) assert_memory_equal(rows, rows_before, (size_t)(n * stride) * sizeof(float));  // untouched
        }
    // one row may have any stride (nothing is read past it); several need stride >= count
    assert_int_equal(ff_device_tree_sgd(
                         d, out, wt, mom,
                         &(ff_tree_rows){.at = rows, .n = 1, .stride = 1, .own = -1, .own_at = NULL, .keep_sum = true},
                         8, 0.01f, 0.9f, 0.0f, false),
                     FF_OK);
    assert_int_equal(ff_device_tree_sgd(
                         d, out, wt, mom,
                         &(ff_tree_rows){.at = rows, .n = 2, .stride = 7, .own = -1, .own_at = NULL, .keep_sum = true},
                         8, 0.01f, 0.9f, 0.0f, false),
                     FF_ERR_INPUT);
    assert_non_null(strstr(ff_last_error(), "2 rows of 8 floats, stride 7"));
    assert_int_equal(ff_device_tree_sgd(
                         d, out, wt, mom,
                         &(ff_tree_rows){.at = rows, .n = 0, .stride = 8, .own = -1, .own_at = NULL, .keep_sum = true},
                         8, 0.01f, 0.9f, 0.0f, false),
                     FF_ERR_INPUT);
    assert_non_null(strstr(ff_last_error(), "0 rows of 8 floats"));
    assert_int_equal(ff_device_tree_sgd(
                         d, out, wt, mom,
                         &(ff_tree_rows){.at = rows, .n = 1, .stride = 8, .own = -1, .own_at = NULL, .keep_sum = true},
                         -1, 0.01f, 0.9f, 0.0f, false),
                     FF_ERR_INPUT);
    assert_non_null(strstr(ff_last_error(), "1 rows of -1 floats"));
    // an own row: in [0, nrows), with a place; none (-1) without one
    assert_int_equal(
        ff_device_tree_sgd(
            d, out, wt, mom,
            &(ff_tree_rows){.at = rows, .n = 2, .stride = 8, .own = 2, .own_at = own_buf, .keep_sum = true}, 8, 0.01f,
            0.9f, 0.0f, false),
        FF_ERR_INPUT);
    assert_non_null(strstr(ff_last_error(), "own row 2 with a place: expected -1 without a place, or a row in [0, 2)"));
    assert_int_equal(
        ff_device_tree_sgd(d, out, wt, mom,
                           &(ff_tree_rows){.at = rows, .n = 2, .stride = 8, .own = 1, .own_at = NULL, .keep_sum = true},
                           8, 0.01f, 0.9f, 0.0f, false),
        FF_ERR_INPUT);
    assert_non_null(strstr(ff_last_error(), "own row 1 without a place"));
    assert_int_equal(
        ff_device_tree_sgd(
            d, out, wt, mom,
            &(ff_tree_rows){.at = rows, .n = 2, .stride = 8, .own = -1, .own_at = own_buf, .keep_sum = true}, 8, 0.01f,
            0.9f, 0.0f, false),
        FF_ERR_INPUT);
    assert_int_equal(ff_device_tree_sgd(
                         d, out, wt, mom,
                         &(ff_tree_rows){.at = rows, .n = 2, .stride = 8, .own = -2, .own_at = NULL, .keep_sum = true},
                         8, 0.01f, 0.9f, 0.0f, false),
                     FF_ERR_INPUT);
    // the sum not kept: at most FF_TREE_UNKEPT_ROWS rows
    assert_int_equal(
        ff_device_tree_sgd(
            d, out, wt, mom,
            &(ff_tree_rows){.at = rows, .n = FF_TREE_UNKEPT_ROWS + 1, .stride = 8, .own = -1, .keep_sum = false}, 8,
            0.01f, 0.9f, 0.0f, false),
        FF_ERR_INPUT);
    assert_non_null(strstr(ff_last_error(), "9 rows without keeping the sum: expected at most 8"));
    // a missing buffer is refused by name (the GPU kernels would read it), on every device
    assert_int_equal(ff_device_sgd(d, out, NULL, wt, 8, 0.01f, 0.0f, 0.0f, false), FF_ERR_INPUT);
    assert_non_null(strstr(ff_last_error(), "SGD of 8 floats: the momentum buffer is NULL: expected one of 8 floats"));
    assert_int_equal(ff_device_sgd(d, out, mom, NULL, 8, 0.01f, 0.9f, 0.0f, false), FF_ERR_INPUT);
    assert_non_null(strstr(ff_last_error(), "the gradient buffer is NULL"));
    assert_int_equal(ff_device_tree_sgd(
                         d, out, wt, NULL,
                         &(ff_tree_rows){.at = rows, .n = 1, .stride = 8, .own = -1, .own_at = NULL, .keep_sum = true},
                         8, 0.01f, 0.9f, 0.0f, false),
                     FF_ERR_INPUT);
    assert_non_null(strstr(ff_last_error(), "tree and SGD of 8 floats: the momentum buffer is NULL"));
    assert_int_equal(ff_device_sgd(d, out, mom, wt, 0, 0.01f, 0.9f, 0.0f, false), FF_OK);  // nothing to update
    // the cpu device keeps its weights where they are (adopting memory is for GPUs, device.h)
    float *params = ff_device_params(d);
    assert_int_equal(ff_device_adopt_params(d, out), FF_ERR_INPUT);
    assert_non_null(strstr(ff_last_error(), "the cpu device keeps its weights in its own memory"));
    assert_ptr_equal(ff_device_params(d), params);
    assert_int_equal(ff_device_adopt_params(d, NULL), FF_ERR_INPUT);
    ff_device_destroy(d);
    ff_weights_free(&w);
    for (int j = 0; j < MAXR; j++) free(sums[j]);
    free(rows), free(wt), free(w_before), free(out), free(mom), free(want_mom), free(own_buf), free(rows_before);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tree_reduce_matches_the_fixed_tree),
        cmocka_unit_test(tree_sgd_is_the_tree_then_the_rule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
