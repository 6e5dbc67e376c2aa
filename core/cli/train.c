// `fivefold train`: MNIST-CNN training on the CPU, serial or data-parallel over MPI, with the
// deterministic reduction of train.h, progress lines, test accuracy per epoch, HDF5 checkpoints
// and bit-identical resume.
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cli.h"
#include "fivefold/checkpoint.h"
#include "fivefold/comm.h"
#include "fivefold/data_idx.h"
#include "fivefold/digest.h"
#include "fivefold/model.h"
#include "fivefold/train.h"
#include "fivefold/weights.h"

#define DEFAULT_DATA "/usr/share/datasets/fashion-mnist"  // Debian's dataset-fashion-mnist

typedef struct {
    const char *model, *mode, *data, *ckpt_dir, *weights, *save_weights;
    int64_t epochs, steps, train_limit, test_limit, ckpt_every, ckpt_every_epochs, log_every;
    uint64_t seed;
    int resume;
    ff_train_options o;
} train_args;

static void usage(FILE *f) {
    fprintf(f,
            "usage: fivefold train [--model mnist-cnn] [--mode serial|mpi] [--epochs E] [--steps K]\n"
            "         [--batch B] [--lr LR] [--momentum MU] [--weight-decay WD] [--seed S]\n"
            "         [--microbatch M] [--reduce deterministic|allreduce] [--data DIR]\n"
            "         [--train-limit N] [--test-limit N] [--weights FILE.h5] [--save-weights FILE.h5]\n"
            "         [--checkpoint-dir D] [--checkpoint-every N] [--checkpoint-every-epochs N]\n"
            "         [--resume] [--log-every N] [--verbose]\n"
            "Trains on the IDX data in DIR and prints progress, the test accuracy after each epoch,\n"
            "'weights digest: <16 hex>' (FNV-1a over all parameters) and 'loss digest: <16 hex>' (over\n"
            "every step's loss as float64) at the end. Same digests for serial and mpi at any rank count.\n"
            "  --model M                   mnist-cnn (the only trainable model)\n"
            "  --mode M                    serial (v1, default) or mpi (v2: mpiexec -n P fivefold train ...)\n"
            "  --data DIR                  folder of MNIST-format IDX files, raw or .gz (default %s)\n"
            "  --epochs E                  passes over the training images (1..1000000; default 1)\n"
            "  --steps K                   stop after K optimizer steps in all, counted from the start of\n"
            "                              training, also after --resume (default: every step of E epochs)\n"
            "  --batch B                   global batch: images per step over all ranks (default 64)\n"
            "  --microbatch M              images per micro-batch, the unit of the deterministic\n"
            "                              reduction and of the work split over ranks (default 8; at most B)\n"
            "  --reduce R                  deterministic (default: bits independent of the rank count) or\n"
            "                              allreduce (MPI's float sum: faster, bits depend on the rank count)\n"
            "  --lr LR                     SGD learning rate, in (0, 10] (default 0.01)\n"
            "  --momentum MU               SGD momentum, in [0, 1) (default 0.9)\n"
            "  --weight-decay WD           L2 weight decay added to the gradient, in [0, 1) (default 0)\n"
            "  --seed S                    initial weights and data order (default 1); decimal, or hex with 0x\n"
            "  --train-limit N             train on the first N images only (default: all)\n"
            "  --test-limit N              evaluate on the first N test images (default and 0: all)\n"
            "  --weights FILE.h5           start from these weights instead of the generator's\n"
            "  --save-weights FILE.h5      write the final weights as a weights file (infer --weights\n"
            "                              reads it; each tensor's fnv1a64 digest is recorded)\n"
            "  --checkpoint-dir D          write D/%s (HDF5, atomic, in the background) every epoch\n"
            "                              and at the end; created if missing\n"
            "  --checkpoint-every N        also write one every N optimizer steps (default 0: off)\n"
            "  --checkpoint-every-epochs N every N epochs instead of every epoch (0: only at the end)\n"
            "  --resume                    continue bit-identically from D/%s (same flags needed)\n"
            "  --log-every N               a progress line every N steps (default 50; 0: none)\n"
            "  --verbose                   errors name the source location; say whether digests were checked\n",
            DEFAULT_DATA, FF_CKPT_FILE, FF_CKPT_FILE);
}

// Returns 0 to run, -1 after --help, or the exit code of a refused argument (message delivered).
static int parse_args(train_args *a, int argc, char **argv) {
    memset(a, 0, sizeof *a);
    a->model = "mnist-cnn";
    a->mode = "serial";
    a->data = DEFAULT_DATA;
    a->epochs = 1;
    a->seed = 1;
    a->ckpt_every_epochs = 1;
    a->log_every = 50;
    ff_train_options_default(&a->o);
    const int64_t big = INT64_MAX;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
            usage(stdout);
            return -1;
        }
        if (!strcmp(f, "--resume")) {
            a->resume = 1;
            continue;
        }
        if (!strcmp(f, "--verbose")) {
            ff_cli_verbose = true;
            continue;
        }
        static const char *const value_flags[] = {"--model",
                                                  "--mode",
                                                  "--data",
                                                  "--weights",
                                                  "--save-weights",
                                                  "--checkpoint-dir",
                                                  "--epochs",
                                                  "--steps",
                                                  "--train-limit",
                                                  "--test-limit",
                                                  "--checkpoint-every",
                                                  "--checkpoint-every-epochs",
                                                  "--log-every",
                                                  "--batch",
                                                  "--microbatch",
                                                  "--seed",
                                                  "--lr",
                                                  "--momentum",
                                                  "--weight-decay",
                                                  "--reduce"};
        bool known = false;
        for (size_t k = 0; k < sizeof value_flags / sizeof *value_flags; k++) known |= !strcmp(f, value_flags[k]);
        if (!known) return ff_cli_usage("train", "unknown flag '%s'", f);
        if (i + 1 >= argc) return ff_cli_usage("train", "%s needs a value", f);
        const char *v = argv[++i];
        ff_status st = ff_cli_value(f, v);
        if (st != FF_OK) return ff_cli_fail("train", st);
        if (!strcmp(f, "--model"))
            a->model = v;
        else if (!strcmp(f, "--mode"))
            a->mode = v;
        else if (!strcmp(f, "--data"))
            a->data = v;
        else if (!strcmp(f, "--weights"))
            a->weights = v;
        else if (!strcmp(f, "--save-weights"))
            a->save_weights = v;
        else if (!strcmp(f, "--checkpoint-dir"))
            a->ckpt_dir = v;
        else if (!strcmp(f, "--epochs"))
            st = ff_cli_parse_i64(&a->epochs, f, v, 1, 1000000);
        else if (!strcmp(f, "--steps"))
            st = ff_cli_parse_i64(&a->steps, f, v, 1, big);
        else if (!strcmp(f, "--train-limit"))
            st = ff_cli_parse_i64(&a->train_limit, f, v, 1, big);
        else if (!strcmp(f, "--test-limit"))
            st = ff_cli_parse_i64(&a->test_limit, f, v, 0, big);
        else if (!strcmp(f, "--checkpoint-every"))
            st = ff_cli_parse_i64(&a->ckpt_every, f, v, 0, big);
        else if (!strcmp(f, "--checkpoint-every-epochs"))
            st = ff_cli_parse_i64(&a->ckpt_every_epochs, f, v, 0, big);
        else if (!strcmp(f, "--log-every"))
            st = ff_cli_parse_i64(&a->log_every, f, v, 0, big);
        else if (!strcmp(f, "--batch"))
            st = ff_cli_parse_i64(&a->o.batch, f, v, 1, 1 << 20);
        else if (!strcmp(f, "--microbatch"))
            st = ff_cli_parse_i64(&a->o.microbatch, f, v, 1, 1 << 20);
        else if (!strcmp(f, "--seed"))
            st = ff_cli_parse_seed(&a->seed, f, v);
        else if (!strcmp(f, "--lr"))
            st = ff_cli_parse_f32(&a->o.lr, f, v, 0.0, true, FF_TRAIN_LR_MAX, false);
        else if (!strcmp(f, "--momentum"))
            st = ff_cli_parse_f32(&a->o.momentum, f, v, 0.0, false, 1.0, true);
        else if (!strcmp(f, "--weight-decay"))
            st = ff_cli_parse_f32(&a->o.weight_decay, f, v, 0.0, false, 1.0, true);
        else if (!strcmp(f, "--reduce"))
            st = ff_reduce_parse(&a->o.reduce, v);
        if (st != FF_OK) return ff_cli_fail("train", st);
    }
    if (strcmp(a->mode, "serial") && strcmp(a->mode, "v1") && strcmp(a->mode, "mpi") && strcmp(a->mode, "v2"))
        return ff_cli_usage("train", "--mode '%s': training runs in serial (v1) or mpi (v2)", a->mode);
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
#define TRY(expr)                   \
    do {                            \
        st = (expr);                \
        if (st != FF_OK) goto done; \
    } while (0)
    // Weights first: a bad --weights file is reported before 60 000 images are decoded.
    TRY(ff_cli_load_weights(&w, &m, a->weights, a->seed));
    TRY(ff_dataset_load_dir(&train, a->data, "train", a->train_limit));
    TRY(ff_train_check_dataset(&m, &train));
    TRY(ff_dataset_load_dir(&test, a->data, "t10k", 0));
    TRY(ff_train_check_dataset(&m, &test));
    const int64_t n_test = a->test_limit > 0 && a->test_limit < test.n ? a->test_limit : test.n;
    ff_train_options o = a->o;
    TRY(ff_trainer_create(&tr, &m, &w, &o, comm));

    const int64_t B = o.batch, n = train.n;
    ff_train_plan plan;  // steps per epoch (the last batch may be short) and in all, overflow-checked
    TRY(ff_train_plan_make(&plan, n, B, a->epochs, a->steps));
    const int64_t spe = plan.steps_per_epoch, total = plan.total;
    int64_t e0 = 0, s0 = 0, step = 0;
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
    if (out)
        printf(
            "train %s: mode %s, ranks %d, %lld train / %lld test images from %s, epochs %lld, "
            "%lld steps/epoch, batch %lld, microbatch %lld, lr %g, momentum %g, weight-decay %g, "
            "seed %llu, reduce %s\n",
            m.name, a->mode, P, (long long)n, (long long)n_test, a->data, (long long)a->epochs, (long long)spe,
            (long long)B, (long long)o.microbatch, o.lr, o.momentum, o.weight_decay, (unsigned long long)a->seed,
            ff_reduce_name(o.reduce));
    fflush(stdout);

    const double t_start = now_s();
    double t_log = t_start;
    int64_t steps_run = 0, samples_log = 0;
    const char *kill_env = getenv("FF_TEST_KILL_AFTER_STEP");  // test hook: simulate a crash
    const int64_t kill_after = kill_env ? atoll(kill_env) : -1;
    for (int64_t e = e0; e < a->epochs && step < total; e++) {
        ff_shuffle_order(order, n, a->seed, e);
        int64_t s = e == e0 ? s0 : 0;
        for (; s < spe && step < total; s++) {
            const int64_t first = s * B, b = first + B <= n ? B : n - first;
            double loss;
            TRY(ff_train_step(tr, &loss, &train, order + first, b));
            step++;
            steps_run++;
            samples_log += b;
            loss_digest = ff_fnv1a64_update(loss_digest, &loss, sizeof loss);
            if (out && a->log_every > 0 && (step % a->log_every == 0 || step == total)) {
                double t = now_s();
                double rate = samples_log / (t - t_log > 0 ? t - t_log : 1e-9);
                double per_step = (t - t_start) / (double)steps_run;
                char eta[32];
                fmt_hms(eta, sizeof eta, per_step * (double)(total - step));
                printf(
                    "epoch %lld/%lld step %lld/%lld (total %lld/%lld) loss %.6f samples/s %.1f "
                    "ETA %s\n",
                    (long long)e + 1, (long long)a->epochs, (long long)s + 1, (long long)spe, (long long)step,
                    (long long)total, loss, rate, eta);
                fflush(stdout);
                t_log = t;
                samples_log = 0;
            }
            if (wr && a->ckpt_every > 0 && step % a->ckpt_every == 0 && step < total) {
                ff_ckpt_meta cm = {step,           e,    s + 1,      a->seed,        B,          o.microbatch,
                                   a->train_limit, o.lr, o.momentum, o.weight_decay, loss_digest};
                if (s + 1 == spe) {
                    cm.epoch = e + 1;
                    cm.step_in_epoch = 0;
                }
                TRY(ff_trainer_sync(tr));
                TRY(ff_ckpt_writer_submit(wr, ckpt_path, &w, ff_trainer_momentum(tr), &cm));
            }
            if (kill_after >= 0 && step == kill_after) {
                fprintf(stderr, "FF_TEST_KILL_AFTER_STEP=%lld: killing the process\n", (long long)kill_after);
                fflush(stderr);
                raise(SIGKILL);
            }
        }
        if (s == spe) {  // the epoch is complete: test accuracy, maybe a checkpoint
            int64_t correct;
            TRY(ff_train_evaluate(tr, &correct, &test, n_test));
            if (out) {
                printf("epoch %lld/%lld done: test accuracy %.2f%% (%lld/%lld), %.1f s elapsed\n", (long long)e + 1,
                       (long long)a->epochs, n_test ? 100.0 * (double)correct / (double)n_test : 0.0,
                       (long long)correct, (long long)n_test, now_s() - t_start);
                fflush(stdout);
            }
            if (wr && a->ckpt_every_epochs > 0 && (e + 1) % a->ckpt_every_epochs == 0 && step < total) {
                ff_ckpt_meta cm = {step,           e + 1, 0,          a->seed,        B,          o.microbatch,
                                   a->train_limit, o.lr,  o.momentum, o.weight_decay, loss_digest};
                TRY(ff_trainer_sync(tr));
                TRY(ff_ckpt_writer_submit(wr, ckpt_path, &w, ff_trainer_momentum(tr), &cm));
            }
        }
    }
    if (wr) {                                          // the final checkpoint, at the position training stopped
        const int64_t e = step / spe, s = step % spe;  // every epoch has spe steps
        ff_ckpt_meta cm = {step,           e,    s,          a->seed,        B,          o.microbatch,
                           a->train_limit, o.lr, o.momentum, o.weight_decay, loss_digest};
        TRY(ff_trainer_sync(tr));
        TRY(ff_ckpt_writer_submit(wr, ckpt_path, &w, ff_trainer_momentum(tr), &cm));
        TRY(ff_ckpt_writer_wait(wr));
        if (out) printf("checkpoint: %s (step %lld)\n", ckpt_path, (long long)step);
    }
    TRY(ff_trainer_sync(tr));  // the weights the digest and --save-weights see
    if (out) {
        char hex[17];
        double el = now_s() - t_start;
        // Images actually trained on: a short last batch counts what it holds, not B.
        const int64_t samples = ff_trainer_samples(tr);
        printf("trained %lld steps (%lld images) in %.1f s (%.1f samples/s)\n", (long long)steps_run,
               (long long)samples, el, el > 0 ? (double)samples / el : 0.0);
        printf("loss digest: %s\n", ff_digest_hex(hex, loss_digest));
        printf("weights digest: %s\n", ff_digest_hex(hex, ff_weights_digest(&w)));
        fflush(stdout);
    }
    if (a->save_weights) {
        ff_status ss = out ? ff_weights_save_h5(&w, &m, a->save_weights) : FF_OK;
        TRY(share_root_status(ss, comm, follower));
        if (out) printf("weights written to %s\n", a->save_weights);
    }
#undef TRY
done:
    if (wr) {
        ff_status ws = st == FF_OK ? ff_ckpt_writer_wait(wr) : FF_OK;
        if (st == FF_OK) st = ws;
        ff_ckpt_writer_destroy(wr);
    }
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
    ff_comm *comm = NULL;
    if (!strcmp(a.mode, "mpi") || !strcmp(a.mode, "v2")) {
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
    ff_status st = run(&follower, &a, comm);
    if (st != FF_OK) return follower ? ff_cli_fail_quiet("train", st) : ff_cli_fail("train", st);
    return FF_EXIT_OK;
}
