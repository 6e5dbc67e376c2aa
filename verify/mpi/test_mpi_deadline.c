// Run under mpiexec -n P (P >= 1; the waiting cases need 2): the MPI backend's communication
// deadline (comm.h: ff_comm_set_timeout), directly on the comm, without the CLI:
//   1. the default is 30 s, and the setter and getter agree;
//   2. rank 0 receives from rank 1, which sends nothing yet: with a 1 s timeout rank 0 gets
//      FF_ERR_MPI within 1-3 s, naming rank 1; its cancelled receive then leaves the comm usable
//      (rank 1's late message arrives in a second exchange, not in the cancelled one);
//   3. a barrier rank 1 enters 2.5 s late: the others fail after 1 s naming the barrier and rank 1
//      (silent in the roll call); rank 1's late barrier still completes the abandoned one, and a
//      second barrier then passes on every rank.
// Plain checks like test_mpi_comm.c (not cmocka: a failed assertion on one rank must end the whole
// job at once, which MPI_Abort does). Each case prints PASS with the message it checked.
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fivefold/comm.h"
#include "fivefold/trace.h"

static int rank_;

static void fail(const char *what) {
    printf("FAIL rank %d: %s (last error: %s)\n", rank_, what, ff_last_error());
    fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

static void defaults(ff_comm *c) {
    if (ff_comm_timeout(c) != 30.0) fail("the default timeout is not 30 s");
    ff_comm_set_timeout(c, 2.5);
    if (ff_comm_timeout(c) != 2.5) fail("ff_comm_timeout after ff_comm_set_timeout(2.5)");
    ff_comm_set_timeout(c, 0);
    if (ff_comm_timeout(c) > 0) fail("ff_comm_timeout after ff_comm_set_timeout(0): expected no deadline");
    ff_comm_set_timeout(c, 30.0);
    if (rank_ == 0) printf("PASS default timeout 30 s; set/get agree\n");
}

static void receive_times_out(ff_comm *c) {
    const int me = ff_comm_rank(c);
    int x = 0;
    if (me == 0) {
        ff_comm_set_timeout(c, 1.0);
        ff_comm_msg r = {1, &x, sizeof x};
        const double t0 = ff_now();
        ff_status st = ff_comm_exchange(c, NULL, 0, &r, 1);
        const double took = ff_now() - t0;
        const char *msg = ff_last_error();
        if (st != FF_ERR_MPI) fail("a receive nobody sends to: expected FF_ERR_MPI");
        if (took < 0.9 || took > 3.0) {
            printf("FAIL rank 0: the receive failed after %.2f s, expected 1-3 s\n", took);
            fail("deadline");
        }
        if (!strstr(msg, "rank 0: no halo message from rank 1 for 1 s") || !strstr(msg, "rank 1 is lost or stopped"))
            fail("the timeout message does not name rank 0, the receive and rank 1");
        printf("PASS receive from silent rank 1: FF_ERR_MPI after %.2f s: %s\n", took, msg);
        ff_clear_error();
    }
    // Rank 1 has sent nothing so far: it waits here (outside the comm) until rank 0 gave up.
    MPI_Barrier(MPI_COMM_WORLD);
    // The cancelled receive took nothing: rank 1's message now reaches a new receive.
    ff_comm_set_timeout(c, 20.0);
    if (me == 1) {
        int v = 42;
        ff_comm_msg s = {0, &v, sizeof v};
        if (ff_comm_exchange(c, &s, 1, NULL, 0) != FF_OK) fail("rank 1's late send");
    } else if (me == 0) {
        ff_comm_msg r = {1, &x, sizeof x};
        if (ff_comm_exchange(c, NULL, 0, &r, 1) != FF_OK || x != 42) fail("the receive after a timeout");
        printf("PASS after the timeout the comm still works: rank 1's late message arrived (%d)\n", x);
    }
    ff_comm_set_timeout(c, 30.0);
    MPI_Barrier(MPI_COMM_WORLD);
}

static void barrier_times_out(ff_comm *c) {
    const int me = ff_comm_rank(c);
    if (me == 1) {
        sleep_s(2.5);  // late, and silent meanwhile (not in the comm: no answer to a roll call)
        if (ff_comm_barrier(c) != FF_OK) fail("rank 1's late barrier");
    } else {
        ff_comm_set_timeout(c, 1.0);
        const double t0 = ff_now();
        ff_status st = ff_comm_barrier(c);
        const double took = ff_now() - t0;
        const char *msg = ff_last_error();
        if (st != FF_ERR_MPI) fail("a barrier rank 1 enters 2.5 s late, timeout 1 s: expected FF_ERR_MPI");
        if (took < 0.9 || took > 2.4) {
            printf("FAIL rank %d: the barrier failed after %.2f s, expected 1-2.4 s\n", me, took);
            fail("deadline");
        }
        char head[64];
        snprintf(head, sizeof head, "rank %d: barrier made no progress for 1 s", me);
        if (!strstr(msg, head) || !strstr(msg, "rank 1 is lost or stopped"))
            fail("the timeout message does not name this rank, the barrier and rank 1");
        if (me == 0) printf("PASS barrier with rank 1 late: FF_ERR_MPI after %.2f s: %s\n", took, msg);
        ff_clear_error();
        ff_comm_set_timeout(c, 20.0);
    }
    // Rank 1's barrier met the abandoned ones: a second barrier passes everywhere.
    if (ff_comm_barrier(c) != FF_OK) fail("the barrier after a timed-out barrier");
    ff_comm_set_timeout(c, 30.0);
    if (me == 0) printf("PASS after the timed-out barrier a second barrier passes\n");
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    ff_comm *c = NULL;
    MPI_Comm world = MPI_COMM_WORLD;
    if (ff_comm_mpi_create(&c, &world) != FF_OK) fail("ff_comm_mpi_create");
    defaults(c);
    if (ff_comm_size(c) >= 2) {
        receive_times_out(c);
        barrier_times_out(c);
    } else {
        printf("(one rank: the waiting cases need 2)\n");
    }
    ff_comm_destroy(c);
    if (rank_ == 0) printf("all checks passed\n");
    MPI_Finalize();
    return 0;
}
