// The training golden check (train_golden.h): integrity first (SHA-256 against the manifest, then
// HDF5 parses the checked bytes from memory), then isolation, step-1 and trajectory rows (and for a
// synthetic-data golden, the data row: its stored batches against the C generator).
#include "fivefold/train_golden.h"

#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fivefold/comm.h"
#include "fivefold/data_idx.h"
#include "fivefold/digest.h"
#include "fivefold/golden.h"
#include "fivefold/h5io.h"
#include "fivefold/layers_cpu_backward.h"
#include "fivefold/sha256.h"
#include "fivefold/tolerance.h"
#include "fivefold/train.h"
#include "fivefold/weights.h"

#define MAX_STORED_ROWS 128  // rows a layer's weight-shaped tensors may be stored for

typedef struct {
    ff_verify_report *rep;
    const ff_train_golden_config *cfg;
    int64_t file;
    const char *path;
    ff_model m;
    // Weight-shaped tensors stored for some rows only (size budget): n_rows[l] > 0 lists them in
    // rows[l] (mnist-cnn: /fc1_rows; others: /rows/<layer>); 0: the whole tensor.
    int64_t rows[FF_MAX_LAYERS][MAX_STORED_ROWS];
    int n_rows[FF_MAX_LAYERS];
    int64_t n_iso;    // images of the isolation records (/iso_images; 1 when absent)
    int64_t mb;       // fivefold's micro-batch (/microbatch; 8 when absent)
    bool synthetic;   // a synthetic-data golden (/data "synthetic": features, int32 labels)
    int64_t train_n;  // synthetic: the training set's size the shuffle runs over
    int fault_iso;    // layer whose isolation dw the fault hook perturbs (the 2nd parameterised)
    int fault_param;  // layer whose step-1 b / final w it perturbs (the last parameterised)
} ctx;

// ---------------------------------------------------------------- rows

// The trajectory rows name the mode they ran in when it is not serial, and the rank count when
// several: "mnist-cnn train[cuda] ...", "mlp-small train[mpi,P=3] ...".
static const char *mode_tag(const ctx *c) {
    static _Thread_local char tag[40];
    const int P = c->cfg->comm ? ff_comm_size(c->cfg->comm) : 1;
    if (c->cfg->mode == FF_MODE_SERIAL && P == 1) return "";
    if (P > 1)
        snprintf(tag, sizeof tag, "[%s,P=%d]", ff_mode_name(c->cfg->mode), P);
    else
        snprintf(tag, sizeof tag, "[%s]", ff_mode_name(c->cfg->mode));
    return tag;
}

static ff_status add_row(ctx *c, const char *case_str, const char *check, int layer, const ff_tol_result *tol,
                         const float *ours, int64_t n, const char *note) {
    ff_verify_report *rep = c->rep;
    if (rep->n_rows == rep->cap) {
        int cap = rep->cap ? 2 * rep->cap : 64;
        ff_verify_row *r = realloc(rep->rows, (size_t)cap * sizeof *r);
        if (!r) return FF_FAIL(FF_ERR_OOM, "train golden: rows");
        rep->rows = r;
        rep->cap = cap;
    }
    ff_verify_row *r = &rep->rows[rep->n_rows++];
    memset(r, 0, sizeof *r);
    snprintf(r->case_str, sizeof r->case_str, "%s", case_str);
    snprintf(r->check, sizeof r->check, "%s", check);
    r->layer = layer;
    if (tol)
        r->tol = *tol;
    else
        r->tol.worst = -1;
    r->digest = ours ? ff_digest_f32(ours, (size_t)n) : 0;
    r->pass = tol ? tol->pass : false;
    if (note) snprintf(r->note, sizeof r->note, "%s", note);
    if (r->pass)
        rep->passed++;
    else
        rep->failed++;
    if (c->cfg->progress) {
        ff_verify_print_row(c->cfg->progress, r);
        fflush(c->cfg->progress);
    }
    return FF_OK;
}

// ---------------------------------------------------------------- reading

static ff_status rd(ctx *c, void *out, const char *name, ff_h5_type type, int rank, const int64_t *dims) {
    return ff_h5_read(out, c->file, name, type, rank, dims);
}

static void *xmalloc(size_t n, ff_status *st) {
    void *p = malloc(n ? n : 1);
    if (!p && *st == FF_OK) *st = FF_FAIL(FF_ERR_OOM, "train golden: cannot allocate %zu bytes", n);
    return p;
}

static ff_status open_checked(ctx *c) {
    FILE *f = fopen(c->path, "rb");
    if (!f)
        return FF_FAIL(FF_ERR_IO,
                       "training golden '%s': cannot open it (regenerate with "
                       "golden/make_golden_train.py)",
                       c->path);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (size <= 0 || size > (1L << 30)) {
        fclose(f);
        return FF_FAIL(FF_ERR_INPUT, "training golden '%s': size %ld bytes, expected 1..2^30", c->path, size);
    }
    uint8_t *buf = malloc((size_t)size);
    if (!buf || fread(buf, 1, (size_t)size, f) != (size_t)size) {
        free(buf);
        fclose(f);
        return FF_FAIL(FF_ERR_IO, "training golden '%s': read failed", c->path);
    }
    fclose(f);
    uint8_t dg[32];
    char have[65], want[65], manifest[1100];
    ff_sha256(dg, buf, (size_t)size);
    ff_sha256_hex(have, dg);
    if (c->cfg->manifest)
        snprintf(manifest, sizeof manifest, "%s", c->cfg->manifest);
    else
        ff_manifest_default(manifest, sizeof manifest, c->path);
    ff_status st = ff_manifest_lookup(want, manifest, c->path);
    if (st != FF_OK && !c->cfg->trust) {
        free(buf);
        return st;
    }
    if (st == FF_OK && strcmp(want, have) != 0) {
        free(buf);
        return FF_FAIL(FF_ERR_INTEGRITY,
                       "training golden '%s' has SHA-256 %s: %s lists %s (file "
                       "modified or corrupted; regenerate with golden/make_golden_train.py)",
                       c->path, have, manifest, want);
    }
    ff_clear_error();
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0 || H5Pset_fapl_core(fapl, 1 << 20, 0) < 0 || H5Pset_file_image(fapl, buf, (size_t)size) < 0) {
        if (fapl >= 0) H5Pclose(fapl);
        free(buf);
        return FF_FAIL(FF_ERR_HDF5, "training golden '%s': cannot set up an HDF5 file image", c->path);
    }
    free(buf);  // H5Pset_file_image copied it
    static int images;
    char name[96];
    // A name that is no file on disk: the core driver would otherwise use it as a backing store.
    snprintf(name, sizeof name, "/nonexistent/fivefold-train-golden-image-%d", images++);
    hid_t id = H5Fopen(name, H5F_ACC_RDONLY, fapl);
    H5Pclose(fapl);
    if (id < 0) return FF_FAIL(FF_ERR_INTEGRITY, "training golden '%s': not a readable HDF5 file", c->path);
    c->file = (int64_t)id;
    return FF_OK;
}

// ---------------------------------------------------------------- helpers

// Rows `rows` of a (O, I) matrix into out (nrows, I).
static void take_rows(float *out, const float *w, int64_t I, const int64_t *rows, int nrows) {
    for (int r = 0; r < nrows; r++) memcpy(out + r * I, w + rows[r] * I, (size_t)I * sizeof(float));
}

// Tolerance relative to PyTorch's float32 run (train_golden.h), with the allowance for routing
// flips: at most FF_TRAIN_GOLDEN_FLIPS (or 0.5 %) of the elements may exceed the bound, each
// within FF_TRAIN_GOLDEN_FLIP_FRAC of the tensor's largest |ref|. note receives the counts.
static void check_rel(ff_tol_result *r, char *note, size_t cap, const float *ours, const double *ref64,
                      const float *t32, int64_t n) {
    double dev = 0, big = 0;
    for (int64_t i = 0; i < n; i++) {
        dev = fmax(dev, fabs((double)t32[i] - ref64[i]));
        big = fmax(big, fabs(ref64[i]));
    }
    double *bound = malloc((size_t)n * sizeof *bound);
    for (int64_t i = 0; i < n; i++) bound[i] = FF_TRAIN_GOLDEN_FACTOR * dev + 0x1p-24 * fabs(ref64[i]);
    ff_tol_check_bound(r, ours, ref64, bound, n);
    int64_t outside = 0, far = 0;
    for (int64_t i = 0; i < n; i++) {
        double err = fabs((double)ours[i] - ref64[i]);
        if (!(err <= bound[i])) {
            outside++;
            if (!(err <= FF_TRAIN_GOLDEN_FLIP_FRAC * big)) far++;
        }
    }
    int64_t allowed = n / 200 > FF_TRAIN_GOLDEN_FLIPS ? n / 200 : FF_TRAIN_GOLDEN_FLIPS;
    if (outside > 0 && outside <= allowed && far == 0 && r->n_nan == 0) {
        r->pass = true;
        snprintf(note, cap,
                 "%lld of %lld elements beyond %.0fx torch32's deviation %.3g: routing "
                 "flips allowed (<= %lld, each within %.0f%% of max|g| %.3g)",
                 (long long)outside, (long long)n, FF_TRAIN_GOLDEN_FACTOR, dev, (long long)allowed,
                 100 * FF_TRAIN_GOLDEN_FLIP_FRAC, big);
    } else {
        snprintf(note, cap,
                 "tolerance %.0fx torch32's deviation %.3g; %lld beyond it, %lld beyond "
                 "%.0f%% of max|g|",
                 FF_TRAIN_GOLDEN_FACTOR, dev, (long long)outside, (long long)far, 100 * FF_TRAIN_GOLDEN_FLIP_FRAC);
    }
    free(bound);
}

static const char *fault_note(const ctx *c, int injected) {
    return c->cfg->inject_fault && injected ? "fault injected" : NULL;
}

// ---------------------------------------------------------------- isolation rows

static ff_status iso_param_layer(ctx *c, const ff_weights *w, int l) {
    const ff_layer *L = &c->m.layers[l];
    const int64_t n = c->n_iso;
    const int64_t nin = ff_shape_numel(L->in), nout = ff_shape_numel(L->out);
    const int64_t K = L->out_c, CRS = L->n_weight / K;
    const bool conv = L->op == FF_OP_CONV2D;
    const bool rowsel = c->n_rows[l] > 0;  // stored rows only (linear layers: checked on load)
    const int64_t nr = rowsel ? c->n_rows[l] : K;
    ff_status st = FF_OK;
    float *x = xmalloc((size_t)(n * nin) * 4, &st), *dy = xmalloc((size_t)(n * nout) * 4, &st);
    float *dw = xmalloc((size_t)L->n_weight * 4, &st), *db = xmalloc((size_t)K * 4, &st);
    float *dx = xmalloc((size_t)(n * nin) * 4, &st), *dwsel = xmalloc((size_t)(nr * CRS) * 4, &st);
    double *rdw = xmalloc((size_t)(nr * CRS) * 8, &st), *rdb = xmalloc((size_t)K * 8, &st);
    double *rdx = xmalloc((size_t)(n * nin) * 8, &st);
    double *adw = xmalloc((size_t)(nr * CRS) * 8, &st), *adb = xmalloc((size_t)K * 8, &st);
    double *adx = xmalloc((size_t)(n * nin) * 8, &st), *bound = xmalloc((size_t)(n * nin + nr * CRS + K) * 8, &st);
    float *scratch = conv ? xmalloc((size_t)ff_cpu_conv2d_backward_weights_scratch(L) * 4, &st) : NULL;
    char g[96], name[128], cs[200];
    int64_t dims4[4];
    if (st != FF_OK) goto done;
    snprintf(g, sizeof g, "isolation/%s", L->name);
    if (conv) {
        dims4[0] = n;
        dims4[1] = L->in.c;
        dims4[2] = L->in.h;
        dims4[3] = L->in.w;
        snprintf(name, sizeof name, "%s/x", g);
        if ((st = rd(c, x, name, FF_H5_F32, 4, dims4)) != FF_OK) goto done;
        snprintf(name, sizeof name, "%s/dx_f64", g);
        if ((st = rd(c, rdx, name, FF_H5_F64, 4, dims4)) != FF_OK) goto done;
        dims4[1] = L->out.c;
        dims4[2] = L->out.h;
        dims4[3] = L->out.w;
        snprintf(name, sizeof name, "%s/dy", g);
        if ((st = rd(c, dy, name, FF_H5_F32, 4, dims4)) != FF_OK) goto done;
        dims4[0] = K;
        dims4[1] = L->in.c;
        dims4[2] = L->kh;
        dims4[3] = L->kw;
        snprintf(name, sizeof name, "%s/dw_f64", g);
        if ((st = rd(c, rdw, name, FF_H5_F64, 4, dims4)) != FF_OK) goto done;
        ff_cpu_conv2d_backward_weights(dw, db, dy, x, L, n, scratch);
        ff_cpu_conv2d_backward_data(dx, dy, w->w[l], L, n);
    } else {
        int64_t d2[2] = {n, nin};
        snprintf(name, sizeof name, "%s/x", g);
        if ((st = rd(c, x, name, FF_H5_F32, 2, d2)) != FF_OK) goto done;
        snprintf(name, sizeof name, "%s/dx_f64", g);
        if ((st = rd(c, rdx, name, FF_H5_F64, 2, d2)) != FF_OK) goto done;
        d2[1] = nout;
        snprintf(name, sizeof name, "%s/dy", g);
        if ((st = rd(c, dy, name, FF_H5_F32, 2, d2)) != FF_OK) goto done;
        d2[0] = nr;
        d2[1] = CRS;
        snprintf(name, sizeof name, "%s/dw_f64", g);
        if ((st = rd(c, rdw, name, FF_H5_F64, 2, d2)) != FF_OK) goto done;
        ff_cpu_linear_backward_weights(dw, db, dy, x, L, n);
        ff_cpu_linear_backward_data(dx, dy, w->w[l], L, n);
    }
    int64_t d1[1] = {K};
    snprintf(name, sizeof name, "%s/db_f64", g);
    if ((st = rd(c, rdb, name, FF_H5_F64, 1, d1)) != FF_OK) goto done;
    if (rowsel)
        take_rows(dwsel, dw, CRS, c->rows[l], c->n_rows[l]);
    else
        memcpy(dwsel, dw, (size_t)(K * CRS) * 4);
    // A = sum |terms| of every element, in float64; K terms = images x positions (dw, db) or
    // filters x taps (dx; padding taps counted as terms).
    const int64_t P = conv ? L->out.h * L->out.w : 1;
    memset(adw, 0, (size_t)(nr * CRS) * 8);
    memset(adb, 0, (size_t)K * 8);
    memset(adx, 0, (size_t)(n * nin) * 8);
    for (int64_t rr = 0; rr < nr; rr++) {
        const int64_t k = rowsel ? c->rows[l][rr] : rr;
        for (int64_t p = 0; p < n * P; p++) {
            const int64_t img = p / P, pos = p % P;
            const double gy = fabs((double)dy[(img * K + k) * P + pos]);
            if (!rowsel) adb[k] += gy;
            if (gy == 0) continue;
            if (conv) {
                const int64_t oh = pos / L->out.w, ow = pos % L->out.w;
                for (int64_t cc = 0; cc < L->in.c; cc++)
                    for (int r = 0; r < L->kh; r++)
                        for (int s = 0; s < L->kw; s++) {
                            int64_t ih = oh * L->stride - L->pad + r, iw = ow * L->stride - L->pad + s;
                            if (ih < 0 || ih >= L->in.h || iw < 0 || iw >= L->in.w) continue;
                            int64_t xi = ((img * L->in.c + cc) * L->in.h + ih) * L->in.w + iw;
                            int64_t wi = ((k * L->in.c + cc) * L->kh + r) * L->kw + s;
                            adw[rr * CRS + wi - k * CRS] += gy * fabs((double)x[xi]);
                            adx[xi] += gy * fabs((double)w->w[l][wi]);
                        }
            } else {
                for (int64_t i = 0; i < CRS; i++) adw[rr * CRS + i] += gy * fabs((double)x[img * CRS + i]);
            }
        }
    }
    if (rowsel || !conv) {  // linear: db and dx over every output
        memset(adb, 0, (size_t)K * 8);
        memset(adx, 0, (size_t)(n * nin) * 8);
        for (int64_t img = 0; img < n; img++)
            for (int64_t j = 0; j < K; j++) {
                const double gy = fabs((double)dy[img * K + j]);
                adb[j] += gy;
                for (int64_t i = 0; i < nin; i++) adx[img * nin + i] += gy * fabs((double)w->w[l][j * nin + i]);
            }
    }
    const int64_t kdw = n * P, kdb = n * P, kdx = conv ? K * L->kh * L->kw : K;
    ff_tol_result r;
    for (int64_t i = 0; i < nr * CRS; i++) bound[i] = ff_tol_dot_bound(adw[i], kdw);
    // fault hook: element 0 moved to 4 bounds away from the reference
    if (c->cfg->inject_fault && l == c->fault_iso) dwsel[0] = (float)(rdw[0] + 4.0 * bound[0] + 0x1p-120);
    ff_tol_check_bound(&r, dwsel, rdw, bound, nr * CRS);
    snprintf(cs, sizeof cs, "%s train iso %s dw(N=%lld%s)", c->m.name, L->name, (long long)n, rowsel ? ",rows" : "");
    if ((st = add_row(c, cs, "train-iso", l, &r, dwsel, nr * CRS, fault_note(c, l == c->fault_iso))) != FF_OK)
        goto done;
    for (int64_t i = 0; i < K; i++) bound[i] = ff_tol_dot_bound(adb[i], kdb);
    ff_tol_check_bound(&r, db, rdb, bound, K);
    snprintf(cs, sizeof cs, "%s train iso %s db(N=%lld)", c->m.name, L->name, (long long)n);
    if ((st = add_row(c, cs, "train-iso", l, &r, db, K, NULL)) != FF_OK) goto done;
    for (int64_t i = 0; i < n * nin; i++) bound[i] = ff_tol_dot_bound(adx[i], kdx);
    ff_tol_check_bound(&r, dx, rdx, bound, n * nin);
    snprintf(cs, sizeof cs, "%s train iso %s dx(N=%lld)", c->m.name, L->name, (long long)n);
    st = add_row(c, cs, "train-iso", l, &r, dx, n * nin, NULL);
done:
    free(x);
    free(dy);
    free(dw);
    free(db);
    free(dx);
    free(dwsel);
    free(rdw);
    free(rdb);
    free(rdx);
    free(adw);
    free(adb);
    free(adx);
    free(bound);
    free(scratch);
    return st;
}

// relu and maxpool: exact.
static ff_status iso_exact_layer(ctx *c, int l) {
    const ff_layer *L = &c->m.layers[l];
    const int64_t n = c->n_iso;
    const int64_t nin = n * ff_shape_numel(L->in), nout = n * ff_shape_numel(L->out);
    ff_status st = FF_OK;
    float *x = xmalloc((size_t)nin * 4, &st), *dy = xmalloc((size_t)nout * 4, &st);
    float *dx = xmalloc((size_t)nin * 4, &st), *ref = xmalloc((size_t)nin * 4, &st);
    float *y = xmalloc((size_t)nout * 4, &st);
    char name[128], cs[200];
    if (st != FF_OK) goto done;
    int64_t di[4] = {n, L->in.c, L->in.h, L->in.w}, dout[4] = {n, L->out.c, L->out.h, L->out.w};
    int rank = L->in.h == 1 && L->in.w == 1 ? 2 : 4;  // mnist-cnn's relu3 works on (1, 128)
    if (rank == 2) {
        di[1] = nin / n;
        dout[1] = nout / n;
    }
    snprintf(name, sizeof name, "isolation/%s/x", L->name);
    if ((st = rd(c, x, name, FF_H5_F32, rank, di)) != FF_OK) goto done;
    snprintf(name, sizeof name, "isolation/%s/dy", L->name);
    if ((st = rd(c, dy, name, FF_H5_F32, rank, dout)) != FF_OK) goto done;
    snprintf(name, sizeof name, "isolation/%s/dx", L->name);
    if ((st = rd(c, ref, name, FF_H5_F32, rank, di)) != FF_OK) goto done;
    if (L->op == FF_OP_RELU) {
        for (int64_t i = 0; i < nin; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f;  // the forward output
        ff_cpu_relu_backward(dx, dy, y, nin);
    } else {
        ff_cpu_maxpool_backward(dx, dy, x, L, n);
    }
    ff_tol_result r;
    ff_tol_check_exact(&r, dx, ref, nin);
    snprintf(cs, sizeof cs, "%s train iso %s dx(N=%lld)", c->m.name, L->name, (long long)n);
    st = add_row(c, cs, "train-iso", l, &r, dx, nin, NULL);
done:
    free(x);
    free(dy);
    free(dx);
    free(ref);
    free(y);
    return st;
}

static ff_status iso_loss(ctx *c) {
    const int64_t n = c->n_iso, classes = c->m.classes, cnt = n * classes;
    ff_status st = FF_OK;
    float *z = xmalloc((size_t)cnt * 4, &st), *dz = xmalloc((size_t)cnt * 4, &st);
    double *ref = xmalloc((size_t)cnt * 8, &st), *bound = xmalloc((size_t)cnt * 8, &st);
    int32_t *lab = xmalloc((size_t)n * 4, &st);
    uint8_t *lab8 = xmalloc((size_t)n, &st);
    int64_t d2[2] = {n, classes}, d1[1] = {n};
    char cs[96];
    if (st != FF_OK) goto done;
    if ((st = rd(c, z, "isolation/loss/logits", FF_H5_F32, 2, d2)) != FF_OK) goto done;
    if ((st = rd(c, ref, "isolation/loss/dz_f64", FF_H5_F64, 2, d2)) != FF_OK) goto done;
    // mnist-cnn's golden stores uint8 labels (Fashion-MNIST's), a synthetic one int32.
    if (c->synthetic)
        st = rd(c, lab, "isolation/loss/labels", FF_H5_I32, 1, d1);
    else if ((st = rd(c, lab8, "isolation/loss/labels", FF_H5_U8, 1, d1)) == FF_OK)
        for (int64_t i = 0; i < n; i++) lab[i] = lab8[i];
    if (st != FF_OK) goto done;
    for (int64_t i = 0; i < n; i++)
        if (lab[i] < 0 || lab[i] >= classes) {
            st = FF_FAIL(FF_ERR_INPUT, "training golden: label %d, expected 0..%lld", lab[i], (long long)classes - 1);
            goto done;
        }
    // The gradient of the mean loss over the n images: scale 1/n (a power of two or 1 in the goldens).
    const float scale = 1.0f / (float)n;
    ff_cpu_softmax_xent_backward(dz, NULL, z, lab, scale, classes, n);
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < classes; j++) {
            const int64_t k = i * classes + j;
            const double y = j == lab[i] ? 1.0 : 0.0;
            const double p = ref[k] / scale + y;  // ref = (p - [j == y]) * scale
            bound[k] = ff_tol_gamma(classes + 6, FF_TOL_U32) * (fabs(p) + y) * scale + 0x1p-149;
        }
    ff_tol_result r;
    ff_tol_check_bound(&r, dz, ref, bound, cnt);
    snprintf(cs, sizeof cs, "%s train iso softmax-xent dz(N=%lld)", c->m.name, (long long)n);
    st = add_row(c, cs, "train-iso", -1, &r, dz, cnt, NULL);
done:
    free(z);
    free(dz);
    free(ref);
    free(bound);
    free(lab);
    free(lab8);
    return st;
}

// ---------------------------------------------------------------- trajectory

static ff_status read_param(ctx *c, float *w32, double *w64, const char *group32, const char *group64,
                            const char *suffix, const ff_layer *L, bool bias) {
    char name[160];
    const int l = (int)(L - c->m.layers);
    const bool rowsel = !bias && c->n_rows[l] > 0;
    int64_t d[4];
    int rank;
    if (bias) {
        d[0] = L->n_bias;
        rank = 1;
    } else if (L->op == FF_OP_CONV2D) {
        d[0] = L->out_c;
        d[1] = L->in.c;
        d[2] = L->kh;
        d[3] = L->kw;
        rank = 4;
    } else {
        d[0] = rowsel ? c->n_rows[l] : L->out_c;
        d[1] = ff_shape_numel(L->in);
        rank = 2;
    }
    snprintf(name, sizeof name, "%s/%s/%s%s", group32, L->name, bias ? "b" : "w", suffix ? suffix : "");
    FF_TRY(rd(c, w32, name, FF_H5_F32, rank, d));
    snprintf(name, sizeof name, "%s/%s/%s%s", group64, L->name, bias ? "b" : "w",
             suffix ? (strcmp(suffix, "_f32") == 0 ? "_f64" : suffix) : "");
    return rd(c, w64, name, FF_H5_F64, rank, d);
}

// Compares the parameter-shaped tensor ours (full layout of layer L) with the golden pair.
static ff_status param_rows(ctx *c, const char *what, const float *all, const ff_weights *layout, const char *g32,
                            const char *g64, const char *suffix, int fault_layer, int64_t B) {
    ff_status st = FF_OK;
    for (int l = 0; l < c->m.n_layers && st == FF_OK; l++) {
        const ff_layer *L = &c->m.layers[l];
        if (L->param_index < 0) continue;
        for (int bias = 0; bias < 2 && st == FF_OK; bias++) {
            const bool rowsel = !bias && c->n_rows[l] > 0;
            const int64_t I = L->n_weight / L->out_c;  // elements per row (linear: in; conv: C R S)
            const int64_t n = bias ? L->n_bias : rowsel ? c->n_rows[l] * I : L->n_weight;
            float *t32 = xmalloc((size_t)n * 4, &st), *ours = xmalloc((size_t)n * 4, &st);
            double *r64 = xmalloc((size_t)n * 8, &st);
            if (st == FF_OK) st = read_param(c, t32, r64, g32, g64, suffix, L, bias);
            if (st == FF_OK) {
                const float *src = all + ((bias ? layout->b[l] : layout->w[l]) - layout->data);
                if (rowsel)
                    take_rows(ours, src, I, c->rows[l], c->n_rows[l]);
                else
                    memcpy(ours, src, (size_t)n * 4);
                const bool inj = c->cfg->inject_fault && l == fault_layer && (bias == (strcmp(what, "step1") == 0));
                if (inj) ours[0] += 1e-2f;  // beyond both the tolerance and the flip allowance
                ff_tol_result r;
                char cs[200], note[320];
                check_rel(&r, note, sizeof note, ours, r64, t32, n);
                if (inj) snprintf(note + strlen(note), sizeof note - strlen(note), "; fault injected");
                snprintf(cs, sizeof cs, "%s train%s %s %s %s(B=%lld,M=%lld%s)", c->m.name, mode_tag(c), what, L->name,
                         bias ? "b" : "w", (long long)B, (long long)c->mb, rowsel ? ",rows" : "");
                st = add_row(c, cs, strcmp(what, "step1") == 0 ? "train-step1" : "train-final", l, &r, ours, n, note);
            }
            free(t32);
            free(ours);
            free(r64);
        }
    }
    return st;
}

// A synthetic golden's data row: its stored sample indices must be the first K*B of
// ff_shuffle_order(seed, epoch 0) over train_n, and its features and labels what the C generator
// (synthetic.h, through ff_dataset_batch) computes for them, bit for bit: the PyTorch side's port
// (golden/synthetic.py) made them. order receives the shuffle (train_n).
static ff_status data_row(ctx *c, const ff_dataset *ds, const int64_t *order, int64_t K, int64_t B) {
    const int64_t D = ff_shape_numel(c->m.input), n = K * B;
    ff_status st = FF_OK;
    float *ref = xmalloc((size_t)(n * D) * 4, &st), *ours = xmalloc((size_t)(n * D) * 4, &st);
    int32_t *rl = xmalloc((size_t)n * 4, &st), *ol = xmalloc((size_t)n * 4, &st);
    int64_t *ri = xmalloc((size_t)n * 8, &st);
    if (st != FF_OK) goto done;
    int64_t d3[3] = {K, B, D}, d2[2] = {K, B};
    if ((st = rd(c, ref, "data/features", FF_H5_F32, 3, d3)) != FF_OK) goto done;
    if ((st = rd(c, rl, "data/labels", FF_H5_I32, 2, d2)) != FF_OK) goto done;
    if ((st = rd(c, ri, "data/indices", FF_H5_I64, 2, d2)) != FF_OK) goto done;
    ff_dataset_batch(ours, ol, ds, order, 0, n);
    int64_t bad_idx = 0, bad_lab = 0;
    for (int64_t i = 0; i < n; i++) {
        bad_idx += ri[i] != order[i];
        bad_lab += rl[i] != ol[i];
    }
    const uint64_t dh = ff_digest_f32(ours, (size_t)(n * D)), dr = ff_digest_f32(ref, (size_t)(n * D));
    ff_tol_result r;
    ff_tol_check_exact(&r, ours, ref, n * D);
    r.pass = r.pass && dh == dr && bad_idx == 0 && bad_lab == 0;
    if (c->cfg->inject_fault) r.pass = false;
    char cs[160], note[200], a[17], b[17];
    snprintf(note, sizeof note,
             "features digest %s (golden %s); %lld of %lld indices differ from the shuffle, %lld labels from the "
             "teacher%s",
             ff_digest_hex(a, dh), ff_digest_hex(b, dr), (long long)bad_idx, (long long)n, (long long)bad_lab,
             c->cfg->inject_fault ? "; fault injected" : "");
    snprintf(cs, sizeof cs, "%s train data(synthetic,seed=%llu,n=%lld,K=%lld,B=%lld)", c->m.name,
             (unsigned long long)ds->synth.seed, (long long)c->train_n, (long long)K, (long long)B);
    st = add_row(c, cs, "train-data", -1, &r, ours, n * D, note);
done:
    free(ref);
    free(ours);
    free(rl);
    free(ol);
    free(ri);
    return st;
}

// The loss trajectory row: the same relative rule as the parameter rows, in float64 (ours are
// float64 means of float32 losses).
static ff_status loss_row(ctx *c, const double *ours_in, const double *l32, const double *l64, int64_t K, int64_t B) {
    double ours[64];
    for (int64_t k = 0; k < K; k++) ours[k] = ours_in[k];
    double dev = 0;
    for (int64_t k = 0; k < K; k++) dev = fmax(dev, fabs(l32[k] - l64[k]));
    if (c->cfg->inject_fault) ours[K - 1] += 1e-2;
    ff_tol_result r;
    memset(&r, 0, sizeof r);
    r.rule = FF_TOL_BOUND;
    r.n = K;
    r.worst = -1;
    r.pass = true;
    float oursf[64];
    for (int64_t k = 0; k < K; k++) {
        double bound = FF_TRAIN_GOLDEN_FACTOR * dev + 0x1p-24 * fabs(l64[k]);
        double err = fabs(ours[k] - l64[k]);
        oursf[k] = (float)ours[k];
        double ratio = err / bound;
        if (r.worst < 0 || ratio > r.max_ratio) {
            r.max_ratio = ratio;
            r.worst = k;
            r.ours_worst = (float)ours[k];
            r.ref_worst = l64[k];
            r.bound_worst = bound;
        }
        r.max_abs = fmax(r.max_abs, err);
        if (!(err <= bound)) {
            r.n_fail++;
            r.pass = false;
        }
    }
    char note[160], cs[120];
    snprintf(note, sizeof note, "loss %.6f -> %.6f (torch f32 %.6f -> %.6f)%s", ours[0], ours[K - 1], l32[0],
             l32[K - 1], c->cfg->inject_fault ? "; fault injected" : "");
    snprintf(cs, sizeof cs, "%s train%s loss trajectory(K=%lld,B=%lld,M=%lld)", c->m.name, mode_tag(c), (long long)K,
             (long long)B, (long long)c->mb);
    return add_row(c, cs, "train-loss", -1, &r, oursf, K, note);
}

// The steps through the trainer of cfg->mode (and cfg->comm): mnist-cnn from the stored uint8
// images, normalised here; a synthetic golden from the C generator's training set, each rank
// loading its own micro-batches (ff_train_step), after the data row.
static ff_status trajectory(ctx *c, ff_weights *w, int64_t K, int64_t B, uint64_t seed, float lr, float mom) {
    const int64_t D = ff_shape_numel(c->m.input);
    ff_status st = FF_OK;
    uint8_t *img = NULL, *lab = NULL;
    float *x = NULL;
    int32_t *labels = NULL;
    int64_t *order = NULL;
    ff_dataset ds;
    memset(&ds, 0, sizeof ds);
    float *grad1 = xmalloc((size_t)w->n_total * 4, &st);
    double *l32 = xmalloc((size_t)K * 8, &st), *l64 = xmalloc((size_t)K * 8, &st), *ours = xmalloc((size_t)K * 8, &st);
    ff_trainer *t = NULL;
    if (st != FF_OK) goto done;
    int64_t dk[1] = {K};
    if ((st = rd(c, l32, "trajectory/loss_f32", FF_H5_F64, 1, dk)) != FF_OK) goto done;
    if ((st = rd(c, l64, "trajectory/loss_f64", FF_H5_F64, 1, dk)) != FF_OK) goto done;
    if (c->synthetic) {
        if (c->train_n < K * B) {
            st = FF_FAIL(FF_ERR_INPUT, "training golden: train_n %lld, expected at least steps x batch = %lld",
                         (long long)c->train_n, (long long)(K * B));
            goto done;
        }
        order = xmalloc((size_t)c->train_n * 8, &st);
        if (st != FF_OK) goto done;
        if ((st = ff_dataset_synthetic(&ds, seed, 0, c->train_n, D, c->m.classes)) != FF_OK) goto done;
        ff_shuffle_order(order, c->train_n, seed, 0);
        if ((st = data_row(c, &ds, order, K, B)) != FF_OK) goto done;
    } else {
        img = xmalloc((size_t)(K * B * D), &st);
        lab = xmalloc((size_t)(K * B), &st);
        x = xmalloc((size_t)(B * D) * 4, &st);
        labels = xmalloc((size_t)B * 4, &st);
        if (st != FF_OK) goto done;
        int64_t di[4] = {K, B, c->m.input.h, c->m.input.w}, dl[2] = {K, B};
        if ((st = rd(c, img, "data/images", FF_H5_U8, 4, di)) != FF_OK) goto done;
        if ((st = rd(c, lab, "data/labels", FF_H5_U8, 2, dl)) != FF_OK) goto done;
    }
    ff_train_options o;
    ff_train_options_default(&o);
    o.batch = B;
    o.microbatch = c->mb < B ? c->mb : B;
    o.lr = lr;
    o.momentum = mom;
    o.weight_decay = 0.0f;
    if (c->cfg->exec) {  // the command's device and communication choices (never its plan or hooks)
        o.exec.gpu = c->cfg->exec->gpu;
        o.exec.transport = c->cfg->exec->transport;
        o.exec.comm_timeout_s = c->cfg->exec->comm_timeout_s;
    }
    o.exec.mode = c->cfg->mode;  // the trajectory on that mode's device (and communicator)
    if ((st = ff_trainer_create(&t, &c->m, w, &o, c->cfg->comm)) != FF_OK) goto done;
    float table[256];
    ff_idx_norm_table(table);
    for (int64_t k = 0; k < K; k++) {
        if (c->synthetic) {
            if ((st = ff_train_step(t, &ours[k], &ds, order + k * B, B)) != FF_OK) goto done;
        } else {
            for (int64_t i = 0; i < B * D; i++) x[i] = table[img[k * B * D + i]];
            for (int64_t i = 0; i < B; i++) labels[i] = lab[k * B + i];
            if ((st = ff_train_step_tensor(t, &ours[k], x, labels, B)) != FF_OK) goto done;
        }
        if (k == 0) {
            if ((st = ff_trainer_sync(t)) != FF_OK) goto done;
            memcpy(grad1, ff_trainer_grad(t), (size_t)w->n_total * 4);
        }
    }
    if ((st = ff_trainer_sync(t)) != FF_OK) goto done;
    if ((st = param_rows(c, "step1", grad1, w, "step1_grad", "step1_grad", "_f32", c->fault_param, B)) != FF_OK)
        goto done;
    if ((st = loss_row(c, ours, l32, l64, K, B)) != FF_OK) goto done;
    st = param_rows(c, "final", w->data, w, "trajectory/final_f32", "trajectory/final_f64", NULL, c->fault_param, B);
done:
    ff_trainer_destroy(t);
    ff_dataset_free(&ds);
    free(img);
    free(lab);
    free(x);
    free(grad1);
    free(labels);
    free(order);
    free(l32);
    free(l64);
    free(ours);
    return st;
}

// The rows a layer's weight-shaped tensors are stored for: /fc1_rows (mnist-cnn's layout) or
// /rows/<layer> (linear layers only); none: the whole tensor.
static ff_status read_rows(ctx *c) {
    for (int l = 0; l < c->m.n_layers; l++) {
        const ff_layer *L = &c->m.layers[l];
        if (L->param_index < 0) continue;
        char name[96];
        snprintf(name, sizeof name, "rows/%s", L->name);
        const char *ds = ff_h5_exists(c->file, name)                                        ? name
                         : strcmp(L->name, "fc1") == 0 && ff_h5_exists(c->file, "fc1_rows") ? "fc1_rows"
                                                                                            : NULL;
        if (!ds) continue;
        int rank;
        int64_t dims[FF_H5_MAX_RANK];
        FF_TRY(ff_h5_shape(&rank, dims, c->file, ds));
        if (L->op != FF_OP_LINEAR || rank != 1 || dims[0] < 1 || dims[0] > MAX_STORED_ROWS || dims[0] > L->out_c)
            return FF_FAIL(FF_ERR_INPUT, "training golden '%s': %s has %lld entries for %s layer %s, expected 1..%d",
                           c->path, ds, rank == 1 ? (long long)dims[0] : -1LL, ff_op_name(L->op), L->name,
                           MAX_STORED_ROWS);
        c->n_rows[l] = (int)dims[0];
        FF_TRY(ff_h5_read(c->rows[l], c->file, ds, FF_H5_I64, 1, dims));
        for (int i = 0; i < c->n_rows[l]; i++)
            if (c->rows[l][i] < 0 || c->rows[l][i] >= L->out_c)
                return FF_FAIL(FF_ERR_INPUT, "training golden '%s': %s[%d] = %lld, expected 0..%lld", c->path, ds, i,
                               (long long)c->rows[l][i], (long long)L->out_c - 1);
    }
    return FF_OK;
}

// An optional integer attribute of the root: *out keeps its default when absent.
static ff_status opt_attr(ctx *c, int64_t *out, const char *attr) {
    if (!ff_h5_attr_exists(c->file, "/", attr)) return FF_OK;
    return ff_h5_read_attr_i64(out, c->file, "/", attr);
}

// ---------------------------------------------------------------- entry

ff_status ff_train_verify_golden(ff_verify_report *rep, const ff_train_golden_config *cfg) {
    ctx c;
    memset(&c, 0, sizeof c);
    c.rep = rep;
    c.cfg = cfg;
    c.file = -1;
    const char *model = cfg->model ? cfg->model : "mnist-cnn";
    char path[1100], stem[64];
    snprintf(stem, sizeof stem, "train-%s", model);
    if (cfg->golden)
        snprintf(path, sizeof path, "%s", cfg->golden);
    else
        ff_golden_default_path(path, sizeof path, stem);
    c.path = path;
    FF_TRY(ff_model_init(&c.m, model));
    FF_TRY(open_checked(&c));
    ff_weights w = {0};
    ff_status st = FF_OK;
    char s[64];
    int64_t K = 0, B = 0, seed = 0, ver = 0;
#define TRY(expr)                   \
    do {                            \
        st = (expr);                \
        if (st != FF_OK) goto done; \
    } while (0)
    TRY(ff_h5_read_attr_i64(&ver, c.file, "/", "format_version"));
    TRY(ff_h5_read_attr_str(s, sizeof s, c.file, "/", "kind"));
    if (ver != 1 || strcmp(s, "train") != 0) {
        st = FF_FAIL(FF_ERR_INPUT,
                     "training golden '%s': kind '%s' version %lld, expected 'train' "
                     "version 1",
                     path, s, (long long)ver);
        goto done;
    }
    if (ff_h5_attr_exists(c.file, "/", "model")) {
        TRY(ff_h5_read_attr_str(s, sizeof s, c.file, "/", "model"));
        if (strcmp(s, model) != 0) {
            st = FF_FAIL(FF_ERR_INPUT, "training golden '%s' is for model '%s': expected '%s'", path, s, model);
            goto done;
        }
    }
    TRY(ff_h5_read_attr_i64(&K, c.file, "/", "steps"));
    TRY(ff_h5_read_attr_i64(&B, c.file, "/", "batch"));
    TRY(ff_h5_read_attr_i64(&seed, c.file, "/", "seed"));
    if (K < 1 || K > 64 || B < 1 || B > 256) {
        st = FF_FAIL(FF_ERR_INPUT,
                     "training golden '%s': steps %lld, batch %lld; expected 1..64, "
                     "1..256",
                     path, (long long)K, (long long)B);
        goto done;
    }
    c.n_iso = 1;
    c.mb = 8;
    TRY(opt_attr(&c, &c.n_iso, "iso_images"));
    TRY(opt_attr(&c, &c.mb, "microbatch"));
    if (ff_h5_attr_exists(c.file, "/", "data")) {
        TRY(ff_h5_read_attr_str(s, sizeof s, c.file, "/", "data"));
        c.synthetic = strcmp(s, "synthetic") == 0;
        if (!c.synthetic) {
            st = FF_FAIL(FF_ERR_INPUT, "training golden '%s': data '%s', expected 'synthetic' (or none: Fashion-MNIST)",
                         path, s);
            goto done;
        }
        TRY(ff_h5_read_attr_i64(&c.train_n, c.file, "/", "train_n"));
    }
    if (c.n_iso < 1 || c.n_iso > B || c.mb < 1 || c.mb > B || (c.synthetic && (c.train_n < 1 || c.train_n > 1 << 24))) {
        st = FF_FAIL(FF_ERR_INPUT,
                     "training golden '%s': iso_images %lld, microbatch %lld, train_n %lld; expected 1..batch, "
                     "1..batch, 1..2^24",
                     path, (long long)c.n_iso, (long long)c.mb, (long long)c.train_n);
        goto done;
    }
    if (!c.synthetic && (c.m.input.c != 1 || c.m.input.h * c.m.input.w != ff_shape_numel(c.m.input))) {
        st = FF_FAIL(FF_ERR_INPUT, "training golden '%s': model %s does not take 1-channel images", path, model);
        goto done;
    }
    TRY(read_rows(&c));
    for (int l = 0, np = 0; l < c.m.n_layers; l++)
        if (c.m.layers[l].param_index >= 0) {
            if (np++ == 1) c.fault_iso = l;
            c.fault_param = l;
        }
    // The lr and momentum are stored as float64 attributes by h5py; the recipe is fixed here and
    // cross-checked through the loss trajectory.
    TRY(ff_weights_alloc(&w, &c.m));
    ff_weights_generate(&w, &c.m, (uint64_t)seed);
    {
        char want[64], have[17], cs[96];
        TRY(ff_h5_read_attr_str(want, sizeof want, c.file, "/", "initial_weights_digest"));
        ff_digest_hex(have, ff_weights_digest(&w));
        ff_tol_result r;
        memset(&r, 0, sizeof r);
        r.rule = FF_TOL_EXACT;
        r.worst = -1;
        r.pass = strcmp(want, have) == 0;
        char note[128];
        snprintf(note, sizeof note, "generator %s, golden %s", have, want);
        snprintf(cs, sizeof cs, "%s train weights(generator seed)", model);
        TRY(add_row(&c, cs, "weights", -1, &r, NULL, 0, note));
        rep->rows[rep->n_rows - 1].digest = ff_weights_digest(&w);  // the row's output: the weights
    }
    for (int l = 0; l < c.m.n_layers; l++) {
        const ff_layer *L = &c.m.layers[l];
        if (L->op == FF_OP_CONV2D || L->op == FF_OP_LINEAR)
            TRY(iso_param_layer(&c, &w, l));
        else if (L->op == FF_OP_RELU || L->op == FF_OP_MAXPOOL)
            TRY(iso_exact_layer(&c, l));
    }
    TRY(iso_loss(&c));
    TRY(trajectory(&c, &w, K, B, (uint64_t)seed, 0.01f, 0.9f));
#undef TRY
done:
    ff_weights_free(&w);
    if (c.file >= 0) H5Fclose((hid_t)c.file);
    rep->pass = st == FF_OK && rep->failed == 0 && rep->n_rows > 0;
    if (st != FF_OK) return ff_fail_context(st, "training golden '%s'", path);
    return FF_OK;
}
