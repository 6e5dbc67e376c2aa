// Helpers shared by the golden tests: the committed goldens' paths and temporary copies.
#pragma once
#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fivefold/golden.h"

#define GOLDEN_DIR FF_SOURCE_DIR "/golden"
#define MANIFEST GOLDEN_DIR "/MANIFEST.sha256"

static inline void golden_path(char *out, size_t cap, const char *model) {
    snprintf(out, cap, "%s/data/%s.h5", GOLDEN_DIR, model);
}

// Copies src to dst byte for byte; returns 0 on success.
static inline int copy_file(const char *dst, const char *src) {
    FILE *a = fopen(src, "rb"), *b = fopen(dst, "wb");
    if (!a || !b) {
        if (a) fclose(a);
        if (b) fclose(b);
        return -1;
    }
    char buf[1 << 16];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, a)) > 0) fwrite(buf, 1, k, b);
    fclose(a);
    return fclose(b);
}

// Opens an existing HDF5 file for writing (ff_h5_create would truncate it).
static inline int64_t open_rw(const char *path) {
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    return (int64_t)H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
}
