// The benchmark gate (see gate.h): verification of exactly the configuration to be timed, then
// the batch that will be timed must reproduce the verified outputs bit for bit.
#include "fivefold/gate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fivefold/comm.h"
#include "fivefold/digest.h"
#include "fivefold/golden.h"
#include "fivefold/verify.h"

void ff_gate_release(ff_gate_state *s) {
    ff_exec_destroy(s->exec);
    free(s->x);
    free(s->y);
    memset(s, 0, sizeof *s);
}

static void fail_with(ff_gate_result *r, const char *fmt, const char *a, const char *b) {
    r->passed = false;
    r->failed++;
    if (!r->first_failure[0]) snprintf(r->first_failure, sizeof r->first_failure, fmt, a, b);
}

// Every rank learns rank 0's verdict (rows are judged on rank 0).
static ff_status agree(ff_comm *comm, bool *ok) {
    if (!comm || ff_comm_size(comm) == 1) return FF_OK;
    int64_t v = *ok ? 0 : 1;
    FF_TRY(ff_comm_bcast(comm, &v, sizeof v, 0));
    *ok = v == 0;
    return FF_OK;
}

ff_status ff_gate_run(ff_gate_result *r, ff_gate_state *s, const ff_gate_config *c) {
    memset(r, 0, sizeof *r);
    memset(s, 0, sizeof *s);
    const ff_model *m = c->model;
    ff_comm *comm = c->opt.comm;
    int rank = comm ? ff_comm_rank(comm) : 0;

    // 1. The verification checks of this configuration, on the golden batch.
    ff_verify_config vc;
    ff_verify_config_default(&vc);
    vc.model = m->name;
    vc.exec = c->opt;
    vc.golden = c->golden;
    vc.trust = c->trust;
    vc.ranks = comm ? ff_comm_size(comm) : 1;
    // The executor that passes the checks is the one timed: verify sizes it for the timed batch
    // and hands it over with the golden input (one golden load, one weight upload).
    vc.max_batch = c->batch;
    vc.keep = &s->exec;
    ff_verify_report rep;
    FF_TRY(ff_verify_run(&rep, &vc));
    snprintf(r->golden, sizeof r->golden, "%.1000s", rep.golden_path);
    r->checks = rep.passed + rep.failed;
    r->failed = rep.failed;
    r->passed = rep.pass;
    for (int i = 0; i < rep.n_rows && !r->passed; i++) {
        if (!rep.rows[i].pass) {
            snprintf(r->first_failure, sizeof r->first_failure, "%.384s%s%.320s", rep.rows[i].case_str,
                     rep.rows[i].note[0] ? ": " : "", rep.rows[i].note);
            break;
        }
    }
    uint64_t verified_output = rep.output_digest;
    ff_status st = agree(comm, &r->passed);
    if (st != FF_OK || !r->passed) {
        ff_verify_report_free(&rep);
        ff_gate_release(s);
        return st;
    }
    if (!s->exec) {
        ff_verify_report_free(&rep);
        return FF_FAIL(FF_ERR_INTERNAL, "gate: the verifier passed but handed over no executor");
    }

    // 2. The batch to be timed: golden image i % G at position i (rank 0 holds the input; the
    //    mode distributes it).
    const int64_t G = rep.input_n;
    int64_t n = c->batch, in_el = ff_shape_numel(m->input);
    int64_t nmax = n > G ? n : G;
    float *yg = NULL;
    if (rank == 0) {
        s->x = malloc((size_t)(nmax * in_el) * sizeof(float));
        s->y = malloc((size_t)(nmax * m->classes) * sizeof(float));
        yg = malloc((size_t)(G * m->classes) * sizeof(float));
        if (!s->x || !s->y || !yg || !rep.input) st = FF_FAIL(FF_ERR_OOM, "gate: batch %lld buffers", (long long)nmax);
    }
    int last = m->n_layers - 1;
    // 3. The golden batch again through this executor: it must give the verified output digest.
    if (st == FF_OK && rank == 0) memcpy(s->x, rep.input, (size_t)(G * in_el) * sizeof(float));
    if (st == FF_OK) st = ff_exec_forward(s->exec, yg, s->x, G, 0, last);
    bool ok = true;
    if (st == FF_OK && rank == 0) {
        r->checks++;
        if (verified_output && ff_digest_f32(yg, (size_t)(G * m->classes)) != verified_output) {
            ok = false;
            fail_with(r, "%s%s: the executor built for timing does not reproduce the verified output digest", m->name,
                      "");
        }
        for (int64_t i = 0; i < n; i++)
            memcpy(s->x + i * in_el, rep.input + (i % G) * in_el, (size_t)in_el * sizeof(float));
    }
    // 4. Batch N: row i must equal the verified row i % G bit for bit (position independence).
    if (st == FF_OK) st = ff_exec_forward(s->exec, s->y, s->x, n, 0, last);
    if (st == FF_OK && rank == 0) {
        r->checks++;
        int64_t bad = -1;
        for (int64_t i = 0; i < n && bad < 0; i++)
            if (memcmp(s->y + i * m->classes, yg + (i % G) * m->classes, (size_t)m->classes * sizeof(float))) bad = i;
        if (bad >= 0) {
            char what[64];
            snprintf(what, sizeof what, "N=%lld, image %lld", (long long)n, (long long)bad);
            fail_with(r, "%s batch-consistency(%s): the output differs from the verified golden-batch output", m->name,
                      what);
            ok = false;
        }
        r->batch_digest = ff_digest_f32(s->y, (size_t)(n * m->classes));
    }
    free(yg);
    ff_verify_report_free(&rep);
    if (st != FF_OK) {
        ff_gate_release(s);
        return st;
    }
    FF_TRY(agree(comm, &ok));
    r->passed = ok;
    if (comm && ff_comm_size(comm) > 1) FF_TRY(ff_comm_bcast(comm, &r->batch_digest, sizeof r->batch_digest, 0));
    return FF_OK;
}
