// fivefold status codes and error messages.
// The library never exits or aborts: every fallible call returns an ff_status and records a message
// (the value that was wrong, where it came from, what was expected, a hint) that the caller can read
// with ff_last_error(), and the source location that raised it (ff_last_error_location(), shown
// to users only for internal failures or with --verbose). Only the command-line front end turns a
// status into an exit code.
#pragma once
#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    FF_OK = 0,
    FF_ERR_INPUT,      // bad user input: a flag, a shape, a file's content, a rank count   -> exit 2
    FF_ERR_IO,         // a file that cannot be opened/read/written                          -> exit 2
    FF_ERR_INTEGRITY,  // a file whose checksum or digest does not match what it must be      -> exit 2
    FF_ERR_NO_CUDA,    // built without CUDA, or no usable GPU on this machine                -> exit 77
    FF_ERR_OOM,        // host or device allocation failed (message says bytes asked / free)  -> exit 1
    FF_ERR_CUDA,       // a CUDA runtime / kernel launch error                                -> exit 1
    FF_ERR_MPI,        // an MPI call failed                                                  -> exit 1
    FF_ERR_NCCL,       // an NCCL call failed                                                 -> exit 1
    FF_ERR_HDF5,       // the HDF5 library reported an error                                  -> exit 1
    FF_ERR_INTERNAL,   // a bug: an invariant the code relies on did not hold                 -> exit 1
} ff_status;

// Process exit codes the command front end uses; scripts and CTest rely on them.
enum {
    FF_EXIT_OK = 0,
    FF_EXIT_FAILURE = 1,       // internal failure (CUDA, MPI, HDF5, out of memory, bug)
    FF_EXIT_USAGE = 2,         // bad usage or bad input
    FF_EXIT_GATE = 3,          // `bench` refused: a gating check failed, nothing was timed
    FF_EXIT_CHECK_FAILED = 4,  // `verify` ran and at least one check failed
    FF_EXIT_UNAVAILABLE = 77,  // the mode needs something this machine lacks (GPU): CTest SKIP code
};

// Records a message for the calling thread and returns `code`, so that error paths read
//   return ff_fail(FF_ERR_INPUT, __FILE__, __LINE__, "batch %d: expected 1..%d", n, max);
ff_status ff_fail(ff_status code, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define FF_FAIL(code, ...) ff_fail((code), __FILE__, __LINE__, __VA_ARGS__)

// Adds context in front of the current message ("loading weights: " + old message); returns code.
ff_status ff_fail_context(ff_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

const char *ff_last_error(void);           // the calling thread's last message ("" if none)
const char *ff_last_error_location(void);  // "file.c:LINE" of the FF_FAIL that raised it ("" if none)
void ff_clear_error(void);
const char *ff_status_name(ff_status s);
int ff_exit_code(ff_status s);  // FF_EXIT_* for a status

// Propagate a failure unchanged.
#define FF_TRY(expr)                              \
    do {                                          \
        ff_status ff_try_s_ = (expr);             \
        if (ff_try_s_ != FF_OK) return ff_try_s_; \
    } while (0)

#ifdef __cplusplus
}
#endif
