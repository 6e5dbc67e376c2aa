// The check runner (golden/README.md): runs every verification check of one configuration through
// the executor interface and returns one row per check. `fivefold verify` prints the rows; `bench`
// calls ff_verify_run as its gate with exactly the configuration it will time.
//
// Checks, each a row:
//   weights      the weights the mode gets have the digests the golden records
//   <layer>      per layer in isolation: ff_exec_forward(e, out, golden in_f32 of L, n, L, L)
//                compared by the layer's rule (tolerance.h); exact layers must also have the
//                golden's own digest; every row's digest is compared with the one recorded for
//                the plan's digest class (/expected/<class>/<layer>) when the whole golden batch
//                runs. The comparison rule of a conv layer (direct or Winograd F(m x m, r x r)) and
//                the digest class both come from the executor's plan (ff_exec_plan): a class the
//                golden has no record of is compared by tolerance alone ("digest: not compared"),
//                never reported as a digest mismatch
//   end-to-end-logits  forward(0, logits layer): within the propagated bound of the float64 chain;
//                top-1/top-5 equal to PyTorch's up to ties
//   end-to-end-output  forward(0, last): the model output within its propagated bound
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "fivefold/executor.h"
#include "fivefold/golden.h"
#include "fivefold/tolerance.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char *model;          // "alexnet", "mnist-cnn"
    ff_exec_options exec;       // mode, split, plan options (algorithms, backend, precision), fault_layer
                                // (--inject-fault), comm; max_batch is set by the runner
    int64_t batch;              // golden images to use (first `batch`); 0: all
    const char *golden;         // NULL: ff_golden_default_path(model)
    bool trust;                 // accept a golden not listed in the manifest
    const char *manifest;       // NULL: the default manifest for the golden's path
    const char *filter;         // POSIX extended regex matched against each case string; NULL: all
    bool record;                // write this run's digests into /expected/<the plan's class> (ff_golden_record):
                                // refused unless every row passes or fails only on its recorded digest
                                // (a deliberate change of the reference's bits); those rows then pass
    int ranks;                  // for the case strings when exec.comm is NULL (1)
    FILE *progress;             // rows are printed here as they are made (NULL: silent)
    int64_t max_batch;          // the executor's capacity: at least the golden batch (0: exactly that)
    struct ff_executor **keep;  // non-NULL: the verified executor is handed over here instead of
                                // destroyed (the benchmark gate times the very executor it checked),
                                // and the report keeps the golden input (rank 0)
} ff_verify_config;

void ff_verify_config_default(ff_verify_config *c);

typedef struct {
    char case_str[384];       // "alexnet serial conv2(K=256,R=5,s=1,p=2,N=2,P=1,split=none)"
    char check[24];           // "weights", "layer", "end-to-end-logits", "end-to-end-output"
    int layer;                // layer index, -1 for weights and end-to-end rows
    ff_tol_result tol;        // the deciding figures (dot layers: the rigorous bound)
    ff_tol_stat_result stat;  // dot layers: the statistical rule (stat.applied false elsewhere)
    uint64_t digest;          // FNV-1a of our output; 0: the row has no output of its own (none printed)
    int digest_state;         // 0: nothing to compare, 1: equals the recorded one, -1: differs from it,
                              // 2: equals the single-process run's computed in the same run (a
                              // multi-rank mode on a golden without recorded digests of its class,
                              // or a partial batch), -2: differs from it
    char digest_ref[8];       // digest_state +-2: that single-process mode ("serial", "cuda")
    uint64_t expected_digest;
    bool pass;
    bool digest_only;  // failed only because the digest differs from the recorded one
                       // (values within tolerance): what --record may accept
    char note[320];    // why it failed, ties, bound figures
} ff_verify_row;

typedef struct {
    ff_verify_row *rows;
    int n_rows, cap;
    int passed, failed;
    bool pass;               // every row passed (and at least one ran)
    uint64_t output_digest;  // digest of the end-to-end output (0 when that row did not run)
    uint64_t logits_digest;
    int64_t batch;  // images used
    int recorded;   // digests changed by --record
    char golden_path[1024];
    char golden_sha256[65];
    char digest_class[FF_DIGEST_CLASS_MAX];  // the plan's ("cpu", "gpu", "gpu-direct", ...); "" for none
                                             // (vendor backend, tf32: judged by tolerance only)
    bool class_recorded;                     // the golden holds a record of digest_class
    int rank, ranks;
    float *input;     // config.keep: the golden batch's input on rank 0, (input_n, model input)
    int64_t input_n;  // config.keep: the golden's image count (every rank)
} ff_verify_report;

// Runs the checks. Returns FF_OK when the checks ran (pass/fail is in the report); an error status
// when they could not run (bad configuration, golden refused, executor error). Collective for
// multi-rank modes; the rows are meaningful on rank 0 (other ranks get rows with no figures).
ff_status ff_verify_run(ff_verify_report *rep, const ff_verify_config *cfg);
void ff_verify_report_free(ff_verify_report *rep);

// The checks of exactly the configuration `bench` times: the model, the executor options (mode,
// split, plan options, fault layer, comm) and the golden; batch 0: the whole golden batch.
ff_status ff_verify_gate(ff_verify_report *rep, const char *model, const ff_exec_options *exec, int64_t batch,
                         const char *golden);

void ff_verify_print_row(FILE *out, const ff_verify_row *r);
void ff_verify_print_summary(FILE *out, const ff_verify_report *rep);  // "N passed, M failed"
ff_status ff_verify_write_json(const ff_verify_report *rep, const ff_verify_config *cfg, const char *path);

#ifdef __cplusplus
}
#endif
