// The deterministic generator and HDF5 weight files: reproducible, round-trips bit-exactly, and
// every malformed file is refused with a message naming the dataset and the expected shape; each
// tensor's recorded digest is checked (a flipped bit is refused), NaN/Inf are refused.
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <hdf5.h>

#include "fivefold/digest.h"
#include "fivefold/h5io.h"
#include "fivefold/rng.h"
#include "fivefold/weights.h"

static char tmpdir[] = "/tmp/ff_weights_XXXXXX";

static void generator_is_reproducible_and_seeded(void **state) {
    (void)state;
    ff_model m;
    assert_int_equal(ff_model_init(&m, "mnist-cnn"), FF_OK);
    ff_weights a, b;
    assert_int_equal(ff_weights_alloc(&a, &m), FF_OK);
    assert_int_equal(ff_weights_alloc(&b, &m), FF_OK);
    ff_weights_generate(&a, &m, 7);
    ff_weights_generate(&b, &m, 7);
    assert_int_equal(ff_weights_digest(&a), ff_weights_digest(&b));
    ff_weights_generate(&b, &m, 8);
    assert_true(ff_weights_digest(&a) != ff_weights_digest(&b));
    // Values lie in [-scale, scale) and are not degenerate.
    const ff_layer *fc1 = &m.layers[ff_model_find_layer(&m, "fc1")];
    float s = ff_weight_scale(fc1);
    assert_true(fabsf(s - sqrtf(6.0f / 9216.0f)) < 1e-7f);
    double mean = 0;
    float *w = a.w[ff_model_find_layer(&m, "fc1")];
    for (int64_t i = 0; i < fc1->n_weight; i++) {
        assert_true(w[i] >= -s && w[i] < s);
        mean += w[i];
    }
    mean /= (double)fc1->n_weight;
    assert_true(fabs(mean) < 0.01 * s);
    ff_weights_free(&a);
    ff_weights_free(&b);
}

static void generator_matches_its_specification(void **state) {
    (void)state;
    // rng.h written out by hand for one element: key = mix(seed ^ mix(id + G)),
    // bits = mix(key + (i+1) G), value = (2 * (bits >> 40) * 2^-24 - 1) * scale.
    const uint64_t G = 0x9E3779B97F4A7C15ULL;
    uint64_t seed = 42, id = 3, i = 5;
    uint64_t key = ff_mix64(seed ^ ff_mix64(id + G));
    uint64_t bits = ff_mix64(key + (i + 1) * G);
    float want = (2.0f * ((float)(bits >> 40) / 16777216.0f) - 1.0f) * 0.5f;
    float got[6];
    ff_rng_fill(got, 6, seed, id, 0.5f);
    assert_memory_equal(&got[5], &want, sizeof want);
    // splitmix64 finaliser reference: mix(0x9E3779B97F4A7C15) from the published splitmix64
    // sequence seeded with 0 (first output 0xe220a8397b1dcdaf).
    assert_int_equal(ff_mix64(G), 0xe220a8397b1dcdafULL);
    // Image i of a generated input does not depend on the batch size.
    ff_model m;
    ff_model_init(&m, "mnist-cnn");
    float x1[2 * 784], x2[784];
    ff_input_generate(x1, &m, 2, 9);
    ff_input_generate(x2, &m, 1, 9);
    assert_memory_equal(x1, x2, sizeof x2);
}

static void h5_round_trip_is_bit_exact(void **state) {
    (void)state;
    ff_model m;
    ff_model_init(&m, "mnist-cnn");
    ff_weights a, b;
    ff_weights_alloc(&a, &m);
    ff_weights_alloc(&b, &m);
    ff_weights_generate(&a, &m, 3);
    char path[256];
    snprintf(path, sizeof path, "%s/w.h5", tmpdir);
    assert_int_equal(ff_weights_save_h5(&a, &m, path), FF_OK);
    assert_int_equal(ff_weights_load_h5(&b, &m, path), FF_OK);
    assert_memory_equal(a.data, b.data, (size_t)a.n_total * sizeof(float));
    // The same file is the wrong model for alexnet: refused, naming the dataset.
    ff_model ax;
    ff_model_init(&ax, "alexnet");
    ff_weights c;
    ff_weights_alloc(&c, &ax);
    assert_int_equal(ff_weights_load_h5(&c, &ax, path), FF_ERR_INPUT);
    assert_non_null(strstr(ff_last_error(), "weights/conv1/w"));
    assert_non_null(strstr(ff_last_error(), "expected (96, 3, 11, 11)"));
    ff_weights_free(&a);
    ff_weights_free(&b);
    ff_weights_free(&c);
}

static void malformed_files_are_refused(void **state) {
    (void)state;
    ff_model m;
    ff_model_init(&m, "mnist-cnn");
    ff_weights w;
    ff_weights_alloc(&w, &m);
    char path[256];
    // Missing file.
    snprintf(path, sizeof path, "%s/missing.h5", tmpdir);
    assert_int_equal(ff_weights_load_h5(&w, &m, path), FF_ERR_IO);
    assert_non_null(strstr(ff_last_error(), "missing.h5"));
    // Not an HDF5 file.
    snprintf(path, sizeof path, "%s/text.h5", tmpdir);
    FILE *f = fopen(path, "w");
    fputs("not hdf5\n", f);
    fclose(f);
    assert_int_equal(ff_weights_load_h5(&w, &m, path), FF_ERR_INPUT);
    assert_non_null(strstr(ff_last_error(), "not an HDF5 file"));
    // A wrong extent and a wrong type.
    snprintf(path, sizeof path, "%s/bad.h5", tmpdir);
    int64_t fid;
    assert_int_equal(ff_h5_create(&fid, path), FF_OK);
    float buf[32 * 1 * 3 * 4] = {0};
    int64_t d[4] = {32, 1, 3, 4};
    assert_int_equal(ff_h5_write(fid, "weights/conv1/w", FF_H5_F32, buf, 4, d), FF_OK);
    ff_h5_close(fid);
    assert_int_equal(ff_weights_load_h5(&w, &m, path), FF_ERR_INPUT);
    assert_non_null(strstr(ff_last_error(), "has shape (32, 1, 3, 4): expected (32, 1, 3, 3)"));
    assert_int_equal(ff_h5_create(&fid, path), FF_OK);
    double dbuf[32 * 9] = {0};
    int64_t d2[4] = {32, 1, 3, 3};
    assert_int_equal(ff_h5_write(fid, "weights/conv1/w", FF_H5_F64, dbuf, 4, d2), FF_OK);
    ff_h5_close(fid);
    assert_int_equal(ff_weights_load_h5(&w, &m, path), FF_ERR_INPUT);
    assert_non_null(strstr(ff_last_error(), "expected float32"));
    // Truncated: a valid file cut in half.
    snprintf(path, sizeof path, "%s/full.h5", tmpdir);
    ff_weights_generate(&w, &m, 1);
    assert_int_equal(ff_weights_save_h5(&w, &m, path), FF_OK);
    FILE *in = fopen(path, "rb");
    fseek(in, 0, SEEK_END);
    long size = ftell(in);
    fclose(in);
    assert_int_equal(truncate(path, size / 2), 0);
    assert_true(ff_weights_load_h5(&w, &m, path) != FF_OK);
    ff_weights_free(&w);
}

// Replaces element i of float dataset `name` in place, leaving its attributes (the digest) as they were.
static void poke(const char *path, const char *name, int64_t i, float v) {
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    hid_t ds = H5Dopen2(f, name, H5P_DEFAULT);
    assert_true(ds >= 0);
    hid_t sp = H5Dget_space(ds);
    hssize_t n = H5Sget_simple_extent_npoints(sp);
    assert_true(i < n);
    float *x = malloc((size_t)n * sizeof *x);  // (n)
    assert_non_null(x);
    assert_true(H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, x) >= 0);
    x[i] = v;
    assert_true(H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, x) >= 0);
    free(x);
    H5Sclose(sp);
    H5Dclose(ds);
    H5Fclose(f);
}

static void drop_attr(const char *path, const char *name) {
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    assert_true(H5Adelete_by_name(f, name, FF_WEIGHTS_DIGEST_ATTR, H5P_DEFAULT) >= 0);
    H5Fclose(f);
}

static void digests_are_recorded_and_checked(void **state) {
    (void)state;
    ff_model m;
    ff_model_init(&m, "mnist-cnn");
    ff_weights a, b;
    assert_int_equal(ff_weights_alloc(&a, &m), FF_OK);
    assert_int_equal(ff_weights_alloc(&b, &m), FF_OK);
    ff_weights_generate(&a, &m, 5);
    char path[256], hex[17], rec[40];
    snprintf(path, sizeof path, "%s/digest.h5", tmpdir);
    assert_int_equal(ff_weights_save_h5(&a, &m, path), FF_OK);
    // Every tensor carries its own FNV-1a digest.
    int64_t f;
    assert_int_equal(ff_h5_open_read(&f, path), FF_OK);
    int fc1 = ff_model_find_layer(&m, "fc1"), conv2 = ff_model_find_layer(&m, "conv2");
    assert_int_equal(ff_h5_read_attr_str(rec, sizeof rec, f, "weights/fc1/w", FF_WEIGHTS_DIGEST_ATTR), FF_OK);
    assert_string_equal(rec, ff_digest_hex(hex, ff_digest_f32(a.w[fc1], (size_t)m.layers[fc1].n_weight)));
    assert_int_equal(ff_h5_read_attr_str(rec, sizeof rec, f, "weights/conv2/b", FF_WEIGHTS_DIGEST_ATTR), FF_OK);
    assert_string_equal(rec, ff_digest_hex(hex, ff_digest_f32(a.b[conv2], (size_t)m.layers[conv2].n_bias)));
    ff_h5_close(f);
    int checked = -1;
    assert_int_equal(ff_weights_load_h5_checked(&b, &checked, &m, path), FF_OK);
    assert_int_equal(checked, 8);  // conv1, conv2, fc1, fc2: w and b
    assert_memory_equal(a.data, b.data, (size_t)a.n_total * sizeof(float));

    // One flipped bit in fc1/w: refused, naming the tensor and both digests.
    char want[17], got[17];
    ff_digest_hex(want, ff_digest_f32(a.w[fc1], (size_t)m.layers[fc1].n_weight));
    uint32_t bits;
    memcpy(&bits, &a.w[fc1][4321], 4);
    bits ^= 1u;
    float flipped;
    memcpy(&flipped, &bits, 4);
    poke(path, "weights/fc1/w", 4321, flipped);
    a.w[fc1][4321] = flipped;
    ff_digest_hex(got, ff_digest_f32(a.w[fc1], (size_t)m.layers[fc1].n_weight));
    assert_int_equal(ff_weights_load_h5(&b, &m, path), FF_ERR_INTEGRITY);
    assert_non_null(strstr(ff_last_error(), "'weights/fc1/w'"));
    assert_non_null(strstr(ff_last_error(), want));
    assert_non_null(strstr(ff_last_error(), got));

    // Without the attribute (an older file, another tool's) the same data loads, unchecked.
    drop_attr(path, "weights/fc1/w");
    assert_int_equal(ff_weights_load_h5_checked(&b, &checked, &m, path), FF_OK);
    assert_int_equal(checked, 7);
    assert_memory_equal(b.w[fc1], a.w[fc1], (size_t)m.layers[fc1].n_weight * sizeof(float));

    // NaN and infinity are refused naming the tensor and the first bad index.
    poke(path, "weights/fc1/w", 77, NAN);
    poke(path, "weights/fc1/w", 900, INFINITY);
    assert_int_equal(ff_weights_load_h5(&b, &m, path), FF_ERR_INPUT);
    assert_non_null(strstr(ff_last_error(), "'weights/fc1/w' element [77] is NaN"));
    poke(path, "weights/fc1/w", 77, 0.5f);
    assert_int_equal(ff_weights_load_h5(&b, &m, path), FF_ERR_INPUT);
    assert_non_null(strstr(ff_last_error(), "'weights/fc1/w' element [900] is +Inf"));

    // A recorded digest that is not 16 hex digits is refused, not ignored.
    assert_int_equal(ff_weights_save_h5(&a, &m, path), FF_OK);
    hid_t h = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_int_equal(ff_h5_write_attr_str((int64_t)h, "weights/fc2/b", FF_WEIGHTS_DIGEST_ATTR, "xyz"), FF_OK);
    H5Fclose(h);
    assert_int_equal(ff_weights_load_h5(&b, &m, path), FF_ERR_INPUT);
    assert_non_null(strstr(ff_last_error(), "'weights/fc2/b' attribute fnv1a64 is 'xyz'"));
    ff_weights_free(&a);
    ff_weights_free(&b);
}

static int setup(void **state) {
    (void)state;
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(generator_is_reproducible_and_seeded), cmocka_unit_test(generator_matches_its_specification),
        cmocka_unit_test(h5_round_trip_is_bit_exact),           cmocka_unit_test(malformed_files_are_refused),
        cmocka_unit_test(digests_are_recorded_and_checked),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
