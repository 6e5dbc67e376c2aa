// FNV-1a-64 and ULP distance (docs/ARCHITECTURE.md §6.3, §6.4), including the edge cases the verifier relies on.
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "fivefold/digest.h"

static void fnv_reference_vectors(void **state) {
    (void)state;
    // Published FNV-1a-64 test vectors.
    assert_int_equal(ff_fnv1a64_update(FF_FNV_OFFSET, "", 0), 0xcbf29ce484222325ULL);
    assert_int_equal(ff_fnv1a64_update(FF_FNV_OFFSET, "a", 1), 0xaf63dc4c8601ec8cULL);
    assert_int_equal(ff_fnv1a64_update(FF_FNV_OFFSET, "foobar", 6), 0x85944171f73967e8ULL);
    // Chaining equals one pass.
    uint64_t h = ff_fnv1a64_update(FF_FNV_OFFSET, "foo", 3);
    assert_int_equal(ff_fnv1a64_update(h, "bar", 3), 0x85944171f73967e8ULL);
}

// ff_digest_f32_piece: each piece's own digest, and the chain equal to one digest of the whole.
static void pieces_and_chain_in_one_pass(void **state) {
    (void)state;
    float x[7] = {1.0f, -2.5f, 3.25f, 0.0f, -0.0f, 1e-30f, 7.0f};
    uint64_t chain = FF_FNV_OFFSET;
    assert_int_equal(ff_digest_f32_piece(&chain, x, 3), ff_digest_f32(x, 3));
    assert_int_equal(ff_digest_f32_piece(&chain, x + 3, 0), ff_digest_f32(x + 3, 0));  // empty: nothing changes
    assert_int_equal(ff_digest_f32_piece(&chain, x + 3, 4), ff_digest_f32(x + 3, 4));
    assert_int_equal(chain, ff_digest_f32(x, 7));
    // the chain is the running digest: continuing it equals ff_fnv1a64_update over the bytes
    uint64_t c2 = ff_fnv1a64_update(FF_FNV_OFFSET, x, 3 * sizeof(float));
    ff_digest_f32_piece(&c2, x + 3, 4);
    assert_int_equal(c2, chain);
}

static void digest_of_floats_is_over_le_bytes(void **state) {
    (void)state;
    float x[2] = {1.0f, -2.0f};  // 0x3f800000, 0xc0000000 -> bytes 00 00 80 3f 00 00 00 c0
    const unsigned char bytes[8] = {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0};
    assert_int_equal(ff_digest_f32(x, 2), ff_fnv1a64_update(FF_FNV_OFFSET, bytes, 8));
    char hex[17];
    assert_string_equal(ff_digest_hex(hex, 0xabcULL), "0000000000000abc");
    // One flipped bit anywhere changes the digest.
    float y[2] = {1.0f, -2.0f};
    uint32_t u;
    memcpy(&u, &y[1], 4);
    u ^= 1;
    memcpy(&y[1], &u, 4);
    assert_true(ff_digest_f32(x, 2) != ff_digest_f32(y, 2));
    // +0 and -0 are different bytes, so different digests (digests are bitwise, ULP is not).
    float pz = 0.0f, nz = -0.0f;
    assert_true(ff_digest_f32(&pz, 1) != ff_digest_f32(&nz, 1));
}

static void ulp_edge_cases(void **state) {
    (void)state;
    assert_int_equal(ff_ulp_distance(1.0f, 1.0f), 0);
    assert_int_equal(ff_ulp_distance(0.0f, -0.0f), 0);
    assert_int_equal(ff_ulp_distance(1.0f, nextafterf(1.0f, 2.0f)), 1);
    assert_int_equal(ff_ulp_distance(nextafterf(1.0f, 2.0f), 1.0f), 1);
    // Across zero: smallest denormals on each side are 2 apart (via +-0).
    float dmin = nextafterf(0.0f, 1.0f);
    assert_int_equal(ff_ulp_distance(dmin, -dmin), 2);
    assert_int_equal(ff_ulp_distance(dmin, 0.0f), 1);
    // Denormal to smallest normal: 2^23 steps.
    assert_int_equal(ff_ulp_distance(0.0f, FLT_MIN), 1u << 23);
    assert_int_equal(ff_ulp_distance(FLT_MAX, INFINITY), 1);
    assert_int_equal(ff_ulp_distance(-FLT_MAX, -INFINITY), 1);
    assert_int_equal(ff_ulp_distance(NAN, NAN), UINT64_MAX);
    assert_int_equal(ff_ulp_distance(1.0f, NAN), UINT64_MAX);
    assert_int_equal(ff_ulp_distance(-1.0f, 1.0f), 2 * (uint64_t)0x3f800000u);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fnv_reference_vectors),
        cmocka_unit_test(digest_of_floats_is_over_le_bytes),
        cmocka_unit_test(pieces_and_chain_in_one_pass),
        cmocka_unit_test(ulp_edge_cases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
