// Partition module (partition.h): bands, the row-geometry formula against brute force, exchange
// plans with thin bands (halos from several ranks away) and empty bands, the property checker
// shown to reject each kind of broken plan, and partitions under an execution plan (plan.h):
// Winograd bands fetch whole tiles, a space-to-depth conv is a whole-layer step.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fivefold/partition.h"
#include "fivefold/winograd.h"

static void bands_tile_and_owner_agrees(void **state) {
    (void)state;
    for (int64_t n = 0; n <= 40; n++)
        for (int P = 1; P <= 20; P++) {
            int64_t at = 0;
            for (int r = 0; r < P; r++) {
                ff_range b = ff_band(n, P, r);
                assert_int_equal(b.lo, at);
                assert_true(b.hi >= b.lo);
                assert_true(ff_range_len(b) == n / P || ff_range_len(b) == n / P + 1);
                for (int64_t i = b.lo; i < b.hi; i++) assert_int_equal(ff_band_owner(n, P, i), r);
                at = b.hi;
            }
            assert_int_equal(at, n);
            assert_int_equal(ff_band_owner(n, P, n), -1);  // outside: no owner
        }
}

// Rotated bands (the rows split's image groups): rotation 0 is ff_band; every rotation tiles
// [0, n) in rank order with the same multiset of sizes; over the P rotations every rank gets
// exactly n items (the remainder falls on each rank in turn); a rotation is taken mod P.
static void rotated_bands_tile_and_balance(void **state) {
    (void)state;
    for (int64_t n = 0; n <= 40; n++)
        for (int P = 1; P <= 12; P++) {
            int64_t total[12] = {0};
            for (int rot = 0; rot < P; rot++) {
                int64_t at = 0, bigger = 0;
                for (int r = 0; r < P; r++) {
                    ff_range b = ff_band_rotated(n, P, r, rot);
                    if (rot == 0) {
                        ff_range b0 = ff_band(n, P, r);
                        assert_int_equal(b.lo, b0.lo);
                        assert_int_equal(b.hi, b0.hi);
                    }
                    assert_int_equal(b.lo, at);
                    assert_int_equal(ff_range_len(b), ff_range_len(ff_band(n, P, (r + rot) % P)));
                    bigger += ff_range_len(b) > n / P;
                    total[r] += ff_range_len(b);
                    at = b.hi;
                    ff_range c = ff_band_rotated(n, P, r, rot + 3 * P);
                    assert_int_equal(c.lo, b.lo);
                    assert_int_equal(c.hi, b.hi);
                    c = ff_band_rotated(n, P, r, rot - 2 * P);  // negative rotations too
                    assert_int_equal(c.lo, b.lo);
                    assert_int_equal(c.hi, b.hi);
                }
                assert_int_equal(at, n);
                assert_int_equal(bigger, n % P);
            }
            for (int r = 0; r < P; r++) assert_int_equal(total[r], n);
        }
    // AlexNet's 13-row maps over 4 ranks: the 4-row band moves.
    ff_range b = ff_band_rotated(13, 4, 3, 0);
    assert_int_equal(ff_range_len(b), 4);
    b = ff_band_rotated(13, 4, 2, 1);
    assert_int_equal(ff_range_len(b), 4);
    b = ff_band_rotated(13, 4, 0, 3);
    assert_int_equal(b.lo, 0);
    assert_int_equal(b.hi, 4);
}

// ff_partition_build_rotated hands every windowed layer's rows out as ff_band_rotated with its
// rotation (taken mod P), relu/lrn keep the band they receive, and the plan passes the checker.
// AlexNet over 4 ranks: 13-row maps, so rotations 1..3 differ from rotation 0.
static void partition_rotation_reaches_every_layer(void **state) {
    (void)state;
    ff_model m;
    assert_int_equal(ff_model_init(&m, "alexnet"), FF_OK);
    const int P = 4;
    for (int rot = -1; rot <= P; rot++) {
        ff_partition *p = NULL;
        assert_int_equal(ff_partition_build_rotated(&p, &m, 0, m.n_layers - 1, P, FF_SPLIT_ROWS, 2, rot), FF_OK);
        const int want = ((rot % P) + P) % P;
        assert_int_equal(p->rot, want);
        assert_int_equal(ff_partition_check(p, &m), FF_OK);
        int differs = 0;  // windowed layers whose bands differ from rotation 0
        for (int i = 0; i < m.n_layers; i++) {
            const ff_layer_part *lp = &p->layer[i];
            if (!lp->windowed) continue;
            for (int r = 0; r < P; r++) {
                ff_range b = ff_band_rotated(m.layers[i].out.h, P, r, want);
                assert_int_equal(lp->band[r].lo, b.lo);
                assert_int_equal(lp->band[r].hi, b.hi);
                differs += b.hi != ff_band(m.layers[i].out.h, P, r).hi;
            }
        }
        assert_true(want == 0 ? differs == 0 : differs > 0);
        ff_partition_free(p);
    }
}

static ff_layer window(ff_op op, int64_t H, int k, int s, int p) {
    ff_layer L;
    memset(&L, 0, sizeof L);
    L.name = "w";
    L.op = op;
    L.kh = L.kw = k;
    L.stride = s;
    L.pad = p;
    L.in.c = 2;
    L.in.h = H;
    L.in.w = H;
    L.out.c = 2;
    L.out.h = (H + 2 * p - k) / s + 1;
    L.out.w = L.out.h;
    return L;
}

// ff_layer_input_rows (model.c) is the formula the whole rows split rests on: compare it with
// the rows a window actually reads, for every band of many geometries.
static void input_rows_match_brute_force(void **state) {
    (void)state;
    int checked = 0;
    for (int64_t H = 1; H <= 30; H++)
        for (int k = 1; k <= 11; k++)
            for (int s = 1; s <= 4; s++)
                for (int p = 0; p < k && p <= 5; p++) {
                    if (H + 2 * p < k) continue;
                    ff_layer L = window(FF_OP_CONV2D, H, k, s, p);
                    for (int64_t o0 = 0; o0 <= L.out.h; o0++)
                        for (int64_t o1 = o0; o1 <= L.out.h; o1++) {
                            int64_t lo = INT64_MAX, hi = INT64_MIN;
                            for (int64_t o = o0; o < o1; o++)
                                for (int t = 0; t < k; t++) {
                                    int64_t row = o * s - p + t;
                                    if (row < 0 || row >= H) continue;
                                    if (row < lo) lo = row;
                                    if (row + 1 > hi) hi = row + 1;
                                }
                            ff_range r = ff_layer_input_rows(&L, o0, o1);
                            if (lo == INT64_MAX) {
                                assert_int_equal(ff_range_len(r), 0);
                            } else {
                                assert_int_equal(r.lo, lo);
                                assert_int_equal(r.hi, hi);
                            }
                            checked++;
                        }
                }
    assert_true(checked > 100000);
}

// conv1 (11x11, stride 4, pad 0): a band of b output rows needs 4b + 7 input rows, i.e. k - s = 7
// past the band's 4b (the seed's floor((k-1)/2)*stride + pad formula gave 20).
static void alexnet_conv1_halo(void **state) {
    (void)state;
    ff_model m;
    assert_int_equal(ff_model_init(&m, "alexnet"), FF_OK);
    ff_partition *p = NULL;
    assert_int_equal(ff_partition_build(&p, &m, 0, m.n_layers - 1, 4, FF_SPLIT_ROWS, 2), FF_OK);
    assert_int_equal(ff_partition_check(p, &m), FF_OK);
    const ff_layer_part *c1 = &p->layer[0];
    assert_int_equal(c1->src, FF_SRC_ROOT);
    assert_int_equal(c1->band[1].lo, 13);
    assert_int_equal(c1->band[1].hi, 27);
    assert_int_equal(c1->need[1].lo, 52);
    assert_int_equal(c1->need[1].hi, 52 + 4 * 14 + 7);
    assert_int_equal(c1->need[3].hi, 227);
    // pool1 (3x3, s2): ranks 1..3 each fetch one row from the rank above; 96 channels x 55
    // columns x 4 bytes x 2 images per row.
    int pool1 = ff_model_find_layer(&m, "pool1");
    const ff_layer_part *p1 = &p->layer[pool1];
    assert_int_equal(p1->src, FF_SRC_BANDS);
    assert_int_equal(p1->n_xfers, 3);
    int64_t bytes = 0;
    for (int r = 0; r < 4; r++) bytes += ff_layer_part_send_bytes(p1, r, 2);
    assert_int_equal(bytes, 3LL * 96 * 55 * 4 * 2);
    // relu1 keeps conv1's bands: no exchange; fc6 is split by output feature.
    assert_int_equal(p->layer[1].n_xfers, 0);
    assert_int_equal(p->layer[1].band[2].lo, c1->band[2].lo);
    int fc6 = ff_model_find_layer(&m, "fc6");
    assert_false(p->layer[fc6].spatial);
    assert_int_equal(p->layer[fc6].band[3].lo, 3072);
    assert_int_equal(p->layer[fc6].band[3].hi, 4096);
    ff_partition_free(p);
}

// 16 ranks, one row each, an 11-row window: each rank fetches 5 rows from each side, one from
// each of the ranks up to 5 away.
static void thin_bands_fetch_from_far_ranks(void **state) {
    (void)state;
    ff_layer L = window(FF_OP_CONV2D, 16, 11, 1, 5);
    assert_int_equal(L.out.h, 16);
    ff_range own[16], need[16];
    for (int r = 0; r < 16; r++) {
        own[r] = ff_band(16, 16, r);
        ff_range b = ff_band(L.out.h, 16, r);
        need[r] = ff_layer_input_rows(&L, b.lo, b.hi);
    }
    ff_xfer x[16 * 15];
    int64_t n = 0;
    assert_int_equal(ff_plan_exchange(x, &n, own, need, 16, 16, 16 * 15), FF_OK);
    int from[16] = {0};
    for (int64_t k = 0; k < n; k++) {
        if (x[k].dst != 8) continue;
        assert_int_equal(ff_range_len(x[k].rows), 1);
        assert_int_equal(x[k].rows.lo, x[k].src);  // row i lives on rank i
        from[x[k].src]++;
    }
    for (int s = 0; s < 16; s++) assert_int_equal(from[s], (s >= 3 && s <= 13 && s != 8) ? 1 : 0);
    // Too small a capacity is an error, not an overrun.
    assert_int_equal(ff_plan_exchange(x, &n, own, need, 16, 16, 4), FF_ERR_INPUT);
}

static void more_ranks_than_rows(void **state) {
    (void)state;
    ff_model m;
    assert_int_equal(ff_model_init(&m, "alexnet"), FF_OK);
    ff_partition *p = NULL;
    // pool5 has 6 output rows: with 9 ranks, three bands are empty.
    assert_int_equal(ff_partition_build(&p, &m, 0, m.n_layers - 1, 9, FF_SPLIT_ROWS, 1), FF_OK);
    assert_int_equal(ff_partition_check(p, &m), FF_OK);
    int pool5 = ff_model_find_layer(&m, "pool5");
    const ff_layer_part *lp = &p->layer[pool5];
    int empty = 0;
    for (int r = 0; r < 9; r++)
        if (ff_range_len(lp->band[r]) == 0) {
            empty++;
            assert_int_equal(ff_range_len(lp->need[r]), 0);
            assert_int_equal(ff_layer_part_halo_rows(lp, r), 0);
        }
    assert_int_equal(empty, 3);
    ff_partition_free(p);
    // Batch split with more ranks than images: some ranks get none.
    assert_int_equal(ff_partition_build(&p, &m, 0, 3, 5, FF_SPLIT_BATCH, 2), FF_OK);
    assert_int_equal(ff_partition_check(p, &m), FF_OK);
    int none = 0;
    for (int r = 0; r < 5; r++) none += ff_range_len(p->images[r]) == 0;
    assert_int_equal(none, 3);
    ff_partition_free(p);
}

static void bad_arguments(void **state) {
    (void)state;
    ff_model m;
    assert_int_equal(ff_model_init(&m, "mnist-cnn"), FF_OK);
    ff_partition *p = NULL;
    assert_int_equal(ff_partition_build(&p, &m, 0, 0, 0, FF_SPLIT_ROWS, 1), FF_ERR_INPUT);
    assert_int_equal(ff_partition_build(&p, &m, 3, 2, 2, FF_SPLIT_ROWS, 1), FF_ERR_INPUT);
    assert_int_equal(ff_partition_build(&p, &m, 0, m.n_layers, 2, FF_SPLIT_ROWS, 1), FF_ERR_INPUT);
    assert_int_equal(ff_partition_build(&p, &m, 0, 1, 2, FF_SPLIT_NONE, 1), FF_ERR_INPUT);
    assert_null(p);
    // own must tile the rows
    ff_range own[2] = {{0, 5}, {6, 10}}, need[2] = {{0, 6}, {4, 10}};
    ff_xfer x[2];
    int64_t n = 0;
    assert_int_equal(ff_plan_exchange(x, &n, own, need, 10, 2, 2), FF_ERR_INPUT);
    own[1].lo = 5;
    assert_int_equal(ff_plan_exchange(x, &n, own, need, 10, 2, 2), FF_OK);
    assert_int_equal(n, 2);
    // A range of FC layers only is fine under the rows split (run feature-split).
    assert_int_equal(ff_partition_build(&p, &m, ff_model_find_layer(&m, "fc1"), m.n_layers - 1, 3, FF_SPLIT_ROWS, 1),
                     FF_OK);
    assert_int_equal(ff_partition_check(p, &m), FF_OK);
    ff_partition_free(p);
}

// The checker must reject each way a plan can be wrong; after each mutation is undone it passes.
static void checker_rejects_broken_plans(void **state) {
    (void)state;
    ff_model m;
    assert_int_equal(ff_model_init(&m, "alexnet"), FF_OK);
    ff_partition *p = NULL;
    assert_int_equal(ff_partition_build(&p, &m, 0, m.n_layers - 1, 5, FF_SPLIT_ROWS, 1), FF_OK);
    assert_int_equal(ff_partition_check(p, &m), FF_OK);
    ff_layer_part *lp = &p->layer[ff_model_find_layer(&m, "conv2")];
    assert_true(lp->n_xfers >= 2);

    lp->need[2].lo++;  // halo one row short
    assert_int_equal(ff_partition_check(p, &m), FF_ERR_INTERNAL);
    lp->need[2].lo--;
    lp->need[2].hi++;  // one row more than the window reads
    assert_int_equal(ff_partition_check(p, &m), FF_ERR_INTERNAL);
    lp->need[2].hi--;
    assert_int_equal(ff_partition_check(p, &m), FF_OK);

    ff_xfer saved = lp->xfers[0];
    lp->xfers[0].src = (saved.src + 2) % 5 == saved.dst ? (saved.src + 3) % 5 : (saved.src + 2) % 5;
    assert_int_equal(ff_partition_check(p, &m), FF_ERR_INTERNAL);  // sent by a non-owner
    lp->xfers[0] = saved;
    lp->xfers[0].rows.hi--;  // a row never arrives
    assert_int_equal(ff_partition_check(p, &m), FF_ERR_INTERNAL);
    lp->xfers[0] = saved;
    lp->xfers[1] = lp->xfers[0];  // one delivered twice, another never
    assert_int_equal(ff_partition_check(p, &m), FF_ERR_INTERNAL);
    ff_partition_free(p);

    assert_int_equal(ff_partition_build(&p, &m, 0, m.n_layers - 1, 5, FF_SPLIT_ROWS, 1), FF_OK);
    lp = &p->layer[ff_model_find_layer(&m, "conv3")];
    lp->band[1].hi--;  // bands with a gap
    assert_int_equal(ff_partition_check(p, &m), FF_ERR_INTERNAL);
    lp->band[1].hi++;
    assert_int_equal(ff_partition_check(p, &m), FF_OK);
    ff_partition_free(p);
}

static void print_lists_every_layer(void **state) {
    (void)state;
    ff_model m;
    assert_int_equal(ff_model_init(&m, "alexnet"), FF_OK);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(ff_partition_print(f, &m, NULL, 4, FF_SPLIT_ROWS, 1), FF_OK);
    fclose(f);
    for (int i = 0; i < m.n_layers; i++) assert_non_null(strstr(buf, m.layers[i].name));
    assert_non_null(strstr(buf, "1:[13,27)<-[52,115)"));  // conv1, rank 1
    assert_non_null(strstr(buf, "halo bytes exchanged per forward (all ranks, batch 1): 657792"));
    free(buf);
}

// The GPU plan of AlexNet with the defaults (Winograd F(4x4, r x r), conv1 through space-to-depth).
// ff_plan_build is pure: no GPU is needed to make it.
static ff_plan gpu_plan(const ff_model *m, int wm) {
    ff_plan_options o;
    unsetenv("FF_CUDA_CONV");
    unsetenv("FF_WINOGRAD_M");
    unsetenv("FF_CUDA_S2D");
    assert_int_equal(ff_plan_options_default(&o), FF_OK);
    o.winograd_m = wm;
    ff_plan p;
    assert_int_equal(ff_plan_build(&p, m, FF_DEVICE_CUDA, &o), FF_OK);
    return p;
}

// Under the GPU plan, for P = 1..8 and every rotation: each Winograd layer's bands need the input
// rows of whole tiles (ff_winograd_input_rows, never less than the direct window, and more where a
// band starts or ends inside a tile), conv1 (space-to-depth) is a whole-layer step on every rank
// (not spatial, full band and input) and the layer after it takes its rows from a whole tensor,
// and the checker passes.
static void planned_partition_follows_the_plan(void **state) {
    (void)state;
    ff_model m;
    assert_int_equal(ff_model_init(&m, "alexnet"), FF_OK);
    for (int wm = 2; wm <= 4; wm += 2) {
        const ff_plan plan = gpu_plan(&m, wm);
        int wider = 0;
        for (int P = 1; P <= 8; P++)
            for (int rot = 0; rot < P; rot++) {
                ff_partition *p = NULL;
                assert_int_equal(ff_partition_build_planned(&p, &m, &plan, 0, m.n_layers - 1, P, FF_SPLIT_ROWS, 3, rot),
                                 FF_OK);
                assert_non_null(p->plan);
                ff_status st = ff_partition_check(p, &m);
                if (st != FF_OK) fprintf(stderr, "m=%d P=%d rot=%d: %s\n", wm, P, rot, ff_last_error());
                assert_int_equal(st, FF_OK);
                const ff_layer_part *c1 = &p->layer[0];
                assert_true(c1->whole);
                assert_false(c1->spatial);
                assert_false(c1->windowed);
                assert_int_equal(c1->src, FF_SRC_NONE);
                for (int r = 0; r < P; r++) {
                    assert_int_equal(c1->band[r].lo, 0);
                    assert_int_equal(c1->band[r].hi, m.layers[0].out.h);
                    assert_int_equal(c1->need[r].hi, m.layers[0].in.h);
                }
                assert_false(p->layer[1].spatial);               // relu1 stays whole after a whole step (fused anyway)
                assert_int_equal(p->layer[2].src, FF_SRC_ROOT);  // pool1 takes its rows from the whole tensor
                for (int i = 0; i < m.n_layers; i++) {
                    const ff_layer *L = &m.layers[i];
                    const ff_layer_part *lp = &p->layer[i];
                    if (plan.layer[i].alg != FF_CONV_WINOGRAD || plan.layer[i].s2d) continue;
                    assert_true(lp->spatial && lp->windowed);
                    for (int r = 0; r < P; r++) {
                        const ff_range b = lp->band[r], nd = lp->need[r];
                        if (ff_range_len(b) == 0) continue;
                        const ff_range want = ff_winograd_input_rows(L, wm, b.lo, b.hi);
                        const ff_range direct = ff_layer_input_rows(L, b.lo, b.hi);
                        assert_int_equal(nd.lo, want.lo);
                        assert_int_equal(nd.hi, want.hi);
                        assert_true(nd.lo <= direct.lo && nd.hi >= direct.hi);
                        wider += nd.lo < direct.lo || nd.hi > direct.hi;
                    }
                }
                ff_partition_free(p);
            }
        assert_true(wider > 0);
    }
    // Four ranks, F(4x4, 3x3): conv3's rank 1 computes rows [3, 6) = tiles 0 and 1, which read
    // input rows [0, 9) (pad 1: tile 1 reads 3..8), where the direct window is [2, 7).
    const ff_plan plan = gpu_plan(&m, 4);
    ff_partition *p = NULL;
    assert_int_equal(ff_partition_build_planned(&p, &m, &plan, 0, m.n_layers - 1, 4, FF_SPLIT_ROWS, 1, 0), FF_OK);
    const ff_layer_part *c3 = &p->layer[ff_model_find_layer(&m, "conv3")];
    assert_int_equal(c3->band[1].lo, 3);
    assert_int_equal(c3->band[1].hi, 6);
    assert_int_equal(c3->need[1].lo, 0);
    assert_int_equal(c3->need[1].hi, 9);
    ff_partition_free(p);
    // Batch and replicate splits are not banded: the plan changes nothing there.
    assert_int_equal(ff_partition_build_planned(&p, &m, &plan, 0, m.n_layers - 1, 3, FF_SPLIT_BATCH, 5, 0), FF_OK);
    assert_int_equal(ff_partition_check(p, &m), FF_OK);
    for (int i = 0; i < m.n_layers; i++) assert_false(p->layer[i].spatial);
    ff_partition_free(p);
    // A plan of another model is refused.
    ff_model mn;
    assert_int_equal(ff_model_init(&mn, "mnist-cnn"), FF_OK);
    assert_int_equal(ff_partition_build_planned(&p, &mn, &plan, 0, mn.n_layers - 1, 2, FF_SPLIT_ROWS, 1, 0),
                     FF_ERR_INPUT);
    assert_null(p);
    ff_clear_error();
}

// The checker holds the partition to its plan: a Winograd band one row short of its tiles (at
// either end), the direct window instead of the tiles, a row too many, a whole-layer step split
// into bands, or a partition that ignores the plan all fail; undone, it passes.
static void checker_holds_partition_to_plan(void **state) {
    (void)state;
    ff_model m;
    assert_int_equal(ff_model_init(&m, "alexnet"), FF_OK);
    const ff_plan plan = gpu_plan(&m, 4);
    ff_partition *p = NULL;
    assert_int_equal(ff_partition_build_planned(&p, &m, &plan, 0, m.n_layers - 1, 4, FF_SPLIT_ROWS, 1, 0), FF_OK);
    assert_int_equal(ff_partition_check(p, &m), FF_OK);
    ff_layer_part *lp = &p->layer[ff_model_find_layer(&m, "conv3")];
    const ff_range saved = lp->need[1];
    lp->need[1].lo++;  // one row short above: tile 0 reads row 0
    assert_int_equal(ff_partition_check(p, &m), FF_ERR_INTERNAL);
    assert_non_null(strstr(ff_last_error(), "winograd-4"));
    lp->need[1] = saved;
    lp->need[1].hi--;  // one row short below
    assert_int_equal(ff_partition_check(p, &m), FF_ERR_INTERNAL);
    lp->need[1] = ff_layer_input_rows(&m.layers[ff_model_find_layer(&m, "conv3")], 3, 6);  // the direct window
    assert_int_equal(ff_partition_check(p, &m), FF_ERR_INTERNAL);
    lp->need[1] = saved;
    lp->need[2].hi++;  // one row more than the tiles read
    assert_int_equal(ff_partition_check(p, &m), FF_ERR_INTERNAL);
    lp->need[2].hi--;
    assert_int_equal(ff_partition_check(p, &m), FF_OK);
    // conv1 is computed whole only: a band of it is a violation.
    p->layer[0].band[0].hi = 10;
    assert_int_equal(ff_partition_check(p, &m), FF_ERR_INTERNAL);
    p->layer[0].band[0].hi = m.layers[0].out.h;
    p->layer[0].spatial = true;
    assert_int_equal(ff_partition_check(p, &m), FF_ERR_INTERNAL);
    p->layer[0].spatial = false;
    assert_int_equal(ff_partition_check(p, &m), FF_OK);
    ff_partition_free(p);
    // The direct partition (no plan) is not the GPU plan's: checked against the plan, it fails.
    assert_int_equal(ff_partition_build(&p, &m, 0, m.n_layers - 1, 4, FF_SPLIT_ROWS, 1), FF_OK);
    assert_int_equal(ff_partition_check(p, &m), FF_OK);
    p->plan_copy = plan;
    p->plan = &p->plan_copy;
    assert_int_equal(ff_partition_check(p, &m), FF_ERR_INTERNAL);
    ff_partition_free(p);
    ff_clear_error();
}

// info's table under the plan: the algorithm column, conv1 a whole step, conv2's tile rows.
static void print_follows_the_plan(void **state) {
    (void)state;
    ff_model m;
    assert_int_equal(ff_model_init(&m, "alexnet"), FF_OK);
    const ff_plan plan = gpu_plan(&m, 4);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(ff_partition_print(f, &m, &plan, 4, FF_SPLIT_ROWS, 1), FF_OK);
    fclose(f);
    assert_non_null(strstr(buf, "cuda plan"));
    assert_non_null(strstr(buf, "winograd-4-s2d"));
    assert_non_null(strstr(buf, "whole step"));
    assert_non_null(strstr(buf, "1:[6,13)<-[2,18)"));  // conv2, rank 1: tiles 1..3 (rows 4..15), pad 2
    assert_null(strstr(buf, "1:[13,27)<-[52,115)"));   // no band of conv1
    free(buf);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bands_tile_and_owner_agrees),
        cmocka_unit_test(rotated_bands_tile_and_balance),
        cmocka_unit_test(partition_rotation_reaches_every_layer),
        cmocka_unit_test(input_rows_match_brute_force),
        cmocka_unit_test(alexnet_conv1_halo),
        cmocka_unit_test(thin_bands_fetch_from_far_ranks),
        cmocka_unit_test(more_ranks_than_rows),
        cmocka_unit_test(bad_arguments),
        cmocka_unit_test(checker_rejects_broken_plans),
        cmocka_unit_test(print_lists_every_layer),
        cmocka_unit_test(planned_partition_follows_the_plan),
        cmocka_unit_test(checker_holds_partition_to_plan),
        cmocka_unit_test(print_follows_the_plan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
