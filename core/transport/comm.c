// The communication interface (comm.h): argument checks shared by both backends, then dispatch.
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "comm_internal.h"
#include "fivefold/device.h"

// Device buffers on a backend that moves host memory only: staged (comm_staged.c).
static bool staged(const ff_comm *c) {
    return c->dev && !c->ops->device_copies && !c->device_native;
}

// The collective factor of nccl-tests' bus bandwidth ((P-1)/P for gathers, scatters, all-to-all).
static double spread(const ff_comm *c) {
    return c->size > 1 ? (double)(c->size - 1) / c->size : 0.0;
}
static size_t total(const size_t *counts, int P) {
    size_t t = 0;
    for (int r = 0; r < P; r++) t += counts[r];
    return t;
}

ff_status ff_comm_bind_device(ff_comm *c, struct ff_device *d) {
    struct ff_device *next = d && !ff_device_is_host(d) ? d : NULL;
    if (next != c->dev) ff_comm_staged_free(c);  // its stages are page-locked by the old device
    c->dev = next;
    if (!c->dev) c->device_native = false;  // ff_comm_mpi_device_direct holds for one binding
    return FF_OK;
}

struct ff_device *ff_comm_device(const ff_comm *c) {
    return c->dev;
}

const char *ff_comm_transport_name(const ff_comm *c) {
    if (!c->dev) return c->ops->name;
    return c->device_native ? "mpi (CUDA-aware: device buffers)" : c->ops->bound_name;
}

ff_status ff_comm_copy(ff_comm *c, void *dst, const void *src, size_t bytes) {
    if (!bytes || dst == src) return FF_OK;
    if (c->dev) return ff_device_copy_bytes(c->dev, dst, src, bytes);
    memcpy(dst, src, bytes);
    return FF_OK;
}

void ff_comm_layer_over(ff_comm *c, const ff_comm_ops *ops, const ff_comm *boot) {
    c->ops = ops;
    c->rank = boot->rank;
    c->size = boot->size;
    c->local_rank = boot->local_rank;
    c->local_size = boot->local_size;
    c->timeout_s = boot->timeout_s;
}

int ff_comm_rank(const ff_comm *c) {
    return c->rank;
}
int ff_comm_size(const ff_comm *c) {
    return c->size;
}
int ff_comm_local_rank(const ff_comm *c) {
    return c->local_rank;
}
void ff_comm_set_timeout(ff_comm *c, double seconds) {
    c->timeout_s = seconds;
}
double ff_comm_timeout(const ff_comm *c) {
    return c->timeout_s;
}
int64_t ff_comm_bytes_sent(const ff_comm *c) {
    return c->bytes_sent;
}
int64_t ff_comm_p2p_bytes(const ff_comm *c) {
    return c->p2p_bytes;
}
double ff_comm_bus_bytes(const ff_comm *c) {
    return c->bus_bytes;
}

static ff_status check_root(const ff_comm *c, int root, const char *what) {
    if (root < 0 || root >= c->size)
        return FF_FAIL(FF_ERR_INPUT, "%s: root %d: expected 0..%d", what, root, c->size - 1);
    return FF_OK;
}

static ff_status check_msgs(const ff_comm *c, const ff_comm_msg *m, int n, const char *what) {
    if (n < 0) return FF_FAIL(FF_ERR_INPUT, "exchange: %d %s: expected >= 0", n, what);
    for (int i = 0; i < n; i++) {
        if (m[i].peer < 0 || m[i].peer >= c->size)
            return FF_FAIL(FF_ERR_INPUT,
                           "exchange: %s %d on rank %d names peer %d: expected "
                           "0..%d",
                           what, i, c->rank, m[i].peer, c->size - 1);
        if (m[i].bytes > 0 && !m[i].buf)
            return FF_FAIL(FF_ERR_INPUT, "exchange: %s %d on rank %d has %zu bytes and no buffer", what, i, c->rank,
                           m[i].bytes);
    }
    return FF_OK;
}

ff_status ff_comm_exchange(ff_comm *c, const ff_comm_msg *sends, int n_sends, const ff_comm_msg *recvs, int n_recvs) {
    FF_TRY(check_msgs(c, sends, n_sends, "send"));
    FF_TRY(check_msgs(c, recvs, n_recvs, "receive"));
    for (int i = 0; i < n_sends; i++)
        if (sends[i].peer != c->rank) {
            c->bytes_sent += (int64_t)sends[i].bytes;
            c->p2p_bytes += (int64_t)sends[i].bytes;
            c->bus_bytes += (double)sends[i].bytes;  // send/recv: factor 1
        }
    if (staged(c)) return ff_comm_staged_exchange(c, sends, n_sends, recvs, n_recvs);
    return c->ops->exchange(c, sends, n_sends, recvs, n_recvs);
}

ff_status ff_comm_barrier(ff_comm *c) {
    return c->ops->barrier(c);
}

ff_status ff_comm_bcast(ff_comm *c, void *buf, size_t bytes, int root) {
    FF_TRY(check_root(c, root, "bcast"));
    if (c->rank == root) c->bytes_sent += (int64_t)bytes * (c->size - 1);
    if (c->size > 1) c->bus_bytes += (double)bytes;  // broadcast: factor 1, every rank
    if (staged(c)) return ff_comm_staged_bcast(c, buf, bytes, root);
    return c->ops->bcast(c, buf, bytes, root);
}

ff_status ff_comm_gatherv(ff_comm *c, void *recvbuf, const size_t *counts, const size_t *displs, const void *sendbuf,
                          size_t sendbytes, int root) {
    FF_TRY(check_root(c, root, "gatherv"));
    if (c->rank != root) c->bytes_sent += (int64_t)sendbytes;
    if (c->rank == root) c->bus_bytes += (double)total(counts, c->size) * spread(c);
    if (staged(c)) return ff_comm_staged_gatherv(c, recvbuf, counts, displs, sendbuf, sendbytes, root);
    return c->ops->gatherv(c, recvbuf, counts, displs, sendbuf, sendbytes, root);
}

ff_status ff_comm_scatterv(ff_comm *c, void *recvbuf, size_t recvbytes, const void *sendbuf, const size_t *counts,
                           const size_t *displs, int root) {
    FF_TRY(check_root(c, root, "scatterv"));
    if (c->rank == root)
        for (int r = 0; r < c->size; r++)
            if (r != root) c->bytes_sent += (int64_t)counts[r];
    if (c->rank == root) c->bus_bytes += (double)total(counts, c->size) * spread(c);
    if (staged(c)) return ff_comm_staged_scatterv(c, recvbuf, recvbytes, sendbuf, counts, displs, root);
    return c->ops->scatterv(c, recvbuf, recvbytes, sendbuf, counts, displs, root);
}

ff_status ff_comm_allgatherv(ff_comm *c, void *recvbuf, const size_t *counts, const size_t *displs, const void *sendbuf,
                             size_t sendbytes) {
    if (sendbytes != counts[c->rank])
        return FF_FAIL(FF_ERR_INPUT, "allgatherv: rank %d sends %zu bytes but counts[%d] = %zu", c->rank, sendbytes,
                       c->rank, counts[c->rank]);
    c->bytes_sent += (int64_t)sendbytes * (c->size - 1);
    c->bus_bytes += (double)total(counts, c->size) * spread(c);
    if (staged(c)) return ff_comm_staged_allgatherv(c, recvbuf, counts, displs, sendbuf, sendbytes);
    return c->ops->allgatherv(c, recvbuf, counts, displs, sendbuf, sendbytes);
}

ff_status ff_comm_alltoallv(ff_comm *c, void *recvbuf, const size_t *recv_counts, const size_t *recv_displs,
                            const void *sendbuf, const size_t *send_counts, const size_t *send_displs) {
    for (int r = 0; r < c->size; r++)
        if (r != c->rank) c->bytes_sent += (int64_t)send_counts[r];
    c->bus_bytes += (double)total(send_counts, c->size) * spread(c);
    if (staged(c))
        return ff_comm_staged_alltoallv(c, recvbuf, recv_counts, recv_displs, sendbuf, send_counts, send_displs);
    return c->ops->alltoallv(c, recvbuf, recv_counts, recv_displs, sendbuf, send_counts, send_displs);
}

ff_status ff_comm_allreduce_sum_f64(ff_comm *c, double *buf, size_t n) {
    c->bytes_sent += (int64_t)(n * sizeof(double)) * (c->size - 1);
    c->bus_bytes += (double)(n * sizeof(double)) * 2 * spread(c);
    return c->ops->allreduce_sum_f64(c, buf, n);
}

ff_status ff_comm_allreduce_max_i64(ff_comm *c, int64_t *buf, size_t n) {
    c->bytes_sent += (int64_t)(n * sizeof(int64_t)) * (c->size - 1);
    c->bus_bytes += (double)(n * sizeof(int64_t)) * 2 * spread(c);
    return c->ops->allreduce_max_i64(c, buf, n);
}

ff_status ff_comm_allreduce_sum_f32(ff_comm *c, float *buf, size_t n) {
    c->bytes_sent += (int64_t)(n * sizeof(float)) * (c->size - 1);
    c->bus_bytes += (double)(n * sizeof(float)) * 2 * spread(c);
    // Device memory: NCCL and a CUDA-aware MPI reduce it in place; the others on a host stage.
    if (c->dev && !c->device_native && !c->ops->reduces_device) return ff_comm_staged_sum_f32(c, buf, n);
    return c->ops->allreduce_sum_f32(c, buf, n);
}

bool ff_comm_can_queue(const ff_comm *c) {
    const char *e = getenv("FF_QUEUED_COMM");
    if (e && strcmp(e, "0") == 0) return false;
    // The test hook (comm.h): on host memory every call has completed, in order, when it returns,
    // which is all that queueing promises; the trainer's queued path then runs on the cpu device.
    if (e && strcmp(e, "host") == 0 && !c->dev) return true;
    return c->dev && c->ops->set_queued && ff_device_gpu_stream(c->dev);
}

ff_status ff_comm_set_queued(ff_comm *c, bool on) {
    if (on && !ff_comm_can_queue(c))
        return FF_FAIL(FF_ERR_INPUT, "rank %d: the %s transport cannot queue its collectives on a device", c->rank,
                       ff_comm_transport_name(c));
    return c->ops->set_queued ? c->ops->set_queued(c, on) : FF_OK;
}

ff_status ff_comm_wait_queued(ff_comm *c) {
    if (c->ops->wait_queued && c->dev) return c->ops->wait_queued(c);
    return c->dev ? ff_device_sync(c->dev) : FF_OK;
}

ff_status ff_comm_alloc_window(ff_comm *c, void **p, size_t bytes, const char *what) {
    *p = NULL;
    const char *e = getenv("FF_NCCL_WINDOWS");
    if ((e && strcmp(e, "0") == 0) || !c->dev || !c->ops->alloc_window || !bytes) return FF_OK;
    return c->ops->alloc_window(c, p, bytes, what);
}

ff_status ff_comm_fused_env(bool *on, int *ctas) {
    *on = true;
    *ctas = FF_FUSED_CTAS_DEFAULT;
    const char *e = getenv("FF_FUSED_EXCHANGE");
    if (e && *e && strcmp(e, "0") != 0 && strcmp(e, "1") != 0)
        return FF_FAIL(FF_ERR_INPUT,
                       "FF_FUSED_EXCHANGE '%s': expected 0 (three kernels a bucket) or 1 (the default: the "
                       "fused exchange where it applies)",
                       e);
    *on = !e || strcmp(e, "0") != 0;
    const char *b = getenv("FF_FUSED_CTAS");
    if (b && *b) {
        char *end = NULL;
        errno = 0;
        const long v = strtol(b, &end, 10);
        if (end == b || *end || errno || v < 1 || v > FF_FUSED_CTAS_MAX)
            return FF_FAIL(FF_ERR_INPUT,
                           "FF_FUSED_CTAS '%s': expected the fused exchange's blocks, a whole number "
                           "1..%d (default %d)",
                           b, FF_FUSED_CTAS_MAX, FF_FUSED_CTAS_DEFAULT);
        *ctas = (int)v;
    }
    return FF_OK;
}

ff_status ff_comm_fused_tree_sgd(ff_comm *c, bool *done, float *w, float *mom, const float *row, int64_t count,
                                 float lr, float momentum, float weight_decay, bool first) {
    *done = false;
    bool on;
    int ctas;
    FF_TRY(ff_comm_fused_env(&on, &ctas));  // asked for (comm.h), on a device, by a backend that has it
    if (!on || !c->dev || !c->ops->fused_tree_sgd) return FF_OK;
    return c->ops->fused_tree_sgd(c, done, w, mom, row, count, lr, momentum, weight_decay, first);
}

void ff_comm_destroy(ff_comm *c) {
    if (c && c->ops->destroy) c->ops->destroy(c);
}
