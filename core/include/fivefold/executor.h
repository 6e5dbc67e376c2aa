// One executor interface for all five modes (docs/ARCHITECTURE.md §1, §3). The CLI, the verifier and the
// benchmark drive modes only through these functions; a mode is one file in core/exec/modes/ that
// fills an ff_mode_impl, and nothing else changes when one is added.
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "fivefold/model.h"
#include "fivefold/status.h"
#include "fivefold/trace.h"
#include "fivefold/weights.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { FF_MODE_SERIAL, FF_MODE_MPI, FF_MODE_CUDA, FF_MODE_HYBRID, FF_MODE_DIRECT, FF_N_MODES } ff_mode;
typedef enum { FF_SPLIT_NONE, FF_SPLIT_BATCH, FF_SPLIT_ROWS, FF_SPLIT_REPLICATE } ff_split;
typedef enum { FF_BACKEND_OWN, FF_BACKEND_VENDOR } ff_backend;  // vendor: cuBLAS/cuDNN
typedef enum { FF_PRECISION_FP32, FF_PRECISION_TF32 } ff_precision;

// Parses "serial" or its alias "v1", ... ; FF_ERR_INPUT naming the accepted values otherwise.
ff_status ff_mode_parse(ff_mode *out, const char *s);
ff_status ff_split_parse(ff_split *out, const char *s);
const char *ff_mode_name(ff_mode m);
const char *ff_split_name(ff_split s);
bool ff_mode_is_multirank(ff_mode m);

struct ff_comm;  // comm.h

typedef struct {
    ff_mode mode;
    ff_split split;     // multi-rank modes; FF_SPLIT_NONE for single-process ones
    int64_t max_batch;  // largest n forward() will be called with (buffers sized once)
    ff_backend backend;
    ff_precision precision;
    int fault_layer;       // test hook (--inject-fault): layer index whose output element 0 is
                           // perturbed far beyond its tolerance; -1 for none
    bool trace;            // fill the trace with phase timers
    struct ff_comm *comm;  // multi-rank modes: the communicator (MPI or loopback); NULL otherwise
} ff_exec_options;

void ff_exec_options_default(ff_exec_options *o);

typedef struct ff_executor ff_executor;

// Creates an executor for o->mode. The model and weights must outlive it (weights are copied to
// the device by GPU modes; host modes may keep pointers). Multi-rank modes: collective; every rank
// passes the same model/options; weights need only be valid on rank 0 (they are broadcast).
ff_status ff_exec_create(ff_executor **out, const ff_model *m, const ff_weights *w, const ff_exec_options *o);
void ff_exec_destroy(ff_executor *e);

// Runs layers [first, last] (inclusive) on n images. `in` holds the input of layer `first`
// (n, layers[first].in), `out` receives the output of layer `last` (n, layers[last].out); both are
// host memory. Multi-rank modes: collective; in and out are only used on rank 0 (others may pass
// NULL). Per-layer verification calls it with first == last; a full forward with 0, n_layers-1.
ff_status ff_exec_forward(ff_executor *e, float *out, const float *in, int64_t n, int first, int last);

// The trace accumulated since the last reset (NULL if tracing is off).
ff_trace *ff_exec_trace(ff_executor *e);
// This process's rank and the rank count (0 and 1 for single-process modes).
int ff_exec_rank(const ff_executor *e);
int ff_exec_ranks(const ff_executor *e);

// ---- for mode implementations (core/exec/modes/*.c) ----
typedef struct {
    const char *name;
    ff_status (*create)(ff_executor **out, const ff_model *m, const ff_weights *w, const ff_exec_options *o);
    ff_status (*forward)(ff_executor *e, float *out, const float *in, int64_t n, int first, int last);
    void (*destroy)(ff_executor *e);
} ff_mode_impl;

// Optional hooks a mode may offer (set by its create in e->ext; NULL, or a NULL field: not offered).
// Kept outside ff_mode_impl so the modes that offer none need no change.
typedef struct {
    // The algorithm that computes `layer` ("direct" unless a mode says otherwise): the verifier
    // picks the comparison rule from it ("winograd-M": F(M x M, r x r), winograd.h).
    const char *(*layer_algorithm)(ff_executor *e, int layer);
    // Times `iters` whole forwards (layers 0..n_layers-1) of n images on the input already resident
    // on the device (the last forward's, same n), without host copies: ms_out (iters) receives each.
    // The output of the last replay is left where the next ff_exec_resident_output can read it.
    ff_status (*time_resident)(ff_executor *e, int64_t n, int iters, double *ms_out);
    // Copies the output of the last resident replay to host memory out (n, classes).
    ff_status (*resident_output)(ff_executor *e, float *out, int64_t n);
} ff_mode_ext;

// Every executor struct starts with this header.
struct ff_executor {
    const ff_mode_impl *impl;
    const ff_model *model;
    ff_exec_options opt;
    ff_trace trace;
    int rank, ranks;
    const ff_mode_ext *ext;  // optional hooks (NULL for the CPU modes)
};

// "direct" unless the mode reports another algorithm for the layer (e.g. "winograd-2").
const char *ff_exec_layer_algorithm(ff_executor *e, int layer);
// Device-resident timing (ff_mode_ext.time_resident); FF_ERR_INPUT "not supported" where the mode
// has no such hook. Call after one ff_exec_forward of the whole model with the same n.
ff_status ff_exec_time_resident(ff_executor *e, int64_t n, int iters, double *ms_out);
// The output of the last resident replay (host memory, (n, classes)); FF_ERR_INPUT where unsupported.
ff_status ff_exec_resident_output(ff_executor *e, float *out, int64_t n);

extern const ff_mode_impl ff_mode_serial_impl;
extern const ff_mode_impl ff_mode_mpi_impl;
extern const ff_mode_impl ff_mode_cuda_impl;
extern const ff_mode_impl ff_mode_hybrid_impl;
extern const ff_mode_impl ff_mode_direct_impl;

// The fault hook shared by every mode: perturbs x[0] so that any check fails (+1 + 2|x|, i.e.
// far beyond any tolerance the verifier uses, and changes exact-match layers too).
float ff_fault_value(float x);

#ifdef __cplusplus
}
#endif
