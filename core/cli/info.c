// `fivefold info`: the layer table, derived from the model's specs (nothing typed in), the
// execution plan of a mode and the plan flags (plan.h), and with --ranks/--split the partition
// under that plan.
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "fivefold/layers_cpu.h"
#include "fivefold/partition.h"

static void help(void) {
    printf(
        "usage: fivefold info [--model alexnet|mnist-cnn] [--mode serial|mpi|cuda|hybrid|direct]\n"
        "                     [--ranks P --split rows|batch|replicate] [--batch N] [--verbose]\n"
        "                     " FF_CLI_PLAN_USAGE
        "\n\n"
        "Prints every layer: output shape, parameters, MFLOP per image, and for conv/pool layers the\n"
        "halo rows a rank needs beyond its own band in a row split:\n"
        "  output rows [o0, o1) read input rows [o0*s - p, (o1-1)*s - p + k)   (k kernel, s stride, p pad),\n"
        "  a rank's own input band for those outputs is [o0*s, o1*s), so it needs\n"
        "  p rows above and k - s - p rows below its band (conv1 11x11/s4/p0: 0 and 7; conv2 5x5/s1/p2: 2 and 2).\n"
        "  A Winograd layer computes whole m-row output tiles, so a band also needs the input rows of the\n"
        "  tiles it only partly covers (up to m - 1 rows more on each side); a space-to-depth layer runs whole.\n"
        "Then the execution plan of the mode (its device: cpu for serial and mpi, cuda for the GPU modes)\n"
        "under the flags below: per layer the algorithm, relu fusion and whether a band of it can be\n"
        "computed, and the plan's digest class.\n"
        "With --ranks and --split it also prints each rank's bands, the input rows each band needs under\n"
        "the plan, and the bytes exchanged.\n"
        "  --mode M    the mode whose plan is printed (default serial)\n"
        "  --batch N   images per forward for the byte counts (default 1)\n"
        "  --verbose   error messages also name the source location\n" FF_CLI_PLAN_HELP);
}

// Halo rows above and below a rank's own stride-aligned input band (see help text).
static void halo_rows(const ff_layer *L, int *above, int *below) {
    *above = L->pad;
    *below = L->kh - L->stride - L->pad;
}

int ff_cmd_info(int argc, char **argv) {
    const char *model = "alexnet", *mode = "serial";
    int64_t ranks = 0, batch = 1;
    const char *split = NULL;
    ff_cli_plan_args plan_args = {0};
    static const struct option opts[] = {{"model", required_argument, 0, 'm'},
                                         {"mode", required_argument, 0, 'M'},
                                         FF_CLI_PLAN_OPTIONS,
                                         {"ranks", required_argument, 0, 'P'},
                                         {"split", required_argument, 0, 's'},
                                         {"batch", required_argument, 0, 'n'},
                                         {"verbose", no_argument, 0, 'v'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    for (int c, li = 0; (c = getopt_long(argc, argv, "", opts, &li)) != -1;) {
        ff_status st = c == '?' || c == ':' ? FF_OK : ff_cli_optarg(opts, li, optarg);
        if (st != FF_OK) return ff_cli_fail("info", st);
        if (ff_cli_plan_arg(&plan_args, c, optarg)) continue;
        switch (c) {
            case 'm': model = optarg; break;
            case 'M': mode = optarg; break;
            case 'P': st = ff_cli_parse_i64(&ranks, "--ranks", optarg, 1, 4096); break;
            case 's': split = optarg; break;
            case 'n': st = ff_cli_parse_i64(&batch, "--batch", optarg, 1, FF_CLI_MAX_BATCH); break;
            case 'v': ff_cli_verbose = true; break;
            case 'h': help(); return FF_EXIT_OK;
            default: return ff_cli_usage("info", "unknown or incomplete option '%s'", argv[optind - 1]);
        }
        if (st != FF_OK) return ff_cli_fail("info", st);
    }
    if (optind < argc) return ff_cli_usage("info", "unexpected argument '%s'", argv[optind]);
    ff_model m;
    ff_status st = ff_model_init(&m, model);
    if (st != FF_OK) return ff_cli_fail("info", st);
    // The plan the mode's device runs under the flags (pure: no GPU needed to print a GPU plan).
    ff_mode md;
    ff_plan_options po;
    ff_plan plan;
    ff_exec_caps caps;
    if ((st = ff_mode_parse(&md, mode)) != FF_OK || (st = ff_cli_plan_options(&po, &plan_args)) != FF_OK)
        return ff_cli_fail("info", st);
    ff_mode_caps(&caps, md);
    if ((st = ff_plan_build(&plan, &m, caps.device, &po)) != FF_OK) return ff_cli_fail("info", st);

    printf("model %s: input %lldx%lldx%lld, %d layers, %.2f M parameters (%.1f MB), %.3f GFLOP per image\n\n", m.name,
           (long long)m.input.c, (long long)m.input.h, (long long)m.input.w, m.n_layers,
           (double)m.n_weights_total / 1e6, (double)m.n_weights_total * 4 / 1e6, (double)m.flops_total / 1e9);
    printf("%-8s %-8s %-26s %-12s %12s %10s  %s\n", "layer", "op", "spec", "output", "params", "MFLOP",
           "halo rows above/below");
    for (int i = 0; i < m.n_layers; i++) {
        const ff_layer *L = &m.layers[i];
        char spec[64] = "", out[32], halo[96] = "";
        switch (L->op) {
            case FF_OP_CONV2D:
                snprintf(spec, sizeof spec, "%lld@%dx%d s%d p%d", (long long)L->out_c, L->kh, L->kw, L->stride, L->pad);
                break;
            case FF_OP_MAXPOOL: snprintf(spec, sizeof spec, "max %dx%d s%d", L->kh, L->kw, L->stride); break;
            case FF_OP_LRN:
                snprintf(spec, sizeof spec, "size %d a%g b%g k%g", L->lrn_size, L->lrn_alpha, L->lrn_beta, L->lrn_k);
                break;
            case FF_OP_LINEAR:
                snprintf(spec, sizeof spec, "%lld->%lld", (long long)L->fan_in, (long long)L->out_c);
                break;
            default: break;
        }
        const ff_layer_plan *lp = &plan.layer[i];
        if (lp->band == FF_BAND_WHOLE) {
            snprintf(halo, sizeof halo, "- (whole layer: %s)", lp->name);
        } else if (ff_layer_is_windowed(L)) {
            int a, b;
            halo_rows(L, &a, &b);
            if (lp->alg == FF_CONV_WINOGRAD)
                snprintf(halo, sizeof halo, "%d/%d +<=%d each (%s tiles)", a, b, lp->wg_m - 1, lp->name);
            else
                snprintf(halo, sizeof halo, "%d/%d", a, b);
        }
        snprintf(out, sizeof out, "%lldx%lldx%lld", (long long)L->out.c, (long long)L->out.h, (long long)L->out.w);
        printf("%-8s %-8s %-26s %-12s %12lld %10.1f  %s\n", L->name, ff_op_name(L->op), spec, out,
               (long long)(L->n_weight + L->n_bias), (double)L->flops / 1e6, halo);
    }
    printf("\nmode %s: ", ff_mode_name(md));
    ff_plan_print(stdout, &plan, &m);
    if (plan.device == FF_DEVICE_CPU) {  // which copy of the CPU kernels would run (FF_CPU_VECTOR)
        int bits;
        if ((st = ff_cpu_vector_choose(&bits)) != FF_OK) return ff_cli_fail("info", st);
        printf("  kernels: the %s copy (FF_CPU_VECTOR=%d; every copy gives the same bits)\n", ff_cpu_vector_name(bits),
               bits);
    }
    if (ranks > 0 || split) {
        if (!split || ranks < 1) return ff_cli_usage("info", "--ranks and --split go together");
        ff_split sp;
        if ((st = ff_split_parse(&sp, split)) != FF_OK) return ff_cli_fail("info", st);
        printf("\n");
        if ((st = ff_partition_print(stdout, &m, &plan, (int)ranks, sp, batch)) != FF_OK)
            return ff_cli_fail("info", st);
    }
    return FF_EXIT_OK;
}
