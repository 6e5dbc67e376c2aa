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
// before MPI_Init (argument errors), MPI is started for the agreement (Open MPI's launcher kills
// the job when any process exits non-zero, so rank 0 must have printed before anyone exits).
int ff_cli_fail(const char *cmd, ff_status st);
// Same, for a rank that stops because another rank failed (it prints nothing of its own).
int ff_cli_fail_quiet(const char *cmd, ff_status st);
// Bad usage: the message and "try 'fivefold <cmd> --help'", delivered as ff_cli_fail does;
// returns FF_EXIT_USAGE.
int ff_cli_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// A command line that names no known command: "fivefold: MESSAGE", said once under mpiexec too.
// Returns FF_EXIT_USAGE.
int ff_cli_fail_command_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
// Under mpiexec (several processes): starts MPI if needed and waits for every process, so that no
// process exits before rank 0 has printed what it had to say. One process: returns at once.
void ff_cli_launcher_barrier(void);

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

// The plan flags of every command that builds an executor or prints a plan (infer, verify, bench,
// info): how each layer is computed (plan.h). NULL: not given, the default applies.
typedef struct {
    const char *conv;        // --conv direct|winograd
    const char *winograd_m;  // --winograd-m 2|4
    const char *s2d;         // --s2d on|off
    const char *backend;     // --backend own|vendor
    const char *precision;   // --precision fp32|tf32|tf32x3
    const char *transport;   // --transport nccl|mpi|ipc|auto (direct mode)
    // The communication flags of infer, verify and bench (FF_CLI_EXEC_OPTIONS below):
    const char *comm_timeout;  // --comm-timeout S
    const char *inject_crash;  // --inject-crash RANK:LAYER (test hook)
    const char *inject_hang;   // --inject-hang RANK:LAYER (test hook)
} ff_cli_plan_args;

// getopt_long values of those flags (above every character a command uses for its own flags), and
// the option table entries: put FF_CLI_PLAN_OPTIONS in a command's table and hand every value to
// ff_cli_plan_arg before the command's own switch.
enum {
    FF_CLI_OPT_CONV = 0x1000,
    FF_CLI_OPT_WINOGRAD_M,
    FF_CLI_OPT_S2D,
    FF_CLI_OPT_BACKEND,
    FF_CLI_OPT_PRECISION,
    FF_CLI_OPT_TRANSPORT
};
// clang-format off
#define FF_CLI_PLAN_OPTIONS                                                                       \
    {"conv", required_argument, 0, FF_CLI_OPT_CONV},                                              \
    {"winograd-m", required_argument, 0, FF_CLI_OPT_WINOGRAD_M},                                  \
    {"s2d", required_argument, 0, FF_CLI_OPT_S2D},                                                \
    {"backend", required_argument, 0, FF_CLI_OPT_BACKEND},                                        \
    {"precision", required_argument, 0, FF_CLI_OPT_PRECISION},                                    \
    {"transport", required_argument, 0, FF_CLI_OPT_TRANSPORT}
// clang-format on
// Stores the value of getopt_long's answer c if c is one of the plan flags (true); false otherwise.
bool ff_cli_plan_arg(ff_cli_plan_args *a, int c, const char *value);
// The synopsis and the --help lines of the plan flags (every command that takes them prints both).
#define FF_CLI_PLAN_USAGE                                                                 \
    "[--conv direct|winograd] [--winograd-m 2|4] [--s2d on|off] [--backend own|vendor]\n" \
    "                      [--precision fp32|tf32|tf32x3] [--transport nccl|mpi|ipc|auto]"
#define FF_CLI_PLAN_HELP                                                                                           \
    "How each layer is computed (the plan; `fivefold info --mode M` prints it). Each GPU choice makes its own\n"   \
    "digest class (gpu for the defaults; gpu-direct, gpu-wg2, gpu-wg4-nos2d, ...), compared with its own\n"        \
    "record in a golden or, where it has none, by tolerance alone:\n"                                              \
    "  --conv A          GPU conv algorithm: winograd (default: Winograd for the 3x3/5x5 convs that have one,\n"   \
    "                    direct for the others) or direct; the cpu device always runs direct\n"                    \
    "  --winograd-m M    Winograd output tile: F(MxM, 3x3 or 5x5) with M = 4 (default) or 2\n"                     \
    "  --s2d on|off      strided convs (AlexNet's conv1) as Winograd through space-to-depth: on (default; such\n"  \
    "                    a layer runs whole, never in row bands) or off (direct)\n"                                \
    "  --backend B       own (default) or vendor (cuDNN/cuBLAS in GPU modes: no digest class, tolerance only)\n"   \
    "  --precision P     fp32 (default); tf32 (GPU modes, with --backend vendor); tf32x3 (GPU modes, --conv\n"     \
    "                    direct: own convs on tensor cores, each factor split in two TF32 halves, fp32-class\n"    \
    "                    error; class gpu-direct-tf32x3)\n"                                                        \
    "  The environment sets the defaults of the first three: FF_CUDA_CONV=direct|winograd, FF_WINOGRAD_M=2|4,\n"   \
    "  FF_CUDA_S2D=0|1; a flag always wins.\n"                                                                     \
    "  --transport T     direct mode: how device buffers travel between ranks: nccl (one GPU per rank; the\n"      \
    "                    NCCL communicator is bootstrapped over MPI), mpi (only with a CUDA-aware MPI: an error\n" \
    "                    names the library otherwise), ipc (CUDA IPC: ranks of one node, GPUs may be shared) or\n" \
    "                    auto (default: nccl when every rank has its own GPU, else ipc on one node, else mpi)\n"

// The communication flags of the commands that build an executor (infer, verify, bench; not info):
// put FF_CLI_EXEC_OPTIONS in the table beside FF_CLI_PLAN_OPTIONS (ff_cli_plan_arg stores their
// values in the same ff_cli_plan_args), print FF_CLI_EXEC_USAGE and FF_CLI_EXEC_HELP.
enum { FF_CLI_OPT_COMM_TIMEOUT = 0x1100, FF_CLI_OPT_INJECT_CRASH, FF_CLI_OPT_INJECT_HANG };
// clang-format off
#define FF_CLI_EXEC_OPTIONS                                                                       \
    {"comm-timeout", required_argument, 0, FF_CLI_OPT_COMM_TIMEOUT},                              \
    {"inject-crash", required_argument, 0, FF_CLI_OPT_INJECT_CRASH},                              \
    {"inject-hang", required_argument, 0, FF_CLI_OPT_INJECT_HANG}
// clang-format on
#define FF_CLI_EXEC_USAGE "[--comm-timeout S] [--inject-crash RANK:LAYER | --inject-hang RANK:LAYER]"
#define FF_CLI_EXEC_HELP                                                                                        \
    "Multi-rank modes never hang on a lost rank: a rank killed mid-exchange ends the job at once (the\n"        \
    "launcher sees it die), and a rank that stops answering is named by the others after the deadline:\n"       \
    "  --comm-timeout S  seconds a rank waits for a message or collective that makes no progress before it\n"   \
    "                    ends the job naming whom it waited for (default 30; 0: wait for ever)\n"               \
    "  --inject-crash R:L  test hook: rank R kills itself (SIGKILL) just before the communication of layer L\n" \
    "                    (a name or index; a layer with no exchange of its own: the next one), the other\n"     \
    "                    ranks inside or entering it\n"                                                         \
    "  --inject-hang R:L test hook: rank R stops answering there instead (sleeps for ever; the others'\n"       \
    "                    --comm-timeout must end the job)\n"

// The plan options from those flags; what is not given comes from ff_plan_options_default (the
// FF_CUDA_* variables). FF_ERR_INPUT naming the flag (or variable), its value and what was expected.
ff_status ff_cli_plan_options(ff_plan_options *o, const ff_cli_plan_args *a);

// Executor options from the flag strings shared by infer, verify and bench (NULL = not given):
// --mode (default serial), --split (default batch for multi-rank modes), the plan flags (plan may
// be NULL: all defaults) and the communication flags (--comm-timeout, --inject-crash,
// --inject-hang: multi-rank modes only; the rank is checked against the job's size by
// ff_exec_create), --inject-fault LAYER (a layer name of m), --trace.
ff_status ff_cli_exec_options(ff_exec_options *o, const ff_model *m, const char *mode, const char *split,
                              const ff_cli_plan_args *plan, const char *fault, bool trace);
