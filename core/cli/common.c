// Front-end helpers shared by every subcommand (see cli.h).
#include <errno.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

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

static void end_job(int code) {
    fflush(stdout);
    fflush(stderr);
    if (mpi_started() && ff_cli_ranks() > 1) MPI_Abort(MPI_COMM_WORLD, code);
}

int ff_cli_fail(const char *cmd, ff_status st) {
    int code = ff_exit_code(st);
    // Input errors are the same on every rank: print once. Others may be rank-specific.
    if (ff_cli_rank() == 0 || code != FF_EXIT_USAGE) {
        if (ff_cli_ranks() > 1)
            fprintf(stderr, "fivefold %s: rank %d: error (%s): %s\n", cmd, ff_cli_rank(), ff_status_name(st),
                    ff_last_error());
        else
            fprintf(stderr, "fivefold %s: error (%s): %s\n", cmd, ff_status_name(st), ff_last_error());
    }
    if (st == FF_ERR_NO_CUDA && ff_cli_rank() == 0)
        fprintf(stderr, "fivefold %s: this machine cannot run the requested GPU mode (exit %d)\n", cmd, code);
    end_job(code);
    return code;
}

int ff_cli_usage(const char *cmd, const char *fmt, ...) {
    if (ff_cli_rank() == 0) {
        fprintf(stderr, "fivefold %s: ", cmd);
        va_list ap;
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fprintf(stderr, "\ntry 'fivefold %s --help'\n", cmd);
    }
    end_job(FF_EXIT_USAGE);
    return FF_EXIT_USAGE;
}

ff_status ff_cli_parse_i64(int64_t *out, const char *flag, const char *s, int64_t lo, int64_t hi) {
    if (!s || !*s)
        return FF_FAIL(FF_ERR_INPUT, "%s needs a value: expected an integer in %lld..%lld", flag, (long long)lo,
                       (long long)hi);
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno || *end)
        return FF_FAIL(FF_ERR_INPUT, "%s '%s': expected an integer in %lld..%lld", flag, s, (long long)lo,
                       (long long)hi);
    if (v < lo || v > hi)
        return FF_FAIL(FF_ERR_INPUT, "%s %lld: expected %lld..%lld", flag, v, (long long)lo, (long long)hi);
    *out = v;
    return FF_OK;
}

ff_status ff_cli_parse_u64(uint64_t *out, const char *flag, const char *s) {
    errno = 0;
    char *end;
    if (!s || !*s || *s == '-')
        return FF_FAIL(FF_ERR_INPUT, "%s '%s': expected a non-negative integer", flag, s ? s : "");
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || *end) return FF_FAIL(FF_ERR_INPUT, "%s '%s': expected a non-negative integer", flag, s);
    *out = v;
    return FF_OK;
}

static ff_comm *world_comm;

ff_status ff_cli_mpi_comm(ff_comm **out) {
    if (!mpi_started()) {
        int provided;
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
            return FF_FAIL(FF_ERR_MPI, "MPI_Init_thread failed");
    }
    if (!world_comm) {
        MPI_Comm w = MPI_COMM_WORLD;
        FF_TRY(ff_comm_mpi_create(&world_comm, &w));
    }
    *out = world_comm;
    return FF_OK;
}

void ff_cli_mpi_finalize(void) {
    if (world_comm) {
        ff_comm_destroy(world_comm);
        world_comm = NULL;
    }
    if (mpi_started()) MPI_Finalize();
}

ff_status ff_cli_load_weights(ff_weights *wt, const ff_model *m, const char *path, uint64_t seed) {
    FF_TRY(ff_weights_alloc(wt, m));
    ff_status st = FF_OK;
    if (path)
        st = ff_weights_load_h5(wt, m, path);
    else
        ff_weights_generate(wt, m, seed);
    if (st != FF_OK) ff_weights_free(wt);
    return st;
}

ff_status ff_cli_exec_options(ff_exec_options *o, const ff_model *m, const char *mode, const char *split,
                              const char *backend, const char *precision, const char *fault, bool trace) {
    ff_exec_options_default(o);
    FF_TRY(ff_mode_parse(&o->mode, mode ? mode : "serial"));
    if (split) FF_TRY(ff_split_parse(&o->split, split));
    if (!ff_mode_is_multirank(o->mode) && o->split != FF_SPLIT_NONE)
        return FF_FAIL(FF_ERR_INPUT, "--split %s: mode %s runs on one process and takes no split", split,
                       ff_mode_name(o->mode));
    if (ff_mode_is_multirank(o->mode) && o->split == FF_SPLIT_NONE) o->split = FF_SPLIT_BATCH;
    if (backend) {
        if (!strcmp(backend, "own"))
            o->backend = FF_BACKEND_OWN;
        else if (!strcmp(backend, "vendor"))
            o->backend = FF_BACKEND_VENDOR;
        else
            return FF_FAIL(FF_ERR_INPUT, "--backend '%s': expected own|vendor", backend);
    }
    if (precision) {
        if (!strcmp(precision, "fp32"))
            o->precision = FF_PRECISION_FP32;
        else if (!strcmp(precision, "tf32"))
            o->precision = FF_PRECISION_TF32;
        else
            return FF_FAIL(FF_ERR_INPUT, "--precision '%s': expected fp32|tf32", precision);
    }
    if (fault) {
        o->fault_layer = ff_model_find_layer(m, fault);
        if (o->fault_layer < 0)
            return FF_FAIL(FF_ERR_INPUT, "--inject-fault '%s': model %s has no such layer", fault, m->name);
    }
    o->trace = trace;
    return FF_OK;
}
