// The committed goldens against fivefold's CPU reference, run through the executor interface
// exactly as `fivefold verify` runs them: every row passes, every recorded digest matches, the C
// weight/input generator is bit-identical to the Python one, and exact layers' recorded digests are
// the golden tensors' own.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common.h"
#include "fivefold/digest.h"
#include "fivefold/verify.h"

static const char *models[] = {"mnist-cnn", "alexnet"};

static void c_generator_matches_python(void **state) {
    (void)state;
    for (int k = 0; k < 2; k++) {
        ff_model m;
        assert_int_equal(ff_model_init(&m, models[k]), FF_OK);
        char path[1024];
        golden_path(path, sizeof path, models[k]);
        ff_golden g;
        ff_golden_options o = {.manifest = MANIFEST};
        assert_int_equal(ff_golden_load(&g, &m, path, &o), FF_OK);
        assert_false(g.trusted);
        // Weights: C's generator gives every tensor the digest make_golden.py recorded.
        ff_weights wt;
        assert_int_equal(ff_weights_alloc(&wt, &m), FF_OK);
        ff_weights_generate(&wt, &m, g.seed);
        ff_status st = ff_golden_check_weights(&g, &m, &wt);
        if (st != FF_OK) fprintf(stderr, "%s\n", ff_last_error());
        assert_int_equal(st, FF_OK);
        // ... and a different seed does not (the check can fail).
        ff_weights_generate(&wt, &m, g.seed + 1);
        assert_int_equal(ff_golden_check_weights(&g, &m, &wt), FF_ERR_INTEGRITY);
        // Input: bit-identical to C's generated batch.
        size_t count = (size_t)(g.n * ff_shape_numel(m.input));
        float *x = malloc(count * sizeof(float));
        assert_non_null(x);
        ff_input_generate(x, &m, g.n, g.seed);
        assert_memory_equal(x, g.input, count * sizeof(float));
        free(x);
        ff_weights_free(&wt);
        ff_golden_free(&g);
    }
}

static void exact_layers_recorded_digest_is_golden_digest(void **state) {
    (void)state;
    for (int k = 0; k < 2; k++) {
        ff_model m;
        assert_int_equal(ff_model_init(&m, models[k]), FF_OK);
        char path[1024];
        golden_path(path, sizeof path, models[k]);
        ff_golden g;
        ff_golden_options o = {.manifest = MANIFEST};
        assert_int_equal(ff_golden_load(&g, &m, path, &o), FF_OK);
        // The committed goldens record the classes "cpu" and "gpu" (the default GPU plan).
        const ff_golden_class *cpu = ff_golden_find_class(&g, "cpu"), *gpu = ff_golden_find_class(&g, "gpu");
        assert_non_null(cpu);
        assert_non_null(gpu);
        assert_null(ff_golden_find_class(&g, "gpu-direct"));
        assert_null(ff_golden_find_class(&g, ""));
        int exact = 0;
        for (int i = 0; i < m.n_layers; i++) {
            assert_true(cpu->has[i]);  // every layer has a recorded reference digest
            assert_true(gpu->has[i]);
            ff_op op = m.layers[i].op;
            if (op == FF_OP_RELU || op == FF_OP_MAXPOOL || op == FF_OP_FLATTEN) {
                assert_true(cpu->digest[i] == g.layers[i].out_digest);
                exact++;
            }
        }
        assert_true(exact >= 5);
        assert_true(cpu->has[FF_GOLDEN_E2E_LOGITS]);
        assert_true(cpu->has[FF_GOLDEN_E2E_OUTPUT]);
        ff_golden_free(&g);
    }
}

static void serial_passes_every_check(void **state) {
    (void)state;
    for (int k = 0; k < 2; k++) {
        ff_model m;
        assert_int_equal(ff_model_init(&m, models[k]), FF_OK);
        ff_verify_config c;
        ff_verify_config_default(&c);
        c.model = models[k];
        c.manifest = MANIFEST;
        c.progress = stdout;
        char json[] = "/tmp/ff_verify_json_XXXXXX";
        int fd = mkstemp(json);
        assert_true(fd >= 0);
        close(fd);
        ff_verify_report rep;
        ff_status st = ff_verify_run(&rep, &c);
        if (st != FF_OK) fprintf(stderr, "%s\n", ff_last_error());
        assert_int_equal(st, FF_OK);
        assert_true(rep.pass);
        assert_int_equal(rep.failed, 0);
        assert_string_equal(rep.digest_class, "cpu");
        assert_true(rep.class_recorded);
        assert_int_equal(rep.n_rows, m.n_layers + 3);  // weights, every layer, logits, output
        for (int i = 0; i < rep.n_rows; i++) {
            assert_true(rep.rows[i].pass);
            assert_int_equal(rep.rows[i].digest_state, 1);  // the recorded reference bits
        }
        assert_true(rep.output_digest != 0);
        assert_true(rep.output_digest == rep.rows[rep.n_rows - 1].digest);
        assert_int_equal(ff_verify_write_json(&rep, &c, json), FF_OK);
        FILE *f = fopen(json, "r");
        assert_non_null(f);
        char buf[4096] = {0};
        assert_true(fread(buf, 1, sizeof buf - 1, f) > 0);
        fclose(f);
        char want[64];
        snprintf(want, sizeof want, "\"passed\": %d,", m.n_layers + 3);
        assert_non_null(strstr(buf, want));
        assert_non_null(strstr(buf, "\"failed\": 0,"));
        unlink(json);
        ff_verify_report_free(&rep);
    }
}

static void batch_subset_and_filter(void **state) {
    (void)state;
    ff_verify_config c;
    ff_verify_config_default(&c);
    c.model = "mnist-cnn";
    c.manifest = MANIFEST;
    c.batch = 3;
    c.filter = "conv[0-9]\\(";
    ff_verify_report rep;
    assert_int_equal(ff_verify_run(&rep, &c), FF_OK);
    assert_int_equal(rep.n_rows, 2);  // conv1, conv2 only
    assert_true(rep.pass);
    assert_non_null(strstr(rep.rows[0].case_str, "mnist-cnn serial conv1(K=32,R=3,s=1,p=0,N=3,P=1,split=none)"));
    assert_int_equal(rep.rows[0].digest_state, 0);  // digests are recorded for the whole batch only
    ff_verify_report_free(&rep);
    // More images than the golden holds, a bad regex, an unknown model: errors, not rows.
    c.batch = 17;
    assert_int_equal(ff_verify_run(&rep, &c), FF_ERR_INPUT);
    ff_verify_report_free(&rep);
    c.batch = 0;
    c.filter = "conv(";
    assert_int_equal(ff_verify_run(&rep, &c), FF_ERR_INPUT);
    ff_verify_report_free(&rep);
    c.filter = NULL;
    c.model = "resnet";
    assert_int_equal(ff_verify_run(&rep, &c), FF_ERR_INPUT);
    ff_verify_report_free(&rep);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(c_generator_matches_python),
        cmocka_unit_test(exact_layers_recorded_digest_is_golden_digest),
        cmocka_unit_test(serial_passes_every_check),
        cmocka_unit_test(batch_subset_and_filter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
