// Run under mpiexec -n P (P <= 8): the MPI backend of comm.h through the same checks as the
// loopback backend, its error path (a truncated message comes back as FF_ERR_MPI with MPI's
// message, not an abort), and the mpi mode against the serial mode computed on rank 0, bit for
// bit, for every split, several layer ranges and the fault hook. Any failure prints the case and
// ends the whole job with MPI_Abort, so a failing rank never leaves the others hanging.
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_checks.h"
#include "fivefold/digest.h"
#include "fivefold/executor.h"
#include "fivefold/weights.h"

static int rank_;

static void fail(const char *what) {
    printf("FAIL rank %d: %s: %s\n", rank_, what, ff_last_error());
    fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, 1);
}
#define CHECK(expr, what)                \
    do {                                 \
        if ((expr) != FF_OK) fail(what); \
    } while (0)

static void truncated_message_is_an_error(ff_comm *c) {
    int me = ff_comm_rank(c), P = ff_comm_size(c);
    if (P < 2) return;
    int x[2] = {1, 2};
    ff_status st = FF_OK;
    if (me == 0) {
        ff_comm_msg s = {1, x, sizeof x};
        st = ff_comm_exchange(c, &s, 1, NULL, 0);
    } else if (me == 1) {
        ff_comm_msg r = {0, x, sizeof x[0]};  // room for half of what comes
        st = ff_comm_exchange(c, NULL, 0, &r, 1);
        if (st != FF_ERR_MPI) {
            printf("FAIL rank 1: a truncated message gave %s, expected FF_ERR_MPI\n", ff_status_name(st));
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        printf("PASS truncated message -> FF_ERR_MPI: %s\n", ff_last_error());
        st = FF_OK;
    }
    if (st != FF_OK) fail("sending the oversized message");
    CHECK(ff_comm_barrier(c), "barrier after the truncation check");
}

static void mpi_mode_equals_serial(ff_comm *c) {
    const int me = ff_comm_rank(c), P = ff_comm_size(c);
    ff_model m;
    CHECK(ff_model_init(&m, "mnist-cnn"), "model");
    ff_weights w;
    memset(&w, 0, sizeof w);
    const int64_t n = 3;
    float *in = NULL, *mid = NULL, *out = NULL, *ref = NULL;
    if (me == 0) {
        CHECK(ff_weights_alloc(&w, &m), "weights");
        ff_weights_generate(&w, &m, 11);
        in = malloc(sizeof(float) * (size_t)(ff_shape_numel(m.input) * n));
        mid = malloc(sizeof(float) * (size_t)(m.max_act * n));
        out = malloc(sizeof(float) * (size_t)(m.max_act * n));
        ref = malloc(sizeof(float) * (size_t)(m.max_act * n));
        ff_input_generate(in, &m, n, 11);
    }
    int conv2 = ff_model_find_layer(&m, "conv2"), pool1 = ff_model_find_layer(&m, "pool1");
    int fc1 = ff_model_find_layer(&m, "fc1");
    const int ranges[4][2] = {{0, m.n_layers - 1}, {conv2, conv2}, {conv2, fc1}, {pool1, pool1}};
    const ff_split splits[3] = {FF_SPLIT_BATCH, FF_SPLIT_ROWS, FF_SPLIT_REPLICATE};
    for (int ri = 0; ri < 4; ri++)
        for (int si = 0; si < 3; si++)
            for (int fault = 0; fault < 2; fault++) {
                int first = ranges[ri][0], last = ranges[ri][1];
                int fl = fault ? last : -1;
                size_t cnt = (size_t)(ff_shape_numel(m.layers[last].out) * n);
                if (me == 0) {  // serial: input of `first`, then the reference
                    ff_exec_options o;
                    ff_exec_options_default(&o);
                    o.max_batch = n;
                    o.fault_layer = fl;
                    ff_executor *e = NULL;
                    CHECK(ff_exec_create(&e, &m, &w, &o), "serial executor");
                    if (first > 0) {
                        ff_executor *e0 = NULL;
                        ff_exec_options o0 = o;
                        o0.fault_layer = -1;
                        CHECK(ff_exec_create(&e0, &m, &w, &o0), "serial executor");
                        CHECK(ff_exec_forward(e0, mid, in, n, 0, first - 1), "serial prefix");
                        ff_exec_destroy(e0);
                    } else {
                        memcpy(mid, in, sizeof(float) * (size_t)(ff_shape_numel(m.input) * n));
                    }
                    CHECK(ff_exec_forward(e, ref, mid, n, first, last), "serial forward");
                    ff_exec_destroy(e);
                }
                ff_exec_options o;
                ff_exec_options_default(&o);
                o.mode = FF_MODE_MPI;
                o.split = splits[si];
                o.max_batch = n;
                o.comm = c;
                o.fault_layer = fl;
                o.trace = true;
                ff_executor *e = NULL;
                CHECK(ff_exec_create(&e, &m, me == 0 ? &w : NULL, &o), "mpi executor");
                CHECK(ff_exec_forward(e, out, mid, n, first, last), "mpi forward");
                ff_exec_destroy(e);
                if (me == 0) {
                    uint64_t a = ff_digest_f32(ref, cnt), b = ff_digest_f32(out, cnt);
                    char ha[17], hb[17];
                    printf("%s mnist-cnn layers %s..%s split=%s P=%d%s: digest %s, serial %s\n",
                           a == b ? "PASS" : "FAIL", m.layers[first].name, m.layers[last].name,
                           ff_split_name(splits[si]), P, fault ? " fault" : "", ff_digest_hex(hb, b),
                           ff_digest_hex(ha, a));
                    if (a != b) {
                        fflush(stdout);
                        MPI_Abort(MPI_COMM_WORLD, 1);
                    }
                }
            }
    if (me == 0) {
        ff_weights_free(&w);
        free(in);
        free(mid);
        free(out);
        free(ref);
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    ff_comm *c = NULL;
    MPI_Comm world = MPI_COMM_WORLD;
    CHECK(ff_comm_mpi_create(&c, &world), "ff_comm_mpi_create");
    if (ff_comm_size(c) > 8) {
        if (rank_ == 0) printf("FAIL: this test runs with at most 8 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    CHECK(collectives_body(c, NULL), "collectives");
    int64_t bytes[8] = {0}, before = ff_comm_bytes_sent(c);
    CHECK(exchange_body(c, bytes), "exchange");
    if (ff_comm_size(c) > 1 && bytes[rank_] - before != 40) fail("bytes counted for the exchange");
    if (rank_ == 0) printf("PASS comm primitives over MPI, P=%d\n", ff_comm_size(c));
    truncated_message_is_an_error(c);
    mpi_mode_equals_serial(c);
    ff_comm_destroy(c);
    if (rank_ == 0) printf("all checks passed\n");
    MPI_Finalize();
    return 0;
}
