// IDX reader: good files (raw and gzip) load exactly; bad magic, wrong element type, wrong rank,
// zero extents, truncated or padded files, damaged gzip streams and mismatched image/label counts
// are refused with a message naming the problem. Normalisation and shuffling are deterministic.
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "fivefold/data_idx.h"

static char dir[] = "/tmp/ff_idx_XXXXXX";
static char path_buf[512];

static const char *path(const char *name) {
    snprintf(path_buf, sizeof path_buf, "%s/%s", dir, name);
    return path_buf;
}

static void put32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

// An IDX file: header for dims, then prod(dims) bytes i*7+1 (mod 256).
static size_t make_idx(uint8_t *buf, int type, int nd, const uint32_t *dims) {
    buf[0] = 0;
    buf[1] = 0;
    buf[2] = (uint8_t)type;
    buf[3] = (uint8_t)nd;
    size_t n = 1;
    for (int d = 0; d < nd; d++) {
        put32(buf + 4 + 4 * d, dims[d]);
        n *= dims[d];
    }
    for (size_t i = 0; i < n; i++) buf[4 + 4 * nd + i] = (uint8_t)(i * 7 + 1);
    return 4 + 4 * (size_t)nd + n;
}

static void write_raw(const char *p, const uint8_t *buf, size_t len) {
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, len, f), len);
    fclose(f);
}

static void write_gz(const char *p, const uint8_t *buf, size_t len) {
    gzFile f = gzopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(gzwrite(f, buf, (unsigned)len), (int)len);
    gzclose(f);
}

static uint8_t buf[4096];

static void expect_error(const char *file, int nd, ff_status code, const char *phrase) {
    uint8_t *data = (uint8_t *)1;
    int64_t dims[3];
    ff_status st = ff_idx_read(&data, dims, path(file), nd);
    printf("  %-22s -> %s: %s\n", file, ff_status_name(st), ff_last_error());
    assert_int_equal(st, code);
    assert_null(data);
    assert_non_null(strstr(ff_last_error(), phrase));
    assert_non_null(strstr(ff_last_error(), file));  // the message names the file
}

static void good_files_load_exactly(void **state) {
    (void)state;
    const uint32_t d[3] = {3, 4, 5};
    size_t len = make_idx(buf, 8, 3, d);
    write_raw(path("img"), buf, len);
    write_gz(path("img.gz"), buf, len);
    const char *names[2] = {"img", "img.gz"};
    for (int k = 0; k < 2; k++) {
        uint8_t *data;
        int64_t dims[3];
        assert_int_equal(ff_idx_read(&data, dims, path(names[k]), 3), FF_OK);
        assert_int_equal(dims[0], 3);
        assert_int_equal(dims[1], 4);
        assert_int_equal(dims[2], 5);
        assert_memory_equal(data, buf + 16, 60);
        free(data);
    }
}

static void malformed_files_are_refused(void **state) {
    (void)state;
    const uint32_t d[3] = {3, 4, 5};
    size_t len = make_idx(buf, 8, 3, d);

    buf[1] = 0x12;  // bad magic
    write_raw(path("badmagic"), buf, len);
    expect_error("badmagic", 3, FF_ERR_INPUT, "bad magic");
    buf[1] = 0;

    buf[2] = 0x0D;  // float elements
    write_raw(path("float"), buf, len);
    expect_error("float", 3, FF_ERR_INPUT, "element type 0x0d");
    buf[2] = 8;

    write_raw(path("rank"), buf, len);  // a 3-d file read as labels
    expect_error("rank", 1, FF_ERR_INPUT, "3 dimensions, expected 1");

    write_raw(path("trunc"), buf, len - 1);  // one byte short
    expect_error("trunc", 3, FF_ERR_INPUT, "truncated");
    write_gz(path("trunc.gz"), buf, len - 1);
    expect_error("trunc.gz", 3, FF_ERR_INPUT, "truncated");

    buf[len] = 9;  // a trailing byte
    write_raw(path("long"), buf, len + 1);
    expect_error("long", 3, FF_ERR_INPUT, "trailing bytes");

    write_raw(path("hdr"), buf, 10);  // cut inside the header
    expect_error("hdr", 3, FF_ERR_INPUT, "header");

    const uint32_t z[3] = {3, 0, 5};
    size_t zl = make_idx(buf, 8, 3, z);
    write_raw(path("zero"), buf, zl);
    expect_error("zero", 3, FF_ERR_INPUT, "dimension 1 is 0");

    // A gzip stream cut in the middle: zlib reports it, we refuse it.
    const uint32_t big[3] = {40, 10, 10};
    size_t bl = make_idx(buf, 8, 3, big);
    write_gz(path("cut.gz"), buf, bl);
    FILE *f = fopen(path("cut.gz"), "rb");
    uint8_t gz[8192];
    size_t gl = fread(gz, 1, sizeof gz, f);
    fclose(f);
    write_raw(path("cut.gz"), gz, gl / 2);
    uint8_t *data = NULL;
    int64_t dims[3];
    ff_status st = ff_idx_read(&data, dims, path("cut.gz"), 3);
    printf("  %-22s -> %s: %s\n", "cut.gz", ff_status_name(st), ff_last_error());
    assert_true(st == FF_ERR_IO || st == FF_ERR_INPUT);
    assert_null(data);

    // Cut inside the 8-byte trailer (CRC-32, then the length): every data byte is there, so the
    // length check passes, and only zlib's end-of-stream check can refuse it.
    write_gz(path("trailer.gz"), buf, bl);
    f = fopen(path("trailer.gz"), "rb");
    gl = fread(gz, 1, sizeof gz, f);
    fclose(f);
    for (size_t cut = 1; cut <= 7; cut += 3) {  // 1, 4 and 7 bytes of the trailer missing
        write_raw(path("trailer.gz"), gz, gl - cut);
        expect_error("trailer.gz", 3, FF_ERR_IO, "gzip stream ends early");
    }
    write_raw(path("trailer.gz"), gz, gl);  // the control: the whole file loads
    assert_int_equal(ff_idx_read(&data, dims, path("trailer.gz"), 3), FF_OK);
    assert_memory_equal(data, buf + 16, bl - 16);
    free(data);

    expect_error("missing", 3, FF_ERR_IO, "cannot open");
}

static void images_and_labels_must_agree(void **state) {
    (void)state;
    const uint32_t d[3] = {3, 2, 2}, l3[1] = {3}, l4[1] = {4};
    write_raw(path("i3"), buf, make_idx(buf, 8, 3, d));
    uint8_t lb[16] = {0, 0, 8, 1, 0, 0, 0, 3, 1, 9, 4};
    (void)l3;
    write_raw(path("l3"), lb, 11);
    make_idx(buf, 8, 1, l4);
    write_raw(path("l4"), buf, 12);
    ff_dataset ds;
    char i3[512];
    snprintf(i3, sizeof i3, "%s", path("i3"));  // path() reuses one buffer
    assert_int_equal(ff_dataset_load(&ds, i3, path("l3")), FF_OK);
    assert_int_equal(ds.n, 3);
    assert_int_equal(ds.rows, 2);
    assert_int_equal(ds.classes, 10);
    assert_int_equal(ds.labels[1], 9);
    ff_dataset_free(&ds);
    assert_int_equal(ff_dataset_load(&ds, i3, path("l4")), FF_ERR_INPUT);
    printf("  count mismatch -> %s\n", ff_last_error());
    assert_non_null(strstr(ff_last_error(), "expected equal counts"));
    assert_int_equal(ff_dataset_load_dir(&ds, dir, "train", 0), FF_ERR_IO);
    assert_non_null(strstr(ff_last_error(), "train-images-idx3-ubyte"));
}

static void normalisation_is_the_documented_formula(void **state) {
    (void)state;
    float t[256];
    ff_idx_norm_table(t);
    for (int v = 0; v < 256; v++) {
        float want = ((float)v / 255.0f - 0.2860f) / 0.3530f;
        assert_memory_equal(&t[v], &want, sizeof want);
    }
    assert_true(t[0] < -0.81f && t[0] > -0.82f);    // -0.2860/0.3530 = -0.8102
    assert_true(t[255] > 2.02f && t[255] < 2.03f);  // 0.7140/0.3530 = 2.0227
    // batch gather follows the order and normalises every pixel
    ff_dataset ds = {0};
    uint8_t px[3 * 4] = {0, 1, 2, 3, 10, 11, 12, 13, 255, 254, 253, 252};
    int32_t lb[3] = {4, 5, 6};
    ds.pixels = px;
    ds.labels = lb;
    ds.n = 3;
    ds.rows = 2;
    ds.cols = 2;
    int64_t order[3] = {2, 0, 1};
    float out[8];
    int32_t labels[2];
    ff_dataset_batch(out, labels, &ds, order, 1, 2);  // samples 0 and 1
    assert_int_equal(labels[0], 4);
    assert_int_equal(labels[1], 5);
    assert_true(out[0] == t[0] && out[3] == t[3] && out[4] == t[10] && out[7] == t[13]);
    float all[12];
    ff_dataset_normalize(all, &ds);
    assert_true(all[8] == t[255] && all[11] == t[252]);
    // The batch path computes the formula in vectorised form: every one of the 256 values must
    // equal the table's bits (an image of 16x16 = every byte value, long enough to vectorise).
    uint8_t every[256];
    int32_t one_label = 0;
    for (int v = 0; v < 256; v++) every[v] = (uint8_t)(255 - v);
    ff_dataset big = {.pixels = every, .labels = &one_label, .n = 1, .rows = 16, .cols = 16};
    int64_t o1 = 0;
    float got[256];
    ff_dataset_batch(got, NULL, &big, &o1, 0, 1);
    for (int v = 0; v < 256; v++) assert_memory_equal(&got[v], &t[255 - v], sizeof(float));
}

static void shuffle_is_a_deterministic_permutation(void **state) {
    (void)state;
    const int64_t n = 1000;
    int64_t *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    char *seen = calloc(n, 1);
    ff_shuffle_order(a, n, 7, 0);
    for (int64_t i = 0; i < n; i++) {
        assert_true(a[i] >= 0 && a[i] < n && !seen[a[i]]);
        seen[a[i]] = 1;
    }
    ff_shuffle_order(b, n, 7, 0);
    assert_memory_equal(a, b, n * sizeof *a);
    ff_shuffle_order(b, n, 7, 1);  // another epoch: another order
    assert_memory_not_equal(a, b, n * sizeof *a);
    ff_shuffle_order(b, n, 8, 0);  // another seed: another order
    assert_memory_not_equal(a, b, n * sizeof *a);
    int64_t fixed = 0;
    for (int64_t i = 0; i < n; i++) fixed += a[i] == i;
    assert_true(fixed < 10);  // a real shuffle (expected about 1 fixed point)
    free(a);
    free(b);
    free(seen);
}

// Fisher-Yates draws j from [0, i] and so can leave an element in place (a random permutation of
// 10 has a fixed point with probability about 1 - 1/e = 63 %); Sattolo's variant, j from [0, i),
// makes one cycle and never does. Over 100 seeds, some order must have a fixed point, and every
// order must be a permutation.
static void shuffle_can_leave_an_element_in_place(void **state) {
    (void)state;
    enum { N = 10 };
    int with_fixed_point = 0;
    for (uint64_t seed = 0; seed < 100; seed++) {
        int64_t o[N];
        int seen[N] = {0};
        ff_shuffle_order(o, N, seed, 0);
        int fixed = 0;
        for (int i = 0; i < N; i++) {
            assert_true(o[i] >= 0 && o[i] < N);
            assert_int_equal(seen[o[i]], 0);
            seen[o[i]] = 1;
            fixed += o[i] == i;
        }
        with_fixed_point += fixed > 0;
    }
    printf("  %d of 100 orders of 10 have a fixed point (about 63 expected)\n", with_fixed_point);
    assert_true(with_fixed_point >= 30 && with_fixed_point <= 90);
}

static int setup(void **state) {
    (void)state;
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

// Issue 16's synthetic sets (synthetic.h): features of mean 0 and variance 1 in (-3.47, 3.47),
// recomputed identically by every batch; labels of a teacher that uses many classes; seeds and
// splits give other data; bad sizes are refused naming the value.
static void synthetic_sets_are_seeded_teacher_data(void **state) {
    (void)state;
    ff_dataset a, b, t;
    assert_int_equal(ff_dataset_synthetic(&a, 1, 0, 2000, 256, 32), FF_OK);
    assert_true(a.synthetic && !a.pixels && a.n == 2000 && a.rows == 1 && a.cols == 256 && a.classes == 32);
    float *x = malloc(sizeof(float) * 2000 * 256);
    assert_non_null(x);
    ff_dataset_normalize(x, &a);
    double sum = 0, sq = 0;
    for (int64_t k = 0; k < 2000 * 256; k++) {
        assert_true(x[k] > -3.47f && x[k] < 3.47f);
        sum += x[k];
        sq += (double)x[k] * x[k];
    }
    const double mean = sum / (2000.0 * 256), var = sq / (2000.0 * 256) - mean * mean;
    printf("synthetic features: mean %.4f variance %.4f\n", mean, var);
    assert_true(fabs(mean) < 0.01 && fabs(var - 1.0) < 0.02);
    // a batch recomputes the same values as the whole-set pass
    int64_t order[3] = {1999, 0, 77};
    float xb[3 * 256];
    int32_t lb[3];
    ff_dataset_batch(xb, lb, &a, order, 0, 3);
    assert_memory_equal(xb, x + 1999 * 256, 256 * sizeof(float));
    assert_memory_equal(xb + 2 * 256, x + 77 * 256, 256 * sizeof(float));
    assert_int_equal(lb[0], a.labels[1999]);
    // the label is the argmax of the teacher's logits
    for (int64_t i = 0; i < 20; i++) {
        int32_t best = 0;
        for (int64_t c = 1; c < 32; c++)
            if (ff_synth_logit(&a.synth, i, c) > ff_synth_logit(&a.synth, i, best)) best = (int32_t)c;
        assert_int_equal(a.labels[i], best);
    }
    int used[32] = {0}, distinct = 0;
    for (int64_t i = 0; i < a.n; i++) used[a.labels[i]]++;
    for (int c = 0; c < 32; c++) distinct += used[c] > 0;
    printf("synthetic labels: %d of 32 classes used\n", distinct);
    assert_true(distinct >= 24);
    // same seed: same labels; another seed or the test split: other data
    assert_int_equal(ff_dataset_synthetic(&b, 1, 0, 2000, 256, 32), FF_OK);
    assert_memory_equal(a.labels, b.labels, 2000 * sizeof(int32_t));
    ff_dataset_free(&b);
    assert_int_equal(ff_dataset_synthetic(&b, 2, 0, 2000, 256, 32), FF_OK);
    assert_true(memcmp(a.labels, b.labels, 2000 * sizeof(int32_t)) != 0);
    assert_int_equal(ff_dataset_synthetic(&t, 1, 1, 4, 256, 32), FF_OK);
    assert_true(ff_synth_x(&t.synth, 0, 0) != ff_synth_x(&a.synth, 0, 0));
    ff_dataset_free(&b);
    ff_dataset_free(&t);
    // refused, naming the value
    assert_int_equal(ff_dataset_synthetic(&b, 1, 0, 0, 256, 32), FF_ERR_INPUT);
    assert_non_null(strstr(ff_last_error(), "0 samples"));
    assert_int_equal(ff_dataset_synthetic(&b, 1, 0, 10, 256, 1), FF_ERR_INPUT);
    assert_non_null(strstr(ff_last_error(), "1 classes"));
    assert_int_equal(ff_dataset_synthetic(&b, 1, 2, 10, 256, 32), FF_ERR_INPUT);
    ff_dataset_free(&a);
    free(x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(good_files_load_exactly),
        cmocka_unit_test(malformed_files_are_refused),
        cmocka_unit_test(images_and_labels_must_agree),
        cmocka_unit_test(normalisation_is_the_documented_formula),
        cmocka_unit_test(shuffle_is_a_deterministic_permutation),
        cmocka_unit_test(shuffle_can_leave_an_element_in_place),
        cmocka_unit_test(synthetic_sets_are_seeded_teacher_data),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
