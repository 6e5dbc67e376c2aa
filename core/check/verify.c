// The check runner (verify.h): golden in, executor through ff_exec_*, rows out.
#include "fivefold/verify.h"

#include <inttypes.h>
#include <math.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

#include "fivefold/comm.h"
#include "fivefold/digest.h"
#include "fivefold/linear_split.h"
#include "fivefold/winograd.h"

void ff_verify_config_default(ff_verify_config *c) {
    memset(c, 0, sizeof *c);
    c->model = "mnist-cnn";
    ff_exec_options_default(&c->exec);
    c->ranks = 1;
}

void ff_verify_report_free(ff_verify_report *rep) {
    free(rep->rows);
    free(rep->input);
    memset(rep, 0, sizeof *rep);
}

static ff_verify_row *new_row(ff_verify_report *rep) {
    if (rep->n_rows == rep->cap) {
        int cap = rep->cap ? 2 * rep->cap : 64;
        ff_verify_row *r = realloc(rep->rows, (size_t)cap * sizeof *r);
        if (!r) return NULL;
        rep->rows = r;
        rep->cap = cap;
    }
    ff_verify_row *r = &rep->rows[rep->n_rows++];
    memset(r, 0, sizeof *r);
    r->layer = -1;
    return r;
}

static void finish_row(ff_verify_report *rep, ff_verify_row *r, FILE *progress) {
    if (r->pass)
        rep->passed++;
    else
        rep->failed++;
    if (progress) {
        ff_verify_print_row(progress, r);
        fflush(progress);
    }
}

// "(…,N=2,P=1,split=none)" tail shared by every case string.
static void case_tail(char *buf, size_t cap, int64_t n, int ranks, ff_split split, int fault) {
    if (fault >= 0)
        snprintf(buf, cap, "N=%lld,P=%d,split=%s,fault=%d", (long long)n, ranks, ff_split_name(split), fault);
    else
        snprintf(buf, cap, "N=%lld,P=%d,split=%s", (long long)n, ranks, ff_split_name(split));
}

static void layer_case(char *buf, size_t cap, const char *prefix, const ff_layer *L, const char *tail) {
    switch (L->op) {
        case FF_OP_CONV2D:
            snprintf(buf, cap, "%s %s(K=%lld,R=%d,s=%d,p=%d,%s)", prefix, L->name, (long long)L->out.c, L->kh,
                     L->stride, L->pad, tail);
            break;
        case FF_OP_MAXPOOL: snprintf(buf, cap, "%s %s(R=%d,s=%d,%s)", prefix, L->name, L->kh, L->stride, tail); break;
        case FF_OP_LRN: snprintf(buf, cap, "%s %s(size=%d,%s)", prefix, L->name, L->lrn_size, tail); break;
        case FF_OP_LINEAR:
            snprintf(buf, cap, "%s %s(in=%lld,out=%lld,%s)", prefix, L->name, (long long)ff_shape_numel(L->in),
                     (long long)L->out.c, tail);
            break;
        case FF_OP_SOFTMAX:
            snprintf(buf, cap, "%s %s(classes=%lld,%s)", prefix, L->name, (long long)L->out.c, tail);
            break;
        default: snprintf(buf, cap, "%s %s(%s)", prefix, L->name, tail); break;
    }
}

static void append_note(ff_verify_row *r, const char *fmt, const char *a) {
    size_t l = strlen(r->note);
    snprintf(r->note + l, sizeof r->note - l, "%s", l ? "; " : "");
    l = strlen(r->note);
    snprintf(r->note + l, sizeof r->note - l, fmt, a);
}

// Per-layer A = |b| + sum|w x| from the golden float32 input (cached: the end-to-end bound needs
// them too).
// For a layer the executor computes by Winograd (wg[i] = m > 0), A is the Winograd rule's Ybar
// instead (ff_winograd_absdot: the absolute sum of every product path, golden/README.md).
static ff_status absdot_for(double **A, const int *wg, const ff_golden *g, const ff_model *m, const ff_weights *wt,
                            int i, int64_t n) {
    if (A[i]) return FF_OK;
    const ff_layer *L = &m->layers[i];
    size_t count = (size_t)(n * ff_shape_numel(L->out));
    A[i] = malloc(count * sizeof(double));
    if (!A[i]) return FF_FAIL(FF_ERR_OOM, "verify: %zu doubles for the bound of %s", count, L->name);
    if (L->op == FF_OP_CONV2D && wg[i])
        return ff_winograd_absdot(A[i], g->layers[i].in_f32, wt->w[i], wt->b[i], L, wg[i], n);
    if (L->op == FF_OP_CONV2D)
        ff_tol_absdot_conv(A[i], g->layers[i].in_f32, NULL, wt->w[i], wt->b[i], L, n, 1);
    else
        ff_tol_absdot_linear(A[i], g->layers[i].in_f32, NULL, wt->w[i], wt->b[i], L, n, 1);
    return FF_OK;
}

// The end-to-end tolerance (README: end to end), for layers 0..upto from the golden float32
// activations and the weights: sigma, the standard deviation of the error when roundings are
// independent and zero-mean, propagated layer by layer. (A worst-case first-order bound was
// propagated too; compounding sum |W| over the layers made it many orders of magnitude wider than
// any real error, so it decided nothing and is no longer computed.)
static ff_status e2e_sigma(double **sigma_out, double **A, const int *wg, double prod_rel, const ff_golden *g,
                           const ff_model *m, const ff_weights *wt, int upto, int64_t n) {
    size_t n0 = (size_t)(n * ff_shape_numel(m->input));
    double *sg = calloc(n0, sizeof(double));
    double *sn = NULL, *tmp = NULL, *tmp2 = NULL;
    ff_status st = FF_OK;
    if (!sg) goto oom;
    for (int i = 0; i <= upto; i++) {
        const ff_layer *L = &m->layers[i];
        size_t count = (size_t)(n * ff_shape_numel(L->out));
        size_t cin = (size_t)(n * ff_shape_numel(L->in));
        sn = malloc(count * sizeof(double));
        if (!sn) goto oom;
        switch (L->op) {
            case FF_OP_CONV2D:
            case FF_OP_LINEAR: {
                if ((st = absdot_for(A, wg, g, m, wt, i, n)) != FF_OK) goto fail;
                // A Winograd layer's own rounding model replaces the dot one; the input error passes
                // through the same linear map W either way (its convs are float32 always).
                const bool wino = L->op == FF_OP_CONV2D && wg[i];
                tmp = malloc(count * sizeof(double));
                tmp2 = malloc(cin * sizeof(double));
                if (!tmp || !tmp2) goto oom;
                for (size_t k = 0; k < cin; k++) tmp2[k] = sg[k] * sg[k];
                if (L->op == FF_OP_CONV2D)
                    ff_tol_absdot_conv(tmp, NULL, tmp2, wt->w[i], NULL, L, n, 2);
                else
                    ff_tol_absdot_linear(tmp, NULL, tmp2, wt->w[i], NULL, L, n, 2);
                if (wino)
                    ff_tol_stat_winograd(sn, A[i], tmp, ff_winograd_roundings(L, wg[i]), (int64_t)count);
                else
                    ff_tol_stat_dot(sn, A[i], tmp, L->fan_in + 1, (int64_t)count, prod_rel);
                free(tmp);
                free(tmp2);
                tmp = tmp2 = NULL;
                break;
            }
            case FF_OP_RELU:
            case FF_OP_FLATTEN: memcpy(sn, sg, count * sizeof(double)); break;  // 1-Lipschitz and exact
            case FF_OP_MAXPOOL: ff_tol_prop_maxpool(sn, sg, L, n); break;
            case FF_OP_LRN:
                // few-term, transcendental: the worst-case propagation, with its local 13 ULP
                ff_tol_prop_lrn(sn, sg, g->layers[i].in_f32, g->layers[i].out_f32, L, n);
                break;
            case FF_OP_SOFTMAX:
                ff_tol_prop_softmax(sn, sg, g->layers[i].in_f32, g->layers[i].out_f32, L->out.c, n);
                break;
        }
        free(sg);
        sg = sn;
        sn = NULL;
    }
    *sigma_out = sg;
    return FF_OK;
oom:
    st = FF_FAIL(FF_ERR_OOM, "verify: end-to-end tolerance");
fail:
    free(sg);
    free(sn);
    free(tmp);
    free(tmp2);
    return st;
}

static bool matches(const regex_t *re, const char *s) {
    return !re || regexec(re, s, 0, NULL, 0) == 0;
}

static void check_digest(ff_verify_row *r, const ff_golden_class *rec, int slot, bool full_batch) {
    if (!full_batch || !rec || !rec->has[slot]) return;
    r->expected_digest = rec->digest[slot];
    r->digest_state = r->digest == r->expected_digest ? 1 : -1;
    if (r->digest_state < 0) {
        char hx[17];
        ff_digest_hex(hx, r->expected_digest);
        append_note(
            r, "digest differs from the recorded %s reference digest (a deliberate change? run verify --record)", hx);
        r->digest_only = r->pass;
        r->pass = false;
    }
}

typedef struct {
    const ff_verify_config *cfg;
    const ff_model *m;
    const ff_golden *g;
    const ff_weights *wt;
    ff_executor *e;
    ff_verify_report *rep;
    regex_t *re;
    int64_t n;
    const char *cls;               // the plan's digest class ("cpu", "gpu", "gpu-direct", ...); "": none
    const ff_golden_class *known;  // the golden's record of that class; NULL: it has none
    bool full_batch, root;
    char prefix[96], tail[96];
    double **A;
    double prod_rel;        // extra relative error per product (--precision tf32, tf32x3), 0 for float32
    int k_mult;             // additions per term the dot rules count (FF_TOL_TF32X3_TERMS for tf32x3, else 1)
    int wg[FF_MAX_LAYERS];  // Winograd tile size m per layer (0: a direct dot product), from the plan
    bool has_class;         // the plan has a digest class (own kernels in float32)
    bool stat_model;        // the statistical rule applies (own kernels, float32: known orders)
    bool gpu_split;         // linear layers run linear_split.h's order (the cuda device)
    ff_executor *serial;    // a multi-rank mode without recorded digests of its class: the same
                            // device and plan on one process (serial, cuda), for its digests
    char serial_name[8];    // that mode's name
    uint64_t rec[FF_GOLDEN_N_SLOTS];
    bool rec_set[FF_GOLDEN_N_SLOTS];
} run_ctx;

// The row's digest against the reference of its class: the recorded one (whole golden batch), or,
// for a multi-rank mode where none is recorded (a user's golden, a partial batch, a plan whose
// class the golden has no record of), the digest of the same computation on one process made in
// this run: mpi = serial bit for bit is proven either way. A class with no record otherwise is
// compared by tolerance alone, and the row says so: a missing record is never a mismatch.
static ff_status compare_digest(run_ctx *c, ff_verify_row *r, int slot, const float *in, int first, int last,
                                size_t count) {
    if (!c->has_class) {
        append_note(r, "digest: not compared (%s: own class)",
                    ff_exec_plan(c->e)->opt.backend == FF_BACKEND_VENDOR ? "vendor backend" : "tf32");
        return FF_OK;
    }
    if (c->full_batch && c->known && c->known->has[slot]) {
        check_digest(r, c->known, slot, true);
        return FF_OK;
    }
    if (!c->serial) {
        // (A partial batch: the records are of the whole golden batch, so there is nothing to say.)
        if (c->full_batch)
            append_note(r,
                        c->known ? "digest: not compared (class %s has no record of this output; --record writes one)"
                                 : "digest: not compared (no record for class %s; --record writes one)",
                        c->cls);
        return FF_OK;
    }
    float *ref = malloc(count * sizeof(float));
    if (!ref) return FF_FAIL(FF_ERR_OOM, "verify: %zu floats for the serial reference digest", count);
    ff_status st = ff_exec_forward(c->serial, ref, in, c->n, first, last);
    if (st == FF_OK) {
        r->expected_digest = ff_digest_f32(ref, count);
        r->digest_state = r->digest == r->expected_digest ? 2 : -2;
        snprintf(r->digest_ref, sizeof r->digest_ref, "%s", c->serial_name);
        if (r->digest_state < 0) {
            char hx[17], b[160];
            ff_digest_hex(hx, r->expected_digest);
            snprintf(b, sizeof b, "digest differs from %s's %s computed in this run (%s must equal %s bit for bit)",
                     c->serial_name, hx, ff_mode_name(c->cfg->exec.mode), c->serial_name);
            append_note(r, "%s", b);
            r->pass = false;
        }
    }
    free(ref);
    return st;
}

// The statistical rule of a dot layer (tolerance.h, golden/README.md 1c) with the variance of the
// algorithm that computed it: the chain of the CPU reference (and of the GPU's direct conv: an fma
// chain in the same order), linear_split.h's chunks for the GPU's linear layers, and for Winograd
// the over-estimate of ff_tol_winograd_var with the max rule alone.
static ff_status check_stat(run_ctx *c, ff_verify_row *r, int i, const float *out, size_t count) {
    const ff_layer *L = &c->m->layers[i];
    const ff_golden_layer *gl = &c->g->layers[i];
    double *var = malloc(count * sizeof(double)), *bnd = malloc(count * sizeof(double));
    ff_status st = FF_OK;
    if (!var || !bnd) {
        st = FF_FAIL(FF_ERR_OOM, "verify: %zu doubles for the statistical rule of %s", 2 * count, L->name);
        goto out;
    }
    const bool wino = L->op == FF_OP_CONV2D && c->wg[i];
    const int64_t inner = L->op == FF_OP_CONV2D ? L->out.h * L->out.w : 1;
    if (wino) {
        const int64_t nround = ff_winograd_roundings(L, c->wg[i]);
        ff_tol_winograd_var(var, c->A[i], nround, (int64_t)count);
        ff_tol_winograd_bounds(bnd, c->A[i], (int64_t)count, nround, ff_winograd_ref_terms(L));
    } else {
        if (L->op == FF_OP_CONV2D)
            st = ff_tol_chain_var_conv(var, NULL, gl->in_f32, c->wt->w[i], c->wt->b[i], L, c->n);
        else
            ff_tol_chain_var_linear(var, NULL, gl->in_f32, c->wt->w[i], c->wt->b[i], L,
                                    c->gpu_split ? ff_linear_split(L->fan_in) : 1, c->n);
        ff_tol_dot_bounds(bnd, c->A[i], (int64_t)count, (L->fan_in + 1) * c->k_mult, c->prod_rel);
    }
    if (st == FF_OK) ff_tol_check_stat(&r->stat, out, gl->out_f64, var, bnd, (int64_t)count, inner, L->out.c, !wino);
out:
    free(var);
    free(bnd);
    return st;
}

static ff_status run_layer(run_ctx *c, int i) {
    const ff_layer *L = &c->m->layers[i];
    const ff_golden_layer *gl = &c->g->layers[i];
    char cs[384];
    layer_case(cs, sizeof cs, c->prefix, L, c->tail);
    if (!matches(c->re, cs)) return FF_OK;
    size_t count = (size_t)(c->n * ff_shape_numel(L->out));
    float *out = malloc(count * sizeof(float));
    if (!out) return FF_FAIL(FF_ERR_OOM, "verify: %zu floats for %s", count, L->name);
    ff_status st = ff_exec_forward(c->e, out, gl->in_f32, c->n, i, i);
    if (st != FF_OK) {
        free(out);
        return ff_fail_context(st, "verify %s", cs);
    }
    if (!c->root) {
        free(out);
        return FF_OK;
    }
    ff_verify_row *r = new_row(c->rep);
    if (!r) {
        free(out);
        return FF_FAIL(FF_ERR_OOM, "verify: rows");
    }
    snprintf(r->case_str, sizeof r->case_str, "%s", cs);
    snprintf(r->check, sizeof r->check, "layer");
    r->layer = i;
    r->digest = ff_digest_f32(out, count);
    switch (L->op) {
        case FF_OP_CONV2D:
        case FF_OP_LINEAR:
            st = absdot_for(c->A, c->wg, c->g, c->m, c->wt, i, c->n);
            if (st != FF_OK) {
                free(out);
                return st;
            }
            // The Winograd rule's K is the float64 reference's own dot length (the direct conv of L:
            // fan_in + 1 terms); for a space-to-depth layer ff_winograd_ref_terms takes the larger
            // count of L' (C'*9 + 1), which only loosens gamma_K(2^-53) and keeps the bound valid
            // whichever way the reference was summed. nround and Ybar are L''s (winograd.h).
            if (L->op == FF_OP_CONV2D && c->wg[i])
                ff_tol_check_winograd(&r->tol, out, gl->out_f64, c->A[i], (int64_t)count,
                                      ff_winograd_roundings(L, c->wg[i]), ff_winograd_ref_terms(L));
            else
                ff_tol_check_dot(&r->tol, out, gl->out_f64, c->A[i], (int64_t)count, (L->fan_in + 1) * c->k_mult,
                                 c->prod_rel);
            if (c->stat_model) st = check_stat(c, r, i, out, count);
            if (st != FF_OK) {
                free(out);
                return st;
            }
            break;
        case FF_OP_RELU:
        case FF_OP_MAXPOOL:
        case FF_OP_FLATTEN: ff_tol_check_exact(&r->tol, out, gl->out_f32, (int64_t)count); break;
        case FF_OP_LRN: ff_tol_check_ulp(&r->tol, out, gl->out_f64, NULL, FF_TOL_LRN_ULP, (int64_t)count); break;
        case FF_OP_SOFTMAX: {
            double *bu = malloc(count * sizeof(double));
            if (!bu) {
                free(out);
                return FF_FAIL(FF_ERR_OOM, "verify: softmax bound");
            }
            int64_t classes = L->out.c;
            for (int64_t img = 0; img < c->n; img++) {
                const float *x = gl->in_f32 + img * classes;
                float mx = x[0];
                for (int64_t j = 1; j < classes; j++)
                    if (x[j] > mx) mx = x[j];
                for (int64_t j = 0; j < classes; j++)
                    bu[img * classes + j] = ff_tol_softmax_ulp((double)mx - (double)x[j], classes);
            }
            ff_tol_check_ulp(&r->tol, out, gl->out_f64, bu, 0.0, (int64_t)count);
            free(bu);
            break;
        }
    }
    r->pass = r->tol.pass && (!r->stat.applied || r->stat.pass);
    if (r->tol.n_nan) append_note(r, "%s", "NaN/inf in output");
    if (r->stat.applied && !r->stat.pass) {
        char b[200];
        snprintf(b, sizeof b, "statistical rule: max z %.3g (limit %.3g) at [%lld]", r->stat.max_z, r->stat.t_max,
                 (long long)r->stat.worst);
        if (r->stat.rms_applied) {
            size_t l = strlen(b);
            snprintf(b + l, sizeof b - l, ", rms z %.3g (limit %.3g) in %s %lld", r->stat.max_rms, r->stat.t_rms,
                     L->op == FF_OP_CONV2D ? "channel" : "feature", (long long)r->stat.worst_group);
        }
        append_note(r, "%s", b);
    }
    if (!r->tol.pass) {
        char b[96];
        snprintf(b, sizeof b, "%lld of %lld elements outside the bound", (long long)r->tol.n_fail, (long long)r->tol.n);
        append_note(r, "%s", b);
    }
    // Exact layers: our bits are the golden's bits, so the digests must agree too (+0/-0 included).
    if (L->op == FF_OP_RELU || L->op == FF_OP_MAXPOOL || L->op == FF_OP_FLATTEN) {
        uint64_t gd = ff_digest_f32(gl->out_f32, count);
        if (gd != r->digest) {
            char hx[17];
            append_note(r, "exact layer: digest differs from the golden tensor's %s", ff_digest_hex(hx, gd));
            r->pass = false;
        }
    }
    st = compare_digest(c, r, i, gl->in_f32, i, i, count);
    if (st != FF_OK) {
        free(out);
        return st;
    }
    c->rec[i] = r->digest;
    c->rec_set[i] = true;
    finish_row(c->rep, r, c->cfg->progress);
    free(out);
    return FF_OK;
}

static ff_status run_end_to_end(run_ctx *c, bool logits) {
    const ff_model *m = c->m;
    const ff_golden *g = c->g;
    int last = logits ? g->logits_layer : m->n_layers - 1;
    const ff_layer *L = &m->layers[last];
    char cs[384];
    snprintf(cs, sizeof cs, "%s end-to-end-%s(%s,%s)", c->prefix, logits ? "logits" : "output", L->name, c->tail);
    if (!matches(c->re, cs)) return FF_OK;
    size_t count = (size_t)(c->n * ff_shape_numel(L->out));
    float *out = malloc(count * sizeof(float));
    if (!out) return FF_FAIL(FF_ERR_OOM, "verify: %zu floats", count);
    ff_status st = ff_exec_forward(c->e, out, g->input, c->n, 0, last);
    if (st != FF_OK) {
        free(out);
        return ff_fail_context(st, "verify %s", cs);
    }
    if (!c->root) {
        free(out);
        return FF_OK;
    }
    double *sigma = NULL;
    st = e2e_sigma(&sigma, c->A, c->wg, c->prod_rel, g, m, c->wt, last, c->n);
    if (st != FF_OK) {
        free(out);
        return st;
    }
    ff_verify_row *r = new_row(c->rep);
    if (!r) {
        free(out);
        free(sigma);
        return FF_FAIL(FF_ERR_OOM, "verify: rows");
    }
    snprintf(r->case_str, sizeof r->case_str, "%s", cs);
    snprintf(r->check, sizeof r->check, logits ? "end-to-end-logits" : "end-to-end-output");
    r->digest = ff_digest_f32(out, count);
    const double *ref = logits ? g->logits_f64 : g->probs_f64;
    // The statistical tolerance lambda sigma: the row's rule, also used for the ties.
    for (size_t k = 0; k < count; k++) sigma[k] *= FF_TOL_LAMBDA;
    ff_tol_check_bound(&r->tol, out, ref, sigma, (int64_t)count);
    ff_tol_result torch;
    ff_tol_check_bound(&torch, g->layers[last].out_f32, ref, sigma, (int64_t)count);
    r->pass = r->tol.pass;
    // The relative figure users compare with other tools: max |ours - ref| / max |ref| per image.
    double rel = 0;
    int64_t classes = ff_shape_numel(L->out);
    for (int64_t img = 0; img < c->n; img++) {
        double mx = 0, err = 0;
        for (int64_t j = 0; j < classes; j++) {
            double rv = fabs(ref[img * classes + j]);
            double ev = fabs((double)out[img * classes + j] - ref[img * classes + j]);
            if (rv > mx) mx = rv;
            if (ev > err || isnan(ev)) err = isnan(ev) ? INFINITY : ev;
        }
        if (mx > 0 && err / mx > rel) rel = err / mx;
    }
    char b[200];
    snprintf(b, sizeof b, "max rel err %.3g (of max |ref|); %g sigma tolerance (PyTorch float32 uses %.3g%%)", rel,
             FF_TOL_LAMBDA, 100 * torch.max_ratio);
    append_note(r, "%s", b);
    if (!r->tol.pass) {
        snprintf(b, sizeof b,
                 "%lld of %lld elements outside the statistical tolerance (worst [%lld] ours=%.9g ref=%.17g)",
                 (long long)r->tol.n_fail, (long long)r->tol.n, (long long)r->tol.worst, (double)r->tol.ours_worst,
                 r->tol.ref_worst);
        append_note(r, "%s", b);
    }
    if (logits) {
        // top-1 / top-5 against PyTorch's, with ties where the float64 logits are closer than the
        // statistical tolerance of the two classes.
        int k = classes < 5 ? (int)classes : 5;
        int tied_total = 0, top1_bad = 0, top5_bad = 0;
        for (int64_t img = 0; img < c->n; img++) {
            int64_t ours[5];
            ff_tol_topk(ours, out + img * classes, classes, k);
            int tied = 0, tied1 = 0;
            bool ok5 = ff_tol_topk_agree(ours, g->top5 + img * 5, k, ref + img * classes, sigma + img * classes, &tied);
            bool ok1 =
                ff_tol_topk_agree(ours, g->top5 + img * 5, 1, ref + img * classes, sigma + img * classes, &tied1);
            tied_total += tied;
            if (!ok1) top1_bad++;
            if (!ok5) top5_bad++;
        }
        snprintf(b, sizeof b, "top-1 %lld/%lld, top-5 %lld/%lld equal to PyTorch's", (long long)(c->n - top1_bad),
                 (long long)c->n, (long long)(c->n - top5_bad), (long long)c->n);
        append_note(r, "%s", b);
        if (tied_total) {
            snprintf(b, sizeof b, "%d top-5 positions differ within a tie (float64 logits closer than %gσ)", tied_total,
                     FF_TOL_LAMBDA);
            append_note(r, "%s", b);
        }
        if (top1_bad || top5_bad) r->pass = false;
        c->rep->logits_digest = r->digest;
    } else {
        c->rep->output_digest = r->digest;
    }
    int slot = logits ? FF_GOLDEN_E2E_LOGITS : FF_GOLDEN_E2E_OUTPUT;
    st = compare_digest(c, r, slot, g->input, 0, last, count);
    if (st != FF_OK) {
        free(out);
        free(sigma);
        return st;
    }
    c->rec[slot] = r->digest;
    c->rec_set[slot] = true;
    finish_row(c->rep, r, c->cfg->progress);
    free(out);
    free(sigma);
    return FF_OK;
}

static void run_weights_row(run_ctx *c, const ff_weights *wt, ff_status wst) {
    bool ok = wst == FF_OK;
    char cs[384];
    snprintf(cs, sizeof cs, "%s weights(source=%s%s)", c->prefix, c->g->weights_source,
             c->g->weights_stored ? ",stored" : ",seed");
    if (!c->root) return;
    if (!matches(c->re, cs) && ok) return;  // a failing weights row is always shown
    ff_verify_row *r = new_row(c->rep);
    if (!r) return;
    snprintf(r->case_str, sizeof r->case_str, "%s", cs);
    snprintf(r->check, sizeof r->check, "weights");
    // ok: ff_golden_weights has just computed this digest and found it equal to the record
    // (another pass over AlexNet's 244 MB would take a third of a second per run).
    r->digest = ok ? c->g->weights_digest : ff_weights_digest(wt);
    r->tol.worst = -1;
    r->pass = ok;
    r->tol.pass = ok;
    if (!ok) snprintf(r->note, sizeof r->note, "%s", ff_last_error());
    r->expected_digest = c->g->weights_digest;
    r->digest_state = r->digest == c->g->weights_digest ? 1 : -1;
    finish_row(c->rep, r, c->cfg->progress);
}

ff_status ff_verify_run(ff_verify_report *rep, const ff_verify_config *cfg) {
    memset(rep, 0, sizeof *rep);
    ff_model m;
    FF_TRY(ff_model_init(&m, cfg->model));
    if (cfg->exec.fault_layer < -1 || cfg->exec.fault_layer >= m.n_layers)
        return FF_FAIL(FF_ERR_INPUT, "--inject-fault %d: expected a layer index 0..%d of %s", cfg->exec.fault_layer,
                       m.n_layers - 1, m.name);
    if (cfg->batch < 0) return FF_FAIL(FF_ERR_INPUT, "--batch %lld: expected >= 1", (long long)cfg->batch);
    regex_t re;
    bool have_re = cfg->filter && *cfg->filter;
    if (have_re) {
        int rc = regcomp(&re, cfg->filter, REG_EXTENDED | REG_NOSUB);
        if (rc != 0) {
            char msg[128];
            regerror(rc, &re, msg, sizeof msg);
            return FF_FAIL(FF_ERR_INPUT, "--filter '%s': %s (expected a POSIX extended regular expression)",
                           cfg->filter, msg);
        }
    }
    char path[1024];
    if (cfg->golden)
        snprintf(path, sizeof path, "%s", cfg->golden);
    else
        ff_golden_default_path(path, sizeof path, m.name);
    ff_golden g;
    ff_golden_options go = {.trust = cfg->trust, .manifest = cfg->manifest};
    ff_status st = ff_golden_load(&g, &m, path, &go);
    if (st != FF_OK) {
        if (have_re) regfree(&re);
        return st;
    }
    snprintf(rep->golden_path, sizeof rep->golden_path, "%s", path);
    snprintf(rep->golden_sha256, sizeof rep->golden_sha256, "%s", g.sha256);
    int64_t n = cfg->batch ? cfg->batch : g.n;
    ff_weights wt = {0};
    ff_executor *e = NULL;
    double *A[FF_MAX_LAYERS] = {0};
    run_ctx c = {
        .cfg = cfg, .m = &m, .g = &g, .wt = &wt, .rep = rep, .re = have_re ? &re : NULL, .n = n, .A = A, .k_mult = 1};
    if (n > g.n) {
        st = FF_FAIL(FF_ERR_INPUT, "--batch %lld: the golden '%s' holds %lld images", (long long)n, path,
                     (long long)g.n);
        goto done;
    }
    rep->batch = n;
    c.full_batch = n == g.n;
    c.cls = "";
    int ranks = cfg->ranks > 0 ? cfg->ranks : 1;
    rep->rank = 0;
    rep->ranks = ranks;
    c.root = true;
    snprintf(c.prefix, sizeof c.prefix, "%s %s", m.name, ff_mode_name(cfg->exec.mode));

    st = ff_weights_alloc(&wt, &m);
    if (st != FF_OK) goto done;
    // The weights the executor gets: from the golden file or the generator, checked by digest.
    ff_status wst = ff_golden_weights(&wt, &g, &m);
    if (wst != FF_OK && wst != FF_ERR_INTEGRITY) {
        st = wst;
        goto done;
    }
    if (wst == FF_OK) {
        ff_exec_options eo = cfg->exec;
        eo.max_batch = cfg->max_batch > n ? cfg->max_batch : n;
        st = ff_exec_create(&e, &m, &wt, &eo);
        if (st != FF_OK) goto done;
        c.e = e;
        // Everything that depends on how the layers are computed comes from the executor's plan:
        // each conv layer's rule (direct, or Winograd F(m x m, r x r)), the digest class, and
        // whether the statistical rule knows the summation orders.
        const ff_plan *plan = ff_exec_plan(e);
        ff_exec_caps caps;
        ff_exec_caps_of(&caps, e);
        for (int i = 0; i < m.n_layers; i++) c.wg[i] = plan->layer[i].alg == FF_CONV_WINOGRAD ? plan->layer[i].wg_m : 0;
        c.cls = plan->digest_class;
        c.has_class = c.cls[0] != 0;
        c.known = ff_golden_find_class(&g, c.cls);
        const ff_precision prec = plan->opt.precision;
        c.prod_rel = prec == FF_PRECISION_TF32     ? FF_TOL_TF32_PRODUCT
                     : prec == FF_PRECISION_TF32X3 ? FF_TOL_TF32X3_PRODUCT
                                                   : 0.0;
        // tf32x3 is taken for every layer (its linear layers are fp32: the bound is only looser there).
        c.k_mult = prec == FF_PRECISION_TF32X3 ? FF_TOL_TF32X3_TERMS : 1;
        // Own kernels in float32 have known summation orders; the vendor's and tf32 have no model here.
        c.stat_model = plan->opt.backend == FF_BACKEND_OWN && plan->opt.precision == FF_PRECISION_FP32;
        c.gpu_split = plan->device == FF_DEVICE_CUDA;
        snprintf(rep->digest_class, sizeof rep->digest_class, "%s", c.cls);
        rep->class_recorded = c.known != NULL;
        if (cfg->record && !c.has_class) {
            st = FF_FAIL(FF_ERR_INPUT,
                         "--record with --backend %s --precision %s: that configuration has no digest class to record "
                         "(expected --backend own --precision fp32)",
                         plan->opt.backend == FF_BACKEND_VENDOR ? "vendor" : "own",
                         ff_precision_name(plan->opt.precision));
            goto done;
        }
        // Multi-rank: the executor knows the communicator; rows are made on rank 0.
        rep->rank = ff_exec_rank(e);
        rep->ranks = ranks = ff_exec_ranks(e) > 1 ? ff_exec_ranks(e) : ranks;
        c.root = rep->rank == 0;
        // A multi-rank mode (mpi = serial bit for bit) is proven against the recorded digests of
        // its class where the golden has them for the whole batch; otherwise rank 0 computes the
        // same device and plan on one process (serial for the cpu device, cuda for a GPU) in this
        // run and compares with its digests.
        bool all_recorded = c.full_batch && c.known;
        for (int i = 0; i < m.n_layers && all_recorded; i++) all_recorded = c.known->has[i];
        all_recorded = all_recorded && c.known->has[FF_GOLDEN_E2E_LOGITS] && c.known->has[FF_GOLDEN_E2E_OUTPUT];
        if (caps.needs_comm && c.has_class && c.root && !all_recorded) {
            ff_exec_options so;
            ff_exec_options_default(&so);
            so.mode = caps.device == FF_DEVICE_CUDA ? FF_MODE_CUDA : FF_MODE_SERIAL;
            so.plan = cfg->exec.plan;
            so.gpu = cfg->exec.gpu;
            so.max_batch = n;
            snprintf(c.serial_name, sizeof c.serial_name, "%s", ff_mode_name(so.mode));
            st = ff_exec_create(&c.serial, &m, &wt, &so);
            if (st != FF_OK) goto done;
            if (strcmp(ff_exec_plan(c.serial)->digest_class, c.cls) != 0) {
                st = FF_FAIL(FF_ERR_INTERNAL, "verify: the %s reference runs digest class '%s', the %s run '%s'",
                             c.serial_name, ff_exec_plan(c.serial)->digest_class, ff_mode_name(cfg->exec.mode), c.cls);
                goto done;
            }
        }
    }
    case_tail(c.tail, sizeof c.tail, n, ranks, cfg->exec.split, cfg->exec.fault_layer);
    run_weights_row(&c, &wt, wst);
    if (wst != FF_OK) goto done;  // wrong weights: every other row would be meaningless

    for (int i = 0; i < m.n_layers && st == FF_OK; i++) st = run_layer(&c, i);
    if (st == FF_OK) st = run_end_to_end(&c, true);
    if (st == FF_OK) st = run_end_to_end(&c, false);
    if (st != FF_OK) goto done;

    // Every rank returns rank 0's verdict (the CLI's exit code and bench's gate agree on all ranks).
    if (cfg->exec.comm && rep->ranks > 1) {
        int64_t v[4] = {rep->passed, rep->failed, (int64_t)rep->output_digest, (int64_t)rep->logits_digest};
        st = ff_comm_bcast(cfg->exec.comm, v, sizeof v, 0);
        if (st != FF_OK) goto done;
        if (!c.root) {
            rep->passed = (int)v[0];
            rep->failed = (int)v[1];
            rep->output_digest = (uint64_t)v[2];
            rep->logits_digest = (uint64_t)v[3];
        }
    }

    if (cfg->record && c.root) {
        // Only values that pass their tolerance may become the reference; a row failing only on its
        // recorded digest is the deliberate change --record exists for.
        int bad = 0;
        for (int i = 0; i < rep->n_rows; i++) bad += !rep->rows[i].pass && !rep->rows[i].digest_only;
        if (cfg->exec.fault_layer >= 0 || !c.full_batch || bad) {
            st = FF_FAIL(FF_ERR_INPUT,
                         "--record needs a run over the whole golden batch (%lld images), no "
                         "--inject-fault, and every check within its tolerance (%d are not)",
                         (long long)g.n, bad);
            goto done;
        }
        st = ff_golden_record(&g, &m, c.cls, c.rec, c.rec_set, cfg->manifest, &rep->recorded);
        if (st != FF_OK) goto done;
        if (rep->recorded == 0) printf("record: %s: every digest already recorded, nothing changed\n", path);
        for (int i = 0; i < rep->n_rows; i++) {
            ff_verify_row *r = &rep->rows[i];
            if (r->pass || !r->digest_only) continue;
            r->pass = true;
            r->digest_only = false;
            r->digest_state = 1;
            r->expected_digest = r->digest;
            append_note(r, "%s", "its digest is now recorded");
            rep->failed--;
            rep->passed++;
        }
    }
done:
    rep->pass = st == FF_OK && rep->failed == 0 && rep->passed > 0;
    if (st == FF_OK && cfg->keep && e) {  // the caller times this executor: hand it and the input over
        rep->input_n = g.n;
        if (c.root && g.input) {
            const size_t bytes = (size_t)(g.n * ff_shape_numel(m.input)) * sizeof(float);
            rep->input = malloc(bytes);
            if (rep->input)
                memcpy(rep->input, g.input, bytes);
            else
                st = FF_FAIL(FF_ERR_OOM, "verify: a copy of the golden input, %zu bytes", bytes);
        }
        if (st == FF_OK) {
            *cfg->keep = e;
            e = NULL;
        }
    }
    if (e) ff_exec_destroy(e);
    if (c.serial) ff_exec_destroy(c.serial);
    for (int i = 0; i < FF_MAX_LAYERS; i++) free(A[i]);
    if (wt.data) ff_weights_free(&wt);
    ff_golden_free(&g);
    if (have_re) regfree(&re);
    return st;
}

ff_status ff_verify_gate(ff_verify_report *rep, const char *model, const ff_exec_options *exec, int64_t batch,
                         const char *golden) {
    ff_verify_config c;
    ff_verify_config_default(&c);
    c.model = model;
    c.exec = *exec;
    c.batch = batch;
    c.golden = golden;
    if (exec->comm) c.ranks = ff_comm_size(exec->comm);
    return ff_verify_run(rep, &c);
}

static void fmt_pct(char *b, size_t cap, const ff_verify_row *r) {
    if (r->tol.worst < 0 && r->tol.n == 0)
        snprintf(b, cap, "-");
    else if (isinf(r->tol.max_ratio))
        snprintf(b, cap, "inf");
    else
        snprintf(b, cap, "%.3g%%", 100.0 * r->tol.max_ratio);
}

// The statistical rule's "% used": the larger of max z / its limit and RMS z / its limit ("-" where
// the rule does not apply: not a dot layer, vendor backend, tf32).
static void fmt_stat(char *b, size_t cap, const ff_verify_row *r) {
    if (!r->stat.applied) {
        snprintf(b, cap, "-");
        return;
    }
    double v = r->stat.max_ratio > r->stat.rms_ratio ? r->stat.max_ratio : r->stat.rms_ratio;
    if (isinf(v) || isnan(v))
        snprintf(b, cap, "inf");
    else
        snprintf(b, cap, "%.3g%%", 100.0 * v);
}

void ff_verify_print_row(FILE *out, const ff_verify_row *r) {
    char pct[32], spct[32], dg[17], worst[128];
    fmt_pct(pct, sizeof pct, r);
    fmt_stat(spct, sizeof spct, r);
    if (r->tol.worst >= 0)
        snprintf(worst, sizeof worst, "worst[%lld] ours=%.9g ref=%.17g", (long long)r->tol.worst,
                 (double)r->tol.ours_worst, r->tol.ref_worst);
    else
        snprintf(worst, sizeof worst, "worst -");
    char ulp[32];
    if (r->tol.max_ulp == UINT64_MAX)
        snprintf(ulp, sizeof ulp, "NaN");
    else
        snprintf(ulp, sizeof ulp, "%" PRIu64, r->tol.max_ulp);
    // "=rec": equal to the digest recorded for this digest class; "!=rec": differs; "=serial" /
    // "!=serial" (or "=cuda" ...): against the single-process mode's digest computed in the same
    // run; nothing: nothing to compare.
    char rec[16] = "";
    if (r->digest_state == 1 || r->digest_state == -1)
        snprintf(rec, sizeof rec, "%s", r->digest_state == 1 ? "=rec" : "!=rec");
    else if (r->digest_state == 2 || r->digest_state == -2)
        snprintf(rec, sizeof rec, "%s%s",
                 r->digest_state == 2 ? "=" : "!=", r->digest_ref[0] ? r->digest_ref : "serial");
    // A row without an output of its own (digest 0, e.g. a check on parameters) prints none.
    if (r->digest == 0 && r->digest_state == 0)
        snprintf(dg, sizeof dg, "-");
    else
        ff_digest_hex(dg, r->digest);
    fprintf(out, "%-66s %-9s ulp=%-8s bound=%-9s stat=%-9s %s digest=%s%-8s %s%s%s\n", r->case_str,
            r->check[0] == 'l'   ? ff_tol_rule_name(r->tol.rule)
            : r->check[0] == 'e' ? "e2e-stat"
                                 : r->check,
            ulp, pct, spct, worst, dg, rec, r->pass ? "PASS" : "FAIL", r->note[0] ? "  # " : "", r->note);
}

void ff_verify_print_summary(FILE *out, const ff_verify_report *rep) {
    fprintf(out, "%d passed, %d failed\n", rep->passed, rep->failed);
}

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

static void json_num(FILE *f, double v) {
    if (isfinite(v))
        fprintf(f, "%.17g", v);
    else
        fprintf(f, "null");
}

ff_status ff_verify_write_json(const ff_verify_report *rep, const ff_verify_config *cfg, const char *path) {
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return FF_FAIL(FF_ERR_IO, "cannot write JSON '%s'", tmp);
    char dg[17];
    fprintf(f, "{\n  \"model\": ");
    json_str(f, cfg->model);
    fprintf(f, ",\n  \"mode\": \"%s\",\n  \"split\": \"%s\",\n  \"ranks\": %d,\n  \"batch\": %lld,\n",
            ff_mode_name(cfg->exec.mode), ff_split_name(cfg->exec.split), rep->ranks, (long long)rep->batch);
    fprintf(f, "  \"fault_layer\": %d,\n  \"golden\": ", cfg->exec.fault_layer);
    json_str(f, rep->golden_path);
    // digest_class "none": the plan has none (vendor backend, tf32); digest_class_recorded: the
    // golden holds digests of that class (false: the rows were compared by tolerance alone).
    fprintf(f, ",\n  \"golden_sha256\": \"%s\",\n  \"digest_class\": \"%s\",\n", rep->golden_sha256,
            rep->digest_class[0] ? rep->digest_class : "none");
    fprintf(f, "  \"digest_class_recorded\": %s,\n", rep->class_recorded ? "true" : "false");
    fprintf(f, "  \"output_digest\": \"%s\",\n", ff_digest_hex(dg, rep->output_digest));
    fprintf(f, "  \"passed\": %d,\n  \"failed\": %d,\n  \"pass\": %s,\n  \"rows\": [\n", rep->passed, rep->failed,
            rep->pass ? "true" : "false");
    for (int i = 0; i < rep->n_rows; i++) {
        const ff_verify_row *r = &rep->rows[i];
        fprintf(f, "    {\"case\": ");
        json_str(f, r->case_str);
        fprintf(f,
                ", \"check\": \"%s\", \"rule\": \"%s\", \"layer\": %d, \"elements\": %lld, \"failed_elements\": %lld, "
                "\"nan\": %lld, \"max_ulp\": ",
                r->check, ff_tol_rule_name(r->tol.rule), r->layer, (long long)r->tol.n, (long long)r->tol.n_fail,
                (long long)r->tol.n_nan);
        if (r->tol.max_ulp == UINT64_MAX)
            fprintf(f, "null");
        else
            fprintf(f, "%" PRIu64, r->tol.max_ulp);
        fprintf(f, ", \"bound_used\": ");
        json_num(f, r->tol.max_ratio);
        fprintf(f, ", \"max_abs_err\": ");
        json_num(f, r->tol.max_abs);
        fprintf(f, ", \"worst\": %lld, \"worst_ours\": ", (long long)r->tol.worst);
        json_num(f, (double)r->tol.ours_worst);
        fprintf(f, ", \"worst_ref\": ");
        json_num(f, r->tol.ref_worst);
        fprintf(f, ", \"worst_bound\": ");
        json_num(f, r->tol.bound_worst);
        fprintf(f, ", \"stat_applied\": %s, \"stat_max_z\": ", r->stat.applied ? "true" : "false");
        json_num(f, r->stat.applied ? r->stat.max_z : NAN);
        fprintf(f, ", \"stat_max_used\": ");
        json_num(f, r->stat.applied ? r->stat.max_ratio : NAN);
        fprintf(f, ", \"stat_rms_used\": ");
        json_num(f, r->stat.applied && r->stat.rms_applied ? r->stat.rms_ratio : NAN);
        if (r->digest == 0 && r->digest_state == 0)
            fprintf(f, ", \"digest\": null");
        else
            fprintf(f, ", \"digest\": \"%s\"", ff_digest_hex(dg, r->digest));
        fprintf(f, ", \"digest_state\": %d, \"pass\": %s, \"note\": ", r->digest_state, r->pass ? "true" : "false");
        json_str(f, r->note);
        fprintf(f, "}%s\n", i + 1 < rep->n_rows ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
    if (fclose(f) != 0 || rename(tmp, path) != 0) return FF_FAIL(FF_ERR_IO, "cannot write JSON '%s'", path);
    return FF_OK;
}
