// Negative tests (issue 3 §4): each corruption or wrong layer must make verification fail.
//   - a byte flipped in a golden file: the manifest check refuses it before HDF5 opens it;
//   - a golden not in the manifest: refused unless trusted;
//   - a weight bit flipped: the digest check fails (directly, and as a failing verify row);
//   - a changed reference digest: the row fails until re-recorded;
//   - a digest class the golden has no record of is compared by tolerance alone (never a digest
//     mismatch) until --record writes one; other classes' records and malformed class names;
//   - deliberately wrong layers (padding off by one, transposed kernel, maxpool reading one column
//     too far) judged by the same tolerance functions against the golden: FAIL, while the same code
//     without the mistake PASSes (so the harness is not failing everything);
//   - a NaN in one element fails;
//   - --inject-fault L makes verify fail for every layer of both models.
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common.h"
#include "fivefold/digest.h"
#include "fivefold/h5io.h"
#include "fivefold/layers_cpu.h"
#include "fivefold/verify.h"

static char tmpdir[] = "/tmp/ff_golden_neg_XXXXXX";

static int setup(void **state) {
    (void)state;
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static void load_mnist(ff_golden *g, ff_model *m) {
    assert_int_equal(ff_model_init(m, "mnist-cnn"), FF_OK);
    char path[1024];
    golden_path(path, sizeof path, "mnist-cnn");
    ff_golden_options o = {.manifest = MANIFEST};
    assert_int_equal(ff_golden_load(g, m, path, &o), FF_OK);
}

static void flipped_byte_is_refused(void **state) {
    (void)state;
    ff_model m;
    assert_int_equal(ff_model_init(&m, "mnist-cnn"), FF_OK);
    char src[1024], dst[1024];
    golden_path(src, sizeof src, "mnist-cnn");
    snprintf(dst, sizeof dst, "%s/mnist-cnn.h5", tmpdir);  // same name: the manifest entry applies
    assert_int_equal(copy_file(dst, src), 0);
    ff_golden g;
    ff_golden_options o = {.manifest = MANIFEST};
    assert_int_equal(ff_golden_load(&g, &m, dst, &o), FF_OK);  // the intact copy is accepted
    ff_golden_free(&g);
    struct stat st;
    assert_int_equal(stat(dst, &st), 0);
    FILE *f = fopen(dst, "r+b");
    assert_non_null(f);
    fseek(f, st.st_size / 2, SEEK_SET);
    int ch = fgetc(f);
    fseek(f, st.st_size / 2, SEEK_SET);
    fputc(ch ^ 0x01, f);
    fclose(f);
    assert_int_equal(ff_golden_load(&g, &m, dst, &o), FF_ERR_INTEGRITY);
    assert_non_null(strstr(ff_last_error(), "SHA-256"));
    // Through the runner: an error before any row (the CLI exits 2).
    ff_verify_config c;
    ff_verify_config_default(&c);
    c.golden = dst;
    c.manifest = MANIFEST;
    ff_verify_report rep;
    assert_int_equal(ff_verify_run(&rep, &c), FF_ERR_INTEGRITY);
    assert_int_equal(rep.n_rows, 0);
    ff_verify_report_free(&rep);
}

static void unlisted_golden_needs_trust(void **state) {
    (void)state;
    ff_model m;
    assert_int_equal(ff_model_init(&m, "mnist-cnn"), FF_OK);
    char src[1024], dst[1024];
    golden_path(src, sizeof src, "mnist-cnn");
    snprintf(dst, sizeof dst, "%s/my-own.h5", tmpdir);
    assert_int_equal(copy_file(dst, src), 0);
    ff_golden g;
    ff_golden_options o = {.manifest = MANIFEST};
    assert_int_equal(ff_golden_load(&g, &m, dst, &o), FF_ERR_INTEGRITY);
    assert_non_null(strstr(ff_last_error(), "not listed"));
    o.trust = true;
    assert_int_equal(ff_golden_load(&g, &m, dst, &o), FF_OK);
    assert_true(g.trusted);
    ff_golden_free(&g);
    // Trusted, but for the other model: refused by content (shape/model validation).
    ff_model a;
    assert_int_equal(ff_model_init(&a, "alexnet"), FF_OK);
    assert_int_equal(ff_golden_load(&g, &a, dst, &o), FF_ERR_INPUT);
}

static void weight_bit_flip_fails(void **state) {
    (void)state;
    ff_golden g;
    ff_model m;
    load_mnist(&g, &m);
    ff_weights wt;
    assert_int_equal(ff_weights_alloc(&wt, &m), FF_OK);
    assert_int_equal(ff_golden_weights(&wt, &g, &m), FF_OK);
    int fc1 = ff_model_find_layer(&m, "fc1");
    uint32_t bits;
    memcpy(&bits, &wt.w[fc1][123456], 4);
    bits ^= 1u;  // the lowest mantissa bit of one weight out of 1.2 million
    memcpy(&wt.w[fc1][123456], &bits, 4);
    assert_int_equal(ff_golden_check_weights(&g, &m, &wt), FF_ERR_INTEGRITY);
    assert_non_null(strstr(ff_last_error(), "fc1"));
    ff_golden_free(&g);

    // As a verify row: a trusted golden that stores these weights (flipped bit included).
    char src[1024], dst[1024];
    golden_path(src, sizeof src, "mnist-cnn");
    snprintf(dst, sizeof dst, "%s/flipped-weights.h5", tmpdir);
    assert_int_equal(copy_file(dst, src), 0);
    int64_t f = open_rw(dst);
    assert_true(f > 0);
    assert_int_equal(ff_weights_write_group(&wt, &m, f), FF_OK);
    assert_int_equal(ff_h5_write_attr_i64(f, "weights", "stored", 1), FF_OK);
    ff_h5_close(f);
    ff_verify_config c;
    ff_verify_config_default(&c);
    c.golden = dst;
    c.trust = true;
    c.progress = stdout;
    ff_verify_report rep;
    assert_int_equal(ff_verify_run(&rep, &c), FF_OK);
    assert_false(rep.pass);
    assert_int_equal(rep.failed, 1);
    assert_int_equal(rep.n_rows, 1);  // the weights row; nothing runs on wrong weights
    assert_string_equal(rep.rows[0].check, "weights");
    assert_non_null(strstr(rep.rows[0].note, "fc1"));
    ff_verify_report_free(&rep);
    ff_weights_free(&wt);
}

static void changed_reference_digest_fails(void **state) {
    (void)state;
    char src[1024], dst[1024];
    golden_path(src, sizeof src, "mnist-cnn");
    snprintf(dst, sizeof dst, "%s/changed-digest.h5", tmpdir);
    assert_int_equal(copy_file(dst, src), 0);
    int64_t f = open_rw(dst);
    assert_true(f > 0);
    assert_int_equal(ff_h5_write_attr_str(f, "expected/cpu", "conv2", "0123456789abcdef"), FF_OK);
    ff_h5_close(f);
    ff_verify_config c;
    ff_verify_config_default(&c);
    c.golden = dst;
    c.trust = true;
    c.filter = "conv";
    ff_verify_report rep;
    assert_int_equal(ff_verify_run(&rep, &c), FF_OK);
    assert_int_equal(rep.n_rows, 2);
    assert_true(rep.rows[0].pass);
    assert_false(rep.rows[1].pass);  // values within tolerance, but not the recorded bits
    assert_true(rep.rows[1].tol.pass);
    assert_int_equal(rep.rows[1].digest_state, -1);
    assert_non_null(strstr(rep.rows[1].note, "0123456789abcdef"));
    ff_verify_report_free(&rep);
    // --record refuses a run with a fault (values out of tolerance) ...
    c.record = true;
    c.exec.fault_layer = 0;
    assert_int_equal(ff_verify_run(&rep, &c), FF_ERR_INPUT);
    ff_verify_report_free(&rep);
    // ... and accepts the deliberate change: it writes the new digest, the rows pass, and the next
    // run compares with the new digest.
    c.exec.fault_layer = -1;
    assert_int_equal(ff_verify_run(&rep, &c), FF_OK);
    assert_int_equal(rep.recorded, 1);
    assert_true(rep.pass);
    uint64_t conv2 = rep.rows[1].digest;
    ff_verify_report_free(&rep);
    c.record = false;
    assert_int_equal(ff_verify_run(&rep, &c), FF_OK);
    assert_true(rep.pass);
    assert_int_equal(rep.rows[1].digest_state, 1);
    assert_true(rep.rows[1].expected_digest == conv2);
    ff_verify_report_free(&rep);
}

// A copy of the mnist-cnn golden in the temporary folder with the group /expected/<drop> removed
// (NULL: none) and attribute attr of group /expected/<add> set to value (add NULL: none).
static void golden_copy(char *dst, size_t cap, const char *name, const char *drop, const char *add, const char *attr,
                        const char *value) {
    char src[1024];
    golden_path(src, sizeof src, "mnist-cnn");
    snprintf(dst, cap, "%s/%s", tmpdir, name);
    assert_int_equal(copy_file(dst, src), 0);
    int64_t f = open_rw(dst);
    assert_true(f > 0);
    if (drop) {
        char obj[128];
        snprintf(obj, sizeof obj, "expected/%s", drop);
        assert_true(H5Ldelete((hid_t)f, obj, H5P_DEFAULT) >= 0);
    }
    if (add) {
        char obj[128];
        snprintf(obj, sizeof obj, "expected/%s", add);
        assert_int_equal(ff_h5_write_attr_str(f, obj, attr, value), FF_OK);
    }
    ff_h5_close(f);
}

// The digest class of a run comes from its plan; a golden without a record of that class (here:
// "cpu" removed) is judged by tolerance alone: every row passes and says its digest was not
// compared, never a mismatch. --record then writes /expected/cpu, and the next run compares every
// row with it; a tampered digest of that class fails again.
static void class_without_record_is_not_compared(void **state) {
    (void)state;
    char dst[1024];
    golden_copy(dst, sizeof dst, "no-cpu-record.h5", "cpu", NULL, NULL, NULL);
    ff_model m;
    assert_int_equal(ff_model_init(&m, "mnist-cnn"), FF_OK);
    ff_golden g;
    ff_golden_options o = {.trust = true};
    assert_int_equal(ff_golden_load(&g, &m, dst, &o), FF_OK);
    assert_null(ff_golden_find_class(&g, "cpu"));
    assert_non_null(ff_golden_find_class(&g, "gpu"));  // the other class's record is untouched
    ff_golden_free(&g);

    ff_verify_config c;
    ff_verify_config_default(&c);
    c.golden = dst;
    c.trust = true;
    c.progress = stdout;
    ff_verify_report rep;
    assert_int_equal(ff_verify_run(&rep, &c), FF_OK);
    assert_true(rep.pass);
    assert_int_equal(rep.failed, 0);
    assert_string_equal(rep.digest_class, "cpu");
    assert_false(rep.class_recorded);
    assert_int_equal(rep.n_rows, m.n_layers + 3);
    for (int i = 1; i < rep.n_rows; i++) {  // every row with an output of its own (not weights)
        assert_true(rep.rows[i].pass);
        assert_int_equal(rep.rows[i].digest_state, 0);
        assert_non_null(
            strstr(rep.rows[i].note, "digest: not compared (no record for class cpu; --record writes one)"));
    }
    ff_verify_report_free(&rep);

    // --record writes the class (a trusted golden: the manifest is left alone) ...
    c.record = true;
    assert_int_equal(ff_verify_run(&rep, &c), FF_OK);
    assert_true(rep.pass);
    assert_int_equal(rep.recorded, m.n_layers + 2);
    ff_verify_report_free(&rep);
    // ... and every row is compared with it from then on.
    c.record = false;
    assert_int_equal(ff_verify_run(&rep, &c), FF_OK);
    assert_true(rep.pass);
    assert_true(rep.class_recorded);
    for (int i = 1; i < rep.n_rows; i++) assert_int_equal(rep.rows[i].digest_state, 1);
    ff_verify_report_free(&rep);
    int64_t f = open_rw(dst);
    assert_true(f > 0);
    assert_int_equal(ff_h5_write_attr_str(f, "expected/cpu", "fc1", "0123456789abcdef"), FF_OK);
    ff_h5_close(f);
    c.filter = "fc1";
    assert_int_equal(ff_verify_run(&rep, &c), FF_OK);
    assert_int_equal(rep.n_rows, 1);
    assert_false(rep.pass);
    assert_true(rep.rows[0].tol.pass);
    assert_int_equal(rep.rows[0].digest_state, -1);
    ff_verify_report_free(&rep);
}

// Classes are names: a golden may hold records of any plan's class next to cpu and gpu, each read
// on its own; a name that could not be a class (it names an HDF5 group) is refused as malformed.
static void digest_classes_are_names(void **state) {
    (void)state;
    ff_model m;
    assert_int_equal(ff_model_init(&m, "mnist-cnn"), FF_OK);
    char dst[1024];
    golden_copy(dst, sizeof dst, "extra-class.h5", NULL, "gpu-wg2", "conv2", "00000000000000ff");
    ff_golden g;
    ff_golden_options o = {.trust = true};
    assert_int_equal(ff_golden_load(&g, &m, dst, &o), FF_OK);
    const ff_golden_class *wg2 = ff_golden_find_class(&g, "gpu-wg2");
    assert_non_null(wg2);
    assert_true(wg2->has[2]);
    assert_false(wg2->has[0]);
    assert_true(wg2->digest[2] == 0xff);
    assert_non_null(ff_golden_find_class(&g, "cpu"));
    ff_golden_free(&g);
    // The serial run is compared with "cpu" only: the other class changes nothing.
    ff_verify_config c;
    ff_verify_config_default(&c);
    c.golden = dst;
    c.trust = true;
    ff_verify_report rep;
    assert_int_equal(ff_verify_run(&rep, &c), FF_OK);
    assert_true(rep.pass);
    for (int i = 1; i < rep.n_rows; i++) assert_int_equal(rep.rows[i].digest_state, 1);
    ff_verify_report_free(&rep);

    golden_copy(dst, sizeof dst, "bad-class.h5", NULL, "gpu wg2!", "conv2", "00000000000000ff");
    assert_int_equal(ff_golden_load(&g, &m, dst, &o), FF_ERR_INPUT);
    assert_non_null(strstr(ff_last_error(), "digest class 'gpu wg2!'"));
    assert_int_equal(ff_digest_class_check("gpu-wg4-nos2d"), FF_OK);
    assert_int_equal(ff_digest_class_check(""), FF_ERR_INPUT);
    assert_int_equal(ff_digest_class_check("a/b"), FF_ERR_INPUT);
    assert_int_equal(ff_digest_class_check("0123456789012345678901234567890123"), FF_ERR_INPUT);
    ff_clear_error();
}

// ---------------------------------------------------------------- deliberately wrong layers
// A direct convolution with two possible mistakes: the padding used in the index off by
// `pad_delta`, and the kernel read transposed (w[k][c][s][r]). With neither it is correct.
static void conv_variant(float *out, const float *in, const float *w, const float *b, const ff_layer *L, int64_t n,
                         int pad_delta, int transpose) {
    const int64_t C = L->in.c, H = L->in.h, W = L->in.w, K = L->out.c, Ho = L->out.h, Wo = L->out.w;
    const int R = L->kh, S = L->kw, pad = L->pad + pad_delta;
    for (int64_t img = 0; img < n; img++)
        for (int64_t k = 0; k < K; k++)
            for (int64_t oh = 0; oh < Ho; oh++)
                for (int64_t ow = 0; ow < Wo; ow++) {
                    float acc = b[k];
                    for (int64_t c = 0; c < C; c++)
                        for (int r = 0; r < R; r++)
                            for (int s = 0; s < S; s++) {
                                int64_t ih = oh * L->stride - pad + r, iw = ow * L->stride - pad + s;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                int rr = transpose ? s : r, ss = transpose ? r : s;
                                acc += w[((k * C + c) * R + rr) * S + ss] * in[((img * C + c) * H + ih) * W + iw];
                            }
                    out[((img * K + k) * Ho + oh) * Wo + ow] = acc;
                }
}

// Max pooling whose window is `extra` columns too wide: the last column of a row reads on into the
// next row of the buffer, as an off-by-one loop bound does.
static void maxpool_variant(float *out, const float *in, const ff_layer *L, int64_t n, int extra) {
    const int64_t C = L->in.c, H = L->in.h, W = L->in.w, Ho = L->out.h, Wo = L->out.w;
    const int64_t total = n * C * H * W;
    for (int64_t p = 0; p < n * C; p++)
        for (int64_t oh = 0; oh < Ho; oh++)
            for (int64_t ow = 0; ow < Wo; ow++) {
                float m = -INFINITY;
                for (int r = 0; r < L->kh; r++)
                    for (int s = 0; s < L->kw + extra; s++) {
                        int64_t idx = (p * H + oh * L->stride + r) * W + ow * L->stride + s;
                        if (idx < total && in[idx] > m) m = in[idx];
                    }
                out[(p * Ho + oh) * Wo + ow] = m;
            }
}

static bool judge_conv(const ff_golden *g, const ff_model *m, const ff_weights *wt, int i, int pad_delta, int transpose,
                       ff_tol_result *r) {
    const ff_layer *L = &m->layers[i];
    size_t count = (size_t)(g->n * ff_shape_numel(L->out));
    float *out = malloc(count * sizeof(float));
    double *A = malloc(count * sizeof(double));
    assert_true(out && A);
    conv_variant(out, g->layers[i].in_f32, wt->w[i], wt->b[i], L, g->n, pad_delta, transpose);
    ff_tol_absdot_conv(A, g->layers[i].in_f32, NULL, wt->w[i], wt->b[i], L, g->n, 1);
    ff_tol_check_dot(r, out, g->layers[i].out_f64, A, (int64_t)count, L->fan_in + 1, 0.0);
    free(out);
    free(A);
    return r->pass;
}

static void wrong_conv_variants_fail(void **state) {
    (void)state;
    // mnist-cnn conv1/conv2 (pad 0) and AlexNet conv2 (pad 2, 5x5: transposition matters).
    const char *names[2] = {"mnist-cnn", "alexnet"};
    for (int k = 0; k < 2; k++) {
        ff_model m;
        assert_int_equal(ff_model_init(&m, names[k]), FF_OK);
        char path[1024];
        golden_path(path, sizeof path, names[k]);
        ff_golden g;
        ff_golden_options o = {.manifest = MANIFEST};
        assert_int_equal(ff_golden_load(&g, &m, path, &o), FF_OK);
        ff_weights wt;
        assert_int_equal(ff_weights_alloc(&wt, &m), FF_OK);
        assert_int_equal(ff_golden_weights(&wt, &g, &m), FF_OK);
        const char *layers[2] = {k == 0 ? "conv1" : "conv2", k == 0 ? "conv2" : NULL};
        for (int j = 0; j < 2 && layers[j]; j++) {
            int i = ff_model_find_layer(&m, layers[j]);
            ff_tol_result r;
            assert_true(judge_conv(&g, &m, &wt, i, 0, 0, &r));  // control: the correct variant passes
            assert_false(judge_conv(&g, &m, &wt, i, +1, 0, &r));
            printf("%s %s padding %d instead of %d: %lld of %lld elements outside, %.3g x bound\n", names[k], layers[j],
                   m.layers[i].pad + 1, m.layers[i].pad, (long long)r.n_fail, (long long)r.n, r.max_ratio);
            assert_false(judge_conv(&g, &m, &wt, i, -1, 0, &r));
            assert_false(judge_conv(&g, &m, &wt, i, 0, 1, &r));
            printf("%s %s transposed kernel: %lld of %lld elements outside, %.3g x bound\n", names[k], layers[j],
                   (long long)r.n_fail, (long long)r.n, r.max_ratio);
        }
        ff_weights_free(&wt);
        ff_golden_free(&g);
    }
}

static void wrong_maxpool_fails(void **state) {
    (void)state;
    const char *names[2] = {"mnist-cnn", "alexnet"};
    const char *pools[2] = {"pool1", "pool1"};
    for (int k = 0; k < 2; k++) {
        ff_model m;
        assert_int_equal(ff_model_init(&m, names[k]), FF_OK);
        char path[1024];
        golden_path(path, sizeof path, names[k]);
        ff_golden g;
        ff_golden_options o = {.manifest = MANIFEST};
        assert_int_equal(ff_golden_load(&g, &m, path, &o), FF_OK);
        int i = ff_model_find_layer(&m, pools[k]);
        size_t count = (size_t)(g.n * ff_shape_numel(m.layers[i].out));
        float *out = malloc(count * sizeof(float));
        assert_non_null(out);
        ff_tol_result r;
        maxpool_variant(out, g.layers[i].in_f32, &m.layers[i], g.n, 0);
        ff_tol_check_exact(&r, out, g.layers[i].out_f32, (int64_t)count);
        assert_true(r.pass);  // control
        maxpool_variant(out, g.layers[i].in_f32, &m.layers[i], g.n, 1);
        ff_tol_check_exact(&r, out, g.layers[i].out_f32, (int64_t)count);
        assert_false(r.pass);
        printf("%s %s one column too far: %lld of %lld elements differ\n", names[k], pools[k], (long long)r.n_fail,
               (long long)r.n);
        free(out);
        ff_golden_free(&g);
    }
}

static void nan_in_one_element_fails(void **state) {
    (void)state;
    ff_golden g;
    ff_model m;
    load_mnist(&g, &m);
    ff_weights wt;
    assert_int_equal(ff_weights_alloc(&wt, &m), FF_OK);
    assert_int_equal(ff_golden_weights(&wt, &g, &m), FF_OK);
    // A dot-product layer and an exact layer, each computed by the reference, then one NaN.
    const char *names[3] = {"fc1", "relu2", "softmax"};
    for (int j = 0; j < 3; j++) {
        int i = ff_model_find_layer(&m, names[j]);
        const ff_layer *L = &m.layers[i];
        size_t count = (size_t)(g.n * ff_shape_numel(L->out));
        float *out = malloc(count * sizeof(float));
        double *A = malloc(count * sizeof(double));
        assert_true(out && A);
        ff_rows rows = ff_rows_full(L);
        ff_cpu_layer_forward(out, g.layers[i].in_f32, wt.w[i], wt.b[i], L, &rows, g.n);
        ff_tol_result r;
        for (int bad = 0; bad < 2; bad++) {
            if (bad) out[count / 3] = NAN;
            if (L->op == FF_OP_LINEAR) {
                ff_tol_absdot_linear(A, g.layers[i].in_f32, NULL, wt.w[i], wt.b[i], L, g.n, 1);
                ff_tol_check_dot(&r, out, g.layers[i].out_f64, A, (int64_t)count, L->fan_in + 1, 0.0);
            } else if (L->op == FF_OP_SOFTMAX) {
                ff_tol_check_ulp(&r, out, g.layers[i].out_f64, NULL, 1e6, (int64_t)count);
            } else {
                ff_tol_check_exact(&r, out, g.layers[i].out_f32, (int64_t)count);
            }
            assert_true(r.pass == !bad);
            if (bad) {
                assert_int_equal(r.worst, (int64_t)(count / 3));
                assert_int_equal(r.n_fail, 1);
            }
        }
        free(out);
        free(A);
    }
    ff_weights_free(&wt);
    ff_golden_free(&g);
}

static void injected_fault_fails_every_layer(void **state) {
    (void)state;
    const char *names[2] = {"mnist-cnn", "alexnet"};
    for (int k = 0; k < 2; k++) {
        ff_model m;
        assert_int_equal(ff_model_init(&m, names[k]), FF_OK);
        for (int i = 0; i < m.n_layers; i++) {
            // Only layer i's own row runs (the filter), with the fault in layer i.
            char filter[128];
            snprintf(filter, sizeof filter, "^%s serial %s\\(", names[k], m.layers[i].name);
            ff_verify_config c;
            ff_verify_config_default(&c);
            c.model = names[k];
            c.manifest = MANIFEST;
            c.filter = filter;
            c.exec.fault_layer = i;
            ff_verify_report rep;
            assert_int_equal(ff_verify_run(&rep, &c), FF_OK);
            assert_int_equal(rep.n_rows, 1);
            assert_false(rep.pass);
            assert_int_equal(rep.failed, 1);
            assert_false(rep.rows[0].tol.pass);  // failed on the values, not only on the digest
            assert_int_equal(rep.rows[0].tol.worst, 0);
            printf("fault in %s %s: FAIL (%.3g x bound)\n", names[k], m.layers[i].name, rep.rows[0].tol.max_ratio);
            ff_verify_report_free(&rep);
        }
    }
    // End to end: a fault in the logits layer fails the end-to-end logits row too.
    ff_model m;
    assert_int_equal(ff_model_init(&m, "mnist-cnn"), FF_OK);
    ff_verify_config c;
    ff_verify_config_default(&c);
    c.model = "mnist-cnn";
    c.manifest = MANIFEST;
    c.filter = "end-to-end";
    c.exec.fault_layer = ff_model_find_layer(&m, "fc2");
    ff_verify_report rep;
    assert_int_equal(ff_verify_run(&rep, &c), FF_OK);
    assert_int_equal(rep.n_rows, 2);
    assert_false(rep.rows[0].pass);
    ff_verify_report_free(&rep);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(flipped_byte_is_refused),
        cmocka_unit_test(unlisted_golden_needs_trust),
        cmocka_unit_test(weight_bit_flip_fails),
        cmocka_unit_test(changed_reference_digest_fails),
        cmocka_unit_test(wrong_conv_variants_fail),
        cmocka_unit_test(wrong_maxpool_fails),
        cmocka_unit_test(nan_in_one_element_fails),
        cmocka_unit_test(injected_fault_fails_every_layer),
        cmocka_unit_test(class_without_record_is_not_compared),
        cmocka_unit_test(digest_classes_are_names),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
