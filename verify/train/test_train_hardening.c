// Hardening of the training library against bad files and values (issue 12, items 1 and 4):
//   - a test set whose images are not the model's size, or whose labels reach past its classes,
//     is refused by name (it used to overflow the heap in ff_train_evaluate, or count a label of
//     200 as a wrong prediction);
//   - epochs x steps per epoch and every trainer buffer size are overflow-checked;
//   - lr / momentum / weight decay must be finite and in range (messages name the flag);
//   - a checkpoint with a valid digest but a field out of range (step_in_epoch -40, epoch -4,
//     step -1000, ...) or a NaN/Inf weight or momentum is refused, and its position must fit the
//     run that resumes it;
//   - the checkpoint directory is checked before training and stale temporary files of crashed
//     writes are removed;
//   - the trainer counts the images it actually trained on (a short last batch counts its size);
//   - --overlap's default (auto) lets steps overlap only where its rule says, and the default bucket
//     size follows the mode (train.h).
// Every bad case is written by the test itself into a temporary folder, next to a good control
// that must pass, so each check is shown able to fail and able to pass.
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
#include <math.h>

#include "fivefold/checkpoint.h"
#include "fivefold/data_idx.h"
#include "fivefold/model.h"
#include "fivefold/train.h"
#include "fivefold/weights.h"

static char dir[] = "/tmp/ff_harden_XXXXXX";
static ff_model m;

static void has(const char *needle) {
    if (!strstr(ff_last_error(), needle)) fail_msg("message '%s' lacks '%s'", ff_last_error(), needle);
}

static void put32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

// Writes SUB/<split>-images-idx3-ubyte (n images rows x cols, pixels i*7 mod 256) and
// SUB/<split>-labels-idx1-ubyte (label i mod 10, except `bad` at index bad_at when bad_at >= 0).
static void write_split(const char *sub, const char *split, uint32_t n, uint32_t rows, uint32_t cols, int bad,
                        int64_t bad_at) {
    char p[600];
    snprintf(p, sizeof p, "%s/%s", dir, sub);
    mkdir(p, 0777);
    size_t len = 16 + (size_t)n * rows * cols;
    uint8_t *b = malloc(len);
    assert_non_null(b);
    b[0] = b[1] = 0;
    b[2] = 8;
    b[3] = 3;
    put32(b + 4, n);
    put32(b + 8, rows);
    put32(b + 12, cols);
    for (size_t i = 16; i < len; i++) b[i] = (uint8_t)(i * 7);
    snprintf(p, sizeof p, "%s/%s/%s-images-idx3-ubyte", dir, sub, split);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, len, f), len);
    fclose(f);
    b[3] = 1;
    for (uint32_t i = 0; i < n; i++) b[8 + i] = (uint8_t)(i % 10);
    if (bad_at >= 0) b[8 + bad_at] = (uint8_t)bad;
    snprintf(p, sizeof p, "%s/%s/%s-labels-idx1-ubyte", dir, sub, split);
    f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, 8 + (size_t)n, f), 8 + (size_t)n);
    fclose(f);
    free(b);
}

static const char *sub_dir(const char *sub) {
    static char p[600];
    snprintf(p, sizeof p, "%s/%s", dir, sub);
    return p;
}

typedef struct {
    ff_weights w;
    ff_trainer *t;
} trainer_t;

static void make_trainer(trainer_t *tr, int64_t batch) {
    assert_int_equal(ff_weights_alloc(&tr->w, &m), FF_OK);
    ff_weights_generate(&tr->w, &m, 1);
    ff_train_options o;
    ff_train_options_default(&o);
    o.batch = batch;
    o.microbatch = 4;
    assert_int_equal(ff_trainer_create(&tr->t, &m, &tr->w, &o, NULL), FF_OK);
}

static void free_trainer(trainer_t *tr) {
    ff_trainer_destroy(tr->t);
    ff_weights_free(&tr->w);
}

static void test_set_of_another_image_size_is_refused(void **state) {
    (void)state;
    write_split("shape", "train", 16, 28, 28, 0, -1);
    write_split("shape", "t10k", 16, 64, 64, 0, -1);
    ff_dataset train, test;
    assert_int_equal(ff_dataset_load_dir(&train, sub_dir("shape"), "train", 0), FF_OK);
    assert_int_equal(ff_dataset_load_dir(&test, sub_dir("shape"), "t10k", 0), FF_OK);
    assert_int_equal(ff_train_check_dataset(&m, &train), FF_OK);  // control: the good set passes
    assert_int_equal(ff_train_check_dataset(&m, &test), FF_ERR_INPUT);
    printf("  64x64 test set: %s\n", ff_last_error());
    has("t10k-images-idx3-ubyte");
    has("64x64");
    has("1x28x28");

    trainer_t tr;
    make_trainer(&tr, 8);
    int64_t correct = -1;
    // Before the fix this normalised 64x64 images into 28x28 slots: a heap-buffer overflow.
    assert_int_equal(ff_train_evaluate(tr.t, &correct, &test, 16), FF_ERR_INPUT);
    has("64x64");
    assert_int_equal(correct, 0);
    int64_t idx[4] = {0, 1, 2, 3};
    double loss;
    assert_int_equal(ff_train_step(tr.t, &loss, &test, idx, 4), FF_ERR_INPUT);
    has("t10k-images-idx3-ubyte");
    assert_int_equal(ff_train_evaluate(tr.t, &correct, &train, 16), FF_OK);  // control
    assert_true(correct >= 0 && correct <= 16);
    free_trainer(&tr);
    ff_dataset_free(&train);
    ff_dataset_free(&test);
}

static void label_past_the_classes_is_refused(void **state) {
    (void)state;
    write_split("label", "t10k", 20, 28, 28, 200, 5);
    ff_dataset test;
    assert_int_equal(ff_dataset_load_dir(&test, sub_dir("label"), "t10k", 0), FF_OK);
    assert_int_equal(ff_train_check_dataset(&m, &test), FF_ERR_INPUT);
    printf("  label 200: %s\n", ff_last_error());
    has("t10k-labels-idx1-ubyte");
    has("label 200 of sample 5");
    has("0..9");
    trainer_t tr;
    make_trainer(&tr, 8);
    int64_t correct = -1;
    // Before the fix the 200 was compared with an argmax in 0..9 and counted as a miss.
    assert_int_equal(ff_train_evaluate(tr.t, &correct, &test, 20), FF_ERR_INPUT);
    has("label 200");
    // A training batch holding that sample is refused; one without it trains.
    int64_t with[4] = {4, 5, 6, 7}, without[4] = {0, 1, 2, 3};
    double loss;
    assert_int_equal(ff_train_step(tr.t, &loss, &test, with, 4), FF_ERR_INPUT);
    has("label 200 of sample 5");
    assert_int_equal(ff_train_step(tr.t, &loss, &test, without, 4), FF_OK);
    ff_dataset_free(&test);
    // --test-limit / --train-limit 5 keeps samples 0..4 only: the bad label is not part of the set.
    assert_int_equal(ff_dataset_load_dir(&test, sub_dir("label"), "t10k", 5), FF_OK);
    assert_int_equal(test.classes, 5);
    assert_int_equal(ff_train_check_dataset(&m, &test), FF_OK);
    assert_int_equal(ff_train_evaluate(tr.t, &correct, &test, 5), FF_OK);
    ff_dataset_free(&test);
    assert_int_equal(ff_dataset_load_dir(&test, sub_dir("label"), "t10k", -1), FF_ERR_INPUT);
    free_trainer(&tr);
}

static void epochs_times_steps_overflow_is_refused(void **state) {
    (void)state;
    ff_train_plan p;
    assert_int_equal(ff_train_plan_make(&p, 60000, 64, 3, 0), FF_OK);
    assert_int_equal(p.steps_per_epoch, 938);  // ceil(60000 / 64): the last batch holds 32
    assert_int_equal(p.total, 3 * 938);
    assert_int_equal(ff_train_plan_make(&p, 60000, 64, 3, 2), FF_OK);
    assert_int_equal(p.total, 2);
    assert_int_equal(ff_train_plan_make(&p, 60000, 64, 1, 5000), FF_OK);
    assert_int_equal(p.total, 938);  // --steps beyond the epochs: the epochs end it
    // `train --epochs 9223372036854775807 --steps 2` wrapped to a negative total: "trained 0 steps".
    assert_int_equal(ff_train_plan_make(&p, 60000, 64, INT64_MAX, 2), FF_ERR_INPUT);
    printf("  %s\n", ff_last_error());
    has("--epochs 9223372036854775807");
    has("938 steps per epoch");
    const int64_t most = INT64_MAX / 938;
    char want[64];
    snprintf(want, sizeof want, "--epochs <= %lld", (long long)most);
    has(want);
    assert_int_equal(ff_train_plan_make(&p, 60000, 64, most, 0), FF_OK);  // the boundary fits
    assert_int_equal(p.total, most * 938);
    assert_int_equal(ff_train_plan_make(&p, 60000, 64, most + 1, 0), FF_ERR_INPUT);
    assert_int_equal(ff_train_plan_make(&p, INT64_MAX, 1, 2, 0), FF_ERR_INPUT);
    assert_int_equal(ff_train_plan_make(&p, INT64_MAX, INT64_MAX, 1, 0), FF_OK);  // no (n + B - 1) overflow
    assert_int_equal(p.steps_per_epoch, 1);
    assert_int_equal(ff_train_plan_make(&p, 0, 64, 1, 0), FF_ERR_INPUT);
    assert_int_equal(ff_train_plan_make(&p, 100, 64, 0, 0), FF_ERR_INPUT);
    assert_int_equal(ff_train_plan_make(&p, 100, 64, 1, -1), FF_ERR_INPUT);
}

static ff_status create_with(ff_train_options o) {
    ff_weights w;
    assert_int_equal(ff_weights_alloc(&w, &m), FF_OK);
    ff_trainer *t = NULL;
    ff_status st = ff_trainer_create(&t, &m, &w, &o, NULL);
    ff_trainer_destroy(t);
    ff_weights_free(&w);
    return st;
}

static void options_out_of_range_are_refused(void **state) {
    (void)state;
    const struct {
        float lr, momentum, wd;
        const char *message;  // NULL: accepted
    } cases[] = {
        {0.01f, 0.9f, 0.0f, NULL},
        {FF_TRAIN_LR_MAX, 0.0f, 0.999f, NULL},
        {INFINITY, 0.9f, 0.0f, "--lr inf"},
        {NAN, 0.9f, 0.0f, "--lr nan"},
        {1e30f, 0.9f, 0.0f, "--lr 1e+30"},
        {nextafterf(FF_TRAIN_LR_MAX, 100.0f), 0.9f, 0.0f, "--lr 10"},
        {0.0f, 0.9f, 0.0f, "--lr 0"},
        {-0.01f, 0.9f, 0.0f, "--lr -0.01"},
        {0.01f, 5.0f, 0.0f, "--momentum 5"},
        {0.01f, 1.0f, 0.0f, "--momentum 1"},
        {0.01f, -INFINITY, 0.0f, "--momentum -inf"},
        {0.01f, NAN, 0.0f, "--momentum nan"},
        {0.01f, 0.9f, 1.0f, "--weight-decay 1"},
        {0.01f, 0.9f, INFINITY, "--weight-decay inf"},
        {0.01f, 0.9f, -1e-3f, "--weight-decay -0.001"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ff_train_options o;
        ff_train_options_default(&o);
        o.lr = cases[i].lr;
        o.momentum = cases[i].momentum;
        o.weight_decay = cases[i].wd;
        ff_status st = create_with(o);
        if (!cases[i].message) {
            assert_int_equal(st, FF_OK);
            continue;
        }
        if (st != FF_ERR_INPUT) fail_msg("case %zu (%s) accepted", i, cases[i].message);
        has(cases[i].message);
    }
    // Sizes: a batch whose buffers cannot exist is refused, not wrapped into a small allocation.
    ff_train_options o;
    ff_train_options_default(&o);
    o.overlap_steps = (ff_overlap_steps)7;  // not one of train.h's values
    assert_int_equal(ff_train_options_check(&o), FF_ERR_INPUT);
    has("overlap_steps 7 (--overlap)");
    o.overlap_steps = FF_OVERLAP_STEPS_ON;
    assert_int_equal(ff_train_options_check(&o), FF_OK);
    o.batch = o.microbatch = INT64_MAX;
    assert_int_equal(create_with(o), FF_ERR_INPUT);
    printf("  %s\n", ff_last_error());
    has("overflows");
    o.microbatch = INT64_MAX / 2;  // (B + M - 1) / M used to overflow here
    assert_int_equal(create_with(o), FF_ERR_INPUT);
    o.batch = INT64_MAX;
    o.microbatch = 1;
    assert_int_equal(create_with(o), FF_ERR_INPUT);
    has("micro-batches");
}

// --overlap auto (the default) overlaps steps from FF_TRAIN_STEPS_AUTO_RANKS ranks on for models of
// FF_TRAIN_STEPS_AUTO_FLOATS parameters or more; on and off never do, steps always (unless off).
static void overlap_steps_follow_the_auto_rule(void **state) {
    (void)state;
    ff_train_options o;
    ff_train_options_default(&o);
    assert_int_equal(o.overlap_steps, FF_OVERLAP_STEPS_AUTO);
    assert_true(o.overlap);
    const int64_t mlp = 120 * 1000 * 1000, small = 500 * 1000, edge = FF_TRAIN_STEPS_AUTO_FLOATS;
    assert_false(ff_train_overlaps_steps(&o, 2, mlp));  // two ranks: the step's graph pays more
    assert_true(ff_train_overlaps_steps(&o, 3, mlp));
    assert_true(ff_train_overlaps_steps(&o, 4, mlp));
    assert_false(ff_train_overlaps_steps(&o, 4, small));  // mnist-cnn, mlp-small: bound by launches
    assert_true(ff_train_overlaps_steps(&o, FF_TRAIN_STEPS_AUTO_RANKS, edge));
    assert_false(ff_train_overlaps_steps(&o, FF_TRAIN_STEPS_AUTO_RANKS, edge - 1));
    assert_false(ff_train_overlaps_steps(&o, FF_TRAIN_STEPS_AUTO_RANKS - 1, edge));
    o.overlap_steps = FF_OVERLAP_STEPS_OFF;  // --overlap on
    assert_false(ff_train_overlaps_steps(&o, 4, mlp));
    o.overlap_steps = FF_OVERLAP_STEPS_ON;  // --overlap steps
    assert_true(ff_train_overlaps_steps(&o, 2, small));
    o.overlap = false;  // --overlap off: nothing overlaps
    o.overlap_steps = FF_OVERLAP_STEPS_AUTO;
    assert_false(ff_train_overlaps_steps(&o, 4, mlp));
}

// The default bucket: 16 MiB, or in the direct mode 2 MiB (the MLP: one bucket per layer) or a
// quarter of the model where that is less (mnist-cnn, mlp-small: four buckets or so).
static void default_buckets_follow_the_mode(void **state) {
    (void)state;
    const int64_t mlp = 120 * 1000 * 1000, small = 1000 * 1000 + 2;
    assert_int_equal(ff_train_default_bucket_floats(FF_MODE_HYBRID, mlp), FF_TRAIN_BUCKET_FLOATS);
    assert_int_equal(ff_train_default_bucket_floats(FF_MODE_MPI, small), FF_TRAIN_BUCKET_FLOATS);
    assert_int_equal(ff_train_default_bucket_floats(FF_MODE_DIRECT, mlp), FF_TRAIN_DIRECT_BUCKET_FLOATS);
    assert_int_equal(ff_train_default_bucket_floats(FF_MODE_DIRECT, small), 250001);  // ceil(small / 4)
    assert_int_equal(ff_train_default_bucket_floats(FF_MODE_DIRECT, 4 * FF_TRAIN_DIRECT_BUCKET_FLOATS + 1),
                     FF_TRAIN_DIRECT_BUCKET_FLOATS);
    assert_true(FF_TRAIN_DIRECT_BUCKET_FLOATS <= 1024 * 512 + 512);  // the MLP's top layer is a bucket alone
}

static void samples_count_a_short_last_batch_exactly(void **state) {
    (void)state;
    trainer_t tr;
    make_trainer(&tr, 8);
    write_split("samples", "train", 11, 28, 28, 0, -1);
    ff_dataset ds;
    assert_int_equal(ff_dataset_load_dir(&ds, sub_dir("samples"), "train", 0), FF_OK);
    int64_t idx[11];
    for (int i = 0; i < 11; i++) idx[i] = i;
    double loss;
    assert_int_equal(ff_trainer_samples(tr.t), 0);
    assert_int_equal(ff_train_step(tr.t, &loss, &ds, idx, 8), FF_OK);
    assert_int_equal(ff_train_step(tr.t, &loss, &ds, idx + 8, 3), FF_OK);  // the short last batch
    assert_int_equal(ff_trainer_steps(tr.t), 2);
    assert_int_equal(ff_trainer_samples(tr.t), 11);                           // not 2 x 8
    assert_int_equal(ff_train_step(tr.t, &loss, &ds, idx, 9), FF_ERR_INPUT);  // b > B: not counted
    assert_int_equal(ff_trainer_samples(tr.t), 11);
    ff_dataset_free(&ds);
    free_trainer(&tr);
}

// ---------------------------------------------------------------- checkpoints

static char ckpt[600];

typedef struct {
    ff_weights w, mom;
    ff_ckpt_meta meta;
} ck_t;

static void make_ck(ck_t *c) {
    assert_int_equal(ff_weights_alloc(&c->w, &m), FF_OK);
    assert_int_equal(ff_weights_alloc(&c->mom, &m), FF_OK);
    ff_weights_generate(&c->w, &m, 3);
    memset(c->mom.data, 0, (size_t)c->mom.n_total * sizeof(float));
    // 2 epochs of 6 steps done, 2 steps into the third: step 14 (batch 32, train_limit 192).
    ff_ckpt_meta meta = {14, 2, 2, 1, 32, 8, 192, 0.01f, 0.9f, 0.0f, 0x1234ULL};
    c->meta = meta;
}

static void free_ck(ck_t *c) {
    ff_weights_free(&c->w);
    ff_weights_free(&c->mom);
}

// Saves c (ff_checkpoint_save computes a valid digest for whatever it is given: the same file as
// one edited by hand whose digest was then recomputed) and loads it back.
static ff_status save_and_load(const ck_t *c) {
    assert_int_equal(ff_checkpoint_save(ckpt, &m, &c->w, &c->mom, &c->meta), FF_OK);
    ck_t back;
    assert_int_equal(ff_weights_alloc(&back.w, &m), FF_OK);
    assert_int_equal(ff_weights_alloc(&back.mom, &m), FF_OK);
    ff_status st = ff_checkpoint_load(&back.w, &back.mom, &back.meta, &m, ckpt);
    free_ck(&back);
    return st;
}

static void checkpoint_fields_out_of_range_are_refused(void **state) {
    (void)state;
    ck_t c;
    make_ck(&c);
    assert_int_equal(save_and_load(&c), FF_OK);  // control
    const struct {
        int field;  // which field to set
        int64_t value;
        const char *message;
    } cases[] = {
        {0, -40, "step_in_epoch -40"},
        {1, -4, "epoch -4"},
        {2, -1000, "step -1000"},
        {2, 3, "step 3 with epoch 2"},
        {3, 0, "batch 0"},
        {4, 33, "microbatch 33"},
        {4, 0, "microbatch 0"},
        {5, -1, "train_limit -1"},
        {0, 6, "step_in_epoch 6, expected < 6"},
        {6, 0, "--lr inf"},
        {7, 0, "--momentum nan"},
        {8, 0, "--weight-decay 1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ck_t bad = c;  // shares the weight buffers; only meta changes
        switch (cases[i].field) {
            case 0: bad.meta.step_in_epoch = cases[i].value; break;
            case 1: bad.meta.epoch = cases[i].value; break;
            case 2: bad.meta.step = cases[i].value; break;
            case 3: bad.meta.batch = cases[i].value; break;
            case 4: bad.meta.microbatch = cases[i].value; break;
            case 5: bad.meta.train_limit = cases[i].value; break;
            case 6: bad.meta.lr = INFINITY; break;
            case 7: bad.meta.momentum = NAN; break;
            case 8: bad.meta.weight_decay = 1.0f; break;
        }
        ff_status st = save_and_load(&bad);
        if (st != FF_ERR_INPUT) fail_msg("case %zu (%s): %s", i, cases[i].message, ff_status_name(st));
        if (i == 0) printf("  %s\n", ff_last_error());
        has(cases[i].message);
        has(ckpt);
        assert_int_equal(ff_checkpoint_check_meta(&bad.meta, "x.h5"), FF_ERR_INPUT);
        has(cases[i].message);
    }
    assert_int_equal(ff_checkpoint_check_meta(&c.meta, "x.h5"), FF_OK);
    free_ck(&c);
}

static void checkpoint_nan_or_inf_values_are_refused(void **state) {
    (void)state;
    ck_t c;
    make_ck(&c);
    c.w.data[3] = NAN;  // conv1/w[3]
    assert_int_equal(save_and_load(&c), FF_ERR_INPUT);
    printf("  %s\n", ff_last_error());
    has("weights/conv1/w[3] is nan");
    c.w.data[3] = 0.5f;
    c.mom.data[c.mom.n_total - 1] = -INFINITY;  // the last bias of the last layer
    assert_int_equal(save_and_load(&c), FF_ERR_INPUT);
    printf("  %s\n", ff_last_error());
    has("momentum/");
    has("is -inf");
    c.mom.data[c.mom.n_total - 1] = 0.0f;
    assert_int_equal(save_and_load(&c), FF_OK);  // control
    free_ck(&c);
}

static void checkpoint_position_must_fit_the_run(void **state) {
    (void)state;
    ck_t c;
    make_ck(&c);
    assert_int_equal(ff_checkpoint_check_run(&c.meta, 6, "c.h5"), FF_OK);  // 2 x 6 + 2 = 14
    assert_int_equal(ff_checkpoint_check_run(&c.meta, 5, "c.h5"), FF_ERR_INPUT);
    printf("  %s\n", ff_last_error());
    has("step 14, but epoch 2 x 5 steps per epoch + step_in_epoch 2 = 12");
    assert_int_equal(ff_checkpoint_check_run(&c.meta, 2, "c.h5"), FF_ERR_INPUT);  // s = 2 indexes past 2 steps
    has("step_in_epoch 2, expected 0..1");
    c.meta.step_in_epoch = -40;
    c.meta.step = 2 * 6 - 40;  // consistent sum, still outside order[]
    assert_int_equal(ff_checkpoint_check_run(&c.meta, 6, "c.h5"), FF_ERR_INPUT);
    c.meta.train_limit = 0;
    c.meta.step_in_epoch = 1;
    c.meta.epoch = INT64_MAX / 4;
    c.meta.step = INT64_MAX;
    assert_int_equal(ff_checkpoint_check_run(&c.meta, 6, "c.h5"), FF_ERR_INPUT);
    has("overflows");
    free_ck(&c);
}

static int count_files(const char *d, const char *prefix) {
    char cmd[1600];
    snprintf(cmd, sizeof cmd, "ls -a '%s' | grep -c '^%s'", d, prefix);
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p) {
        if (fscanf(p, "%d", &n) != 1) n = -1;
        pclose(p);
    }
    return n;
}

static void checkpoint_dir_is_checked_and_stale_tmps_removed(void **state) {
    (void)state;
    int removed = -1;
    char d[700], file[700], p[800];
    // Missing: created.
    snprintf(d, sizeof d, "%s/ckdir", dir);
    assert_int_equal(ff_checkpoint_dir_prepare(&removed, d), FF_OK);
    assert_int_equal(removed, 0);
    struct stat sb;
    assert_int_equal(stat(d, &sb), 0);
    assert_true(S_ISDIR(sb.st_mode));
    // A regular file: refused, naming the flag.
    snprintf(file, sizeof file, "%s/plainfile", dir);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(ff_checkpoint_dir_prepare(&removed, file), FF_ERR_INPUT);
    printf("  %s\n", ff_last_error());
    has("--checkpoint-dir");
    has("not a directory");
    snprintf(p, sizeof p, "%s/sub", file);  // below a regular file: cannot be examined or created
    assert_true(ff_checkpoint_dir_prepare(&removed, p) != FF_OK);

    // A write that crashed (the test hook kills the writer mid-file) leaves checkpoint.h5.tmp.<pid>.
    snprintf(p, sizeof p, "%s/%s", d, FF_CKPT_FILE);
    ck_t c;
    make_ck(&c);
    assert_int_equal(ff_checkpoint_save(p, &m, &c.w, &c.mom, &c.meta), FF_OK);
    fflush(stdout);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv("FF_TEST_CRASH_IN_CHECKPOINT_WRITE", "1", 1);
        ff_checkpoint_save(p, &m, &c.w, &c.mom, &c.meta);
        _exit(0);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    // Next to it: the temporary file of a live writer (our parent) and names that only look alike.
    const char *keep[] = {"checkpoint.h5.tmp.%ld", "checkpoint.h5.tmp.12x", "checkpoint.h5.tmp."};
    for (int k = 0; k < 3; k++) {
        char name[100], q[900];
        snprintf(name, sizeof name, keep[k], (long)getppid());
        snprintf(q, sizeof q, "%s/%s", d, name);
        f = fopen(q, "w");
        assert_non_null(f);
        fclose(f);
    }
    assert_int_equal(count_files(d, "checkpoint.h5.tmp."), 4);
    assert_int_equal(ff_checkpoint_dir_prepare(&removed, d), FF_OK);
    assert_int_equal(removed, 1);  // only the crashed writer's
    assert_int_equal(count_files(d, "checkpoint.h5.tmp."), 3);
    char crashed[900];
    snprintf(crashed, sizeof crashed, "%s/checkpoint.h5.tmp.%ld", d, (long)pid);
    assert_int_equal(access(crashed, F_OK), -1);
    ck_t back;
    assert_int_equal(ff_weights_alloc(&back.w, &m), FF_OK);
    assert_int_equal(ff_weights_alloc(&back.mom, &m), FF_OK);
    assert_int_equal(ff_checkpoint_load(&back.w, &back.mom, &back.meta, &m, p), FF_OK);  // untouched
    assert_int_equal(ff_checkpoint_dir_prepare(&removed, d), FF_OK);
    assert_int_equal(removed, 0);
    free_ck(&back);
    free_ck(&c);
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
        cmocka_unit_test(test_set_of_another_image_size_is_refused),
        cmocka_unit_test(label_past_the_classes_is_refused),
        cmocka_unit_test(epochs_times_steps_overflow_is_refused),
        cmocka_unit_test(options_out_of_range_are_refused),
        cmocka_unit_test(samples_count_a_short_last_batch_exactly),
        cmocka_unit_test(overlap_steps_follow_the_auto_rule),
        cmocka_unit_test(default_buckets_follow_the_mode),
        cmocka_unit_test(checkpoint_fields_out_of_range_are_refused),
        cmocka_unit_test(checkpoint_nan_or_inf_values_are_refused),
        cmocka_unit_test(checkpoint_position_must_fit_the_run),
        cmocka_unit_test(checkpoint_dir_is_checked_and_stale_tmps_removed),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
