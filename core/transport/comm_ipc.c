// CUDA IPC backend of comm.h (the direct mode's transport for ranks of one node, docs/ARCHITECTURE.md
// §7): device buffers go straight from one rank's GPU memory to another's — the receiver maps the
// sender's allocation (cudaIpcOpenMemHandle, cached) and copies from it, device to device (NVLink
// or the GPU's own memory when ranks share a GPU). Only small descriptors and acknowledgements
// travel through the bootstrap comm (MPI). This is what a CUDA-aware MPI does inside a node; it
// is here because NCCL refuses two ranks on one GPU and the MPI at hand may not be CUDA-aware.
//
// One exchange: (1) every sender posts, per message, {IPC handle of the allocation, offset, bytes}
// to its receiver over the bootstrap; (2) receivers copy from the mapped memory on their own
// stream and wait for the copies; (3) receivers acknowledge, so that a sender reuses its buffer
// only after every reader is done. Collectives are point-to-point patterns over that exchange.
// The bootstrap's deadline (ff_comm_set_timeout) bounds every wait on a peer.
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm_internal.h"

#ifndef FF_HAVE_CUDA

ff_status ff_comm_ipc_create(ff_comm **out, ff_comm *boot) {
    (void)boot;
    *out = NULL;
    return FF_FAIL(FF_ERR_NO_CUDA, "this build of fivefold has no CUDA: no CUDA IPC transport");
}
ff_status ff_comm_gpu_layout(ff_comm *boot, bool *one_gpu_per_rank, bool *one_node, char *why, size_t cap) {
    (void)boot, (void)why, (void)cap;
    *one_gpu_per_rank = *one_node = false;
    return FF_FAIL(FF_ERR_NO_CUDA, "this build of fivefold has no CUDA");
}

#else

#include <cuda.h>  // types only: cuMemGetAddressRange is reached through the runtime's entry points
#include <cuda_runtime_api.h>
#include <stdio.h>

enum { CACHE = 64 };

typedef struct {
    cudaIpcMemHandle_t handle;
    uint64_t buffer_id;   // CUDA's id of the allocation: unique in the process, never reused
    uint64_t base, size;  // the allocation's address range in the sender's process
    uint64_t offset, bytes;
} ipc_desc;

typedef struct {
    ff_comm base;
    ff_comm *boot;
    cudaStream_t stream;
    CUresult (*address_range)(CUdeviceptr *base, size_t *size, CUdeviceptr p);
    CUresult (*pointer_attribute)(void *data, CUpointer_attribute attribute, CUdeviceptr p);
    // Peers' allocations mapped here, by (peer, buffer id): an allocation can be mapped only once
    // per process (a second cudaIpcOpenMemHandle fails "already mapped"), and handles are not
    // reliable keys. My own exports, by buffer id.
    struct {
        int peer;
        uint64_t buffer_id, base, size;  // the sender's allocation
        void *mapped;
    } cache[CACHE];
    int n_cached, next_evict;
    struct {
        uint64_t buffer_id;
        cudaIpcMemHandle_t handle;
    } exported[CACHE];
    int n_exported, next_export;
    ipc_desc *descs;  // scratch: [cap_descs]
    int cap_descs;
    unsigned char *acks;
    ff_comm_msg *host_msgs;  // scratch: [cap_msgs]
    int cap_msgs;
} ff_comm_ipc;

static ff_comm_ipc *ipc_of(ff_comm *c) {
    return (ff_comm_ipc *)c;
}

static ff_status cuda_fail(const ff_comm_ipc *n, cudaError_t e, const char *what) {
    return FF_FAIL(FF_ERR_CUDA, "rank %d: CUDA IPC %s: %s", n->base.rank, what, cudaGetErrorString(e));
}

static ff_status grow(ff_comm_ipc *n, int msgs) {
    if (msgs <= n->cap_descs) return FF_OK;
    ipc_desc *d = realloc(n->descs, (size_t)msgs * sizeof *d);
    if (d) n->descs = d;
    unsigned char *a = realloc(n->acks, (size_t)msgs);
    if (a) n->acks = a;
    ff_comm_msg *h = realloc(n->host_msgs, (size_t)msgs * sizeof *h);
    if (h) n->host_msgs = h;
    if (!d || !a || !h) return FF_FAIL(FF_ERR_OOM, "CUDA IPC: scratch for %d messages", msgs);
    n->cap_descs = msgs;
    return FF_OK;
}

// The allocation holding p, as {handle, buffer id, offset}.
static ff_status describe(ff_comm_ipc *n, ipc_desc *d, const void *p, size_t bytes) {
    CUdeviceptr base = 0, dp = (CUdeviceptr)(uintptr_t)p;
    size_t size = 0;
    unsigned long long id = 0;
    if (n->address_range(&base, &size, dp) != CUDA_SUCCESS ||
        n->pointer_attribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, dp) != CUDA_SUCCESS)
        return FF_FAIL(FF_ERR_INPUT, "rank %d: CUDA IPC: %p is not device memory of this GPU", n->base.rank, p);
    d->buffer_id = id;
    d->base = (uint64_t)base;
    d->size = (uint64_t)size;
    d->offset = (uint64_t)(dp - base);
    d->bytes = bytes;
    for (int i = 0; i < n->n_exported; i++)
        if (n->exported[i].buffer_id == id) {
            d->handle = n->exported[i].handle;
            return FF_OK;
        }
    cudaError_t e = cudaIpcGetMemHandle(&d->handle, (void *)(uintptr_t)base);
    if (e != cudaSuccess) return cuda_fail(n, e, "cudaIpcGetMemHandle");
    int slot = n->n_exported < CACHE ? n->n_exported++ : n->next_export++ % CACHE;
    n->exported[slot].buffer_id = id;
    n->exported[slot].handle = d->handle;
    return FF_OK;
}

static void unmap(ff_comm_ipc *n, int slot) {
    if (n->cache[slot].mapped) cudaIpcCloseMemHandle(n->cache[slot].mapped);
    n->cache[slot].mapped = NULL;
    n->cache[slot].peer = -1;
}

// The sender's allocation, mapped here once (opening costs far more than a copy). A mapping of a
// peer's older allocation over the same addresses is stale — that allocation was freed, and its
// addresses reused — and must be closed first: the driver refuses to map the new one while it is
// open ("resource already mapped", what Open MPI's CUDA registration cache also evicts on).
static ff_status mapped(ff_comm_ipc *n, void **out, int peer, const ipc_desc *d) {
    for (int i = 0; i < n->n_cached; i++)
        if (n->cache[i].peer == peer && n->cache[i].buffer_id == d->buffer_id && n->cache[i].mapped) {
            *out = (char *)n->cache[i].mapped + d->offset;
            return FF_OK;
        }
    for (int i = 0; i < n->n_cached; i++)
        if (n->cache[i].peer == peer && n->cache[i].mapped && n->cache[i].base < d->base + d->size &&
            d->base < n->cache[i].base + n->cache[i].size)
            unmap(n, i);
    int slot = -1;
    for (int i = 0; i < n->n_cached && slot < 0; i++)
        if (!n->cache[i].mapped) slot = i;
    if (slot < 0) slot = n->n_cached < CACHE ? n->n_cached++ : n->next_evict++ % CACHE;
    unmap(n, slot);
    void *p = NULL;
    cudaError_t e = cudaIpcOpenMemHandle(&p, d->handle, cudaIpcMemLazyEnablePeerAccess);
    if (e == cudaErrorAlreadyMapped) {  // still: forget every mapping of this peer and try once more
        cudaGetLastError();
        for (int i = 0; i < n->n_cached; i++)
            if (n->cache[i].peer == peer) unmap(n, i);
        e = cudaIpcOpenMemHandle(&p, d->handle, cudaIpcMemLazyEnablePeerAccess);
    }
    if (e != cudaSuccess) return cuda_fail(n, e, "cudaIpcOpenMemHandle (a peer's buffer)");
    n->cache[slot].peer = peer;
    n->cache[slot].buffer_id = d->buffer_id;
    n->cache[slot].base = d->base;
    n->cache[slot].size = d->size;
    n->cache[slot].mapped = p;
    *out = (char *)p + d->offset;
    return FF_OK;
}

static ff_status stream_wait(ff_comm_ipc *n) {
    cudaError_t e = cudaStreamSynchronize(n->stream);  // local copies only: no peer to wait for
    return e == cudaSuccess ? FF_OK : cuda_fail(n, e, "copy");
}

static ff_status ipc_exchange(ff_comm *c, const ff_comm_msg *sends, int n_sends, const ff_comm_msg *recvs,
                              int n_recvs) {
    ff_comm_ipc *n = ipc_of(c);
    if (!c->dev) return n->boot->ops->exchange(n->boot, sends, n_sends, recvs, n_recvs);
    const int me = c->rank;
    FF_TRY(grow(n, n_sends + n_recvs + 1));
    // (1) descriptors of my sends to other ranks; mine to myself are copied directly below
    ff_comm_msg *hs = n->host_msgs, *hr = n->host_msgs + n_sends;
    ipc_desc *ds = n->descs, *dr = n->descs + n_sends;
    int ns = 0, nr = 0;
    for (int i = 0; i < n_sends; i++) {
        if (!sends[i].bytes || sends[i].peer == me) continue;
        FF_TRY(describe(n, &ds[ns], sends[i].buf, sends[i].bytes));
        hs[ns] = (ff_comm_msg){sends[i].peer, &ds[ns], sizeof(ipc_desc)};
        ns++;
    }
    for (int i = 0; i < n_recvs; i++) {
        if (!recvs[i].bytes || recvs[i].peer == me) continue;
        hr[nr] = (ff_comm_msg){recvs[i].peer, &dr[nr], sizeof(ipc_desc)};
        nr++;
    }
    FF_TRY(n->boot->ops->exchange(n->boot, hs, ns, hr, nr));
    // (2) copies: from mapped peer memory, and my own messages to myself in list order
    int k = 0, self_send = 0;
    for (int i = 0; i < n_recvs; i++) {
        if (!recvs[i].bytes) continue;
        const void *src = NULL;
        if (recvs[i].peer == me) {
            while (self_send < n_sends && !(sends[self_send].peer == me && sends[self_send].bytes)) self_send++;
            if (self_send == n_sends)
                return FF_FAIL(FF_ERR_INPUT, "rank %d: exchange: a receive from myself has no matching send", me);
            src = sends[self_send++].buf;
        } else {
            if (dr[k].bytes != recvs[i].bytes)
                return FF_FAIL(FF_ERR_INPUT, "rank %d: exchange: rank %d sends %llu bytes, receive %d expects %zu", me,
                               recvs[i].peer, (unsigned long long)dr[k].bytes, i, recvs[i].bytes);
            void *p = NULL;
            FF_TRY(mapped(n, &p, recvs[i].peer, &dr[k++]));
            src = p;
        }
        if (src == recvs[i].buf) continue;  // my own block in place (an in-place all-gather)
        cudaError_t e = cudaMemcpyAsync(recvs[i].buf, src, recvs[i].bytes, cudaMemcpyDeviceToDevice, n->stream);
        if (e != cudaSuccess) return cuda_fail(n, e, "device-to-device copy");
    }
    FF_TRY(stream_wait(n));
    // (3) acknowledgements: receivers -> senders (the reverse pattern, one byte each)
    for (int i = 0; i < nr; i++) hr[i].buf = &n->acks[i], hr[i].bytes = 1;
    for (int i = 0; i < ns; i++) hs[i].buf = &n->acks[nr + i], hs[i].bytes = 1;
    return n->boot->ops->exchange(n->boot, hr, nr, hs, ns);
}

// ---- collectives as point-to-point patterns over ipc_exchange (lists in a scratch of 2P) ----
typedef struct {
    ff_comm_msg *s, *r;
    int ns, nr;
} pattern;

static ff_status pattern_alloc(pattern *p, int P) {
    p->s = calloc((size_t)(2 * P + 2), sizeof(ff_comm_msg));
    p->r = p->s ? p->s + P + 1 : NULL;
    p->ns = p->nr = 0;
    return p->s ? FF_OK : FF_FAIL(FF_ERR_OOM, "CUDA IPC: message lists for %d ranks", P);
}
static void add(ff_comm_msg *list, int *k, int peer, const void *buf, size_t bytes) {
    if (bytes) list[(*k)++] = (ff_comm_msg){peer, (void *)buf, bytes};
}
static ff_status run(ff_comm *c, pattern *p) {
    ff_status st = ipc_exchange(c, p->s, p->ns, p->r, p->nr);
    free(p->s);
    return st;
}

static ff_status ipc_bcast(ff_comm *c, void *buf, size_t bytes, int root) {
    ff_comm_ipc *n = ipc_of(c);
    if (!c->dev) return n->boot->ops->bcast(n->boot, buf, bytes, root);
    pattern p;
    FF_TRY(pattern_alloc(&p, c->size));
    for (int r = 0; r < c->size; r++)
        if (c->rank == root && r != root) add(p.s, &p.ns, r, buf, bytes);
    if (c->rank != root) add(p.r, &p.nr, root, buf, bytes);
    return run(c, &p);
}

static ff_status ipc_gatherv(ff_comm *c, void *recvbuf, const size_t *counts, const size_t *displs, const void *sendbuf,
                             size_t sendbytes, int root) {
    ff_comm_ipc *n = ipc_of(c);
    if (!c->dev) return n->boot->ops->gatherv(n->boot, recvbuf, counts, displs, sendbuf, sendbytes, root);
    pattern p;
    FF_TRY(pattern_alloc(&p, c->size));
    add(p.s, &p.ns, root, sendbuf, sendbytes);
    if (c->rank == root)
        for (int r = 0; r < c->size; r++) add(p.r, &p.nr, r, (char *)recvbuf + displs[r], counts[r]);
    return run(c, &p);
}

static ff_status ipc_scatterv(ff_comm *c, void *recvbuf, size_t recvbytes, const void *sendbuf, const size_t *counts,
                              const size_t *displs, int root) {
    ff_comm_ipc *n = ipc_of(c);
    if (!c->dev) return n->boot->ops->scatterv(n->boot, recvbuf, recvbytes, sendbuf, counts, displs, root);
    pattern p;
    FF_TRY(pattern_alloc(&p, c->size));
    if (c->rank == root)
        for (int r = 0; r < c->size; r++) add(p.s, &p.ns, r, (const char *)sendbuf + displs[r], counts[r]);
    add(p.r, &p.nr, root, recvbuf, recvbytes);
    return run(c, &p);
}

static ff_status ipc_allgatherv(ff_comm *c, void *recvbuf, const size_t *counts, const size_t *displs,
                                const void *sendbuf, size_t sendbytes) {
    ff_comm_ipc *n = ipc_of(c);
    if (!c->dev) return n->boot->ops->allgatherv(n->boot, recvbuf, counts, displs, sendbuf, sendbytes);
    pattern p;
    FF_TRY(pattern_alloc(&p, c->size));
    for (int r = 0; r < c->size; r++) {
        add(p.s, &p.ns, r, sendbuf, sendbytes);
        add(p.r, &p.nr, r, (char *)recvbuf + displs[r], counts[r]);
    }
    return run(c, &p);
}

static ff_status ipc_alltoallv(ff_comm *c, void *recvbuf, const size_t *recv_counts, const size_t *recv_displs,
                               const void *sendbuf, const size_t *send_counts, const size_t *send_displs) {
    ff_comm_ipc *n = ipc_of(c);
    if (!c->dev)
        return n->boot->ops->alltoallv(n->boot, recvbuf, recv_counts, recv_displs, sendbuf, send_counts, send_displs);
    pattern p;
    FF_TRY(pattern_alloc(&p, c->size));
    for (int r = 0; r < c->size; r++) {
        add(p.s, &p.ns, r, (const char *)sendbuf + send_displs[r], send_counts[r]);
        add(p.r, &p.nr, r, (char *)recvbuf + recv_displs[r], recv_counts[r]);
    }
    return run(c, &p);
}

// Host memory only (comm.c stages a device all-reduce through the host for this backend).
static ff_status ipc_barrier(ff_comm *c) {
    return ipc_of(c)->boot->ops->barrier(ipc_of(c)->boot);
}
static ff_status ipc_sum_f64(ff_comm *c, double *buf, size_t k) {
    return ipc_of(c)->boot->ops->allreduce_sum_f64(ipc_of(c)->boot, buf, k);
}
static ff_status ipc_max_i64(ff_comm *c, int64_t *buf, size_t k) {
    return ipc_of(c)->boot->ops->allreduce_max_i64(ipc_of(c)->boot, buf, k);
}
static ff_status ipc_sum_f32(ff_comm *c, float *buf, size_t k) {
    return ipc_of(c)->boot->ops->allreduce_sum_f32(ipc_of(c)->boot, buf, k);
}

static void ipc_destroy(ff_comm *c) {
    ff_comm_ipc *n = ipc_of(c);
    for (int i = 0; i < n->n_cached; i++)
        if (n->cache[i].mapped) cudaIpcCloseMemHandle(n->cache[i].mapped);
    if (n->stream) cudaStreamDestroy(n->stream);
    ff_comm_staged_free(c);
    free(n->descs);
    free(n->acks);
    free(n->host_msgs);
    free(n);
}

static const ff_comm_ops ipc_ops = {
    "ipc",          true,          "cuda-ipc (device to device)",
    false,          ipc_exchange,  ipc_barrier,
    ipc_bcast,      ipc_gatherv,   ipc_scatterv,
    ipc_allgatherv, ipc_alltoallv, ipc_sum_f64,
    ipc_max_i64,    ipc_sum_f32,   ipc_destroy,
    NULL,           NULL,          NULL,
    NULL,
};

// Every rank's host and GPU: whether each rank has its own GPU (NCCL's requirement) and whether
// all ranks are on one host (CUDA IPC's).
ff_status ff_comm_gpu_layout(ff_comm *boot, bool *one_gpu_per_rank, bool *one_node, char *why, size_t cap) {
    enum { KEY = 128 };
    *one_gpu_per_rank = *one_node = true;
    if (why && cap) why[0] = 0;
    int dev = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e != cudaSuccess) return FF_FAIL(FF_ERR_NO_CUDA, "no current GPU: %s", cudaGetErrorString(e));
    char key[KEY] = {0}, host[64] = {0}, bus[32] = {0};
    gethostname(host, sizeof host - 1);
    e = cudaDeviceGetPCIBusId(bus, sizeof bus, dev);
    if (e != cudaSuccess) return FF_FAIL(FF_ERR_CUDA, "GPU %d: PCI bus id: %s", dev, cudaGetErrorString(e));
    snprintf(key, KEY, "%s|%s|%d", host, bus, dev);
    const int P = ff_comm_size(boot);
    char *all = calloc((size_t)P, KEY);
    size_t *counts = calloc((size_t)P, sizeof(size_t)), *displs = calloc((size_t)P, sizeof(size_t));
    ff_status st = all && counts && displs ? FF_OK : FF_FAIL(FF_ERR_OOM, "GPU table for %d ranks", P);
    for (int r = 0; r < P && st == FF_OK; r++) counts[r] = KEY, displs[r] = (size_t)r * KEY;
    if (st == FF_OK) st = boot->ops->allgatherv(boot, all, counts, displs, key, KEY);
    for (int i = 0; i < P && st == FF_OK; i++) {
        const char *ki = all + (size_t)i * KEY;
        if (strncmp(ki, key, strcspn(key, "|") + 1) != 0) *one_node = false;
        for (int j = i + 1; j < P; j++)
            if (strcmp(ki, all + (size_t)j * KEY) == 0 && *one_gpu_per_rank) {
                *one_gpu_per_rank = false;
                char h[64] = {0}, b[32] = {0};
                int g = 0;
                sscanf(ki, "%63[^|]|%31[^|]|%d", h, b, &g);
                if (why) snprintf(why, cap, "ranks %d and %d both use GPU %d (%s) on host %s", i, j, g, b, h);
            }
    }
    free(all);
    free(counts);
    free(displs);
    return st;
}

ff_status ff_comm_ipc_create(ff_comm **out, ff_comm *boot) {
    *out = NULL;
    if (!boot) return FF_FAIL(FF_ERR_INPUT, "CUDA IPC: a bootstrap communicator (MPI) is required");
    if (strcmp(boot->ops->name, "mpi") != 0)
        return FF_FAIL(FF_ERR_INPUT, "CUDA IPC: the ranks must be processes (MPI), not %s ranks", boot->ops->name);
    bool own = true, node = true;
    FF_TRY(ff_comm_gpu_layout(boot, &own, &node, NULL, 0));
    if (!node)
        return FF_FAIL(FF_ERR_INPUT,
                       "--transport ipc: CUDA IPC joins the ranks of one node, and these ranks span several: use "
                       "--transport nccl (one GPU per rank)");
    ff_comm_ipc *n = calloc(1, sizeof *n);
    if (!n) return FF_FAIL(FF_ERR_OOM, "comm: %zu bytes", sizeof *n);
    ff_comm_layer_over(&n->base, &ipc_ops, boot);
    n->boot = boot;
    enum cudaDriverEntryPointQueryResult q;
    void *fn = NULL;
    cudaError_t e = cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000, cudaEnableDefault, &q);
    if (e != cudaSuccess || !fn || q != cudaDriverEntryPointSuccess) {
        free(n);
        return FF_FAIL(FF_ERR_CUDA, "CUDA IPC: the driver has no cuMemGetAddressRange (%s)",
                       e != cudaSuccess ? cudaGetErrorString(e) : "symbol not found");
    }
    n->address_range = (CUresult(*)(CUdeviceptr *, size_t *, CUdeviceptr))fn;
    fn = NULL;
    e = cudaGetDriverEntryPointByVersion("cuPointerGetAttribute", &fn, 12000, cudaEnableDefault, &q);
    if (e != cudaSuccess || !fn || q != cudaDriverEntryPointSuccess) {
        free(n);
        return FF_FAIL(FF_ERR_CUDA, "CUDA IPC: the driver has no cuPointerGetAttribute (%s)",
                       e != cudaSuccess ? cudaGetErrorString(e) : "symbol not found");
    }
    n->pointer_attribute = (CUresult(*)(void *, CUpointer_attribute, CUdeviceptr))fn;
    e = cudaStreamCreateWithFlags(&n->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        free(n);
        return FF_FAIL(FF_ERR_CUDA, "CUDA IPC stream: %s", cudaGetErrorString(e));
    }
    *out = &n->base;
    return FF_OK;
}

#endif
