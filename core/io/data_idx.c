// IDX reader, normalisation and deterministic shuffling (see data_idx.h for the format and the
// normalisation constants).
#include "fivefold/data_idx.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "fivefold/rng.h"

// Reads the whole file through zlib's gzread, which decompresses gzip streams and passes raw files
// through unchanged, so one path serves both. Grows the buffer geometrically up to FF_IDX_MAX_BYTES.
static ff_status read_all(uint8_t **out, size_t *len, const char *path) {
    *out = NULL;
    *len = 0;
    gzFile f = gzopen(path, "rb");
    if (!f)
        return FF_FAIL(FF_ERR_IO, "IDX file '%s': cannot open (%s)", path,
                       errno ? strerror(errno) : "zlib could not allocate");
    size_t cap = 1 << 20, n = 0;
    uint8_t *buf = malloc(cap);
    if (!buf) {
        gzclose(f);
        return FF_FAIL(FF_ERR_OOM, "IDX file '%s': cannot allocate %zu bytes", path, cap);
    }
    for (;;) {
        if (n == cap) {
            if (cap >= FF_IDX_MAX_BYTES) {
                free(buf);
                gzclose(f);
                return FF_FAIL(FF_ERR_INPUT,
                               "IDX file '%s': more than %zu bytes uncompressed; "
                               "refusing (not an MNIST-size data set?)",
                               path, (size_t)FF_IDX_MAX_BYTES);
            }
            size_t ncap = cap * 2;
            uint8_t *nb = realloc(buf, ncap);
            if (!nb) {
                free(buf);
                gzclose(f);
                return FF_FAIL(FF_ERR_OOM, "IDX file '%s': cannot allocate %zu bytes", path, ncap);
            }
            buf = nb;
            cap = ncap;
        }
        size_t want = cap - n;
        if (want > (1u << 30)) want = 1u << 30;
        int got = gzread(f, buf + n, (unsigned)want);
        if (got < 0) {
            int zerr = 0;
            char msg[256];
            snprintf(msg, sizeof msg, "%s", gzerror(f, &zerr));  // owned by f: copy before gzclose
            free(buf);
            gzclose(f);
            return FF_FAIL(FF_ERR_IO,
                           "IDX file '%s': read failed after %zu bytes: %s "
                           "(truncated or damaged gzip stream?)",
                           path, n, msg);
        }
        if (got == 0) break;
        n += (size_t)got;
    }
    // gzread reports a gzip stream cut short only through gzerror (Z_BUF_ERROR) at end of file.
    int zerr = 0;
    char msg[256];
    snprintf(msg, sizeof msg, "%s", gzerror(f, &zerr));  // owned by f: copy before gzclose
    if (zerr != Z_OK && zerr != Z_STREAM_END) {
        free(buf);
        gzclose(f);
        return FF_FAIL(FF_ERR_IO,
                       "IDX file '%s': gzip stream ends early or is damaged after %zu "
                       "bytes (zlib: %s)",
                       path, n, *msg ? msg : "unexpected end of file");
    }
    gzclose(f);
    *out = buf;
    *len = n;
    return FF_OK;
}

static uint32_t be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

ff_status ff_idx_parse(size_t *offset, int64_t *dims, const uint8_t *buf, size_t len, const char *path, int ndims) {
    *offset = 0;
    if (len < 4) return FF_FAIL(FF_ERR_INPUT, "IDX file '%s': %zu bytes, too short for the 4-byte magic", path, len);
    if (buf[0] != 0 || buf[1] != 0)
        return FF_FAIL(FF_ERR_INPUT,
                       "IDX file '%s': bad magic %02x %02x %02x %02x: the first two "
                       "bytes must be 00 00 (not an IDX file)",
                       path, buf[0], buf[1], buf[2], buf[3]);
    if (buf[2] != 0x08)
        return FF_FAIL(FF_ERR_INPUT,
                       "IDX file '%s': element type 0x%02x, expected 0x08 (unsigned "
                       "byte)",
                       path, buf[2]);
    if (buf[3] != ndims)
        return FF_FAIL(FF_ERR_INPUT, "IDX file '%s': %d dimensions, expected %d (%s)", path, buf[3], ndims,
                       ndims == 3 ? "images: count, rows, cols" : "labels: count");
    const size_t header = 4 + 4 * (size_t)ndims;
    if (len < header)
        return FF_FAIL(FF_ERR_INPUT,
                       "IDX file '%s': %zu bytes, shorter than its %zu-byte header "
                       "(truncated)",
                       path, len, header);
    uint64_t count = 1;
    for (int d = 0; d < ndims; d++) {
        uint32_t e = be32(buf + 4 + 4 * d);
        if (e == 0) return FF_FAIL(FF_ERR_INPUT, "IDX file '%s': dimension %d is 0, expected > 0", path, d);
        dims[d] = e;
        count *= e;  // <= 2^31 * 2^32 after the check below: no overflow with 3 factors
        if (count > FF_IDX_MAX_BYTES)
            return FF_FAIL(FF_ERR_INPUT, "IDX file '%s': header announces more than %zu elements", path,
                           (size_t)FF_IDX_MAX_BYTES);
    }
    if (len != header + count)
        return FF_FAIL(FF_ERR_INPUT,
                       "IDX file '%s': %zu bytes, but the header announces %zu + %llu "
                       "= %llu (%s)",
                       path, len, header, (unsigned long long)count, (unsigned long long)(header + count),
                       len < header + count ? "truncated" : "trailing bytes");
    *offset = header;
    return FF_OK;
}

ff_status ff_idx_read(uint8_t **data, int64_t *dims, const char *path, int ndims) {
    *data = NULL;
    if (ndims < 1 || ndims > 3) return FF_FAIL(FF_ERR_INPUT, "IDX read: %d dimensions asked, expected 1..3", ndims);
    uint8_t *buf;
    size_t len, header;
    FF_TRY(read_all(&buf, &len, path));
    ff_status st = ff_idx_parse(&header, dims, buf, len, path, ndims);
    if (st != FF_OK) {
        free(buf);
        return st;
    }
    memmove(buf, buf + header, len - header);
    *data = buf;
    return FF_OK;
}

ff_status ff_dataset_load(ff_dataset *ds, const char *images_path, const char *labels_path) {
    memset(ds, 0, sizeof *ds);
    int64_t idims[3] = {0}, ldims[1] = {0};
    uint8_t *px = NULL, *lb = NULL;
    FF_TRY(ff_idx_read(&px, idims, images_path, 3));
    ff_status st = ff_idx_read(&lb, ldims, labels_path, 1);
    if (st != FF_OK) {
        free(px);
        return st;
    }
    if (ldims[0] != idims[0]) {
        free(px);
        free(lb);
        return FF_FAIL(FF_ERR_INPUT,
                       "IDX data: '%s' has %lld images but '%s' has %lld labels; "
                       "expected equal counts",
                       images_path, (long long)idims[0], labels_path, (long long)ldims[0]);
    }
    int64_t maxl = 0;
    for (int64_t i = 0; i < ldims[0]; i++)
        if (lb[i] > maxl) maxl = lb[i];
    // int32 labels: the same type for every data set (a synthetic one has up to 2^31 classes)
    int32_t *l32 = malloc(sizeof *l32 * (size_t)(ldims[0] > 0 ? ldims[0] : 1));
    if (!l32) {
        free(px);
        free(lb);
        return FF_FAIL(FF_ERR_OOM, "IDX data '%s': %lld labels", labels_path, (long long)ldims[0]);
    }
    for (int64_t i = 0; i < ldims[0]; i++) l32[i] = lb[i];
    free(lb);
    ds->pixels = px;
    ds->labels = l32;
    ds->n = idims[0];
    ds->rows = idims[1];
    ds->cols = idims[2];
    ds->classes = maxl + 1;
    snprintf(ds->images_path, sizeof ds->images_path, "%s", images_path);
    snprintf(ds->labels_path, sizeof ds->labels_path, "%s", labels_path);
    return FF_OK;
}

static ff_status find_file(char *out, size_t cap, const char *dir, const char *base) {
    snprintf(out, cap, "%s/%s.gz", dir, base);
    if (access(out, R_OK) == 0) return FF_OK;
    snprintf(out, cap, "%s/%s", dir, base);
    if (access(out, R_OK) == 0) return FF_OK;
    return FF_FAIL(FF_ERR_IO,
                   "data folder '%s': neither %s.gz nor %s is readable; expected an "
                   "MNIST-format folder (Debian: apt-get install dataset-fashion-mnist)",
                   dir, base, base);
}

ff_status ff_dataset_load_dir(ff_dataset *ds, const char *dir, const char *split, int64_t limit) {
    if (strcmp(split, "train") != 0 && strcmp(split, "t10k") != 0)
        return FF_FAIL(FF_ERR_INPUT, "data split '%s': expected 'train' or 't10k'", split);
    char ip[4096], lp[4096], base[64];
    snprintf(base, sizeof base, "%s-images-idx3-ubyte", split);
    FF_TRY(find_file(ip, sizeof ip, dir, base));
    snprintf(base, sizeof base, "%s-labels-idx1-ubyte", split);
    FF_TRY(find_file(lp, sizeof lp, dir, base));
    if (limit < 0) return FF_FAIL(FF_ERR_INPUT, "data folder '%s': limit %lld, expected >= 0", dir, (long long)limit);
    FF_TRY(ff_dataset_load(ds, ip, lp));
    if (limit > 0 && limit < ds->n) {
        ds->n = limit;  // keep the first `limit`: buffers stay valid
        int64_t maxl = 0;
        for (int64_t i = 0; i < ds->n; i++)
            if (ds->labels[i] > maxl) maxl = ds->labels[i];
        ds->classes = maxl + 1;
    }
    return FF_OK;
}

void ff_dataset_free(ff_dataset *ds) {
    free(ds->pixels);
    free(ds->labels);
    memset(ds, 0, sizeof *ds);
}

void ff_idx_norm_table(float table[256]) {
    for (int v = 0; v < 256; v++) table[v] = ((float)v / 255.0f - FF_IDX_MEAN) / FF_IDX_STD;
}

// Sample s's features into dst (a synthetic set).
static void synth_sample(float *restrict dst, const ff_synth *sy, int64_t s, int64_t per) {
    for (int64_t k = 0; k < per; k++) dst[k] = ff_synth_x(sy, s, k);
}

void ff_dataset_normalize(float *out, const ff_dataset *ds) {
    if (ds->synthetic) {
        const int64_t per = ds->cols;
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < ds->n; i++) synth_sample(out + i * per, &ds->synth, i, per);
        return;
    }
    float t[256];
    ff_idx_norm_table(t);
    const int64_t per = ds->rows * ds->cols;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < ds->n; i++) {
        const uint8_t *src = ds->pixels + i * per;
        float *dst = out + i * per;
        for (int64_t k = 0; k < per; k++) dst[k] = t[src[k]];
    }
}

// One image: the same two IEEE divisions and one subtraction as ff_idx_norm_table, written so
// that GCC vectorises them (uint8 -> float, divps, subps, divps: 4 pixels per instruction). Each
// operation is correctly rounded in SIMD as in scalar code, so the values equal the table's bit
// for bit (test_data_idx compares all 256), at about twice the table lookup's speed.
static void normalize_image(float *restrict dst, const uint8_t *restrict src, int64_t per) {
    for (int64_t k = 0; k < per; k++) dst[k] = ((float)src[k] / 255.0f - FF_IDX_MEAN) / FF_IDX_STD;
}

void ff_dataset_batch(float *out, int32_t *labels, const ff_dataset *ds, const int64_t *order, int64_t first,
                      int64_t count) {
    const int64_t per = ds->rows * ds->cols;
    // Small batches are cheaper on one thread than waking a team (below ~16k pixels: 20 MNIST
    // images); a batch of 64 already gains from a second thread.
#pragma omp parallel for schedule(static) if (count * per >= (1 << 14))
    for (int64_t i = 0; i < count; i++) {
        int64_t s = order[first + i];
        if (ds->synthetic)
            synth_sample(out + i * per, &ds->synth, s, per);
        else
            normalize_image(out + i * per, ds->pixels + s * per, per);
        if (labels) labels[i] = ds->labels[s];
    }
}

void ff_shuffle_order(int64_t *order, int64_t n, uint64_t seed, int64_t epoch) {
    for (int64_t i = 0; i < n; i++) order[i] = i;
    uint64_t key = ff_rng_key(seed, 0x5348554646ULL ^ (uint64_t)epoch);  // "SHUFF"
    for (int64_t i = n - 1; i >= 1; i--) {
        uint64_t bits = ff_mix64(key + (uint64_t)(i + 1) * 0x9E3779B97F4A7C15ULL);
        int64_t j = (int64_t)(((unsigned __int128)bits * (uint64_t)(i + 1)) >> 64);
        int64_t tmp = order[i];
        order[i] = order[j];
        order[j] = tmp;
    }
}

void ff_synth_init(ff_synth *s, uint64_t seed, int split, int64_t dim, int64_t classes) {
    s->seed = seed;
    s->split = split;
    s->dim = dim;
    s->classes = classes;
    s->x_key = ff_rng_key(seed, FF_TENSOR_ID_SYNTH_X + (uint64_t)split);
    s->t_key = ff_rng_key(seed, FF_TENSOR_ID_SYNTH_TEACHER);
}

ff_status ff_dataset_synthetic(ff_dataset *ds, uint64_t seed, int split, int64_t n, int64_t dim, int64_t classes) {
    memset(ds, 0, sizeof *ds);
    if (n < 1) return FF_FAIL(FF_ERR_INPUT, "synthetic data: %lld samples, expected at least 1", (long long)n);
    if (dim < 1 || dim > ((int64_t)1 << 32))
        return FF_FAIL(FF_ERR_INPUT, "synthetic data: %lld features, expected 1 .. 2^32", (long long)dim);
    if (classes < 2 || classes > INT32_MAX)
        return FF_FAIL(FF_ERR_INPUT, "synthetic data: %lld classes, expected 2 .. 2^31 - 1", (long long)classes);
    if (split != 0 && split != 1)
        return FF_FAIL(FF_ERR_INPUT, "synthetic data: split %d, expected 0 (train) or 1 (test)", split);
    ds->labels = malloc(sizeof *ds->labels * (size_t)n);
    if (!ds->labels)
        return FF_FAIL(FF_ERR_OOM, "synthetic data: %lld labels (%lld bytes)", (long long)n, (long long)n * 4);
    ds->synthetic = true;
    ff_synth_init(&ds->synth, seed, split, dim, classes);
    ds->n = n;
    ds->rows = 1;
    ds->cols = dim;
#pragma omp parallel for schedule(dynamic, 64)
    for (int64_t i = 0; i < n; i++) ds->labels[i] = ff_synth_label(&ds->synth, i);
    ds->classes = classes;  // the teacher's classes, whether or not every one occurs among n
    snprintf(ds->images_path, sizeof ds->images_path, "synthetic:%s", split ? "test" : "train");
    snprintf(ds->labels_path, sizeof ds->labels_path, "synthetic:%s", split ? "test" : "train");
    return FF_OK;
}
