// Phase timers (docs/ARCHITECTURE.md §8): per layer, compute / host->device / device->host / communication /
// host work, plus bytes moved. Executors fill one when asked; infer --trace and bench print it.
#pragma once
#include <stdint.h>

#include "fivefold/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { FF_PHASE_COMPUTE, FF_PHASE_H2D, FF_PHASE_D2H, FF_PHASE_COMM, FF_PHASE_HOST, FF_N_PHASES } ff_phase;

typedef struct {
    double seconds[FF_MAX_LAYERS + 1][FF_N_PHASES];  // last row: outside any layer (scatter, gather)
    int64_t comm_bytes[FF_MAX_LAYERS + 1];           // bytes this rank sent
    int64_t halo_bytes[FF_MAX_LAYERS + 1];           // the part sent point-to-point (halo rows)
    double bus_bytes[FF_MAX_LAYERS + 1];             // nccl-tests' bus bytes (comm.h): / comm time = busbw
    int64_t calls;                                   // forwards accumulated
} ff_trace;

const char *ff_phase_name(ff_phase p);
double ff_now(void);  // monotonic seconds
void ff_trace_reset(ff_trace *t);
// Sum of a phase over layers.
double ff_trace_phase_total(const ff_trace *t, ff_phase p);

#ifdef __cplusplus
}
#endif
