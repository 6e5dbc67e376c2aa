// ff_tree_reduce: the fixed reduction tree of train.h, checked bit for bit. Serial and mpi runs
// share the tree, so comparing them cannot see its shape; here rows whose float sum depends on the
// order are reduced and every element must equal the tree computed independently (a recursive
// split at the largest power of two below n, which is the same tree written another way).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>

#include "fivefold/train.h"

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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tree_reduce_matches_the_fixed_tree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
