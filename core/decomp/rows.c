// Split rows (decomp.h): every spatial layer is cut into bands of output rows (partition.h, per
// the plan: a Winograd band fetches whole tiles); before a windowed layer each rank fetches the
// input rows its band needs from whichever ranks own them. Before an FC layer the bands are
// all-gathered and the FC layer is split by output feature; flatten, softmax and layers the plan
// computes whole run on the rank(s) holding the whole tensor (rank 0 when the data is only there,
// every rank when every rank holds it). A range with no spatial layer simply runs that way.
#include <stdlib.h>
#include <string.h>

#include "decomp_internal.h"

static size_t band_floats(ff_range r, int64_t n, int64_t C, int64_t W) {
    return (size_t)(ff_range_len(r) * n * C * W);
}

typedef enum {
    AT_ROOT,   // whole tensor on rank 0 only
    AT_ALL,    // whole tensor on every rank
    AT_BANDS,  // rank r holds rows bands[r] of a (n, C, H, W) tensor
} where;

typedef struct {
    where at;
    const float *p;         // this rank's data, device memory (AT_ROOT: meaningful on rank 0 only)
    ff_shape shape;         // per-image shape of the whole tensor
    const ff_range *bands;  // AT_BANDS: [P]
} tensor_state;

static ff_status fault_here(ff_decomp *x, float *out, int i, bool owner) {
    return owner && x->fault_layer == i ? ff_device_fault(x->dev, out) : FF_OK;
}

// Picks an activation buffer holding neither a nor b.
static ff_guarded *other_act(ff_decomp *x, const float *a, const float *b) {
    for (int k = ACT0; k <= ACT2; k++) {
        float *d = ff_guarded_data(&x->buf[k]);
        if (!d || (d != a && d != b)) return &x->buf[k];
    }
    return NULL;  // unreachable: three buffers, two excluded
}

// AT_BANDS -> the whole tensor: every rank (to_all) or rank 0 (into dst) receives every band;
// bands are unpacked from the packed blocks.
// crash_layer: the layer this collection belongs to (the test hooks' ff_decomp_crash_point).
static ff_status collect_bands(ff_decomp *x, float *dst, tensor_state *s, int64_t n, bool to_all, int row,
                               const char *layer, int crash_layer) {
    const int P = x->ranks, me = x->rank;
    const int64_t C = s->shape.c, H = s->shape.h, W = s->shape.w;
    size_t total = 0;
    for (int r = 0; r < P; r++) {
        x->counts[r] = band_floats(s->bands[r], n, C, W) * sizeof(float);
        x->displs[r] = total;
        total += x->counts[r];
    }
    ff_guarded *stage = &x->buf[RECV];
    FF_TRY(ff_decomp_reserve(stage, total / sizeof(float)));
    FF_TRY(ff_decomp_comm_ready(x));
    ff_decomp_crash_point(x, crash_layer);
    ff_mark t = ff_decomp_mark(x);
    if (to_all)
        FF_TRY(ff_comm_allgatherv(x->comm, ff_guarded_data(stage), x->counts, x->displs, s->p, x->counts[me]));
    else
        FF_TRY(ff_comm_gatherv(x->comm, ff_guarded_data(stage), x->counts, x->displs, s->p, x->counts[me], 0));
    FF_TRY(ff_decomp_account(x, row, FF_PHASE_COMM, t));
    FF_TRY(ff_guarded_check(stage, total / sizeof(float), "after gathering bands", layer));
    if (to_all || me == 0) {
        for (int r = 0; r < P; r++)
            FF_TRY(ff_device_copy_rows(
                x->dev, dst, 0, H, (const float *)((const char *)ff_guarded_data(stage) + x->displs[r]), s->bands[r].lo,
                ff_range_len(s->bands[r]), n, C, W, s->bands[r].lo, s->bands[r].hi));
    }
    s->at = to_all ? AT_ALL : AT_ROOT;
    s->p = dst;
    s->bands = NULL;
    return FF_OK;
}

// Brings the whole tensor to every rank (before an FC layer).
static ff_status make_all(ff_decomp *x, tensor_state *s, int64_t n, int row, const char *layer) {
    if (s->at == AT_ALL) return FF_OK;
    size_t floats = (size_t)(ff_shape_numel(s->shape) * n);
    ff_guarded *full = &x->buf[FULL];
    FF_TRY(ff_decomp_reserve(full, floats));
    if (s->at == AT_BANDS) {
        FF_TRY(collect_bands(x, ff_guarded_data(full), s, n, true, row, layer, row));
    } else {
        if (x->rank == 0 && s->p != ff_guarded_data(full))
            FF_TRY(ff_device_copy_bytes(x->dev, ff_guarded_data(full), s->p, floats * sizeof(float)));
        FF_TRY(ff_decomp_comm_ready(x));
        ff_decomp_crash_point(x, row);
        ff_mark t = ff_decomp_mark(x);
        FF_TRY(ff_comm_bcast(x->comm, ff_guarded_data(full), floats * sizeof(float), 0));
        FF_TRY(ff_decomp_account(x, row, FF_PHASE_COMM, t));
        s->at = AT_ALL;
        s->p = ff_guarded_data(full);
    }
    return ff_guarded_check(full, floats, "after assembling the whole tensor", layer);
}

// Fills `dst` (n, C, need_len, W) with input rows lp->need[me] for a spatial layer. `early`
// (halo exchanges only; NULL: none) is a band job over the rows this rank already holds: it is
// enqueued once the halo rows are packed, and runs while they travel (ff_device_fence).
static ff_status fetch_input(ff_decomp *x, ff_guarded *dst, const tensor_state *s, const ff_layer_part *lp,
                             const ff_layer *L, int64_t n, const ff_band_job *early) {
    const int P = x->ranks, me = x->rank, i = lp->layer;
    const int64_t C = L->in.c, H = L->in.h, W = L->in.w;
    const ff_range need = lp->need[me];
    const size_t used = band_floats(need, n, C, W);
    FF_TRY(ff_decomp_reserve(dst, used));
    float *d = ff_guarded_data(dst);
    if (s->at == AT_ALL) {  // every rank has everything: take my rows
        FF_TRY(ff_device_copy_rows(x->dev, d, need.lo, ff_range_len(need), s->p, 0, H, n, C, W, need.lo, need.hi));
    } else if (s->at == AT_ROOT) {  // rank 0 packs each rank's rows (halos included) and scatters
        size_t total = 0;
        for (int r = 0; r < P; r++) {
            x->counts[r] = band_floats(lp->need[r], n, C, W) * sizeof(float);
            x->displs[r] = total;
            total += x->counts[r];
        }
        ff_guarded *send = &x->buf[SEND];
        if (me == 0) {
            FF_TRY(ff_decomp_reserve(send, total / sizeof(float)));
            for (int r = 0; r < P; r++)
                FF_TRY(ff_device_copy_rows(x->dev, (float *)((char *)ff_guarded_data(send) + x->displs[r]),
                                           lp->need[r].lo, ff_range_len(lp->need[r]), s->p, 0, H, n, C, W,
                                           lp->need[r].lo, lp->need[r].hi));
            FF_TRY(ff_guarded_check(send, total / sizeof(float), "after packing the scatter", L->name));
        }
        FF_TRY(ff_decomp_comm_ready(x));
        ff_decomp_crash_point(x, i);
        ff_mark t = ff_decomp_mark(x);
        FF_TRY(ff_comm_scatterv(x->comm, d, used * sizeof(float), me == 0 ? ff_guarded_data(send) : NULL, x->counts,
                                x->displs, 0));
        FF_TRY(ff_decomp_account(x, i, FF_PHASE_COMM, t));
    } else {  // halo exchange from the previous layer's bands
        const ff_range own = lp->own[me];
        const ff_range kept = ff_range_intersect(need, own);
        FF_TRY(ff_device_copy_rows(x->dev, d, need.lo, ff_range_len(need), s->p, own.lo, ff_range_len(own), n, C, W,
                                   kept.lo, kept.hi));
        size_t send_total = 0, recv_total = 0;
        int ns = 0, nr = 0;
        for (int64_t k = 0; k < lp->n_xfers; k++) {
            const ff_xfer *xf = &lp->xfers[k];
            size_t f = band_floats(xf->rows, n, C, W);
            if (xf->src == me) send_total += f;
            if (xf->dst == me) recv_total += f;
        }
        ff_guarded *send = &x->buf[SEND], *recv = &x->buf[RECV];
        FF_TRY(ff_decomp_reserve(send, send_total));
        FF_TRY(ff_decomp_reserve(recv, recv_total));
        size_t so = 0, ro = 0;
        for (int64_t k = 0; k < lp->n_xfers; k++) {
            const ff_xfer *xf = &lp->xfers[k];
            size_t f = band_floats(xf->rows, n, C, W);
            if (xf->src == me) {  // contiguous bands: at most one message per peer and layer
                float *p = ff_guarded_data(send) + so;
                FF_TRY(ff_device_copy_rows(x->dev, p, xf->rows.lo, ff_range_len(xf->rows), s->p, own.lo,
                                           ff_range_len(own), n, C, W, xf->rows.lo, xf->rows.hi));
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
        if (early) {  // wait for the packing only: the interior computes during the exchange
            FF_TRY(ff_device_fence(x->dev));
            FF_TRY(ff_device_run_bands(x->dev, early, 1, i));
            FF_TRY(ff_device_wait_fence(x->dev));
        } else {
            FF_TRY(ff_decomp_comm_ready(x));
        }
        ff_decomp_crash_point(x, i);
        ff_mark t = ff_decomp_mark(x);
        FF_TRY(ff_comm_exchange(x->comm, x->sends, ns, x->recvs, nr));
        FF_TRY(ff_decomp_account(x, i, FF_PHASE_COMM, t));
        FF_TRY(ff_guarded_check(send, send_total, "after the halo exchange", L->name));
        FF_TRY(ff_guarded_check(recv, recv_total, "after the halo exchange", L->name));
        ro = 0;
        for (int64_t k = 0; k < lp->n_xfers; k++) {
            const ff_xfer *xf = &lp->xfers[k];
            if (xf->dst != me) continue;
            FF_TRY(ff_device_copy_rows(x->dev, d, need.lo, ff_range_len(need), ff_guarded_data(recv) + ro, xf->rows.lo,
                                       ff_range_len(xf->rows), n, C, W, xf->rows.lo, xf->rows.hi));
            ro += band_floats(xf->rows, n, C, W);
        }
    }
    return ff_guarded_check(dst, used, s->at == AT_BANDS ? "after unpacking halo rows" : "after the scatter", L->name);
}

// Image groups. A layer whose height P does not divide leaves some ranks one row more than the
// others (AlexNet's 13-row maps over 4 ranks: 3, 3, 3, 4), and every rank waits for the heaviest
// at the next halo. So the batch is cut into G = min(P, n) contiguous groups and group g uses the
// partition rotated by g (ff_band_rotated): the extra rows fall on every rank in turn, and a
// rank's rows per layer, summed over the groups, differ by at most a fraction of a row. Per
// layer, every group's input is fetched first (scatter or halo exchange: no compute in between,
// so no rank waits on another's computing), then every group is computed in one
// ff_device_run_bands call (the CPU packs a conv's weights once for all of them). Bits are
// unchanged: each output element is computed from its inputs alone, whichever rank and group
// computes it.
typedef struct {
    int G;
    ff_partition **part;  // [G] partition of group g, rotation g
    ff_range *images;     // [G] images of group g
    tensor_state *s;      // [G] where group g's tensor is
    const float **src;    // [G] scratch: the input rows of the layer being computed
    ff_band_job *job;     // [2G] scratch
    ff_range *interior;   // [G] scratch: output rows computed during the halo exchange (or empty)
} row_groups;

static void groups_free(row_groups *gr) {
    for (int g = 0; gr->part && g < gr->G; g++) ff_partition_free(gr->part[g]);
    free(gr->part);
    free(gr->images);
    free(gr->s);
    free(gr->src);
    free(gr->job);
    free(gr->interior);
}

void ff_decomp_rows_free(ff_decomp *x) {
    for (int k = 0; k < x->n_gbuf; k++) ff_guarded_free(&x->gbuf[k]);
    free(x->gbuf);
    x->gbuf = NULL;
    x->n_gbuf = 0;
}

enum { GROUP_BUFS = 4 };

static ff_status groups_build(ff_decomp *x, row_groups *gr, int64_t n, int first, int last) {
    const int P = x->ranks;
    memset(gr, 0, sizeof *gr);
    gr->G = n > P ? P : n > 0 ? (int)n : 1;
    const int G = gr->G;
    gr->part = calloc((size_t)G, sizeof *gr->part);
    gr->images = calloc((size_t)G, sizeof *gr->images);
    gr->s = calloc((size_t)G, sizeof *gr->s);
    gr->src = calloc((size_t)G, sizeof *gr->src);
    gr->job = calloc((size_t)(2 * G), sizeof *gr->job);
    gr->interior = calloc((size_t)G, sizeof *gr->interior);
    if (!gr->part || !gr->images || !gr->s || !gr->src || !gr->job || !gr->interior)
        return FF_FAIL(FF_ERR_OOM, "rows split: state for %d image groups", G);
    // Four buffers per group: three activations (its input rows, output band, the previous band)
    // and the pieces of a band computed apart (interior during the exchange, then the edges).
    if (x->n_gbuf < GROUP_BUFS * G) {
        ff_guarded *nb = realloc(x->gbuf, (size_t)(GROUP_BUFS * G) * sizeof *nb);
        if (!nb) return FF_FAIL(FF_ERR_OOM, "rows split: buffers for %d image groups", G);
        memset(nb + x->n_gbuf, 0, (size_t)(GROUP_BUFS * G - x->n_gbuf) * sizeof *nb);
        for (int k = x->n_gbuf; k < GROUP_BUFS * G; k++) {
            nb[k].name = k % GROUP_BUFS == 3 ? "group band pieces" : "group activation";
            nb[k].dev = x->dev;
        }
        x->gbuf = nb;
        x->n_gbuf = GROUP_BUFS * G;
    }
    for (int g = 0; g < G; g++) {
        gr->images[g] = ff_band(n, G, g);
        FF_TRY(ff_partition_build_planned(&gr->part[g], x->model, x->plan, first, last, P, FF_SPLIT_ROWS,
                                          ff_range_len(gr->images[g]), g));
    }
    return FF_OK;
}

// A group buffer holding neither a nor b.
static ff_guarded *group_act(ff_decomp *x, int g, const float *a, const float *b) {
    for (int k = GROUP_BUFS * g; k < GROUP_BUFS * g + 3; k++) {
        float *d = ff_guarded_data(&x->gbuf[k]);
        if (!d || (d != a && d != b)) return &x->gbuf[k];
    }
    return NULL;  // unreachable: three buffers, two excluded
}

// The output rows of `band` whose inputs (per the plan: whole Winograd tiles) all lie in `held`:
// computable before any halo arrives. Empty when there are none, or when a device that computes
// synchronously would gain nothing from computing them apart.
static ff_range interior_rows(const ff_decomp *x, int i, ff_range band, ff_range held) {
    ff_range r = {band.lo, band.lo};
    if (!ff_device_is_async(x->dev) || x->plan->layer[i].band != FF_BAND_ROWS) return r;
    int64_t a = band.lo, b = band.hi;
    while (a < b && ff_plan_input_rows(x->plan, x->model, i, a, a + 1).lo < held.lo) a++;
    while (b > a && ff_plan_input_rows(x->plan, x->model, i, b - 1, b).hi > held.hi) b--;
    if (a < b) {
        const ff_range in = ff_plan_input_rows(x->plan, x->model, i, a, b);
        if (in.lo >= held.lo && in.hi <= held.hi) r = (ff_range){a, b};
    }
    return r;
}

// One spatial layer for every group: inputs first, then the computation. Where a group's input
// comes by halo exchange on an asynchronous device, the rows of its band that need no halo (the
// interior) are computed while the halos travel, into the group's piece buffer; the edges
// follow the exchange, and the pieces are copied into the band. Each output element is computed
// from the same inputs by the same kernel whichever piece holds it: the bits do not change.
static ff_status rows_spatial_layer(ff_decomp *x, row_groups *gr, int i, int first) {
    const ff_layer *L = &x->model->layers[i];
    const int me = x->rank;
    const int64_t K = L->out.c, Wo = L->out.w;
    for (int g = 0; g < gr->G; g++) {
        const ff_layer_part *lp = &gr->part[g]->layer[i - first];
        const int64_t ng = ff_range_len(gr->images[g]);
        const ff_range band = lp->band[me];
        tensor_state *s = &gr->s[g];
        gr->src[g] = s->p;
        gr->interior[g] = (ff_range){band.lo, band.lo};
        // Input rows for my band: scattered, taken locally, exchanged, or (relu/lrn after a banded
        // layer) exactly the rows I already hold.
        if (!(s->at == AT_BANDS && !lp->windowed)) {
            ff_guarded *inb = group_act(x, g, s->p, NULL);
            ff_band_job early;
            const ff_band_job *ep = NULL;
            if (s->at == AT_BANDS && ng > 0) {
                const ff_range held = ff_range_intersect(lp->need[me], lp->own[me]);
                const ff_range in = interior_rows(x, i, band, held);
                if (ff_range_len(in) > 0 && ff_range_len(in) < ff_range_len(band)) {
                    ff_guarded *pieces = &x->gbuf[GROUP_BUFS * g + 3];
                    FF_TRY(ff_guarded_reserve(pieces, band_floats(band, ng, K, Wo)));
                    FF_TRY(ff_guarded_reserve(inb, band_floats(lp->need[me], ng, L->in.c, L->in.w)));
                    const ff_rows rows = {lp->need[me].lo, lp->need[me].hi, in.lo, in.hi};
                    early = (ff_band_job){ff_guarded_data(pieces), ff_guarded_data(inb), rows, ng};
                    ep = &early;
                    gr->interior[g] = in;
                }
            }
            FF_TRY(fetch_input(x, inb, s, lp, L, ng, ep));
            gr->src[g] = ff_guarded_data(inb);
        }
    }
    ff_mark t = ff_decomp_mark(x);
    int nj = 0;
    for (int g = 0; g < gr->G; g++) {
        const ff_layer_part *lp = &gr->part[g]->layer[i - first];
        const int64_t ng = ff_range_len(gr->images[g]);
        const ff_range band = lp->band[me], in = gr->interior[g];
        ff_guarded *ob = group_act(x, g, gr->src[g], gr->s[g].p);
        FF_TRY(ff_guarded_reserve(ob, band_floats(band, ng, K, Wo)));
        const int64_t nlo = lp->need[me].lo, nhi = lp->need[me].hi;
        if (ff_range_len(in) == 0) {
            const ff_rows rows = {nlo, nhi, band.lo, band.hi};
            gr->job[nj++] = (ff_band_job){ff_guarded_data(ob), gr->src[g], rows, ff_range_len(band) > 0 ? ng : 0};
        } else {  // the edges, after the interior in the piece buffer: [interior | top | bottom]
            float *pieces = ff_guarded_data(&x->gbuf[GROUP_BUFS * g + 3]);
            float *top = pieces + band_floats(in, ng, K, Wo);
            float *bottom = top + band_floats((ff_range){band.lo, in.lo}, ng, K, Wo);
            if (in.lo > band.lo)
                gr->job[nj++] = (ff_band_job){top, gr->src[g], (ff_rows){nlo, nhi, band.lo, in.lo}, ng};
            if (in.hi < band.hi)
                gr->job[nj++] = (ff_band_job){bottom, gr->src[g], (ff_rows){nlo, nhi, in.hi, band.hi}, ng};
        }
        gr->s[g].at = AT_BANDS;
        gr->s[g].p = ff_guarded_data(ob);
        gr->s[g].shape = L->out;
        gr->s[g].bands = lp->band;
    }
    FF_TRY(ff_device_run_bands(x->dev, gr->job, nj, i));
    for (int g = 0; g < gr->G; g++) {  // pieces -> bands
        const ff_range band = gr->part[g]->layer[i - first].band[me], in = gr->interior[g];
        if (ff_range_len(in) == 0) continue;
        const int64_t ng = ff_range_len(gr->images[g]), bl = ff_range_len(band);
        float *ob = (float *)gr->s[g].p, *pieces = ff_guarded_data(&x->gbuf[GROUP_BUFS * g + 3]);
        float *top = pieces + band_floats(in, ng, K, Wo);
        float *bottom = top + band_floats((ff_range){band.lo, in.lo}, ng, K, Wo);
        FF_TRY(ff_device_copy_rows(x->dev, ob, band.lo, bl, pieces, in.lo, ff_range_len(in), ng, K, Wo, in.lo, in.hi));
        if (in.lo > band.lo)
            FF_TRY(
                ff_device_copy_rows(x->dev, ob, band.lo, bl, top, band.lo, in.lo - band.lo, ng, K, Wo, band.lo, in.lo));
        if (in.hi < band.hi)
            FF_TRY(ff_device_copy_rows(x->dev, ob, band.lo, bl, bottom, in.hi, band.hi - in.hi, ng, K, Wo, in.hi,
                                       band.hi));
    }
    // The fault hook: the element of image 0 (group 0), row 0, on the rank that computes it.
    const ff_range b0 = gr->part[0]->layer[i - first].band[me];
    FF_TRY(
        fault_here(x, (float *)gr->s[0].p, i, b0.lo == 0 && ff_range_len(b0) > 0 && ff_range_len(gr->images[0]) > 0));
    return ff_decomp_account(x, i, FF_PHASE_COMPUTE, t);
}

// A linear layer split by output feature: every rank needs the whole input; rank r computes
// features band[r]; the blocks are all-gathered and interleaved into (n, out) on every rank.
static ff_status rows_linear_layer(ff_decomp *x, tensor_state *s, const ff_layer_part *lp, int i, int64_t n) {
    const ff_layer *L = &x->model->layers[i];
    const int P = x->ranks, me = x->rank;
    FF_TRY(make_all(x, s, n, i, L->name));
    const ff_range f = lp->band[me];
    const int64_t nf = ff_range_len(f), out_el = L->out.c;
    ff_guarded *slice = other_act(x, s->p, NULL);
    FF_TRY(ff_guarded_reserve(slice, (size_t)(nf * n)));
    ff_mark t = ff_decomp_mark(x);
    if (nf > 0 && n > 0) {
        FF_TRY(ff_device_run_features(x->dev, ff_guarded_data(slice), s->p, i, f.lo, f.hi, n));
        FF_TRY(fault_here(x, ff_guarded_data(slice), i, f.lo == 0));
    }
    FF_TRY(ff_decomp_account(x, i, FF_PHASE_COMPUTE, t));
    size_t total = 0;
    for (int r = 0; r < P; r++) {
        x->counts[r] = (size_t)(ff_range_len(lp->band[r]) * n) * sizeof(float);
        x->displs[r] = total;
        total += x->counts[r];
    }
    ff_guarded *stage = &x->buf[RECV];
    FF_TRY(ff_decomp_reserve(stage, total / sizeof(float)));
    FF_TRY(ff_decomp_comm_ready(x));
    ff_decomp_crash_point(x, i);
    t = ff_decomp_mark(x);
    FF_TRY(ff_comm_allgatherv(x->comm, ff_guarded_data(stage), x->counts, x->displs, ff_guarded_data(slice),
                              x->counts[me]));
    FF_TRY(ff_decomp_account(x, i, FF_PHASE_COMM, t));
    FF_TRY(ff_guarded_check(stage, total / sizeof(float), "after gathering features", L->name));
    ff_guarded *ob = other_act(x, ff_guarded_data(slice), NULL);
    FF_TRY(ff_guarded_reserve(ob, (size_t)(out_el * n)));
    float *o = ff_guarded_data(ob);
    for (int r = 0; r < P; r++) {  // per-rank blocks (n, nf_r) -> (n, out): n planes of features
        const ff_range fr = lp->band[r];
        const float *blk = (const float *)((const char *)ff_guarded_data(stage) + x->displs[r]);
        FF_TRY(ff_device_copy_rows(x->dev, o, 0, out_el, blk, fr.lo, ff_range_len(fr), n, 1, 1, fr.lo, fr.hi));
    }
    s->at = AT_ALL;
    s->p = o;
    s->shape = L->out;
    return FF_OK;
}

// flatten, softmax, relu after an FC layer, a layer planned whole: whole, wherever the data is.
static ff_status rows_whole_layer(ff_decomp *x, tensor_state *s, int i, int64_t n) {
    const ff_layer *L = &x->model->layers[i];
    const bool compute = s->at == AT_ALL || x->rank == 0;
    ff_guarded *ob = other_act(x, s->p, NULL);
    FF_TRY(ff_guarded_reserve(ob, (size_t)(ff_shape_numel(L->out) * n)));
    ff_mark t = ff_decomp_mark(x);
    if (compute && n > 0) {
        const ff_band_job job = {ff_guarded_data(ob), s->p, ff_rows_full(L), n};
        FF_TRY(ff_device_run_bands(x->dev, &job, 1, i));
        FF_TRY(fault_here(x, ff_guarded_data(ob), i, true));
    }
    FF_TRY(ff_decomp_account(x, i, FF_PHASE_COMPUTE, t));
    s->p = ff_guarded_data(ob);
    s->shape = L->out;
    return FF_OK;
}

static ff_status forward_groups(ff_decomp *x, row_groups *gr, float *out, const float *din, int64_t n, int first,
                                int last) {
    const ff_model *m = x->model;
    const int me = x->rank;
    tensor_state s = {AT_ROOT, din, m->layers[first].in, NULL};  // the whole tensor, when not banded
    bool banded = false;                                         // the groups' states hold the data
    for (int i = first; i <= last; i++) {
        const ff_layer *L = &m->layers[i];
        const ff_layer_part *lp = &gr->part[0]->layer[i - first];
        if (lp->spatial) {
            if (!banded) {  // every group starts from its images of the whole tensor
                const int64_t per = ff_shape_numel(s.shape);
                for (int g = 0; g < gr->G; g++) {
                    gr->s[g] = s;
                    gr->s[g].p = s.p ? s.p + gr->images[g].lo * per : NULL;
                }
            }
            FF_TRY(rows_spatial_layer(x, gr, i, first));
            banded = true;
            continue;
        }
        if (banded) {  // every group's bands -> the whole tensor on every rank
            const int64_t per = ff_shape_numel(gr->s[0].shape);
            const size_t floats = (size_t)(per * n);
            ff_guarded *full = &x->buf[FULL];
            FF_TRY(ff_decomp_reserve(full, floats));
            for (int g = 0; g < gr->G; g++)
                FF_TRY(collect_bands(x, ff_guarded_data(full) + gr->images[g].lo * per, &gr->s[g],
                                     ff_range_len(gr->images[g]), true, i, L->name, i));
            FF_TRY(ff_guarded_check(full, floats, "after assembling bands", L->name));
            s.at = AT_ALL;
            s.p = ff_guarded_data(full);
            s.shape = gr->s[0].shape;
            s.bands = NULL;
            banded = false;
        }
        if (L->op == FF_OP_LINEAR)
            FF_TRY(rows_linear_layer(x, &s, lp, i, n));
        else
            FF_TRY(rows_whole_layer(x, &s, i, n));
    }
    const int64_t per = ff_shape_numel(m->layers[last].out);
    const size_t floats = (size_t)(per * n);
    if (banded) {  // rank 0 collects the bands: into the caller's output on host memory
        float *dst = out;
        if (me == 0 && !ff_device_is_host(x->dev)) {
            FF_TRY(ff_guarded_reserve(&x->buf[FULL], floats));
            dst = ff_guarded_data(&x->buf[FULL]);
        }
        for (int g = 0; g < gr->G; g++)
            FF_TRY(collect_bands(x, me == 0 && dst ? dst + gr->images[g].lo * per : NULL, &gr->s[g],
                                 ff_range_len(gr->images[g]), false, FF_MAX_LAYERS, m->layers[last].name, last));
        return ff_decomp_export(x, out, dst, floats, FF_MAX_LAYERS);
    }
    return me == 0 ? ff_decomp_export(x, out, s.p, floats, FF_MAX_LAYERS) : FF_OK;
}

ff_status ff_decomp_forward_rows(ff_decomp *x, float *out, const float *in, int64_t n, int first, int last) {
    const float *din = NULL;
    FF_TRY(ff_decomp_import(x, &din, in, (size_t)(n * ff_shape_numel(x->model->layers[first].in)), FF_MAX_LAYERS));
    row_groups gr;
    ff_status st = groups_build(x, &gr, n, first, last);
    if (st == FF_OK) st = forward_groups(x, &gr, out, din, n, first, last);
    groups_free(&gr);
    return st;
}
