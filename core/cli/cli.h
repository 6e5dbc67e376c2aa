// Shared pieces of the `fivefold` command front end: the only place that turns an ff_status into
// an exit code, and (under MPI) into MPI_Abort so that a failing rank ends the job, never hangs it.
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "fivefold/comm.h"
#include "fivefold/executor.h"
#include "fivefold/model.h"
#include "fivefold/status.h"
#include "fivefold/weights.h"

// One subcommand: `fivefold NAME args...`; argv[0] is NAME.
typedef struct {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
} ff_command;

int ff_cmd_info(int argc, char **argv);
int ff_cmd_infer(int argc, char **argv);
int ff_cmd_verify(int argc, char **argv);
int ff_cmd_bench(int argc, char **argv);
int ff_cmd_train(int argc, char **argv);
// `fivefold bench --loader ...` (core/cli/loader_bench.c): argv as bench gets it; "--loader" is skipped.
int ff_loader_bench(int argc, char **argv);

// Largest batch any command accepts: beyond this the activations alone exceed what a machine of
// this project's size (24-139 GiB) holds for AlexNet (2.3 MB per image per buffer).
#define FF_CLI_MAX_BATCH 8192

// Prints "fivefold <cmd>: error: <message>" (rank 0, or every rank for MPI errors) and returns the
// exit code for st. Under MPI with more than one rank, calls MPI_Abort with that code.
int ff_cli_fail(const char *cmd, ff_status st);
// Bad usage: prints the message and "try 'fivefold <cmd> --help'" and returns FF_EXIT_USAGE
// (aborting the MPI job when several ranks run).
int ff_cli_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// Parses an integer flag value in [lo, hi]; FF_ERR_INPUT naming the flag and range otherwise.
ff_status ff_cli_parse_i64(int64_t *out, const char *flag, const char *s, int64_t lo, int64_t hi);
ff_status ff_cli_parse_u64(uint64_t *out, const char *flag, const char *s);

// MPI: initialises once (MPI_THREAD_FUNNELED) and wraps MPI_COMM_WORLD in an ff_comm.
ff_status ff_cli_mpi_comm(ff_comm **out);
int ff_cli_rank(void);   // 0 when MPI is not initialised
int ff_cli_ranks(void);  // 1 when MPI is not initialised
void ff_cli_mpi_finalize(void);

// Common setup of infer/verify/bench/train: model, weights (generator seed or HDF5 file) on rank 0.
ff_status ff_cli_load_weights(ff_weights *wt, const ff_model *m, const char *path, uint64_t seed);

// Executor options from the flag strings shared by infer, verify and bench (NULL = not given):
// --mode (default serial), --split (default batch for multi-rank modes), --backend own|vendor,
// --precision fp32|tf32, --inject-fault LAYER (a layer name of m), --trace.
ff_status ff_cli_exec_options(ff_exec_options *o, const ff_model *m, const char *mode, const char *split,
                              const char *backend, const char *precision, const char *fault, bool trace);
