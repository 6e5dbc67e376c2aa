// Private to the comm backends (comm.c, comm_mpi.c, comm_loopback.c): every ff_comm starts with
// this header, and the public functions in comm.c dispatch through its ops table.
#pragma once
#include <stdbool.h>

#include "fivefold/comm.h"

typedef struct {
    const char *name;        // "mpi", "loopback", "nccl", "ipc"
    bool device_copies;      // moves device buffers itself (loopback: ff_device_copy_bytes; nccl, ipc);
                             // else comm.c stages them through host memory (comm_staged.c) unless the
                             // comm is device_native (a CUDA-aware MPI)
    const char *bound_name;  // ff_comm_transport_name while bound to a device
    bool reduces_device;     // allreduce_sum_f32 takes device memory (else comm.c stages it)
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
    // Queued collectives (comm.h, ff_comm_set_queued): NULL where the backend cannot queue.
    ff_status (*set_queued)(ff_comm *c, bool on);
    ff_status (*wait_queued)(ff_comm *c);
    // ff_comm_alloc_window (comm.h): NULL where the backend has no registered memory.
    ff_status (*alloc_window)(ff_comm *c, void **p, size_t bytes, const char *what);
    // ff_comm_fused_tree_sgd (comm.h): NULL where the backend has no fused exchange.
    ff_status (*fused_tree_sgd)(ff_comm *c, bool *done, float *w, float *mom, const float *row, int64_t count, float lr,
                                float momentum, float weight_decay, bool first);
} ff_comm_ops;

// The fused exchange's settings from the environment (comm.h ff_comm_fused_tree_sgd), read the same
// way by comm.c and the backend that has it: FF_FUSED_EXCHANGE 0 off, unset, "" or 1 on;
// FF_FUSED_CTAS its kernel's blocks, 1..FF_FUSED_CTAS_MAX (default FF_FUSED_CTAS_DEFAULT). Anything
// else is FF_ERR_INPUT naming the variable, its value and what was expected.
// The default: each block takes a multiprocessor from the backward's GEMMs for as long as the
// bucket's exchange runs, and NVLink loads need few of them. At P = 2 on two H200s the MLP's step
// took 14.27 ms with 16 blocks, 14.26 with 12, 14.40 with 32, 14.97 with 8 and 15.19 with one per
// multiprocessor (132), against 14.43 ms for the three-kernel exchange (bench/results/issue16-s20).
#define FF_FUSED_CTAS_DEFAULT 16
#define FF_FUSED_CTAS_MAX 1024
ff_status ff_comm_fused_env(bool *on, int *ctas);

struct ff_comm {
    const ff_comm_ops *ops;
    int rank, size;
    int local_rank, local_size;  // among the ranks of this node (loopback: every rank)
    // Logical payload this rank has sent to other ranks (not counting copies to itself):
    // point-to-point: the bytes of every send; bcast: root counts bytes*(P-1); gatherv: each
    // non-root its block; scatterv: root the blocks of the others; allgatherv: own block*(P-1);
    // alltoallv: the blocks for other ranks; allreduce: n*size*(P-1) (what a naive reduce moves).
    int64_t bytes_sent;
    int64_t p2p_bytes;  // the part of bytes_sent sent by ff_comm_exchange (halo rows)
    // nccl-tests' bus bytes: each operation's size S times its collective's factor (exchange and
    // bcast 1, gatherv/scatterv/allgatherv/alltoallv (P-1)/P, allreduce 2(P-1)/P), so that bus
    // bytes / time is the bus bandwidth, comparable across rank counts and with nccl-tests.
    double bus_bytes;
    bool device_native;     // device buffers go to the backend as they are (a CUDA-aware MPI)
    double timeout_s;       // a wait with no progress for this long fails (ff_comm_set_timeout); <= 0: none
    struct ff_device *dev;  // the device whose memory the buffers are (ff_comm_bind_device); NULL: host
    void *stage[2];         // comm_staged.c: host copies of the send and receive sides, page-locked
    size_t stage_cap[2];    // by dev (pinned: the device copies them by DMA at full speed)
    bool stage_pinned[2];
};

// A comm layered over `boot` (nccl, ipc): its ops, and boot's ranks and deadline.
void ff_comm_layer_over(ff_comm *c, const ff_comm_ops *ops, const ff_comm *boot);

// Who is silent, after a wait on the ranks of `boot` made no progress for `limit` s: a roll call
// over boot (an MPI comm; every rank that times out takes part, a lost or stopped one stays
// silent), then "rank 1 is lost or stopped (no answer in 0.75 s); rank 1: its process 4711 is
// stopped" or "every rank answered (...)". "" when boot is not MPI. For device comms (nccl), whose
// own waits cannot tell which peer is missing.
void ff_comm_silent_ranks(ff_comm *boot, double limit, char *out, size_t cap);

// A copy between buffers of this comm's memory (host memcpy, or the bound device's copy).
ff_status ff_comm_copy(ff_comm *c, void *dst, const void *src, size_t bytes);

// comm_staged.c: the same operations for a backend that only moves host memory, with every device
// buffer copied to a host stage first and back after.
ff_status ff_comm_staged_exchange(ff_comm *c, const ff_comm_msg *sends, int n_sends, const ff_comm_msg *recvs,
                                  int n_recvs);
ff_status ff_comm_staged_bcast(ff_comm *c, void *buf, size_t bytes, int root);
ff_status ff_comm_staged_gatherv(ff_comm *c, void *recvbuf, const size_t *counts, const size_t *displs,
                                 const void *sendbuf, size_t sendbytes, int root);
ff_status ff_comm_staged_scatterv(ff_comm *c, void *recvbuf, size_t recvbytes, const void *sendbuf,
                                  const size_t *counts, const size_t *displs, int root);
ff_status ff_comm_staged_allgatherv(ff_comm *c, void *recvbuf, const size_t *counts, const size_t *displs,
                                    const void *sendbuf, size_t sendbytes);
ff_status ff_comm_staged_alltoallv(ff_comm *c, void *recvbuf, const size_t *recv_counts, const size_t *recv_displs,
                                   const void *sendbuf, const size_t *send_counts, const size_t *send_displs);
ff_status ff_comm_staged_sum_f32(ff_comm *c, float *buf, size_t n);
void ff_comm_staged_free(ff_comm *c);
