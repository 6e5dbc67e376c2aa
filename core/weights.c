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

ff_status ff_weights_read_group(ff_weights *wt, const ff_model *m, int64_t loc) {
    for (int i = 0; i < m->n_layers; i++) {
        const ff_layer *L = &m->layers[i];
        if (!L->n_weight) continue;
        int rw;
        int64_t dw[4], db[1];
        dims_of(L, &rw, dw, db);
        char name[128];
        snprintf(name, sizeof name, "weights/%s/w", L->name);
        FF_TRY(ff_h5_read(wt->w[i], loc, name, FF_H5_F32, rw, dw));
        snprintf(name, sizeof name, "weights/%s/b", L->name);
        FF_TRY(ff_h5_read(wt->b[i], loc, name, FF_H5_F32, 1, db));
    }
    return FF_OK;
}

ff_status ff_weights_write_group(const ff_weights *wt, const ff_model *m, int64_t loc) {
    for (int i = 0; i < m->n_layers; i++) {
        const ff_layer *L = &m->layers[i];
        if (!L->n_weight) continue;
        int rw;
        int64_t dw[4], db[1];
        dims_of(L, &rw, dw, db);
        char name[128];
        snprintf(name, sizeof name, "weights/%s/w", L->name);
        FF_TRY(ff_h5_write(loc, name, FF_H5_F32, wt->w[i], rw, dw));
        snprintf(name, sizeof name, "weights/%s/b", L->name);
        FF_TRY(ff_h5_write(loc, name, FF_H5_F32, wt->b[i], 1, db));
    }
    return FF_OK;
}

ff_status ff_weights_load_h5(ff_weights *wt, const ff_model *m, const char *path) {
    int64_t f;
    FF_TRY(ff_h5_open_read(&f, path));
    ff_status st = ff_weights_read_group(wt, m, f);
    ff_h5_close(f);
    if (st != FF_OK) return ff_fail_context(st, "weights file '%s' (model %s)", path, m->name);
    return FF_OK;
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
