// Layer tables: shapes, parameter counts and FLOPs derived from the specs match the published
// AlexNet and mnist-cnn tables, and the row-geometry / halo formula matches brute force.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <string.h>

#include "fivefold/model.h"

static void alexnet_shapes(void **state) {
    (void)state;
    ff_model m;
    assert_int_equal(ff_model_init(&m, "alexnet"), FF_OK);
    const struct {
        const char *name;
        int64_t c, h, w;
    } want[] = {
        {"conv1", 96, 55, 55}, {"pool1", 96, 27, 27},   {"conv2", 256, 27, 27}, {"pool2", 256, 13, 13},
        {"lrn2", 256, 13, 13}, {"conv3", 384, 13, 13},  {"conv4", 384, 13, 13}, {"conv5", 256, 13, 13},
        {"pool5", 256, 6, 6},  {"flatten", 9216, 1, 1}, {"fc6", 4096, 1, 1},    {"fc7", 4096, 1, 1},
        {"fc8", 1000, 1, 1},   {"softmax", 1000, 1, 1},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        int l = ff_model_find_layer(&m, want[i].name);
        assert_true(l >= 0);
        assert_int_equal(m.layers[l].out.c, want[i].c);
        assert_int_equal(m.layers[l].out.h, want[i].h);
        assert_int_equal(m.layers[l].out.w, want[i].w);
    }
    // AlexNet: 62.4 M parameters, about 2.27 GFLOP per image (FC included).
    assert_int_equal(m.n_weights_total, 62378344);
    assert_true(m.flops_total > 2260000000LL && m.flops_total < 2280000000LL);
    assert_int_equal(m.layers[0].flops, 2LL * 96 * 3 * 11 * 11 * 55 * 55);
    assert_int_equal(m.classes, 1000);
    assert_int_equal(m.n_params, 8);
}

static void mnist_shapes(void **state) {
    (void)state;
    ff_model m;
    assert_int_equal(ff_model_init(&m, "mnist-cnn"), FF_OK);
    assert_int_equal(m.layers[ff_model_find_layer(&m, "conv2")].out.h, 24);
    assert_int_equal(m.layers[ff_model_find_layer(&m, "flatten")].out.c, 9216);
    assert_int_equal(m.classes, 10);
    // 320 + 18496 + 1179776 + 1290 parameters: PyTorch's example without dropout.
    assert_int_equal(m.n_weights_total, 1199882);
    // About 24 MFLOP per image forward.
    assert_true(m.flops_total > 23000000 && m.flops_total < 25000000);
}

static void unknown_model_is_input_error(void **state) {
    (void)state;
    ff_model m;
    assert_int_equal(ff_model_init(&m, "resnet"), FF_ERR_INPUT);
    assert_non_null(strstr(ff_last_error(), "resnet"));
    assert_non_null(strstr(ff_last_error(), "alexnet"));
}

// Brute force: the input rows output rows [o0, o1) touch, by enumerating every tap.
// ulo/uhi: the same without clipping to the input (padding rows count), for the halo formula.
static void brute_rows(int64_t *lo, int64_t *hi, int64_t *ulo, int64_t *uhi, const ff_layer *L, int64_t o0,
                       int64_t o1) {
    *lo = *ulo = INT64_MAX;
    *hi = *uhi = INT64_MIN;
    for (int64_t o = o0; o < o1; o++)
        for (int r = 0; r < L->kh; r++) {
            int64_t i = o * L->stride - L->pad + r;
            if (i < *ulo) *ulo = i;
            if (i + 1 > *uhi) *uhi = i + 1;
            if (i < 0 || i >= L->in.h) continue;
            if (i < *lo) *lo = i;
            if (i + 1 > *hi) *hi = i + 1;
        }
}

static void input_rows_match_brute_force(void **state) {
    (void)state;
    for (int k = 1; k <= 11; k++)
        for (int s = 1; s <= 4; s++)
            for (int p = 0; p < k && p <= 5; p++)
                for (int64_t H = k; H <= 40; H += 3) {
                    ff_layer L = {.name = "t", .op = FF_OP_CONV2D, .kh = k, .kw = k, .stride = s, .pad = p};
                    L.in = (ff_shape){1, H, H};
                    if (H + 2 * p < k) continue;
                    L.out = (ff_shape){1, (H + 2 * p - k) / s + 1, 1};
                    for (int64_t o0 = 0; o0 < L.out.h; o0++)
                        for (int64_t o1 = o0 + 1; o1 <= L.out.h; o1++) {
                            int64_t lo, hi, ulo, uhi;
                            brute_rows(&lo, &hi, &ulo, &uhi, &L, o0, o1);
                            ff_range r = ff_layer_input_rows(&L, o0, o1);
                            if (lo == INT64_MAX) {  // all taps in padding
                                assert_true(r.hi - r.lo >= 0);
                                continue;
                            }
                            assert_int_equal(r.lo, lo);
                            assert_int_equal(r.hi, hi);
                            // The halo formula `info` prints: p rows above, k - s - p below the
                            // stride-aligned own band [o0*s, o1*s), before clipping to the input.
                            assert_int_equal(o0 * s - ulo, p);
                            assert_int_equal(uhi - o1 * s, k - s - p);
                        }
                }
    // The seed's formula floor((k-1)/2)*s + p is wrong for conv1: it needs k - s = 7 rows below.
    ff_model m;
    assert_int_equal(ff_model_init(&m, "alexnet"), FF_OK);
    const ff_layer *c1 = &m.layers[0];
    ff_range r = ff_layer_input_rows(c1, 0, 10);  // own band [0, 40)
    assert_int_equal(r.hi - 40, 7);
    ff_range r2 = ff_layer_input_rows(&m.layers[ff_model_find_layer(&m, "conv2")], 5, 10);  // own [5, 10)
    assert_int_equal(r2.lo, 3);
    assert_int_equal(r2.hi, 12);
    assert_int_equal(ff_layer_input_rows(c1, 3, 3).hi, 0);  // empty band, empty input
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(alexnet_shapes),
        cmocka_unit_test(mnist_shapes),
        cmocka_unit_test(unknown_model_is_input_error),
        cmocka_unit_test(input_rows_match_brute_force),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
