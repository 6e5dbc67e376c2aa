// Test helper for verify/cli/*.sh: changes one float32 element of a dataset in an existing HDF5
// file in place, leaving every attribute (a recorded digest included) as it was, the way a flipped
// bit on disk or a NaN written by another tool would.
//   h5poke FILE DATASET INDEX flip|nan|inf|VALUE
//   h5poke FILE DATASET --delete-attr NAME     (a file written before the attribute existed)
// flip toggles the lowest mantissa bit. Exit 0 done, 2 bad arguments or file.
#include <hdf5.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr,
                "usage: h5poke FILE DATASET INDEX flip|nan|inf|VALUE\n"
                "       h5poke FILE DATASET --delete-attr NAME\n");
        return 2;
    }
    if (!strcmp(argv[3], "--delete-attr")) {
        hid_t f = H5Fopen(argv[1], H5F_ACC_RDWR, H5P_DEFAULT);
        herr_t e = f < 0 ? -1 : H5Adelete_by_name(f, argv[2], argv[4], H5P_DEFAULT);
        if (f >= 0) H5Fclose(f);
        if (e < 0) fprintf(stderr, "h5poke: cannot delete attribute '%s' of '%s' in '%s'\n", argv[4], argv[2], argv[1]);
        return e < 0 ? 2 : 0;
    }
    char *end;
    long long index = strtoll(argv[3], &end, 10);
    if (*end || index < 0) {
        fprintf(stderr, "h5poke: INDEX '%s': expected a non-negative integer\n", argv[3]);
        return 2;
    }
    hid_t f = H5Fopen(argv[1], H5F_ACC_RDWR, H5P_DEFAULT);
    if (f < 0) {
        fprintf(stderr, "h5poke: cannot open '%s' for writing\n", argv[1]);
        return 2;
    }
    hid_t ds = H5Dopen2(f, argv[2], H5P_DEFAULT);
    if (ds < 0) {
        fprintf(stderr, "h5poke: '%s' has no dataset '%s'\n", argv[1], argv[2]);
        H5Fclose(f);
        return 2;
    }
    hid_t sp = H5Dget_space(ds);
    hssize_t n = H5Sget_simple_extent_npoints(sp);
    int rc = 2;
    float *x = n > 0 ? malloc((size_t)n * sizeof *x) : NULL;  // (n): the whole dataset, flattened
    if (!x || index >= n) {
        fprintf(stderr, "h5poke: INDEX %lld: dataset '%s' has %lld elements\n", index, argv[2], (long long)n);
    } else if (H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, x) >= 0) {
        float v = x[index];
        if (!strcmp(argv[4], "flip")) {
            uint32_t bits;
            memcpy(&bits, &v, 4);
            bits ^= 1u;
            memcpy(&v, &bits, 4);
        } else if (!strcmp(argv[4], "nan")) {
            v = NAN;
        } else if (!strcmp(argv[4], "inf")) {
            v = INFINITY;
        } else {
            v = strtof(argv[4], NULL);
        }
        x[index] = v;
        if (H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, x) >= 0) rc = 0;
    }
    if (rc) fprintf(stderr, "h5poke: could not change '%s' in '%s'\n", argv[2], argv[1]);
    free(x);
    H5Sclose(sp);
    H5Dclose(ds);
    H5Fclose(f);
    return rc;
}
