// Mode `mpi` (v2): P ranks on CPUs, talking through comm.h (MPI, or the loopback backend in the
// fuzzer and unit tests). Three splits (docs/ARCHITECTURE.md §1):
//   batch      rank r computes images ff_band(n, P, r) through every layer: scatter, compute, gather.
//   rows       every conv/pool/relu/lrn layer is split into bands of output rows (partition.h);
//              before a windowed layer each rank fetches its halo rows from whichever ranks own
//              them. Before an FC layer the bands are all-gathered and the FC layer is split by
//              output feature; flatten and softmax run whole (on rank 0 when the data is only
//              there, on every rank when every rank holds it). A range with no spatial layer
//              simply runs that way: it is never an error.
//   replicate  the input and weights are broadcast and every rank computes everything (the seed's
//              V2.1 counter-example: slower than serial, kept to measure it).
// Bits equal `serial` for every split and rank count: the CPU layers compute each element from
// its inputs alone in a fixed order (layers_cpu.h), and nothing here sums across ranks.
// Halo and staging buffers carry guard regions (canary floats) before and after the part in use;
// they are checked after every exchange and unpack, and a damaged guard is FF_ERR_INTERNAL.
#include <stdlib.h>
#include <string.h>

#include "fivefold/comm.h"
#include "fivefold/executor.h"
#include "fivefold/guard.h"
#include "fivefold/layers_cpu.h"
#include "fivefold/partition.h"
#include "fivefold/trace.h"

enum { ACT0, ACT1, ACT2, SEND, RECV, FULL, N_BUFS };
static const char *buf_names[N_BUFS] = {"activation 0", "activation 1", "activation 2",
                                        "send",         "receive",      "whole-tensor"};

typedef struct {
    ff_executor base;
    ff_comm *comm;
    ff_weights w;     // views: rank 0 the caller's, other ranks into own_data
    float *own_data;  // (n_total) weights broadcast from rank 0 (ranks != 0)
    ff_guarded buf[N_BUFS];
    size_t *counts, *displs;     // [P] scratch for v-collectives
    ff_comm_msg *sends, *recvs;  // [P] scratch for exchanges
    ff_guarded *gbuf;            // [n_gbuf] rows split: three activation buffers per image group
    int n_gbuf;
} mpi_exec;

// ---------------------------------------------------------------- timing

typedef struct {
    double t;
    int64_t bytes;
} mark;
static mark mark_now(mpi_exec *x) {
    mark m = {x->base.opt.trace ? ff_now() : 0, ff_comm_bytes_sent(x->comm)};
    return m;
}
static void account(mpi_exec *x, int row, ff_phase ph, mark m) {
    if (!x->base.opt.trace) return;
    x->base.trace.seconds[row][ph] += ff_now() - m.t;
    x->base.trace.comm_bytes[row] += ff_comm_bytes_sent(x->comm) - m.bytes;
}

// ---------------------------------------------------------------- row copies

// Copies rows [lo, hi) of (n, C, ., W) tensors: src holds rows [src_lo, src_lo + src_rows),
// dst holds rows [dst_lo, dst_lo + dst_rows).
static void copy_rows(float *dst, int64_t dst_lo, int64_t dst_rows, const float *src, int64_t src_lo, int64_t src_rows,
                      int64_t n, int64_t C, int64_t W, int64_t lo, int64_t hi) {
    if (hi <= lo) return;
    size_t len = (size_t)((hi - lo) * W) * sizeof(float);
    for (int64_t i = 0; i < n * C; i++)
        memcpy(dst + (i * dst_rows + (lo - dst_lo)) * W, src + (i * src_rows + (lo - src_lo)) * W, len);
}

static size_t band_floats(ff_range r, int64_t n, int64_t C, int64_t W) {
    return (size_t)(ff_range_len(r) * n * C * W);
}

// ---------------------------------------------------------------- create / destroy

static void mpi_destroy(ff_executor *e) {
    if (!e) return;
    mpi_exec *x = (mpi_exec *)e;
    for (int k = 0; k < N_BUFS; k++) ff_guarded_free(&x->buf[k]);
    for (int k = 0; k < x->n_gbuf; k++) ff_guarded_free(&x->gbuf[k]);
    free(x->gbuf);
    free(x->own_data);
    free(x->counts);
    free(x->displs);
    free(x->sends);
    free(x->recvs);
    free(x);
}

// Rank 0's weights reach every rank: the size and each tensor's offset first, then the data.
static ff_status share_weights(mpi_exec *x, const ff_model *m, const ff_weights *w) {
    int64_t hdr[1 + 2 * FF_MAX_LAYERS];
    if (x->base.rank == 0) {
        if (!w || (!w->data && w->n_total > 0)) return FF_FAIL(FF_ERR_INPUT, "mpi mode: rank 0 has no weights");
        hdr[0] = w->n_total;
        for (int i = 0; i < FF_MAX_LAYERS; i++) {
            hdr[1 + 2 * i] = i < m->n_layers && w->w[i] ? w->w[i] - w->data : -1;
            hdr[2 + 2 * i] = i < m->n_layers && w->b[i] ? w->b[i] - w->data : -1;
        }
    }
    FF_TRY(ff_comm_bcast(x->comm, hdr, sizeof hdr, 0));
    if (x->base.rank == 0) {
        x->w = *w;
    } else {
        memset(&x->w, 0, sizeof x->w);
        x->w.n_total = hdr[0];
        x->own_data = malloc((size_t)(hdr[0] > 0 ? hdr[0] : 1) * sizeof(float));
        if (!x->own_data) return FF_FAIL(FF_ERR_OOM, "mpi mode: weights copy of %lld bytes", (long long)hdr[0] * 4);
        x->w.data = x->own_data;
        for (int i = 0; i < FF_MAX_LAYERS; i++) {
            x->w.w[i] = hdr[1 + 2 * i] >= 0 ? x->own_data + hdr[1 + 2 * i] : NULL;
            x->w.b[i] = hdr[2 + 2 * i] >= 0 ? x->own_data + hdr[2 + 2 * i] : NULL;
        }
    }
    return ff_comm_bcast(x->comm, x->w.data, (size_t)x->w.n_total * sizeof(float), 0);
}

static ff_status mpi_create(ff_executor **out, const ff_model *m, const ff_weights *w, const ff_exec_options *o) {
    *out = NULL;
    if (!o->comm)
        return FF_FAIL(FF_ERR_INPUT,
                       "mode mpi needs a communicator (run under mpiexec; the "
                       "options' comm is NULL)");
    if (o->split != FF_SPLIT_BATCH && o->split != FF_SPLIT_ROWS && o->split != FF_SPLIT_REPLICATE)
        return FF_FAIL(FF_ERR_INPUT,
                       "mode mpi: split '%s': expected batch, rows or replicate "
                       "(--split)",
                       ff_split_name(o->split));
    mpi_exec *x = calloc(1, sizeof *x);
    if (!x) return FF_FAIL(FF_ERR_OOM, "mpi executor: %zu bytes", sizeof *x);
    x->base.impl = &ff_mode_mpi_impl;
    x->base.model = m;
    x->base.opt = *o;
    x->comm = o->comm;
    x->base.rank = ff_comm_rank(o->comm);
    x->base.ranks = ff_comm_size(o->comm);
    ff_trace_reset(&x->base.trace);
    for (int k = 0; k < N_BUFS; k++) x->buf[k].name = buf_names[k];
    int P = x->base.ranks;
    x->counts = calloc((size_t)P, sizeof(size_t));
    x->displs = calloc((size_t)P, sizeof(size_t));
    x->sends = calloc((size_t)P, sizeof(ff_comm_msg));
    x->recvs = calloc((size_t)P, sizeof(ff_comm_msg));
    ff_status st = FF_OK;
    if (!x->counts || !x->displs || !x->sends || !x->recvs)
        st = FF_FAIL(FF_ERR_OOM, "mpi executor: scratch for %d ranks", P);
    if (st == FF_OK) st = share_weights(x, m, w);
    if (st != FF_OK) {
        mpi_destroy(&x->base);
        return st;
    }
    *out = &x->base;
    return FF_OK;
}

// ---------------------------------------------------------------- one layer, whole tensor

static void run_layer(mpi_exec *x, float *out, const float *in, int i, const ff_rows *rows, int64_t n) {
    const ff_layer *L = &x->base.model->layers[i];
    ff_rows full = ff_rows_full(L);
    ff_cpu_layer_forward(out, in, x->w.w[i], x->w.b[i], L, rows ? rows : &full, n);
}

static void maybe_fault(mpi_exec *x, float *out, int i, bool owner) {
    if (owner && x->base.opt.fault_layer == i) out[0] = ff_fault_value(out[0]);
}

// Picks an activation buffer holding neither a nor b.
static ff_guarded *other_act(mpi_exec *x, const float *a, const float *b) {
    for (int k = ACT0; k <= ACT2; k++) {
        float *d = ff_guarded_data(&x->buf[k]);
        if (!d || (d != a && d != b)) return &x->buf[k];
    }
    return NULL;  // unreachable: three buffers, two excluded
}

// ---------------------------------------------------------------- batch and replicate

static ff_status forward_batch(mpi_exec *x, float *out, const float *in, int64_t n, int first, int last) {
    const ff_model *m = x->base.model;
    const int P = x->base.ranks, me = x->base.rank;
    const int64_t in_el = ff_shape_numel(m->layers[first].in);
    const int64_t out_el = ff_shape_numel(m->layers[last].out);
    ff_range mine = ff_band(n, P, me);
    int64_t nl = ff_range_len(mine);
    int64_t max_el = in_el;
    for (int i = first; i <= last; i++)
        if (ff_shape_numel(m->layers[i].out) > max_el) max_el = ff_shape_numel(m->layers[i].out);
    FF_TRY(ff_guarded_reserve(&x->buf[ACT0], (size_t)(max_el * nl)));
    FF_TRY(ff_guarded_reserve(&x->buf[ACT1], (size_t)(max_el * nl)));
    for (int r = 0; r < P; r++) {
        ff_range b = ff_band(n, P, r);
        x->counts[r] = (size_t)(ff_range_len(b) * in_el) * sizeof(float);
        x->displs[r] = (size_t)(b.lo * in_el) * sizeof(float);
    }
    float *cur = ff_guarded_data(&x->buf[ACT0]);
    mark t = mark_now(x);
    FF_TRY(ff_comm_scatterv(x->comm, cur, x->counts[me], in, x->counts, x->displs, 0));
    account(x, FF_MAX_LAYERS, FF_PHASE_COMM, t);
    int owner0 = n > 0 ? ff_band_owner(n, P, 0) : -1;  // who holds image 0 (the fault hook)
    for (int i = first; i <= last; i++) {
        float *nxt = ff_guarded_data(&x->buf[cur == ff_guarded_data(&x->buf[ACT0]) ? ACT1 : ACT0]);
        t = mark_now(x);
        if (nl > 0) run_layer(x, nxt, cur, i, NULL, nl);
        maybe_fault(x, nxt, i, nl > 0 && me == owner0);
        account(x, i, FF_PHASE_COMPUTE, t);
        cur = nxt;
    }
    for (int r = 0; r < P; r++) {
        ff_range b = ff_band(n, P, r);
        x->counts[r] = (size_t)(ff_range_len(b) * out_el) * sizeof(float);
        x->displs[r] = (size_t)(b.lo * out_el) * sizeof(float);
    }
    t = mark_now(x);
    FF_TRY(ff_comm_gatherv(x->comm, out, x->counts, x->displs, cur, x->counts[me], 0));
    account(x, FF_MAX_LAYERS, FF_PHASE_COMM, t);
    return FF_OK;
}

static ff_status forward_replicate(mpi_exec *x, float *out, const float *in, int64_t n, int first, int last) {
    const ff_model *m = x->base.model;
    const int64_t in_el = ff_shape_numel(m->layers[first].in);
    int64_t max_el = in_el;
    for (int i = first; i <= last; i++)
        if (ff_shape_numel(m->layers[i].out) > max_el) max_el = ff_shape_numel(m->layers[i].out);
    FF_TRY(ff_guarded_reserve(&x->buf[ACT0], (size_t)(max_el * n)));
    FF_TRY(ff_guarded_reserve(&x->buf[ACT1], (size_t)(max_el * n)));
    float *cur = ff_guarded_data(&x->buf[ACT0]);
    if (x->base.rank == 0) memcpy(cur, in, (size_t)(in_el * n) * sizeof(float));
    mark t = mark_now(x);
    FF_TRY(ff_comm_bcast(x->comm, cur, (size_t)(in_el * n) * sizeof(float), 0));
    account(x, FF_MAX_LAYERS, FF_PHASE_COMM, t);
    for (int i = first; i <= last; i++) {
        float *nxt = ff_guarded_data(&x->buf[cur == ff_guarded_data(&x->buf[ACT0]) ? ACT1 : ACT0]);
        t = mark_now(x);
        run_layer(x, nxt, cur, i, NULL, n);
        maybe_fault(x, nxt, i, true);
        account(x, i, FF_PHASE_COMPUTE, t);
        cur = nxt;
    }
    // Every rank holds the same result; rank 0's is the answer.
    if (x->base.rank == 0) memcpy(out, cur, (size_t)(ff_shape_numel(m->layers[last].out) * n) * sizeof(float));
    return FF_OK;
}

// ---------------------------------------------------------------- rows

typedef enum {
    AT_ROOT,   // whole tensor on rank 0 only
    AT_ALL,    // whole tensor on every rank
    AT_BANDS,  // rank r holds rows bands[r] of a (n, C, H, W) tensor
} where;

typedef struct {
    where at;
    const float *p;         // this rank's data (AT_ROOT: meaningful on rank 0 only)
    ff_shape shape;         // per-image shape of the whole tensor
    const ff_range *bands;  // AT_BANDS: [P]
} tensor_state;

// AT_BANDS -> the whole tensor: every rank (to_all) or rank 0 (into dst, which may be the
// caller's output) receives every band; bands are unpacked from the packed blocks.
static ff_status collect_bands(mpi_exec *x, float *dst, tensor_state *s, int64_t n, bool to_all, int row,
                               const char *layer) {
    const int P = x->base.ranks, me = x->base.rank;
    const int64_t C = s->shape.c, H = s->shape.h, W = s->shape.w;
    size_t total = 0;
    for (int r = 0; r < P; r++) {
        x->counts[r] = band_floats(s->bands[r], n, C, W) * sizeof(float);
        x->displs[r] = total;
        total += x->counts[r];
    }
    ff_guarded *stage = &x->buf[RECV];
    FF_TRY(ff_guarded_reserve(stage, total / sizeof(float)));
    ff_guarded_arm(stage, total / sizeof(float));
    mark t = mark_now(x);
    if (to_all)
        FF_TRY(ff_comm_allgatherv(x->comm, ff_guarded_data(stage), x->counts, x->displs, s->p, x->counts[me]));
    else
        FF_TRY(ff_comm_gatherv(x->comm, ff_guarded_data(stage), x->counts, x->displs, s->p, x->counts[me], 0));
    account(x, row, FF_PHASE_COMM, t);
    FF_TRY(ff_guarded_check(stage, total / sizeof(float), "after gathering bands", layer));
    if (to_all || me == 0) {
        for (int r = 0; r < P; r++)
            copy_rows(dst, 0, H, (const float *)((const char *)ff_guarded_data(stage) + x->displs[r]), s->bands[r].lo,
                      ff_range_len(s->bands[r]), n, C, W, s->bands[r].lo, s->bands[r].hi);
    }
    s->at = to_all ? AT_ALL : AT_ROOT;
    s->p = dst;
    s->bands = NULL;
    return FF_OK;
}

// Brings the whole tensor to every rank (before an FC layer).
static ff_status make_all(mpi_exec *x, tensor_state *s, int64_t n, int row, const char *layer) {
    if (s->at == AT_ALL) return FF_OK;
    size_t floats = (size_t)(ff_shape_numel(s->shape) * n);
    ff_guarded *full = &x->buf[FULL];
    FF_TRY(ff_guarded_reserve(full, floats));
    ff_guarded_arm(full, floats);
    if (s->at == AT_BANDS) {
        FF_TRY(collect_bands(x, ff_guarded_data(full), s, n, true, row, layer));
    } else {
        if (x->base.rank == 0 && s->p != ff_guarded_data(full))
            memcpy(ff_guarded_data(full), s->p, floats * sizeof(float));
        mark t = mark_now(x);
        FF_TRY(ff_comm_bcast(x->comm, ff_guarded_data(full), floats * sizeof(float), 0));
        account(x, row, FF_PHASE_COMM, t);
        s->at = AT_ALL;
        s->p = ff_guarded_data(full);
    }
    return ff_guarded_check(full, floats, "after assembling the whole tensor", layer);
}

// Fills `dst` (n, C, need_len, W) with input rows lp->need[me] for a spatial layer.
static ff_status fetch_input(mpi_exec *x, ff_guarded *dst, const tensor_state *s, const ff_layer_part *lp,
                             const ff_layer *L, int64_t n) {
    const int P = x->base.ranks, me = x->base.rank, i = lp->layer;
    const int64_t C = L->in.c, H = L->in.h, W = L->in.w;
    ff_range need = lp->need[me];
    size_t used = band_floats(need, n, C, W);
    FF_TRY(ff_guarded_reserve(dst, used));
    ff_guarded_arm(dst, used);
    float *d = ff_guarded_data(dst);
    if (s->at == AT_ALL) {  // every rank has everything: take my rows
        copy_rows(d, need.lo, ff_range_len(need), s->p, 0, H, n, C, W, need.lo, need.hi);
    } else if (s->at == AT_ROOT) {  // rank 0 packs each rank's rows (halos included) and scatters
        size_t total = 0;
        for (int r = 0; r < P; r++) {
            x->counts[r] = band_floats(lp->need[r], n, C, W) * sizeof(float);
            x->displs[r] = total;
            total += x->counts[r];
        }
        ff_guarded *send = &x->buf[SEND];
        if (me == 0) {
            FF_TRY(ff_guarded_reserve(send, total / sizeof(float)));
            ff_guarded_arm(send, total / sizeof(float));
            for (int r = 0; r < P; r++)
                copy_rows((float *)((char *)ff_guarded_data(send) + x->displs[r]), lp->need[r].lo,
                          ff_range_len(lp->need[r]), s->p, 0, H, n, C, W, lp->need[r].lo, lp->need[r].hi);
            FF_TRY(ff_guarded_check(send, total / sizeof(float), "after packing the scatter", L->name));
        }
        mark t = mark_now(x);
        FF_TRY(ff_comm_scatterv(x->comm, d, used * sizeof(float), me == 0 ? ff_guarded_data(send) : NULL, x->counts,
                                x->displs, 0));
        account(x, i, FF_PHASE_COMM, t);
    } else {  // halo exchange from the previous layer's bands
        ff_range own = lp->own[me];
        copy_rows(d, need.lo, ff_range_len(need), s->p, own.lo, ff_range_len(own), n, C, W,
                  ff_range_intersect(need, own).lo, ff_range_intersect(need, own).hi);
        size_t send_total = 0, recv_total = 0;
        int ns = 0, nr = 0;
        for (int64_t k = 0; k < lp->n_xfers; k++) {
            const ff_xfer *xf = &lp->xfers[k];
            size_t f = band_floats(xf->rows, n, C, W);
            if (xf->src == me) send_total += f;
            if (xf->dst == me) recv_total += f;
        }
        ff_guarded *send = &x->buf[SEND], *recv = &x->buf[RECV];
        FF_TRY(ff_guarded_reserve(send, send_total));
        FF_TRY(ff_guarded_reserve(recv, recv_total));
        ff_guarded_arm(send, send_total);
        ff_guarded_arm(recv, recv_total);
        size_t so = 0, ro = 0;
        for (int64_t k = 0; k < lp->n_xfers; k++) {
            const ff_xfer *xf = &lp->xfers[k];
            size_t f = band_floats(xf->rows, n, C, W);
            if (xf->src == me) {  // contiguous bands: at most one message per peer and layer
                float *p = ff_guarded_data(send) + so;
                copy_rows(p, xf->rows.lo, ff_range_len(xf->rows), s->p, own.lo, ff_range_len(own), n, C, W, xf->rows.lo,
                          xf->rows.hi);
                x->sends[ns].peer = xf->dst;
                x->sends[ns].buf = p;
                x->sends[ns].bytes = f * sizeof(float);
                ns++;
                so += f;
            }
            if (xf->dst == me) {
                x->recvs[nr].peer = xf->src;
                x->recvs[nr].buf = ff_guarded_data(recv) + ro;
                x->recvs[nr].bytes = f * sizeof(float);
                nr++;
                ro += f;
            }
        }
        mark t = mark_now(x);
        FF_TRY(ff_comm_exchange(x->comm, x->sends, ns, x->recvs, nr));
        account(x, i, FF_PHASE_COMM, t);
        FF_TRY(ff_guarded_check(send, send_total, "after the halo exchange", L->name));
        FF_TRY(ff_guarded_check(recv, recv_total, "after the halo exchange", L->name));
        ro = 0;
        for (int64_t k = 0; k < lp->n_xfers; k++) {
            const ff_xfer *xf = &lp->xfers[k];
            if (xf->dst != me) continue;
            copy_rows(d, need.lo, ff_range_len(need), ff_guarded_data(recv) + ro, xf->rows.lo, ff_range_len(xf->rows),
                      n, C, W, xf->rows.lo, xf->rows.hi);
            ro += band_floats(xf->rows, n, C, W);
        }
    }
    return ff_guarded_check(dst, used,
                            s->at == AT_BANDS ? "after unpacking halo rows"
                                              : "after the "
                                                "scatter",
                            L->name);
}

// Image groups of the rows split. A layer whose height P does not divide leaves some ranks one
// row more than the others (AlexNet's 13-row maps over 4 ranks: 3, 3, 3, 4), and every rank waits
// for the heaviest at the next halo. So the batch is cut into G = min(P, n) contiguous groups and
// group g uses the partition rotated by g (ff_band_rotated): the extra rows fall on every rank in
// turn, and a rank's rows per layer, summed over the groups, differ by at most a fraction of a row.
// Per layer, every group's input is fetched first (scatter or halo exchange: no compute in
// between, so no rank waits on another's computing), then every group is computed (conv: one
// ff_cpu_conv2d_segments call, the weights packed once). Bits are unchanged: each output element
// is computed from its inputs alone, whichever rank and group computes it.
typedef struct {
    int G;
    ff_partition **part;   // [G] partition of group g, rotation g
    ff_range *images;      // [G] images of group g
    tensor_state *s;       // [G] where group g's tensor is
    const float **src;     // [G] scratch: the input rows of the layer being computed
    ff_conv_segment *seg;  // [G] scratch
} row_groups;

static void groups_free(row_groups *gr) {
    for (int g = 0; gr->part && g < gr->G; g++) ff_partition_free(gr->part[g]);
    free(gr->part);
    free(gr->images);
    free(gr->s);
    free(gr->src);
    free(gr->seg);
}

static ff_status groups_build(mpi_exec *x, row_groups *gr, int64_t n, int first, int last) {
    const int P = x->base.ranks;
    memset(gr, 0, sizeof *gr);
    gr->G = n > P ? P : n > 0 ? (int)n : 1;
    const int G = gr->G;
    gr->part = calloc((size_t)G, sizeof *gr->part);
    gr->images = calloc((size_t)G, sizeof *gr->images);
    gr->s = calloc((size_t)G, sizeof *gr->s);
    gr->src = calloc((size_t)G, sizeof *gr->src);
    gr->seg = calloc((size_t)G, sizeof *gr->seg);
    if (!gr->part || !gr->images || !gr->s || !gr->src || !gr->seg)
        return FF_FAIL(FF_ERR_OOM, "mpi rows split: state for %d image groups", G);
    // Three activation buffers per group (its input rows, output band, and the previous band).
    if (x->n_gbuf < 3 * G) {
        ff_guarded *nb = realloc(x->gbuf, (size_t)(3 * G) * sizeof *nb);
        if (!nb) return FF_FAIL(FF_ERR_OOM, "mpi rows split: buffers for %d image groups", G);
        memset(nb + x->n_gbuf, 0, (size_t)(3 * G - x->n_gbuf) * sizeof *nb);
        for (int k = x->n_gbuf; k < 3 * G; k++) nb[k].name = "group activation";
        x->gbuf = nb;
        x->n_gbuf = 3 * G;
    }
    for (int g = 0; g < G; g++) {
        gr->images[g] = ff_band(n, G, g);
        FF_TRY(ff_partition_build_rotated(&gr->part[g], x->base.model, first, last, P, FF_SPLIT_ROWS,
                                          ff_range_len(gr->images[g]), g));
    }
    return FF_OK;
}

// A group buffer holding neither a nor b.
static ff_guarded *group_act(mpi_exec *x, int g, const float *a, const float *b) {
    for (int k = 3 * g; k < 3 * g + 3; k++) {
        float *d = ff_guarded_data(&x->gbuf[k]);
        if (!d || (d != a && d != b)) return &x->gbuf[k];
    }
    return NULL;  // unreachable: three buffers, two excluded
}

// One spatial layer for every group: inputs first, then the computation.
static ff_status rows_spatial_layer(mpi_exec *x, row_groups *gr, int i, int first) {
    const ff_layer *L = &x->base.model->layers[i];
    const int me = x->base.rank;
    for (int g = 0; g < gr->G; g++) {
        const ff_layer_part *lp = &gr->part[g]->layer[i - first];
        const int64_t ng = ff_range_len(gr->images[g]);
        tensor_state *s = &gr->s[g];
        gr->src[g] = s->p;
        // Input rows for my band: scattered, taken locally, exchanged, or (relu/lrn after a banded
        // layer) exactly the rows I already hold.
        if (!(s->at == AT_BANDS && !lp->windowed)) {
            ff_guarded *inb = group_act(x, g, s->p, NULL);
            FF_TRY(fetch_input(x, inb, s, lp, L, ng));
            gr->src[g] = ff_guarded_data(inb);
        }
    }
    mark t = mark_now(x);
    for (int g = 0; g < gr->G; g++) {
        const ff_layer_part *lp = &gr->part[g]->layer[i - first];
        const int64_t ng = ff_range_len(gr->images[g]);
        const ff_range band = lp->band[me];
        ff_guarded *ob = group_act(x, g, gr->src[g], gr->s[g].p);
        FF_TRY(ff_guarded_reserve(ob, band_floats(band, ng, L->out.c, L->out.w)));
        const ff_rows rows = {lp->need[me].lo, lp->need[me].hi, band.lo, band.hi};
        if (L->op == FF_OP_CONV2D) {
            gr->seg[g] = (ff_conv_segment){ff_guarded_data(ob), gr->src[g], rows, ff_range_len(band) > 0 ? ng : 0};
        } else if (ff_range_len(band) > 0 && ng > 0) {
            run_layer(x, ff_guarded_data(ob), gr->src[g], i, &rows, ng);
        }
        gr->s[g].at = AT_BANDS;
        gr->s[g].p = ff_guarded_data(ob);
        gr->s[g].shape = L->out;
        gr->s[g].bands = lp->band;
    }
    if (L->op == FF_OP_CONV2D) ff_cpu_conv2d_segments(gr->seg, gr->G, x->w.w[i], x->w.b[i], L);
    // The fault hook: the element of image 0 (group 0), row 0, on the rank that computes it.
    const ff_range b0 = gr->part[0]->layer[i - first].band[me];
    maybe_fault(x, (float *)gr->s[0].p, i, b0.lo == 0 && ff_range_len(b0) > 0 && ff_range_len(gr->images[0]) > 0);
    account(x, i, FF_PHASE_COMPUTE, t);
    return FF_OK;
}

static ff_status forward_rows(mpi_exec *x, float *out, const float *in, int64_t n, int first, int last) {
    const ff_model *m = x->base.model;
    const int P = x->base.ranks, me = x->base.rank;
    row_groups gr;
    ff_status st = groups_build(x, &gr, n, first, last);
    tensor_state s = {AT_ROOT, in, m->layers[first].in, NULL};  // the whole tensor, when not banded
    bool banded = false;                                        // the groups' states hold the data
    for (int i = first; i <= last && st == FF_OK; i++) {
        const ff_layer *L = &m->layers[i];
        const ff_layer_part *lp = &gr.part[0]->layer[i - first];
        if (lp->spatial) {
            if (!banded) {  // every group starts from its images of the whole tensor
                const int64_t per = ff_shape_numel(s.shape);
                for (int g = 0; g < gr.G; g++) {
                    gr.s[g] = s;
                    gr.s[g].p = s.p ? s.p + gr.images[g].lo * per : NULL;
                }
            }
            st = rows_spatial_layer(x, &gr, i, first);
            banded = true;
            continue;
        }
        if (banded) {  // every group's bands -> the whole tensor on every rank
            const int64_t per = ff_shape_numel(gr.s[0].shape);
            size_t floats = (size_t)(per * n);
            ff_guarded *full = &x->buf[FULL];
            st = ff_guarded_reserve(full, floats);
            if (st != FF_OK) break;
            ff_guarded_arm(full, floats);
            for (int g = 0; g < gr.G && st == FF_OK; g++)
                st = collect_bands(x, ff_guarded_data(full) + gr.images[g].lo * per, &gr.s[g],
                                   ff_range_len(gr.images[g]), true, i, L->name);
            if (st == FF_OK) st = ff_guarded_check(full, floats, "after assembling bands", L->name);
            if (st != FF_OK) break;
            s.at = AT_ALL;
            s.p = ff_guarded_data(full);
            s.shape = gr.s[0].shape;
            s.bands = NULL;
            banded = false;
        }
        if (L->op == FF_OP_LINEAR) {
            // Every rank needs the whole input; rank r computes output features band[r].
            st = make_all(x, &s, n, i, L->name);
            if (st != FF_OK) break;
            ff_range f = lp->band[me];
            int64_t nf = ff_range_len(f), in_el = ff_shape_numel(L->in), out_el = L->out.c;
            ff_guarded *slice = other_act(x, s.p, NULL);
            st = ff_guarded_reserve(slice, (size_t)(nf * n));
            if (st != FF_OK) break;
            mark t = mark_now(x);
            if (nf > 0 && n > 0) {
                ff_layer sub = *L;  // the same layer restricted to features [f.lo, f.hi)
                sub.out_c = nf;
                sub.out.c = nf;
                sub.n_weight = nf * in_el;
                sub.n_bias = nf;
                ff_cpu_linear(ff_guarded_data(slice), s.p, x->w.w[i] + f.lo * in_el, x->w.b[i] + f.lo, &sub, n);
                maybe_fault(x, ff_guarded_data(slice), i, f.lo == 0);
            }
            account(x, i, FF_PHASE_COMPUTE, t);
            size_t total = 0;
            for (int r = 0; r < P; r++) {
                x->counts[r] = (size_t)(ff_range_len(lp->band[r]) * n) * sizeof(float);
                x->displs[r] = total;
                total += x->counts[r];
            }
            ff_guarded *stage = &x->buf[RECV];
            st = ff_guarded_reserve(stage, total / sizeof(float));
            if (st != FF_OK) break;
            ff_guarded_arm(stage, total / sizeof(float));
            t = mark_now(x);
            st = ff_comm_allgatherv(x->comm, ff_guarded_data(stage), x->counts, x->displs, ff_guarded_data(slice),
                                    x->counts[me]);
            account(x, i, FF_PHASE_COMM, t);
            if (st == FF_OK)
                st = ff_guarded_check(stage, total / sizeof(float),
                                      "after gathering "
                                      "features",
                                      L->name);
            if (st != FF_OK) break;
            ff_guarded *ob = other_act(x, ff_guarded_data(slice), NULL);
            st = ff_guarded_reserve(ob, (size_t)(out_el * n));
            if (st != FF_OK) break;
            float *o = ff_guarded_data(ob);
            for (int r = 0; r < P; r++) {  // per-rank blocks (n, nf_r) -> (n, out)
                ff_range fr = lp->band[r];
                const float *blk = (const float *)((const char *)ff_guarded_data(stage) + x->displs[r]);
                for (int64_t img = 0; img < n; img++)
                    memcpy(o + img * out_el + fr.lo, blk + img * ff_range_len(fr),
                           (size_t)ff_range_len(fr) * sizeof(float));
            }
            s.at = AT_ALL;
            s.p = o;
            s.shape = L->out;
        } else {
            // flatten, softmax, relu after an FC layer: whole, wherever the data is.
            bool compute = s.at == AT_ALL || me == 0;
            ff_guarded *ob = other_act(x, s.p, NULL);
            st = ff_guarded_reserve(ob, (size_t)(ff_shape_numel(L->out) * n));
            if (st != FF_OK) break;
            mark t = mark_now(x);
            if (compute && n > 0) {
                run_layer(x, ff_guarded_data(ob), s.p, i, NULL, n);
                maybe_fault(x, ff_guarded_data(ob), i, true);
            }
            account(x, i, FF_PHASE_COMPUTE, t);
            s.p = ff_guarded_data(ob);
            s.shape = L->out;
        }
    }
    if (st == FF_OK) {
        const int64_t per = ff_shape_numel(m->layers[last].out);
        if (banded) {
            for (int g = 0; g < gr.G && st == FF_OK; g++)
                st = collect_bands(x, me == 0 && out ? out + gr.images[g].lo * per : NULL, &gr.s[g],
                                   ff_range_len(gr.images[g]), false, FF_MAX_LAYERS, m->layers[last].name);
        } else if (me == 0) {
            memcpy(out, s.p, (size_t)(per * n) * sizeof(float));
        }
    }
    groups_free(&gr);
    return st;
}

static ff_status mpi_forward(ff_executor *e, float *out, const float *in, int64_t n, int first, int last) {
    mpi_exec *x = (mpi_exec *)e;
    const ff_model *m = e->model;
    if (first < 0 || last >= m->n_layers || first > last)
        return FF_FAIL(FF_ERR_INPUT, "layer range [%d, %d]: expected 0 <= first <= last < %d", first, last,
                       m->n_layers);
    if (n < 0) return FF_FAIL(FF_ERR_INPUT, "batch %lld: expected >= 0", (long long)n);
    if (x->base.rank == 0 && n > 0 && (!in || !out))
        return FF_FAIL(FF_ERR_INPUT, "mpi mode: rank 0 needs input and output buffers");
    switch (e->opt.split) {
        case FF_SPLIT_BATCH: return forward_batch(x, out, in, n, first, last);
        case FF_SPLIT_REPLICATE: return forward_replicate(x, out, in, n, first, last);
        case FF_SPLIT_ROWS: return forward_rows(x, out, in, n, first, last);
        default:
            return FF_FAIL(FF_ERR_INPUT, "mode mpi: split '%s': expected batch, rows or replicate",
                           ff_split_name(e->opt.split));
    }
}

const ff_mode_impl ff_mode_mpi_impl = {"mpi", mpi_create, mpi_forward, mpi_destroy};
