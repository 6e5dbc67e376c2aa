// tools/pc_stalls.c's accounting and report without a GPU: records fed as cuptiPCSamplingGetData
// returns them. Every sample counts once, in its warp state; a state's "not issued" twin is a
// subset, shown beside it, never added to the totals (session 25's first version added it: 1.2x
// CUPTI's sample count); records of the same instruction fed twice add up; unknown hardware
// indexes count in the total only; the report lists kernels by samples, each state with its share
// and twin, and the hottest instructions first.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cupti_pcsampling.h>

#include "pc_stalls.h"

static const char *const names[] = {
    "smsp__pcsamp_warps_issue_stalled_selected",
    "smsp__pcsamp_warps_issue_stalled_not_selected",
    "smsp__pcsamp_warps_issue_stalled_wait",
    "smsp__pcsamp_warps_issue_stalled_wait_not_issued",
    "smsp__pcsamp_warps_issue_stalled_long_scoreboard",
};
static const uint32_t hw[] = {3, 7, 11, 12, 20};  // hardware indexes: not the table's positions
enum { SEL = 3, NOTSEL = 7, WAIT = 11, WAIT_NI = 12, LONGSB = 20 };

typedef struct {
    const char *fn;
    uint64_t pc;
    int n;
    uint32_t idx[4], samples[4];
} rec;

// One CUPTI buffer holding these records (as GetData fills it).
static void feed(pcs_session *s, const rec *r, int nr) {
    CUpti_PCSamplingData d;
    memset(&d, 0, sizeof d);
    d.size = sizeof d;
    d.collectNumPcs = (size_t)nr;
    d.totalNumPcs = (size_t)nr;
    d.pPcData = calloc((size_t)nr, sizeof *d.pPcData);
    CUpti_PCSamplingStallReason *st = calloc((size_t)nr * 4, sizeof *st);
    assert_non_null(d.pPcData);
    assert_non_null(st);
    for (int i = 0; i < nr; i++) {
        d.pPcData[i].size = sizeof d.pPcData[i];
        d.pPcData[i].functionName = (char *)r[i].fn;
        d.pPcData[i].pcOffset = r[i].pc;
        d.pPcData[i].stallReasonCount = (size_t)r[i].n;
        d.pPcData[i].stallReason = st + 4 * i;
        for (int j = 0; j < r[i].n; j++)
            st[4 * i + j] =
                (CUpti_PCSamplingStallReason){.pcSamplingStallReasonIndex = r[i].idx[j], .samples = r[i].samples[j]};
    }
    pcs_feed_for_test(s, &d);
    assert_int_equal(d.totalNumPcs, 0);  // consumed
    free(st), free(d.pPcData);
}

static pcs_session *make(void) {
    pcs_session *s = pcs_for_test(5, names, hw);
    assert_non_null(s);
    const rec first[] = {
        {"_Z6k_gemmv", 0x100, 3, {SEL, WAIT, WAIT_NI}, {10, 30, 12}},
        {"_Z6k_gemmv", 0x200, 1, {LONGSB}, {60}},
        {"_Z3fooi", 0x10, 1, {NOTSEL}, {5}},
    };
    const rec second[] = {
        {"_Z6k_gemmv", 0x100, 1, {SEL}, {10}},  // the same instruction again: adds up
        {"_Z3fooi", 0x10, 1, {99}, {4}},        // an index CUPTI did not list: total only
    };
    feed(s, first, 3);
    feed(s, second, 2);
    return s;
}

static void totals_count_each_sample_once(void **state) {
    (void)state;
    pcs_session *s = make();
    assert_int_equal(pcs_samples(s, "k_gemm", NULL), 110);  // 20 + 30 + 60; the 12 not issued are in wait's 30
    assert_int_equal(pcs_samples(s, "k_gemm", "wait"), 30);
    assert_int_equal(pcs_samples(s, "k_gemm", "selected"), 20);  // (not_selected: none in k_gemm)
    assert_int_equal(pcs_samples(s, "foo", NULL), 9);
    assert_int_equal(pcs_samples(s, "foo", "not_selected"), 5);
    assert_int_equal(pcs_samples(s, NULL, NULL), 119);
    assert_int_equal(pcs_samples(s, NULL, "long_scoreboard"), 60);
    pcs_close(s);
}

static void report_lists_states_and_hot_instructions(void **state) {
    (void)state;
    pcs_session *s = make();
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    pcs_report(s, f, 5);
    fclose(f);
    printf("%s", text);
    assert_non_null(strstr(text, "PC sampling: 119 samples in 2 kernel(s)"));
    const char *k = strstr(text, "_Z6k_gemmv"), *foo = strstr(text, "_Z3fooi");  // (mangled: no demangler here)
    assert_non_null(k);
    assert_non_null(foo);
    assert_true(k < foo);  // the larger kernel first
    assert_non_null(strstr(text, ": 110 samples (92.4%)"));
    // states by samples, with shares of the kernel's 110 and wait's not-issued twin beside it
    const char *lsb = strstr(k, "\n  long_scoreboard "), *wait = strstr(k, "\n  wait "),
               *sel = strstr(k, "\n  selected ");
    assert_non_null(lsb);
    assert_non_null(wait);
    assert_non_null(sel);
    assert_true(lsb < wait && wait < sel && sel < foo);
    assert_non_null(strstr(lsb, "60   54.5%"));
    assert_non_null(strstr(wait, "30   27.3%            12 (10.9%)"));
    assert_null(strstr(text, "wait_not_issued "));  // the twin is no line of its own
    // hottest instructions: 0x200 (60 of 110), then 0x100 (50: wait 30, selected 20)
    const char *p200 = strstr(k, "0x00200   54.5%  long_scoreboard 100%"),
               *p100 = strstr(k, "0x00100   45.5%  wait 60%, selected 40%");
    assert_non_null(p200);
    assert_non_null(p100);
    assert_true(p200 < p100 && p100 < foo);
    free(text);
    pcs_close(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(totals_count_each_sample_once),
        cmocka_unit_test(report_lists_states_and_hot_instructions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
