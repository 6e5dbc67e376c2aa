// Row bands, halos and exchange plans (partition.h). Pure: the only allocation is the partition
// object itself (ff_partition_build_planned), and nothing here talks to MPI. The input rows a band
// needs come from the execution plan (plan.h: ff_plan_input_rows), never from a guess here.
#include "fivefold/partition.h"

#include <stdlib.h>
#include <string.h>

ff_range ff_band(int64_t n, int P, int r) {
    ff_range b = {0, 0};
    if (n <= 0 || P <= 0 || r < 0 || r >= P) return b;
    // r*n fits in int64 for any activation height or batch this library sees (n < 2^40).
    b.lo = (int64_t)r * n / P;
    b.hi = (int64_t)(r + 1) * n / P;
    return b;
}

ff_range ff_band_rotated(int64_t n, int P, int r, int rot) {
    ff_range b = {0, 0};
    if (n <= 0 || P <= 0 || r < 0 || r >= P) return b;
    rot = ((rot % P) + P) % P;
    // Rank r gets the size of balanced band (r + rot) mod P; the bands are laid out in rank order.
    // Sizes differ by at most one, so the prefix sum is r*(n/P) plus the extra rows before r.
    // extra(k): rows beyond n/P in balanced bands 0..k-1 = floor(k*n/P) - k*(n/P).
    const int64_t base = n / P;
#define FF_EXTRA(k) ((int64_t)(k)*n / P - (int64_t)(k)*base)
    const int64_t before =
        rot + r <= P ? FF_EXTRA(rot + r) - FF_EXTRA(rot) : FF_EXTRA(P) - FF_EXTRA(rot) + FF_EXTRA(rot + r - P);
#undef FF_EXTRA
    b.lo = (int64_t)r * base + before;
    b.hi = b.lo + ff_range_len(ff_band(n, P, (r + rot) % P));
    return b;
}

int ff_band_owner(int64_t n, int P, int64_t i) {
    // Largest r with floor(r*n/P) <= i, i.e. r < (i+1)*P/n: r = ceil((i+1)*P/n) - 1. That band is
    // never empty: its hi = floor((r+1)*n/P) >= i+1.
    if (n <= 0 || P <= 0 || i < 0 || i >= n) return -1;
    return (int)(((i + 1) * (int64_t)P + n - 1) / n - 1);
}

static ff_status check_tiling(const ff_range *r, int P, int64_t h, const char *what) {
    int64_t at = 0;
    for (int k = 0; k < P; k++) {
        if (r[k].lo != at || r[k].hi < r[k].lo)
            return FF_FAIL(FF_ERR_INPUT,
                           "%s of rank %d is [%lld, %lld): expected a range starting at row %lld "
                           "(ranges must tile [0, %lld) in rank order)",
                           what, k, (long long)r[k].lo, (long long)r[k].hi, (long long)at, (long long)h);
        at = r[k].hi;
    }
    if (at != h)
        return FF_FAIL(FF_ERR_INPUT, "%s ranges end at row %lld: expected %lld", what, (long long)at, (long long)h);
    return FF_OK;
}

ff_status ff_plan_exchange(ff_xfer *xfers, int64_t *n_xfers, const ff_range *own, const ff_range *need, int64_t in_h,
                           int P, int64_t cap) {
    *n_xfers = 0;
    if (P < 1 || P > FF_PART_MAX_RANKS)
        return FF_FAIL(FF_ERR_INPUT, "rank count %d: expected 1..%d", P, FF_PART_MAX_RANKS);
    FF_TRY(check_tiling(own, P, in_h, "own rows"));
    int64_t n = 0;
    for (int d = 0; d < P; d++) {
        ff_range nd = need[d];
        if (ff_range_len(nd) == 0) continue;
        if (nd.lo < 0 || nd.hi > in_h)
            return FF_FAIL(FF_ERR_INPUT, "rank %d needs rows [%lld, %lld): outside [0, %lld)", d, (long long)nd.lo,
                           (long long)nd.hi, (long long)in_h);
        // Owners of rows nd.lo .. nd.hi-1 are a contiguous run of ranks (own tiles in order).
        for (int s = 0; s < P; s++) {
            if (own[s].hi <= nd.lo) continue;
            if (own[s].lo >= nd.hi) break;
            if (s == d) continue;
            ff_range x = ff_range_intersect(nd, own[s]);
            if (ff_range_len(x) == 0) continue;
            if (n >= cap)
                return FF_FAIL(FF_ERR_INPUT,
                               "exchange plan needs more than %lld messages "
                               "(capacity); pass cap >= P*(P-1) = %lld",
                               (long long)cap, (long long)P * (P - 1));
            xfers[n].src = s;
            xfers[n].dst = d;
            xfers[n].rows = x;
            n++;
        }
    }
    *n_xfers = n;
    return FF_OK;
}

void ff_partition_free(ff_partition *p) {
    if (!p) return;
    for (int i = 0; i < FF_MAX_LAYERS; i++) {
        free(p->layer[i].band);
        free(p->layer[i].need);
        free(p->layer[i].own);
        free(p->layer[i].xfers);
    }
    free(p->images);
    free(p);
}

ff_status ff_partition_build(ff_partition **out, const ff_model *m, int first, int last, int P, ff_split split,
                             int64_t batch) {
    return ff_partition_build_planned(out, m, NULL, first, last, P, split, batch, 0);
}

ff_status ff_partition_build_rotated(ff_partition **out, const ff_model *m, int first, int last, int P, ff_split split,
                                     int64_t batch, int rot) {
    return ff_partition_build_planned(out, m, NULL, first, last, P, split, batch, rot);
}

ff_status ff_partition_build_planned(ff_partition **out, const ff_model *m, const ff_plan *plan, int first, int last,
                                     int P, ff_split split, int64_t batch, int rot) {
    *out = NULL;
    if (P < 1 || P > FF_PART_MAX_RANKS)
        return FF_FAIL(FF_ERR_INPUT, "rank count %d: expected 1..%d", P, FF_PART_MAX_RANKS);
    if (first < 0 || last >= m->n_layers || first > last)
        return FF_FAIL(FF_ERR_INPUT, "layer range [%d, %d]: expected 0 <= first <= last < %d", first, last,
                       m->n_layers);
    if (batch < 0) return FF_FAIL(FF_ERR_INPUT, "batch %lld: expected >= 0", (long long)batch);
    if (split == FF_SPLIT_NONE && P > 1)
        return FF_FAIL(FF_ERR_INPUT,
                       "split 'none' with %d ranks: expected batch, rows or "
                       "replicate",
                       P);
    if (plan && plan->n_layers != m->n_layers)
        return FF_FAIL(FF_ERR_INPUT, "plan of %d layers for model %s: expected %d (a plan of another model)",
                       plan->n_layers, m->name, m->n_layers);
    ff_partition *p = calloc(1, sizeof *p);
    if (!p) return FF_FAIL(FF_ERR_OOM, "partition: %zu bytes", sizeof *p);
    if (plan) {
        p->plan_copy = *plan;
        p->plan = &p->plan_copy;
    }
    p->split = split;
    p->P = P;
    p->first = first;
    p->last = last;
    p->batch = batch;
    p->rot = P > 0 ? ((rot % P) + P) % P : 0;
    ff_status st = FF_OK;
    p->images = calloc((size_t)P, sizeof(ff_range));
    if (!p->images) {
        st = FF_FAIL(FF_ERR_OOM, "partition: %d ranges", P);
        goto fail;
    }
    for (int r = 0; r < P; r++) {
        if (split == FF_SPLIT_BATCH) {
            p->images[r] = ff_band(batch, P, r);
        } else {
            p->images[r].lo = 0;
            p->images[r].hi = batch;
        }
    }
    const ff_range *prev_band = NULL;  // bands of the previous layer's output, if split by rows
    for (int i = first; i <= last; i++) {
        const ff_layer *L = &m->layers[i];
        ff_layer_part *lp = &p->layer[i - first];
        lp->layer = i;
        lp->band = calloc((size_t)P, sizeof(ff_range));
        lp->need = calloc((size_t)P, sizeof(ff_range));
        lp->own = calloc((size_t)P, sizeof(ff_range));
        if (!lp->band || !lp->need || !lp->own) {
            st = FF_FAIL(FF_ERR_OOM, "partition: ranges for %d ranks", P);
            goto fail;
        }
        lp->row_bytes = L->in.c * L->in.w * (int64_t)sizeof(float);
        // A layer the plan computes whole only (a space-to-depth Winograd conv) is a whole-layer
        // step, like flatten. Element-wise layers (relu, lrn) stay on the layout they receive:
        // banded after a banded layer, whole after an FC layer or a whole-layer step (relu6 on
        // 4096 features is not worth a scatter); first in the range they are banded when there
        // are rows to split.
        lp->whole = p->plan && p->plan->layer[i].band == FF_BAND_WHOLE;
        lp->spatial = split == FF_SPLIT_ROWS && ff_layer_is_spatial(L) && !lp->whole &&
                      (ff_layer_is_windowed(L) || (i > first ? prev_band != NULL : L->in.h > 1));
        lp->windowed = lp->spatial && ff_layer_is_windowed(L);
        lp->src = FF_SRC_NONE;
        if (!lp->spatial) {
            for (int r = 0; r < P; r++) {
                ff_range full_in = {0, L->in.h}, full_out = {0, L->out.h};
                // Rows split: FC layers are split by output feature (each element's bits do not
                // depend on which rank computes it); everything else is computed whole.
                if (split == FF_SPLIT_ROWS && L->op == FF_OP_LINEAR)
                    lp->band[r] = ff_band(L->out.c, P, r);
                else
                    lp->band[r] = full_out;
                lp->need[r] = full_in;
                lp->own[r] = full_in;
            }
            prev_band = NULL;
            continue;
        }
        lp->src = prev_band ? FF_SRC_BANDS : FF_SRC_ROOT;
        for (int r = 0; r < P; r++) {
            if (lp->windowed) {
                lp->band[r] = ff_band_rotated(L->out.h, P, r, p->rot);
                lp->need[r] = ff_plan_input_rows(p->plan, m, i, lp->band[r].lo, lp->band[r].hi);
            } else {
                // relu / lrn: rows map to themselves; keep the distribution of the input so no
                // exchange is needed.
                lp->band[r] = prev_band ? prev_band[r] : ff_band_rotated(L->out.h, P, r, p->rot);
                lp->need[r] = lp->band[r];
            }
            if (ff_range_len(lp->need[r]) == 0) lp->need[r].lo = lp->need[r].hi = 0;
            lp->own[r] = prev_band ? prev_band[r] : lp->need[r];
        }
        if (lp->src == FF_SRC_BANDS && lp->windowed) {
            int64_t cap = (int64_t)P * (P - 1);
            if (cap > 0) {
                lp->xfers = calloc((size_t)cap, sizeof(ff_xfer));
                if (!lp->xfers) {
                    st = FF_FAIL(FF_ERR_OOM, "partition: %lld messages", (long long)cap);
                    goto fail;
                }
            }
            st = ff_plan_exchange(lp->xfers, &lp->n_xfers, lp->own, lp->need, L->in.h, P, cap);
            if (st != FF_OK) goto fail;
        }
        prev_band = lp->band;
    }
    *out = p;
    return FF_OK;
fail:
    ff_partition_free(p);
    return st;
}

int64_t ff_layer_part_send_bytes(const ff_layer_part *lp, int r, int64_t n) {
    int64_t rows = 0;
    for (int64_t k = 0; k < lp->n_xfers; k++)
        if (lp->xfers[k].src == r) rows += ff_range_len(lp->xfers[k].rows);
    return rows * lp->row_bytes * n;
}

int64_t ff_layer_part_halo_rows(const ff_layer_part *lp, int r) {
    int64_t rows = 0;
    for (int64_t k = 0; k < lp->n_xfers; k++)
        if (lp->xfers[k].dst == r) rows += ff_range_len(lp->xfers[k].rows);
    return rows;
}

// ---------------------------------------------------------------- property checks

// The input rows one output row o of L reads under its layer plan lp (NULL: direct), clipped to
// [0, in.h): [*lo, *hi); empty (lo == hi) when it reads padding only. Derived here from the
// definitions, not from ff_plan_input_rows or winograd.c, so that the check is an independent
// oracle: a direct conv/pool reads its window, rows o*s - pad + t for t < kh; a Winograd layer
// computes the whole tile th = o / m of its row, which reads rows th*m - pad + t for
// t < alpha = m + kh - 1 (winograd.h); a space-to-depth layer rewrites the whole input, so any of
// its rows reads all of it.
static void rows_read(int64_t *lo, int64_t *hi, const ff_layer *L, const ff_layer_plan *lp, int64_t o) {
    int64_t first, count;
    if (lp && lp->alg == FF_CONV_WINOGRAD && lp->s2d) {
        first = 0;
        count = L->in.h;
    } else if (lp && lp->alg == FF_CONV_WINOGRAD) {
        first = (o / lp->wg_m) * lp->wg_m - L->pad;
        count = lp->wg_m + L->kh - 1;
    } else {
        first = o * L->stride - L->pad;
        count = L->kh;
    }
    *lo = first < 0 ? 0 : first;
    *hi = first + count > L->in.h ? L->in.h : first + count;
    if (*hi < *lo) *hi = *lo;
}

static ff_status check_layer(const ff_partition *p, const ff_layer_part *lp, const ff_layer *L) {
    const int P = p->P;
    const ff_layer_plan *pl = p->plan ? &p->plan->layer[lp->layer] : NULL;
    const bool whole = pl && pl->band == FF_BAND_WHOLE;
    if (whole != lp->whole || (whole && (lp->spatial || lp->windowed || lp->src != FF_SRC_NONE)))
        return FF_FAIL(FF_ERR_INTERNAL, "%s: the plan computes it %s, but the partition %s", L->name,
                       whole ? "whole only (a whole-layer step)" : "in bands",
                       lp->spatial ? "splits it by rows" : "does not split it");
    if (!lp->spatial) {
        if (p->split == FF_SPLIT_ROWS && L->op == FF_OP_LINEAR) {
            ff_status st = check_tiling(lp->band, P, L->out.c, L->name);
            if (st != FF_OK) return ff_fail_context(FF_ERR_INTERNAL, "feature bands: ");
        }
        if (whole)
            for (int r = 0; r < P; r++)
                if (lp->band[r].lo != 0 || lp->band[r].hi != L->out.h || lp->need[r].lo != 0 ||
                    lp->need[r].hi != L->in.h)
                    return FF_FAIL(FF_ERR_INTERNAL,
                                   "%s rank %d: a whole-layer step computes rows [%lld, %lld) from [%lld, %lld): "
                                   "expected all of them, [0, %lld) from [0, %lld)",
                                   L->name, r, (long long)lp->band[r].lo, (long long)lp->band[r].hi,
                                   (long long)lp->need[r].lo, (long long)lp->need[r].hi, (long long)L->out.h,
                                   (long long)L->in.h);
        return FF_OK;
    }
    if (check_tiling(lp->band, P, L->out.h, L->name) != FF_OK)
        return ff_fail_context(FF_ERR_INTERNAL, "output bands do not tile: ");
    for (int r = 0; r < P; r++) {
        ff_range b = lp->band[r], nd = lp->need[r];
        if (ff_range_len(b) == 0) {
            if (ff_range_len(nd) != 0)
                return FF_FAIL(FF_ERR_INTERNAL, "%s rank %d: empty band but needs rows [%lld, %lld)", L->name, r,
                               (long long)nd.lo, (long long)nd.hi);
            continue;
        }
        // Brute force over the band's rows: every input row any of them reads must be in need, and
        // need must not extend beyond the rows some band row reads (tight halo). Element-wise
        // layers (relu, lrn) read their own row.
        int64_t min_row = INT64_MAX, max_row = INT64_MIN;
        for (int64_t o = b.lo; o < b.hi; o++) {
            int64_t lo = o, hi = o + 1;
            if (lp->windowed) rows_read(&lo, &hi, L, pl, o);
            for (int64_t row = lo; row < hi; row++) {
                if (row < nd.lo || row >= nd.hi)
                    return FF_FAIL(FF_ERR_INTERNAL,
                                   "%s rank %d: output row %lld reads input row %lld (%s), outside its "
                                   "input rows [%lld, %lld)",
                                   L->name, r, (long long)o, (long long)row, pl ? pl->name : "direct", (long long)nd.lo,
                                   (long long)nd.hi);
                if (row < min_row) min_row = row;
                if (row > max_row) max_row = row;
            }
        }
        if (min_row == INT64_MAX) {  // band reads only padding (possible with pad >= kernel - stride)
            if (ff_range_len(nd) != 0 && (nd.lo != nd.hi))
                return FF_FAIL(FF_ERR_INTERNAL,
                               "%s rank %d: band reads no input row but needs "
                               "[%lld, %lld)",
                               L->name, r, (long long)nd.lo, (long long)nd.hi);
        } else if (nd.lo != min_row || nd.hi != max_row + 1) {
            return FF_FAIL(FF_ERR_INTERNAL,
                           "%s rank %d: needs rows [%lld, %lld) but its band reads exactly "
                           "[%lld, %lld) (%s)",
                           L->name, r, (long long)nd.lo, (long long)nd.hi, (long long)min_row, (long long)max_row + 1,
                           pl ? pl->name : "direct");
        }
    }
    if (lp->src != FF_SRC_BANDS) return FF_OK;
    if (check_tiling(lp->own, P, L->in.h, L->name) != FF_OK)
        return ff_fail_context(FF_ERR_INTERNAL, "input rows held do not tile: ");
    // Every row of need[d] that d does not hold must arrive exactly once, from its owner, and
    // nothing else may arrive. Owners are recomputed by search, not taken from the plan.
    for (int d = 0; d < P; d++) {
        ff_range nd = lp->need[d];
        for (int64_t row = nd.lo; row < nd.hi; row++) {
            bool local = row >= lp->own[d].lo && row < lp->own[d].hi;
            int owner = -1;
            for (int s = 0; s < P; s++)
                if (row >= lp->own[s].lo && row < lp->own[s].hi) owner = s;
            int arrivals = 0;
            for (int64_t k = 0; k < lp->n_xfers; k++) {
                const ff_xfer *x = &lp->xfers[k];
                if (x->dst == d && row >= x->rows.lo && row < x->rows.hi) {
                    arrivals++;
                    if (x->src != owner)
                        return FF_FAIL(FF_ERR_INTERNAL,
                                       "%s: row %lld sent to rank %d by rank "
                                       "%d, which does not own it (owner %d)",
                                       L->name, (long long)row, d, x->src, owner);
                }
            }
            if (arrivals != (local ? 0 : 1))
                return FF_FAIL(FF_ERR_INTERNAL,
                               "%s: rank %d needs row %lld (%s) and receives it "
                               "%d times: expected %d",
                               L->name, d, (long long)row, local ? "held locally" : "a halo row", arrivals,
                               local ? 0 : 1);
        }
    }
    for (int64_t k = 0; k < lp->n_xfers; k++) {
        const ff_xfer *x = &lp->xfers[k];
        ff_range inside = ff_range_intersect(x->rows, lp->need[x->dst]);
        ff_range held = ff_range_intersect(x->rows, lp->own[x->src]);
        if (x->src == x->dst || x->src < 0 || x->src >= P || x->dst < 0 || x->dst >= P || ff_range_len(x->rows) == 0 ||
            ff_range_len(inside) != ff_range_len(x->rows) || ff_range_len(held) != ff_range_len(x->rows))
            return FF_FAIL(FF_ERR_INTERNAL,
                           "%s: message %lld (rank %d -> %d, rows [%lld, %lld)) "
                           "is not a row range the sender holds and the receiver needs",
                           L->name, (long long)k, x->src, x->dst, (long long)x->rows.lo, (long long)x->rows.hi);
    }
    // Symmetry: the sends each rank derives (src == r) and the receives each rank derives
    // (dst == r) are the same messages in the same per-pair order.
    for (int s = 0; s < P; s++)
        for (int d = 0; d < P; d++) {
            int64_t last_lo = -1;
            for (int64_t k = 0; k < lp->n_xfers; k++) {
                const ff_xfer *x = &lp->xfers[k];
                if (x->src != s || x->dst != d) continue;
                if (x->rows.lo <= last_lo)
                    return FF_FAIL(FF_ERR_INTERNAL, "%s: messages %d -> %d out of row order", L->name, s, d);
                last_lo = x->rows.lo;
            }
        }
    return FF_OK;
}

ff_status ff_partition_check(const ff_partition *p, const ff_model *m) {
    if (p->split == FF_SPLIT_BATCH) {
        if (check_tiling(p->images, p->P, p->batch, "images") != FF_OK)
            return ff_fail_context(FF_ERR_INTERNAL, "batch split: ");
    }
    for (int i = p->first; i <= p->last; i++) FF_TRY(check_layer(p, &p->layer[i - p->first], &m->layers[i]));
    return FF_OK;
}
