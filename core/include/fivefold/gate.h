// The benchmark gate (docs/ARCHITECTURE.md §8): before anything is timed, the verification checks for exactly the
// configuration to be timed must pass, and the batch to be timed must reproduce the verified
// outputs bit for bit. Then the gate hands over a ready executor with that batch's input.
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "fivefold/executor.h"
#include "fivefold/weights.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const ff_model *model;
    ff_exec_options opt;  // mode, split, backend, precision, fault hook, comm
    int64_t batch;        // the batch size that will be timed
    const char *golden;   // golden file; NULL = golden/data/<model>.h5 of the source tree
    bool trust;           // accept a golden not listed in golden/MANIFEST.sha256
} ff_gate_config;

typedef struct {
    bool passed;
    int checks, failed;
    char first_failure[1024];  // the case string and figures of the first failed check
    char golden[1024];         // the golden file the checks used
    uint64_t batch_digest;     // digest of the gated batch-N output (the timed runs must equal it)
} ff_gate_result;

// What the gate hands to the timer (valid until ff_gate_release).
typedef struct {
    ff_executor *exec;  // the executor the verifier checked (ff_verify_config.keep), sized for batch
    float *x;           // (batch, input): golden image i % G at position i (rank 0)
    float *y;           // (batch, classes) scratch (rank 0)
} ff_gate_state;

// Collective in multi-rank modes. Returns a status only for errors that prevent judging (missing
// golden, out of memory); a failed check is r->passed == false with FF_OK.
ff_status ff_gate_run(ff_gate_result *r, ff_gate_state *s, const ff_gate_config *c);
void ff_gate_release(ff_gate_state *s);

#ifdef __cplusplus
}
#endif
