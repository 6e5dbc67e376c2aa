// The loopback comm backend (comm.h) — every primitive the mpi mode and the trainer use, with
// uneven and empty blocks, for P = 1..6 — and its misuse paths, which must end in FF_ERR_MPI
// rather than hang. Then the mpi mode itself over loopback ranks against the serial mode, bit for
// bit, including more ranks than images and the fault hook.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "comm_checks.h"
#include "fivefold/comm.h"
#include "fivefold/digest.h"
#include "fivefold/executor.h"
#include "fivefold/partition.h"
#include "fivefold/trace.h"
#include "fivefold/weights.h"

#define LOOPBACK_TIMEOUT_S 10.0

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

// Bus bytes follow nccl-tests' factors: P = 4 ranks, each operation alone, the counter read
// before and after on every rank. allgatherv of 4 x 100 bytes: 400 * 3/4 = 300 on every rank;
// exchange of 24 bytes to the next rank: 24 (factor 1); bcast of 64: 64 (factor 1, every rank);
// gatherv of 4 x 10 to root 0: 40 * 3/4 = 30 on the root, 0 elsewhere; allreduce of 8 floats:
// 32 * 2 * 3/4 = 48; the halo (point-to-point) part counts only the exchange.
static ff_status bus_body(ff_comm *c, void *arg) {
    double *got = arg;
    const int me = ff_comm_rank(c), P = ff_comm_size(c);
    unsigned char send[100] = {0}, recv[400];
    size_t counts[4], displs[4];
    for (int r = 0; r < P; r++) counts[r] = 100, displs[r] = (size_t)r * 100;
    double b0 = ff_comm_bus_bytes(c);
    const int64_t p0 = ff_comm_p2p_bytes(c);
    FF_TRY(ff_comm_allgatherv(c, recv, counts, displs, send, 100));
    got[6 * me + 0] = ff_comm_bus_bytes(c) - b0;
    if (ff_comm_p2p_bytes(c) != p0) got[6 * me + 0] = -1;  // a collective is not halo traffic
    b0 = ff_comm_bus_bytes(c);
    int64_t h0 = ff_comm_p2p_bytes(c);
    ff_comm_msg s = {(me + 1) % P, send, 24}, r = {(me + P - 1) % P, recv, 24};
    FF_TRY(ff_comm_exchange(c, &s, 1, &r, 1));
    got[6 * me + 1] = ff_comm_bus_bytes(c) - b0;
    got[6 * me + 5] = (double)(ff_comm_p2p_bytes(c) - h0);
    b0 = ff_comm_bus_bytes(c);
    FF_TRY(ff_comm_bcast(c, recv, 64, 0));
    got[6 * me + 2] = ff_comm_bus_bytes(c) - b0;
    for (int q = 0; q < P; q++) counts[q] = 10, displs[q] = (size_t)q * 10;
    b0 = ff_comm_bus_bytes(c);
    FF_TRY(ff_comm_gatherv(c, recv, counts, displs, send, 10, 0));
    got[6 * me + 3] = ff_comm_bus_bytes(c) - b0;
    float f[8] = {0};
    b0 = ff_comm_bus_bytes(c);
    FF_TRY(ff_comm_allreduce_sum_f32(c, f, 8));
    got[6 * me + 4] = ff_comm_bus_bytes(c) - b0;
    return FF_OK;
}

static void bus_bytes_use_collective_factors(void **state) {
    (void)state;
    double got[24];
    assert_int_equal(ff_comm_loopback_run(4, bus_body, got), FF_OK);
    for (int r = 0; r < 4; r++) {
        assert_true(got[6 * r + 0] == 300.0);
        assert_true(got[6 * r + 1] == 24.0);
        assert_true(got[6 * r + 2] == 64.0);
        assert_true(got[6 * r + 3] == (r == 0 ? 30.0 : 0.0));
        assert_true(got[6 * r + 4] == 48.0);
        assert_true(got[6 * r + 5] == 24.0);
    }
}

// The loopback all-reduce adds in rank order (0, 1, 2, ...), the same on every rank: float sums
// where the order changes the result. Ranks 0..2 hold 1, 2^25, -2^25: (1 + 2^25) rounds to 2^25
// (the spacing there is 4), so rank order gives 0; the second element holds them reversed and
// gives 1. Adding in reverse rank order would swap the two.
static ff_status rank_order_body(ff_comm *c, void *arg) {
    float *got = arg;
    const float v[3] = {1.0f, 33554432.0f, -33554432.0f};
    float f[2] = {v[ff_comm_rank(c)], v[2 - ff_comm_rank(c)]};
    FF_TRY(ff_comm_allreduce_sum_f32(c, f, 2));
    got[2 * ff_comm_rank(c)] = f[0];
    got[2 * ff_comm_rank(c) + 1] = f[1];
    return FF_OK;
}

static void allreduce_adds_in_rank_order(void **state) {
    (void)state;
    float got[6];
    assert_int_equal(ff_comm_loopback_run(3, rank_order_body, got), FF_OK);
    for (int r = 0; r < 3; r++) {
        // ((1 + 2^25) - 2^25) = 0 and ((-2^25 + 2^25) + 1) = 1, on every rank
        assert_true(got[2 * r] == 0.0f);
        assert_true(got[2 * r + 1] == 1.0f);
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
    ff_comm_loopback_set_timeout(LOOPBACK_TIMEOUT_S);
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

// ff_comm_set_timeout on a loopback rank sets that rank's own deadline: rank 0 gives up on a
// message rank 1 never sends after 0.3 s (the others keep the process-wide 10 s), and rank 1's
// barrier then ends because rank 0 failed. Every rank starts with the process-wide timeout.
static ff_status own_timeout_body(ff_comm *c, void *arg) {
    double *took = arg;
    if (ff_comm_timeout(c) != LOOPBACK_TIMEOUT_S)
        return FF_FAIL(FF_ERR_INTERNAL, "rank %d starts with a %g s timeout, expected %g", ff_comm_rank(c),
                       ff_comm_timeout(c), LOOPBACK_TIMEOUT_S);
    if (ff_comm_rank(c) != 0) return ff_comm_barrier(c);
    ff_comm_set_timeout(c, 0.3);
    if (ff_comm_timeout(c) != 0.3) return FF_FAIL(FF_ERR_INTERNAL, "ff_comm_timeout after setting 0.3 s");
    int y = 0;
    ff_comm_msg r = {1, &y, sizeof y};
    const double t0 = ff_now();
    ff_status st = ff_comm_exchange(c, NULL, 0, &r, 1);
    *took = ff_now() - t0;
    return st;
}

static void set_timeout_is_per_rank(void **state) {
    (void)state;
    double took = -1;
    assert_int_equal(ff_comm_loopback_run(2, own_timeout_body, &took), FF_ERR_MPI);
    assert_non_null(
        strstr(ff_last_error(), "rank 0 of 2: loopback rank 0: receive 0 from rank 1: no matching message in 0.3 s"));
    assert_true(took >= 0.25 && took < 5.0);
}

// Queueing (comm.h, ff_comm_set_queued) is for a device comm that can order its work on the
// device's stream (NCCL): a host comm refuses to be switched on, naming its transport, and stays
// usable; switching off and waiting are no-ops. (The queued NCCL path runs on the GPU machine:
// verify/gpu/train_gpu.sh modes, verify/train/train_mlp.sh gpu.)
static ff_status queue_body(ff_comm *c, void *arg) {
    (void)arg;
    if (ff_comm_can_queue(c)) return FF_FAIL(FF_ERR_INPUT, "a host comm says it can queue");
    if (ff_comm_set_queued(c, true) != FF_ERR_INPUT) return FF_FAIL(FF_ERR_INPUT, "set_queued(on) was accepted");
    if (!strstr(ff_last_error(), "the loopback transport cannot queue its collectives on a device"))
        return FF_FAIL(FF_ERR_INPUT, "unexpected message: %s", ff_last_error());
    FF_TRY(ff_comm_set_queued(c, false));
    FF_TRY(ff_comm_wait_queued(c));
    // no registered memory on a host comm: NULL and FF_OK, so the caller allocates as usual
    void *w = &w;
    FF_TRY(ff_comm_alloc_window(c, &w, 4096, "a test buffer"));
    if (w) return FF_FAIL(FF_ERR_INPUT, "a host comm gave a window");
    // no fused exchange on a host comm, even asked for (FF_FUSED_EXCHANGE=1 in the test below):
    // *done false, nothing touched, so the trainer runs its all-to-all, update and all-gather
    float wt[4] = {1, 2, 3, 4}, mom[4] = {0}, row[4] = {5, 6, 7, 8};
    bool done = true;
    FF_TRY(ff_comm_fused_tree_sgd(c, &done, wt, mom, row, 4, 0.5f, 0.9f, 0.0f, true));
    if (done || wt[0] != 1 || wt[3] != 4 || mom[0] != 0)
        return FF_FAIL(FF_ERR_INPUT, "a host comm fused an exchange (done %d, w[0] %g)", done, wt[0]);
    double x = 1.0 + ff_comm_rank(c);  // still usable
    FF_TRY(ff_comm_allreduce_sum_f64(c, &x, 1));
    const int P = ff_comm_size(c);
    if (x != P + P * (P - 1) / 2.0) return FF_FAIL(FF_ERR_INPUT, "sum %g after a refused queue", x);
    return FF_OK;
}

// The fused exchange's environment (comm.h ff_comm_fused_tree_sgd): a bad FF_FUSED_EXCHANGE or
// FF_FUSED_CTAS is refused naming the value, on any comm; a good one on a host comm does nothing.
static ff_status fused_env_body(ff_comm *c, void *arg) {
    const char *want = arg;  // NULL: accepted
    float wt[4] = {1, 2, 3, 4}, mom[4] = {0}, row[4] = {5, 6, 7, 8};
    bool done = true;
    ff_status st = ff_comm_fused_tree_sgd(c, &done, wt, mom, row, 4, 0.5f, 0.9f, 0.0f, true);
    if (done || wt[0] != 1) return FF_FAIL(FF_ERR_INPUT, "a host comm fused an exchange");
    if (!want) return st;
    if (st != FF_ERR_INPUT || !strstr(ff_last_error(), want))
        return FF_FAIL(FF_ERR_INPUT, "expected FF_ERR_INPUT naming \"%s\", got %s: %s", want, ff_status_name(st),
                       ff_last_error());
    return FF_OK;
}

static void fused_exchange_env(void **state) {
    (void)state;
    static const struct {
        const char *var, *value, *want;
    } cases[] = {
        {"FF_FUSED_EXCHANGE", "yes", "FF_FUSED_EXCHANGE 'yes': expected 0"},
        {"FF_FUSED_EXCHANGE", "2", "FF_FUSED_EXCHANGE '2': expected 0"},
        {"FF_FUSED_CTAS", "0", "FF_FUSED_CTAS '0': expected"},
        {"FF_FUSED_CTAS", "abc", "FF_FUSED_CTAS 'abc': expected"},
        {"FF_FUSED_CTAS", "1025", "FF_FUSED_CTAS '1025': expected"},
        {"FF_FUSED_CTAS", "16x", "FF_FUSED_CTAS '16x': expected"},
        {"FF_FUSED_EXCHANGE", "0", NULL},
        {"FF_FUSED_EXCHANGE", "", NULL},  // the default (on where it applies: never on a host comm)
        {"FF_FUSED_EXCHANGE", "1", NULL},
        {"FF_FUSED_CTAS", "1024", NULL},
        {"FF_FUSED_CTAS", "1", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        setenv(cases[i].var, cases[i].value, 1);  // before the rank threads start
        assert_int_equal(ff_comm_loopback_run(2, fused_env_body, (void *)cases[i].want), FF_OK);
        unsetenv(cases[i].var);
    }
}

static void host_comm_refuses_queueing(void **state) {
    (void)state;
    setenv("FF_FUSED_EXCHANGE", "1", 1);  // before the rank threads start (queue_body)
    for (int P = 1; P <= 3; P++) assert_int_equal(ff_comm_loopback_run(P, queue_body, NULL), FF_OK);
    unsetenv("FF_FUSED_EXCHANGE");
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

static void poison(float *p, size_t count) {
    for (size_t i = 0; i < count; i++) p[i] = NAN;
}

static float *serial_forward(const ff_model *m, const ff_weights *w, const float *in, int64_t n) {
    ff_exec_options o;
    ff_exec_options_default(&o);
    o.max_batch = n;
    ff_executor *e = NULL;
    assert_int_equal(ff_exec_create(&e, m, w, &o), FF_OK);
    float *out = malloc(sizeof(float) * (size_t)(m->classes * n));
    assert_non_null(out);
    assert_int_equal(ff_exec_forward(e, out, in, n, 0, m->n_layers - 1), FF_OK);
    ff_exec_destroy(e);
    return out;
}

// Messages from rank s to rank d over one forward of the rows split (every image group and
// windowed layer), counted from the plans the mpi mode builds (one partition per group).
static int pair_messages(const ff_model *m, int P, int64_t n, int s, int d) {
    const int G = n > P ? P : (int)n;
    int count = 0;
    for (int g = 0; g < G; g++) {
        ff_partition *p = NULL;
        ff_range imgs = ff_band(n, G, g);
        assert_int_equal(ff_partition_build_rotated(&p, m, 0, m->n_layers - 1, P, FF_SPLIT_ROWS, ff_range_len(imgs), g),
                         FF_OK);
        for (int i = 0; i < m->n_layers; i++)
            for (int64_t k = 0; k < p->layer[i].n_xfers; k++)
                count += p->layer[i].xfers[k].src == s && p->layer[i].xfers[k].dst == d;
        ff_partition_free(p);
    }
    return count;
}

// Every rank count P = 1..8 with batches that P does not divide (P + 1 and 2P - 1), every split,
// compared with serial element by element (bits) on an output poisoned with NaN first. At P = 8 and
// n = 9, the rows split has thin bands (3-4 rows of 28) and 8 image groups: ranks 0 and 1 exchange
// several messages within one forward (checked below), each matched to the right group and layer.
static void mpi_mode_every_rank_count_elementwise(void **state) {
    (void)state;
    ff_model m;
    assert_int_equal(ff_model_init(&m, "mnist-cnn"), FF_OK);
    ff_weights w;
    assert_int_equal(ff_weights_alloc(&w, &m), FF_OK);
    ff_weights_generate(&w, &m, 9);
    assert_true(pair_messages(&m, 8, 9, 1, 0) >= 4);
    assert_true(pair_messages(&m, 8, 9, 0, 1) >= 4);
    const ff_split splits[3] = {FF_SPLIT_BATCH, FF_SPLIT_ROWS, FF_SPLIT_REPLICATE};
    for (int P = 1; P <= 8; P++)
        for (int b = 0; b < 2; b++) {
            const int64_t n = b == 0 ? P + 1 : 2 * P - 1;
            float *in = malloc(sizeof(float) * (size_t)(ff_shape_numel(m.input) * n));
            assert_non_null(in);
            ff_input_generate(in, &m, n, (uint64_t)(100 + P));
            float *want = serial_forward(&m, &w, in, n);
            const size_t cnt = (size_t)(m.classes * n);
            float *out = malloc(sizeof(float) * cnt);
            assert_non_null(out);
            for (int si = 0; si < 3; si++) {
                poison(out, cnt);
                job j = {&m, &w, splits[si], n, 0, m.n_layers - 1, -1, in, out};
                assert_int_equal(ff_comm_loopback_run(P, mpi_body, &j), FF_OK);
                for (size_t k = 0; k < cnt; k++)
                    if (memcmp(&out[k], &want[k], sizeof(float)) != 0) {
                        print_error("split %s, P = %d, n = %lld: image %zu class %zu is %.9g, serial %.9g\n",
                                    ff_split_name(splits[si]), P, (long long)n, k / (size_t)m.classes,
                                    k % (size_t)m.classes, (double)out[k], (double)want[k]);
                        fail();
                    }
            }
            free(in), free(want), free(out);
        }
    ff_weights_free(&w);
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
                poison(out, cnt);  // an element the run does not write cannot keep a right value
                assert_int_equal(ff_comm_loopback_run(P, mpi_body, &j), FF_OK);
                assert_true(ff_digest_f32(out, cnt) == want);
                j.fault = last;  // fault applied once, by whichever rank owns element 0
                poison(out, cnt);
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
    assert_int_equal(ff_exec_create(&e, &m, NULL, &o), FF_ERR_INPUT);
    assert_non_null(strstr(ff_last_error(), "communicator"));
    assert_null(e);
}

// The executor's communication options: comm_timeout_s reaches the communicator (< 0 leaves it);
// the test hooks' rank and layer are checked, naming the flag and the range.
static ff_status exec_comm_options_body(ff_comm *c, void *arg) {
    const ff_weights *w = arg;
    ff_model m;
    FF_TRY(ff_model_init(&m, "mnist-cnn"));
    ff_exec_options o;
    ff_exec_options_default(&o);
    o.mode = FF_MODE_MPI;
    o.split = FF_SPLIT_ROWS;
    o.comm = c;
    ff_executor *e = NULL;
    const int me = ff_comm_rank(c);
    if (o.comm_timeout_s >= 0 || o.crash_rank != -1 || o.crash_layer != -1)
        return FF_FAIL(FF_ERR_INTERNAL, "defaults: comm_timeout_s %g, crash %d:%d", o.comm_timeout_s, o.crash_rank,
                       o.crash_layer);
    FF_TRY(ff_exec_create(&e, &m, me == 0 ? w : NULL, &o));
    ff_exec_destroy(e);
    if (ff_comm_timeout(c) != LOOPBACK_TIMEOUT_S)
        return FF_FAIL(FF_ERR_INTERNAL, "a default executor changed the timeout");
    o.comm_timeout_s = 7;
    FF_TRY(ff_exec_create(&e, &m, me == 0 ? w : NULL, &o));
    ff_exec_destroy(e);
    if (ff_comm_timeout(c) != 7) return FF_FAIL(FF_ERR_INTERNAL, "comm_timeout_s 7 gave %g", ff_comm_timeout(c));
    ff_comm_set_timeout(c, LOOPBACK_TIMEOUT_S);
    o.comm_timeout_s = -1;
    o.crash_rank = 2;  // of 2 ranks
    o.crash_layer = 1;
    if (ff_exec_create(&e, &m, me == 0 ? w : NULL, &o) != FF_ERR_INPUT ||
        !strstr(ff_last_error(), "--inject-crash: rank 2: expected 0..1 (the job has 2 ranks)"))
        return FF_FAIL(FF_ERR_INTERNAL, "crash rank 2 of 2 was not refused as expected");
    o.crash_rank = 1;
    o.crash_layer = m.n_layers;
    o.crash_hang = true;
    if (ff_exec_create(&e, &m, me == 0 ? w : NULL, &o) != FF_ERR_INPUT ||
        !strstr(ff_last_error(), "--inject-hang: layer 10: model mnist-cnn has layers 0..9"))
        return FF_FAIL(FF_ERR_INTERNAL, "hang layer 10 was not refused as expected");
    ff_clear_error();
    return FF_OK;
}

static void exec_comm_options(void **state) {
    (void)state;
    ff_model m;
    assert_int_equal(ff_model_init(&m, "mnist-cnn"), FF_OK);
    ff_weights w;
    assert_int_equal(ff_weights_alloc(&w, &m), FF_OK);
    ff_weights_generate(&w, &m, 3);
    ff_status st = ff_comm_loopback_run(2, exec_comm_options_body, &w);
    if (st != FF_OK) fail_msg("%s", ff_last_error());
    ff_weights_free(&w);
    // A single-process mode takes no hook.
    ff_exec_options o;
    ff_exec_options_default(&o);
    o.crash_rank = 0;
    o.crash_layer = 1;
    ff_executor *e = NULL;
    assert_int_equal(ff_exec_create(&e, &m, NULL, &o), FF_ERR_INPUT);
    assert_non_null(strstr(ff_last_error(), "--inject-crash: mode serial runs one process"));
}

int main(void) {
    // A wait with no progress fails after this long instead of 60 s: a broken exchange (the
    // mutation run breaks them on purpose) ends the test quickly; ranks here wait milliseconds.
    ff_comm_loopback_set_timeout(LOOPBACK_TIMEOUT_S);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(collectives),
        cmocka_unit_test(exchange_matches_in_list_order),
        cmocka_unit_test(misuse_fails_instead_of_hanging),
        cmocka_unit_test(set_timeout_is_per_rank),
        cmocka_unit_test(host_comm_refuses_queueing),
        cmocka_unit_test(allreduce_adds_in_rank_order),
        cmocka_unit_test(bus_bytes_use_collective_factors),
        cmocka_unit_test(mpi_mode_equals_serial),
        cmocka_unit_test(mpi_mode_every_rank_count_elementwise),
        cmocka_unit_test(mpi_mode_rejects_bad_options),
        cmocka_unit_test(exec_comm_options),
        cmocka_unit_test(fused_exchange_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
