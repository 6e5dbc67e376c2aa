// MPI backend of comm.h. The communicator is a duplicate of the caller's with MPI_ERRORS_RETURN,
// so a failed call comes back here as FF_ERR_MPI with MPI's own error string; the CLI then calls
// MPI_Abort, which ends every rank instead of leaving the others waiting.
#include <limits.h>
#include <mpi.h>
#include <stdlib.h>

#include "comm_internal.h"

typedef struct {
    ff_comm base;
    MPI_Comm comm;
} ff_comm_mpi;

static MPI_Comm mc(ff_comm *c) {
    return ((ff_comm_mpi *)c)->comm;
}

static ff_status mpi_fail(int err, const char *file, int line, const char *call) {
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(err, msg, &len);
    return ff_fail(FF_ERR_MPI, file, line, "%s failed: %s (MPI error %d)", call, msg, err);
}
#define FF_MPI_CHECK(call)                                                                   \
    do {                                                                                     \
        int ff_mpi_e_ = (call);                                                              \
        if (ff_mpi_e_ != MPI_SUCCESS) return mpi_fail(ff_mpi_e_, __FILE__, __LINE__, #call); \
    } while (0)

// MPI counts are int: a single message or block over INT_MAX bytes is refused with a clear
// message (the largest block this library moves is an activation band, far below that).
static ff_status to_int(int *out, size_t v, const char *what) {
    if (v > (size_t)INT_MAX)
        return FF_FAIL(FF_ERR_INPUT,
                       "%s: %zu bytes: MPI counts are limited to %d bytes per "
                       "message",
                       what, v, INT_MAX);
    *out = (int)v;
    return FF_OK;
}

static ff_status to_int_array(int **out, const size_t *v, int n, const char *what) {
    *out = NULL;
    int *a = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    if (!a) return FF_FAIL(FF_ERR_OOM, "%s: %d counts", what, n);
    for (int i = 0; i < n; i++) {
        ff_status st = to_int(&a[i], v[i], what);
        if (st != FF_OK) {
            free(a);
            return st;
        }
    }
    *out = a;
    return FF_OK;
}

static ff_status mpi_exchange(ff_comm *c, const ff_comm_msg *sends, int n_sends, const ff_comm_msg *recvs,
                              int n_recvs) {
    int n = n_sends + n_recvs;
    MPI_Request *req = malloc(sizeof(MPI_Request) * (size_t)(n > 0 ? n : 1));
    MPI_Status *sts = malloc(sizeof(MPI_Status) * (size_t)(n > 0 ? n : 1));
    if (!req || !sts) {
        free(req);
        free(sts);
        return FF_FAIL(FF_ERR_OOM, "exchange: %d requests", n);
    }
    ff_status st = FF_OK;
    int posted = 0;
    // Tag = the message's index among those to (from) the same peer in this list: the i-th
    // receive from a peer matches that peer's i-th send to us. Receives are posted first.
    for (int i = 0; i < n_recvs && st == FF_OK; i++) {
        int tag = 0, count = 0;
        for (int j = 0; j < i; j++) tag += recvs[j].peer == recvs[i].peer;
        st = to_int(&count, recvs[i].bytes, "exchange receive");
        if (st != FF_OK) break;
        int e = MPI_Irecv(recvs[i].buf, count, MPI_BYTE, recvs[i].peer, tag, mc(c), &req[posted]);
        if (e != MPI_SUCCESS)
            st = mpi_fail(e, __FILE__, __LINE__, "MPI_Irecv");
        else
            posted++;
    }
    for (int i = 0; i < n_sends && st == FF_OK; i++) {
        int tag = 0, count = 0;
        for (int j = 0; j < i; j++) tag += sends[j].peer == sends[i].peer;
        st = to_int(&count, sends[i].bytes, "exchange send");
        if (st != FF_OK) break;
        int e = MPI_Isend(sends[i].buf, count, MPI_BYTE, sends[i].peer, tag, mc(c), &req[posted]);
        if (e != MPI_SUCCESS)
            st = mpi_fail(e, __FILE__, __LINE__, "MPI_Isend");
        else
            posted++;
    }
    if (st == FF_OK) {
        int e = MPI_Waitall(posted, req, sts);
        if (e == MPI_ERR_IN_STATUS) {  // the reason is in the failed request's status
            for (int i = 0; i < posted; i++)
                if (sts[i].MPI_ERROR != MPI_SUCCESS && sts[i].MPI_ERROR != MPI_ERR_PENDING) {
                    e = sts[i].MPI_ERROR;
                    break;
                }
        }
        if (e != MPI_SUCCESS) st = mpi_fail(e, __FILE__, __LINE__, "MPI_Waitall (halo exchange)");
    }
    // On error the job ends (MPI_Abort by the caller); outstanding requests are not cancelled.
    free(req);
    free(sts);
    return st;
}

static ff_status mpi_barrier(ff_comm *c) {
    FF_MPI_CHECK(MPI_Barrier(mc(c)));
    return FF_OK;
}

static ff_status mpi_bcast(ff_comm *c, void *buf, size_t bytes, int root) {
    // Chunked, so weight buffers over 2 GiB still go through.
    const size_t chunk = (size_t)1 << 30;
    for (size_t off = 0; off < bytes; off += chunk) {
        size_t n = bytes - off < chunk ? bytes - off : chunk;
        FF_MPI_CHECK(MPI_Bcast((char *)buf + off, (int)n, MPI_BYTE, root, mc(c)));
    }
    return FF_OK;
}

static ff_status mpi_gatherv(ff_comm *c, void *recvbuf, const size_t *counts, const size_t *displs, const void *sendbuf,
                             size_t sendbytes, int root) {
    int sc = 0, *rc = NULL, *rd = NULL;
    FF_TRY(to_int(&sc, sendbytes, "gatherv send"));
    if (c->rank == root) {
        FF_TRY(to_int_array(&rc, counts, c->size, "gatherv counts"));
        ff_status st = to_int_array(&rd, displs, c->size, "gatherv displacements");
        if (st != FF_OK) {
            free(rc);
            return st;
        }
    }
    int e = MPI_Gatherv(sendbuf, sc, MPI_BYTE, recvbuf, rc, rd, MPI_BYTE, root, mc(c));
    free(rc);
    free(rd);
    if (e != MPI_SUCCESS) return mpi_fail(e, __FILE__, __LINE__, "MPI_Gatherv");
    return FF_OK;
}

static ff_status mpi_scatterv(ff_comm *c, void *recvbuf, size_t recvbytes, const void *sendbuf, const size_t *counts,
                              const size_t *displs, int root) {
    int rcount = 0, *sc = NULL, *sd = NULL;
    FF_TRY(to_int(&rcount, recvbytes, "scatterv receive"));
    if (c->rank == root) {
        FF_TRY(to_int_array(&sc, counts, c->size, "scatterv counts"));
        ff_status st = to_int_array(&sd, displs, c->size, "scatterv displacements");
        if (st != FF_OK) {
            free(sc);
            return st;
        }
    }
    int e = MPI_Scatterv(sendbuf, sc, sd, MPI_BYTE, recvbuf, rcount, MPI_BYTE, root, mc(c));
    free(sc);
    free(sd);
    if (e != MPI_SUCCESS) return mpi_fail(e, __FILE__, __LINE__, "MPI_Scatterv");
    return FF_OK;
}

static ff_status mpi_allgatherv(ff_comm *c, void *recvbuf, const size_t *counts, const size_t *displs,
                                const void *sendbuf, size_t sendbytes) {
    int sc = 0, *rc = NULL, *rd = NULL;
    FF_TRY(to_int(&sc, sendbytes, "allgatherv send"));
    FF_TRY(to_int_array(&rc, counts, c->size, "allgatherv counts"));
    ff_status st = to_int_array(&rd, displs, c->size, "allgatherv displacements");
    if (st != FF_OK) {
        free(rc);
        return st;
    }
    int e = MPI_Allgatherv(sendbuf, sc, MPI_BYTE, recvbuf, rc, rd, MPI_BYTE, mc(c));
    free(rc);
    free(rd);
    if (e != MPI_SUCCESS) return mpi_fail(e, __FILE__, __LINE__, "MPI_Allgatherv");
    return FF_OK;
}

static ff_status mpi_alltoallv(ff_comm *c, void *recvbuf, const size_t *recv_counts, const size_t *recv_displs,
                               const void *sendbuf, const size_t *send_counts, const size_t *send_displs) {
    int *a[4] = {NULL, NULL, NULL, NULL};
    const size_t *src[4] = {send_counts, send_displs, recv_counts, recv_displs};
    ff_status st = FF_OK;
    for (int k = 0; k < 4 && st == FF_OK; k++)
        st = to_int_array(&a[k], src[k], c->size, "alltoallv counts/displacements");
    if (st == FF_OK) {
        int e = MPI_Alltoallv(sendbuf, a[0], a[1], MPI_BYTE, recvbuf, a[2], a[3], MPI_BYTE, mc(c));
        if (e != MPI_SUCCESS) st = mpi_fail(e, __FILE__, __LINE__, "MPI_Alltoallv");
    }
    for (int k = 0; k < 4; k++) free(a[k]);
    return st;
}

static ff_status mpi_allreduce(ff_comm *c, void *buf, size_t n, MPI_Datatype t, MPI_Op op) {
    const size_t chunk = (size_t)1 << 28;  // elements per call: keeps the int count in range
    size_t esize = t == MPI_FLOAT ? 4 : 8;
    for (size_t off = 0; off < n; off += chunk) {
        size_t k = n - off < chunk ? n - off : chunk;
        FF_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, (char *)buf + off * esize, (int)k, t, op, mc(c)));
    }
    return FF_OK;
}
static ff_status mpi_sum_f64(ff_comm *c, double *buf, size_t n) {
    return mpi_allreduce(c, buf, n, MPI_DOUBLE, MPI_SUM);
}
static ff_status mpi_max_i64(ff_comm *c, int64_t *buf, size_t n) {
    return mpi_allreduce(c, buf, n, MPI_INT64_T, MPI_MAX);
}
static ff_status mpi_sum_f32(ff_comm *c, float *buf, size_t n) {
    return mpi_allreduce(c, buf, n, MPI_FLOAT, MPI_SUM);
}

static void mpi_destroy(ff_comm *c) {
    ff_comm_mpi *m = (ff_comm_mpi *)c;
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) MPI_Comm_free(&m->comm);
    ff_comm_staged_free(c);
    free(m);
}

static const ff_comm_ops mpi_ops = {
    "mpi",          false,         mpi_exchange, mpi_barrier, mpi_bcast,   mpi_gatherv, mpi_scatterv,
    mpi_allgatherv, mpi_alltoallv, mpi_sum_f64,  mpi_max_i64, mpi_sum_f32, mpi_destroy,
};

ff_status ff_comm_mpi_create(ff_comm **out, const void *mpi_comm) {
    *out = NULL;
    int init = 0;
    MPI_Initialized(&init);
    if (!init)
        return FF_FAIL(FF_ERR_MPI,
                       "MPI is not initialised: call MPI_Init before "
                       "ff_comm_mpi_create (the fivefold command does this in main)");
    ff_comm_mpi *m = calloc(1, sizeof *m);
    if (!m) return FF_FAIL(FF_ERR_OOM, "comm: %zu bytes", sizeof *m);
    MPI_Comm parent = mpi_comm ? *(const MPI_Comm *)mpi_comm : MPI_COMM_WORLD;
    int e = MPI_Comm_dup(parent, &m->comm);
    if (e != MPI_SUCCESS) {
        free(m);
        return mpi_fail(e, __FILE__, __LINE__, "MPI_Comm_dup");
    }
    // Errors return to us (and become FF_ERR_MPI) instead of MPI's default abort-without-message.
    // Completion calls with no communicator argument (MPI_Waitall) raise their errors on
    // MPI_COMM_SELF (MPI 4) or MPI_COMM_WORLD (MPI 3): those return too, so that the message
    // reaches the caller, who ends the job with MPI_Abort.
    MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    m->base.ops = &mpi_ops;
    MPI_Comm_rank(m->comm, &m->base.rank);
    MPI_Comm_size(m->comm, &m->base.size);
    // This rank's place among the ranks of its node (a GPU mode's device is local rank % GPUs).
    MPI_Comm node;
    m->base.local_rank = m->base.rank;
    m->base.local_size = m->base.size;
    if (MPI_Comm_split_type(m->comm, MPI_COMM_TYPE_SHARED, m->base.rank, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_rank(node, &m->base.local_rank);
        MPI_Comm_size(node, &m->base.local_size);
        MPI_Comm_free(&node);
    }
    *out = &m->base;
    return FF_OK;
}
