// `fivefold info --ranks P --split S`: the partition as a table (partition.h), under the plan the
// configuration runs (halo rows per the plan: a Winograd band fetches whole tiles). Kept apart
// from partition.c so that the pure partition math builds alone (the libFuzzer target compiles
// partition.c with the model, status, plan and Winograd geometry only).
#include "fivefold/partition.h"

static void print_shape(FILE *f, ff_shape s) {
    char buf[64];
    snprintf(buf, sizeof buf, "%lldx%lldx%lld", (long long)s.c, (long long)s.h, (long long)s.w);
    fprintf(f, "%-12s", buf);
}

ff_status ff_partition_print(FILE *f, const ff_model *m, const ff_plan *plan, int P, ff_split s, int64_t batch) {
    if (batch < 1) batch = 1;
    ff_partition *p = NULL;
    FF_TRY(ff_partition_build_planned(&p, m, plan, 0, m->n_layers - 1, P, s, batch, 0));
    ff_status st = ff_partition_check(p, m);
    if (st != FF_OK) {
        ff_partition_free(p);
        return st;
    }
    fprintf(f, "partition of %s: split %s, %d rank%s, batch %lld, %s%s\n", m->name, ff_split_name(s), P,
            P == 1 ? "" : "s", (long long)batch,
            plan ? ff_device_kind_name(plan->device) : "no plan: every layer direct", plan ? " plan" : "");
    int64_t in_bytes = ff_shape_numel(m->input) * (int64_t)sizeof(float);
    if (s == FF_SPLIT_BATCH) {
        fprintf(f, "images per rank:");
        for (int r = 0; r < P; r++)
            fprintf(f, " r%d [%lld,%lld)", r, (long long)p->images[r].lo, (long long)p->images[r].hi);
        fprintf(f,
                "\nscatter %lld bytes of input, gather %lld bytes of output; no exchange "
                "between layers\n",
                (long long)(in_bytes * batch), (long long)(ff_shape_numel(m->layers[m->n_layers - 1].out) * 4 * batch));
    } else if (s == FF_SPLIT_REPLICATE) {
        fprintf(f,
                "every rank computes every image and layer; broadcast %lld bytes of input "
                "and %lld bytes of weights\n",
                (long long)(in_bytes * batch), (long long)(m->n_weights_total * 4));
    }
    if (s == FF_SPLIT_ROWS && P > 1 && batch > 1)
        fprintf(f,
                "bands below are image group 0's; the batch runs as %lld groups of images, group g with "
                "the bands rotated by g (the remainder rows of a layer move from rank to rank)\n",
                (long long)(batch < P ? batch : P));
    if (s != FF_SPLIT_ROWS) {
        ff_partition_free(p);
        return FF_OK;
    }
    fprintf(f, "%-8s %-8s %-16s %-12s %-10s %10s %14s  %s\n", "layer", "op", "algorithm", "out", "input from",
            "halo rows", "bytes sent", "rank: output rows <- input rows");
    int64_t total = 0;
    int whole_steps = 0;
    for (int i = 0; i < m->n_layers; i++) {
        const ff_layer *L = &m->layers[i];
        const ff_layer_part *lp = &p->layer[i];
        whole_steps += lp->whole;
        fprintf(f, "%-8s %-8s %-16s ", L->name, ff_op_name(L->op), plan ? plan->layer[i].name : "direct");
        print_shape(f, L->out);
        int64_t halo = 0, bytes = 0;
        for (int r = 0; r < P; r++) {
            halo += ff_layer_part_halo_rows(lp, r);
            bytes += ff_layer_part_send_bytes(lp, r, batch);
        }
        total += bytes;
        const char *src = lp->whole                ? "whole step"
                          : !lp->spatial           ? (L->op == FF_OP_LINEAR ? "features" : "whole")
                          : lp->src == FF_SRC_ROOT ? "scatter"
                          : lp->windowed           ? "halo"
                                                   : "local";
        fprintf(f, " %-10s %10lld %14lld ", src, (long long)halo, (long long)bytes);
        for (int r = 0; r < P; r++) {
            if (lp->spatial)
                fprintf(f, " %d:[%lld,%lld)<-[%lld,%lld)", r, (long long)lp->band[r].lo, (long long)lp->band[r].hi,
                        (long long)lp->need[r].lo, (long long)lp->need[r].hi);
            else if (L->op == FF_OP_LINEAR)
                fprintf(f, " %d:[%lld,%lld)", r, (long long)lp->band[r].lo, (long long)lp->band[r].hi);
        }
        fprintf(f, "\n");
    }
    fprintf(f, "halo bytes exchanged per forward (all ranks, batch %lld): %lld\n", (long long)batch, (long long)total);
    if (whole_steps)
        fprintf(f,
                "'whole step': the plan computes the layer whole only (a space-to-depth Winograd conv rewrites its "
                "whole input), so it is not banded; the next banded layer takes its rows from that whole output\n");
    const char *wino = NULL;
    for (int i = 0; i < m->n_layers && plan && !wino; i++)
        if (p->layer[i].spatial && plan->layer[i].alg == FF_CONV_WINOGRAD) wino = m->layers[i].name;
    if (wino)
        fprintf(f,
                "Winograd layers (%s, ...) need the input rows of whole output tiles: up to m - 1 rows more than the "
                "direct window on either side of a band\n",
                wino);
    ff_partition_free(p);
    return FF_OK;
}
