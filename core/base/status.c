// Status codes and the per-thread error message (see status.h).
#include "fivefold/status.h"

#include <stdio.h>
#include <string.h>

// One message per thread: rank threads of the loopback communicator fail independently. The
// source location is kept apart from the message: users see the message, developers (--verbose,
// internal errors) see both.
static _Thread_local char ff_msg[2048];
static _Thread_local char ff_loc[128];

ff_status ff_fail(ff_status code, const char *file, int line, const char *fmt, ...) {
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    snprintf(ff_loc, sizeof ff_loc, "%s:%d", base, line);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ff_msg, sizeof ff_msg, fmt, ap);
    va_end(ap);
    return code;
}

ff_status ff_fail_context(ff_status code, const char *fmt, ...) {
    char prefix[512], old[sizeof ff_msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, ff_msg, sizeof old);
    // Prefix, then as much of the old message as fits (truncation is acceptable for a message).
    size_t k = strlen(prefix);
    if (k > sizeof ff_msg - 3) k = sizeof ff_msg - 3;
    memcpy(ff_msg, prefix, k);
    memcpy(ff_msg + k, ": ", 2);
    size_t room = sizeof ff_msg - k - 3;
    size_t n = strnlen(old, room);
    memcpy(ff_msg + k + 2, old, n);
    ff_msg[k + 2 + n] = 0;
    return code;
}

const char *ff_last_error(void) {
    return ff_msg;
}
const char *ff_last_error_location(void) {
    return ff_loc;
}
void ff_clear_error(void) {
    ff_msg[0] = 0;
    ff_loc[0] = 0;
}

const char *ff_status_name(ff_status s) {
    switch (s) {
        case FF_OK: return "ok";
        case FF_ERR_INPUT: return "bad input";
        case FF_ERR_IO: return "I/O error";
        case FF_ERR_INTEGRITY: return "integrity check failed";
        case FF_ERR_NO_CUDA: return "no CUDA";
        case FF_ERR_OOM: return "out of memory";
        case FF_ERR_CUDA: return "CUDA error";
        case FF_ERR_MPI: return "MPI error";
        case FF_ERR_NCCL: return "NCCL error";
        case FF_ERR_HDF5: return "HDF5 error";
        case FF_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

int ff_exit_code(ff_status s) {
    switch (s) {
        case FF_OK: return FF_EXIT_OK;
        case FF_ERR_INPUT:
        case FF_ERR_IO:
        case FF_ERR_INTEGRITY: return FF_EXIT_USAGE;
        case FF_ERR_NO_CUDA: return FF_EXIT_UNAVAILABLE;
        default: return FF_EXIT_FAILURE;
    }
}
