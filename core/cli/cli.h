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

// --verbose (every subcommand): error messages also name the source location that raised them.
extern bool ff_cli_verbose;

// How long failing ranks wait to learn whether every rank failed alike (see ff_cli_fail).
#define FF_CLI_AGREE_S 2.0

// Prints "fivefold <cmd>: error (<status>): <message>" and returns the exit code for st; the source
// location is added for internal failures (exit 1) and with --verbose. Several MPI ranks: if every
// rank fails within FF_CLI_AGREE_S, rank 0 prints once (other ranks only a message of their own
// that differs) and all return the largest code for main to finalise MPI; otherwise this rank
// prints its message with its rank, flushes, and calls MPI_Abort with the code. Under mpiexec
// before MPI_Init (argument errors), only the launcher's rank 0 prints.
int ff_cli_fail(const char *cmd, ff_status st);
// Same, for a rank that stops because another rank failed (it prints nothing of its own).
int ff_cli_fail_quiet(const char *cmd, ff_status st);
// Bad usage: the message and "try 'fivefold <cmd> --help'", delivered as ff_cli_fail does;
// returns FF_EXIT_USAGE.
int ff_cli_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// A flag's value: FF_ERR_INPUT if empty or if it is itself a flag ("--checkpoint-dir needs a
// value, got the flag --resume"): the value was forgotten and the next flag taken in its place.
ff_status ff_cli_value(const char *flag, const char *s);
// getopt_long's value for opts[li] (a long option that takes a value): ff_cli_value("--name", arg).
struct option;
ff_status ff_cli_optarg(const struct option *opts, int li, const char *arg);
// Parses a decimal integer flag value in [lo, hi] (overflow included); FF_ERR_INPUT naming the
// flag, the value and the range otherwise.
ff_status ff_cli_parse_i64(int64_t *out, const char *flag, const char *s, int64_t lo, int64_t hi);
// Seeds: decimal (010 is ten), or hexadecimal with a 0x prefix; never octal; at most 2^64 - 1.
ff_status ff_cli_parse_seed(uint64_t *out, const char *flag, const char *s);
ff_status ff_cli_parse_u64(uint64_t *out, const char *flag, const char *s);  // = ff_cli_parse_seed
// A finite float in the interval lo..hi, each end open or closed as given (e.g. lr in (0, 10]).
ff_status ff_cli_parse_f32(float *out, const char *flag, const char *s, double lo, bool lo_open, double hi,
                           bool hi_open);

// MPI: initialises once (MPI_THREAD_FUNNELED) and wraps MPI_COMM_WORLD in an ff_comm.
ff_status ff_cli_mpi_comm(ff_comm **out);
int ff_cli_rank(void);  // 0 when MPI is not initialised
// This process's rank as the launcher (mpiexec) set it in the environment, even before MPI_Init;
// 0 when not launched by one. Messages printed before MPI starts come from launcher rank 0 only.
int ff_cli_launcher_rank(void);
int ff_cli_ranks(void);  // 1 when MPI is not initialised
void ff_cli_mpi_finalize(void);

// Common setup of infer/verify/bench/train: model, weights (generator seed or HDF5 file) on rank 0.
ff_status ff_cli_load_weights(ff_weights *wt, const ff_model *m, const char *path, uint64_t seed);

// Executor options from the flag strings shared by infer, verify and bench (NULL = not given):
// --mode (default serial), --split (default batch for multi-rank modes), --backend own|vendor,
// --precision fp32|tf32, --inject-fault LAYER (a layer name of m), --trace.
ff_status ff_cli_exec_options(ff_exec_options *o, const ff_model *m, const char *mode, const char *split,
                              const char *backend, const char *precision, const char *fault, bool trace);
