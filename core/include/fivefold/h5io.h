// Small, validating helpers over the HDF5 C library, shared by weights, goldens and checkpoints.
// Every read validates rank, extents and element type before the caller allocates.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "fivefold/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FF_H5_MAX_RANK 8

typedef enum { FF_H5_F32, FF_H5_F64, FF_H5_U8, FF_H5_I64, FF_H5_I32 } ff_h5_type;

// Opens/creates files with HDF5's automatic error printing turned off; errors come back as
// FF_ERR_IO with the path. File ids are int64_t (hid_t) to keep hdf5.h out of public headers.
ff_status ff_h5_open_read(int64_t *file, const char *path);
ff_status ff_h5_create(int64_t *file, const char *path);  // truncates
void ff_h5_close(int64_t file);

// Shape of dataset `name` (relative to loc); FF_ERR_INPUT if missing.
ff_status ff_h5_shape(int *rank, int64_t dims[FF_H5_MAX_RANK], int64_t loc, const char *name);
// Validates the dataset has exactly `rank` dims equal to `dims` and element class/size of `type`,
// then reads it into out (which holds prod(dims) elements). Message names the dataset and both shapes.
ff_status ff_h5_read(void *out, int64_t loc, const char *name, ff_h5_type type, int rank, const int64_t *dims);
// Writes a dataset (creating intermediate groups: name may be "a/b/c").
ff_status ff_h5_write(int64_t loc, const char *name, ff_h5_type type, const void *data, int rank, const int64_t *dims);
int ff_h5_exists(int64_t loc, const char *name);  // 1 if the link path exists
// 1 if object obj (relative to loc; "/" the root) exists and has attribute attr, else 0.
int ff_h5_attr_exists(int64_t loc, const char *obj, const char *attr);

// String and integer attributes on an object (path "/" or "meta" or a dataset name).
ff_status ff_h5_write_attr_str(int64_t loc, const char *obj, const char *attr, const char *value);
ff_status ff_h5_write_attr_i64(int64_t loc, const char *obj, const char *attr, int64_t value);
ff_status ff_h5_read_attr_str(char *out, size_t cap, int64_t loc, const char *obj, const char *attr);
ff_status ff_h5_read_attr_i64(int64_t *out, int64_t loc, const char *obj, const char *attr);

#ifdef __cplusplus
}
#endif
