// The GPU splits before any new transport (issue 13 item 3; docs/ARCHITECTURE.md §1): the cuda
// device with the loopback transport — P simulated ranks, one thread each, sharing one GPU, the
// hybrid mode's decomposition — runs `batch` and `rows` for P = 1..8 on every layer alone and on
// the whole model, and every output equals the cuda mode's bit for bit (the space-to-depth conv1
// as a whole-layer step, the Winograd layers fetching whole tiles). Also under the other GPU
// plans (direct, m = 2), and a fault injected on one layer must show.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "fivefold/comm.h"
#include "fivefold/executor.h"
#include "fivefold/model.h"
#include "fivefold/weights.h"
#include "gpu_test_util.h"

typedef struct {
    const ff_model *m;
    const ff_weights *w;
    ff_split split;
    ff_plan_options plan;
    int64_t n;
    const float *x;  // (n, input)
    float **got;     // [n_layers + 1]: per-layer outputs, then the whole model's
    int fault;
    float *replayed;       // rank 0: the output of device-resident replays of the whole model (or NULL)
    bool other_n_refused;  // a replay of another batch size than the last forward's was refused
} job;

static ff_status rank_body(ff_comm *c, void *arg) {
    job *j = arg;
    const int r = ff_comm_rank(c);
    ff_exec_options o;
    ff_exec_options_default(&o);
    o.mode = FF_MODE_HYBRID;
    o.split = j->split;
    o.max_batch = j->n;
    o.plan = j->plan;
    o.comm = c;
    o.fault_layer = j->fault;
    ff_executor *e = NULL;
    FF_TRY(ff_exec_create(&e, j->m, r == 0 ? j->w : NULL, &o));
    ff_status st = FF_OK;
    // Every layer alone, each on the previous layer's output of this run (rank 0 holds it), then
    // the whole model.
    for (int i = 0; i < j->m->n_layers && st == FF_OK; i++) {
        const float *in = i == 0 ? j->x : j->got[i - 1];
        st = ff_exec_forward(e, r == 0 ? j->got[i] : NULL, r == 0 ? in : NULL, j->n, i, i);
    }
    if (st == FF_OK)
        st = ff_exec_forward(e, r == 0 ? j->got[j->m->n_layers] : NULL, r == 0 ? j->x : NULL, j->n, 0,
                             j->m->n_layers - 1);
    // Device-resident replays (bench's figure for several ranks) reuse the input where that forward
    // left it and must give its output again; another batch size is refused on every rank.
    if (st == FF_OK && j->replayed) {
        double ms[2];
        st = ff_exec_time_resident(e, j->n, 2, ms);
        if (st == FF_OK) st = ff_exec_resident_output(e, r == 0 ? j->replayed : NULL, j->n);
        if (st == FF_OK) {
            ff_status other = ff_exec_time_resident(e, j->n + 1, 1, ms);
            if (r == 0) j->other_n_refused = other == FF_ERR_INPUT;
        }
    }
    ff_exec_destroy(e);
    return st;
}

// The cuda mode's outputs: ref[i] = layer i alone on ref[i-1] (ref[-1] = x); ref[L] = whole model.
static float **reference(const ff_model *m, const ff_weights *w, const ff_plan_options *plan, const float *x,
                         int64_t n) {
    ff_exec_options o;
    ff_exec_options_default(&o);
    o.mode = FF_MODE_CUDA;
    o.max_batch = n;
    o.plan = *plan;
    ff_executor *e = NULL;
    assert_int_equal(ff_exec_create(&e, m, w, &o), FF_OK);
    float **ref = calloc((size_t)m->n_layers + 1, sizeof *ref);
    for (int i = 0; i <= m->n_layers; i++) {
        const int last = i < m->n_layers ? i : m->n_layers - 1;
        ref[i] = malloc((size_t)(n * ff_shape_numel(m->layers[last].out)) * sizeof(float));
        const float *in = i == 0 || i == m->n_layers ? x : ref[i - 1];
        assert_int_equal(ff_exec_forward(e, ref[i], in, n, i < m->n_layers ? i : 0, last), FF_OK);
    }
    ff_exec_destroy(e);
    return ref;
}

static void free_outputs(float **p, int n_layers) {
    for (int i = 0; p && i <= n_layers; i++) free(p[i]);
    free(p);
}

static size_t compare_splits(const char *model, int64_t n, const ff_plan_options *plan, int maxP) {
    ff_model m;
    ff_weights w;
    assert_int_equal(ff_model_init(&m, model), FF_OK);
    assert_int_equal(ff_weights_alloc(&w, &m), FF_OK);
    ff_weights_generate(&w, &m, 21);
    float *x = malloc((size_t)(n * ff_shape_numel(m.input)) * sizeof(float));
    ff_input_generate(x, &m, n, 9);
    float **ref = reference(&m, &w, plan, x, n);
    size_t bad = 0;
    const ff_split splits[] = {FF_SPLIT_BATCH, FF_SPLIT_ROWS};
    for (int s = 0; s < 2; s++)
        for (int P = 1; P <= maxP; P++) {
            job j = {&m, &w, splits[s], *plan, n, x, calloc((size_t)m.n_layers + 1, sizeof(float *)), -1, NULL, false};
            for (int i = 0; i <= m.n_layers; i++) {
                const int last = i < m.n_layers ? i : m.n_layers - 1;
                j.got[i] = calloc((size_t)(n * ff_shape_numel(m.layers[last].out)), sizeof(float));
            }
            const size_t out_floats = (size_t)(n * ff_shape_numel(m.layers[m.n_layers - 1].out));
            j.replayed = calloc(out_floats, sizeof(float));
            ff_status st = ff_comm_loopback_run(P, rank_body, &j);
            if (st != FF_OK) fprintf(stderr, "%s %s P=%d: %s\n", model, ff_split_name(splits[s]), P, ff_last_error());
            assert_int_equal(st, FF_OK);
            size_t case_bad = 0;
            for (int i = 0; i <= m.n_layers; i++) {
                const int last = i < m.n_layers ? i : m.n_layers - 1;
                char what[96];
                snprintf(what, sizeof what, "%s %s P=%d %s", model, ff_split_name(splits[s]), P,
                         i < m.n_layers ? m.layers[i].name : "whole model");
                case_bad += tu_check_ulp(what, j.got[i], ref[i], (size_t)(n * ff_shape_numel(m.layers[last].out)), 0);
            }
            char what[96];
            snprintf(what, sizeof what, "%s %s P=%d device-resident replay", model, ff_split_name(splits[s]), P);
            case_bad += tu_check_ulp(what, j.replayed, ref[m.n_layers], out_floats, 0);
            if (!j.other_n_refused) {
                fprintf(stderr, "%s: a replay of %lld images after a forward of %lld was not refused\n", what,
                        (long long)n + 1, (long long)n);
                case_bad++;
            }
            free(j.replayed);
            printf("  %s %-4s P=%d: %d layers alone, the whole model and its replay %s\n", model,
                   ff_split_name(splits[s]), P, m.n_layers, case_bad ? "DIFFER from cuda" : "equal cuda bit for bit");
            bad += case_bad;
            free_outputs(j.got, m.n_layers);
        }
    free_outputs(ref, m.n_layers);
    free(x);
    ff_weights_free(&w);
    return bad;
}

static ff_plan_options default_plan(void) {
    ff_plan_options o;
    assert_int_equal(ff_plan_options_default(&o), FF_OK);
    return o;
}

static void mnist_every_split_and_rank_count(void **state) {
    (void)state;
    ff_plan_options o = default_plan();
    assert_int_equal(compare_splits("mnist-cnn", 5, &o, 8), 0);
}

static void alexnet_every_split_and_rank_count(void **state) {
    (void)state;
    ff_plan_options o = default_plan();
    assert_int_equal(compare_splits("alexnet", 3, &o, 8), 0);
}

// The other plans' halos: direct everywhere (receptive fields), Winograd m = 2 without s2d (conv1
// direct and banded, tiles of 2 elsewhere).
static void alexnet_other_plans(void **state) {
    (void)state;
    ff_plan_options o = default_plan();
    o.conv = FF_CONV_DIRECT;
    assert_int_equal(compare_splits("alexnet", 2, &o, 5), 0);
    o = default_plan();
    o.winograd_m = 2;
    o.s2d = false;
    assert_int_equal(compare_splits("alexnet", 2, &o, 5), 0);
}

// The comparison can fail: a fault on one layer in the decomposed run shows in that layer's output.
static void fault_is_seen(void **state) {
    (void)state;
    ff_model m;
    ff_weights w;
    assert_int_equal(ff_model_init(&m, "alexnet"), FF_OK);
    assert_int_equal(ff_weights_alloc(&w, &m), FF_OK);
    ff_weights_generate(&w, &m, 21);
    const int64_t n = 2;
    float *x = malloc((size_t)(n * ff_shape_numel(m.input)) * sizeof(float));
    ff_input_generate(x, &m, n, 9);
    ff_plan_options po = default_plan();
    float **ref = reference(&m, &w, &po, x, n);
    const int layer = 3;  // conv2: a Winograd layer computed in bands
    job j = {&m, &w, FF_SPLIT_ROWS, po, n, x, calloc((size_t)m.n_layers + 1, sizeof(float *)), layer, NULL, false};
    for (int i = 0; i <= m.n_layers; i++) {
        const int last = i < m.n_layers ? i : m.n_layers - 1;
        j.got[i] = calloc((size_t)(n * ff_shape_numel(m.layers[last].out)), sizeof(float));
    }
    assert_int_equal(ff_comm_loopback_run(3, rank_body, &j), FF_OK);
    assert_true(memcmp(j.got[layer], ref[layer], sizeof(float)) != 0);  // element 0 of image 0 perturbed
    assert_true(memcmp(j.got[layer - 1], ref[layer - 1],
                       (size_t)(n * ff_shape_numel(m.layers[layer - 1].out)) * sizeof(float)) == 0);
    free_outputs(j.got, m.n_layers);
    free_outputs(ref, m.n_layers);
    free(x);
    ff_weights_free(&w);
}

int main(void) {
    int rc = tu_gpu_or_skip();
    if (rc) return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(mnist_every_split_and_rank_count),
        cmocka_unit_test(alexnet_every_split_and_rank_count),
        cmocka_unit_test(alexnet_other_plans),
        cmocka_unit_test(fault_is_seen),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
