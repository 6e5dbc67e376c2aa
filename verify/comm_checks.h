// Checks of the comm.h primitives, written once and run on both backends: the loopback one
// (verify/unit/test_comm_loopback.c) and real MPI (verify/mpi/test_mpi_comm.c). Each body returns
// FF_ERR_INTERNAL naming the first wrong value. Uneven and empty blocks on purpose.
#pragma once
#include <stdint.h>
#include <string.h>

#include "fivefold/comm.h"

// Rank r contributes (r % 3) blocks' worth: rank 0 and 3 send nothing (empty blocks).
static size_t block_of(int r) {
    return (size_t)(r % 3) * 3;
}
static unsigned char val(int from, int to, size_t i) {
    return (unsigned char)(from * 31 + to * 7 + i);
}

static ff_status collectives_body(ff_comm *c, void *arg) {
    (void)arg;
    const int me = ff_comm_rank(c), P = ff_comm_size(c);
    if (me >= P) return FF_FAIL(FF_ERR_INTERNAL, "rank %d of %d", me, P);
    // bcast from the last rank
    unsigned char b[5] = {0};
    if (me == P - 1) memcpy(b, "hello", 5);
    FF_TRY(ff_comm_bcast(c, b, 5, P - 1));
    if (memcmp(b, "hello", 5)) return FF_FAIL(FF_ERR_INTERNAL, "bcast: rank %d got wrong bytes", me);
    // counts/displs (same on every rank)
    size_t counts[8], displs[8], total = 0;
    for (int r = 0; r < P; r++) {
        counts[r] = block_of(r);
        displs[r] = total;
        total += counts[r];
    }
    unsigned char mine[8], all[64];
    for (size_t i = 0; i < block_of(me); i++) mine[i] = val(me, 0, i);
    // gatherv to rank 1 % P
    int root = 1 % P;
    memset(all, 0xee, sizeof all);
    FF_TRY(ff_comm_gatherv(c, all, counts, displs, mine, block_of(me), root));
    if (me == root)
        for (int r = 0; r < P; r++)
            for (size_t i = 0; i < counts[r]; i++)
                if (all[displs[r] + i] != val(r, 0, i))
                    return FF_FAIL(FF_ERR_INTERNAL, "gatherv: block %d byte %zu wrong", r, i);
    // allgatherv
    memset(all, 0xee, sizeof all);
    FF_TRY(ff_comm_allgatherv(c, all, counts, displs, mine, block_of(me)));
    for (int r = 0; r < P; r++)
        for (size_t i = 0; i < counts[r]; i++)
            if (all[displs[r] + i] != val(r, 0, i))
                return FF_FAIL(FF_ERR_INTERNAL, "allgatherv: rank %d, block %d byte %zu", me, r, i);
    if (all[total] != 0xee) return FF_FAIL(FF_ERR_INTERNAL, "allgatherv wrote past the end");
    // scatterv from rank 0: rank r gets val(0, r, i)
    unsigned char src[64], got[8];
    for (int r = 0; r < P; r++)
        for (size_t i = 0; i < counts[r]; i++) src[displs[r] + i] = val(0, r, i);
    FF_TRY(ff_comm_scatterv(c, got, block_of(me), me == 0 ? src : NULL, counts, displs, 0));
    for (size_t i = 0; i < block_of(me); i++)
        if (got[i] != val(0, me, i)) return FF_FAIL(FF_ERR_INTERNAL, "scatterv: rank %d", me);
    // alltoallv: rank s sends (s + d) % 3 bytes to d
    size_t sc[8], sd[8], rc[8], rd[8], st = 0, rt = 0;
    unsigned char sb[64], rb[64];
    for (int d = 0; d < P; d++) {
        sc[d] = (size_t)(me + d) % 3;
        sd[d] = st;
        for (size_t i = 0; i < sc[d]; i++) sb[st + i] = val(me, d, i);
        st += sc[d];
        rc[d] = (size_t)(d + me) % 3;
        rd[d] = rt;
        rt += rc[d];
    }
    FF_TRY(ff_comm_alltoallv(c, rb, rc, rd, sb, sc, sd));
    for (int s = 0; s < P; s++)
        for (size_t i = 0; i < rc[s]; i++)
            if (rb[rd[s] + i] != val(s, me, i))
                return FF_FAIL(FF_ERR_INTERNAL, "alltoallv: rank %d from %d byte %zu", me, s, i);
    // all-reduces
    double d[2] = {me + 0.5, -me};
    FF_TRY(ff_comm_allreduce_sum_f64(c, d, 2));
    if (d[0] != P * (P - 1) / 2.0 + 0.5 * P || d[1] != -P * (P - 1) / 2.0)
        return FF_FAIL(FF_ERR_INTERNAL, "allreduce f64: rank %d got %g %g", me, d[0], d[1]);
    int64_t mx[2] = {me * 10, -me};
    FF_TRY(ff_comm_allreduce_max_i64(c, mx, 2));
    if (mx[0] != (P - 1) * 10 || mx[1] != 0) return FF_FAIL(FF_ERR_INTERNAL, "allreduce max: rank %d", me);
    float f[3] = {1.0f, (float)me, 0.25f};
    FF_TRY(ff_comm_allreduce_sum_f32(c, f, 3));
    if (f[0] != (float)P || f[1] != (float)(P * (P - 1) / 2) || f[2] != 0.25f * P)
        return FF_FAIL(FF_ERR_INTERNAL, "allreduce f32: rank %d", me);
    FF_TRY(ff_comm_barrier(c));
    return FF_OK;
}

// Exchange: each rank sends two messages of different sizes to each neighbour (and a zero-byte
// one); the i-th receive from a peer must match that peer's i-th send.
static ff_status exchange_body(ff_comm *c, void *arg) {
    int64_t *bytes_out = arg;
    const int me = ff_comm_rank(c), P = ff_comm_size(c);
    int right = (me + 1) % P, left = (me + P - 1) % P;
    int a[3] = {me * 100 + 1, me * 100 + 2, me * 100 + 3}, b[2] = {me * 100 + 4, me * 100 + 5};
    int ra[2][3], rb[2][2];
    ff_comm_msg s[5] = {
        {right, a, sizeof a}, {right, b, sizeof b}, {left, a, sizeof a}, {left, b, sizeof b}, {right, NULL, 0}};
    ff_comm_msg r[5] = {{left, ra[0], sizeof ra[0]},
                        {left, rb[0], sizeof rb[0]},
                        {right, ra[1], sizeof ra[1]},
                        {right, rb[1], sizeof rb[1]},
                        {left, NULL, 0}};
    FF_TRY(ff_comm_exchange(c, s, 5, r, 5));
    for (int k = 0; k < 2; k++) {
        int from = k ? right : left;
        if (ra[k][0] != from * 100 + 1 || ra[k][2] != from * 100 + 3 || rb[k][1] != from * 100 + 5)
            return FF_FAIL(FF_ERR_INTERNAL, "exchange: rank %d, messages from %d out of order", me, from);
    }
    bytes_out[me] = ff_comm_bytes_sent(c);
    return FF_OK;
}
