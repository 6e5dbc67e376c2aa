// Device buffers over a backend that moves host memory only (comm.h: ff_comm_bind_device on the
// MPI backend — the hybrid mode's transport): each operation copies the device data it sends into
// a host stage, runs the backend on the stages, and copies what it received back to the device.
// The stages grow to the largest message and are kept (one send and one receive side per comm),
// page-locked by the bound device so that the copies run at DMA speed (pageable memory would add
// the driver's own staging copy); they are released when the comm is bound to another device.
#include <stdlib.h>
#include <string.h>

#include "comm_internal.h"
#include "fivefold/device.h"

enum { SEND_SIDE, RECV_SIDE };

static void release(ff_comm *c, int side) {
    if (c->stage_pinned[side] && c->dev) ff_device_unpin_host(c->dev, c->stage[side]);
    free(c->stage[side]);
    c->stage[side] = NULL;
    c->stage_cap[side] = 0;
    c->stage_pinned[side] = false;
}

static ff_status stage(ff_comm *c, int side, size_t bytes, unsigned char **out) {
    if (bytes > c->stage_cap[side] || !c->stage[side]) {
        // Grow geometrically: registering page-locked memory costs far more than the copy.
        size_t cap = bytes > 2 * c->stage_cap[side] ? bytes : 2 * c->stage_cap[side];
        void *p = malloc(cap ? cap : 1);
        if (!p) return FF_FAIL(FF_ERR_OOM, "host staging buffer of %zu bytes", cap);
        release(c, side);
        c->stage[side] = p;
        c->stage_cap[side] = cap;
        c->stage_pinned[side] = c->dev && ff_device_pin_host(c->dev, p, cap) == FF_OK;
        if (!c->stage_pinned[side]) ff_clear_error();  // pageable: slower copies, same bytes
    }
    *out = c->stage[side];
    return FF_OK;
}

void ff_comm_staged_free(ff_comm *c) {
    for (int s = 0; s < 2; s++) release(c, s);
}

// Synchronous copies (the caller has finished the device's work on these buffers: comm.h).
static ff_status to_host(ff_comm *c, void *host, const void *dev, size_t bytes) {
    return ff_device_copy_bytes(c->dev, host, dev, bytes);
}
static ff_status to_device(ff_comm *c, void *dev, const void *host, size_t bytes) {
    return ff_device_copy_bytes(c->dev, dev, host, bytes);
}

static size_t extent(const size_t *counts, const size_t *displs, int P) {
    size_t e = 0;
    for (int r = 0; r < P; r++)
        if (counts[r] && displs[r] + counts[r] > e) e = displs[r] + counts[r];
    return e;
}

ff_status ff_comm_staged_exchange(ff_comm *c, const ff_comm_msg *sends, int n_sends, const ff_comm_msg *recvs,
                                  int n_recvs) {
    size_t st = 0, rt = 0;
    for (int i = 0; i < n_sends; i++) st += sends[i].bytes;
    for (int i = 0; i < n_recvs; i++) rt += recvs[i].bytes;
    ff_comm_msg *hs = calloc((size_t)n_sends + (size_t)n_recvs + 1, sizeof *hs);
    if (!hs) return FF_FAIL(FF_ERR_OOM, "staged exchange: %d messages", n_sends + n_recvs);
    ff_comm_msg *hr = hs + n_sends;
    unsigned char *sp = NULL, *rp = NULL;
    ff_status s = stage(c, SEND_SIDE, st, &sp);
    if (s == FF_OK) s = stage(c, RECV_SIDE, rt, &rp);
    size_t o = 0;
    for (int i = 0; i < n_sends && s == FF_OK; i++) {
        hs[i] = sends[i];
        hs[i].buf = sp + o;
        s = to_host(c, sp + o, sends[i].buf, sends[i].bytes);
        o += sends[i].bytes;
    }
    o = 0;
    for (int i = 0; i < n_recvs; i++) {
        hr[i] = recvs[i];
        hr[i].buf = rp + o;
        o += recvs[i].bytes;
    }
    if (s == FF_OK) s = c->ops->exchange(c, hs, n_sends, hr, n_recvs);
    for (int i = 0; i < n_recvs && s == FF_OK; i++) s = to_device(c, recvs[i].buf, hr[i].buf, recvs[i].bytes);
    free(hs);
    return s;
}

ff_status ff_comm_staged_bcast(ff_comm *c, void *buf, size_t bytes, int root) {
    unsigned char *h = NULL;
    FF_TRY(stage(c, SEND_SIDE, bytes, &h));
    if (c->rank == root) FF_TRY(to_host(c, h, buf, bytes));
    FF_TRY(c->ops->bcast(c, h, bytes, root));
    return c->rank == root ? FF_OK : to_device(c, buf, h, bytes);
}

ff_status ff_comm_staged_gatherv(ff_comm *c, void *recvbuf, const size_t *counts, const size_t *displs,
                                 const void *sendbuf, size_t sendbytes, int root) {
    unsigned char *hs = NULL, *hr = NULL;
    FF_TRY(stage(c, SEND_SIDE, sendbytes, &hs));
    FF_TRY(to_host(c, hs, sendbuf, sendbytes));
    if (c->rank == root) FF_TRY(stage(c, RECV_SIDE, extent(counts, displs, c->size), &hr));
    FF_TRY(c->ops->gatherv(c, hr, counts, displs, hs, sendbytes, root));
    if (c->rank == root)  // block by block: the gaps between blocks, if any, stay untouched
        for (int r = 0; r < c->size; r++) FF_TRY(to_device(c, (char *)recvbuf + displs[r], hr + displs[r], counts[r]));
    return FF_OK;
}

ff_status ff_comm_staged_scatterv(ff_comm *c, void *recvbuf, size_t recvbytes, const void *sendbuf,
                                  const size_t *counts, const size_t *displs, int root) {
    unsigned char *hs = NULL, *hr = NULL;
    if (c->rank == root) {
        FF_TRY(stage(c, SEND_SIDE, extent(counts, displs, c->size), &hs));
        for (int r = 0; r < c->size; r++)
            FF_TRY(to_host(c, hs + displs[r], (const char *)sendbuf + displs[r], counts[r]));
    }
    FF_TRY(stage(c, RECV_SIDE, recvbytes, &hr));
    FF_TRY(c->ops->scatterv(c, hr, recvbytes, hs, counts, displs, root));
    return to_device(c, recvbuf, hr, recvbytes);
}

ff_status ff_comm_staged_allgatherv(ff_comm *c, void *recvbuf, const size_t *counts, const size_t *displs,
                                    const void *sendbuf, size_t sendbytes) {
    unsigned char *hs = NULL, *hr = NULL;
    FF_TRY(stage(c, SEND_SIDE, sendbytes, &hs));
    FF_TRY(to_host(c, hs, sendbuf, sendbytes));
    FF_TRY(stage(c, RECV_SIDE, extent(counts, displs, c->size), &hr));
    FF_TRY(c->ops->allgatherv(c, hr, counts, displs, hs, sendbytes));
    for (int r = 0; r < c->size; r++) FF_TRY(to_device(c, (char *)recvbuf + displs[r], hr + displs[r], counts[r]));
    return FF_OK;
}

ff_status ff_comm_staged_alltoallv(ff_comm *c, void *recvbuf, const size_t *recv_counts, const size_t *recv_displs,
                                   const void *sendbuf, const size_t *send_counts, const size_t *send_displs) {
    unsigned char *hs = NULL, *hr = NULL;
    FF_TRY(stage(c, SEND_SIDE, extent(send_counts, send_displs, c->size), &hs));
    for (int r = 0; r < c->size; r++)
        FF_TRY(to_host(c, hs + send_displs[r], (const char *)sendbuf + send_displs[r], send_counts[r]));
    FF_TRY(stage(c, RECV_SIDE, extent(recv_counts, recv_displs, c->size), &hr));
    FF_TRY(c->ops->alltoallv(c, hr, recv_counts, recv_displs, hs, send_counts, send_displs));
    for (int r = 0; r < c->size; r++)
        FF_TRY(to_device(c, (char *)recvbuf + recv_displs[r], hr + recv_displs[r], recv_counts[r]));
    return FF_OK;
}

ff_status ff_comm_staged_sum_f32(ff_comm *c, float *buf, size_t n) {
    unsigned char *h = NULL;
    FF_TRY(stage(c, SEND_SIDE, n * sizeof(float), &h));
    FF_TRY(to_host(c, h, buf, n * sizeof(float)));
    FF_TRY(c->ops->allreduce_sum_f32(c, (float *)h, n));
    return to_device(c, buf, h, n * sizeof(float));
}
