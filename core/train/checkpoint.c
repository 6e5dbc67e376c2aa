// Training checkpoints: atomic HDF5 writes from a background thread, digest-checked loads.
#include "fivefold/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fivefold/digest.h"
#include "fivefold/h5io.h"
#include "fivefold/train.h"

static const char *FORMAT = "fivefold-checkpoint";

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint64_t mix_i64(uint64_t h, int64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)v >> (8 * i));  // little-endian
    return ff_fnv1a64_update(h, b, 8);
}

// Digest of the float32 values as little-endian bytes (x86-64 and every supported host is LE).
uint64_t ff_checkpoint_digest(const ff_model *m, const ff_weights *w, const ff_weights *mom, const ff_ckpt_meta *meta) {
    uint64_t h = FF_FNV_OFFSET;
    h = mix_i64(h, FF_CKPT_VERSION);
    h = mix_i64(h, meta->step);
    h = mix_i64(h, meta->epoch);
    h = mix_i64(h, meta->step_in_epoch);
    h = mix_i64(h, (int64_t)meta->seed);
    h = mix_i64(h, meta->batch);
    h = mix_i64(h, meta->microbatch);
    h = mix_i64(h, meta->train_limit);
    h = mix_i64(h, f32_bits(meta->lr));
    h = mix_i64(h, f32_bits(meta->momentum));
    h = mix_i64(h, f32_bits(meta->weight_decay));
    h = mix_i64(h, (int64_t)meta->loss_digest);
    h = ff_fnv1a64_update(h, m->name, strlen(m->name));
    h = ff_fnv1a64_update(h, w->data, (size_t)w->n_total * sizeof(float));
    h = ff_fnv1a64_update(h, mom->data, (size_t)mom->n_total * sizeof(float));
    return h;
}

// Dataset shapes of parameterised layer L: w (K, C, R, S) or (out, in); b (K).
static int param_dims(int64_t *wd, int64_t *bd, const ff_layer *L) {
    bd[0] = L->n_bias;
    if (L->op == FF_OP_CONV2D) {
        wd[0] = L->out_c;
        wd[1] = L->in.c;
        wd[2] = L->kh;
        wd[3] = L->kw;
        return 4;
    }
    wd[0] = L->out_c;
    wd[1] = ff_shape_numel(L->in);
    return 2;
}

static ff_status write_params(int64_t f, const char *group, const ff_model *m, const ff_weights *w) {
    char name[256];
    for (int l = 0; l < m->n_layers; l++) {
        const ff_layer *L = &m->layers[l];
        if (L->param_index < 0) continue;
        int64_t wd[4], bd[1];
        int rank = param_dims(wd, bd, L);
        snprintf(name, sizeof name, "%s/%s/w", group, L->name);
        FF_TRY(ff_h5_write(f, name, FF_H5_F32, w->w[l], rank, wd));
        snprintf(name, sizeof name, "%s/%s/b", group, L->name);
        FF_TRY(ff_h5_write(f, name, FF_H5_F32, w->b[l], 1, bd));
    }
    return FF_OK;
}

static ff_status read_params(ff_weights *w, int64_t f, const char *group, const ff_model *m) {
    char name[256];
    for (int l = 0; l < m->n_layers; l++) {
        const ff_layer *L = &m->layers[l];
        if (L->param_index < 0) continue;
        int64_t wd[4], bd[1];
        int rank = param_dims(wd, bd, L);
        snprintf(name, sizeof name, "%s/%s/w", group, L->name);
        FF_TRY(ff_h5_read(w->w[l], f, name, FF_H5_F32, rank, wd));
        snprintf(name, sizeof name, "%s/%s/b", group, L->name);
        FF_TRY(ff_h5_read(w->b[l], f, name, FF_H5_F32, 1, bd));
    }
    return FF_OK;
}

// A NaN or infinity in the weights or momentum would spread to every weight within a step or two:
// refuse it on load, naming the first one.
static ff_status check_finite(const ff_model *m, const ff_weights *w, const char *group) {
    for (int l = 0; l < m->n_layers; l++) {
        const ff_layer *L = &m->layers[l];
        if (L->param_index < 0) continue;
        int64_t wd[4], bd[1], nw = 1;
        int rank = param_dims(wd, bd, L);
        for (int d = 0; d < rank; d++) nw *= wd[d];
        const struct {
            const float *p;
            int64_t n;
            const char *name;
        } t[2] = {{w->w[l], nw, "w"}, {w->b[l], bd[0], "b"}};
        for (int k = 0; k < 2; k++)
            for (int64_t i = 0; i < t[k].n; i++)
                if (!isfinite(t[k].p[i]))
                    return FF_FAIL(FF_ERR_INPUT, "%s/%s/%s[%lld] is %g, expected a finite number", group, L->name,
                                   t[k].name, (long long)i, (double)t[k].p[i]);
    }
    return FF_OK;
}

// ff_checkpoint_check_meta without the path (ff_checkpoint_load adds it as context).
static ff_status check_meta(const ff_ckpt_meta *c) {
    if (c->step < 0) return FF_FAIL(FF_ERR_INPUT, "step %lld, expected >= 0", (long long)c->step);
    if (c->epoch < 0) return FF_FAIL(FF_ERR_INPUT, "epoch %lld, expected >= 0", (long long)c->epoch);
    if (c->step_in_epoch < 0)
        return FF_FAIL(FF_ERR_INPUT, "step_in_epoch %lld, expected >= 0", (long long)c->step_in_epoch);
    // Each epoch has at least one step, so step >= epoch + step_in_epoch (both >= 0: no overflow
    // when step - epoch is compared instead of the sum).
    if (c->step - c->epoch < c->step_in_epoch)
        return FF_FAIL(FF_ERR_INPUT,
                       "step %lld with epoch %lld and step_in_epoch %lld: expected step >= epoch + step_in_epoch",
                       (long long)c->step, (long long)c->epoch, (long long)c->step_in_epoch);
    if (c->batch < 1) return FF_FAIL(FF_ERR_INPUT, "batch %lld, expected >= 1", (long long)c->batch);
    if (c->microbatch < 1 || c->microbatch > c->batch)
        return FF_FAIL(FF_ERR_INPUT, "microbatch %lld, expected 1..batch (%lld)", (long long)c->microbatch,
                       (long long)c->batch);
    if (c->train_limit < 0) return FF_FAIL(FF_ERR_INPUT, "train_limit %lld, expected >= 0", (long long)c->train_limit);
    if (c->train_limit > 0) {
        const int64_t spe_max = c->train_limit / c->batch + (c->train_limit % c->batch != 0);
        if (c->step_in_epoch >= spe_max)
            return FF_FAIL(
                FF_ERR_INPUT,
                "step_in_epoch %lld, expected < %lld (train_limit %lld / batch %lld steps per epoch at most)",
                (long long)c->step_in_epoch, (long long)spe_max, (long long)c->train_limit, (long long)c->batch);
    }
    // The recipe's numbers, in the trainer's own ranges (its messages name the flags).
    ff_train_options o;
    ff_train_options_default(&o);
    o.batch = c->batch;
    o.microbatch = c->microbatch;
    o.lr = c->lr;
    o.momentum = c->momentum;
    o.weight_decay = c->weight_decay;
    return ff_train_options_check(&o);
}

ff_status ff_checkpoint_check_meta(const ff_ckpt_meta *meta, const char *path) {
    ff_status st = check_meta(meta);
    return st == FF_OK ? FF_OK : ff_fail_context(st, "checkpoint '%s'", path);
}

ff_status ff_checkpoint_check_run(const ff_ckpt_meta *c, int64_t steps_per_epoch, const char *path) {
    FF_TRY(ff_checkpoint_check_meta(c, path));
    if (steps_per_epoch < 1)
        return FF_FAIL(FF_ERR_INPUT, "resuming '%s': %lld steps per epoch, expected >= 1", path,
                       (long long)steps_per_epoch);
    if (c->step_in_epoch >= steps_per_epoch)
        return FF_FAIL(FF_ERR_INPUT,
                       "checkpoint '%s': step_in_epoch %lld, expected 0..%lld: this run has %lld steps per epoch "
                       "(another data set, --train-limit or --batch?)",
                       path, (long long)c->step_in_epoch, (long long)steps_per_epoch - 1, (long long)steps_per_epoch);
    int64_t want;
    if (__builtin_mul_overflow(c->epoch, steps_per_epoch, &want) ||
        __builtin_add_overflow(want, c->step_in_epoch, &want))
        return FF_FAIL(FF_ERR_INPUT,
                       "checkpoint '%s': epoch %lld x %lld steps per epoch + step_in_epoch %lld overflows int64, "
                       "expected it to equal step %lld",
                       path, (long long)c->epoch, (long long)steps_per_epoch, (long long)c->step_in_epoch,
                       (long long)c->step);
    if (want != c->step)
        return FF_FAIL(FF_ERR_INPUT,
                       "checkpoint '%s': step %lld, but epoch %lld x %lld steps per epoch + step_in_epoch %lld = %lld; "
                       "expected them equal (another data set, --train-limit or --batch?)",
                       path, (long long)c->step, (long long)c->epoch, (long long)steps_per_epoch,
                       (long long)c->step_in_epoch, (long long)want);
    return FF_OK;
}

// "checkpoint.h5.tmp.<digits>": the temporary name ff_checkpoint_save uses; *pid gets the digits.
static int stale_tmp_pid(long *pid, const char *name) {
    static const char prefix[] = FF_CKPT_FILE ".tmp.";
    if (strncmp(name, prefix, sizeof prefix - 1) != 0) return 0;
    const char *d = name + sizeof prefix - 1;
    if (!*d || strlen(d) > 9) return 0;  // pids are below 2^22 on Linux: 9 digits is plenty
    for (const char *p = d; *p; p++)
        if (*p < '0' || *p > '9') return 0;
    *pid = strtol(d, NULL, 10);
    return *pid > 0;
}

ff_status ff_checkpoint_dir_prepare(int *removed, const char *dir) {
    *removed = 0;
    struct stat sb;
    if (stat(dir, &sb) != 0) {
        if (errno != ENOENT)
            return FF_FAIL(FF_ERR_INPUT, "--checkpoint-dir '%s': cannot examine it: %s", dir, strerror(errno));
        if (mkdir(dir, 0777) != 0 && errno != EEXIST)
            return FF_FAIL(FF_ERR_IO, "--checkpoint-dir '%s': cannot create it: %s", dir, strerror(errno));
        if (stat(dir, &sb) != 0)
            return FF_FAIL(FF_ERR_IO, "--checkpoint-dir '%s': created, then cannot examine it: %s", dir,
                           strerror(errno));
    }
    if (!S_ISDIR(sb.st_mode))
        return FF_FAIL(FF_ERR_INPUT, "--checkpoint-dir '%s' exists and is not a directory: expected a directory", dir);
    if (access(dir, W_OK | X_OK) != 0)
        return FF_FAIL(FF_ERR_INPUT, "--checkpoint-dir '%s': not writable (%s): expected a directory we can write", dir,
                       strerror(errno));
    DIR *d = opendir(dir);
    if (!d) return FF_FAIL(FF_ERR_IO, "--checkpoint-dir '%s': cannot list it: %s", dir, strerror(errno));
    ff_status st = FF_OK;
    const long self = (long)getpid();
    for (struct dirent *e; st == FF_OK && (e = readdir(d)) != NULL;) {
        long pid;
        if (!stale_tmp_pid(&pid, e->d_name) || pid == self) continue;
        // EPERM means the process exists (another user's): only ESRCH proves the writer is gone.
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        char p[4096];
        if (snprintf(p, sizeof p, "%s/%s", dir, e->d_name) >= (int)sizeof p) continue;
        struct stat fs;
        if (lstat(p, &fs) != 0 || !S_ISREG(fs.st_mode)) continue;
        if (unlink(p) == 0)
            (*removed)++;
        else if (errno != ENOENT)
            st = FF_FAIL(FF_ERR_IO, "--checkpoint-dir '%s': cannot remove the stale temporary file '%s': %s", dir,
                         e->d_name, strerror(errno));
    }
    closedir(d);
    return st;
}

static ff_status fsync_path(const char *path, int dir) {
    int fd = open(path, dir ? (O_RDONLY | O_DIRECTORY) : O_RDONLY);
    if (fd < 0) return FF_FAIL(FF_ERR_IO, "checkpoint: cannot open '%s' to fsync: %s", path, strerror(errno));
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    if (rc != 0) return FF_FAIL(FF_ERR_IO, "checkpoint: fsync '%s' failed: %s", path, strerror(e));
    return FF_OK;
}

static ff_status write_file(const char *tmp, const ff_model *m, const ff_weights *w, const ff_weights *mom,
                            const ff_ckpt_meta *meta) {
    int64_t f;
    FF_TRY(ff_h5_create(&f, tmp));
    ff_status st = FF_OK;
    char buf[64];
#define TRYW(expr)                  \
    do {                            \
        st = (expr);                \
        if (st != FF_OK) goto done; \
    } while (0)
    TRYW(write_params(f, "weights", m, w));
    if (getenv("FF_TEST_CRASH_IN_CHECKPOINT_WRITE") && strcmp(getenv("FF_TEST_CRASH_IN_CHECKPOINT_WRITE"), "1") == 0) {
        // Test hook: die with a half-written temporary file on disk (weights only, no metadata).
        fprintf(stderr,
                "FF_TEST_CRASH_IN_CHECKPOINT_WRITE=1: killing the process in the middle of "
                "writing %s\n",
                tmp);
        fflush(stderr);
        raise(SIGKILL);
    }
    TRYW(write_params(f, "momentum", m, mom));
    TRYW(ff_h5_write_attr_str(f, "/", "format", FORMAT));
    TRYW(ff_h5_write_attr_i64(f, "/", "format_version", FF_CKPT_VERSION));
    TRYW(ff_h5_write_attr_str(f, "/", "model", m->name));
    TRYW(ff_h5_write_attr_i64(f, "/", "step", meta->step));
    TRYW(ff_h5_write_attr_i64(f, "/", "epoch", meta->epoch));
    TRYW(ff_h5_write_attr_i64(f, "/", "step_in_epoch", meta->step_in_epoch));
    TRYW(ff_h5_write_attr_i64(f, "/", "seed", (int64_t)meta->seed));
    TRYW(ff_h5_write_attr_i64(f, "/", "batch", meta->batch));
    TRYW(ff_h5_write_attr_i64(f, "/", "microbatch", meta->microbatch));
    TRYW(ff_h5_write_attr_i64(f, "/", "train_limit", meta->train_limit));
    TRYW(ff_h5_write_attr_i64(f, "/", "lr_bits", f32_bits(meta->lr)));
    TRYW(ff_h5_write_attr_i64(f, "/", "momentum_bits", f32_bits(meta->momentum)));
    TRYW(ff_h5_write_attr_i64(f, "/", "weight_decay_bits", f32_bits(meta->weight_decay)));
    TRYW(ff_h5_write_attr_i64(f, "/", "loss_digest", (int64_t)meta->loss_digest));
    snprintf(buf, sizeof buf, "%.9g", meta->lr);
    TRYW(ff_h5_write_attr_str(f, "/", "lr", buf));
    snprintf(buf, sizeof buf, "%.9g", meta->momentum);
    TRYW(ff_h5_write_attr_str(f, "/", "momentum", buf));
    snprintf(buf, sizeof buf, "%.9g", meta->weight_decay);
    TRYW(ff_h5_write_attr_str(f, "/", "weight_decay", buf));
    TRYW(ff_h5_write_attr_str(f, "/", "digest", ff_digest_hex(buf, ff_checkpoint_digest(m, w, mom, meta))));
#undef TRYW
done:
    ff_h5_close(f);
    return st;
}

ff_status ff_checkpoint_save(const char *path, const ff_model *m, const ff_weights *w, const ff_weights *mom,
                             const ff_ckpt_meta *meta) {
    char tmp[4096], dir[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return FF_FAIL(FF_ERR_INPUT, "checkpoint path too long: '%s'", path);
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == dir)
        slash[1] = '\0';  // "/file" -> "/"
    else if (slash)
        *slash = '\0';
    else
        snprintf(dir, sizeof dir, ".");
    ff_status st = write_file(tmp, m, w, mom, meta);
    if (st == FF_OK) st = fsync_path(tmp, 0);
    if (st == FF_OK && rename(tmp, path) != 0)
        st = FF_FAIL(FF_ERR_IO, "checkpoint: rename '%s' -> '%s' failed: %s", tmp, path, strerror(errno));
    if (st != FF_OK) {
        unlink(tmp);
        return ff_fail_context(st, "writing checkpoint '%s'", path);
    }
    return fsync_path(dir, 1);
}

ff_status ff_checkpoint_load(ff_weights *w, ff_weights *mom, ff_ckpt_meta *meta, const ff_model *m, const char *path) {
    if (access(path, R_OK) != 0)
        return FF_FAIL(FF_ERR_IO, "checkpoint '%s': cannot read it (%s)", path, strerror(errno));
    int64_t f;
    if (ff_h5_open_read(&f, path) != FF_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", ff_last_error());  // FF_FAIL rewrites the message buffer
        return FF_FAIL(FF_ERR_INTEGRITY,
                       "checkpoint '%s' is not a readable HDF5 file (truncated or "
                       "corrupted?): refused (%s)",
                       path, why);
    }
    ff_status st = FF_OK;
    char s[256];
    int64_t v;
    int keep_code = 0;  // an intact file that is refused for its content keeps FF_ERR_INPUT
#define TRYR(expr)                 \
    do {                           \
        st = (expr);               \
        if (st != FF_OK) goto bad; \
    } while (0)
    TRYR(ff_h5_read_attr_str(s, sizeof s, f, "/", "format"));
    if (strcmp(s, FORMAT) != 0) {
        st = FF_FAIL(FF_ERR_INTEGRITY, "format '%s', expected '%s'", s, FORMAT);
        goto bad;
    }
    TRYR(ff_h5_read_attr_i64(&v, f, "/", "format_version"));
    if (v != FF_CKPT_VERSION) {
        st = FF_FAIL(FF_ERR_INTEGRITY, "format_version %lld, this build reads version %d", (long long)v,
                     FF_CKPT_VERSION);
        goto bad;
    }
    TRYR(ff_h5_read_attr_str(s, sizeof s, f, "/", "model"));
    if (strcmp(s, m->name) != 0) {
        st = FF_FAIL(FF_ERR_INPUT, "model '%s', expected '%s'", s, m->name);
        keep_code = 1;
        goto bad;
    }
    TRYR(ff_h5_read_attr_i64(&meta->step, f, "/", "step"));
    TRYR(ff_h5_read_attr_i64(&meta->epoch, f, "/", "epoch"));
    TRYR(ff_h5_read_attr_i64(&meta->step_in_epoch, f, "/", "step_in_epoch"));
    TRYR(ff_h5_read_attr_i64(&v, f, "/", "seed"));
    meta->seed = (uint64_t)v;
    TRYR(ff_h5_read_attr_i64(&meta->batch, f, "/", "batch"));
    TRYR(ff_h5_read_attr_i64(&meta->microbatch, f, "/", "microbatch"));
    TRYR(ff_h5_read_attr_i64(&meta->train_limit, f, "/", "train_limit"));
    TRYR(ff_h5_read_attr_i64(&v, f, "/", "lr_bits"));
    meta->lr = bits_f32((uint32_t)v);
    TRYR(ff_h5_read_attr_i64(&v, f, "/", "momentum_bits"));
    meta->momentum = bits_f32((uint32_t)v);
    TRYR(ff_h5_read_attr_i64(&v, f, "/", "weight_decay_bits"));
    meta->weight_decay = bits_f32((uint32_t)v);
    TRYR(ff_h5_read_attr_i64(&v, f, "/", "loss_digest"));
    meta->loss_digest = (uint64_t)v;
    TRYR(read_params(w, f, "weights", m));
    TRYR(read_params(mom, f, "momentum", m));
    TRYR(ff_h5_read_attr_str(s, sizeof s, f, "/", "digest"));
    char got[17];
    ff_digest_hex(got, ff_checkpoint_digest(m, w, mom, meta));
    if (strcmp(s, got) != 0) {
        st = FF_FAIL(FF_ERR_INTEGRITY,
                     "content digest %s does not match the stored digest %s "
                     "(the file was corrupted)",
                     got, s);
        goto bad;
    }
    // The digest proves the file is what some writer wrote, not that its values are usable (a
    // digest can be recomputed after an edit): check every field and value before it is used.
    keep_code = 1;
    TRYR(check_meta(meta));
    TRYR(check_finite(m, w, "weights"));
    TRYR(check_finite(m, mom, "momentum"));
#undef TRYR
    ff_h5_close(f);
    return FF_OK;
bad:
    ff_h5_close(f);
    // Anything missing or unreadable inside is damage; a checkpoint of another model, or an intact
    // one whose values are out of range, is a (readable) wrong input.
    if (!keep_code) st = FF_ERR_INTEGRITY;
    return ff_fail_context(st, "checkpoint '%s' refused", path);
}

// ---------------------------------------------------------------- background writer

struct ff_ckpt_writer {
    const ff_model *m;
    ff_weights w, mom;  // the snapshot
    ff_ckpt_meta meta;
    char path[4096];
    pthread_t thread;
    int running;
    ff_status result;
    char message[2048];  // the writer thread's error message (messages are per thread)
};

ff_status ff_ckpt_writer_create(ff_ckpt_writer **out, const ff_model *m) {
    *out = NULL;
    ff_ckpt_writer *wr = calloc(1, sizeof *wr);
    if (!wr) return FF_FAIL(FF_ERR_OOM, "checkpoint writer: cannot allocate");
    wr->m = m;
    ff_status st = ff_weights_alloc(&wr->w, m);
    if (st == FF_OK) {
        st = ff_weights_alloc(&wr->mom, m);
        if (st != FF_OK) ff_weights_free(&wr->w);
    }
    if (st != FF_OK) {
        free(wr);
        return st;
    }
    *out = wr;
    return FF_OK;
}

static void *writer_main(void *arg) {
    ff_ckpt_writer *wr = arg;
    wr->result = ff_checkpoint_save(wr->path, wr->m, &wr->w, &wr->mom, &wr->meta);
    if (wr->result != FF_OK) snprintf(wr->message, sizeof wr->message, "%s", ff_last_error());
    return NULL;
}

ff_status ff_ckpt_writer_wait(ff_ckpt_writer *wr) {
    if (!wr->running) return FF_OK;
    pthread_join(wr->thread, NULL);
    wr->running = 0;
    if (wr->result != FF_OK) return FF_FAIL(wr->result, "%s", wr->message);
    return FF_OK;
}

ff_status ff_ckpt_writer_submit(ff_ckpt_writer *wr, const char *path, const ff_weights *w, const ff_weights *mom,
                                const ff_ckpt_meta *meta) {
    FF_TRY(ff_ckpt_writer_wait(wr));
    if (snprintf(wr->path, sizeof wr->path, "%s", path) >= (int)sizeof wr->path)
        return FF_FAIL(FF_ERR_INPUT, "checkpoint path too long: '%s'", path);
    memcpy(wr->w.data, w->data, (size_t)w->n_total * sizeof(float));
    memcpy(wr->mom.data, mom->data, (size_t)mom->n_total * sizeof(float));
    wr->meta = *meta;
    wr->result = FF_OK;
    int rc = pthread_create(&wr->thread, NULL, writer_main, wr);
    if (rc != 0) return FF_FAIL(FF_ERR_INTERNAL, "checkpoint writer: pthread_create failed (%d)", rc);
    wr->running = 1;
    return FF_OK;
}

void ff_ckpt_writer_destroy(ff_ckpt_writer *wr) {
    if (!wr) return;
    (void)ff_ckpt_writer_wait(wr);
    ff_weights_free(&wr->w);
    ff_weights_free(&wr->mom);
    free(wr);
}
