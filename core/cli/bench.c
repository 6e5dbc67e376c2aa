// `fivefold bench`: times only what has just passed its checks.
//   1. gate: the verification checks for exactly this configuration (model, mode, split, ranks,
//      build) against the golden file, plus a batch-N check: the batch that will be timed, built
//      from the golden images, must reproduce the verified outputs bit for bit. Any failure: the
//      failed check is named, nothing is timed, exit 3.
//   2. timing: warm-up, repeats, median and spread; a separate traced pass for the phase split.
//   3. post-check: every timed run's output digest equals the gated batch-N digest (#wrong = 0).
//   4. results: a JSON file (schema fivefold-bench/1) and, with --peer pytorch, PyTorch measured on
//      the same configuration in the same invocation, with the speedup.
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "cli.h"
#include "fivefold/bench.h"
#include "fivefold/build_info.h"
#include "fivefold/digest.h"
#include "fivefold/gate.h"
#include "fivefold/json.h"
#include "fivefold/layers_cpu.h"
#include "fivefold/machine.h"

#define MAX_BATCHES 16

static void help(void) {
    printf(
        "usage: fivefold bench --model alexnet|mnist-cnn --mode MODE [--split S] [--batch N[,N...]]\n"
        "                      [--iters K] [--warmup W] [--json OUT.json|DIR] [--peer pytorch]\n"
        "                      [--golden F.h5 [--trust]] [--inject-fault LAYER] [--verbose]\n"
        "                      " FF_CLI_PLAN_USAGE "\n                      " FF_CLI_EXEC_USAGE
        "\n\n"
        "Runs the verification checks for exactly this configuration first and times nothing unless\n"
        "they pass (exit 3 naming the failed check). Then times --iters forwards per batch size after\n"
        "--warmup ones, checks that every timed output equals the gated output (#wrong), and prints\n"
        "median, spread, images/s, GFLOP/s and the phase split (compute, h2d, d2h, comm, host).\n"
        "  --json OUT       result file (schema fivefold-bench/1); a directory gets one file per batch\n"
        "                   named <model>-<mode>[-<split>]-p<ranks>-n<batch>.json (default: none)\n"
        "  --peer pytorch   also run bench/peer_pytorch.py on the same configuration (python from\n"
        "                   $FF_PYTHON, default the one the build found): on one GPU eager and a captured\n"
        "                   CUDA graph, on several GPUs DDP, on the CPU eager; speedup = median of the\n"
        "                   fastest variant / ours (every variant is printed and kept in the JSON)\n"
        "  --batch N[,N...] batch sizes, each 1..%d, at most %d of them\n"
        "  --iters K        timed forwards per batch size (1..100000); --warmup W untimed ones before (0..1000)\n"
        "  --golden F.h5    the golden the gate checks against (default golden/data/<model>.h5); --trust\n"
        "                   accepts one not listed in golden/MANIFEST.sha256\n"
        "  --verbose        error messages also name the source location\n"
        "  --loader         the IDX data loader benchmark instead (fivefold bench --loader --help)\n" FF_CLI_PLAN_HELP
            FF_CLI_EXEC_HELP "Defaults: --batch 1, --iters 20, --warmup 3. Multi-rank modes run under mpiexec.\n",
        FF_CLI_MAX_BATCH, MAX_BATCHES);
}

typedef struct {
    const char *model, *mode, *split, *json, *peer, *golden, *fault;
    ff_cli_plan_args plan;
    int64_t batches[MAX_BATCHES];
    int n_batches;
    int64_t iters, warmup;
    bool trust;
} bench_args;

// "N" or "N,N,...": every item a size in 1..FF_CLI_MAX_BATCH; an empty item ("1,,2", "1,") is an
// error, not skipped (strtok would skip it and time something the user did not ask for).
static ff_status parse_batches(bench_args *a, const char *s) {
    FF_TRY(ff_cli_value("--batch", s));
    a->n_batches = 0;
    int item = 1;
    for (const char *p = s;; item++) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == 0)
            return FF_FAIL(FF_ERR_INPUT, "--batch '%s': item %d is empty: expected N or N,N,... (each 1..%d)", s, item,
                           FF_CLI_MAX_BATCH);
        if (a->n_batches == MAX_BATCHES)
            return FF_FAIL(FF_ERR_INPUT, "--batch '%s': more than %d sizes", s, MAX_BATCHES);
        char tok[32];
        if (len >= sizeof tok)
            return FF_FAIL(FF_ERR_INPUT, "--batch '%s': item %d '%.*s' is not a size in 1..%d", s, item, (int)len, p,
                           FF_CLI_MAX_BATCH);
        memcpy(tok, p, len);
        tok[len] = 0;
        FF_TRY(ff_cli_parse_i64(&a->batches[a->n_batches++], "--batch", tok, 1, FF_CLI_MAX_BATCH));
        if (!comma) break;
        p = comma + 1;
    }
    return FF_OK;
}

static int parse(bench_args *a, int argc, char **argv) {
    memset(a, 0, sizeof *a);
    a->model = "alexnet";
    a->mode = "serial";
    a->batches[0] = 1;
    a->n_batches = 1;
    a->iters = 20;
    a->warmup = 3;
    static const struct option opts[] = {{"model", required_argument, 0, 'm'},
                                         {"mode", required_argument, 0, 'M'},
                                         {"split", required_argument, 0, 's'},
                                         {"batch", required_argument, 0, 'n'},
                                         {"iters", required_argument, 0, 'k'},
                                         {"warmup", required_argument, 0, 'W'},
                                         {"json", required_argument, 0, 'j'},
                                         {"peer", required_argument, 0, 'p'},
                                         {"golden", required_argument, 0, 'g'},
                                         {"trust", no_argument, 0, 'T'},
                                         FF_CLI_PLAN_OPTIONS,
                                         FF_CLI_EXEC_OPTIONS,
                                         {"inject-fault", required_argument, 0, 'f'},
                                         {"verbose", no_argument, 0, 'v'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    for (int c, li = 0; (c = getopt_long(argc, argv, "", opts, &li)) != -1;) {
        ff_status st = c == '?' || c == ':' ? FF_OK : ff_cli_optarg(opts, li, optarg);
        if (st != FF_OK) return ff_cli_fail("bench", st);
        if (ff_cli_plan_arg(&a->plan, c, optarg)) continue;
        switch (c) {
            case 'm': a->model = optarg; break;
            case 'M': a->mode = optarg; break;
            case 's': a->split = optarg; break;
            case 'n': st = parse_batches(a, optarg); break;
            case 'k': st = ff_cli_parse_i64(&a->iters, "--iters", optarg, 1, 100000); break;
            case 'W': st = ff_cli_parse_i64(&a->warmup, "--warmup", optarg, 0, 1000); break;
            case 'j': a->json = optarg; break;
            case 'p': a->peer = optarg; break;
            case 'g': a->golden = optarg; break;
            case 'T': a->trust = true; break;
            case 'f': a->fault = optarg; break;
            case 'v': ff_cli_verbose = true; break;
            case 'h': help(); return -1;
            default: return ff_cli_usage("bench", "unknown or incomplete option '%s'", argv[optind - 1]);
        }
        if (st != FF_OK) return ff_cli_fail("bench", st);
    }
    if (optind < argc) return ff_cli_usage("bench", "unexpected argument '%s'", argv[optind]);
    if (a->peer && strcmp(a->peer, "pytorch") != 0)
        return ff_cli_usage("bench", "--peer '%s': expected pytorch", a->peer);
    return 0;
}

// ---- the PyTorch peer, run in the same invocation on the same machine ----
typedef struct {
    bool ran;
    char name[96];
    double median_ms;
    char torch[32], device[128];
} peer_result;

// Every PyTorch variant measured for one configuration; the speedup is quoted against the
// strongest (the smallest median), never against eager alone when a faster variant exists.
#define MAX_PEER_VARIANTS 2
typedef struct {
    int n;
    peer_result v[MAX_PEER_VARIANTS];
    int best;  // index of the strongest in v; -1 when none ran
} peer_set;

// The variants a performance-minded PyTorch user would try for this configuration, as extra flags
// of bench/peer_pytorch.py: on one GPU eager and a captured CUDA graph; on several GPUs DDP; on
// the CPU eager (there is no graph capture on the CPU).
static int peer_variant_flags(const char *flags[MAX_PEER_VARIANTS], const ff_exec_options *o, int ranks) {
    ff_exec_caps caps;
    ff_mode_caps(&caps, o->mode);
    const bool gpu = caps.device == FF_DEVICE_CUDA;
    if (gpu && ranks > 1) {
        flags[0] = " --ddp";
        return 1;
    }
    flags[0] = "";
    if (!gpu) return 1;
    flags[1] = " --graph";
    return 2;
}

static bool json_number(double *out, const char *text, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(text, pat);
    if (!p) return false;
    p += strlen(pat);
    char *end;
    double v = strtod(p, &end);
    if (end == p) return false;
    *out = v;
    return true;
}

static bool json_string(char *out, size_t cap, const char *text, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": \"", key);
    const char *p = strstr(text, pat);
    if (!p) {
        snprintf(pat, sizeof pat, "\"%s\":\"", key);
        if (!(p = strstr(text, pat))) return false;
    }
    p += strlen(pat);
    size_t k = 0;
    while (p[k] && p[k] != '"' && k + 1 < cap) {
        out[k] = p[k];
        k++;
    }
    out[k] = 0;
    return true;
}

// Runs bench/peer_pytorch.py for this configuration; the peer's JSON line is on its stdout.
static ff_status run_peer(peer_result *r, const ff_exec_options *o, const char *model, int64_t batch, int ranks,
                          int64_t iters, const char *variant_flags) {
    memset(r, 0, sizeof *r);
    const char *py = getenv("FF_PYTHON");
    if (!py || !*py) py = FF_DEFAULT_PYTHON[0] ? FF_DEFAULT_PYTHON : "python3";
    ff_exec_caps caps;
    ff_mode_caps(&caps, o->mode);
    const bool gpu = caps.device == FF_DEVICE_CUDA;
    char cmd[1024], nproc[16];
    snprintf(nproc, sizeof nproc, "%d", ranks);
    // CPU modes compare with PyTorch on the CPU with as many threads as we have ranks (one for
    // serial; torch's own default can be 1 thread where OpenMP sees a CPU quota, which would
    // flatter a multi-rank run);
    // GPU modes with cuDNN fp32 (TF32 off) or TF32 when --precision tf32, eager or as a variant says;
    // tf32x3 (fp32-class products on tensor cores) is compared with the peer's fp32.
    snprintf(cmd, sizeof cmd,
             "%s %s/bench/peer_pytorch.py --model %s --batch %lld --iters %lld --device %s --threads %d "
             "--precision %s%s%s%s 2>/dev/null",
             py, FF_SOURCE_DIR, model, (long long)batch, (long long)iters, gpu ? "cuda" : "cpu",
             o->mode == FF_MODE_SERIAL ? 1 : ranks,
             ff_precision_name(o->plan.precision == FF_PRECISION_TF32X3 ? FF_PRECISION_FP32 : o->plan.precision),
             variant_flags, gpu && ranks > 1 ? " --nproc " : "", gpu && ranks > 1 ? nproc : "");
    FILE *p = popen(cmd, "r");
    if (!p) return FF_FAIL(FF_ERR_IO, "cannot start the PyTorch peer: %s", cmd);
    char text[8192];
    size_t len = fread(text, 1, sizeof text - 1, p);
    text[len] = 0;
    int rc = pclose(p);
    rc = WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + (WIFSIGNALED(rc) ? WTERMSIG(rc) : 0);
    if (rc != 0 || !json_number(&r->median_ms, text, "median_ms"))
        return FF_FAIL(FF_ERR_INPUT,
                       "the PyTorch peer failed (exit %d): %s\n  hint: it needs torch for %s (set FF_PYTHON "
                       "to a python3 that has it)",
                       rc, cmd, py);
    json_string(r->name, sizeof r->name, text, "name");
    json_string(r->torch, sizeof r->torch, text, "torch");
    json_string(r->device, sizeof r->device, text, "device");
    r->ran = true;
    return FF_OK;
}

static ff_status write_json(const char *path, const bench_args *a, const ff_model *m, const ff_exec_options *o,
                            int ranks, int64_t batch, const ff_gate_result *g, const ff_bench_timing *t,
                            const peer_set *peers) {
    const peer_result *peer = peers->best >= 0 ? &peers->v[peers->best] : &peers->v[0];
    FILE *f = fopen(path, "w");
    if (!f) return FF_FAIL(FF_ERR_IO, "cannot write '%s'", path);
    ff_machine mc;
    ff_machine_probe(&mc);
    char hex[17], when[32];
    time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    ff_json j;
    ff_json_init(&j, f);
    ff_json_begin_object(&j, NULL);
    ff_json_str(&j, "schema", "fivefold-bench/1");
    ff_json_str(&j, "created", when);
    ff_json_str(&j, "commit", FF_GIT_COMMIT);
    ff_json_begin_object(&j, "build");
    ff_json_str(&j, "version", FF_VERSION);
    ff_json_str(&j, "type", FF_BUILD_TYPE);
    ff_json_str(&j, "compiler", FF_BUILD_C_COMPILER);
    ff_json_str(&j, "flags", FF_BUILD_C_FLAGS);
    ff_json_str(&j, "cuda", strcmp(FF_BUILD_HAVE_CUDA_STR, "ON") == 0 ? FF_BUILD_CUDA_VERSION : NULL);
    ff_json_str(&j, "cuda_arch", strcmp(FF_BUILD_HAVE_CUDA_STR, "ON") == 0 ? FF_BUILD_CUDA_ARCH : NULL);
    ff_json_end_object(&j);
    ff_json_begin_object(&j, "machine");
    ff_json_str(&j, "cpu", mc.cpu);
    ff_json_int(&j, "cores", mc.cores);
    ff_json_str(&j, "host", mc.hostname);
    ff_json_str(&j, "gpu", mc.gpus ? mc.gpu : NULL);
    ff_json_int(&j, "gpu_count", mc.gpus);
    ff_json_int(&j, "cuda_driver", mc.cuda_driver);
    ff_json_str(&j, "mpi", mc.mpi);
    ff_json_str(&j, "nccl", mc.nccl[0] ? mc.nccl : NULL);
    ff_json_end_object(&j);
    ff_json_begin_object(&j, "config");
    ff_json_str(&j, "model", m->name);
    ff_json_str(&j, "mode", ff_mode_name(o->mode));
    ff_json_str(&j, "split", o->split == FF_SPLIT_NONE ? NULL : ff_split_name(o->split));
    ff_json_int(&j, "ranks", ranks);
    ff_json_int(&j, "batch", batch);
    ff_json_str(&j, "precision", ff_precision_name(o->plan.precision));
    ff_json_str(&j, "backend", o->plan.backend == FF_BACKEND_VENDOR ? "vendor" : "own");
    ff_json_str(&j, "conv", o->plan.conv == FF_CONV_DIRECT ? "direct" : "winograd");
    ff_json_int(&j, "winograd_m", o->plan.winograd_m);
    ff_json_bool(&j, "s2d", o->plan.s2d);
    ff_json_int(&j, "flops_per_image", m->flops_total);
    // the CPU kernels' copy (AVX-512, AVX2 or the baseline: the same bits, not the same speed)
    ff_exec_caps caps;
    ff_mode_caps(&caps, o->mode);
    if (caps.device == FF_DEVICE_CPU) ff_json_int(&j, "cpu_vector_bits", ff_cpu_vector());
    ff_json_end_object(&j);
    ff_json_begin_object(&j, "gate");
    ff_json_bool(&j, "passed", g->passed);
    ff_json_int(&j, "checks", g->checks);
    ff_json_int(&j, "failed", g->failed);
    // Name the golden by its path in the repository, not this machine's path.
    const char *golden = g->golden;
    size_t sl = strlen(FF_SOURCE_DIR);
    if (strncmp(golden, FF_SOURCE_DIR, sl) == 0 && golden[sl] == '/') golden += sl + 1;
    ff_json_str(&j, "golden", golden);
    ff_json_str(&j, "digest", ff_digest_hex(hex, g->batch_digest));
    ff_json_end_object(&j);
    ff_json_begin_object(&j, "timing");
    ff_json_num(&j, "median_ms", t->median_ms);
    ff_json_num(&j, "min_ms", t->min_ms);
    ff_json_num(&j, "max_ms", t->max_ms);
    ff_json_num(&j, "mean_ms", t->mean_ms);
    ff_json_num(&j, "stdev_ms", t->stdev_ms);
    ff_json_int(&j, "iters", t->iters);
    ff_json_int(&j, "warmup", a->warmup);
    ff_json_num(&j, "images_per_s", t->images_per_s);
    ff_json_num(&j, "gflops", t->gflops);
    ff_json_int(&j, "wrong", t->wrong);
    ff_json_begin_object(&j, "phases");
    for (int p = 0; p < FF_N_PHASES; p++) ff_json_num(&j, ff_phase_name(p), t->phase_ms[p]);
    ff_json_end_object(&j);
    ff_json_int(&j, "comm_bytes", t->comm_bytes);
    ff_json_int(&j, "halo_bytes", t->halo_bytes);
    ff_json_int(&j, "gather_bytes", t->comm_bytes - t->halo_bytes);
    ff_json_num(&j, "comm_busbw_gbs", t->comm_busbw_gbs);
    // Per layer, rank 0, mean per forward ("(other)": the input scatter and output gather).
    ff_json_begin_array(&j, "layers");
    for (int l = 0; l <= m->n_layers; l++) {
        const int row = l == m->n_layers ? FF_MAX_LAYERS : l;
        double s = 0;
        for (int p = 0; p < FF_N_PHASES; p++) s += t->layer_ms[row][p];
        if (s == 0 && t->layer_comm_bytes[row] == 0) continue;
        ff_json_begin_object(&j, NULL);
        ff_json_str(&j, "layer", l == m->n_layers ? "(other)" : m->layers[l].name);
        for (int p = 0; p < FF_N_PHASES; p++) {
            char key[32];
            snprintf(key, sizeof key, "%s_ms", ff_phase_name(p));
            ff_json_num(&j, key, t->layer_ms[row][p]);
        }
        ff_json_int(&j, "halo_bytes", t->layer_halo_bytes[row]);
        ff_json_int(&j, "gather_bytes", t->layer_comm_bytes[row] - t->layer_halo_bytes[row]);
        ff_json_num(&j, "busbw_gbs", t->layer_busbw_gbs[row]);
        ff_json_end_object(&j);
    }
    ff_json_end_array(&j);
    if (t->has_resident) {  // device-resident replays: what the GPU peer's figure measures
        ff_json_num(&j, "resident_median_ms", t->resident_median_ms);
        ff_json_num(&j, "resident_min_ms", t->resident_min_ms);
        ff_json_num(&j, "resident_max_ms", t->resident_max_ms);
        ff_json_int(&j, "resident_wrong", t->resident_wrong);
    }
    ff_json_end_object(&j);
    if (peer->ran) {
        ff_json_begin_object(&j, "peer");
        ff_json_str(&j, "name", peer->name);
        ff_json_num(&j, "median_ms", peer->median_ms);
        ff_json_str(&j, "torch", peer->torch);
        ff_json_str(&j, "device", peer->device);
        ff_json_end_object(&j);
        ff_json_begin_array(&j, "peer_variants");  // every variant measured; "peer" is the fastest
        for (int k = 0; k < peers->n; k++) {
            if (!peers->v[k].ran) continue;
            ff_json_begin_object(&j, NULL);
            ff_json_str(&j, "name", peers->v[k].name);
            ff_json_num(&j, "median_ms", peers->v[k].median_ms);
            ff_json_end_object(&j);
        }
        ff_json_end_array(&j);
        // A GPU peer (PyTorch with its input on the device) is compared with our device-resident
        // figure; host-to-host stays in timing.median_ms.
        const bool resident = t->has_resident;  // only GPU modes have it, and their peer runs on the GPU
        ff_json_num(&j, "speedup", peer->median_ms / (resident ? t->resident_median_ms : t->median_ms));
        ff_json_str(&j, "speedup_basis", resident ? "resident_median_ms" : "median_ms");
    }
    ff_json_end_object(&j);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) return FF_FAIL(FF_ERR_IO, "writing '%s' failed", path);
    return FF_OK;
}

static bool is_dir(const char *p) {
    size_t n = strlen(p);
    if (n && p[n - 1] == '/') return true;
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

int ff_cmd_bench(int argc, char **argv) {
    for (int i = 1; i < argc; i++)  // the data loader benchmark has its own flags (loader_bench.c)
        if (!strcmp(argv[i], "--loader")) return ff_loader_bench(argc, argv);
    bench_args a;
    int rc = parse(&a, argc, argv);
    if (rc) return rc < 0 ? FF_EXIT_OK : rc;
    ff_model m;
    ff_exec_options o;
    ff_status st = ff_model_init(&m, a.model);
    if (st == FF_OK) st = ff_cli_exec_options(&o, &m, a.mode, a.split, &a.plan, a.fault, false);
    if (st != FF_OK) return ff_cli_fail("bench", st);
    if (ff_mode_is_multirank(o.mode) && (st = ff_cli_mpi_comm(&o.comm)) != FF_OK) return ff_cli_fail("bench", st);
    int rank = ff_cli_rank(), ranks = ff_cli_ranks();

    for (int bi = 0; bi < a.n_batches; bi++) {
        int64_t n = a.batches[bi];
        char case_str[160];
        snprintf(case_str, sizeof case_str, "%s %s%s%s P=%d N=%lld", m.name, ff_mode_name(o.mode),
                 o.split != FF_SPLIT_NONE ? " split=" : "", o.split != FF_SPLIT_NONE ? ff_split_name(o.split) : "",
                 ranks, (long long)n);
        // 1. The gate.
        ff_gate_config gc = {.model = &m, .opt = o, .batch = n, .golden = a.golden, .trust = a.trust};
        ff_gate_result g;
        ff_gate_state gs = {0};
        st = ff_gate_run(&g, &gs, &gc);
        ff_executor *e = gs.exec;
        float *x = gs.x, *y = gs.y;
        if (st != FF_OK) {
            ff_gate_release(&gs);  // whatever the gate had made before it failed (safe when empty)
            return ff_cli_fail("bench", st);
        }
        if (!g.passed) {
            if (rank == 0)
                fprintf(stderr, "fivefold bench: gate refused %s: check failed: %s\n  nothing was timed (exit %d)\n",
                        case_str, g.first_failure, FF_EXIT_GATE);
            ff_gate_release(&gs);
            fflush(stderr);
            return FF_EXIT_GATE;
        }
        if (rank == 0)
            printf("gate: %s: %d checks passed (golden %s), batch digest %016llx\n", case_str, g.checks, g.golden,
                   (unsigned long long)g.batch_digest);
        // GPU modes: page-lock the host buffers so the host-to-host figure is not the driver's staging.
        size_t xbytes = (size_t)n * (size_t)ff_shape_numel(m.input) * sizeof(float);
        size_t ybytes = (size_t)n * (size_t)m.classes * sizeof(float);
        bool pinned = false;
        ff_exec_caps caps;
        ff_exec_caps_of(&caps, e);
        if (caps.pins_host && x && y) {
            pinned = ff_exec_pin_host(e, x, xbytes) == FF_OK;
            if (pinned && ff_exec_pin_host(e, y, ybytes) != FF_OK) {
                ff_exec_unpin_host(e, x);
                pinned = false;
            }
            if (!pinned) ff_clear_error();  // timed pageable then; the figures say host->host either way
        }
        // 2. Timing, then 3. the post-check inside ff_bench_time (#wrong).
        ff_bench_timing t;
        st = ff_bench_time(&t, e, y, x, n, (int)a.iters, (int)a.warmup, g.batch_digest);
        if (st == FF_OK) {
            // Phase split from a separate traced pass so the timers do not touch the timed runs.
            ff_bench_timing traced;
            ff_exec_set_trace(e, true);
            st = ff_bench_time(&traced, e, y, x, n, a.iters < 5 ? (int)a.iters : 5, 0, g.batch_digest);
            ff_exec_set_trace(e, false);
            if (st == FF_OK) {
                memcpy(t.phase_ms, traced.phase_ms, sizeof t.phase_ms);
                memcpy(t.layer_ms, traced.layer_ms, sizeof t.layer_ms);
                memcpy(t.layer_comm_bytes, traced.layer_comm_bytes, sizeof t.layer_comm_bytes);
                memcpy(t.layer_halo_bytes, traced.layer_halo_bytes, sizeof t.layer_halo_bytes);
                memcpy(t.layer_busbw_gbs, traced.layer_busbw_gbs, sizeof t.layer_busbw_gbs);
                t.comm_bytes = traced.comm_bytes;
                t.halo_bytes = traced.halo_bytes;
                t.comm_busbw_gbs = traced.comm_busbw_gbs;
                t.wrong += traced.wrong;
            }
        }
        if (st != FF_OK) {
            if (pinned) ff_exec_unpin_host(e, x), ff_exec_unpin_host(e, y);
            ff_gate_release(&gs);
            return ff_cli_fail("bench", st);
        }
        peer_set peers = {.best = -1};
        if (rank == 0) {
            printf("%-44s %10s %10s %10s %12s %10s %7s\n", "case", "median ms", "min ms", "max ms", "images/s",
                   "GFLOP/s", "#wrong");
            printf("%-44s %10.3f %10.3f %10.3f %12.1f %10.2f %7lld\n", case_str, t.median_ms, t.min_ms, t.max_ms,
                   t.images_per_s, t.gflops, (long long)t.wrong);
            if (t.has_resident)
                printf(
                    "  device-resident (input already on the device, event-timed replays): median %.3f ms, "
                    "min %.3f, max %.3f; host->host above%s\n",
                    t.resident_median_ms, t.resident_min_ms, t.resident_max_ms, pinned ? " (pinned buffers)" : "");
            printf("  phases (ms per forward, rank 0):");
            for (int p = 0; p < FF_N_PHASES; p++) printf(" %s %.3f", ff_phase_name(p), t.phase_ms[p]);
            if (t.comm_bytes)
                printf("; sent %lld bytes (halo %lld, collectives %lld), bus bandwidth %.3f GB/s",
                       (long long)t.comm_bytes, (long long)t.halo_bytes, (long long)(t.comm_bytes - t.halo_bytes),
                       t.comm_busbw_gbs);
            printf("\n");
            if (a.peer) {
                const char *flags[MAX_PEER_VARIANTS];
                peers.n = peer_variant_flags(flags, &o, ranks);
                const bool res = t.has_resident;  // GPU mode: the peer ran with --device cuda
                const double ours = res ? t.resident_median_ms : t.median_ms;
                for (int k = 0; k < peers.n; k++) {
                    peer_result *pr = &peers.v[k];
                    if (run_peer(pr, &o, m.name, n, ranks, a.iters, flags[k]) != FF_OK) {
                        fprintf(stderr, "fivefold bench: warning: %s\n", ff_last_error());
                        continue;
                    }
                    if (peers.best < 0 || pr->median_ms < peers.v[peers.best].median_ms) peers.best = k;
                    printf("  peer %s (torch %s, %s): %.3f ms median -> speedup %.2fx (vs our %s figure)\n", pr->name,
                           pr->torch, pr->device, pr->median_ms, pr->median_ms / ours,
                           res ? "device-resident" : "host->host");
                }
                if (peers.best >= 0 && peers.n > 1)
                    printf("  against the strongest PyTorch variant (%s): %.2fx\n", peers.v[peers.best].name,
                           peers.v[peers.best].median_ms / ours);
            }
        }
        if (a.peer && ranks > 1) {
            // Rank 0 alone ran PyTorch, for as long as that takes: the others wait for it here
            // without the communication deadline (a rank that dies meanwhile still ends the job).
            const double keep = ff_comm_timeout(o.comm);
            ff_comm_set_timeout(o.comm, 0);
            st = ff_comm_barrier(o.comm);
            ff_comm_set_timeout(o.comm, keep);
            if (st != FF_OK) {
                if (pinned) ff_exec_unpin_host(e, x), ff_exec_unpin_host(e, y);
                ff_gate_release(&gs);
                return ff_cli_fail("bench", st);
            }
        }
        if (t.wrong) {
            if (rank == 0)
                fprintf(stderr, "fivefold bench: %lld timed runs produced an output different from the gated one\n",
                        (long long)t.wrong);
            if (pinned) ff_exec_unpin_host(e, x), ff_exec_unpin_host(e, y);
            ff_gate_release(&gs);
            return ff_cli_fail("bench",
                               FF_FAIL(FF_ERR_INTERNAL, "post-timing check failed: #wrong = %lld", (long long)t.wrong));
        }
        if (rank == 0 && a.json) {
            char path[1024];
            if (is_dir(a.json))
                snprintf(path, sizeof path, "%s%s%s-%s%s%s-p%d-n%lld.json", a.json,
                         a.json[strlen(a.json) - 1] == '/' ? "" : "/", m.name, ff_mode_name(o.mode),
                         o.split != FF_SPLIT_NONE ? "-" : "", o.split != FF_SPLIT_NONE ? ff_split_name(o.split) : "",
                         ranks, (long long)n);
            else if (a.n_batches > 1)
                snprintf(path, sizeof path, "%.*s-n%lld.json",
                         (int)(strlen(a.json) > 5 ? strlen(a.json) - 5 : strlen(a.json)), a.json, (long long)n);
            else
                snprintf(path, sizeof path, "%s", a.json);
            st = write_json(path, &a, &m, &o, ranks, n, &g, &t, &peers);
            if (st != FF_OK) {
                if (pinned) ff_exec_unpin_host(e, x), ff_exec_unpin_host(e, y);
                ff_gate_release(&gs);
                return ff_cli_fail("bench", st);
            }
            printf("  result: %s\n", path);
        }
        if (pinned) ff_exec_unpin_host(e, x), ff_exec_unpin_host(e, y);
        ff_gate_release(&gs);
    }
    return FF_EXIT_OK;
}
