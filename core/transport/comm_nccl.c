// NCCL backend of comm.h (the direct mode's transport, docs/ARCHITECTURE.md §7): device buffers go
// to NCCL as they are, on the comm's own stream; host-memory work goes through the bootstrap comm.
//
// Why it looks like this:
//  - NCCL has no v-collectives. gatherv/scatterv/alltoallv are one group of ncclSend/ncclRecv;
//    allgatherv is ncclAllGather when the blocks are equal and contiguous, else one group of
//    ncclBroadcast calls (one per root), which NCCL runs as one fused operation.
//  - Every wait is a poll, never a blocking call: the communicator is created non-blocking
//    (config.blocking = 0), and completion is cudaStreamQuery on the comm's stream interleaved with
//    ncclCommGetAsyncError, against the comm's deadline. A peer that died or stopped therefore ends
//    in an error naming this rank and the operation, with the communicator aborted
//    (ncclCommAbort), instead of a kernel spinning forever.
//  - The decomposition synchronises its device before each call (comm.h), so the comm's stream
//    needs no event from the device's stream; each call returns with its data landed. Queued
//    (ff_comm_set_queued, the training step's exchange) the calls go on the device's own current
//    stream instead, ordered with its kernels by the stream itself, and return once NCCL has the
//    work; ff_comm_wait_queued is then the one poll (against the deadline) for the whole step.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm_internal.h"
#include "fivefold/trace.h"

#ifndef FF_HAVE_NCCL

bool ff_comm_nccl_built(void) {
    return false;
}
ff_status ff_comm_nccl_create(ff_comm **out, ff_comm *boot) {
    (void)boot;
    *out = NULL;
    return FF_FAIL(FF_ERR_NO_CUDA, "this build of fivefold has no NCCL (CMake found no nccl.h/libnccl)");
}

#else

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <sched.h>
#include <time.h>

#include "comm_nccl_lsa.h"
#include "fivefold/device.h"
#include "fivefold/gpu.h"

// Symmetric windows (ff_comm_alloc_window) came with NCCL 2.27; the CTA policy (copy-engine
// collectives on them) and ncclAlltoAll with 2.28.
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
#define FF_NCCL_WINDOWS 1
#endif
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
#define FF_NCCL_CTA_POLICY 1
#endif

typedef struct {
    char *p;  // (bytes) from ncclMemAlloc
    size_t bytes;
#ifdef FF_NCCL_WINDOWS
    ncclWindow_t win;
#endif
} nccl_window;

typedef struct {
    ff_comm base;
    ff_comm *boot;  // host memory: barrier, f64/i64 all-reduces, everything while unbound
    ncclComm_t nc;
    cudaStream_t stream;
    bool aborted;
    bool peer_failed;  // a bootstrap operation failed (boot_done): tear down by abort, not finalize
    bool queued;       // ff_comm_set_queued: device collectives go on the bound device's current stream
    bool windows_off;  // a registration failed on some rank: plain memory from then on
    nccl_window *win;  // (n_win) every registered window, deregistered and freed at destroy
    int n_win, cap_win;
#ifdef FF_NCCL_LSA
    // The fused exchange (nc_fused_tree_sgd): the device communicator, set up with the first window
    // where every rank agreed it works; the buckets whose fusing every rank agreed on (or refused).
    ff_nccl_lsa *lsa;
    bool lsa_tried;
    struct fuse_seen {
        const float *row, *w;
        int64_t count;
        bool ok;
    } fuse_seen[32];
    int n_fuse_seen;
#endif
} ff_comm_nccl;

static ff_comm_nccl *nccl_of(ff_comm *c) {
    return (ff_comm_nccl *)c;
}

bool ff_comm_nccl_built(void) {
    return true;
}

static ff_status nccl_fail(ff_comm_nccl *n, ncclResult_t r, const char *file, int line, const char *what) {
    const char *last = n && n->nc ? ncclGetLastError(n->nc) : "";
    return ff_fail(FF_ERR_NCCL, file, line, "rank %d: NCCL %s failed: %s%s%s", n ? n->base.rank : -1, what,
                   ncclGetErrorString(r), last && *last ? ": " : "", last ? last : "");
}
#define NCCL_TRY(n, call, what)                                                                                    \
    do {                                                                                                           \
        ncclResult_t ff_r_ = (call);                                                                               \
        if (ff_r_ != ncclSuccess && ff_r_ != ncclInProgress) return nccl_fail(n, ff_r_, __FILE__, __LINE__, what); \
    } while (0)

static void backoff(int spins) {
    if (spins < 2000) return;  // the first ~ms: spin (a halo is tens of microseconds)
    if (spins < 4000) {
        sched_yield();
        return;
    }
    struct timespec ts = {0, 50000};  // then 50 us naps: a waiting rank leaves its core to others
    nanosleep(&ts, NULL);
}

// Aborts the communicator (once) after telling any fused exchange kernel that waits for a lost
// rank to give up: NCCL's abort stops only NCCL's own kernels.
static void abort_comm(ff_comm_nccl *n) {
#ifdef FF_NCCL_LSA
    ff_nccl_lsa_abort(n->lsa);
#endif
    if (n->nc && !n->aborted) ncclCommAbort(n->nc);
    n->aborted = true;
}

// Waits until NCCL has enqueued the group (non-blocking comms return ncclInProgress) and, given a
// `stream`, until the stream has run it; polls the asynchronous error against the deadline.
static ff_status nccl_wait(ff_comm_nccl *n, const char *what, cudaStream_t stream) {
    const double t0 = ff_now(), limit = n->base.timeout_s;
    for (int spins = 0;; spins++) {
        ncclResult_t ar = ncclSuccess;
        ncclResult_t r = ncclCommGetAsyncError(n->nc, &ar);
        if (r != ncclSuccess) return nccl_fail(n, r, __FILE__, __LINE__, "ncclCommGetAsyncError");
        if (ar != ncclSuccess && ar != ncclInProgress) {
            ff_status st = nccl_fail(n, ar, __FILE__, __LINE__, what);
            abort_comm(n);
            return ff_fail_context(st, "a peer of rank %d failed or left: communicator aborted", n->base.rank);
        }
        if (ar == ncclSuccess) {
            if (!stream) return FF_OK;
            cudaError_t e = cudaStreamQuery(stream);
            if (e == cudaSuccess) return FF_OK;
            if (e != cudaErrorNotReady)
                return FF_FAIL(FF_ERR_CUDA, "rank %d: NCCL %s: %s", n->base.rank, what, cudaGetErrorString(e));
        }
        if (limit > 0 && ff_now() - t0 > limit) {
            abort_comm(n);
            // NCCL cannot say which peer it waits for; a roll call over the bootstrap can: every
            // live rank times out too and answers, a lost or stopped one does not.
            char who[900];
            ff_comm_silent_ranks(n->boot, limit, who, sizeof who);
            return FF_FAIL(FF_ERR_MPI,
                           "rank %d: NCCL %s made no progress for %g s%s%s (communicator aborted; --comm-timeout "
                           "sets the limit)",
                           n->base.rank, what, limit, who[0] == '(' || !who[0] ? " " : ": ",
                           who[0] ? who : "(a peer rank is lost or stopped)");
        }
        backoff(spins);
    }
}

// Where a device collective goes: the comm's own stream (the caller synchronised its device
// first, and the call waits for the stream), or, queued, the device's current stream, after the
// device's pending work and before what it enqueues next (the call waits only until NCCL has
// taken the work).
static cudaStream_t op_stream(ff_comm_nccl *n) {
    return n->queued ? (cudaStream_t)ff_device_gpu_stream(n->base.dev) : n->stream;
}

static ff_status op_wait(ff_comm_nccl *n, const char *what) {
    return nccl_wait(n, what, n->queued ? NULL : n->stream);
}

#ifdef FF_NCCL_CTA_POLICY
// Whether [p, p + bytes) lies inside one registered window.
static bool in_window(const ff_comm_nccl *n, const void *p, size_t bytes) {
    for (int i = 0; i < n->n_win; i++)
        if ((const char *)p >= n->win[i].p && (const char *)p + bytes <= n->win[i].p + n->win[i].bytes) return true;
    return false;
}
#endif

// What the bootstrap comm (host memory, MPI) answered: a failure there (a peer that stopped
// answering, found by its deadline) leaves the NCCL communicator with a peer it cannot finalize with,
// so nc_destroy aborts instead of finalizing (ncclCommWindowDeregister and ncclCommDestroy would
// wait for the lost rank with no deadline of their own).
static ff_status boot_done(ff_comm_nccl *n, ff_status st) {
    if (st != FF_OK) n->peer_failed = true;
    return st;
}

static ff_status usable(ff_comm_nccl *n, const char *what) {
    if (n->aborted)
        return FF_FAIL(FF_ERR_NCCL, "rank %d: NCCL %s: the communicator was aborted by an earlier failure",
                       n->base.rank, what);
    return FF_OK;
}

// ncclGroupEnd, then the wait for the whole group.
static ff_status group_end(ff_comm_nccl *n, const char *what) {
    NCCL_TRY(n, ncclGroupEnd(), what);
    return op_wait(n, what);
}

static ff_status d2d(ff_comm_nccl *n, void *dst, const void *src, size_t bytes) {
    if (!bytes || dst == src) return FF_OK;
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, op_stream(n));
    if (e != cudaSuccess)
        return FF_FAIL(FF_ERR_CUDA, "rank %d: device copy of %zu bytes: %s", n->base.rank, bytes,
                       cudaGetErrorString(e));
    return FF_OK;
}

static ff_status nc_exchange(ff_comm *c, const ff_comm_msg *sends, int n_sends, const ff_comm_msg *recvs, int n_recvs) {
    ff_comm_nccl *n = nccl_of(c);
    if (!c->dev) return boot_done(n, n->boot->ops->exchange(n->boot, sends, n_sends, recvs, n_recvs));
    FF_TRY(usable(n, "halo exchange"));
    // Messages between one pair are matched in the order they are posted (NCCL's rule for
    // send/recv in a group), which is comm.h's order; empty messages are skipped on both sides.
    NCCL_TRY(n, ncclGroupStart(), "halo exchange");
    for (int i = 0; i < n_recvs; i++)
        if (recvs[i].bytes)
            NCCL_TRY(n, ncclRecv(recvs[i].buf, recvs[i].bytes, ncclUint8, recvs[i].peer, n->nc, op_stream(n)),
                     "ncclRecv");
    for (int i = 0; i < n_sends; i++)
        if (sends[i].bytes)
            NCCL_TRY(n, ncclSend(sends[i].buf, sends[i].bytes, ncclUint8, sends[i].peer, n->nc, op_stream(n)),
                     "ncclSend");
    return group_end(n, "halo exchange (grouped send/recv)");
}

static ff_status nc_barrier(ff_comm *c) {
    ff_comm_nccl *n = nccl_of(c);
    return boot_done(n, n->boot->ops->barrier(n->boot));
}

static ff_status nc_bcast(ff_comm *c, void *buf, size_t bytes, int root) {
    ff_comm_nccl *n = nccl_of(c);
    if (!c->dev) return boot_done(n, n->boot->ops->bcast(n->boot, buf, bytes, root));
    FF_TRY(usable(n, "broadcast"));
    NCCL_TRY(n, ncclBroadcast(buf, buf, bytes, ncclUint8, root, n->nc, op_stream(n)), "ncclBroadcast");
    return op_wait(n, "broadcast");
}

static ff_status nc_gatherv(ff_comm *c, void *recvbuf, const size_t *counts, const size_t *displs, const void *sendbuf,
                            size_t sendbytes, int root) {
    ff_comm_nccl *n = nccl_of(c);
    if (!c->dev) return boot_done(n, n->boot->ops->gatherv(n->boot, recvbuf, counts, displs, sendbuf, sendbytes, root));
    FF_TRY(usable(n, "gather"));
    const int me = c->rank;
    NCCL_TRY(n, ncclGroupStart(), "gather");
    if (me == root) {
        for (int r = 0; r < c->size; r++)
            if (r != me && counts[r])
                NCCL_TRY(n, ncclRecv((char *)recvbuf + displs[r], counts[r], ncclUint8, r, n->nc, op_stream(n)),
                         "ncclRecv");
    } else if (sendbytes) {
        NCCL_TRY(n, ncclSend(sendbuf, sendbytes, ncclUint8, root, n->nc, op_stream(n)), "ncclSend");
    }
    NCCL_TRY(n, ncclGroupEnd(), "gather");
    if (me == root) FF_TRY(d2d(n, (char *)recvbuf + displs[me], sendbuf, counts[me]));
    return op_wait(n, "gather (grouped send/recv)");
}

static ff_status nc_scatterv(ff_comm *c, void *recvbuf, size_t recvbytes, const void *sendbuf, const size_t *counts,
                             const size_t *displs, int root) {
    ff_comm_nccl *n = nccl_of(c);
    if (!c->dev)
        return boot_done(n, n->boot->ops->scatterv(n->boot, recvbuf, recvbytes, sendbuf, counts, displs, root));
    FF_TRY(usable(n, "scatter"));
    const int me = c->rank;
    NCCL_TRY(n, ncclGroupStart(), "scatter");
    if (me == root) {
        for (int r = 0; r < c->size; r++)
            if (r != me && counts[r])
                NCCL_TRY(n, ncclSend((const char *)sendbuf + displs[r], counts[r], ncclUint8, r, n->nc, op_stream(n)),
                         "ncclSend");
    } else if (recvbytes) {
        NCCL_TRY(n, ncclRecv(recvbuf, recvbytes, ncclUint8, root, n->nc, op_stream(n)), "ncclRecv");
    }
    NCCL_TRY(n, ncclGroupEnd(), "scatter");
    if (me == root) FF_TRY(d2d(n, recvbuf, (const char *)sendbuf + displs[me], counts[me]));
    return op_wait(n, "scatter (grouped send/recv)");
}

static ff_status nc_allgatherv(ff_comm *c, void *recvbuf, const size_t *counts, const size_t *displs,
                               const void *sendbuf, size_t sendbytes) {
    ff_comm_nccl *n = nccl_of(c);
    if (!c->dev) return boot_done(n, n->boot->ops->allgatherv(n->boot, recvbuf, counts, displs, sendbuf, sendbytes));
    FF_TRY(usable(n, "all-gather"));
    bool equal = true;
    for (int r = 0; r < c->size; r++) equal = equal && counts[r] == counts[0] && displs[r] == (size_t)r * counts[0];
    if (equal) {
        if (counts[0])
            NCCL_TRY(n, ncclAllGather(sendbuf, recvbuf, counts[0], ncclUint8, n->nc, op_stream(n)), "ncclAllGather");
        return op_wait(n, "all-gather");
    }
    NCCL_TRY(n, ncclGroupStart(), "all-gather");
    for (int r = 0; r < c->size; r++) {
        if (!counts[r]) continue;
        void *dst = (char *)recvbuf + displs[r];
        NCCL_TRY(n, ncclBroadcast(r == c->rank ? sendbuf : dst, dst, counts[r], ncclUint8, r, n->nc, op_stream(n)),
                 "ncclBroadcast");
    }
    return group_end(n, "all-gather (grouped broadcasts)");
}

static ff_status nc_alltoallv(ff_comm *c, void *recvbuf, const size_t *recv_counts, const size_t *recv_displs,
                              const void *sendbuf, const size_t *send_counts, const size_t *send_displs) {
    ff_comm_nccl *n = nccl_of(c);
    if (!c->dev)
        return boot_done(
            n, n->boot->ops->alltoallv(n->boot, recvbuf, recv_counts, recv_displs, sendbuf, send_counts, send_displs));
    FF_TRY(usable(n, "all-to-all"));
    const int me = c->rank;
#ifdef FF_NCCL_CTA_POLICY
    // Equal, contiguous blocks in registered windows: NCCL's own all-to-all, which can run on the
    // copy engines (FF_NCCL_CTA_POLICY=zero); the grouped send/recv below cannot.
    bool equal = send_counts[0] > 0;
    for (int r = 0; r < c->size; r++)
        equal = equal && send_counts[r] == send_counts[0] && recv_counts[r] == send_counts[0] &&
                send_displs[r] == (size_t)r * send_counts[0] && recv_displs[r] == (size_t)r * send_counts[0];
    if (equal && in_window(n, sendbuf, (size_t)c->size * send_counts[0]) &&
        in_window(n, recvbuf, (size_t)c->size * send_counts[0])) {
        NCCL_TRY(n, ncclAlltoAll(sendbuf, recvbuf, send_counts[0], ncclUint8, n->nc, op_stream(n)), "ncclAlltoAll");
        return op_wait(n, "all-to-all");
    }
#endif
    NCCL_TRY(n, ncclGroupStart(), "all-to-all");
    for (int r = 0; r < c->size; r++) {
        if (r == me) continue;
        if (recv_counts[r])
            NCCL_TRY(n, ncclRecv((char *)recvbuf + recv_displs[r], recv_counts[r], ncclUint8, r, n->nc, op_stream(n)),
                     "ncclRecv");
        if (send_counts[r])
            NCCL_TRY(
                n, ncclSend((const char *)sendbuf + send_displs[r], send_counts[r], ncclUint8, r, n->nc, op_stream(n)),
                "ncclSend");
    }
    NCCL_TRY(n, ncclGroupEnd(), "all-to-all");
    FF_TRY(d2d(n, (char *)recvbuf + recv_displs[me], (const char *)sendbuf + send_displs[me], send_counts[me]));
    return op_wait(n, "all-to-all (grouped send/recv)");
}

static ff_status nc_sum_f64(ff_comm *c, double *buf, size_t k) {
    ff_comm_nccl *n = nccl_of(c);
    return boot_done(n, n->boot->ops->allreduce_sum_f64(n->boot, buf, k));
}
static ff_status nc_max_i64(ff_comm *c, int64_t *buf, size_t k) {
    ff_comm_nccl *n = nccl_of(c);
    return boot_done(n, n->boot->ops->allreduce_max_i64(n->boot, buf, k));
}
static ff_status nc_sum_f32(ff_comm *c, float *buf, size_t k) {
    ff_comm_nccl *n = nccl_of(c);
    if (!c->dev) return boot_done(n, n->boot->ops->allreduce_sum_f32(n->boot, buf, k));
    FF_TRY(usable(n, "all-reduce"));
    NCCL_TRY(n, ncclAllReduce(buf, buf, k, ncclFloat, ncclSum, n->nc, op_stream(n)), "ncclAllReduce");
    return op_wait(n, "all-reduce");
}

static ff_status nc_set_queued(ff_comm *c, bool on) {
    ff_comm_nccl *n = nccl_of(c);
    if (on) FF_TRY(usable(n, "queued collectives"));
    n->queued = on;
    return FF_OK;
}

// The device's current stream drained, polled like every other wait: the deadline counts from
// this call (a queued step is milliseconds of work; a peer that stopped leaves NCCL's kernels
// spinning, which only the abort ends).
static ff_status nc_wait_queued(ff_comm *c) {
    ff_comm_nccl *n = nccl_of(c);
    FF_TRY(usable(n, "queued step"));
    return nccl_wait(n, "queued step (device work and its collectives)", (cudaStream_t)ff_device_gpu_stream(c->dev));
}

#ifdef FF_NCCL_LSA
static ff_status lsa_setup(ff_comm_nccl *n);
#endif

// ff_comm_alloc_window (comm.h). Every rank allocates, then all agree over the bootstrap comm
// (host memory, no NCCL) before the collective registration: a rank whose allocation failed must
// not leave the others waiting in ncclCommWindowRegister. An allocation that failed anywhere turns
// windows off on every rank (plain memory from then on, the same bits: only how NCCL moves them
// changes); a registration that fails is an error.
static ff_status nc_alloc_window(ff_comm *c, void **p, size_t bytes, const char *what) {
    ff_comm_nccl *n = nccl_of(c);
    *p = NULL;
#ifndef FF_NCCL_WINDOWS
    (void)n, (void)bytes, (void)what;
    return FF_OK;
#else
    if (n->windows_off) return FF_OK;
    FF_TRY(usable(n, "window registration"));
    if (n->n_win == n->cap_win) {
        const int cap = n->cap_win ? 2 * n->cap_win : 8;
        nccl_window *w = realloc(n->win, (size_t)cap * sizeof *w);
        if (!w) return FF_FAIL(FF_ERR_OOM, "comm: %zu bytes for the window table", (size_t)cap * sizeof *w);
        n->win = w;
        n->cap_win = cap;
    }
    void *mem = NULL;
    int64_t failed = ncclMemAlloc(&mem, bytes) != ncclSuccess;
    if (failed) mem = NULL;
    FF_TRY(boot_done(n, n->boot->ops->allreduce_max_i64(n->boot, &failed, 1)));
    if (failed) {  // on every rank: plain memory instead, now and from now on
        if (mem) ncclMemFree(mem);
        n->windows_off = true;
        return FF_OK;
    }
    // Every rank registers now. One whose registration fails returns the error; the others' wait
    // for it ends at the deadline (nccl_wait), naming the silent rank, so nothing hangs.
    ncclWindow_t win = NULL;
    ncclResult_t r = ncclCommWindowRegister(n->nc, mem, bytes, &win, NCCL_WIN_COLL_SYMMETRIC);
    ff_status st = r == ncclSuccess || r == ncclInProgress
                       ? nccl_wait(n, "window registration", NULL)
                       : nccl_fail(n, r, __FILE__, __LINE__, "ncclCommWindowRegister");
    if (st == FF_OK && !win) st = FF_FAIL(FF_ERR_NCCL, "rank %d: ncclCommWindowRegister returned no window", c->rank);
    if (st != FF_OK) {
        ncclMemFree(mem);
        return ff_fail_context(st, "registering %zu bytes for %s", bytes, what);
    }
    n->win[n->n_win++] = (nccl_window){(char *)mem, bytes, win};
    *p = mem;
#ifdef FF_NCCL_LSA
    FF_TRY(lsa_setup(n));
#endif
    return FF_OK;
#endif
}

#ifdef FF_NCCL_LSA
// The registered window that holds [p, p + bytes), NULL where none does.
static const nccl_window *window_of(const ff_comm_nccl *n, const void *p, size_t bytes) {
    for (int i = 0; i < n->n_win; i++)
        if ((const char *)p >= n->win[i].p && (const char *)p + bytes <= n->win[i].p + n->win[i].bytes)
            return &n->win[i];
    return NULL;
}

// The device communicator of the fused exchange, with the first window (collective), unless
// FF_FUSED_EXCHANGE=0 turns it off (ff_comm_fused_env).
// Every rank must agree, or a rank that fuses would wait in its kernel's barrier for one that does
// not: a failure anywhere, or ranks that are not all load/store accessible together (more than one
// node), leaves it off on every rank (the run says so: fused_buckets 0).
static ff_status lsa_setup(ff_comm_nccl *n) {
    if (n->lsa_tried) return FF_OK;
    n->lsa_tried = true;
    bool on;
    int ctas;
    FF_TRY(ff_comm_fused_env(&on, &ctas));  // the same on every rank (mpiexec passes the environment)
    if (!on) return FF_OK;
    ff_nccl_lsa *lsa = NULL;
    const ncclResult_t r = ff_nccl_lsa_create(&lsa, n->nc, ctas);
    int64_t bad = r != ncclSuccess && r != ncclInProgress;  // (then lsa is NULL)
    if (!bad) {  // (2.28.3 may return ncclSuccess with the set-up still in progress)
        ff_status st = nccl_wait(n, "device communicator set-up", NULL);
        if (st != FF_OK) {  // an asynchronous error: the communicator is aborted, the job ends
            ff_nccl_lsa_destroy(lsa, NULL);
            return st;
        }
        bad = ff_nccl_lsa_size(lsa) != n->base.size || n->base.size > FF_NCCL_LSA_MAX_RANKS;
    }
    FF_TRY(boot_done(n, n->boot->ops->allreduce_max_i64(n->boot, &bad, 1)));
    if (bad) {
        ff_nccl_lsa_destroy(lsa, n->nc);
        return FF_OK;
    }
    n->lsa = lsa;
    return FF_OK;
}

// ff_comm_fused_tree_sgd (comm.h) on NCCL's device API (comm_nccl_lsa.cu). Whether a bucket can
// fuse depends on each rank's slice (its alignment), so the ranks agree over the bootstrap comm,
// once per bucket (a step's exchange repeats the same buckets).
static ff_status nc_fused_tree_sgd(ff_comm *c, bool *done, float *w, float *mom, const float *row, int64_t count,
                                   float lr, float momentum, float weight_decay, bool first) {
    ff_comm_nccl *n = nccl_of(c);
    *done = false;
    if (!n->lsa || !n->queued) return FF_OK;  // the same on every rank (set-up agreed; the trainer queues all)
    FF_TRY(usable(n, "fused exchange"));
    const size_t bytes = (size_t)count * sizeof(float);
    const nccl_window *rw = window_of(n, row, bytes), *ww = window_of(n, w, bytes);
    int seen = -1;
    for (int i = 0; i < n->n_fuse_seen; i++)
        if (n->fuse_seen[i].row == row && n->fuse_seen[i].w == w && n->fuse_seen[i].count == count) seen = i;
    bool ok;
    if (seen >= 0) {
        ok = n->fuse_seen[seen].ok;
    } else {
        int64_t cannot = !rw || !ww || ((uintptr_t)row | (uintptr_t)w | (uintptr_t)mom) % 16 != 0;
        FF_TRY(boot_done(n, n->boot->ops->allreduce_max_i64(n->boot, &cannot, 1)));
        ok = !cannot;
        if (n->n_fuse_seen < (int)(sizeof n->fuse_seen / sizeof n->fuse_seen[0]))
            n->fuse_seen[n->n_fuse_seen++] = (struct fuse_seen){row, w, count, ok};
    }
    if (!ok) return FF_OK;
    cudaError_t e = ff_nccl_lsa_tree_sgd(n->lsa, rw->win, (size_t)((const char *)row - rw->p), ww->win,
                                         (size_t)((const char *)w - ww->p), mom, count, lr, momentum, weight_decay,
                                         first, op_stream(n));
    if (e != cudaSuccess) return FF_FAIL(FF_ERR_CUDA, "rank %d: fused exchange: %s", c->rank, cudaGetErrorString(e));
    n->base.bytes_sent += (int64_t)bytes * (c->size - 1) * 2;  // the peers' slices read, the weights stored
    *done = true;
    return FF_OK;
}
#endif

static void nc_destroy(ff_comm *c) {
    ff_comm_nccl *n = nccl_of(c);
    // A peer lost (a bootstrap deadline passed): deregistration, finalize and destroy are
    // collective and would wait for it forever; abort, after releasing any fused kernel that waits
    // for it in a barrier.
    if (n->peer_failed) abort_comm(n);
#ifdef FF_NCCL_LSA
    ff_nccl_lsa_destroy(n->lsa, n->nc && !n->aborted ? n->nc : NULL);
    n->lsa = NULL;
#endif
#ifdef FF_NCCL_WINDOWS
    // Windows go before the communicator (deregistration is collective, like registration); their
    // memory after it, whether it was finalized or aborted.
    for (int i = n->n_win - 1; i >= 0 && n->nc && !n->aborted; i--) {
        ncclResult_t r = ncclCommWindowDeregister(n->nc, n->win[i].win);
        if ((r != ncclSuccess && r != ncclInProgress) || nccl_wait(n, "window deregistration", NULL) != FF_OK) {
            abort_comm(n);
            ff_clear_error();
        }
    }
#endif
    // Finalize is asynchronous on a non-blocking comm: wait for it (bounded by the deadline), then
    // destroy; one that does not finish in time is aborted instead of hanging the exit.
    if (n->nc && !n->aborted) {
        ncclResult_t r = ncclCommFinalize(n->nc);
        if ((r == ncclSuccess || r == ncclInProgress) && nccl_wait(n, "finalize", NULL) == FF_OK)
            ncclCommDestroy(n->nc);
        else
            abort_comm(n);
        ff_clear_error();
    }
    if (n->stream) cudaStreamDestroy(n->stream);
#ifdef FF_NCCL_WINDOWS
    for (int i = 0; i < n->n_win; i++) ncclMemFree(n->win[i].p);
#endif
    free(n->win);
    free(n);
}

static const ff_comm_ops nccl_ops = {
    "nccl",
    true,
    "nccl (device buffers)",
    true,
    nc_exchange,
    nc_barrier,
    nc_bcast,
    nc_gatherv,
    nc_scatterv,
    nc_allgatherv,
    nc_alltoallv,
    nc_sum_f64,
    nc_max_i64,
    nc_sum_f32,
    nc_destroy,
    nc_set_queued,
    nc_wait_queued,
    nc_alloc_window,
#ifdef FF_NCCL_LSA
    nc_fused_tree_sgd,
#else
    NULL,
#endif
};

// FF_NCCL_CTA_POLICY (default, efficiency or zero; unset: NCCL's default): how many SMs NCCL's
// collectives may take. zero runs the collectives it can on the copy engines (NCCL 2.28; only on
// symmetric windows, ff_comm_alloc_window), leaving every SM to the GEMMs beside them.
static ff_status cta_policy(ncclConfig_t *cfg) {
    const char *e = getenv("FF_NCCL_CTA_POLICY");
    if (!e || !*e) return FF_OK;
#ifdef FF_NCCL_CTA_POLICY
    static const struct {
        const char *name;
        int policy;
    } names[] = {{"default", NCCL_CTA_POLICY_DEFAULT},
                 {"efficiency", NCCL_CTA_POLICY_EFFICIENCY},
                 {"zero", NCCL_CTA_POLICY_ZERO}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(e, names[i].name) == 0) {
            cfg->CTAPolicy = names[i].policy;
            return FF_OK;
        }
    return FF_FAIL(FF_ERR_INPUT, "FF_NCCL_CTA_POLICY '%s': expected default, efficiency or zero", e);
#else
    (void)cfg;
    return FF_FAIL(FF_ERR_INPUT, "FF_NCCL_CTA_POLICY '%s': this build's NCCL (%d) has no CTA policy (2.28 and later)",
                   e, NCCL_VERSION_CODE);
#endif
}

// Two ranks on one GPU are refused with names (comm_ipc.c's table of every rank's host and GPU),
// not with NCCL's "invalid usage" later.
static ff_status check_one_gpu_per_rank(ff_comm *boot) {
    bool own = true, node = true;
    char why[160] = "";
    FF_TRY(ff_comm_gpu_layout(boot, &own, &node, why, sizeof why));
    if (!own)
        return FF_FAIL(FF_ERR_INPUT,
                       "NCCL needs one GPU per rank: %s (NCCL refuses two ranks on one GPU): start at most one rank "
                       "per GPU, use --transport ipc (ranks of one node may share a GPU), or --mode hybrid",
                       why);
    return FF_OK;
}

ff_status ff_comm_nccl_create(ff_comm **out, ff_comm *boot) {
    *out = NULL;
    if (!boot) return FF_FAIL(FF_ERR_INPUT, "NCCL: a bootstrap communicator (MPI) is required");
    FF_TRY(check_one_gpu_per_rank(boot));
    cudaError_t e;
    ff_comm_nccl *n = calloc(1, sizeof *n);
    if (!n) return FF_FAIL(FF_ERR_OOM, "comm: %zu bytes", sizeof *n);
    ff_comm_layer_over(&n->base, &nccl_ops, boot);
    n->boot = boot;
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    ff_status st = FF_OK;
    if (boot->rank == 0) {
        ncclResult_t r = ncclGetUniqueId(&id);
        if (r != ncclSuccess) st = nccl_fail(n, r, __FILE__, __LINE__, "ncclGetUniqueId");
    }
    // Every rank takes part in the broadcast even if rank 0 failed (it then sends zeros and its own
    // error ends the job), so that no rank waits for an id that never comes.
    ff_status bst = ff_comm_bcast(boot, &id, sizeof id, 0);
    if (st == FF_OK) st = bst;
    if (st == FF_OK) {
        // The highest priority (ff_gpu_stream_create_urgent's reason): NCCL's kernels run beside
        // the backward's GEMMs (gradient buckets) and should not wait for their blocks.
        int least = 0, greatest = 0;
        e = cudaDeviceGetStreamPriorityRange(&least, &greatest);
        if (e == cudaSuccess)
            e = cudaStreamCreateWithPriority(&n->stream, cudaStreamNonBlocking,
                                             ff_gpu_urgent_streams() ? greatest : least);
        if (e != cudaSuccess) st = FF_FAIL(FF_ERR_CUDA, "NCCL stream: %s", cudaGetErrorString(e));
    }
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;  // every wait is ours to poll with a deadline
    if (st == FF_OK) st = cta_policy(&cfg);
    if (st == FF_OK) {
        ncclResult_t r = ncclCommInitRankConfig(&n->nc, boot->size, id, boot->rank, &cfg);
        if (r != ncclSuccess && r != ncclInProgress)
            st = nccl_fail(n, r, __FILE__, __LINE__, "ncclCommInitRankConfig");
        else
            st = nccl_wait(n, "communicator set-up", NULL);
    }
    if (st != FF_OK) {
        abort_comm(n);
        n->nc = NULL;
        nc_destroy(&n->base);
        return st;
    }
    *out = &n->base;
    return FF_OK;
}

#endif
