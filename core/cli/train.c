// `fivefold train`: MNIST-CNN training on the CPU, serial or data-parallel over MPI, with the
// deterministic reduction of train.h, progress lines, test accuracy per epoch, HDF5 checkpoints
// and bit-identical resume.
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cli.h"
#include "fivefold/monitor.h"
#include "train_monitor.h"
#include "fivefold/checkpoint.h"
#include "fivefold/comm.h"
#include "fivefold/data_idx.h"
#include "fivefold/digest.h"
#include "fivefold/json.h"
#include "fivefold/model.h"
#include "fivefold/train.h"
#include "fivefold/weights.h"

#define DEFAULT_DATA "/usr/share/datasets/fashion-mnist"  // Debian's dataset-fashion-mnist
// Synthetic sets' default sizes: 16 steps of the full MLP's batch 2048 per epoch, 128 of batch 64
// for the small twin; the test sets as large as a batch or two.
#define SYNTH_TRAIN_FULL 32768
#define SYNTH_TRAIN_SMALL 8192
#define SYNTH_TEST 4096
#define LARGE_MODEL_PARAMS 10000000  // over this, the default --microbatch is batch / 8

typedef struct {
    const char *model, *mode, *split, *data, *ckpt_dir, *weights, *save_weights, *json;
    ff_cli_plan_args plan;
    int64_t epochs, steps, train_limit, test_limit, ckpt_every, ckpt_every_epochs, log_every;
    uint64_t seed;
    int resume;
    bool microbatch_given;
    train_monitor_args mon;
    ff_train_options o;
} train_args;

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: fivefold train [--model mnist-cnn|mlp|mlp-small] [--mode serial|mpi|cuda|hybrid|direct]\n"
        "         [--split batch] [--epochs E] [--steps K] [--batch B] [--lr LR] [--momentum MU] [--weight-decay WD]\n"
        "         [--seed S] [--microbatch M] [--reduce deterministic|allreduce] [--data DIR|synthetic]\n"
        "         [--overlap auto|on|off|steps] [--bucket-mb MB] [--train-limit N] [--test-limit N]\n"
        "         [--shares S0,S1,..] [--weights FILE.h5]\n"
        "         [--monitor auto|on|off] [--monitor-interval MS] [--max-temp C] [--on-hot pause|stop]\n"
        "         [--pause-limit S] [--save-weights FILE.h5] [--checkpoint-dir D] [--checkpoint-every N]\n"
        "         [--checkpoint-every-epochs N] [--resume] [--log-every N] [--json FILE] [--verbose] [--comm-timeout "
        "S]\n"
        "         " FF_CLI_PLAN_USAGE
        "\n"
        "Trains on the IDX data in DIR (or generated teacher data) and prints progress, the test\n"
        "accuracy after each epoch,\n"
        "'weights digest: <16 hex>' (FNV-1a over all parameters) and 'loss digest: <16 hex>' (over\n"
        "every step's loss as float64) at the end, then a summary line. The digests are the same for\n"
        "serial and mpi at any rank count, and the same for cuda, hybrid and direct at any rank count.\n"
        "  --model M                   mnist-cnn (default; Fashion-MNIST), mlp (4096-8192-6144-4096-2048-\n"
        "                              1024-512, 120 M parameters) or mlp-small (every width / 16): the\n"
        "                              MLPs train on synthetic teacher data\n"
        "  --mode M                    serial (v1, default), mpi (v2), cuda (v3), hybrid (v4) or direct (v5):\n"
        "                              cpu, cpu ranks, one GPU, a GPU per rank over MPI staged through host\n"
        "                              memory, a GPU per rank handing device buffers to NCCL/IPC/CUDA-aware\n"
        "                              MPI; multi-rank modes run under mpiexec: mpiexec -n P fivefold train\n"
        "                              --mode mpi ...\n"
        "  --split S                   batch (the only split training has: the micro-batches of each step\n"
        "                              are dealt to the ranks; rows and replicate are inference splits)\n"
        "  --data DIR                  folder of MNIST-format IDX files, raw or .gz (default %s), or\n"
        "                              'synthetic' (the MLPs' default): inputs and the labels of a fixed\n"
        "                              random teacher, made from --seed where they are used, no files\n"
        "  --epochs E                  passes over the training images (1..1000000; default 1)\n"
        "  --steps K                   stop after K optimizer steps in all, counted from the start of\n"
        "                              training, also after --resume (default: every step of E epochs)\n"
        "  --batch B                   global batch: images per step over all ranks (default 64)\n"
        "  --microbatch M              images per micro-batch, the unit of the deterministic\n"
        "                              reduction and of the work split over ranks (default 8, or B / 8\n"
        "                              for models over 10 M parameters such as mlp; at most B). The bits\n"
        "                              depend on M, never on the rank count; for one fixed P, B / P (one\n"
        "                              micro-batch per rank) is the fastest\n"
        "  --shares S0,S1,...          relative batch shares, one per rank (default equal): --shares 3,1\n"
        "                              gives rank 0 three quarters of each step's micro-batches (a faster\n"
        "                              GPU); the bits do not change\n"
        "  --monitor auto|on|off       GPU monitoring through NVML (default auto: on in the GPU modes when\n"
        "                              the driver's library loads): rank 0 samples every GPU of its node\n"
        "                              (temperature, power, memory, utilisation, SM clock, throttle reasons)\n"
        "                              on a background thread, shows them on the progress line and writes\n"
        "                              the time series into --json (bench/plot_train.py draws it)\n"
        "  --monitor-interval MS       sampling period (default 500 ms)\n"
        "  --max-temp C                a GPU hotter than this (default 85 C) is a warning, then\n"
        "  --on-hot pause|stop         pause every rank until it is 5 C cooler (default), or stop the run\n"
        "  --pause-limit S             the longest pause before the run stops instead (default 600 s)\n"
        "  --reduce R                  deterministic (default: bits independent of the rank count) or\n"
        "                              allreduce (MPI's float sum: faster, bits depend on the rank count)\n"
        "  --overlap auto|on|off|steps exchange the gradients in buckets while the backward still runs\n"
        "                              (GPU modes with several ranks; the bits are the same); steps: also\n"
        "                              the next step's forward, bucket by bucket, beside the last buckets'\n"
        "                              exchange (direct over NCCL; steps then run without CUDA graphs);\n"
        "                              auto (default): steps from 3 ranks on for models of 16 M parameters\n"
        "                              or more (mlp), where the exchange outlasts the backward; else on\n"
        "  --bucket-mb MB              gradient bucket size in MiB of float32 (default 16; in the direct\n"
        "                              mode 2, or a quarter of the model where that is less; > 0, fractions\n"
        "                              allowed): a bucket is a run of layers, closed once it holds this much\n"
        "  --lr LR                     SGD learning rate, in (0, 10] (default 0.01)\n"
        "  --momentum MU               SGD momentum, in [0, 1) (default 0.9)\n"
        "  --weight-decay WD           L2 weight decay added to the gradient, in [0, 1) (default 0)\n"
        "  --seed S                    initial weights and data order (default 1); decimal, or hex with 0x\n"
        "  --train-limit N             train on the first N images only (default: all; synthetic: the\n"
        "                              set's size, default %lld for mlp-small, %lld for mlp)\n"
        "  --test-limit N              evaluate on the first N test images (default and 0: all;\n"
        "                              synthetic: default %lld)\n"
        "  --weights FILE.h5           start from these weights instead of the generator's\n"
        "  --save-weights FILE.h5      write the final weights as a weights file (infer --weights\n"
        "                              reads it; each tensor's fnv1a64 digest is recorded)\n"
        "  --checkpoint-dir D          write D/%s (HDF5, atomic, in the background) every epoch\n"
        "                              and at the end; created if missing\n"
        "  --checkpoint-every N        also write one every N optimizer steps (default 0: off)\n"
        "  --checkpoint-every-epochs N every N epochs instead of every epoch (0: only at the end)\n"
        "  --resume                    continue bit-identically from D/%s (same flags needed)\n"
        "  --log-every N               a progress line every N steps (default 50; 0: none)\n"
        "  --json FILE                 write the run's figures as a JSON object (schema fivefold-train/1:\n"
        "                              recipe, steps, images, seconds, seconds per epoch, samples/s, test\n"
        "                              accuracy per epoch in %%, final loss, digests); written atomically\n"
        "  --verbose                   errors name the source location; say whether digests were checked\n"
        "A step whose loss is NaN or infinite stops training (exit 2); the last checkpoint is kept.\n"
        "Training always runs fivefold's own direct convolutions (--conv direct, the default here; winograd\n"
        "and --precision tf32 are refused), in fp32, or in the GPU modes with --precision tf32x3 on tensor\n"
        "cores (forward and data gradients; fp32-class error, its own digest class, equal across cuda,\n"
        "hybrid and direct); --backend vendor runs the linear layers through cuBLAS (fp32) in the GPU modes:\n"
        "another digest class, equal across cuda, hybrid and direct.\n" FF_CLI_PLAN_HELP FF_CLI_EXEC_HELP
        "  (--inject-crash and --inject-hang are inference hooks and refused here; training's crash test\n"
        "  is the environment variable FF_TEST_KILL_AFTER_STEP=K: SIGKILL after step K.)\n"
        "Environment, for A/B timing (none changes a bit): FF_TRAIN_GRAPHS=0 every launch eager;\n"
        "FF_URGENT_STREAMS=0 no high-priority side lane; FF_QUEUED_COMM=0 the host waits around each NCCL\n"
        "collective; FF_CAPTURE_EXCHANGE=0 the queued exchange outside the step's CUDA graph;\n"
        "FF_NCCL_WINDOWS=0 the exchanged buffers in plain device memory, not NCCL's symmetric windows;\n"
        "FF_NCCL_CTA_POLICY=default|efficiency|zero NCCL's CTA policy (zero: copy-engine collectives);\n"
        "FF_FUSED_EXCHANGE=0 the direct mode's exchange of a bucket in three kernels (all-to-all, update,\n"
        "all-gather) where by default it runs as one on NCCL's device API (one node, every rank one\n"
        "micro-batch: --microbatch = batch / ranks), FF_FUSED_CTAS=N that kernel's blocks (16);\n"
        "FF_TRAIN_HOST_COPIES=1 a GPU step copies its indices in and its losses out (by default its\n"
        "kernels read and write them in pinned host memory); FF_TRAIN_CONCURRENT_BACKWARD=0 a GPU's\n"
        "backward on one stream (by default the weight gradients run on a second one beside the data\n"
        "gradients); FF_TRAIN_POOL_SPARSE=0 a GPU's conv under a relu and a 2x2 max-pool (mnist's conv2)\n"
        "on the dense kernels, 1 only its weight gradient pool-sparse (by default both its gradients do\n"
        "only the windows' picks' work: docs/ARCHITECTURE.md section 9); FF_TRAIN_WGRAD_LANES=1 a GPU's\n"
        "few-column conv weight gradient (mnist's conv1) a warp a strip with no shared memory (the same\n"
        "bits; opt-in until timed on a GPU).\n",
        DEFAULT_DATA, (long long)SYNTH_TRAIN_SMALL, (long long)SYNTH_TRAIN_FULL, (long long)SYNTH_TEST, FF_CKPT_FILE,
        FF_CKPT_FILE);
}

// "3,1": one relative share per rank (the count is checked against the ranks when they are known).
static ff_status parse_shares(ff_train_options *o, const char *v) {
    o->n_shares = 0;
    for (const char *p = v;;) {
        char *end = NULL;
        errno = 0;
        const long x = strtol(p, &end, 10);
        if (end == p || errno || x < 1 || x > FF_TRAIN_SHARE_MAX || (*end && *end != ','))
            return FF_FAIL(FF_ERR_INPUT,
                           "--shares '%s': expected comma-separated integers 1..%d, one per rank (e.g. 3,1: rank 0 "
                           "takes three quarters of each batch)",
                           v, FF_TRAIN_SHARE_MAX);
        if (o->n_shares == FF_MAX_RANKS_TRAIN)
            return FF_FAIL(FF_ERR_INPUT, "--shares '%s': more than %d values", v, FF_MAX_RANKS_TRAIN);
        o->shares[o->n_shares++] = (int32_t)x;
        if (!*end) return FF_OK;
        p = end + 1;
    }
}

// Returns 0 to run, -1 after --help, or the exit code of a refused argument (message delivered).
static int parse_args(train_args *a, int argc, char **argv) {
    memset(a, 0, sizeof *a);
    a->model = "mnist-cnn";
    a->mode = "serial";
    a->data = NULL;  // after parsing: synthetic for the MLPs, DEFAULT_DATA otherwise
    a->epochs = 1;
    a->seed = 1;
    a->ckpt_every_epochs = 1;
    a->log_every = 50;
    ff_train_options_default(&a->o);
    train_monitor_args_default(&a->mon);
    const int64_t big = INT64_MAX;
    enum {
        OPT_MODEL = 0x200,
        OPT_MODE,
        OPT_SPLIT,
        OPT_DATA,
        OPT_WEIGHTS,
        OPT_SAVE_WEIGHTS,
        OPT_CKPT_DIR,
        OPT_EPOCHS,
        OPT_STEPS,
        OPT_TRAIN_LIMIT,
        OPT_TEST_LIMIT,
        OPT_CKPT_EVERY,
        OPT_CKPT_EVERY_EPOCHS,
        OPT_LOG_EVERY,
        OPT_BATCH,
        OPT_MICROBATCH,
        OPT_SEED,
        OPT_LR,
        OPT_MOMENTUM,
        OPT_WEIGHT_DECAY,
        OPT_REDUCE,
        OPT_OVERLAP,
        OPT_BUCKET_MB,
        OPT_JSON,
        OPT_RESUME,
        OPT_VERBOSE,
        OPT_SHARES,
        OPT_MONITOR,
        OPT_MONITOR_INTERVAL,
        OPT_MAX_TEMP,
        OPT_ON_HOT,
        OPT_PAUSE_LIMIT,
    };
    static const struct option opts[] = {{"model", required_argument, 0, OPT_MODEL},
                                         {"mode", required_argument, 0, OPT_MODE},
                                         {"split", required_argument, 0, OPT_SPLIT},
                                         {"data", required_argument, 0, OPT_DATA},
                                         {"weights", required_argument, 0, OPT_WEIGHTS},
                                         {"save-weights", required_argument, 0, OPT_SAVE_WEIGHTS},
                                         {"checkpoint-dir", required_argument, 0, OPT_CKPT_DIR},
                                         {"epochs", required_argument, 0, OPT_EPOCHS},
                                         {"steps", required_argument, 0, OPT_STEPS},
                                         {"train-limit", required_argument, 0, OPT_TRAIN_LIMIT},
                                         {"test-limit", required_argument, 0, OPT_TEST_LIMIT},
                                         {"checkpoint-every", required_argument, 0, OPT_CKPT_EVERY},
                                         {"checkpoint-every-epochs", required_argument, 0, OPT_CKPT_EVERY_EPOCHS},
                                         {"log-every", required_argument, 0, OPT_LOG_EVERY},
                                         {"batch", required_argument, 0, OPT_BATCH},
                                         {"microbatch", required_argument, 0, OPT_MICROBATCH},
                                         {"seed", required_argument, 0, OPT_SEED},
                                         {"lr", required_argument, 0, OPT_LR},
                                         {"momentum", required_argument, 0, OPT_MOMENTUM},
                                         {"weight-decay", required_argument, 0, OPT_WEIGHT_DECAY},
                                         {"reduce", required_argument, 0, OPT_REDUCE},
                                         {"overlap", required_argument, 0, OPT_OVERLAP},
                                         {"bucket-mb", required_argument, 0, OPT_BUCKET_MB},
                                         {"json", required_argument, 0, OPT_JSON},
                                         {"resume", no_argument, 0, OPT_RESUME},
                                         {"verbose", no_argument, 0, OPT_VERBOSE},
                                         {"shares", required_argument, 0, OPT_SHARES},
                                         {"monitor", required_argument, 0, OPT_MONITOR},
                                         {"monitor-interval", required_argument, 0, OPT_MONITOR_INTERVAL},
                                         {"max-temp", required_argument, 0, OPT_MAX_TEMP},
                                         {"on-hot", required_argument, 0, OPT_ON_HOT},
                                         {"pause-limit", required_argument, 0, OPT_PAUSE_LIMIT},
                                         FF_CLI_PLAN_OPTIONS,
                                         FF_CLI_EXEC_OPTIONS,
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    // ":h": a missing value is told apart (':') from an unknown flag ('?'); -h is --help.
    for (int c, li = -1; (li = -1, c = getopt_long(argc, argv, ":h", opts, &li)) != -1;) {
        if (c == '?') return ff_cli_usage("train", "unknown flag '%s'", argv[optind - 1]);
        if (c == ':') return ff_cli_usage("train", "%s needs a value", argv[optind - 1]);
        ff_status st = li >= 0 ? ff_cli_optarg(opts, li, optarg) : FF_OK;
        if (st != FF_OK) return ff_cli_fail("train", st);
        if (ff_cli_plan_arg(&a->plan, c, optarg)) continue;
        const char *v = optarg;
        switch (c) {
            case 'h': usage(stdout); return -1;
            case OPT_MODEL: a->model = v; break;
            case OPT_MODE: a->mode = v; break;
            case OPT_SPLIT: a->split = v; break;
            case OPT_DATA: a->data = v; break;
            case OPT_WEIGHTS: a->weights = v; break;
            case OPT_SAVE_WEIGHTS: a->save_weights = v; break;
            case OPT_CKPT_DIR: a->ckpt_dir = v; break;
            case OPT_JSON: a->json = v; break;
            case OPT_RESUME: a->resume = 1; break;
            case OPT_VERBOSE: ff_cli_verbose = true; break;
            case OPT_EPOCHS: st = ff_cli_parse_i64(&a->epochs, "--epochs", v, 1, 1000000); break;
            case OPT_STEPS: st = ff_cli_parse_i64(&a->steps, "--steps", v, 1, big); break;
            case OPT_TRAIN_LIMIT: st = ff_cli_parse_i64(&a->train_limit, "--train-limit", v, 1, big); break;
            case OPT_TEST_LIMIT: st = ff_cli_parse_i64(&a->test_limit, "--test-limit", v, 0, big); break;
            case OPT_CKPT_EVERY: st = ff_cli_parse_i64(&a->ckpt_every, "--checkpoint-every", v, 0, big); break;
            case OPT_CKPT_EVERY_EPOCHS:
                st = ff_cli_parse_i64(&a->ckpt_every_epochs, "--checkpoint-every-epochs", v, 0, big);
                break;
            case OPT_LOG_EVERY: st = ff_cli_parse_i64(&a->log_every, "--log-every", v, 0, big); break;
            case OPT_BATCH: st = ff_cli_parse_i64(&a->o.batch, "--batch", v, 1, 1 << 20); break;
            case OPT_MICROBATCH:
                st = ff_cli_parse_i64(&a->o.microbatch, "--microbatch", v, 1, 1 << 20);
                a->microbatch_given = true;
                break;
            case OPT_SEED: st = ff_cli_parse_seed(&a->seed, "--seed", v); break;
            case OPT_LR: st = ff_cli_parse_f32(&a->o.lr, "--lr", v, 0.0, true, FF_TRAIN_LR_MAX, false); break;
            case OPT_MOMENTUM: st = ff_cli_parse_f32(&a->o.momentum, "--momentum", v, 0.0, false, 1.0, true); break;
            case OPT_WEIGHT_DECAY:
                st = ff_cli_parse_f32(&a->o.weight_decay, "--weight-decay", v, 0.0, false, 1.0, true);
                break;
            case OPT_REDUCE: st = ff_reduce_parse(&a->o.reduce, v); break;
            case OPT_OVERLAP:
                if (strcmp(v, "auto") == 0 || strcmp(v, "on") == 0 || strcmp(v, "off") == 0 ||
                    strcmp(v, "steps") == 0) {
                    a->o.overlap = strcmp(v, "off") != 0;
                    a->o.overlap_steps = strcmp(v, "steps") == 0  ? FF_OVERLAP_STEPS_ON
                                         : strcmp(v, "auto") == 0 ? FF_OVERLAP_STEPS_AUTO
                                                                  : FF_OVERLAP_STEPS_OFF;
                } else {
                    st = FF_FAIL(FF_ERR_INPUT, "--overlap '%s': expected auto, on, off or steps", v);
                }
                break;
            case OPT_BUCKET_MB: {
                float mb = 0.0f;
                st = ff_cli_parse_f32(&mb, "--bucket-mb", v, 0.0, true, 65536.0, false);
                if (st == FF_OK) {
                    const double floats = (double)mb * 1048576.0 / sizeof(float);
                    a->o.bucket_floats = floats < 1.0 ? 1 : (int64_t)floats;
                }
                break;
            }
            case OPT_SHARES: st = parse_shares(&a->o, v); break;
            case OPT_MONITOR: a->mon.when = v; break;
            case OPT_MONITOR_INTERVAL: {
                int64_t ms = 0;
                st = ff_cli_parse_i64(&ms, "--monitor-interval", v, FF_MONITOR_INTERVAL_MS_MIN,
                                      FF_MONITOR_INTERVAL_MS_MAX);
                a->mon.interval_ms = (int)ms;
                break;
            }
            case OPT_MAX_TEMP: {
                float c = 0;
                st = ff_cli_parse_f32(&c, "--max-temp", v, FF_MONITOR_MAX_TEMP_C_MIN, false, FF_MONITOR_MAX_TEMP_C_MAX,
                                      false);
                a->mon.max_temp_c = c;
                break;
            }
            case OPT_ON_HOT: a->mon.on_hot = v; break;
            case OPT_PAUSE_LIMIT: {
                float lim = 0;
                st = ff_cli_parse_f32(&lim, "--pause-limit", v, 0.0, true, FF_MONITOR_PAUSE_LIMIT_S_MAX, false);
                a->mon.pause_limit_s = lim;
                break;
            }
            default: return ff_cli_usage("train", "unknown flag '%s'", argv[optind - 1]);
        }
        if (st != FF_OK) return ff_cli_fail("train", st);
    }
    if (optind < argc) return ff_cli_usage("train", "unexpected argument '%s'", argv[optind]);
    // The test hooks of the inference executors stop a rank inside a forward's communication;
    // a training step has its own exchanges, and its crash test is FF_TEST_KILL_AFTER_STEP.
    if (a->plan.inject_crash || a->plan.inject_hang)
        return ff_cli_usage("train",
                            "%s %s: an inference test hook (it stops a rank inside a forward's communication); "
                            "training does not take it: its crash test is FF_TEST_KILL_AFTER_STEP=K (SIGKILL "
                            "after step K)",
                            a->plan.inject_crash ? "--inject-crash" : "--inject-hang",
                            a->plan.inject_crash ? a->plan.inject_crash : a->plan.inject_hang);
    if (a->split) {
        ff_split sp;
        ff_status st = ff_split_parse(&sp, a->split);
        if (st != FF_OK) return ff_cli_fail("train", st);
        if (sp != FF_SPLIT_BATCH)
            return ff_cli_usage("train",
                                "--split %s: training divides each step's micro-batches among the ranks (--split "
                                "batch, the default); rows and replicate are inference splits",
                                a->split);
    }
    {
        ff_status ms = train_monitor_args_check(&a->mon);
        if (ms != FF_OK) return ff_cli_fail("train", ms);
    }
    if (a->resume && !a->ckpt_dir)
        return ff_cli_usage("train", "--resume needs --checkpoint-dir (the folder that holds %s)", FF_CKPT_FILE);
    if (a->o.microbatch > a->o.batch) a->o.microbatch = a->o.batch;
    return 0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void fmt_hms(char *buf, size_t cap, double s) {
    if (!(s >= 0) || s > 1e7) s = 0;
    long t = (long)(s + 0.5);
    snprintf(buf, cap, "%02ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
}

// What rank 0 alone did (prepare the checkpoint folder) every rank must learn: a failure there
// stops all ranks together, and only rank 0 has something to say (*follower on the others).
static ff_status share_root_status(ff_status st, ff_comm *comm, bool *follower) {
    if (!comm || ff_comm_size(comm) == 1) return st;
    int64_t code = (int64_t)st;
    ff_status bs = ff_comm_bcast(comm, &code, sizeof code, 0);
    if (bs != FF_OK) return bs;
    if (ff_comm_rank(comm) != 0 && code != FF_OK) *follower = true;
    return (ff_status)code;
}

// A growing list of doubles (per-epoch figures).
typedef struct {
    double *v;
    int64_t n, cap;
} dlist;

static ff_status dlist_push(dlist *l, double x) {
    if (l->n == l->cap) {
        int64_t cap = l->cap ? 2 * l->cap : 16;
        double *v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v) return FF_FAIL(FF_ERR_OOM, "per-epoch figures (%lld epochs)", (long long)cap);
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = x;
    return FF_OK;
}

static double dlist_mean(const dlist *l) {
    double s = 0;
    for (int64_t i = 0; i < l->n; i++) s += l->v[i];
    return l->n ? s / (double)l->n : 0.0;
}

// --json: rank 0 creates FILE.tmp.<pid> before any work (a bad path is refused before training),
// writes the figures into it at the end and renames it onto FILE (readers never see half a file).
typedef struct {
    const char *path;
    char tmp[4096];
    FILE *f;
} json_out;

static ff_status json_open(json_out *j, const char *path) {
    j->path = path;
    if (snprintf(j->tmp, sizeof j->tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof j->tmp)
        return FF_FAIL(FF_ERR_INPUT, "--json '%s': path too long", path);
    j->f = fopen(j->tmp, "w");
    if (!j->f)
        return FF_FAIL(FF_ERR_IO, "--json '%s': cannot create '%s': %s (checked before training)", path, j->tmp,
                       strerror(errno));
    return FF_OK;
}

static void json_abandon(json_out *j) {
    if (!j->f) return;
    fclose(j->f);
    j->f = NULL;
    remove(j->tmp);
}

// What the JSON file and the summary report (rank 0).
typedef struct {
    const char *mode, *transport;
    int ranks;
    int64_t steps, last_step, images, test_images;
    double seconds, samples_per_s, final_loss;
    uint64_t loss_digest, weights_digest;
    const dlist *epoch_s, *accuracy, *losses;
    ff_train_phases phases;  // rank 0's
    const int32_t *shares;   // one per rank, or NULL (equal)
} train_figures;

static ff_status json_write(json_out *j, const train_args *a, const ff_model *m, const ff_train_options *o,
                            const train_figures *r, train_monitor *mon) {
    char hex[17];
    ff_json js;
    ff_json_init(&js, j->f);
    ff_json_begin_object(&js, NULL);
    ff_json_str(&js, "schema", "fivefold-train/1");
    ff_json_str(&js, "model", m->name);
    ff_json_str(&js, "mode", r->mode);
    ff_json_str(&js, "transport", r->transport);
    ff_json_int(&js, "ranks", r->ranks);
    ff_json_int(&js, "batch", o->batch);
    ff_json_int(&js, "microbatch", o->microbatch);
    ff_json_num(&js, "lr", o->lr);
    ff_json_num(&js, "momentum", o->momentum);
    ff_json_num(&js, "weight_decay", o->weight_decay);
    if (a->seed <= (uint64_t)INT64_MAX) {
        ff_json_int(&js, "seed", (int64_t)a->seed);
    } else {  // beyond the writer's integers: the exact decimal as a string
        char seed[24];
        snprintf(seed, sizeof seed, "%llu", (unsigned long long)a->seed);
        ff_json_str(&js, "seed", seed);
    }
    ff_json_str(&js, "reduce", ff_reduce_name(o->reduce));
    ff_json_int(&js, "epochs", a->epochs);
    ff_json_int(&js, "steps", r->steps);
    ff_json_int(&js, "last_step", r->last_step);
    ff_json_int(&js, "images", r->images);
    ff_json_num(&js, "seconds", r->seconds);
    ff_json_begin_array(&js, "seconds_per_epoch");
    for (int64_t i = 0; i < r->epoch_s->n; i++) ff_json_num(&js, NULL, r->epoch_s->v[i]);
    ff_json_end_array(&js);
    ff_json_num(&js, "samples_per_s", r->samples_per_s);
    ff_json_int(&js, "test_images", r->test_images);
    ff_json_begin_array(&js, "test_accuracy");
    for (int64_t i = 0; i < r->accuracy->n; i++) ff_json_num(&js, NULL, r->accuracy->v[i]);
    ff_json_end_array(&js);
    ff_json_num(&js, "final_loss", r->final_loss);  // null when no step ran
    ff_json_begin_array(&js, "loss_per_step");      // this run's steps, in order (a plot's loss curve)
    for (int64_t i = 0; i < r->losses->n; i++) ff_json_num(&js, NULL, r->losses->v[i]);
    ff_json_end_array(&js);
    ff_json_begin_array(&js, "shares");  // [] when equal
    for (int i = 0; r->shares && i < r->ranks; i++) ff_json_int(&js, NULL, r->shares[i]);
    ff_json_end_array(&js);
    // Rank 0's phases (train.h, ff_train_phases), milliseconds per step: exchange is the exposed
    // part, exchange_total all the time spent in the exchange's collectives (overlapped or not).
    const double per = r->phases.steps > 0 ? 1e3 / (double)r->phases.steps : 0.0;
    ff_json_bool(&js, "overlap", r->phases.overlapped);
    ff_json_bool(&js, "overlap_steps", r->phases.overlapped_steps);
    ff_json_bool(&js, "queued", r->phases.queued);  // then compute holds the whole step (train.h)
    ff_json_int(&js, "buckets", r->phases.buckets);
    ff_json_int(&js, "nccl_windows", r->phases.windows);         // buffers in registered (symmetric) memory
    ff_json_int(&js, "fused_buckets", r->phases.fused_buckets);  // exchanged in one kernel each
    ff_json_begin_object(&js, "phases_ms_per_step");             // steady state: the first 2 steps left out
    ff_json_num(&js, "compute", r->phases.compute_s * per);
    ff_json_num(&js, "exchange", r->phases.exchange_s * per);
    ff_json_num(&js, "exchange_total", r->phases.exchange_total_s * per);
    ff_json_num(&js, "update", r->phases.update_s * per);
    ff_json_num(&js, "enqueue", r->phases.enqueue_s * per);  // queued: the host's part of the step
    ff_json_num(&js, "step", (r->phases.compute_s + r->phases.exchange_s + r->phases.update_s) * per);
    ff_json_int(&js, "steps", r->phases.steps);
    ff_json_end_object(&js);
    ff_json_str(&js, "loss_digest", ff_digest_hex(hex, r->loss_digest));
    ff_json_str(&js, "weights_digest", ff_digest_hex(hex, r->weights_digest));
    train_monitor_json(mon, &js);  // "monitor": the GPUs' time series, when they were watched
    ff_json_end_object(&js);
    const bool bad = ferror(j->f) != 0;
    const int cerr = fclose(j->f);
    j->f = NULL;
    if (bad || cerr != 0) {
        remove(j->tmp);
        return FF_FAIL(FF_ERR_IO, "--json '%s': writing '%s' failed: %s", j->path, j->tmp, strerror(errno));
    }
    if (rename(j->tmp, j->path) != 0) {
        const int e = errno;
        remove(j->tmp);
        return FF_FAIL(FF_ERR_IO, "--json '%s': cannot rename '%s' onto it: %s", j->path, j->tmp, strerror(e));
    }
    return FF_OK;
}

static bool is_synthetic(const char *data) {
    return data && strcmp(data, "synthetic") == 0;
}

// Everything that can fail returns a status; the caller prints it and picks the exit code.
// *follower: this rank stopped because rank 0 failed (rank 0 reports it).
static ff_status run(bool *follower, const train_args *a, ff_comm *comm) {
    const int rank = comm ? ff_comm_rank(comm) : 0, P = comm ? ff_comm_size(comm) : 1;
    const int out = rank == 0;
    ff_model m;
    FF_TRY(ff_model_init(&m, a->model));
    ff_dataset train = {0}, test = {0};
    ff_weights w = {0};
    ff_trainer *tr = NULL;
    ff_ckpt_writer *wr = NULL;
    int64_t *order = NULL;
    ff_status st = FF_OK;
    char ckpt_path[4096] = "";
    json_out jo = {0};
    dlist epoch_s = {0}, accuracy = {0}, losses = {0};
    train_monitor *mon = NULL;
#define TRY(expr)                   \
    do {                            \
        st = (expr);                \
        if (st != FF_OK) goto done; \
    } while (0)
    // --json first: a path that cannot be written is refused before any work.
    if (a->json) TRY(share_root_status(out ? json_open(&jo, a->json) : FF_OK, comm, follower));
    // Weights first: a bad --weights file is reported before 60 000 images are decoded.
    TRY(ff_cli_load_weights(&w, &m, a->weights, a->seed));
    if (is_synthetic(a->data)) {
        const bool full = ff_shape_numel(m.input) > 1024;
        const int64_t n_train = a->train_limit > 0 ? a->train_limit : full ? SYNTH_TRAIN_FULL : SYNTH_TRAIN_SMALL;
        TRY(ff_dataset_synthetic(&train, a->seed, 0, n_train, ff_shape_numel(m.input), m.classes));
        TRY(ff_dataset_synthetic(&test, a->seed, 1, a->test_limit > 0 ? a->test_limit : SYNTH_TEST,
                                 ff_shape_numel(m.input), m.classes));
    } else {
        TRY(ff_dataset_load_dir(&train, a->data, "train", a->train_limit));
        TRY(ff_dataset_load_dir(&test, a->data, "t10k", 0));
    }
    TRY(ff_train_check_dataset(&m, &train));
    TRY(ff_train_check_dataset(&m, &test));
    const int64_t n_test = a->test_limit > 0 && a->test_limit < test.n ? a->test_limit : test.n;
    ff_train_options o = a->o;
    TRY(ff_trainer_create(&tr, &m, &w, &o, comm));
    TRY(ff_trainer_set_resident(tr, &train));  // GPU modes: the training images stay on the device
    const bool gpu_mode = o.exec.mode == FF_MODE_CUDA || o.exec.mode == FF_MODE_HYBRID || o.exec.mode == FF_MODE_DIRECT;
    TRY(train_monitor_start(&mon, &a->mon, gpu_mode, comm, out ? stdout : NULL));

    const int64_t B = o.batch, n = train.n;
    ff_train_plan plan;  // steps per epoch (the last batch may be short) and in all, overflow-checked
    TRY(ff_train_plan_make(&plan, n, B, a->epochs, a->steps));
    const int64_t spe = plan.steps_per_epoch, total = plan.total;
    int64_t e0 = 0, s0 = 0, step = 0;
    int64_t last_ckpt = -1;                // the step of the last checkpoint written or submitted (every rank knows)
    uint64_t loss_digest = FF_FNV_OFFSET;  // over every step's loss since the start of training
    if (a->ckpt_dir) {
        if (snprintf(ckpt_path, sizeof ckpt_path, "%s/%s", a->ckpt_dir, FF_CKPT_FILE) >= (int)sizeof ckpt_path) {
            st = FF_FAIL(FF_ERR_INPUT, "--checkpoint-dir too long");
            goto done;
        }
        // Before any step: a regular file or an unwritable folder is refused now, not after an epoch.
        int removed = 0;
        ff_status ps = out ? ff_checkpoint_dir_prepare(&removed, a->ckpt_dir) : FF_OK;
        TRY(share_root_status(ps, comm, follower));
        if (out && removed && a->log_every > 0)
            printf("checkpoint dir %s: removed %d stale temporary file%s of crashed writes\n", a->ckpt_dir, removed,
                   removed == 1 ? "" : "s");
        if (out) TRY(ff_ckpt_writer_create(&wr, &m));
    }
    if (a->resume) {
        if (!a->ckpt_dir) {
            st = FF_FAIL(FF_ERR_INPUT, "--resume needs --checkpoint-dir");
            goto done;
        }
        ff_ckpt_meta cm;
        TRY(ff_checkpoint_load(&w, ff_trainer_momentum(tr), &cm, &m, ckpt_path));
        TRY(ff_trainer_load(tr));  // the checkpoint's weights and momentum onto the device
        TRY(ff_checkpoint_check_run(&cm, spe, ckpt_path));
        // A bit-identical continuation needs the same recipe: refuse a different one.
        if (cm.batch != B || cm.microbatch != o.microbatch || cm.seed != a->seed || cm.train_limit != a->train_limit ||
            cm.lr != o.lr || cm.momentum != o.momentum || cm.weight_decay != o.weight_decay) {
            st = FF_FAIL(FF_ERR_INPUT,
                         "--resume: checkpoint '%s' was made with batch %lld, "
                         "microbatch %lld, seed %llu, train-limit %lld, lr %g, momentum %g, "
                         "weight-decay %g; this run asks for batch %lld, microbatch %lld, seed %llu, "
                         "train-limit %lld, lr %g, momentum %g, weight-decay %g (use the same flags)",
                         ckpt_path, (long long)cm.batch, (long long)cm.microbatch, (unsigned long long)cm.seed,
                         (long long)cm.train_limit, cm.lr, cm.momentum, cm.weight_decay, (long long)B,
                         (long long)o.microbatch, (unsigned long long)a->seed, (long long)a->train_limit, o.lr,
                         o.momentum, o.weight_decay);
            goto done;
        }
        e0 = cm.epoch;
        s0 = cm.step_in_epoch;
        step = cm.step;
        last_ckpt = step;
        loss_digest = cm.loss_digest;
        ff_trainer_set_steps(tr, step);
        if (out)
            printf("resumed from %s: step %lld, epoch %lld, step %lld of that epoch\n", ckpt_path, (long long)step,
                   (long long)e0 + 1, (long long)s0);
    }
    order = malloc((size_t)n * sizeof *order);
    if (!order) {
        st = FF_FAIL(FF_ERR_OOM, "cannot allocate the data order (%lld samples)", (long long)n);
        goto done;
    }
    // The transport of a multi-rank mode: the direct mode's is --transport (auto: chosen by the
    // executor from the GPUs and nodes); the others have one each.
    ff_exec_caps caps;
    ff_mode_caps(&caps, o.exec.mode);
    const bool multirank = ff_mode_is_multirank(o.exec.mode);
    const char *transport = !multirank                      ? NULL
                            : o.exec.mode == FF_MODE_DIRECT ? ff_transport_name(o.exec.transport)
                                                            : caps.transport;
    // what the executor chose (auto: NCCL with a GPU per rank, CUDA IPC on a shared one)
    const char *transport_used = ff_trainer_transport(tr) ? ff_trainer_transport(tr) : transport;
    if (out)
        printf(
            "train %s: mode %s%s%s, ranks %d, %lld train / %lld test images from %s, epochs %lld, "
            "%lld steps/epoch, batch %lld, microbatch %lld, lr %g, momentum %g, weight-decay %g, "
            "seed %llu, reduce %s\n",
            m.name, ff_mode_name(o.exec.mode), transport_used ? ", transport " : "",
            transport_used ? transport_used : "", P, (long long)n, (long long)n_test, a->data, (long long)a->epochs,
            (long long)spe, (long long)B, (long long)o.microbatch, o.lr, o.momentum, o.weight_decay,
            (unsigned long long)a->seed, ff_reduce_name(o.reduce));
    fflush(stdout);

    const double t_start = now_s();
    double t_log = t_start, last_loss = NAN;
    int64_t steps_run = 0, samples_log = 0;
    const char *kill_env = getenv("FF_TEST_KILL_AFTER_STEP");  // test hook: simulate a crash
    const int64_t kill_after = kill_env ? atoll(kill_env) : -1;
    for (int64_t e = e0; e < a->epochs && step < total; e++) {
        ff_shuffle_order(order, n, a->seed, e);
        const double t_epoch = now_s();
        int64_t s = e == e0 ? s0 : 0;
        // Steps run in chunks (ff_train_steps: on a GPU several are queued before the host waits)
        // that end where the loop must look at the state: a progress line, a checkpoint, the
        // kill hook, the end of the epoch or of the run. The losses are then read one by one.
        double chunk[256];
        int64_t chunk_n = 0, chunk_i = 0;
        for (; s < spe && step < total; s++) {
            const int64_t first = s * B, b = first + B <= n ? B : n - first;
            if (chunk_i == chunk_n) {
                int64_t len = spe - s < total - step ? spe - s : total - step;
                if (len > (int64_t)(sizeof chunk / sizeof chunk[0])) len = sizeof chunk / sizeof chunk[0];
                if (a->log_every > 0 && a->log_every - step % a->log_every < len)
                    len = a->log_every - step % a->log_every;
                if (a->ckpt_every > 0 && a->ckpt_every - step % a->ckpt_every < len)
                    len = a->ckpt_every - step % a->ckpt_every;
                if (kill_after > step && kill_after - step < len) len = kill_after - step;
                const int64_t images = first + len * B <= n ? len * B : n - first;
                TRY(train_monitor_check(mon, comm, o.exec.comm_timeout_s, follower));  // --max-temp
                TRY(ff_train_steps(tr, chunk, &train, order + first, images));
                chunk_n = len;
                chunk_i = 0;
            }
            const double loss = chunk[chunk_i++];
            step++;
            steps_run++;
            samples_log += b;
            if (!isfinite(loss)) {
                // Every rank has the same loss bits and stops here. No checkpoint of this step:
                // rank 0 waits for the write in flight (the last good state), then all fail alike.
                ff_status ws = out && wr ? ff_ckpt_writer_wait(wr) : FF_OK;
                TRY(share_root_status(ws, comm, follower));
                char kept[4200];
                if (last_ckpt >= 0)
                    snprintf(kept, sizeof kept, "the last checkpoint (step %lld) is kept in %s", (long long)last_ckpt,
                             ckpt_path);
                else if (a->ckpt_dir)
                    snprintf(kept, sizeof kept, "no checkpoint was written before it");
                else
                    snprintf(kept, sizeof kept, "no checkpoint (no --checkpoint-dir)");
                st = FF_FAIL(FF_ERR_INPUT,
                             "step %lld (epoch %lld, step %lld of that epoch): loss is %s; training stopped, %s "
                             "(the recipe diverges: try a smaller --lr or --momentum)",
                             (long long)step, (long long)e + 1, (long long)s + 1, isnan(loss) ? "nan" : "inf", kept);
                goto done;
            }
            last_loss = loss;
            loss_digest = ff_fnv1a64_update(loss_digest, &loss, sizeof loss);
            if (out && a->json) TRY(dlist_push(&losses, loss));
            if (out && a->log_every > 0 && (step % a->log_every == 0 || step == total)) {
                double t = now_s();
                double rate = samples_log / (t - t_log > 0 ? t - t_log : 1e-9);
                double per_step = (t - t_start) / (double)steps_run;
                char eta[32], gpus[512];
                fmt_hms(eta, sizeof eta, per_step * (double)(total - step));
                train_monitor_line(mon, gpus, sizeof gpus);
                printf(
                    "epoch %lld/%lld step %lld/%lld (total %lld/%lld) loss %.6f samples/s %.1f "
                    "ETA %s%s\n",
                    (long long)e + 1, (long long)a->epochs, (long long)s + 1, (long long)spe, (long long)step,
                    (long long)total, loss, rate, eta, gpus);
                fflush(stdout);
                t_log = t;
                samples_log = 0;
            }
            if (a->ckpt_dir && a->ckpt_every > 0 && step % a->ckpt_every == 0 && step < total) {
                last_ckpt = step;
                TRY(ff_trainer_sync(tr));  // on every rank: it gathers the ranks' slices of the momentum
                if (wr) {
                    ff_ckpt_meta cm = {step,           e,    s + 1,      a->seed,        B,          o.microbatch,
                                       a->train_limit, o.lr, o.momentum, o.weight_decay, loss_digest};
                    if (s + 1 == spe) {
                        cm.epoch = e + 1;
                        cm.step_in_epoch = 0;
                    }
                    TRY(ff_ckpt_writer_submit(wr, ckpt_path, &w, ff_trainer_momentum(tr), &cm));
                }
            }
            if (kill_after >= 0 && step == kill_after) {
                fprintf(stderr, "FF_TEST_KILL_AFTER_STEP=%lld: killing the process\n", (long long)kill_after);
                fflush(stderr);
                raise(SIGKILL);
            }
        }
        if (s == spe) {  // the epoch is complete: test accuracy, maybe a checkpoint
            // This run's training time of the epoch, without the evaluation (an epoch resumed
            // mid-way counts the steps this run took).
            TRY(dlist_push(&epoch_s, now_s() - t_epoch));
            int64_t correct;
            TRY(ff_train_evaluate(tr, &correct, &test, n_test));
            const double acc = n_test ? 100.0 * (double)correct / (double)n_test : 0.0;
            TRY(dlist_push(&accuracy, acc));
            if (out) {
                printf("epoch %lld/%lld done: test accuracy %.2f%% (%lld/%lld), %.1f s elapsed\n", (long long)e + 1,
                       (long long)a->epochs, acc, (long long)correct, (long long)n_test, now_s() - t_start);
                fflush(stdout);
            }
            if (a->ckpt_dir && a->ckpt_every_epochs > 0 && (e + 1) % a->ckpt_every_epochs == 0 && step < total) {
                last_ckpt = step;
                TRY(ff_trainer_sync(tr));  // on every rank: it gathers the ranks' slices of the momentum
                if (wr) {
                    ff_ckpt_meta cm = {step,           e + 1, 0,          a->seed,        B,          o.microbatch,
                                       a->train_limit, o.lr,  o.momentum, o.weight_decay, loss_digest};
                    TRY(ff_ckpt_writer_submit(wr, ckpt_path, &w, ff_trainer_momentum(tr), &cm));
                }
            }
        }
    }
    const double el = now_s() - t_start;  // the training loop's wall time (steps, evaluations)
    TRY(ff_trainer_sync(tr));  // every rank (it gathers the ranks' slices): the final checkpoint and the digest
    if (wr) {                  // the final checkpoint, at the position training stopped
        const int64_t e = step / spe, s = step % spe;  // every epoch has spe steps
        ff_ckpt_meta cm = {step,           e,    s,          a->seed,        B,          o.microbatch,
                           a->train_limit, o.lr, o.momentum, o.weight_decay, loss_digest};
        TRY(ff_ckpt_writer_submit(wr, ckpt_path, &w, ff_trainer_momentum(tr), &cm));
        TRY(ff_ckpt_writer_wait(wr));
        if (out) printf("checkpoint: %s (step %lld)\n", ckpt_path, (long long)step);
    }
    // Images actually trained on: a short last batch counts what it holds, not B.
    const int64_t samples = ff_trainer_samples(tr);
    const double rate = el > 0 ? (double)samples / el : 0.0;
    const uint64_t weights_digest = ff_weights_digest(&w);
    if (out) {
        char hex[17];
        printf("trained %lld steps (%lld images) in %.1f s (%.1f samples/s)\n", (long long)steps_run,
               (long long)samples, el, rate);
        const ff_train_phases ph = ff_trainer_phases(tr);
        const char *fx = getenv("FF_FUSED_EXCHANGE");
        if (P > 1 && ph.fused_buckets > 0)  // say whether it ran (train.h fused_buckets), and how to turn it off
            printf("fused exchange: %d of %d buckets in one kernel each (FF_FUSED_EXCHANGE=0: three kernels)\n",
                   ph.fused_buckets, ph.buckets);
        else if (P > 1 && fx && strcmp(fx, "1") == 0)  // asked for by name and not possible: say why
            printf(
                "fused exchange (FF_FUSED_EXCHANGE=1): no bucket fused; it needs the direct mode over NCCL 2.28 "
                "on one node, every rank one micro-batch (--microbatch = batch / ranks)\n");
        if (P > 1 && ph.steps > 0 && ph.queued)
            printf(
                "step %.3f ms (rank 0, after 2 warm-up steps; the gradient exchange queued on the GPU with the "
                "compute, %s%s: FF_QUEUED_COMM=0 splits the phases), of which the host enqueued for %.3f ms\n",
                1e3 * ph.compute_s / (double)ph.steps,
                ph.overlapped_steps ? "in buckets during the backward and the next step's forward"
                : ph.overlapped     ? "in buckets during the backward"
                                    : "after the backward",
                ph.windows ? ", from NCCL symmetric windows" : "", 1e3 * ph.enqueue_s / (double)ph.steps);
        else if (P > 1 && ph.steps > 0)
            printf(
                "phases per step (rank 0, after 2 warm-up steps): compute %.3f ms, gradient exchange %.3f ms "
                "exposed (%.3f ms in all, %s), update %.3f ms\n",
                1e3 * ph.compute_s / (double)ph.steps, 1e3 * ph.exchange_s / (double)ph.steps,
                1e3 * ph.exchange_total_s / (double)ph.steps,
                ph.overlapped ? "in buckets during the backward" : "after the backward",
                1e3 * ph.update_s / (double)ph.steps);
        train_monitor_summary(mon, stdout);
        printf("loss digest: %s\n", ff_digest_hex(hex, loss_digest));
        printf("weights digest: %s\n", ff_digest_hex(hex, weights_digest));
        if (accuracy.n > 0)
            printf(
                "summary: %lld epoch%s, test accuracy %.2f%% (last epoch), %.2f s per epoch (mean of completed "
                "epochs), %.1f samples/s\n",
                (long long)accuracy.n, accuracy.n == 1 ? "" : "s", accuracy.v[accuracy.n - 1], dlist_mean(&epoch_s),
                rate);
        else
            printf(
                "summary: 0 epochs, test accuracy n/a (no epoch completed), s per epoch n/a (no epoch "
                "completed), %.1f samples/s\n",
                rate);
        fflush(stdout);
    }
    if (a->save_weights) {
        ff_status ss = out ? ff_weights_save_h5(&w, &m, a->save_weights) : FF_OK;
        TRY(share_root_status(ss, comm, follower));
        if (out) printf("weights written to %s\n", a->save_weights);
    }
    if (a->json) {
        ff_status js = FF_OK;
        if (out) {
            train_figures r = {ff_mode_name(o.exec.mode),
                               transport_used,
                               P,
                               steps_run,
                               step,
                               samples,
                               n_test,
                               el,
                               rate,
                               last_loss,
                               loss_digest,
                               weights_digest,
                               &epoch_s,
                               &accuracy,
                               &losses,
                               ff_trainer_phases(tr),
                               o.n_shares ? o.shares : NULL};
            js = json_write(&jo, a, &m, &o, &r, mon);
            if (js == FF_OK) printf("figures written to %s\n", a->json);
        }
        TRY(share_root_status(js, comm, follower));
    }
#undef TRY
done:
    json_abandon(&jo);  // after a failure: no file, and no temporary left behind
    if (wr) {
        ff_status ws = st == FF_OK ? ff_ckpt_writer_wait(wr) : FF_OK;
        if (st == FF_OK) st = ws;
        ff_ckpt_writer_destroy(wr);
    }
    free(epoch_s.v);
    free(accuracy.v);
    free(losses.v);
    train_monitor_destroy(mon);
    free(order);
    ff_trainer_destroy(tr);
    ff_weights_free(&w);
    ff_dataset_free(&train);
    ff_dataset_free(&test);
    return st;
}

int ff_cmd_train(int argc, char **argv) {
    train_args a;
    int rc = parse_args(&a, argc, argv);
    if (rc) return rc < 0 ? FF_EXIT_OK : rc;
    // The executor's options from the flags every command shares (mode, split, plan, --comm-timeout).
    ff_model m;
    ff_status st = ff_model_init(&m, a.model);
    if (st == FF_OK) st = ff_cli_exec_options(&a.o.exec, &m, a.mode, a.split, &a.plan, NULL, false);
    if (st != FF_OK) return ff_cli_fail("train", st);
    if (!a.data) a.data = m.input.h == 1 && m.input.w == 1 ? "synthetic" : DEFAULT_DATA;
    // Each micro-batch's gradient is a full copy of the parameters (the deterministic tree sums
    // them): for a large model, 8 micro-batches per step instead of 8 images each (the full MLP at
    // batch 2048: 8 rows of 480 MB, not 256).
    if (!a.microbatch_given && m.n_weights_total > LARGE_MODEL_PARAMS && a.o.batch > 64)
        a.o.microbatch = (a.o.batch + 7) / 8;
    // Training runs direct convolutions: the default here whatever FF_CUDA_CONV says; a --conv
    // winograd given on the command line reaches the trainer, which refuses it.
    if (!a.plan.conv) a.o.exec.plan.conv = FF_CONV_DIRECT;
    ff_comm *comm = NULL;
    if (ff_mode_is_multirank(a.o.exec.mode)) {
        ff_status cs = ff_cli_mpi_comm(&comm);  // MPI_Init once; owned and finalised by main
        if (cs != FF_OK) return ff_cli_fail("train", cs);
#ifdef _OPENMP
        // P ranks each starting one OpenMP thread per core would oversubscribe the machine P
        // times over: unless the user chose, give each rank its share of the cores (this assumes
        // the ranks share one machine; set OMP_NUM_THREADS explicitly across several).
        if (!getenv("OMP_NUM_THREADS")) {
            int share = omp_get_num_procs() / ff_comm_size(comm);
            omp_set_num_threads(share > 0 ? share : 1);
        }
#endif
    }
    bool follower = false;
    st = run(&follower, &a, comm);
    if (st != FF_OK) return follower ? ff_cli_fail_quiet("train", st) : ff_cli_fail("train", st);
    return FF_EXIT_OK;
}
