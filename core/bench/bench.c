// Timing harness shared by `fivefold bench` and the scaling scripts (see bench.h).
#include "fivefold/bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fivefold/comm.h"
#include "fivefold/digest.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

ff_status ff_bench_time(ff_bench_timing *t, ff_executor *e, float *y, const float *x, int64_t n, int iters, int warmup,
                        uint64_t expect_digest) {
    memset(t, 0, sizeof *t);
    if (iters < 1) return FF_FAIL(FF_ERR_INPUT, "--iters %d: expected at least 1", iters);
    const ff_model *m = ff_exec_model(e);
    ff_comm *comm = ff_exec_options_of(e)->comm;
    ff_exec_caps caps;
    ff_exec_caps_of(&caps, e);
    int last = m->n_layers - 1;
    for (int i = 0; i < warmup; i++) FF_TRY(ff_exec_forward(e, y, x, n, 0, last));
    ff_trace *tr = ff_exec_trace(e);
    if (tr) ff_trace_reset(tr);
    double *ms = malloc((size_t)iters * sizeof(double));
    if (!ms) return FF_FAIL(FF_ERR_OOM, "timings");
    ff_status st = FF_OK;
    for (int i = 0; i < iters && st == FF_OK; i++) {
        if (comm && ff_comm_size(comm) > 1 && (st = ff_comm_barrier(comm)) != FF_OK) break;
        double t0 = ff_now();
        st = ff_exec_forward(e, y, x, n, 0, last);
        ms[i] = 1e3 * (ff_now() - t0);
        if (st == FF_OK && ff_exec_rank(e) == 0) {
            t->digest = ff_digest_f32(y, (size_t)(n * m->classes));
            if (t->digest != expect_digest) t->wrong++;
        }
    }
    if (st != FF_OK) {
        free(ms);
        return st;
    }
    // Rank 0's clock decides, but a run is only over when every rank is done: take each run's
    // maximum over ranks.
    if (comm && ff_comm_size(comm) > 1) {
        int64_t *us = malloc((size_t)iters * sizeof(int64_t));
        if (!us) {
            free(ms);
            return FF_FAIL(FF_ERR_OOM, "timings");
        }
        for (int i = 0; i < iters; i++) us[i] = (int64_t)llround(ms[i] * 1e3);
        st = ff_comm_allreduce_max_i64(comm, us, (size_t)iters);
        for (int i = 0; i < iters; i++) ms[i] = (double)us[i] / 1e3;
        free(us);
        if (st != FF_OK) {
            free(ms);
            return st;
        }
    }
    t->iters = iters;
    double sum = 0, sq = 0;
    for (int i = 0; i < iters; i++) sum += ms[i];
    t->mean_ms = sum / iters;
    for (int i = 0; i < iters; i++) sq += (ms[i] - t->mean_ms) * (ms[i] - t->mean_ms);
    t->stdev_ms = iters > 1 ? sqrt(sq / (iters - 1)) : 0;
    qsort(ms, (size_t)iters, sizeof(double), cmp_double);
    t->median_ms = iters % 2 ? ms[iters / 2] : 0.5 * (ms[iters / 2 - 1] + ms[iters / 2]);
    t->min_ms = ms[0];
    t->max_ms = ms[iters - 1];
    free(ms);
    // Device-resident replays (GPU modes; the untraced pass only, single process).
    if (caps.resident_timing && !ff_exec_trace(e)) {
        double *rs = malloc((size_t)iters * sizeof(double));
        if (!rs) return FF_FAIL(FF_ERR_OOM, "timings");
        st = ff_exec_time_resident(e, n, iters, rs);
        if (st == FF_OK && comm && ff_comm_size(comm) > 1) {  // a replay ends when every rank is done
            int64_t *us = malloc((size_t)iters * sizeof(int64_t));
            if (!us) st = FF_FAIL(FF_ERR_OOM, "timings");
            for (int i = 0; us && i < iters; i++) us[i] = (int64_t)llround(rs[i] * 1e3);
            if (st == FF_OK) st = ff_comm_allreduce_max_i64(comm, us, (size_t)iters);
            for (int i = 0; us && st == FF_OK && i < iters; i++) rs[i] = (double)us[i] / 1e3;
            free(us);
        }
        if (st == FF_OK) st = ff_exec_resident_output(e, y, n);
        if (st != FF_OK) {
            free(rs);
            return st;
        }
        if (ff_exec_rank(e) == 0 && ff_digest_f32(y, (size_t)(n * m->classes)) != expect_digest)
            t->resident_wrong++, t->wrong++;
        qsort(rs, (size_t)iters, sizeof(double), cmp_double);
        t->has_resident = true;
        t->resident_median_ms = iters % 2 ? rs[iters / 2] : 0.5 * (rs[iters / 2 - 1] + rs[iters / 2]);
        t->resident_min_ms = rs[0];
        t->resident_max_ms = rs[iters - 1];
        free(rs);
    }
    t->images_per_s = (double)n / (t->median_ms / 1e3);
    t->gflops = (double)m->flops_total * (double)n / (t->median_ms / 1e3) / 1e9;
    if (tr && tr->calls > 0) {
        for (int p = 0; p < FF_N_PHASES; p++) t->phase_ms[p] = 1e3 * ff_trace_phase_total(tr, p) / (double)tr->calls;
        int64_t bytes = 0, halo = 0;
        double bus = 0;
        const double calls = (double)tr->calls;
        for (int l = 0; l <= FF_MAX_LAYERS; l++) {
            bytes += tr->comm_bytes[l];
            halo += tr->halo_bytes[l];
            bus += tr->bus_bytes[l];
            for (int p = 0; p < FF_N_PHASES; p++) t->layer_ms[l][p] = 1e3 * tr->seconds[l][p] / calls;
            t->layer_comm_bytes[l] = tr->comm_bytes[l] / tr->calls;
            t->layer_halo_bytes[l] = tr->halo_bytes[l] / tr->calls;
            t->layer_busbw_gbs[l] =
                tr->seconds[l][FF_PHASE_COMM] > 0 ? tr->bus_bytes[l] / tr->seconds[l][FF_PHASE_COMM] / 1e9 : 0;
        }
        t->comm_bytes = bytes / tr->calls;
        t->halo_bytes = halo / tr->calls;
        if (t->phase_ms[FF_PHASE_COMM] > 0) t->comm_busbw_gbs = bus / calls / (t->phase_ms[FF_PHASE_COMM] / 1e3) / 1e9;
    }
    return FF_OK;
}
