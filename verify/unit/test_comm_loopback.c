// The loopback comm backend (comm.h) — every primitive the mpi mode and the trainer use, with
// uneven and empty blocks, for P = 1..6 — and its misuse paths, which must end in FF_ERR_MPI
// rather than hang. Then the mpi mode itself over loopback ranks against the serial mode, bit for
// bit, including more ranks than images and the fault hook.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "comm_checks.h"
#include "fivefold/comm.h"
#include "fivefold/digest.h"
#include "fivefold/executor.h"
#include "fivefold/weights.h"

static void collectives(void **state) {
    (void)state;
    for (int P = 1; P <= 6; P++) assert_int_equal(ff_comm_loopback_run(P, collectives_body, NULL), FF_OK);
}

static void exchange_matches_in_list_order(void **state) {
    (void)state;
    for (int P = 1; P <= 5; P++) {
        int64_t bytes[5] = {0};
        assert_int_equal(ff_comm_loopback_run(P, exchange_body, bytes), FF_OK);
        // 2 x (12 + 8) bytes per rank, except to itself (P = 1) which is not counted.
        for (int r = 0; r < P; r++) assert_int_equal(bytes[r], P == 1 ? 0 : 40);
    }
}

static ff_status mismatched_body(ff_comm *c, void *arg) {
    (void)arg;
    int x = 0;
    if (ff_comm_rank(c) == 0) return ff_comm_bcast(c, &x, sizeof x, 0);
    return ff_comm_barrier(c);
}
static ff_status failing_body(ff_comm *c, void *arg) {
    (void)arg;
    if (ff_comm_rank(c) == 2) return FF_FAIL(FF_ERR_INPUT, "rank two refuses");
    return ff_comm_barrier(c);  // would wait forever for rank 2
}
static ff_status leaving_body(ff_comm *c, void *arg) {
    (void)arg;
    if (ff_comm_rank(c) == 0) return FF_OK;  // leaves without the collective
    double d = 1;
    return ff_comm_allreduce_sum_f64(c, &d, 1);
}
static ff_status unreceived_body(ff_comm *c, void *arg) {
    (void)arg;
    int x = 7;
    ff_comm_msg s = {(ff_comm_rank(c) + 1) % ff_comm_size(c), &x, sizeof x};
    return ff_comm_exchange(c, &s, 1, NULL, 0);  // nobody receives
}
static ff_status wrong_size_body(ff_comm *c, void *arg) {
    (void)arg;
    int x[2] = {1, 2};
    int me = ff_comm_rank(c), peer = 1 - me;
    ff_comm_msg s = {peer, x, me == 0 ? sizeof x : sizeof x[0]};
    ff_comm_msg r = {peer, x, sizeof x};
    return ff_comm_exchange(c, &s, 1, &r, 1);
}

// Both ranks wait for a second message the other never sends: real MPI would hang here.
static ff_status deadlock_body(ff_comm *c, void *arg) {
    (void)arg;
    int x = 1, y[2];
    int peer = 1 - ff_comm_rank(c);
    ff_comm_msg s = {peer, &x, sizeof x};
    ff_comm_msg r[2] = {{peer, &y[0], sizeof x}, {peer, &y[1], sizeof x}};
    return ff_comm_exchange(c, &s, 1, r, 2);
}

static void misuse_fails_instead_of_hanging(void **state) {
    (void)state;
    ff_comm_loopback_set_timeout(0.5);
    assert_int_equal(ff_comm_loopback_run(2, deadlock_body, NULL), FF_ERR_MPI);
    assert_non_null(strstr(ff_last_error(), "no matching message"));
    ff_comm_loopback_set_timeout(60);
    assert_int_equal(ff_comm_loopback_run(3, mismatched_body, NULL), FF_ERR_MPI);
    assert_non_null(strstr(ff_last_error(), "entered"));
    assert_int_equal(ff_comm_loopback_run(4, failing_body, NULL), FF_ERR_INPUT);
    assert_non_null(strstr(ff_last_error(), "rank 2 of 4: "));
    assert_non_null(strstr(ff_last_error(), "rank two refuses"));
    assert_int_equal(ff_comm_loopback_run(3, leaving_body, NULL), FF_ERR_MPI);
    assert_non_null(strstr(ff_last_error(), "already returned"));
    assert_int_equal(ff_comm_loopback_run(2, unreceived_body, NULL), FF_ERR_MPI);
    assert_non_null(strstr(ff_last_error(), "unreceived"));
    assert_int_equal(ff_comm_loopback_run(2, wrong_size_body, NULL), FF_ERR_MPI);
    assert_int_equal(ff_comm_loopback_run(0, collectives_body, NULL), FF_ERR_INPUT);
}

// ---- the mpi mode over loopback ranks, against serial ----

typedef struct {
    const ff_model *m;
    const ff_weights *w;
    ff_split split;
    int64_t n;
    int first, last, fault;
    const float *in;
    float *out;
} job;

static ff_status mpi_body(ff_comm *c, void *arg) {
    job *j = arg;
    ff_exec_options o;
    ff_exec_options_default(&o);
    o.mode = FF_MODE_MPI;
    o.split = j->split;
    o.max_batch = j->n;
    o.comm = c;
    o.fault_layer = j->fault;
    o.trace = true;
    ff_executor *e = NULL;
    int me = ff_comm_rank(c);
    FF_TRY(ff_exec_create(&e, j->m, me == 0 ? j->w : NULL, &o));
    ff_status st = ff_exec_forward(e, me == 0 ? j->out : NULL, me == 0 ? j->in : NULL, j->n, j->first, j->last);
    if (st == FF_OK && ff_comm_size(c) > 1 && j->split == FF_SPLIT_ROWS) {
        // the trace saw the halo traffic: some layer of this rank sent bytes
        const ff_trace *t = ff_exec_trace(e);
        int64_t b = 0;
        for (int i = 0; i <= FF_MAX_LAYERS; i++) b += t->comm_bytes[i];
        if (b == 0 && j->last > j->first) st = FF_FAIL(FF_ERR_INTERNAL, "rank %d: no bytes traced", me);
    }
    ff_exec_destroy(e);
    return st;
}

static uint64_t serial_digest(const ff_model *m, const ff_weights *w, const float *in, int64_t n, int first, int last,
                              int fault) {
    ff_exec_options o;
    ff_exec_options_default(&o);
    o.max_batch = n;
    o.fault_layer = fault;
    ff_executor *e = NULL;
    assert_int_equal(ff_exec_create(&e, m, w, &o), FF_OK);
    int64_t cnt = ff_shape_numel(m->layers[last].out) * n;
    float *out = malloc(sizeof(float) * (size_t)cnt);
    assert_int_equal(ff_exec_forward(e, out, in, n, first, last), FF_OK);
    uint64_t d = ff_digest_f32(out, (size_t)cnt);
    free(out);
    ff_exec_destroy(e);
    return d;
}

static void mpi_mode_equals_serial(void **state) {
    (void)state;
    ff_model m;
    assert_int_equal(ff_model_init(&m, "mnist-cnn"), FF_OK);
    ff_weights w;
    assert_int_equal(ff_weights_alloc(&w, &m), FF_OK);
    ff_weights_generate(&w, &m, 5);
    const int64_t n = 3;
    float *in = malloc(sizeof(float) * (size_t)(ff_shape_numel(m.input) * n));
    ff_input_generate(in, &m, n, 5);
    float *out = malloc(sizeof(float) * (size_t)(m.max_act * n));
    int conv2 = ff_model_find_layer(&m, "conv2");
    // whole model, one windowed layer alone, and the FC tail alone
    const int ranges[3][2] = {
        {0, m.n_layers - 1}, {conv2, conv2}, {ff_model_find_layer(&m, "flatten"), m.n_layers - 1}};
    const ff_split splits[3] = {FF_SPLIT_BATCH, FF_SPLIT_ROWS, FF_SPLIT_REPLICATE};
    for (int ri = 0; ri < 3; ri++) {
        int first = ranges[ri][0], last = ranges[ri][1];
        // the input of layer `first` computed by serial
        float *lin = in;
        float *tmp = NULL;
        if (first > 0) {
            ff_exec_options o;
            ff_exec_options_default(&o);
            o.max_batch = n;
            ff_executor *e = NULL;
            assert_int_equal(ff_exec_create(&e, &m, &w, &o), FF_OK);
            tmp = malloc(sizeof(float) * (size_t)(m.max_act * n));
            assert_int_equal(ff_exec_forward(e, tmp, in, n, 0, first - 1), FF_OK);
            ff_exec_destroy(e);
            lin = tmp;
        }
        uint64_t want = serial_digest(&m, &w, lin, n, first, last, -1);
        uint64_t want_fault = serial_digest(&m, &w, lin, n, first, last, last);
        assert_true(want != want_fault);
        size_t cnt = (size_t)(ff_shape_numel(m.layers[last].out) * n);
        for (int si = 0; si < 3; si++)
            for (int P = 1; P <= 7; P += (P < 4 ? 1 : 3)) {  // 1, 2, 3, 4, 7 (7 > batch 3)
                job j = {&m, &w, splits[si], n, first, last, -1, lin, out};
                assert_int_equal(ff_comm_loopback_run(P, mpi_body, &j), FF_OK);
                assert_true(ff_digest_f32(out, cnt) == want);
                j.fault = last;  // fault applied once, by whichever rank owns element 0
                assert_int_equal(ff_comm_loopback_run(P, mpi_body, &j), FF_OK);
                assert_true(ff_digest_f32(out, cnt) == want_fault);
            }
        free(tmp);
    }
    // 30 ranks on 26-row maps: empty bands in every spatial layer
    job j = {&m, &w, FF_SPLIT_ROWS, n, 0, m.n_layers - 1, -1, in, out};
    assert_int_equal(ff_comm_loopback_run(30, mpi_body, &j), FF_OK);
    assert_true(ff_digest_f32(out, (size_t)(m.classes * n)) == serial_digest(&m, &w, in, n, 0, m.n_layers - 1, -1));
    free(in);
    free(out);
    ff_weights_free(&w);
}

static void mpi_mode_rejects_bad_options(void **state) {
    (void)state;
    ff_model m;
    assert_int_equal(ff_model_init(&m, "mnist-cnn"), FF_OK);
    ff_exec_options o;
    ff_exec_options_default(&o);
    o.mode = FF_MODE_MPI;
    o.split = FF_SPLIT_ROWS;
    ff_executor *e = NULL;
    // no communicator
    assert_int_equal(ff_mode_mpi_impl.create(&e, &m, NULL, &o), FF_ERR_INPUT);
    assert_non_null(strstr(ff_last_error(), "communicator"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(collectives),
        cmocka_unit_test(exchange_matches_in_list_order),
        cmocka_unit_test(misuse_fails_instead_of_hanging),
        cmocka_unit_test(mpi_mode_equals_serial),
        cmocka_unit_test(mpi_mode_rejects_bad_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
