// The training golden check (train_golden.h) against golden/data/train-mnist-cnn.h5: every row
// passes on the committed golden; the fault hook makes exactly the perturbed rows fail; a tampered
// golden is refused before HDF5 reads it.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fivefold/train_golden.h"

static void golden_passes(void **state) {
    (void)state;
    ff_verify_report rep;
    memset(&rep, 0, sizeof rep);
    ff_train_golden_config cfg = {0};
    cfg.progress = stdout;
    ff_status st = ff_train_verify_golden(&rep, &cfg);
    if (st != FF_OK) printf("error: %s\n", ff_last_error());
    assert_int_equal(st, FF_OK);
    printf("%d passed, %d failed\n", rep.passed, rep.failed);
    // weights + 4 parameterised layers x 3 + 4 exact layers + loss + 8 step-1 + trajectory + 8 final
    assert_int_equal(rep.n_rows, 1 + 12 + 4 + 1 + 8 + 1 + 8);
    assert_int_equal(rep.failed, 0);
    assert_true(rep.pass);
    ff_verify_report_free(&rep);
}

static void injected_faults_fail_exactly_their_rows(void **state) {
    (void)state;
    ff_verify_report rep;
    memset(&rep, 0, sizeof rep);
    ff_train_golden_config cfg = {0};
    cfg.inject_fault = true;
    assert_int_equal(ff_train_verify_golden(&rep, &cfg), FF_OK);
    const char *must_fail[] = {"iso conv2 dw", "step1 fc2 b", "loss trajectory", "final fc2 w"};
    int failed = 0;
    for (int i = 0; i < rep.n_rows; i++) {
        int expected = 0;
        for (int k = 0; k < 4; k++) expected |= strstr(rep.rows[i].case_str, must_fail[k]) != NULL;
        if (!rep.rows[i].pass) {
            ff_verify_print_row(stdout, &rep.rows[i]);
            failed++;
        }
        assert_int_equal(rep.rows[i].pass, !expected);
    }
    assert_int_equal(failed, 4);
    assert_false(rep.pass);
    ff_verify_report_free(&rep);
}

static void tampered_golden_is_refused(void **state) {
    (void)state;
    char dir[] = "/tmp/ff_tgold_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char src[1024], dst[1100], manifest[1100], cmd[4000];
    snprintf(src, sizeof src, "%s/golden/data/%s", FF_SOURCE_DIR, FF_TRAIN_GOLDEN_FILE);
    snprintf(dst, sizeof dst, "%s/%s", dir, FF_TRAIN_GOLDEN_FILE);
    snprintf(manifest, sizeof manifest, "%s/golden/MANIFEST.sha256", FF_SOURCE_DIR);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", src, dst);
    assert_int_equal(system(cmd), 0);
    FILE *f = fopen(dst, "r+b");
    assert_non_null(f);
    fseek(f, 5000, SEEK_SET);
    int b = fgetc(f);
    fseek(f, 5000, SEEK_SET);
    fputc(b ^ 1, f);
    fclose(f);
    ff_verify_report rep;
    memset(&rep, 0, sizeof rep);
    ff_train_golden_config cfg = {0};
    cfg.golden = dst;
    cfg.manifest = manifest;
    ff_status st = ff_train_verify_golden(&rep, &cfg);
    printf("tampered: %s: %s\n", ff_status_name(st), ff_last_error());
    assert_int_equal(st, FF_ERR_INTEGRITY);
    assert_non_null(strstr(ff_last_error(), "SHA-256"));
    assert_int_equal(rep.n_rows, 0);
    ff_verify_report_free(&rep);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(golden_passes),
        cmocka_unit_test(injected_faults_fail_exactly_their_rows),
        cmocka_unit_test(tampered_golden_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
