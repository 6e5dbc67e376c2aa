// One executor interface for all five modes (docs/ARCHITECTURE.md §1, §3). The CLI, the verifier, the
// benchmark and the trainer drive modes only through these functions. A mode is a composition of
// a device (device.h: cpu or cuda), a decomposition (core/decomp/: none, batch, rows, replicate)
// and a transport (comm.h: none, host MPI, loopback, staged through host memory, NCCL, CUDA-aware
// MPI); the table in
// core/exec/modes.c says which, and the executor itself is opaque.
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "fivefold/model.h"
#include "fivefold/plan.h"
#include "fivefold/split.h"
#include "fivefold/status.h"
#include "fivefold/trace.h"
#include "fivefold/weights.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { FF_MODE_SERIAL, FF_MODE_MPI, FF_MODE_CUDA, FF_MODE_HYBRID, FF_MODE_DIRECT, FF_N_MODES } ff_mode;

// Parses "serial" or its alias "v1", ... ; FF_ERR_INPUT naming the accepted values otherwise.
ff_status ff_mode_parse(ff_mode *out, const char *s);
const char *ff_mode_name(ff_mode m);
bool ff_mode_is_multirank(ff_mode m);

struct ff_comm;  // comm.h

// How the direct mode's ranks hand device buffers to each other (--transport): NCCL (one GPU per
// rank), a CUDA-aware MPI, CUDA IPC (ranks of one node, GPUs may be shared), or auto: NCCL when
// every rank has its own GPU, else CUDA IPC on one node, else a CUDA-aware MPI.
typedef enum { FF_TRANSPORT_AUTO, FF_TRANSPORT_NCCL, FF_TRANSPORT_MPI, FF_TRANSPORT_IPC } ff_transport;
ff_status ff_transport_parse(ff_transport *out, const char *s);
const char *ff_transport_name(ff_transport t);

typedef struct {
    ff_mode mode;
    ff_split split;          // multi-rank modes; FF_SPLIT_NONE for single-process ones
    int64_t max_batch;       // largest n forward() will be called with (buffers sized once)
    bool train_only;         // the trainer's executor: its device runs training ops only (device.h)
    ff_plan_options plan;    // algorithm choices, backend, precision (plan.h)
    int fault_layer;         // test hook (--inject-fault): layer index whose output element 0 is
                             // perturbed far beyond its tolerance; -1 for none
    bool trace;              // fill the trace with phase timers
    int gpu;                 // GPU modes: the device index; -1: the node-local rank % the GPUs present
    struct ff_comm *comm;    // multi-rank modes: the communicator (MPI or loopback); NULL otherwise
    ff_transport transport;  // direct mode: NCCL (bootstrapped over comm) or comm itself (CUDA-aware MPI)
    // Multi-rank modes: the communication deadline ff_exec_create gives comm (ff_comm_set_timeout,
    // --comm-timeout): seconds without progress before a wait fails; 0: none; < 0 (default): leave
    // comm's own (30 s on MPI).
    double comm_timeout_s;
    // Test hooks --inject-crash / --inject-hang RANK:LAYER (multi-rank modes): in a forward that
    // runs layer crash_layer, rank crash_rank stops just before the first communication that
    // belongs to that layer or a later one (the rows split's scatter, halo exchange, all-gather or
    // collect; the batch split's gather of the last layer; the replicate split has none after its
    // broadcast), or at the end of that forward if none follows: it kills itself with SIGKILL, or
    // (crash_hang) sleeps for ever without answering. -1: none.
    int crash_rank, crash_layer;
    bool crash_hang;
} ff_exec_options;

// The defaults; the plan's from ff_plan_options_default (FF_CUDA_* variables set its defaults:
// a bad value there is reported by ff_exec_create).
void ff_exec_options_default(ff_exec_options *o);

typedef struct ff_executor ff_executor;

// What an executor is, for callers that must adapt to it (instead of testing the mode).
typedef struct {
    ff_device_kind device;     // where tensors live and which kernels run
    const char *digest_class;  // the plan's ("cpu", "gpu", "gpu-direct", ...); "" for none
    bool needs_comm;           // a multi-rank mode: run under mpiexec (or with a loopback comm)
    ff_split default_split;    // what --split defaults to for this mode
    bool resident_timing;      // ff_exec_time_resident is supported
    bool pins_host;            // ff_exec_pin_host makes host<->device copies faster
    const char *transport;     // "none", "mpi", "loopback", "mpi (staged through host memory)",
                               // "nccl (device buffers)", "mpi (CUDA-aware: device buffers)"
} ff_exec_caps;

// A mode's capabilities before any executor exists (device, needs_comm, default_split).
void ff_mode_caps(ff_exec_caps *out, ff_mode m);

// Creates an executor for o->mode. Neither the model nor the weights need outlive it (it keeps a
// copy of the model table; every device keeps its own copy of the weights). Multi-rank modes: collective; every rank
// passes the same model/options; weights need only be valid on rank 0 (they are broadcast).
ff_status ff_exec_create(ff_executor **out, const ff_model *m, const ff_weights *w, const ff_exec_options *o);
void ff_exec_destroy(ff_executor *e);

// Runs layers [first, last] (inclusive) on n images. `in` holds the input of layer `first`
// (n, layers[first].in), `out` receives the output of layer `last` (n, layers[last].out); both are
// host memory. Multi-rank modes: collective; in and out are only used on rank 0 (others may pass
// NULL). Per-layer verification calls it with first == last; a full forward with 0, n_layers-1.
ff_status ff_exec_forward(ff_executor *e, float *out, const float *in, int64_t n, int first, int last);

void ff_exec_caps_of(ff_exec_caps *out, const ff_executor *e);
const ff_plan *ff_exec_plan(const ff_executor *e);
const ff_model *ff_exec_model(const ff_executor *e);
const ff_exec_options *ff_exec_options_of(const ff_executor *e);
// Turns phase tracing on or off (bench traces one separate pass); resets the trace.
void ff_exec_set_trace(ff_executor *e, bool on);
// The trace accumulated since the last reset (NULL if tracing is off).
ff_trace *ff_exec_trace(ff_executor *e);
// This process's rank and the rank count (0 and 1 for single-process modes).
int ff_exec_rank(const ff_executor *e);
int ff_exec_ranks(const ff_executor *e);

// Device-resident timing (caps.resident_timing: GPU modes): `iters` whole forwards of n images on
// the input already resident on the device (the last whole-model forward's, same n), without host
// copies. Several ranks (collective): batch split — each rank's images on its own GPU, outputs
// gathered on rank 0's GPU (what PyTorch's data-parallel figure measures); rows — the batch on
// rank 0's GPU, scattered, halo-exchanged and collected there; each replay from a barrier;
// ms_out (iters) receives each. FF_ERR_INPUT "not supported" elsewhere.
ff_status ff_exec_time_resident(ff_executor *e, int64_t n, int iters, double *ms_out);
// The output of the last resident replay (host memory, (n, classes)); FF_ERR_INPUT where unsupported.
ff_status ff_exec_resident_output(ff_executor *e, float *out, int64_t n);
// Page-locks a host buffer the caller will pass to forward (caps.pins_host; FF_OK no-op elsewhere);
// unpin before freeing it.
ff_status ff_exec_pin_host(ff_executor *e, void *p, size_t bytes);
void ff_exec_unpin_host(ff_executor *e, void *p);

// The executor's parts, for the trainer (train.h), which runs its step on them: the device, and the
// communicator bound to the device's memory (NULL in single-process modes): host MPI (mpi), staged
// through pinned host memory (hybrid), NCCL, CUDA IPC or a CUDA-aware MPI (direct).
struct ff_device;
struct ff_device *ff_exec_device(ff_executor *e);
struct ff_comm *ff_exec_comm(ff_executor *e);

// The fault hook shared by every mode: perturbs x[0] so that any check fails (+1 + 2|x|, i.e.
// far beyond any tolerance the verifier uses, and changes exact-match layers too).
float ff_fault_value(float x);

#ifdef __cplusplus
}
#endif
