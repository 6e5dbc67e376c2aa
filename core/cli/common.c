// Front-end helpers shared by every subcommand (see cli.h).
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <mpi.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "fivefold/lost_peers.h"

static int mpi_started(void) {
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    return init && !fin;
}

int ff_cli_rank(void) {
    int r = 0;
    if (mpi_started()) MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

int ff_cli_ranks(void) {
    int p = 1;
    if (mpi_started()) MPI_Comm_size(MPI_COMM_WORLD, &p);
    return p;
}

bool ff_cli_verbose = false;

// Under mpiexec, before MPI_Init: the launcher's rank and size from its environment (MPICH/Hydra
// and Slurm's PMI set PMI_*, Open MPI sets OMPI_COMM_WORLD_*); -1 when not launched that way.
static int env_int(const char *a, const char *b) {
    const char *v = getenv(a);
    if (!v || !*v) v = getenv(b);
    if (!v || !*v) return -1;
    char *end;
    long x = strtol(v, &end, 10);
    return *end || x < 0 || x > (1 << 24) ? -1 : (int)x;
}

int ff_cli_launcher_rank(void) {
    int r = env_int("PMI_RANK", "OMPI_COMM_WORLD_RANK");
    return r < 0 ? 0 : r;
}

// Used only by deliver's agreement, so its collectives never meet an executor's messages half-way.
static MPI_Comm fail_comm = MPI_COMM_NULL;

static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t text_hash(const char *s) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    return h;
}

static volatile sig_atomic_t alarm_code = FF_EXIT_FAILURE;
static void alarm_exit(int sig) {
    (void)sig;
    _exit(alarm_code);
}

// Test hook FF_TEST_FAIL_DELAY=RANK:MS: that rank reaches its failure MS milliseconds late (a
// slow file system, a slow node), the timing that used to lose rank 0's message.
static void test_delay(int rank) {
    const char *h = getenv("FF_TEST_FAIL_DELAY");
    int r, ms;
    if (h && sscanf(h, "%d:%d", &r, &ms) == 2 && r == rank && ms > 0 && ms < 60000) {
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
}

static bool open_mpi(void) {
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    return MPI_Get_library_version(v, &len) == MPI_SUCCESS && strstr(v, "Open MPI") != NULL;
}

// Under a launcher, a failure found before MPI_Init (a bad flag, an unreadable file: every process
// parses the same arguments) still goes through the agreement below: MPI is started for it. Not
// doing so lost the message about once in ten runs under Open MPI, whose mpirun kills the job as
// soon as one process exits non-zero, rank 0 with its message unprinted (Hydra waits for all).
static void start_fail_comm(void) {
    int init = 0, fin = 0, provided;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (fin) return;
    if (!init && MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) return;
    if (fail_comm == MPI_COMM_NULL && MPI_Comm_dup(MPI_COMM_WORLD, &fail_comm) != MPI_SUCCESS)
        fail_comm = MPI_COMM_NULL;
}

// Delivers one failure: `body` is the text after "fivefold <cmd>: "; `quiet` marks a rank that
// only follows another rank's failure (it has nothing of its own to say). Returns the exit code.
//
// Several ranks: first, within FF_CLI_AGREE_S, the failing ranks find out whether every rank
// failed (a non-blocking all-reduce on a communicator of its own: a rank that is not failing never
// joins, and the others stop waiting at the deadline). If every rank failed, rank 0 prints its
// message once, every other rank prints only a message that differs from rank 0's, and all return
// the largest code (main finalises MPI: nobody aborts, so nothing is cut off). Otherwise the
// failure is this rank's own: it prints with its rank, flushes, and only then calls MPI_Abort
// (under Open MPI: exits non-zero), so the job ends within seconds and the message is out before
// anything can kill the process.
static int deliver(const char *cmd_name, int code, const char *body, bool quiet) {
    // "fivefold infer: ...", or "fivefold: ..." for the command line as a whole (cmd_name NULL)
    char cmd[64] = "";
    snprintf(cmd, sizeof cmd, "%s%s", cmd_name ? " " : "", cmd_name ? cmd_name : "");
    const int env_size = env_int("PMI_SIZE", "OMPI_COMM_WORLD_SIZE");
    test_delay(ff_cli_launcher_rank());
    if (env_size > 1) start_fail_comm();  // a failure before MPI_Init under mpiexec: agree through MPI
    if (!mpi_started() || fail_comm == MPI_COMM_NULL || ff_cli_ranks() == 1) {
        // One process, or MPI would not start: under a launcher every process parses the same
        // arguments and fails alike, and the launcher's rank 0 speaks for all. Internal failures
        // may be a process's own: all print.
        int env_rank = ff_cli_launcher_rank();
        if (env_size > 1 && env_rank > 0) {
            if (code == FF_EXIT_FAILURE && !quiet) fprintf(stderr, "fivefold%s: rank %d: %s\n", cmd, env_rank, body);
        } else if (!quiet) {
            fprintf(stderr, "fivefold%s: %s\n", cmd, body);
        }
        fflush(stdout);
        fflush(stderr);
        return code;
    }
    const int rank = ff_cli_rank();
    int all_max = code, done = 0;
    MPI_Request req;
    if (MPI_Iallreduce(&code, &all_max, 1, MPI_INT, MPI_MAX, fail_comm, &req) == MPI_SUCCESS) {
        const double deadline = mono_s() + FF_CLI_AGREE_S;
        const struct timespec tick = {0, 1000000L};
        while (MPI_Test(&req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done && mono_s() < deadline)
            nanosleep(&tick, NULL);
    }
    if (done) {  // every rank failed: each one is here
        uint64_t mine = quiet ? 0 : text_hash(body), first = mine;
        MPI_Bcast(&first, 1, MPI_UINT64_T, 0, fail_comm);
        if (rank == 0)
            fprintf(stderr, "fivefold%s: %s\n", cmd, quiet ? "failed (no message)" : body);
        else if (!quiet && mine != first)
            fprintf(stderr, "fivefold%s: rank %d: %s\n", cmd, rank, body);
        fflush(stdout);
        fflush(stderr);
        // MPI_Finalize (in main) should follow at once; should it hang, end with the code anyway.
        alarm_code = all_max;
        signal(SIGALRM, alarm_exit);
        alarm(10);
        return all_max;
    }
    // This rank's own failure (or some rank is stuck): say it, then end the job.
    if (quiet)
        fprintf(stderr, "fivefold%s: rank %d: stopping: another rank failed (exit %d)\n", cmd, rank, code);
    else
        fprintf(stderr, "fivefold%s: rank %d: %s\n", cmd, rank, body);
    fflush(stdout);
    fflush(stderr);
    // The launcher forwards our output and learns of the abort on different channels: MPICH's
    // proxy, told of the abort first, could kill and exit with the message still in its pipe (seen
    // about once in 40 runs). A moment to forward it first.
    const struct timespec forward = {0, 200000000L};
    nanosleep(&forward, NULL);
    // A peer on this node that the deadline found silent is ended first (lost_peers.h): the
    // launcher then meets a rank that died, which it handles at once, and ends this one too; an
    // abort alone once left the silent rank running (Hydra's proxy died in its cleanup) and the
    // job hung. If the launcher has not ended this process within 2 s, the abort below follows.
    // A peer that another rank ended first counts the same: the launcher is ending the job.
    char ended[512];
    const int noted = ff_lost_peers_count();
    if (ff_lost_peers_end(ended, sizeof ended) > 0) {
        fprintf(stderr, "fivefold%s: rank %d: ended %s on this node (silent past the deadline), so that the job ends\n",
                cmd, rank, ended);
        fflush(stderr);
    }
    if (noted > 0) {
        const struct timespec launcher = {2, 0};
        nanosleep(&launcher, NULL);
    }
    // Open MPI 4.1's mpirun can itself crash or hang (seen once in 30 runs on a loaded machine,
    // every rank already dead) when MPI_Abort's report reaches it from a process it is killing
    // ("ORTE_ERROR_LOG ... show_help.c"). A process that exits non-zero ends an Open MPI job just
    // the same ("per user-direction, the job has been aborted"), without that report.
    if (open_mpi()) _exit(code);
    MPI_Abort(MPI_COMM_WORLD, code);
    return code;
}

int ff_cli_fail(const char *cmd, ff_status st) {
    int code = ff_exit_code(st);
    const char *msg = ff_last_error(), *loc = ff_last_error_location();
    char body[3072];
    // Source locations help whoever debugs an internal failure; a user who gave a bad value needs
    // the value, the flag and what was expected, which the message already says.
    if ((ff_cli_verbose || code == FF_EXIT_FAILURE) && *loc)
        snprintf(body, sizeof body, "error (%s) at %s: %s", ff_status_name(st), loc, msg);
    else
        snprintf(body, sizeof body, "error (%s): %s", ff_status_name(st), msg);
    if (st == FF_ERR_NO_CUDA) {
        size_t k = strlen(body);
        snprintf(body + k, sizeof body - k, "\nfivefold %s: this machine cannot run the requested GPU mode (exit %d)",
                 cmd, code);
    }
    return deliver(cmd, code, body, false);
}

int ff_cli_fail_quiet(const char *cmd, ff_status st) {
    return deliver(cmd, ff_exit_code(st), "", true);
}

int ff_cli_usage(const char *cmd, const char *fmt, ...) {
    char body[3072];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    if (k < 0) k = 0;
    if ((size_t)k < sizeof body) snprintf(body + k, sizeof body - (size_t)k, "\ntry 'fivefold %s --help'", cmd);
    return deliver(cmd, FF_EXIT_USAGE, body, false);
}

void ff_cli_launcher_barrier(void) {
    if (env_int("PMI_SIZE", "OMPI_COMM_WORLD_SIZE") <= 1) return;
    start_fail_comm();
    if (mpi_started() && fail_comm != MPI_COMM_NULL) MPI_Barrier(fail_comm);
}

int ff_cli_fail_command_line(const char *fmt, ...) {
    char body[3072];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    return deliver(NULL, FF_EXIT_USAGE, body, false);
}

ff_status ff_cli_value(const char *flag, const char *s) {
    if (!s || !*s) return FF_FAIL(FF_ERR_INPUT, "%s needs a value, got an empty string", flag);
    // getopt_long (and train's parser) take the next word as the value whatever it is: a value
    // that is itself a flag means the real value was forgotten.
    if (s[0] == '-' && s[1] == '-') return FF_FAIL(FF_ERR_INPUT, "%s needs a value, got the flag %s", flag, s);
    return FF_OK;
}

ff_status ff_cli_optarg(const struct option *opts, int li, const char *arg) {
    if (opts[li].has_arg != required_argument) return FF_OK;
    char flag[80];
    snprintf(flag, sizeof flag, "--%s", opts[li].name);
    return ff_cli_value(flag, arg);
}

ff_status ff_cli_parse_i64(int64_t *out, const char *flag, const char *s, int64_t lo, int64_t hi) {
    FF_TRY(ff_cli_value(flag, s));
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end)
        return FF_FAIL(FF_ERR_INPUT, "%s '%s': expected an integer in %lld..%lld", flag, s, (long long)lo,
                       (long long)hi);
    if (errno == ERANGE || v < lo || v > hi)
        return FF_FAIL(FF_ERR_INPUT, "%s %s: expected %lld..%lld", flag, s, (long long)lo, (long long)hi);
    *out = v;
    return FF_OK;
}

ff_status ff_cli_parse_seed(uint64_t *out, const char *flag, const char *s) {
    FF_TRY(ff_cli_value(flag, s));
    // Decimal, or hexadecimal with 0x; never octal (strtoull's base 0 would read 010 as 8).
    const bool hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
    const char *digits = hex ? s + 2 : s;
    bool ok = *digits != 0;
    for (const char *p = digits; ok && *p; p++) ok = hex ? isxdigit((unsigned char)*p) != 0 : (*p >= '0' && *p <= '9');
    if (!ok)
        return FF_FAIL(FF_ERR_INPUT, "%s '%s': expected a decimal integer in 0..%llu (or hexadecimal with 0x)", flag, s,
                       (unsigned long long)UINT64_MAX);
    errno = 0;
    char *end;
    unsigned long long v = strtoull(digits, &end, hex ? 16 : 10);
    if (errno == ERANGE || *end)
        return FF_FAIL(FF_ERR_INPUT, "%s %s: expected at most %llu", flag, s, (unsigned long long)UINT64_MAX);
    *out = v;
    return FF_OK;
}

ff_status ff_cli_parse_f32(float *out, const char *flag, const char *s, double lo, bool lo_open, double hi,
                           bool hi_open) {
    FF_TRY(ff_cli_value(flag, s));
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end)
        return FF_FAIL(FF_ERR_INPUT, "%s '%s': expected a number in %c%g, %g%c", flag, s, lo_open ? '(' : '[', lo, hi,
                       hi_open ? ')' : ']');
    if (!isfinite(v) || !isfinite((float)v))  // inf, nan, or beyond float (1e39)
        return FF_FAIL(FF_ERR_INPUT, "%s %s: not a finite number: expected a number in %c%g, %g%c", flag, s,
                       lo_open ? '(' : '[', lo, hi, hi_open ? ')' : ']');
    if ((lo_open ? !(v > lo) : !(v >= lo)) || (hi_open ? !(v < hi) : !(v <= hi)))
        return FF_FAIL(FF_ERR_INPUT, "%s %s: expected a number in %c%g, %g%c", flag, s, lo_open ? '(' : '[', lo, hi,
                       hi_open ? ')' : ']');
    *out = (float)v;
    return FF_OK;
}

ff_status ff_cli_parse_u64(uint64_t *out, const char *flag, const char *s) {
    return ff_cli_parse_seed(out, flag, s);
}

static ff_comm *world_comm;

// --verbose under mpiexec: rank 0 prints every rank's process id and host, so that a launcher
// that reports a dead process by its pid alone (MPICH's "BAD TERMINATION ... PID 4711") names
// the rank too.
static void print_rank_map(void) {
    int P = ff_cli_ranks(), me = ff_cli_rank();
    if (P < 2) return;
    struct {
        long pid;
        char host[64];
    } mine = {(long)getpid(), ""}, *all = me == 0 ? calloc((size_t)P, sizeof mine) : NULL;
    gethostname(mine.host, sizeof mine.host - 1);
    if (MPI_Gather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, 0, fail_comm) == MPI_SUCCESS &&
        all)
        for (int r = 0; r < P; r++) fprintf(stderr, "fivefold: rank %d: pid %ld on %s\n", r, all[r].pid, all[r].host);
    fflush(stderr);
    free(all);
}

ff_status ff_cli_mpi_comm(ff_comm **out) {
    if (!mpi_started()) {
        int provided;
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
            return FF_FAIL(FF_ERR_MPI, "MPI_Init_thread failed");
    }
    if (fail_comm == MPI_COMM_NULL && MPI_Comm_dup(MPI_COMM_WORLD, &fail_comm) != MPI_SUCCESS)
        return FF_FAIL(FF_ERR_MPI, "MPI_Comm_dup of MPI_COMM_WORLD failed");
    if (!world_comm) {
        MPI_Comm w = MPI_COMM_WORLD;
        FF_TRY(ff_comm_mpi_create(&world_comm, &w));
        if (ff_cli_verbose) print_rank_map();
    }
    *out = world_comm;
    return FF_OK;
}

void ff_cli_mpi_finalize(void) {
    if (world_comm) {
        ff_comm_destroy(world_comm);
        world_comm = NULL;
    }
    if (mpi_started()) {
        if (fail_comm != MPI_COMM_NULL) MPI_Comm_free(&fail_comm);
        MPI_Finalize();
    }
}

ff_status ff_cli_load_weights(ff_weights *wt, const ff_model *m, const char *path, uint64_t seed) {
    FF_TRY(ff_weights_alloc(wt, m));
    ff_status st = FF_OK;
    int checked = 0;
    if (path)
        st = ff_weights_load_h5_checked(wt, &checked, m, path);
    else
        ff_weights_generate(wt, m, seed);
    if (st != FF_OK) {
        ff_weights_free(wt);
        return st;
    }
    if (path && ff_cli_verbose) {
        if (checked)
            fprintf(stderr, "weights file '%s': %d tensor digests checked\n", path, checked);
        else
            fprintf(stderr,
                    "weights file '%s': no recorded digests (written by an older fivefold or another tool): "
                    "loaded without an integrity check\n",
                    path);
    }
    return FF_OK;
}

bool ff_cli_plan_arg(ff_cli_plan_args *a, int c, const char *value) {
    switch (c) {
        case FF_CLI_OPT_CONV: a->conv = value; return true;
        case FF_CLI_OPT_WINOGRAD_M: a->winograd_m = value; return true;
        case FF_CLI_OPT_S2D: a->s2d = value; return true;
        case FF_CLI_OPT_BACKEND: a->backend = value; return true;
        case FF_CLI_OPT_PRECISION: a->precision = value; return true;
        case FF_CLI_OPT_TRANSPORT: a->transport = value; return true;
        case FF_CLI_OPT_COMM_TIMEOUT: a->comm_timeout = value; return true;
        case FF_CLI_OPT_INJECT_CRASH: a->inject_crash = value; return true;
        case FF_CLI_OPT_INJECT_HANG: a->inject_hang = value; return true;
        default: return false;
    }
}

ff_status ff_cli_plan_options(ff_plan_options *o, const ff_cli_plan_args *a) {
    // The defaults first: a bad FF_CUDA_* value is reported naming the variable.
    FF_TRY(ff_plan_options_default(o));
    if (!a) return FF_OK;
    if (a->conv) {
        if (!strcmp(a->conv, "direct"))
            o->conv = FF_CONV_DIRECT;
        else if (!strcmp(a->conv, "winograd"))
            o->conv = FF_CONV_WINOGRAD;
        else
            return FF_FAIL(FF_ERR_INPUT, "--conv '%s': expected direct|winograd", a->conv);
    }
    if (a->winograd_m) {
        if (!strcmp(a->winograd_m, "2") || !strcmp(a->winograd_m, "4"))
            o->winograd_m = a->winograd_m[0] - '0';
        else
            return FF_FAIL(FF_ERR_INPUT, "--winograd-m '%s': expected 2|4 (the output tile of F(m x m, r x r))",
                           a->winograd_m);
    }
    if (a->s2d) {
        if (!strcmp(a->s2d, "on"))
            o->s2d = true;
        else if (!strcmp(a->s2d, "off"))
            o->s2d = false;
        else
            return FF_FAIL(FF_ERR_INPUT, "--s2d '%s': expected on|off", a->s2d);
    }
    if (a->backend) {
        if (!strcmp(a->backend, "own"))
            o->backend = FF_BACKEND_OWN;
        else if (!strcmp(a->backend, "vendor"))
            o->backend = FF_BACKEND_VENDOR;
        else
            return FF_FAIL(FF_ERR_INPUT, "--backend '%s': expected own|vendor", a->backend);
    }
    if (a->precision) {
        if (!strcmp(a->precision, "fp32"))
            o->precision = FF_PRECISION_FP32;
        else if (!strcmp(a->precision, "tf32"))
            o->precision = FF_PRECISION_TF32;
        else if (!strcmp(a->precision, "tf32x3"))
            o->precision = FF_PRECISION_TF32X3;
        else
            return FF_FAIL(FF_ERR_INPUT, "--precision '%s': expected fp32|tf32|tf32x3", a->precision);
    }
    return FF_OK;
}

// --inject-crash / --inject-hang RANK:LAYER: the rank (checked against the job's size later, by
// ff_exec_create) and a layer of m by name or index.
static ff_status parse_crash(ff_exec_options *o, const ff_model *m, const char *flag, const char *s) {
    FF_TRY(ff_cli_value(flag, s));
    const char *colon = strchr(s, ':');
    char *end = NULL;
    errno = 0;
    long r = colon && colon != s && isdigit((unsigned char)s[0]) ? strtol(s, &end, 10) : -1;
    if (r < 0 || end != colon || errno == ERANGE || r > INT32_MAX || !colon[1])
        return FF_FAIL(FF_ERR_INPUT,
                       "%s '%s': expected RANK:LAYER, a rank number and a layer name or index (e.g. 1:conv2)", flag, s);
    const char *layer = colon + 1;
    int li = ff_model_find_layer(m, layer);
    if (li < 0 && isdigit((unsigned char)layer[0])) {
        long v = strtol(layer, &end, 10);
        if (!*end && v >= 0 && v < m->n_layers) li = (int)v;
    }
    if (li < 0) {
        char names[1024];
        size_t k = 0;
        names[0] = 0;
        for (int i = 0; i < m->n_layers && k < sizeof names; i++)
            k += (size_t)snprintf(names + k, sizeof names - k, "%s%s", i ? ", " : "", m->layers[i].name);
        return FF_FAIL(FF_ERR_INPUT, "%s %s: model %s has no layer '%s': expected a name (%s) or an index 0..%d", flag,
                       s, m->name, layer, names, m->n_layers - 1);
    }
    o->crash_rank = (int)r;
    o->crash_layer = li;
    o->crash_hang = strcmp(flag, "--inject-hang") == 0;
    // Said before it happens: a rank killed by SIGKILL says nothing, and MPICH's launcher names
    // its process id only.
    if (ff_cli_launcher_rank() == o->crash_rank) {
        char host[256] = "?";
        gethostname(host, sizeof host - 1);
        fprintf(stderr,
                "fivefold: rank %d (pid %ld on %s): test hook %s %s: this rank will %s at its first "
                "communication from layer %s on\n",
                o->crash_rank, (long)getpid(), host, flag, s,
                o->crash_hang ? "stop answering (sleep for ever)" : "kill itself (SIGKILL)", m->layers[li].name);
        fflush(stderr);
    }
    return FF_OK;
}

// --comm-timeout, --inject-crash, --inject-hang (multi-rank modes).
static ff_status comm_flags(ff_exec_options *o, const ff_model *m, const ff_cli_plan_args *a) {
    const char *given = a->comm_timeout   ? "--comm-timeout"
                        : a->inject_crash ? "--inject-crash"
                        : a->inject_hang  ? "--inject-hang"
                                          : NULL;
    if (!given) return FF_OK;
    if (!ff_mode_is_multirank(o->mode))
        return FF_FAIL(FF_ERR_INPUT,
                       "%s: mode %s runs on one process: expected a multi-rank mode (mpi, hybrid, direct)", given,
                       ff_mode_name(o->mode));
    if (a->comm_timeout) {
        const char *s = a->comm_timeout;
        FF_TRY(ff_cli_value("--comm-timeout", s));
        char *end;
        errno = 0;
        double v = strtod(s, &end);
        if (end == s || *end || !isfinite(v) || v < 0)
            return FF_FAIL(FF_ERR_INPUT, "--comm-timeout '%s': expected a number of seconds >= 0 (0: wait for ever)",
                           s);
        o->comm_timeout_s = v;
    }
    if (a->inject_crash && a->inject_hang)
        return FF_FAIL(FF_ERR_INPUT, "--inject-crash %s and --inject-hang %s: expected one of them", a->inject_crash,
                       a->inject_hang);
    if (a->inject_crash) FF_TRY(parse_crash(o, m, "--inject-crash", a->inject_crash));
    if (a->inject_hang) FF_TRY(parse_crash(o, m, "--inject-hang", a->inject_hang));
    return FF_OK;
}

ff_status ff_cli_exec_options(ff_exec_options *o, const ff_model *m, const char *mode, const char *split,
                              const ff_cli_plan_args *plan, const char *fault, bool trace) {
    ff_exec_options_default(o);
    FF_TRY(ff_mode_parse(&o->mode, mode ? mode : "serial"));
    if (split) FF_TRY(ff_split_parse(&o->split, split));
    if (!ff_mode_is_multirank(o->mode) && o->split != FF_SPLIT_NONE)
        return FF_FAIL(FF_ERR_INPUT, "--split %s: mode %s runs on one process and takes no split", split,
                       ff_mode_name(o->mode));
    if (ff_mode_is_multirank(o->mode) && o->split == FF_SPLIT_NONE) o->split = FF_SPLIT_BATCH;
    FF_TRY(ff_cli_plan_options(&o->plan, plan));
    if (plan && plan->transport) {
        FF_TRY(ff_transport_parse(&o->transport, plan->transport));
        if (o->mode != FF_MODE_DIRECT && o->transport != FF_TRANSPORT_AUTO)
            return FF_FAIL(FF_ERR_INPUT, "--transport %s: only the direct mode chooses its transport (mode %s: %s)",
                           plan->transport, ff_mode_name(o->mode),
                           o->mode == FF_MODE_HYBRID ? "MPI staged through pinned host memory" : "fixed");
    }
    if (fault) {
        o->fault_layer = ff_model_find_layer(m, fault);
        if (o->fault_layer < 0)
            return FF_FAIL(FF_ERR_INPUT, "--inject-fault '%s': model %s has no such layer", fault, m->name);
    }
    if (plan) FF_TRY(comm_flags(o, m, plan));
    o->trace = trace;
    return FF_OK;
}
