// libFuzzer target for the partition math (fuzz/README.md). Input bytes choose a chain of 1-4
// windowed layers (H 1..300 square maps of 1 or 16 channels, square kernel 1..11, stride 1..4,
// pad 0..5 with pad < kernel), an execution plan (none: every layer direct; the cpu device's; or
// the cuda device's with --conv, --winograd-m and --s2d from the input, so 3x3/5x5 convs of 16
// channels run Winograd and strided ones may be space-to-depth whole-layer steps), a band
// rotation, a rank count P 1..64 and an arbitrary (not balanced) tiling of the rows among ranks;
// the target checks
//   - ff_band tiles [0, n) and ff_band_owner agrees with it,
//   - ff_partition_build_planned + ff_partition_check (bands tile, needs are exactly the rows the
//     plan's algorithm reads: the window, or whole Winograd tiles; whole-layer steps are not
//     split; halo plans deliver every missing row once from its owner, symmetric),
//   - ff_plan_exchange for the arbitrary tiling: every needed row arrives exactly once, from the
//     rank that holds it, and nothing else is sent.
// Any violation aborts (libFuzzer reports it, saves the input and exits 1 as run by CTest).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fivefold/partition.h"

// The partition takes each band's input rows from the plan (plan.c), whose Winograd geometry is
// winograd.c's. This target is compiled from its sources, not linked with libfivefold (so that
// libFuzzer's coverage instrumentation sees them), and its build lists partition.c, model.c and
// status.c (fuzz/CMakeLists.txt, run_fuzz_partition.sh): the plan's two sources are compiled in
// here, where the fuzzer covers them too. (Should those lists name them, remove these lines.)
#include "../core/device/cuda/winograd.c"
#include "../core/plan/plan.c"

typedef struct {
    const uint8_t *p;
    size_t n, at;
} bytes;
static unsigned take(bytes *b, unsigned mod) {  // next byte(s) mod `mod`; zeros when exhausted
    unsigned v = 0;
    for (int k = 0; k < 2; k++) v = v * 256 + (b->at < b->n ? b->p[b->at++] : 0);
    return mod ? v % mod : 0;
}

static void die(const char *what) {
    fprintf(stderr, "fuzz_partition: %s: %s\n", what, ff_last_error());
    abort();
}

static void check_bands(int64_t n, int P) {
    int64_t at = 0;
    for (int r = 0; r < P; r++) {
        ff_range b = ff_band(n, P, r);
        if (b.lo != at || b.hi < b.lo || b.hi - b.lo > n / P + 1) die("ff_band does not tile");
        for (int64_t i = b.lo; i < b.hi; i++)
            if (ff_band_owner(n, P, i) != r) die("ff_band_owner disagrees with ff_band");
        at = b.hi;
    }
    if (at != n) die("ff_band does not end at n");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    bytes b = {data, size, 0};
    ff_model m;
    memset(&m, 0, sizeof m);
    m.name = "fuzz";
    const int64_t C = take(&b, 2) ? 16 : 1;  // 16: enough channels for Winograd (winograd.h)
    const int64_t H0 = 1 + (int64_t)take(&b, 300);
    ff_shape s = {C, H0, H0};
    m.input = s;
    int n_layers = 1 + (int)take(&b, 4);
    for (int i = 0; i < n_layers; i++) {
        ff_layer L;
        memset(&L, 0, sizeof L);
        L.name = "L";
        L.op = take(&b, 2) ? FF_OP_CONV2D : FF_OP_MAXPOOL;
        L.kh = L.kw = 1 + (int)take(&b, 11);
        L.stride = 1 + (int)take(&b, 4);
        int pmax = L.kh - 1 < 5 ? L.kh - 1 : 5;
        L.pad = (int)take(&b, (unsigned)pmax + 1);
        if (s.h + 2 * L.pad < L.kh) break;  // no output row: the chain ends here
        L.out_c = C;
        L.in = s;
        L.out.c = C;
        L.out.h = L.out.w = (s.h + 2 * L.pad - L.kh) / L.stride + 1;
        L.fan_in = L.op == FF_OP_CONV2D ? C * L.kh * L.kw : 0;
        L.param_index = -1;
        m.layers[m.n_layers++] = L;
        s = L.out;
    }
    if (m.n_layers == 0) return 0;
    // The plan: none (NULL, every layer direct), the cpu device's, or the cuda device's.
    const unsigned kind = take(&b, 3);
    ff_plan_options po;
    memset(&po, 0, sizeof po);
    po.conv = take(&b, 2) ? FF_CONV_WINOGRAD : FF_CONV_DIRECT;
    po.winograd_m = take(&b, 2) ? 4 : 2;
    po.s2d = take(&b, 2) != 0;
    ff_plan plan;
    if (kind && ff_plan_build(&plan, &m, kind == 1 ? FF_DEVICE_CPU : FF_DEVICE_CUDA, &po) != FF_OK)
        die("ff_plan_build");
    const int rot = (int)take(&b, 64);
    int P = 1 + (int)take(&b, 64);
    check_bands(m.input.h, P);
    check_bands(s.h, P);
    ff_partition *p = NULL;
    if (ff_partition_build_planned(&p, &m, kind ? &plan : NULL, 0, m.n_layers - 1, P, FF_SPLIT_ROWS, 1, rot) != FF_OK)
        die("ff_partition_build_planned");
    if (ff_partition_check(p, &m) != FF_OK) die("ff_partition_check");
    ff_partition_free(p);

    // An arbitrary tiling of layer 0's input rows (cut points from the input), and needs from the
    // balanced output bands: the planner must not rely on balance.
    const ff_layer *L = &m.layers[0];
    int64_t H = L->in.h;
    ff_range *own = calloc((size_t)P, sizeof *own), *need = calloc((size_t)P, sizeof *need);
    int64_t cap = (int64_t)P * (P - 1) + 1, nx = 0;
    ff_xfer *x = calloc((size_t)cap, sizeof *x);
    int64_t at = 0;
    for (int r = 0; r < P; r++) {
        int64_t len = r == P - 1 ? H - at : (int64_t)take(&b, (unsigned)(H - at + 1));
        own[r].lo = at;
        own[r].hi = at + len;
        at += len;
        ff_range band = ff_band(L->out.h, P, r);
        need[r] = ff_layer_input_rows(L, band.lo, band.hi);
    }
    if (ff_plan_exchange(x, &nx, own, need, H, P, cap) != FF_OK) die("ff_plan_exchange");
    for (int d = 0; d < P; d++)
        for (int64_t row = need[d].lo; row < need[d].hi; row++) {
            int got = 0;
            for (int64_t k = 0; k < nx; k++)
                if (x[k].dst == d && row >= x[k].rows.lo && row < x[k].rows.hi) {
                    if (row < own[x[k].src].lo || row >= own[x[k].src].hi)
                        die("a row sent by a rank that does not hold it");
                    got++;
                }
            int local = row >= own[d].lo && row < own[d].hi;
            if (got != !local) die("a needed row does not arrive exactly once");
        }
    for (int64_t k = 0; k < nx; k++)
        if (x[k].src == x[k].dst || x[k].rows.lo < need[x[k].dst].lo || x[k].rows.hi > need[x[k].dst].hi ||
            x[k].rows.hi <= x[k].rows.lo)
            die("a message outside what its receiver needs");
    free(own);
    free(need);
    free(x);
    return 0;
}
