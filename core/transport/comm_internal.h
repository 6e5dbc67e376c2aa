// Private to the comm backends (comm.c, comm_mpi.c, comm_loopback.c): every ff_comm starts with
// this header, and the public functions in comm.c dispatch through its ops table.
#pragma once
#include "fivefold/comm.h"

typedef struct {
    ff_status (*exchange)(ff_comm *c, const ff_comm_msg *sends, int n_sends, const ff_comm_msg *recvs, int n_recvs);
    ff_status (*barrier)(ff_comm *c);
    ff_status (*bcast)(ff_comm *c, void *buf, size_t bytes, int root);
    ff_status (*gatherv)(ff_comm *c, void *recvbuf, const size_t *counts, const size_t *displs, const void *sendbuf,
                         size_t sendbytes, int root);
    ff_status (*scatterv)(ff_comm *c, void *recvbuf, size_t recvbytes, const void *sendbuf, const size_t *counts,
                          const size_t *displs, int root);
    ff_status (*allgatherv)(ff_comm *c, void *recvbuf, const size_t *counts, const size_t *displs, const void *sendbuf,
                            size_t sendbytes);
    ff_status (*alltoallv)(ff_comm *c, void *recvbuf, const size_t *recv_counts, const size_t *recv_displs,
                           const void *sendbuf, const size_t *send_counts, const size_t *send_displs);
    ff_status (*allreduce_sum_f64)(ff_comm *c, double *buf, size_t n);
    ff_status (*allreduce_max_i64)(ff_comm *c, int64_t *buf, size_t n);
    ff_status (*allreduce_sum_f32)(ff_comm *c, float *buf, size_t n);
    void (*destroy)(ff_comm *c);
} ff_comm_ops;

struct ff_comm {
    const ff_comm_ops *ops;
    int rank, size;
    // Logical payload this rank has sent to other ranks (not counting copies to itself):
    // point-to-point: the bytes of every send; bcast: root counts bytes*(P-1); gatherv: each
    // non-root its block; scatterv: root the blocks of the others; allgatherv: own block*(P-1);
    // alltoallv: the blocks for other ranks; allreduce: n*size*(P-1) (what a naive reduce moves).
    int64_t bytes_sent;
};
