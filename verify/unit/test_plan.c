// The execution plan (plan.h): the options and the environment variables that only set their
// defaults, the per-layer choices for both models on both devices (algorithm, tile size,
// space-to-depth, relu fusion, band kind), the digest class each plan names, the input rows a band
// needs under the plan against brute force over whole Winograd tiles, and what info prints.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fivefold/executor.h"
#include "fivefold/plan.h"

static void clear_env(void) {
    unsetenv("FF_CUDA_CONV");
    unsetenv("FF_WINOGRAD_M");
    unsetenv("FF_CUDA_S2D");
    unsetenv("FF_CUDA_SHORT_CONV");
}

static ff_plan_options defaults(void) {
    clear_env();
    ff_plan_options o;
    assert_int_equal(ff_plan_options_default(&o), FF_OK);
    return o;
}

static ff_plan build(const char *model, ff_device_kind dev, const ff_plan_options *o) {
    ff_model m;
    assert_int_equal(ff_model_init(&m, model), FF_OK);
    ff_plan p;
    ff_status st = ff_plan_build(&p, &m, dev, o);
    if (st != FF_OK) fprintf(stderr, "%s\n", ff_last_error());
    assert_int_equal(st, FF_OK);
    assert_int_equal(p.n_layers, m.n_layers);
    return p;
}

// The defaults are winograd, m = 4, s2d on, short convs off, own, fp32; FF_CUDA_CONV, FF_WINOGRAD_M,
// FF_CUDA_S2D and FF_CUDA_SHORT_CONV change them, and a bad value is refused naming the variable, its value and what
// was expected.
static void options_defaults_and_environment(void **state) {
    (void)state;
    ff_plan_options o = defaults();
    assert_int_equal(o.conv, FF_CONV_WINOGRAD);
    assert_int_equal(o.winograd_m, 4);
    assert_true(o.s2d);
    assert_false(o.short_conv);
    assert_int_equal(o.backend, FF_BACKEND_OWN);
    assert_int_equal(o.precision, FF_PRECISION_FP32);
    setenv("FF_CUDA_CONV", "direct", 1);
    setenv("FF_WINOGRAD_M", "2", 1);
    setenv("FF_CUDA_S2D", "0", 1);
    setenv("FF_CUDA_SHORT_CONV", "1", 1);
    assert_int_equal(ff_plan_options_default(&o), FF_OK);
    assert_int_equal(o.conv, FF_CONV_DIRECT);
    assert_int_equal(o.winograd_m, 2);
    assert_false(o.s2d);
    assert_true(o.short_conv);
    static const char *bad[][2] = {
        {"FF_CUDA_CONV", "fft"}, {"FF_WINOGRAD_M", "3"}, {"FF_CUDA_S2D", "on"}, {"FF_CUDA_SHORT_CONV", "yes"}};
    for (int k = 0; k < 4; k++) {
        clear_env();
        setenv(bad[k][0], bad[k][1], 1);
        assert_int_equal(ff_plan_options_default(&o), FF_ERR_INPUT);
        char want[64];
        snprintf(want, sizeof want, "%s=%s: expected", bad[k][0], bad[k][1]);
        assert_non_null(strstr(ff_last_error(), want));
        ff_clear_error();
    }
    clear_env();
}

// AlexNet on the GPU with the defaults: conv1 (11x11/s4) is Winograd F(4x4, 3x3) through
// space-to-depth and computed whole only; conv2..conv5 are Winograd F(4x4, r x r) in row bands;
// every conv and fc6/fc7 fuse the relu that follows; the FC layers are not spatial.
static void alexnet_gpu_plan(void **state) {
    (void)state;
    ff_model m;
    assert_int_equal(ff_model_init(&m, "alexnet"), FF_OK);
    ff_plan_options o = defaults();
    ff_plan p = build("alexnet", FF_DEVICE_CUDA, &o);
    assert_int_equal(p.device, FF_DEVICE_CUDA);
    assert_string_equal(p.digest_class, "gpu");
    for (int i = 0; i < m.n_layers; i++) {
        const ff_layer *L = &m.layers[i];
        const ff_layer_plan *lp = &p.layer[i];
        if (L->op == FF_OP_CONV2D) {
            assert_int_equal(lp->alg, FF_CONV_WINOGRAD);
            assert_int_equal(lp->wg_m, 4);
            assert_true(lp->fuse_relu);
            if (!strcmp(L->name, "conv1")) {
                assert_true(lp->s2d);
                assert_int_equal(lp->band, FF_BAND_WHOLE);
                assert_string_equal(lp->name, "winograd-4-s2d");
            } else {
                assert_false(lp->s2d);
                assert_int_equal(lp->band, FF_BAND_ROWS);
                assert_string_equal(lp->name, "winograd-4");
            }
        } else {
            assert_int_equal(lp->alg, FF_CONV_DIRECT);
            assert_int_equal(lp->wg_m, 0);
            assert_int_equal(lp->band, ff_layer_is_spatial(L) ? FF_BAND_ROWS : FF_BAND_NONE);
            assert_int_equal(lp->fuse_relu,
                             L->op == FF_OP_LINEAR && i + 1 < m.n_layers && m.layers[i + 1].op == FF_OP_RELU);
        }
    }
    // --winograd-m 2, --s2d off, --conv direct: each its own class, with the layers to match.
    o.winograd_m = 2;
    p = build("alexnet", FF_DEVICE_CUDA, &o);
    assert_string_equal(p.digest_class, "gpu-wg2");
    assert_string_equal(p.layer[ff_model_find_layer(&m, "conv3")].name, "winograd-2");
    assert_string_equal(p.layer[0].name, "winograd-2-s2d");
    o.winograd_m = 4;
    o.s2d = false;
    p = build("alexnet", FF_DEVICE_CUDA, &o);
    assert_string_equal(p.digest_class, "gpu-wg4-nos2d");
    assert_int_equal(p.layer[0].alg, FF_CONV_DIRECT);
    assert_int_equal(p.layer[0].band, FF_BAND_ROWS);  // direct conv1 can be banded
    assert_int_equal(p.layer[ff_model_find_layer(&m, "conv2")].alg, FF_CONV_WINOGRAD);
    o.s2d = true;
    o.conv = FF_CONV_DIRECT;
    p = build("alexnet", FF_DEVICE_CUDA, &o);
    assert_string_equal(p.digest_class, "gpu-direct");
    for (int i = 0; i < m.n_layers; i++) {
        assert_int_equal(p.layer[i].alg, FF_CONV_DIRECT);
        assert_true(p.layer[i].band != FF_BAND_WHOLE);
    }
    // The vendor backend: no digest class (judged by tolerance only); its linear layers say so.
    o = defaults();
    o.backend = FF_BACKEND_VENDOR;
    p = build("alexnet", FF_DEVICE_CUDA, &o);
    assert_string_equal(p.digest_class, "");
    assert_string_equal(p.layer[ff_model_find_layer(&m, "fc6")].name, "vendor");
}

// The CPU device runs every layer direct and unfused whatever the conv options say: one class.
static void cpu_plan_is_direct(void **state) {
    (void)state;
    const char *models[] = {"alexnet", "mnist-cnn"};
    for (int k = 0; k < 2; k++) {
        ff_model m;
        assert_int_equal(ff_model_init(&m, models[k]), FF_OK);
        for (int variant = 0; variant < 3; variant++) {
            ff_plan_options o = defaults();
            if (variant == 1) o.conv = FF_CONV_DIRECT;
            if (variant == 2) o.winograd_m = 2, o.s2d = false;
            ff_plan p = build(models[k], FF_DEVICE_CPU, &o);
            assert_string_equal(p.digest_class, "cpu");
            for (int i = 0; i < m.n_layers; i++) {
                assert_int_equal(p.layer[i].alg, FF_CONV_DIRECT);
                assert_false(p.layer[i].fuse_relu);
                assert_string_equal(p.layer[i].name, "direct");
                assert_int_equal(p.layer[i].band, ff_layer_is_spatial(&m.layers[i]) ? FF_BAND_ROWS : FF_BAND_NONE);
            }
        }
    }
}

// mnist-cnn on the GPU: conv1 has one input channel (too few for Winograd: direct), conv2 32.
static void mnist_gpu_plan(void **state) {
    (void)state;
    ff_plan_options o = defaults();
    ff_plan p = build("mnist-cnn", FF_DEVICE_CUDA, &o);
    assert_string_equal(p.layer[0].name, "direct");
    assert_int_equal(p.layer[0].band, FF_BAND_ROWS);
    assert_string_equal(p.layer[2].name, "winograd-4");
    assert_int_equal(p.layer[2].band, FF_BAND_ROWS);
}

// Options a device cannot honour are refused with the flag named.
static void bad_options_refused(void **state) {
    (void)state;
    ff_model m;
    assert_int_equal(ff_model_init(&m, "alexnet"), FF_OK);
    ff_plan p;
    ff_plan_options o = defaults();
    o.winograd_m = 3;
    assert_int_equal(ff_plan_build(&p, &m, FF_DEVICE_CUDA, &o), FF_ERR_INPUT);
    assert_non_null(strstr(ff_last_error(), "--winograd-m 3"));
    o = defaults();
    o.precision = FF_PRECISION_TF32;
    assert_int_equal(ff_plan_build(&p, &m, FF_DEVICE_CUDA, &o), FF_ERR_INPUT);
    assert_non_null(strstr(ff_last_error(), "tf32"));
    o = defaults();
    o.backend = FF_BACKEND_VENDOR;
    assert_int_equal(ff_plan_build(&p, &m, FF_DEVICE_CPU, &o), FF_ERR_INPUT);
    assert_non_null(strstr(ff_last_error(), "vendor"));
    // tf32x3: own direct convs on a GPU only, each refusal naming what was expected
    o = defaults();
    o.precision = FF_PRECISION_TF32X3, o.conv = FF_CONV_DIRECT;
    assert_int_equal(ff_plan_build(&p, &m, FF_DEVICE_CPU, &o), FF_ERR_INPUT);
    assert_non_null(strstr(ff_last_error(), "tf32x3: the cpu device computes in fp32 only (expected fp32)"));
    o.backend = FF_BACKEND_VENDOR;
    assert_int_equal(ff_plan_build(&p, &m, FF_DEVICE_CUDA, &o), FF_ERR_INPUT);
    assert_non_null(strstr(ff_last_error(), "(expected --backend own)"));
    o.backend = FF_BACKEND_OWN, o.conv = FF_CONV_WINOGRAD;
    assert_int_equal(ff_plan_build(&p, &m, FF_DEVICE_CUDA, &o), FF_ERR_INPUT);
    assert_non_null(strstr(ff_last_error(), "(expected --conv direct)"));
    ff_clear_error();
}

// tf32x3 is its own digest class, never fp32's: a golden's gpu-direct digests must not judge it.
static void tf32x3_has_its_own_class(void **state) {
    (void)state;
    ff_model m;
    assert_int_equal(ff_model_init(&m, "mnist-cnn"), FF_OK);
    ff_plan p;
    ff_plan_options o = defaults();
    o.conv = FF_CONV_DIRECT;
    assert_int_equal(ff_plan_build(&p, &m, FF_DEVICE_CUDA, &o), FF_OK);
    assert_string_equal(p.digest_class, "gpu-direct");
    o.precision = FF_PRECISION_TF32X3;
    assert_int_equal(ff_plan_build(&p, &m, FF_DEVICE_CUDA, &o), FF_OK);
    assert_string_equal(p.digest_class, "gpu-direct-tf32x3");
    // with the short-conv kernel mnist's conv1 runs fp32 chains: other bits, another class
    o.short_conv = true;
    assert_int_equal(ff_plan_build(&p, &m, FF_DEVICE_CUDA, &o), FF_OK);
    assert_string_equal(p.digest_class, "gpu-direct-tf32x3-short");
    o.precision = FF_PRECISION_FP32;  // in fp32 its chains are the tiles': the same class
    assert_int_equal(ff_plan_build(&p, &m, FF_DEVICE_CUDA, &o), FF_OK);
    assert_string_equal(p.digest_class, "gpu-direct");
    ff_model a;  // AlexNet has no short conv: its bits, and so its class, do not change
    assert_int_equal(ff_model_init(&a, "alexnet"), FF_OK);
    o.precision = FF_PRECISION_TF32X3;
    assert_int_equal(ff_plan_build(&p, &a, FF_DEVICE_CUDA, &o), FF_OK);
    assert_string_equal(p.digest_class, "gpu-direct-tf32x3");
    o.short_conv = false;
    assert_int_equal(ff_plan_build(&p, &m, FF_DEVICE_CUDA, &o), FF_OK);
    assert_string_equal(ff_precision_name(p.opt.precision), "tf32x3");
    assert_string_equal(ff_precision_name(FF_PRECISION_FP32), "fp32");
    assert_string_equal(ff_precision_name(FF_PRECISION_TF32), "tf32");
}

// ff_plan_input_rows against brute force: a Winograd band computes whole m-row tiles, tile th =
// row / m reading input rows th*m - pad .. th*m - pad + m + k - 2 (clipped); a direct layer and a
// NULL plan read the window (ff_layer_input_rows); a space-to-depth layer reads its whole input.
static void input_rows_are_whole_tiles(void **state) {
    (void)state;
    ff_model m;
    assert_int_equal(ff_model_init(&m, "alexnet"), FF_OK);
    int wider = 0, checked = 0;
    for (int wm = 2; wm <= 4; wm += 2) {
        ff_plan_options o = defaults();
        o.winograd_m = wm;
        ff_plan p = build("alexnet", FF_DEVICE_CUDA, &o);
        for (int i = 0; i < m.n_layers; i++) {
            const ff_layer *L = &m.layers[i];
            if (!ff_layer_is_spatial(L)) continue;
            const ff_layer_plan *lp = &p.layer[i];
            for (int64_t o0 = 0; o0 < L->out.h; o0++)
                for (int64_t o1 = o0 + 1; o1 <= L->out.h; o1++) {
                    const ff_range got = ff_plan_input_rows(&p, &m, i, o0, o1);
                    const ff_range direct = ff_layer_input_rows(L, o0, o1);
                    const ff_range none = ff_plan_input_rows(NULL, &m, i, o0, o1);
                    assert_int_equal(none.lo, direct.lo);
                    assert_int_equal(none.hi, direct.hi);
                    int64_t lo = direct.lo, hi = direct.hi;
                    if (lp->band == FF_BAND_WHOLE) {
                        lo = 0, hi = L->in.h;
                    } else if (lp->alg == FF_CONV_WINOGRAD) {
                        lo = INT64_MAX, hi = INT64_MIN;
                        for (int64_t row = o0; row < o1; row++) {
                            const int64_t first = (row / wm) * wm - L->pad, last = first + wm + L->kh - 2;
                            const int64_t a = first < 0 ? 0 : first, b = last >= L->in.h ? L->in.h - 1 : last;
                            if (a < lo) lo = a;
                            if (b + 1 > hi) hi = b + 1;
                        }
                    }
                    assert_int_equal(got.lo, lo);
                    assert_int_equal(got.hi, hi);
                    assert_true(got.lo <= direct.lo && got.hi >= direct.hi);  // a superset of the window
                    wider += got.lo < direct.lo || got.hi > direct.hi;
                    checked++;
                }
        }
    }
    assert_true(wider > 100);
    assert_true(checked > 1000);
}

// How a mode's plan is chosen (info, verify): the mode's device, then the plan options. serial and
// mpi are the cpu device (class "cpu"); cuda, hybrid and direct the cuda device (class "gpu").
static void mode_device_names_the_class(void **state) {
    (void)state;
    ff_plan_options o = defaults();
    const ff_mode modes[] = {FF_MODE_SERIAL, FF_MODE_MPI, FF_MODE_CUDA, FF_MODE_HYBRID, FF_MODE_DIRECT};
    for (int k = 0; k < 5; k++) {
        ff_exec_caps caps;
        ff_mode_caps(&caps, modes[k]);
        ff_plan p = build("alexnet", caps.device, &o);
        assert_string_equal(p.digest_class, k < 2 ? "cpu" : "gpu");
    }
}

static void print_names_every_layer(void **state) {
    (void)state;
    ff_model m;
    assert_int_equal(ff_model_init(&m, "alexnet"), FF_OK);
    ff_plan_options o = defaults();
    ff_plan p = build("alexnet", FF_DEVICE_CUDA, &o);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    ff_plan_print(f, &p, &m);
    fclose(f);
    for (int i = 0; i < m.n_layers; i++) assert_non_null(strstr(buf, m.layers[i].name));
    assert_non_null(strstr(buf, "digest class gpu"));
    assert_non_null(strstr(buf, "winograd-4-s2d"));
    assert_non_null(strstr(buf, "whole layer"));
    free(buf);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(options_defaults_and_environment),
        cmocka_unit_test(alexnet_gpu_plan),
        cmocka_unit_test(cpu_plan_is_direct),
        cmocka_unit_test(mnist_gpu_plan),
        cmocka_unit_test(bad_options_refused),
        cmocka_unit_test(tf32x3_has_its_own_class),
        cmocka_unit_test(input_rows_are_whole_tiles),
        cmocka_unit_test(mode_device_names_the_class),
        cmocka_unit_test(print_names_every_layer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
