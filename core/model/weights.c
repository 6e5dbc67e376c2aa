// Model parameters: allocation, the deterministic generator, HDF5 load/save (see weights.h).
#include "fivefold/weights.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fivefold/digest.h"
#include "fivefold/h5io.h"
#include "fivefold/rng.h"

ff_status ff_weights_alloc(ff_weights *wt, const ff_model *m) {
    memset(wt, 0, sizeof *wt);
    size_t bytes = (size_t)m->n_weights_total * sizeof(float);
    // 64-byte alignment: GPU uploads and vector loads like it; round size up as aligned_alloc needs.
    wt->data = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!wt->data) return FF_FAIL(FF_ERR_OOM, "weights of %s: cannot allocate %zu bytes", m->name, bytes);
    wt->n_total = m->n_weights_total;
    float *p = wt->data;
    for (int i = 0; i < m->n_layers; i++) {
        const ff_layer *L = &m->layers[i];
        if (!L->n_weight) continue;
        wt->w[i] = p;
        p += L->n_weight;
        wt->b[i] = p;
        p += L->n_bias;
    }
    return FF_OK;
}

void ff_weights_free(ff_weights *wt) {
    free(wt->data);
    memset(wt, 0, sizeof *wt);
}

float ff_weight_scale(const ff_layer *L) {
    return (float)sqrt(6.0 / (double)L->fan_in);
}
float ff_bias_scale(const ff_layer *L) {
    return (float)(1.0 / sqrt((double)L->fan_in));
}

void ff_weights_generate(ff_weights *wt, const ff_model *m, uint64_t seed) {
    for (int i = 0; i < m->n_layers; i++) {
        const ff_layer *L = &m->layers[i];
        if (!L->n_weight) continue;
        uint64_t p = (uint64_t)L->param_index;
        ff_rng_fill(wt->w[i], (size_t)L->n_weight, seed, 2 * p, ff_weight_scale(L));
        ff_rng_fill(wt->b[i], (size_t)L->n_bias, seed, 2 * p + 1, ff_bias_scale(L));
    }
}

void ff_input_generate(float *x, const ff_model *m, int64_t n, uint64_t seed) {
    ff_rng_fill(x, (size_t)(n * ff_shape_numel(m->input)), seed, FF_TENSOR_ID_INPUT, 1.0f);
}

static void dims_of(const ff_layer *L, int *rank_w, int64_t dw[4], int64_t db[1]) {
    if (L->op == FF_OP_CONV2D) {
        *rank_w = 4;
        dw[0] = L->out_c;
        dw[1] = L->in.c;
        dw[2] = L->kh;
        dw[3] = L->kw;
    } else {
        *rank_w = 2;
        dw[0] = L->out_c;
        dw[1] = L->fan_in;
    }
    db[0] = L->n_bias;
}

// A weight tensor as read: its recorded digest (if the file has one) must match, and every value
// must be finite (a NaN or infinity would reach every output, silently).
static ff_status check_tensor(int *checked, const float *p, int64_t n, int64_t loc, const char *name) {
    if (ff_h5_attr_exists(loc, name, FF_WEIGHTS_DIGEST_ATTR)) {
        char rec[40], got[17];
        FF_TRY(ff_h5_read_attr_str(rec, sizeof rec, loc, name, FF_WEIGHTS_DIGEST_ATTR));
        ff_digest_hex(got, ff_digest_f32(p, (size_t)n));
        if (strlen(rec) != 16 || strspn(rec, "0123456789abcdef") != 16)
            return FF_FAIL(FF_ERR_INPUT, "'%s' attribute %s is '%s': expected 16 lowercase hex digits", name,
                           FF_WEIGHTS_DIGEST_ATTR, rec);
        if (strcmp(rec, got) != 0)
            return FF_FAIL(FF_ERR_INTEGRITY,
                           "'%s': the file records digest %s, its data has digest %s (the file changed after it "
                           "was written: corrupted or edited)",
                           name, rec, got);
        (*checked)++;
    }
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(p[i]))
            return FF_FAIL(FF_ERR_INPUT, "'%s' element [%lld] is %s: expected finite weights", name, (long long)i,
                           isnan(p[i]) ? "NaN" : (p[i] > 0 ? "+Inf" : "-Inf"));
    return FF_OK;
}

ff_status ff_weights_read_group_checked(ff_weights *wt, int *digests_checked, const ff_model *m, int64_t loc) {
    int checked = 0;
    for (int i = 0; i < m->n_layers; i++) {
        const ff_layer *L = &m->layers[i];
        if (!L->n_weight) continue;
        int rw;
        int64_t dw[4], db[1];
        dims_of(L, &rw, dw, db);
        char name[128];
        snprintf(name, sizeof name, "weights/%s/w", L->name);
        FF_TRY(ff_h5_read(wt->w[i], loc, name, FF_H5_F32, rw, dw));
        FF_TRY(check_tensor(&checked, wt->w[i], L->n_weight, loc, name));
        snprintf(name, sizeof name, "weights/%s/b", L->name);
        FF_TRY(ff_h5_read(wt->b[i], loc, name, FF_H5_F32, 1, db));
        FF_TRY(check_tensor(&checked, wt->b[i], L->n_bias, loc, name));
    }
    if (digests_checked) *digests_checked = checked;
    return FF_OK;
}

ff_status ff_weights_read_group(ff_weights *wt, const ff_model *m, int64_t loc) {
    return ff_weights_read_group_checked(wt, NULL, m, loc);
}

ff_status ff_weights_write_group(const ff_weights *wt, const ff_model *m, int64_t loc) {
    char hex[17];
    for (int i = 0; i < m->n_layers; i++) {
        const ff_layer *L = &m->layers[i];
        if (!L->n_weight) continue;
        int rw;
        int64_t dw[4], db[1];
        dims_of(L, &rw, dw, db);
        char name[128];
        snprintf(name, sizeof name, "weights/%s/w", L->name);
        FF_TRY(ff_h5_write(loc, name, FF_H5_F32, wt->w[i], rw, dw));
        ff_digest_hex(hex, ff_digest_f32(wt->w[i], (size_t)L->n_weight));
        FF_TRY(ff_h5_write_attr_str(loc, name, FF_WEIGHTS_DIGEST_ATTR, hex));
        snprintf(name, sizeof name, "weights/%s/b", L->name);
        FF_TRY(ff_h5_write(loc, name, FF_H5_F32, wt->b[i], 1, db));
        ff_digest_hex(hex, ff_digest_f32(wt->b[i], (size_t)L->n_bias));
        FF_TRY(ff_h5_write_attr_str(loc, name, FF_WEIGHTS_DIGEST_ATTR, hex));
    }
    return FF_OK;
}

ff_status ff_weights_load_h5_checked(ff_weights *wt, int *digests_checked, const ff_model *m, const char *path) {
    int64_t f;
    FF_TRY(ff_h5_open_read(&f, path));
    ff_status st = ff_weights_read_group_checked(wt, digests_checked, m, f);
    ff_h5_close(f);
    if (st != FF_OK) return ff_fail_context(st, "weights file '%s' (model %s)", path, m->name);
    return FF_OK;
}

ff_status ff_weights_load_h5(ff_weights *wt, const ff_model *m, const char *path) {
    return ff_weights_load_h5_checked(wt, NULL, m, path);
}

ff_status ff_weights_save_h5(const ff_weights *wt, const ff_model *m, const char *path) {
    int64_t f;
    FF_TRY(ff_h5_create(&f, path));
    ff_status st = ff_weights_write_group(wt, m, f);
    if (st == FF_OK) st = ff_h5_write_attr_str(f, "meta", "model", m->name);
    if (st == FF_OK) st = ff_h5_write_attr_str(f, "meta", "format", "fivefold-weights/1");
    ff_h5_close(f);
    return st;
}

uint64_t ff_weights_digest(const ff_weights *wt) {
    return ff_digest_f32(wt->data, (size_t)wt->n_total);
}
