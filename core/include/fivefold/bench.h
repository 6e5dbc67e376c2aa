// Timing an executor (docs/ARCHITECTURE.md §8): warm-up, timed repeats, median and spread, phases, and the
// post-timing check that every timed run produced the gated output.
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "fivefold/executor.h"
#include "fivefold/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int iters;  // timed forwards
    double median_ms, min_ms, max_ms, mean_ms, stdev_ms;
    double images_per_s;           // batch / median
    double gflops;                 // model FLOPs * batch / median
    double phase_ms[FF_N_PHASES];  // mean per forward, summed over layers (this rank)
    int64_t comm_bytes;            // per forward, this rank
    int64_t halo_bytes;            // the part of comm_bytes sent point-to-point (halo rows); the rest
                                   // went through collectives (scatter, gathers, broadcasts)
    double comm_busbw_gbs;         // bus bandwidth, GB/s: bus bytes / comm time with nccl-tests'
                                   // collective factors (comm.h); 0 when no communication
    // Per layer (last row: outside any layer), mean per forward: phases (ms), bytes, bus bandwidth.
    double layer_ms[FF_MAX_LAYERS + 1][FF_N_PHASES];
    int64_t layer_comm_bytes[FF_MAX_LAYERS + 1], layer_halo_bytes[FF_MAX_LAYERS + 1];
    double layer_busbw_gbs[FF_MAX_LAYERS + 1];
    int64_t wrong;    // timed runs whose output digest differed from the expected one
    uint64_t digest;  // output digest of the last timed run (rank 0)
    // Device-resident figures (modes with ff_exec_time_resident, i.e. GPU modes; zero elsewhere):
    // the same forward replayed `iters` times on the batch already on the device, event-timed, no
    // host copies: what PyTorch's GPU figure measures. The output of the last replay is copied back
    // once and its digest compared with the expected one (counted in `wrong` too).
    bool has_resident;
    double resident_median_ms, resident_min_ms, resident_max_ms;
    int64_t resident_wrong;
} ff_bench_timing;

// Times `iters` full forwards of n images after `warmup` untimed ones. Wall clock after the forward
// returns (every mode's forward returns with the output on the host, i.e. synchronised; multi-rank
// modes start each run from a barrier). Every run's output digest (rank 0) is compared with
// `expect_digest`; mismatches are counted in t->wrong (the benchmark's #wrong column). Collective.
// x: (n, input) on rank 0; y: (n, classes) scratch on rank 0.
ff_status ff_bench_time(ff_bench_timing *t, ff_executor *e, float *y, const float *x, int64_t n, int iters, int warmup,
                        uint64_t expect_digest);

#ifdef __cplusplus
}
#endif
