// Checkpoints: exact round trip; the background writer saves the snapshot taken at submit time;
// a crash in the middle of a write (test hook) leaves the previous checkpoint loadable; a
// corrupted or truncated checkpoint is refused with FF_ERR_INTEGRITY and a clear message.
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <hdf5.h>
#include <math.h>

#include "fivefold/checkpoint.h"
#include "fivefold/rng.h"

static char dir[] = "/tmp/ff_ckpt_XXXXXX";
static char ckpt[512];
static ff_model m;

typedef struct {
    ff_weights w, mom;
    ff_ckpt_meta meta;
} state_t;

static void make_state(state_t *s, uint64_t seed) {
    assert_int_equal(ff_weights_alloc(&s->w, &m), FF_OK);
    assert_int_equal(ff_weights_alloc(&s->mom, &m), FF_OK);
    ff_weights_generate(&s->w, &m, seed);
    ff_rng_fill(s->mom.data, (size_t)s->mom.n_total, seed, 777, 0.01f);
    ff_ckpt_meta meta = {(int64_t)seed * 10, 2, 5, seed, 64, 8, 0, 0.01f, 0.9f, 0.0f, 0xabcdefULL + seed};
    s->meta = meta;
}

static void free_state(state_t *s) {
    ff_weights_free(&s->w);
    ff_weights_free(&s->mom);
}

static void assert_same(const state_t *a, const state_t *b) {
    assert_memory_equal(a->w.data, b->w.data, (size_t)a->w.n_total * sizeof(float));
    assert_memory_equal(a->mom.data, b->mom.data, (size_t)a->mom.n_total * sizeof(float));
    // field by field: the struct has padding
    assert_int_equal(a->meta.step, b->meta.step);
    assert_int_equal(a->meta.epoch, b->meta.epoch);
    assert_int_equal(a->meta.step_in_epoch, b->meta.step_in_epoch);
    assert_int_equal(a->meta.seed, b->meta.seed);
    assert_int_equal(a->meta.batch, b->meta.batch);
    assert_int_equal(a->meta.microbatch, b->meta.microbatch);
    assert_int_equal(a->meta.train_limit, b->meta.train_limit);
    assert_true(a->meta.lr == b->meta.lr && a->meta.momentum == b->meta.momentum &&
                a->meta.weight_decay == b->meta.weight_decay);
    assert_int_equal(a->meta.loss_digest, b->meta.loss_digest);
}

static ff_status load(state_t *out) {
    assert_int_equal(ff_weights_alloc(&out->w, &m), FF_OK);
    assert_int_equal(ff_weights_alloc(&out->mom, &m), FF_OK);
    memset(&out->meta, 0, sizeof out->meta);
    return ff_checkpoint_load(&out->w, &out->mom, &out->meta, &m, ckpt);
}

static void round_trip_is_exact(void **state) {
    (void)state;
    state_t a, b;
    make_state(&a, 1);
    assert_int_equal(ff_checkpoint_save(ckpt, &m, &a.w, &a.mom, &a.meta), FF_OK);
    assert_int_equal(load(&b), FF_OK);
    assert_same(&a, &b);
    free_state(&a);
    free_state(&b);
}

static void background_writer_saves_the_snapshot(void **state) {
    (void)state;
    state_t a, b;
    make_state(&a, 2);
    ff_ckpt_writer *wr;
    assert_int_equal(ff_ckpt_writer_create(&wr, &m), FF_OK);
    assert_int_equal(ff_ckpt_writer_submit(wr, ckpt, &a.w, &a.mom, &a.meta), FF_OK);
    state_t keep;
    make_state(&keep, 2);
    // Training goes on while the thread writes: change the live weights at once.
    for (int64_t i = 0; i < a.w.n_total; i++) a.w.data[i] += 1.0f;
    assert_int_equal(ff_ckpt_writer_wait(wr), FF_OK);
    ff_ckpt_writer_destroy(wr);
    assert_int_equal(load(&b), FF_OK);
    assert_same(&keep, &b);
    free_state(&a);
    free_state(&b);
    free_state(&keep);
}

static void crash_mid_write_keeps_the_previous_checkpoint(void **state) {
    (void)state;
    state_t a, b, c;
    make_state(&a, 3);
    assert_int_equal(ff_checkpoint_save(ckpt, &m, &a.w, &a.mom, &a.meta), FF_OK);
    make_state(&b, 4);
    fflush(stdout);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv("FF_TEST_CRASH_IN_CHECKPOINT_WRITE", "1", 1);
        ff_checkpoint_save(ckpt, &m, &b.w, &b.mom, &b.meta);
        _exit(0);  // not reached when the hook works
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    // The half-written temporary file is there...
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", ckpt, (long)pid);
    struct stat sb;
    assert_int_equal(stat(tmp, &sb), 0);
    printf("  crashed writer left %s (%lld bytes)\n", tmp, (long long)sb.st_size);
    unlink(tmp);
    // ... and the checkpoint is still the previous, complete one.
    assert_int_equal(load(&c), FF_OK);
    assert_same(&a, &c);
    free_state(&a);
    free_state(&b);
    free_state(&c);
}

static void corrupted_and_truncated_are_refused(void **state) {
    (void)state;
    state_t a, b;
    make_state(&a, 5);
    assert_int_equal(ff_checkpoint_save(ckpt, &m, &a.w, &a.mom, &a.meta), FF_OK);
    // (1) Valid HDF5 whose contents changed: one weight rewritten through the HDF5 API, so the
    // file reads fine and only the stored digest can tell.
    hid_t h = H5Fopen(ckpt, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(h >= 0);
    hid_t ds = H5Dopen2(h, "weights/conv1/b", H5P_DEFAULT);
    assert_true(ds >= 0);
    float b32[32];
    assert_true(H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, b32) >= 0);
    b32[7] = nextafterf(b32[7], 1.0f);  // one ULP
    assert_true(H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, b32) >= 0);
    H5Dclose(ds);
    H5Fclose(h);
    ff_status st = load(&b);
    printf("  one weight changed: %s: %s\n", ff_status_name(st), ff_last_error());
    assert_int_equal(st, FF_ERR_INTEGRITY);
    assert_non_null(strstr(ff_last_error(), "refused"));
    assert_non_null(strstr(ff_last_error(), "digest"));
    free_state(&b);

    // (2) A flipped bit in the middle of the file (inside fc1's compressed weights).
    assert_int_equal(ff_checkpoint_save(ckpt, &m, &a.w, &a.mom, &a.meta), FF_OK);
    FILE *f = fopen(ckpt, "r+b");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, size / 2, SEEK_SET);
    int byte = fgetc(f);
    fseek(f, size / 2, SEEK_SET);
    fputc(byte ^ 0x10, f);
    fclose(f);
    st = load(&b);
    printf("  flipped bit: %s: %s\n", ff_status_name(st), ff_last_error());
    assert_int_equal(st, FF_ERR_INTEGRITY);
    assert_non_null(strstr(ff_last_error(), "refused"));
    free_state(&b);

    assert_int_equal(ff_checkpoint_save(ckpt, &m, &a.w, &a.mom, &a.meta), FF_OK);
    assert_int_equal(truncate(ckpt, size / 2), 0);
    st = load(&b);
    printf("  truncated: %s: %s\n", ff_status_name(st), ff_last_error());
    assert_int_equal(st, FF_ERR_INTEGRITY);
    assert_non_null(strstr(ff_last_error(), ckpt));
    free_state(&b);

    unlink(ckpt);
    st = load(&b);
    assert_int_equal(st, FF_ERR_IO);
    assert_non_null(strstr(ff_last_error(), "cannot read"));
    free_state(&b);
    free_state(&a);
}

static void digest_covers_the_metadata(void **state) {
    (void)state;
    state_t a;
    make_state(&a, 6);
    uint64_t d0 = ff_checkpoint_digest(&m, &a.w, &a.mom, &a.meta);
    a.meta.step_in_epoch++;
    assert_true(ff_checkpoint_digest(&m, &a.w, &a.mom, &a.meta) != d0);
    a.meta.step_in_epoch--;
    a.mom.data[a.mom.n_total - 1] += 1.0f;
    assert_true(ff_checkpoint_digest(&m, &a.w, &a.mom, &a.meta) != d0);
    free_state(&a);
}

// Rewrites the int64 attribute `name` of the checkpoint's root through the HDF5 API: the file stays
// valid HDF5 and its stored digest is untouched.
static void rewrite_root_i64(const char *name, int64_t value) {
    hid_t h = H5Fopen(ckpt, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(h >= 0);
    hid_t a = H5Aopen(h, name, H5P_DEFAULT);
    assert_true(a >= 0);
    assert_true(H5Awrite(a, H5T_NATIVE_INT64, &value) >= 0);
    H5Aclose(a);
    H5Fclose(h);
}

// Every field of the metadata is in the digest: a checkpoint whose "step" was edited (to a value
// check_meta would accept) is refused as damaged, not resumed at the wrong step.
static void edited_step_is_refused(void **state) {
    (void)state;
    state_t a, b;
    make_state(&a, 7);  // step 70, epoch 2, step_in_epoch 5
    assert_int_equal(ff_checkpoint_save(ckpt, &m, &a.w, &a.mom, &a.meta), FF_OK);
    rewrite_root_i64("step", a.meta.step + 1);
    ff_status st = load(&b);
    printf("  step edited: %s: %s\n", ff_status_name(st), ff_last_error());
    assert_int_equal(st, FF_ERR_INTEGRITY);
    assert_non_null(strstr(ff_last_error(), "does not match the stored digest"));
    free_state(&b);
    // The control: the same edit undone loads again.
    rewrite_root_i64("step", a.meta.step);
    assert_int_equal(load(&b), FF_OK);
    assert_same(&a, &b);
    free_state(&b);
    free_state(&a);
}

static int setup(void **state) {
    (void)state;
    if (!mkdtemp(dir)) return -1;
    snprintf(ckpt, sizeof ckpt, "%s/%s", dir, FF_CKPT_FILE);
    return ff_model_init(&m, "mnist-cnn") == FF_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trip_is_exact),
        cmocka_unit_test(background_writer_saves_the_snapshot),
        cmocka_unit_test(crash_mid_write_keeps_the_previous_checkpoint),
        cmocka_unit_test(corrupted_and_truncated_are_refused),
        cmocka_unit_test(digest_covers_the_metadata),
        cmocka_unit_test(edited_step_is_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
