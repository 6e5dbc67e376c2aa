// `fivefold infer`: one forward pass (or --iters timed ones) in any mode.
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fivefold/digest.h"
#include "fivefold/h5io.h"

static void help(void) {
    printf(
        "usage: fivefold infer --model alexnet|mnist-cnn [--mode serial|mpi|cuda|hybrid|direct]\n"
        "                      [--split batch|rows|replicate] [--batch N] [--seed S]\n"
        "                      [--weights W.h5] [--input X.h5] [--output Y.h5] [--iters K] [--trace]\n"
        "                      [--inject-fault LAYER] [--save-weights W.h5] [--verbose]\n"
        "                      " FF_CLI_PLAN_USAGE "\n                      " FF_CLI_EXEC_USAGE
        "\n\n"
        "Runs a forward pass and prints the output digest (FNV-1a-64 of the float32 output), the\n"
        "top-5 classes of the first images and the time: the median of --iters warm iterations\n"
        "after one untimed warm-up (a quick figure; `fivefold bench` times a verified configuration).\n"
        "  --model M        alexnet (default) or mnist-cnn\n"
        "  --mode M         serial (default), mpi, cuda, hybrid, direct (or v1..v5)\n"
        "  --split S        how multi-rank modes divide the work: batch (default), rows, replicate\n"
        "  --batch N        images (1..%d; default 1, or the input file's batch)\n"
        "  --seed S         generator seed for weights and input when no file is given (default 1);\n"
        "                   decimal (010 is ten) or hexadecimal with 0x\n"
        "  --weights W.h5   datasets /weights/<layer>/w and /b (golden/export_torch.py writes them);\n"
        "                   a tensor's recorded fnv1a64 digest is checked, NaN/Inf refused\n"
        "  --input X.h5     dataset /input, float32 (N, C, H, W); NaN/Inf refused\n"
        "  --output Y.h5    writes /output (N, classes) and its digest\n"
        "  --iters K        timed iterations (1..100000; default 1)\n"
        "  --save-weights W.h5  writes the weights used (e.g. the generator's) as a weights file,\n"
        "                   with each tensor's digest\n"
        "  --trace          per-layer compute / communication time (ms per forward) and bytes sent\n"
        "  --inject-fault L test hook: perturb layer L's first output element (verify must catch it)\n"
        "  --verbose        say whether weight digests were checked; errors name the source location\n" FF_CLI_PLAN_HELP
            FF_CLI_EXEC_HELP
        "Multi-rank modes run under mpiexec: mpiexec -n 4 fivefold infer --mode mpi --split rows ...\n",
        FF_CLI_MAX_BATCH);
}

typedef struct {
    const char *model, *mode, *split, *weights, *input, *output, *fault, *save_weights;
    ff_cli_plan_args plan;
    int64_t batch, iters;
    uint64_t seed;
    bool trace, batch_given;
} infer_args;

static int parse(infer_args *a, int argc, char **argv) {
    memset(a, 0, sizeof *a);
    a->model = "alexnet";
    a->mode = "serial";
    a->batch = 1;
    a->iters = 1;
    a->seed = 1;
    static const struct option opts[] = {{"model", required_argument, 0, 'm'},
                                         {"mode", required_argument, 0, 'M'},
                                         {"split", required_argument, 0, 's'},
                                         {"batch", required_argument, 0, 'n'},
                                         {"seed", required_argument, 0, 'S'},
                                         {"weights", required_argument, 0, 'w'},
                                         {"input", required_argument, 0, 'i'},
                                         {"output", required_argument, 0, 'o'},
                                         {"iters", required_argument, 0, 'k'},
                                         {"trace", no_argument, 0, 't'},
                                         {"inject-fault", required_argument, 0, 'f'},
                                         FF_CLI_PLAN_OPTIONS,
                                         FF_CLI_EXEC_OPTIONS,
                                         {"save-weights", required_argument, 0, 'W'},
                                         {"verbose", no_argument, 0, 'v'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    for (int c, li = 0; (c = getopt_long(argc, argv, "", opts, &li)) != -1;) {
        ff_status st = c == '?' || c == ':' ? FF_OK : ff_cli_optarg(opts, li, optarg);
        if (st != FF_OK) return ff_cli_fail("infer", st);
        if (ff_cli_plan_arg(&a->plan, c, optarg)) continue;
        switch (c) {
            case 'm': a->model = optarg; break;
            case 'M': a->mode = optarg; break;
            case 's': a->split = optarg; break;
            case 'n':
                st = ff_cli_parse_i64(&a->batch, "--batch", optarg, 1, FF_CLI_MAX_BATCH);
                a->batch_given = true;
                break;
            case 'S': st = ff_cli_parse_u64(&a->seed, "--seed", optarg); break;
            case 'w': a->weights = optarg; break;
            case 'i': a->input = optarg; break;
            case 'o': a->output = optarg; break;
            case 'k': st = ff_cli_parse_i64(&a->iters, "--iters", optarg, 1, 100000); break;
            case 't': a->trace = true; break;
            case 'f': a->fault = optarg; break;
            case 'W': a->save_weights = optarg; break;
            case 'v': ff_cli_verbose = true; break;
            case 'h': help(); return -1;
            default: return ff_cli_usage("infer", "unknown or incomplete option '%s'", argv[optind - 1]);
        }
        if (st != FF_OK) return ff_cli_fail("infer", st);
    }
    if (optind < argc) return ff_cli_usage("infer", "unexpected argument '%s'", argv[optind]);
    return 0;
}

static ff_status read_input(float **x, int64_t *n, const ff_model *m, const char *path, int64_t want_n, bool n_given) {
    int64_t f;
    FF_TRY(ff_h5_open_read(&f, path));
    int rank;
    int64_t d[FF_H5_MAX_RANK];
    ff_status st = ff_h5_shape(&rank, d, f, "input");
    if (st == FF_OK && (rank != 4 || d[1] != m->input.c || d[2] != m->input.h || d[3] != m->input.w || d[0] < 1))
        st = FF_FAIL(FF_ERR_INPUT,
                     "dataset 'input' has %d dims (%lld, %lld, %lld, %lld): expected (N, %lld, %lld, %lld) for %s",
                     rank, (long long)d[0], (long long)(rank > 1 ? d[1] : 0), (long long)(rank > 2 ? d[2] : 0),
                     (long long)(rank > 3 ? d[3] : 0), (long long)m->input.c, (long long)m->input.h,
                     (long long)m->input.w, m->name);
    if (st == FF_OK && d[0] > FF_CLI_MAX_BATCH)
        st = FF_FAIL(FF_ERR_INPUT, "dataset 'input' holds %lld images: expected at most %d", (long long)d[0],
                     FF_CLI_MAX_BATCH);
    if (st == FF_OK && n_given && want_n > d[0])
        st = FF_FAIL(FF_ERR_INPUT, "--batch %lld: the input file holds only %lld images", (long long)want_n,
                     (long long)d[0]);
    if (st == FF_OK) {
        *x = malloc((size_t)(d[0] * ff_shape_numel(m->input)) * sizeof(float));
        if (!*x)
            st = FF_FAIL(FF_ERR_OOM, "input of %lld images", (long long)d[0]);
        else
            st = ff_h5_read(*x, f, "input", FF_H5_F32, 4, d);
        *n = n_given ? want_n : d[0];
    }
    // A NaN or infinity in the input reaches every logit of its image: refuse it, naming where.
    const int64_t per = ff_shape_numel(m->input);
    for (int64_t i = 0; st == FF_OK && i < d[0] * per; i++)
        if (!isfinite((*x)[i]))
            st = FF_FAIL(FF_ERR_INPUT, "dataset 'input' element [%lld] (image %lld) is %s: expected finite values",
                         (long long)i, (long long)(i / per), isnan((*x)[i]) ? "NaN" : "Inf");
    ff_h5_close(f);
    if (st != FF_OK) {
        free(*x);  // callers own memory only on success
        *x = NULL;
        return ff_fail_context(st, "input file '%s'", path);
    }
    return FF_OK;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void print_top5(const float *y, int64_t n, int64_t classes) {
    int64_t show = n < 4 ? n : 4;
    for (int64_t i = 0; i < show; i++) {
        const float *p = y + i * classes;
        int top[5];
        int k = classes < 5 ? (int)classes : 5;
        for (int t = 0; t < k; t++) {
            int best = -1;
            for (int64_t c = 0; c < classes; c++) {
                int taken = 0;
                for (int u = 0; u < t; u++) taken |= top[u] == (int)c;
                if (!taken && (best < 0 || p[c] > p[best])) best = (int)c;
            }
            top[t] = best;
        }
        printf("image %lld top-%d:", (long long)i, k);
        for (int t = 0; t < k; t++) printf(" %d (%.4g)", top[t], (double)p[top[t]]);
        printf("\n");
    }
}

static void print_trace(const ff_trace *t, const ff_model *m, int rank, int ranks) {
    if (!t || t->calls == 0) return;
    printf("trace (rank %d of %d, mean per forward over %lld):\n", rank, ranks, (long long)t->calls);
    printf("  %-8s %10s %10s %10s %10s %10s %12s %12s %10s\n", "layer", "compute ms", "h2d ms", "d2h ms", "comm ms",
           "host ms", "sent bytes", "halo bytes", "busbw GB/s");
    for (int l = 0; l <= m->n_layers; l++) {
        int row = l == m->n_layers ? FF_MAX_LAYERS : l;
        double s = 0;
        for (int p = 0; p < FF_N_PHASES; p++) s += t->seconds[row][p];
        if (s == 0 && t->comm_bytes[row] == 0) continue;
        printf("  %-8s", l == m->n_layers ? "(other)" : m->layers[l].name);
        for (int p = 0; p < FF_N_PHASES; p++) printf(" %10.3f", 1e3 * t->seconds[row][p] / (double)t->calls);
        const double comm_s = t->seconds[row][FF_PHASE_COMM];
        printf(" %12lld %12lld %10.3f\n", (long long)(t->comm_bytes[row] / t->calls),
               (long long)(t->halo_bytes[row] / t->calls), comm_s > 0 ? t->bus_bytes[row] / comm_s / 1e9 : 0.0);
    }
}

int ff_cmd_infer(int argc, char **argv) {
    infer_args a;
    int rc = parse(&a, argc, argv);
    if (rc) return rc < 0 ? FF_EXIT_OK : rc;

    ff_model m;
    ff_exec_options o;
    ff_status st = ff_model_init(&m, a.model);
    if (st == FF_OK) st = ff_cli_exec_options(&o, &m, a.mode, a.split, &a.plan, a.fault, a.trace);
    if (st != FF_OK) return ff_cli_fail("infer", st);
    if (ff_mode_is_multirank(o.mode) && (st = ff_cli_mpi_comm(&o.comm)) != FF_OK) return ff_cli_fail("infer", st);
    const int rank = o.comm ? ff_comm_rank(o.comm) : 0, ranks = o.comm ? ff_comm_size(o.comm) : 1;

    float *x = NULL, *y = NULL;  // x (n, C, H, W), y (n, classes): rank 0 only
    double *ms = NULL;           // (iters)
    int64_t n = a.batch;
    ff_weights wt = {0};
    ff_executor *e = NULL;
    bool follower = false;  // this rank stops because rank 0 failed (rank 0 says why)
    // Inputs and weights are read on rank 0 only; executors scatter/broadcast what ranks need.
    if (rank == 0) {
        if (a.input) {
            st = read_input(&x, &n, &m, a.input, a.batch, a.batch_given);
        } else {
            x = malloc((size_t)(n * ff_shape_numel(m.input)) * sizeof(float));
            if (!x)
                st = FF_FAIL(FF_ERR_OOM, "input of %lld images", (long long)n);
            else
                ff_input_generate(x, &m, n, a.seed);
        }
        if (st == FF_OK) st = ff_cli_load_weights(&wt, &m, a.weights, a.seed);
        if (st == FF_OK && a.save_weights && (st = ff_weights_save_h5(&wt, &m, a.save_weights)) == FF_OK)
            printf("weights written to %s (digest %016llx)\n", a.save_weights,
                   (unsigned long long)ff_weights_digest(&wt));
        if (st == FF_OK && !(y = malloc((size_t)(n * m.classes) * sizeof(float))))
            st = FF_FAIL(FF_ERR_OOM, "output of %lld images", (long long)n);
    }  // other ranks get the weights from rank 0 inside the executor (mpi mode broadcasts them)
    if (ranks > 1) {
        // Every rank learns rank 0's outcome and n (the input file may have decided it), so that a
        // bad file on rank 0 stops every rank together and is reported once.
        int64_t sn[2] = {(int64_t)st, n};
        ff_status bs = ff_comm_bcast(o.comm, sn, sizeof sn, 0);
        if (bs != FF_OK) {
            st = bs;
        } else if (rank != 0 && sn[0] != FF_OK) {
            st = (ff_status)sn[0];
            follower = true;
        }
        n = sn[1];
    }
    if (st != FF_OK) goto done;
    o.max_batch = n;
    if ((st = ff_exec_create(&e, &m, &wt, &o)) != FF_OK) goto done;

    ms = calloc((size_t)a.iters, sizeof(double));
    if (!ms) {
        st = FF_FAIL(FF_ERR_OOM, "timings of %lld iterations", (long long)a.iters);
        goto done;
    }
    // One untimed warm-up: the first forward pays for first-touch pages, caches and (GPU) module
    // loading and graph capture, which is not what a per-image time should report.
    if ((st = ff_exec_forward(e, y, x, n, 0, m.n_layers - 1)) != FF_OK) goto done;
    if (ff_exec_trace(e)) ff_trace_reset(ff_exec_trace(e));
    for (int64_t it = 0; it < a.iters; it++) {
        if (ranks > 1 && (st = ff_comm_barrier(o.comm)) != FF_OK) goto done;
        double t0 = ff_now();
        if ((st = ff_exec_forward(e, y, x, n, 0, m.n_layers - 1)) != FF_OK) goto done;
        ms[it] = 1e3 * (ff_now() - t0);
    }
    if (rank == 0) {
        qsort(ms, (size_t)a.iters, sizeof(double), cmp_double);
        char hex[17];
        uint64_t d = ff_digest_f32(y, (size_t)(n * m.classes));
        printf("model %s, mode %s%s%s, ranks %d, batch %lld\n", m.name, ff_mode_name(o.mode),
               o.split != FF_SPLIT_NONE ? ", split " : "", o.split != FF_SPLIT_NONE ? ff_split_name(o.split) : "",
               ranks, (long long)n);
        print_top5(y, n, m.classes);
        printf("output digest: %s\n", ff_digest_hex(hex, d));
        double med = ms[a.iters / 2];
        printf(
            "time: %.3f ms median of %lld warm iteration%s (min %.3f, max %.3f), %.1f images/s, %.2f GFLOP/s\n"
            "      (after 1 untimed warm-up; --iters K for more; fivefold bench times a verified configuration)\n",
            med, (long long)a.iters, a.iters == 1 ? "" : "s", ms[0], ms[a.iters - 1], (double)n / (med / 1e3),
            (double)m.flops_total * (double)n / (med / 1e3) / 1e9);
        if (a.output) {
            int64_t f;
            int64_t dims[2] = {n, m.classes};
            st = ff_h5_create(&f, a.output);
            if (st == FF_OK) {
                st = ff_h5_write(f, "output", FF_H5_F32, y, 2, dims);
                if (st == FF_OK) st = ff_h5_write_attr_str(f, "output", "fnv1a64", hex);
                if (st == FF_OK) st = ff_h5_write_attr_str(f, "output", "model", m.name);
                ff_h5_close(f);
            }
            if (st != FF_OK) goto done;
            printf("output written to %s\n", a.output);
        }
    }
    if (a.trace) {
        // Ranks print in turn so the tables do not interleave.
        for (int r = 0; r < ranks; r++) {
            if (ranks > 1) ff_comm_barrier(o.comm);
            if (r == rank) print_trace(ff_exec_trace(e), &m, rank, ranks);
            fflush(stdout);
        }
    }
done:
    ff_exec_destroy(e);
    ff_weights_free(&wt);
    free(x);
    free(y);
    free(ms);
    if (st == FF_OK) return FF_EXIT_OK;
    return follower ? ff_cli_fail_quiet("infer", st) : ff_cli_fail("infer", st);
}
