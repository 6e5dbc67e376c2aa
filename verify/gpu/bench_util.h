// Shared by the GPU timing programs (ff_gpu_bench, ff_gpu_train_bench): a failed call ends the
// program with its message (exit 77 when there is no GPU, as the tests), and the comparison that
// sorts timings for a median.
#pragma once
#include <stdio.h>
#include <stdlib.h>

#include "fivefold/status.h"

#define CHECK(x)                                                                 \
    do {                                                                         \
        ff_status st_ = (x);                                                     \
        if (st_ != FF_OK) {                                                      \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, ff_last_error()); \
            exit(st_ == FF_ERR_NO_CUDA ? 77 : 1);                                \
        }                                                                        \
    } while (0)

static inline int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
