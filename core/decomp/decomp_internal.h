// Private to core/decomp/: the state every split shares, and the helpers they use (decomp.c).
#pragma once
#include "fivefold/comm.h"
#include "fivefold/decomp.h"
#include "fivefold/guard.h"
#include "fivefold/partition.h"

enum { ACT0, ACT1, ACT2, SEND, RECV, FULL, INPUT, N_BUFS };

struct ff_decomp {
    ff_split split;
    const ff_model *model;
    const ff_plan *plan;
    ff_device *dev;
    ff_comm *comm;  // NULL for split none
    int rank, ranks;
    ff_guarded buf[N_BUFS];      // device memory (guards checked after exchanges)
    size_t *counts, *displs;     // [P] scratch for v-collectives
    ff_comm_msg *sends, *recvs;  // [P] scratch for exchanges
    ff_guarded *gbuf;            // [n_gbuf] rows split: three activation buffers per image group
    int n_gbuf;
    // per forward
    int fault_layer;
    ff_trace *trace;
    bool replay;  // ff_decomp_replay: input already in place, output left on the device
    // test hooks (ff_decomp_set_crash): crash_armed in a forward of the crashing rank that runs
    // crash_layer; ff_decomp_crash_point stops it there
    bool crash_on, crash_hang, crash_armed;
    int crash_rank, crash_layer;
    const float *out_dev;       // rank 0: where the last forward's output is on the device
    int64_t last_n;             // the last successful forward's images and layers (what a replay repeats);
    int last_first, last_last;  // last_n < 0: none yet
};

// Phase timing: a mark before, account after (the device is synchronised first so that a GPU's
// time is its work's, not its launches').
typedef struct {
    double t;
    int64_t bytes, halo;
    double bus;
} ff_mark;
ff_mark ff_decomp_mark(ff_decomp *x);
ff_status ff_decomp_account(ff_decomp *x, int row, ff_phase ph, ff_mark m);

// Finishes the device's pending work before the comm reads or writes its buffers.
ff_status ff_decomp_comm_ready(ff_decomp *x);

// The test hooks' stop (ff_decomp_set_crash): call it just before each communication, with the
// layer the communication belongs to (the layer whose input it fetches, or whose output it
// collects). Returns only when this rank is not to stop here.
void ff_decomp_crash_point(ff_decomp *x, int layer);

// Rank 0's input as device memory (n floats of in_host): in_host itself on a host-memory device;
// else uploaded into buf[INPUT]. Other ranks get NULL.
ff_status ff_decomp_import(ff_decomp *x, const float **out, const float *in_host, size_t floats, int row);
// Rank 0: floats of device buffer src to out_host (a copy; the download on a GPU).
ff_status ff_decomp_export(ff_decomp *x, float *out_host, const float *src, size_t floats, int row);
// Reserve + arm a guarded device buffer for `floats` in use.
ff_status ff_decomp_reserve(ff_guarded *g, size_t floats);

// The splits (batch.c, rows.c, replicate.c, none.c).
ff_status ff_decomp_forward_none(ff_decomp *x, float *out, const float *in, int64_t n, int first, int last);
ff_status ff_decomp_forward_batch(ff_decomp *x, float *out, const float *in, int64_t n, int first, int last);
ff_status ff_decomp_forward_replicate(ff_decomp *x, float *out, const float *in, int64_t n, int first, int last);
ff_status ff_decomp_forward_rows(ff_decomp *x, float *out, const float *in, int64_t n, int first, int last);
void ff_decomp_rows_free(ff_decomp *x);
