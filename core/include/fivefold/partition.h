// Row bands, halos and exchange plans for the multi-rank modes (docs/ARCHITECTURE.md §1, §7). Pure functions:
// no MPI, no I/O except ff_partition_print; the halo fuzzer and the libFuzzer target drive them.
//
// Conventions. Rows are global indices of a layer's full height; ranges are half-open [lo, hi).
// A rank's band may be empty (lo == hi) when there are more ranks than rows. Bands of one layer
// are balanced blocks in rank order: rank r of P owns [floor(r*H/P), floor((r+1)*H/P)), so they
// tile [0, H) exactly and differ in size by at most one row.
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "fivefold/model.h"
#include "fivefold/plan.h"
#include "fivefold/split.h"
#include "fivefold/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FF_PART_MAX_RANKS 4096  // sanity bound on P (plans are O(P) per layer, xfers O(P^2) worst)

// Balanced block of n items for rank r of P; empty when n < P for some ranks.
ff_range ff_band(int64_t n, int P, int r);
// The same band sizes handed out rotated: rank r gets the size of ff_band(n, P, (r + rot) mod P),
// bands laid out in rank order (they tile [0, n)). rot = 0 is ff_band. The rows split gives each
// group of images its own rotation, so the remainder rows of a layer whose height P does not
// divide (AlexNet's 13-row maps over 4 ranks: 3, 3, 3, 4) fall on every rank in turn instead of
// always on the same one, and each rank's work per layer, summed over the batch, is balanced.
ff_range ff_band_rotated(int64_t n, int P, int r, int rot);
// The rank whose band of n items over P contains item i (0 <= i < n).
int ff_band_owner(int64_t n, int P, int64_t i);

static inline int64_t ff_range_len(ff_range r) {
    return r.hi > r.lo ? r.hi - r.lo : 0;
}
static inline ff_range ff_range_intersect(ff_range a, ff_range b) {
    ff_range r = {a.lo > b.lo ? a.lo : b.lo, a.hi < b.hi ? a.hi : b.hi};
    if (r.hi < r.lo) r.hi = r.lo;
    return r;
}

// One message of a halo exchange: input rows [rows.lo, rows.hi) of the layer go from rank src to
// rank dst (all channels, all images, whole width).
typedef struct {
    int src, dst;
    ff_range rows;
} ff_xfer;

// The exchange plan of one layer: before the layer runs, rank r holds input rows own[r]; the
// ranks' own ranges are disjoint and ascending and tile [0, H). Rank r needs need[r] (to compute
// its output band). Every row of need[r] outside own[r] comes from the one rank that owns it;
// rows are sent only where needed (need[d] ∩ own[s], s != d, non-empty), in ascending (dst, src)
// order, which is also the order each pair's messages are listed in ff_comm_exchange.
// xfers: capacity cap; *n_xfers receives the count. cap >= P*(P-1) always suffices;
// FF_ERR_INPUT when own does not tile [0, in_h) or cap is too small.
ff_status ff_plan_exchange(ff_xfer *xfers, int64_t *n_xfers, const ff_range *own, const ff_range *need, int64_t in_h,
                           int P, int64_t cap);

// ---- a whole layer range [first, last] under one split ----
typedef enum {
    FF_SRC_NONE,   // layer is not split by rows (batch/replicate split, a non-spatial layer, or a
                   // layer the plan computes whole)
    FF_SRC_ROOT,   // its input rows come from a full tensor (rank 0's input, a replicated tensor,
                   // or the output of a whole-layer step): each rank receives/extracts need[r]
    FF_SRC_BANDS,  // its input is the previous layer's bands (own = previous band): halo exchange
} ff_src_kind;

typedef struct {
    int layer;      // index into the model's layers
    bool spatial;   // split by rows (conv2d, maxpool, relu, lrn, unless the plan computes it whole)
    bool windowed;  // conv2d, maxpool: needs a halo
    bool whole;     // the plan computes this layer whole only (FF_BAND_WHOLE: a space-to-depth
                    // Winograd conv); in a rows split it is a whole-layer step, not spatial
    ff_src_kind src;
    ff_range *band;  // [P] output rows rank r computes (spatial), or output features (linear,
                     // rows split: FC layers are split by output feature); else the full range
    ff_range *need;  // [P] input rows rank r needs (spatial: ff_plan_input_rows of its band, so a
                     // Winograd band needs whole tiles); else the full input range
    ff_range *own;   // [P] input rows rank r holds before the layer (FF_SRC_BANDS)
    ff_xfer *xfers;  // [n_xfers] halo messages (FF_SRC_BANDS and windowed)
    int64_t n_xfers;
    int64_t row_bytes;  // bytes of one input row for one image: C * W * sizeof(float)
} ff_layer_part;

typedef struct {
    ff_split split;
    int P;
    int first, last;
    int64_t batch;
    int rot;                             // rows split: the band rotation (ff_band_rotated), 0..P-1
    ff_range *images;                    // [P] images per rank (batch split); [0, batch) for the others
    ff_layer_part layer[FF_MAX_LAYERS];  // index i - first for model layer i
    const ff_plan *plan;                 // the plan the needs follow: &plan_copy, or NULL (every
                                         // layer direct: the receptive field of ff_layer_input_rows)
    ff_plan plan_copy;                   // the partition's own copy (the caller's need not outlive it)
} ff_partition;

// Builds the partition of layers [first, last] of m over P ranks under `plan` (plan.h; NULL: every
// layer direct). Rows split: spatial layers get row bands (windowed: balanced over the output
// height, rotated by `rot` (ff_band_rotated); relu/lrn: the band of their input), and each band's
// input rows are the plan's (ff_plan_input_rows: the receptive field for a direct layer, whole
// tiles for a Winograd one). A layer the plan computes whole (FF_BAND_WHOLE) is not spatial: like
// flatten, its band is the full range on every rank (a whole-layer step), and the next spatial
// layer takes its rows from that full tensor (FF_SRC_ROOT). FC layers are split by output
// features, flatten/softmax are computed whole on every rank. A range with no spatial layer is
// fine (it runs feature-split). FF_ERR_INPUT for P outside 1..FF_PART_MAX_RANKS, a bad range,
// split NONE with P > 1, or a plan made for another model (layer count).
ff_status ff_partition_build_planned(ff_partition **out, const ff_model *m, const ff_plan *plan, int first, int last,
                                     int P, ff_split split, int64_t batch, int rot);
// ff_partition_build_planned with no plan (every layer direct) and rotation 0 / `rot`.
ff_status ff_partition_build(ff_partition **out, const ff_model *m, int first, int last, int P, ff_split split,
                             int64_t batch);
ff_status ff_partition_build_rotated(ff_partition **out, const ff_model *m, int first, int last, int P, ff_split split,
                                     int64_t batch, int rot);
void ff_partition_free(ff_partition *p);

// Bytes rank r sends in the halo exchange of layer part lp for n images.
int64_t ff_layer_part_send_bytes(const ff_layer_part *lp, int r, int64_t n);
// Halo rows rank r receives (rows of need[r] outside own[r]) for layer part lp.
int64_t ff_layer_part_halo_rows(const ff_layer_part *lp, int r);

// Property checks (the fuzzer's oracle, also usable in debug builds), under the partition's plan
// (p->plan): bands tile the output exactly; need is exactly the input rows the band's computation
// reads, found by brute force over every band row: the window of a direct layer, the whole tile
// (rows th*m - pad .. th*m - pad + m + k - 2 of tile th = row / m) of a Winograd layer; a layer
// the plan computes whole is not split (full band and input on every rank); own tiles the input,
// every row of need outside own arrives exactly once, from its owner, and every send has its
// matching receive. FF_ERR_INTERNAL naming the first violation.
ff_status ff_partition_check(const ff_partition *p, const ff_model *m);

// `fivefold info --model M --ranks P --split S`: per layer, the algorithm (plan NULL: direct), the
// bands, the input rows each band needs under the plan, halo rows and bytes exchanged.
ff_status ff_partition_print(FILE *f, const ff_model *m, const ff_plan *plan, int P, ff_split s, int64_t batch);

#ifdef __cplusplus
}
#endif
