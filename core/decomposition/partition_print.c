// `fivefold info --ranks P --split S`: the partition as a table (partition.h). Kept apart from
// partition.c so that the pure partition math builds alone (the libFuzzer target links only
// partition.c, model.c and status.c).
#include "fivefold/partition.h"

static void print_shape(FILE *f, ff_shape s) {
    char buf[64];
    snprintf(buf, sizeof buf, "%lldx%lldx%lld", (long long)s.c, (long long)s.h, (long long)s.w);
    fprintf(f, "%-12s", buf);
}

ff_status ff_partition_print(FILE *f, const ff_model *m, int P, ff_split s, int64_t batch) {
    if (batch < 1) batch = 1;
    ff_partition *p = NULL;
    FF_TRY(ff_partition_build(&p, m, 0, m->n_layers - 1, P, s, batch));
    ff_status st = ff_partition_check(p, m);
    if (st != FF_OK) {
        ff_partition_free(p);
        return st;
    }
    fprintf(f, "partition of %s: split %s, %d rank%s, batch %lld\n", m->name, ff_split_name(s), P, P == 1 ? "" : "s",
            (long long)batch);
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
    fprintf(f, "%-8s %-8s %-12s %-10s %10s %14s  %s\n", "layer", "op", "out", "input from", "halo rows", "bytes sent",
            "rank: output rows <- input rows");
    int64_t total = 0;
    for (int i = 0; i < m->n_layers; i++) {
        const ff_layer *L = &m->layers[i];
        const ff_layer_part *lp = &p->layer[i];
        fprintf(f, "%-8s %-8s ", L->name, ff_op_name(L->op));
        print_shape(f, L->out);
        int64_t halo = 0, bytes = 0;
        for (int r = 0; r < P; r++) {
            halo += ff_layer_part_halo_rows(lp, r);
            bytes += ff_layer_part_send_bytes(lp, r, batch);
        }
        total += bytes;
        const char *src = !lp->spatial             ? (L->op == FF_OP_LINEAR ? "features" : "whole")
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
    ff_partition_free(p);
    return FF_OK;
}
