// Validating helpers over the HDF5 C library (see h5io.h).
#include "fivefold/h5io.h"

#include <hdf5.h>
#include <stdio.h>
#include <string.h>

static void quiet(void) {
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

ff_status ff_h5_open_read(int64_t *file, const char *path) {
    quiet();
    FILE *f = fopen(path, "rb");
    if (!f) return FF_FAIL(FF_ERR_IO, "cannot open '%s' for reading", path);
    fclose(f);
    if (H5Fis_hdf5(path) <= 0)
        return FF_FAIL(FF_ERR_INPUT,
                       "'%s' is not an HDF5 file (expected an HDF5 file written by fivefold "
                       "or golden/make_golden.py)",
                       path);
    hid_t id = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (id < 0) return FF_FAIL(FF_ERR_INPUT, "'%s': HDF5 could not open it (corrupted or truncated?)", path);
    *file = id;
    return FF_OK;
}

ff_status ff_h5_create(int64_t *file, const char *path) {
    quiet();
    hid_t id = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (id < 0) return FF_FAIL(FF_ERR_IO, "cannot create HDF5 file '%s' (directory missing or not writable?)", path);
    *file = id;
    return FF_OK;
}

void ff_h5_close(int64_t file) {
    if (file > 0) H5Fclose((hid_t)file);
}

int ff_h5_exists(int64_t loc, const char *name) {
    quiet();
    // H5Lexists needs each intermediate link to exist: walk the path.
    char buf[512];
    snprintf(buf, sizeof buf, "%s", name);
    for (char *p = buf + (buf[0] == '/');; p++) {
        char c = *p;
        if (c == '/' || c == 0) {
            *p = 0;
            if (H5Lexists((hid_t)loc, buf, H5P_DEFAULT) <= 0) return 0;
            *p = c;
            if (c == 0) return 1;
        }
    }
}

int ff_h5_attr_exists(int64_t loc, const char *obj, const char *attr) {
    quiet();
    const char *path = (!obj || !*obj) ? "/" : obj;
    if (strcmp(path, "/") != 0 && !ff_h5_exists(loc, path)) return 0;
    return H5Aexists_by_name((hid_t)loc, path, attr, H5P_DEFAULT) > 0;
}

static hid_t mem_type(ff_h5_type t) {
    switch (t) {
        case FF_H5_F32: return H5T_NATIVE_FLOAT;
        case FF_H5_F64: return H5T_NATIVE_DOUBLE;
        case FF_H5_U8: return H5T_NATIVE_UINT8;
        case FF_H5_I64: return H5T_NATIVE_INT64;
        case FF_H5_I32: return H5T_NATIVE_INT32;
    }
    return H5T_NATIVE_FLOAT;
}

static const char *type_name(ff_h5_type t) {
    static const char *n[] = {"float32", "float64", "uint8", "int64", "int32"};
    return n[t];
}

static int file_type_matches(hid_t ftype, ff_h5_type t) {
    H5T_class_t cls = H5Tget_class(ftype);
    size_t size = H5Tget_size(ftype);
    switch (t) {
        case FF_H5_F32: return cls == H5T_FLOAT && size == 4;
        case FF_H5_F64: return cls == H5T_FLOAT && size == 8;
        case FF_H5_U8: return cls == H5T_INTEGER && size == 1 && H5Tget_sign(ftype) == H5T_SGN_NONE;
        case FF_H5_I64: return cls == H5T_INTEGER && size == 8;
        case FF_H5_I32: return cls == H5T_INTEGER && size == 4;
    }
    return 0;
}

static void shape_str(char *buf, size_t cap, int rank, const int64_t *dims) {
    size_t k = 0;
    k += (size_t)snprintf(buf + k, cap - k, "(");
    for (int i = 0; i < rank && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, i ? ", %lld" : "%lld", (long long)dims[i]);
    if (k < cap) snprintf(buf + k, cap - k, ")");
}

ff_status ff_h5_shape(int *rank, int64_t dims[FF_H5_MAX_RANK], int64_t loc, const char *name) {
    quiet();
    if (!ff_h5_exists(loc, name)) return FF_FAIL(FF_ERR_INPUT, "dataset '%s' is missing", name);
    hid_t ds = H5Dopen2((hid_t)loc, name, H5P_DEFAULT);
    if (ds < 0) return FF_FAIL(FF_ERR_INPUT, "'%s' is not a dataset", name);
    hid_t sp = H5Dget_space(ds);
    int r = H5Sget_simple_extent_ndims(sp);
    ff_status st = FF_OK;
    if (r < 0 || r > FF_H5_MAX_RANK) {
        st = FF_FAIL(FF_ERR_INPUT, "dataset '%s' has rank %d: expected at most %d", name, r, FF_H5_MAX_RANK);
    } else {
        hsize_t d[FF_H5_MAX_RANK];
        H5Sget_simple_extent_dims(sp, d, NULL);
        for (int i = 0; i < r; i++) dims[i] = (int64_t)d[i];
        *rank = r;
    }
    H5Sclose(sp);
    H5Dclose(ds);
    return st;
}

ff_status ff_h5_read(void *out, int64_t loc, const char *name, ff_h5_type type, int rank, const int64_t *dims) {
    int r;
    int64_t d[FF_H5_MAX_RANK];
    FF_TRY(ff_h5_shape(&r, d, loc, name));
    int same = r == rank;
    for (int i = 0; same && i < r; i++) same = d[i] == dims[i];
    if (!same) {
        char found[160], want[160];
        shape_str(found, sizeof found, r, d);
        shape_str(want, sizeof want, rank, dims);
        return FF_FAIL(FF_ERR_INPUT, "dataset '%s' has shape %s: expected %s", name, found, want);
    }
    hid_t ds = H5Dopen2((hid_t)loc, name, H5P_DEFAULT);
    hid_t ft = H5Dget_type(ds);
    int ok = file_type_matches(ft, type);
    H5Tclose(ft);
    if (!ok) {
        H5Dclose(ds);
        return FF_FAIL(FF_ERR_INPUT, "dataset '%s' has the wrong element type: expected %s", name, type_name(type));
    }
    herr_t e = H5Dread(ds, mem_type(type), H5S_ALL, H5S_ALL, H5P_DEFAULT, out);
    H5Dclose(ds);
    if (e < 0) return FF_FAIL(FF_ERR_INPUT, "dataset '%s' could not be read (file truncated or corrupted?)", name);
    return FF_OK;
}

ff_status ff_h5_write(int64_t loc, const char *name, ff_h5_type type, const void *data, int rank, const int64_t *dims) {
    quiet();
    hsize_t d[FF_H5_MAX_RANK];
    size_t numel = 1;
    for (int i = 0; i < rank; i++) {
        d[i] = (hsize_t)dims[i];
        numel *= (size_t)dims[i];
    }
    hid_t sp = H5Screate_simple(rank, d, NULL);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    // Compress large tensors (weights, activations) in chunks of about 2^20 elements along dim 0.
    if (numel >= 4096 && rank > 0) {
        hsize_t chunk[FF_H5_MAX_RANK];
        size_t inner = 1;
        for (int i = 1; i < rank; i++) {
            chunk[i] = d[i];
            inner *= (size_t)d[i];
        }
        size_t rows = ((size_t)1 << 20) / (inner ? inner : 1);
        chunk[0] = rows < 1 ? 1 : (rows > d[0] ? d[0] : (hsize_t)rows);
        H5Pset_chunk(dcpl, rank, chunk);
        H5Pset_shuffle(dcpl);
        H5Pset_deflate(dcpl, 4);
    }
    hid_t ds = H5Dcreate2((hid_t)loc, name, mem_type(type), sp, lcpl, dcpl, H5P_DEFAULT);
    H5Pclose(dcpl);
    H5Pclose(lcpl);
    H5Sclose(sp);
    if (ds < 0) return FF_FAIL(FF_ERR_IO, "cannot create dataset '%s' (exists already?)", name);
    herr_t e = H5Dwrite(ds, mem_type(type), H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
    H5Dclose(ds);
    if (e < 0) return FF_FAIL(FF_ERR_IO, "writing dataset '%s' failed (disk full?)", name);
    return FF_OK;
}

static hid_t open_obj(int64_t loc, const char *obj) {
    if (!obj || !*obj || strcmp(obj, "/") == 0) return H5Oopen((hid_t)loc, "/", H5P_DEFAULT);
    if (!ff_h5_exists(loc, obj)) {
        // Attributes on a group that does not exist yet: create it.
        hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
        H5Pset_create_intermediate_group(lcpl, 1);
        hid_t g = H5Gcreate2((hid_t)loc, obj, lcpl, H5P_DEFAULT, H5P_DEFAULT);
        H5Pclose(lcpl);
        return g;
    }
    return H5Oopen((hid_t)loc, obj, H5P_DEFAULT);
}

ff_status ff_h5_write_attr_str(int64_t loc, const char *obj, const char *attr, const char *value) {
    quiet();
    hid_t o = open_obj(loc, obj);
    if (o < 0) return FF_FAIL(FF_ERR_IO, "cannot open '%s' to write attribute '%s'", obj, attr);
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, strlen(value) + 1);
    hid_t sp = H5Screate(H5S_SCALAR);
    if (H5Aexists(o, attr) > 0) H5Adelete(o, attr);
    hid_t a = H5Acreate2(o, attr, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    herr_t e = a < 0 ? -1 : H5Awrite(a, t, value);
    if (a >= 0) H5Aclose(a);
    H5Sclose(sp);
    H5Tclose(t);
    H5Oclose(o);
    return e < 0 ? FF_FAIL(FF_ERR_IO, "cannot write attribute '%s' on '%s'", attr, obj) : FF_OK;
}

ff_status ff_h5_write_attr_i64(int64_t loc, const char *obj, const char *attr, int64_t value) {
    quiet();
    hid_t o = open_obj(loc, obj);
    if (o < 0) return FF_FAIL(FF_ERR_IO, "cannot open '%s' to write attribute '%s'", obj, attr);
    hid_t sp = H5Screate(H5S_SCALAR);
    if (H5Aexists(o, attr) > 0) H5Adelete(o, attr);
    hid_t a = H5Acreate2(o, attr, H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    herr_t e = a < 0 ? -1 : H5Awrite(a, H5T_NATIVE_INT64, &value);
    if (a >= 0) H5Aclose(a);
    H5Sclose(sp);
    H5Oclose(o);
    return e < 0 ? FF_FAIL(FF_ERR_IO, "cannot write attribute '%s' on '%s'", attr, obj) : FF_OK;
}

// Opens attribute `attr` of object `obj` ("" or NULL: the root) for the two readers below: *a and
// its type *ft (close both), *path the object's name for messages; FF_ERR_INPUT naming what is missing.
static ff_status open_attr(hid_t *a, hid_t *ft, const char **path, int64_t loc, const char *obj, const char *attr) {
    quiet();
    *path = (!obj || !*obj) ? "/" : obj;
    if (strcmp(*path, "/") != 0 && !ff_h5_exists(loc, *path))
        return FF_FAIL(FF_ERR_INPUT, "object '%s' is missing (looking for attribute '%s')", *path, attr);
    if (H5Aexists_by_name((hid_t)loc, *path, attr, H5P_DEFAULT) <= 0)
        return FF_FAIL(FF_ERR_INPUT, "attribute '%s' on '%s' is missing", attr, *path);
    *a = H5Aopen_by_name((hid_t)loc, *path, attr, H5P_DEFAULT, H5P_DEFAULT);
    if (*a < 0) return FF_FAIL(FF_ERR_INPUT, "attribute '%s' on '%s' cannot be opened", attr, *path);
    *ft = H5Aget_type(*a);
    return FF_OK;
}

ff_status ff_h5_read_attr_str(char *out, size_t cap, int64_t loc, const char *obj, const char *attr) {
    const char *path;
    hid_t a = -1, ft = -1;
    ff_status st = open_attr(&a, &ft, &path, loc, obj, attr);
    if (st != FF_OK) return st;
    if (H5Tget_class(ft) != H5T_STRING) {
        st = FF_FAIL(FF_ERR_INPUT, "attribute '%s' on '%s' is not a string", attr, path);
    } else if (H5Tis_variable_str(ft) > 0) {
        // h5py writes variable-length strings by default.
        hid_t mt = H5Tcopy(H5T_C_S1);
        H5Tset_size(mt, H5T_VARIABLE);
        char *s = NULL;
        if (H5Aread(a, mt, &s) < 0 || !s) {
            st = FF_FAIL(FF_ERR_INPUT, "attribute '%s' on '%s' unreadable", attr, path);
        } else {
            snprintf(out, cap, "%s", s);
            H5free_memory(s);
        }
        H5Tclose(mt);
    } else {
        size_t size = H5Tget_size(ft);
        if (size + 1 > cap) {
            st = FF_FAIL(FF_ERR_INPUT, "attribute '%s' on '%s' is %zu bytes: expected at most %zu", attr, path, size,
                         cap - 1);
        } else {
            hid_t mt = H5Tcopy(H5T_C_S1);
            H5Tset_size(mt, size + 1);
            memset(out, 0, cap);
            if (H5Aread(a, mt, out) < 0) st = FF_FAIL(FF_ERR_INPUT, "attribute '%s' on '%s' unreadable", attr, path);
            H5Tclose(mt);
        }
    }
    H5Tclose(ft);
    H5Aclose(a);
    return st;
}

ff_status ff_h5_read_attr_i64(int64_t *out, int64_t loc, const char *obj, const char *attr) {
    const char *path;
    hid_t a = -1, ft = -1;
    ff_status st = open_attr(&a, &ft, &path, loc, obj, attr);
    if (st != FF_OK) return st;
    if (H5Tget_class(ft) != H5T_INTEGER)
        st = FF_FAIL(FF_ERR_INPUT, "attribute '%s' on '%s' is not an integer", attr, path);
    else if (H5Aread(a, H5T_NATIVE_INT64, out) < 0)
        st = FF_FAIL(FF_ERR_INPUT, "attribute '%s' on '%s' unreadable", attr, path);
    H5Tclose(ft);
    H5Aclose(a);
    return st;
}
