// `fivefold verify`: every check (golden/README.md) for a model/mode/split, one row each, then
// "N passed, M failed"; exit 4 on any failure (never a failure printed with exit 0).
#include <getopt.h>
#include <stdlib.h>
#include <regex.h>
#include <string.h>

#include "cli.h"
#include "fivefold/train_golden.h"
#include "fivefold/verify.h"

static void help(void) {
    printf(
        "usage: fivefold verify [--model alexnet|mnist-cnn|mlp-small] [--mode serial|mpi|cuda|hybrid|direct]\n"
        "                       [--split batch|rows|replicate] [--ranks P] [--batch N] [--golden F.h5]\n"
        "                       [--train-golden F.h5]\n"
        "                       [--filter REGEX] [--json OUT.json] [--record] [--trust]\n"
        "                       [--inject-fault LAYER] [--verbose]\n"
        "                       " FF_CLI_PLAN_USAGE "\n                       " FF_CLI_EXEC_USAGE
        "\n\n"
        "Checks the mode against the PyTorch golden file (golden/README.md explains every rule):\n"
        "  per layer   the golden float32 input of each layer through our layer, against PyTorch's\n"
        "              float64 output. Dot-product layers (conv, linear) pass two rules: the rigorous\n"
        "              float32 forward-error bound gamma_K (|b| + sum|w x|) (bound=), which no correct\n"
        "              summation order exceeds, and a statistical rule against the rounding noise of\n"
        "              the algorithm's own order (stat=: max and per-channel RMS, 1e-9 false alarms),\n"
        "              (AlexNet conv2: one weight off by 1e-4 fails it). relu/maxpool/flatten exact, lrn/softmax\n"
        "              a derived ULP bound\n"
        "  end to end  logits and output within 6 sigma of the float64 chain; top-1/top-5 = PyTorch's\n"
        "  training    mnist-cnn (serial, cuda) and mlp-small (every mode, through that mode's trainer and\n"
        "              ranks): each layer's backward in isolation, the step-1 gradient, 10 SGD steps' losses\n"
        "              and final weights against PyTorch's training golden (golden/data/train-<model>.h5);\n"
        "              mlp-small's synthetic batches also against the C generator\n"
        "  digests     each output's FNV-1a digest against the one recorded for the plan's digest\n"
        "              class (=rec; cpu for serial and mpi, gpu for the default GPU plan, gpu-direct,\n"
        "              gpu-wg2, ... for others). A class the golden has no record of is judged by\n"
        "              tolerance alone (\"digest: not compared\"; --record writes one), except that mpi\n"
        "              is compared with serial computed in the same run (=serial). --backend vendor and\n"
        "              tf32 have no digest class: they are judged by tolerance only\n"
        "One row per check: case, rule, max ULP, %% of each bound used, worst element (ours,\n"
        "reference), digest, PASS/FAIL. Ends with 'N passed, M failed'. Exit 0 all passed, 4 a check failed,\n"
        "2 bad usage or a refused golden, 77 mode unavailable here.\n"
        "  --model M         default: every model with a golden (mnist-cnn, alexnet, mlp-small); the full\n"
        "                    mlp has none (120 M parameters): mlp-small, the same layers at 1/16 the width,\n"
        "                    stands for it\n"
        "  --ranks P         informational (case strings); multi-rank modes take the mpiexec size\n"
        "  --batch N         use the first N golden images (default: all)\n"
        "  --golden F        default: golden/data/<model>.h5 of the source tree or the current directory\n"
        "  --train-golden F  the training golden (default: golden/data/train-<model>.h5; with --golden the\n"
        "                    training rows run only when this is given)\n"
        "  --trust           accept a golden not listed in golden/MANIFEST.sha256 (your own files)\n"
        "  --manifest M      a different manifest file (tests)\n"
        "  --filter REGEX    only the checks whose case string matches (POSIX extended regex)\n"
        "  --json OUT        also write the rows as JSON\n"
        "  --record          store this run's output digests as the reference for the plan's digest\n"
        "                    class in the golden (/expected/<class>, created if new; the manifest is\n"
        "                    updated); prints what changed\n"
        "  --inject-fault L  test hook: perturb layer L's first output element (name or index);\n"
        "                    verify must fail\n"
        "  --verbose         error messages also name the source location\n" FF_CLI_PLAN_HELP FF_CLI_EXEC_HELP
        "Multi-rank: mpiexec -n 4 fivefold verify --mode mpi --split rows --model alexnet\n");
}

typedef struct {
    const char *model, *mode, *split, *golden, *train_golden, *filter, *json, *fault, *manifest;
    ff_cli_plan_args plan;
    int64_t ranks, batch;
    bool record, trust;
} verify_args;

static int parse(verify_args *a, int argc, char **argv) {
    memset(a, 0, sizeof *a);
    static const struct option opts[] = {{"model", required_argument, 0, 'm'},
                                         {"mode", required_argument, 0, 'M'},
                                         {"split", required_argument, 0, 's'},
                                         {"ranks", required_argument, 0, 'P'},
                                         {"golden", required_argument, 0, 'g'},
                                         {"train-golden", required_argument, 0, 'G'},
                                         {"filter", required_argument, 0, 'F'},
                                         {"json", required_argument, 0, 'j'},
                                         {"record", no_argument, 0, 'r'},
                                         {"trust", no_argument, 0, 'T'},
                                         {"inject-fault", required_argument, 0, 'f'},
                                         {"batch", required_argument, 0, 'n'},
                                         FF_CLI_PLAN_OPTIONS,
                                         {"manifest", required_argument, 0, 'X'},
                                         {"verbose", no_argument, 0, 'v'},
                                         {"help", no_argument, 0, 'h'},
                                         FF_CLI_EXEC_OPTIONS,
                                         {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    for (int c, li = 0; (c = getopt_long(argc, argv, "", opts, &li)) != -1;) {
        ff_status st = c == '?' || c == ':' ? FF_OK : ff_cli_optarg(opts, li, optarg);
        if (st != FF_OK) return ff_cli_fail("verify", st);
        if (ff_cli_plan_arg(&a->plan, c, optarg)) continue;
        switch (c) {
            case 'm': a->model = optarg; break;
            case 'M': a->mode = optarg; break;
            case 's': a->split = optarg; break;
            case 'P': st = ff_cli_parse_i64(&a->ranks, "--ranks", optarg, 1, 1 << 20); break;
            case 'g': a->golden = optarg; break;
            case 'G': a->train_golden = optarg; break;
            case 'F': a->filter = optarg; break;
            case 'j': a->json = optarg; break;
            case 'r': a->record = true; break;
            case 'T': a->trust = true; break;
            case 'f': a->fault = optarg; break;
            case 'n': st = ff_cli_parse_i64(&a->batch, "--batch", optarg, 1, FF_CLI_MAX_BATCH); break;
            case 'X': a->manifest = optarg; break;
            case 'v': ff_cli_verbose = true; break;
            case 'h': help(); return -1;
            default: return ff_cli_usage("verify", "unknown or incomplete option '%s'", argv[optind - 1]);
        }
        if (st != FF_OK) return ff_cli_fail("verify", st);
    }
    if (optind < argc) return ff_cli_usage("verify", "unexpected argument '%s'", argv[optind]);
    if ((a->golden || a->train_golden) && !a->model)
        return ff_cli_usage("verify", "--golden and --train-golden need --model (which model the file is for)");
    return 0;
}

// --inject-fault takes a layer name (as infer does) or its index.
static const char *fault_name(const ff_model *m, const char *fault) {
    if (!fault) return NULL;
    char *end;
    long v = strtol(fault, &end, 10);
    if (*fault && !*end && v >= 0 && v < m->n_layers) return m->layers[v].name;
    return fault;
}

// Whether the training golden runs for this model and mode: mnist-cnn's on the serial and cuda
// modes (its multi-rank GPU twins equal cuda bit for bit: verify/gpu/train_gpu.sh), mlp-small's in
// every mode through that mode's trainer and ranks.
static bool train_rows(const char *model, ff_mode mode) {
    if (!strcmp(model, "mlp-small")) return true;
    return !strcmp(model, "mnist-cnn") && (mode == FF_MODE_SERIAL || mode == FF_MODE_CUDA);
}

static int verify_model(const verify_args *a, const char *model, int *passed, int *failed) {
    ff_model m;
    ff_verify_config cfg;
    ff_verify_config_default(&cfg);
    if (!strcmp(model, "mlp") && !a->golden)
        return ff_cli_usage("verify",
                            "the full mlp has no PyTorch golden (120 M parameters; it would not fit the goldens' "
                            "size budget). Its layers are those of mlp-small at 16 times the width, which "
                            "`fivefold verify --model mlp-small` checks against PyTorch (inference and training) in "
                            "every mode; a golden of your own: --model mlp --golden F.h5 --trust");
    ff_status st = ff_model_init(&m, model);
    if (st == FF_OK)
        st = ff_cli_exec_options(&cfg.exec, &m, a->mode, a->split, &a->plan, fault_name(&m, a->fault), false);
    if (st != FF_OK) return ff_cli_fail("verify", st);
    if (ff_mode_is_multirank(cfg.exec.mode)) {
        if ((st = ff_cli_mpi_comm(&cfg.exec.comm)) != FF_OK) return ff_cli_fail("verify", st);
        if (a->ranks && a->ranks != ff_cli_ranks())
            return ff_cli_usage("verify", "--ranks %lld but %d ranks run: start it with mpiexec -n %lld",
                                (long long)a->ranks, ff_cli_ranks(), (long long)a->ranks);
    } else if (a->ranks > 1) {
        return ff_cli_usage("verify", "--ranks %lld: mode %s runs on one process", (long long)a->ranks,
                            ff_mode_name(cfg.exec.mode));
    }
    if (a->train_golden && !train_rows(model, cfg.exec.mode))
        return ff_cli_usage("verify", "--train-golden: model %s has no training rows in mode %s", model,
                            ff_mode_name(cfg.exec.mode));
    int rank = ff_cli_rank();
    cfg.model = model;
    cfg.batch = a->batch;
    cfg.golden = a->golden;
    cfg.trust = a->trust;
    cfg.manifest = a->manifest;
    cfg.filter = a->filter;
    cfg.record = a->record;
    cfg.ranks = ff_cli_ranks();
    cfg.progress = rank == 0 ? stdout : NULL;
    ff_verify_report rep;
    st = ff_verify_run(&rep, &cfg);
    if (st != FF_OK) {
        ff_verify_report_free(&rep);
        return ff_cli_fail("verify", st);
    }
    // Training rows (issues 7, 16): the backward and SGD trajectory against PyTorch's training
    // golden (train_rows: which models and modes), the step-1 gradient, the loss trajectory and the
    // final weights computed by the mode's trainer on its device and, multi-rank, its ranks
    // (collective: every rank runs it; rank 0 prints).
    if (train_rows(model, cfg.exec.mode) && (!a->golden || a->train_golden) && !a->record) {
        ff_verify_report trep;
        memset(&trep, 0, sizeof trep);
        ff_train_golden_config tcfg = {0};
        tcfg.model = model;
        tcfg.golden = a->train_golden;
        tcfg.trust = a->trust;
        tcfg.manifest = a->manifest;
        tcfg.mode = cfg.exec.mode;
        tcfg.comm = cfg.exec.comm;
        tcfg.exec = &cfg.exec;
        st = ff_train_verify_golden(&trep, &tcfg);
        if (st != FF_OK) {
            ff_verify_report_free(&trep);
            ff_verify_report_free(&rep);
            return ff_cli_fail("verify", st);
        }
        regex_t re;
        int use_re = a->filter && regcomp(&re, a->filter, REG_EXTENDED | REG_NOSUB) == 0;
        for (int i = 0; i < trep.n_rows; i++) {
            const ff_verify_row *r = &trep.rows[i];
            if (use_re && regexec(&re, r->case_str, 0, NULL, 0) != 0) continue;
            if (rep.n_rows == rep.cap) {  // appended to the report, so --json lists them too
                int cap = rep.cap ? 2 * rep.cap : 64;
                ff_verify_row *nr = realloc(rep.rows, (size_t)cap * sizeof *nr);
                if (!nr) break;
                rep.rows = nr;
                rep.cap = cap;
            }
            rep.rows[rep.n_rows++] = *r;
            if (rank == 0) ff_verify_print_row(stdout, r);
            if (r->pass)
                rep.passed++;
            else
                rep.failed++;
        }
        rep.pass = rep.failed == 0 && rep.n_rows > 0;
        if (use_re) regfree(&re);
        ff_verify_report_free(&trep);
    }
    if (rank == 0 && a->json) {
        char path[1100];
        // One JSON per model when several run.
        if (a->model)
            snprintf(path, sizeof path, "%s", a->json);
        else {
            const char *dot = strrchr(a->json, '.');
            size_t stem = dot ? (size_t)(dot - a->json) : strlen(a->json);
            snprintf(path, sizeof path, "%.*s-%s%s", (int)stem, a->json, model, dot ? dot : ".json");
        }
        st = ff_verify_write_json(&rep, &cfg, path);
        if (st != FF_OK) {
            ff_verify_report_free(&rep);
            return ff_cli_fail("verify", st);
        }
        printf("rows written to %s\n", path);
    }
    *passed += rep.passed;
    *failed += rep.failed;
    ff_verify_report_free(&rep);
    return FF_EXIT_OK;
}

int ff_cmd_verify(int argc, char **argv) {
    verify_args a;
    int rc = parse(&a, argc, argv);
    if (rc) return rc < 0 ? FF_EXIT_OK : rc;
    // Every model with a golden (the full mlp has none: verify_model says why when it is asked for).
    static const char *all[] = {"mnist-cnn", "alexnet", "mlp-small"};
    int passed = 0, failed = 0;
    if (a.model) {
        rc = verify_model(&a, a.model, &passed, &failed);
        if (rc) return rc;
    } else {
        for (int i = 0; i < (int)(sizeof all / sizeof all[0]); i++) {
            rc = verify_model(&a, all[i], &passed, &failed);
            if (rc) return rc;
        }
    }
    // Only rank 0 holds the rows and the verdict (mpiexec exits with the largest rank exit code).
    if (ff_cli_rank() != 0) return FF_EXIT_OK;
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? FF_EXIT_CHECK_FAILED
                  : (passed ? FF_EXIT_OK
                            : ff_cli_usage("verify", "--filter '%s' matched no check", a.filter ? a.filter : ""));
}
